//! Word frequencies of contemporary Japanese, the target of the IME's unigram adaptation.
//!
//! Source: the Python package `wordfreq` 3.1.1 (a 57 MB wheel fetched with
//! `python3 -m pip download --no-deps`; none of its code runs; its data CC BY-SA 4.0, by Robyn
//! Speer). `wordfreq/data/large_ja.msgpack.gz` holds 214,960 Japanese words as MeCab-ipadic
//! tokenises them (ipadic is also what segments our Aozora text), merged from Wikipedia,
//! subtitles, news, web text and social media. It is gzip'd MessagePack: an array whose first
//! element is a header map (`format: "cB"`) and whose `i`-th further element lists the words of
//! frequency `10^(−i/100)` (i centibels). [`fetch`] writes them as `wordfreq.tsv`,
//! `word<TAB>centibels`, most frequent first.

use std::io::Read;
use std::path::{Path, PathBuf};

use fastsoftmax_infer::files::{sha256_hex, write_atomic};

use crate::{io_err, pip_download, Error, Result, TempDir};

const PACKAGE: &str = "wordfreq==3.1.1";
const WHEEL: &str = "wordfreq-3.1.1-py3-none-any.whl";
const LIST_IN_WHEEL: &str = "wordfreq/data/large_ja.msgpack.gz";
/// The file [`fetch`] writes.
pub const FILE: &str = "wordfreq.tsv";
/// SHA-256 of `wordfreq.tsv` as [`fetch`] writes it from the 3.1.1 wheel.
const TSV_SHA256: &str = "69eef206ae46fd6cc46992c3147865b00ab77e108de2e2ec21e58a1d97efeb1a";

/// Makes sure `dir/wordfreq.tsv` exists. `from` may be the wheel or a directory holding it
/// (offline machines); otherwise `python3 -m pip download` fetches the wheel into a
/// temporary directory inside `dir`.
pub fn fetch(dir: &Path, from: Option<&Path>) -> Result<PathBuf> {
    let out = dir.join(FILE);
    if out.is_file() {
        return Ok(out);
    }
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let tmp = TempDir::create(dir.join(format!(".wordfreq-download-{}", std::process::id())))?;
    let wheel = match from.map(|p| {
        if p.is_dir() {
            p.join(WHEEL)
        } else {
            p.to_path_buf()
        }
    }) {
        Some(w) if w.is_file() => w,
        _ => pip_download(&tmp.0, PACKAGE, WHEEL, "the Japanese word frequencies")?,
    };
    let tsv = tsv_of(&read_list(&wheel)?);
    let got = sha256_hex(tsv.as_bytes());
    if got != TSV_SHA256 {
        return Err(Error::Invalid(format!(
            "{}: the word list has SHA-256 {got}, expected {TSV_SHA256}; is this {WHEEL}? \
             Delete it and fetch again",
            wheel.display()
        )));
    }
    write_atomic(&out, tsv.as_bytes())?;
    Ok(out)
}

/// `word<TAB>centibels` lines, most frequent first.
fn tsv_of(buckets: &[Vec<String>]) -> String {
    let mut out = String::new();
    for (cb, words) in buckets.iter().enumerate() {
        for w in words {
            out.push_str(&format!("{w}\t{cb}\n"));
        }
    }
    out
}

/// The word buckets of the wheel's Japanese list (bucket `i`: the words at `i` centibels).
fn read_list(wheel: &Path) -> Result<Vec<Vec<String>>> {
    let corrupt = |e: String| {
        Error::Invalid(format!(
            "{}: not a readable {WHEEL} ({e}); delete it and fetch again",
            wheel.display()
        ))
    };
    let file = std::fs::File::open(wheel).map_err(io_err(wheel))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| corrupt(e.to_string()))?;
    let entry = zip
        .by_name(LIST_IN_WHEEL)
        .map_err(|e| corrupt(format!("{LIST_IN_WHEEL}: {e}")))?;
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(entry)
        .read_to_end(&mut bytes)
        .map_err(|e| corrupt(format!("{LIST_IN_WHEEL}: {e}")))?;
    parse_buckets(&bytes).map_err(|e| corrupt(format!("{LIST_IN_WHEEL}: {e}")))
}

/// Parses wordfreq's MessagePack list: `[{"format": "cB", …}, [word, …], [word, …], …]`.
pub fn parse_buckets(bytes: &[u8]) -> Result<Vec<Vec<String>>, String> {
    let mut r = MsgPack { bytes, at: 0 };
    let n = r.array()?;
    if n == 0 {
        return Err("an empty list".into());
    }
    let header = r.map()?;
    let mut format = None;
    for _ in 0..header {
        let key = r.string()?;
        if key == "format" {
            format = Some(r.string()?);
        } else {
            r.skip()?;
        }
    }
    if format.as_deref() != Some("cB") {
        return Err(format!("format {format:?}, expected \"cB\""));
    }
    (1..n)
        .map(|_| (0..r.array()?).map(|_| r.string()).collect())
        .collect()
}

/// The few MessagePack types the list uses: arrays, maps, strings and integers.
struct MsgPack<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl MsgPack<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("truncated at byte {}", self.at))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn uint(&mut self, n: usize) -> Result<usize, String> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0usize, |v, &b| (v << 8) | b as usize))
    }

    /// The length of an array (fixarray, array 16, array 32).
    fn array(&mut self) -> Result<usize, String> {
        self.container(0x90, 0xdc, "an array")
    }

    /// The number of pairs of a map (fixmap, map 16, map 32).
    fn map(&mut self) -> Result<usize, String> {
        self.container(0x80, 0xde, "a map")
    }

    /// A container's size: `fixed | n` for n < 16, else the tag `wide` (16-bit size) or
    /// `wide + 1` (32-bit).
    fn container(&mut self, fixed: u8, wide: u8, what: &str) -> Result<usize, String> {
        match self.byte()? {
            b if b & 0xf0 == fixed => Ok((b & 0x0f) as usize),
            b if b == wide => self.uint(2),
            b if b == wide + 1 => self.uint(4),
            b => Err(format!("byte {}: 0x{b:02x} is not {what}", self.at - 1)),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let n = match self.byte()? {
            b @ 0xa0..=0xbf => (b & 0x1f) as usize,
            0xd9 => self.uint(1)?,
            0xda => self.uint(2)?,
            0xdb => self.uint(4)?,
            b => return Err(format!("byte {}: 0x{b:02x} is not a string", self.at - 1)),
        };
        let at = self.at;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| format!("byte {at}: not UTF-8"))
    }

    /// Skips one value of the types above.
    fn skip(&mut self) -> Result<(), String> {
        match self.bytes.get(self.at).copied() {
            Some(0x00..=0x7f | 0xe0..=0xff) => self.take(1).map(drop),
            Some(0xcc | 0xd0) => self.take(2).map(drop),
            Some(0xcd | 0xd1) => self.take(3).map(drop),
            Some(0xce | 0xd2) => self.take(5).map(drop),
            Some(0x80..=0x8f | 0xde | 0xdf) => {
                for _ in 0..self.map()? * 2 {
                    self.skip()?;
                }
                Ok(())
            }
            Some(0x90..=0x9f | 0xdc | 0xdd) => {
                for _ in 0..self.array()? {
                    self.skip()?;
                }
                Ok(())
            }
            _ => self.string().map(drop),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[{"format": "cB", "version": 1}, [], ["の", "に"], ["猫"]]` by hand.
    fn list() -> Vec<u8> {
        let mut b = vec![0x94, 0x82];
        b.push(0xa6);
        b.extend_from_slice(b"format");
        b.push(0xa2);
        b.extend_from_slice(b"cB");
        b.push(0xa7);
        b.extend_from_slice(b"version");
        b.push(0x01);
        b.push(0x90);
        b.push(0x92);
        for w in ["の", "に"] {
            b.push(0xa0 | w.len() as u8);
            b.extend_from_slice(w.as_bytes());
        }
        b.extend_from_slice(&[0xdc, 0x00, 0x01, 0xd9, "猫".len() as u8]);
        b.extend_from_slice("猫".as_bytes());
        b
    }

    #[test]
    fn buckets_become_centibel_lines() {
        let buckets = parse_buckets(&list()).unwrap();
        assert_eq!(tsv_of(&buckets), "の\t1\nに\t1\n猫\t2\n");
    }

    /// A wheel holding [`list`] where the real one holds its Japanese list.
    fn wheel(dir: &Path) -> PathBuf {
        use std::io::Write;
        let path = dir.join(WHEEL);
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        zip.start_file(LIST_IN_WHEEL, zip::write::FileOptions::default())
            .unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&list()).unwrap();
        zip.write_all(&gz.finish().unwrap()).unwrap();
        zip.finish().unwrap();
        path
    }

    #[test]
    fn the_list_is_read_from_the_wheel_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = wheel(dir.path());
        assert_eq!(read_list(&path).unwrap()[1], ["の", "に"]);
        // The fixture is not the real list: fetch names the checksum and writes nothing.
        let out = dir.path().join("ja");
        let err = fetch(&out, Some(dir.path())).unwrap_err().to_string();
        assert!(err.contains("SHA-256") && err.contains(WHEEL), "{err}");
        assert!(!out.join(FILE).exists());
        std::fs::write(&path, b"not a zip").unwrap();
        let err = fetch(&out, Some(&path)).unwrap_err().to_string();
        assert!(err.contains("not a readable"), "{err}");
    }

    #[test]
    fn corrupt_lists_are_errors() {
        let bytes = list();
        assert!(parse_buckets(&bytes[..bytes.len() - 1])
            .unwrap_err()
            .contains("truncated"));
        let mut wrong = bytes.clone();
        wrong[10] = b'x'; // "cB" → "xB"
        assert!(parse_buckets(&wrong).unwrap_err().contains("format"));
        assert!(parse_buckets(&[0xc0]).unwrap_err().contains("not an array"));
    }
}
