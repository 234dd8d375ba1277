//! Japanese text for the IME: KWDLC (web text with hand-corrected readings) and Aozora Bunko
//! literature, segmented into short-unit words with readings by mecab-ipadic through `vibrato`.
//!
//! A word is `display/reading`, the reading in the hiragana a person types (ipadic's katakana
//! readings converted; the particle は stays は). `prepare` writes into `data/ja/`:
//!
//! - `train.txt`, `valid.txt`, `test.txt`: one sentence per line, words separated by spaces
//!   (train = Aozora + KWDLC train minus its last 1,000 sentences, valid = those 1,000, test =
//!   the KWDLC test split, for perplexity only);
//! - `kwdlc-train.txt`: the KWDLC part of `train.txt`, the in-domain text for adapting the
//!   language models to the evaluation's web text;
//! - `words.tsv`: every training word with its count, most frequent first;
//! - `ipadic.tsv`: `reading<TAB>display` of every ipadic entry (the lattice's words outside the
//!   LM's vocabulary);
//! - `eval.tsv`: the 1,850-sentence conversion set, `reading<TAB>display`;
//! - `dev.tsv`: the same from `valid.txt` (its sentences whose reading a person types as kana,
//!   the eval set's rule): for choosing between models and settings without the test split;
//! - `stats.json`: sentences, tokens, how KWDLC was segmented.
//!
//! KWDLC sentences are segmented by ipadic too when ipadic's readings spell the hand-corrected
//! reading exactly; otherwise KWDLC's own (JUMAN) units are kept, so no reading is wrong.
//!
//! The Tanaka corpus (everyday contemporary sentences from Tatoeba) is prepared beside these, by
//! [`crate::tanaka::prepare`], with the same segmentation: `tanaka-train.txt`, `tanaka-valid.txt`,
//! `tanaka-dev.tsv` and `tanaka-stats.json`. It is not part of `train.txt`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::Error;

type Result<T> = std::result::Result<T, Error>;

/// Files read from the shared copy (`--from`).
pub const SOURCES: [&str; 4] = [
    "kwdlc-train.tsv",
    "kwdlc-test.tsv",
    "kwdlc-test-eval.tsv",
    "aozora-modern.txt.xz",
];

/// KWDLC train sentences held out for validation (the last ones).
pub const VALID_SENTENCES: usize = 1000;

/// Maps an I/O error on `path` to the data layer's error.
pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Katakana → hiragana (ー and everything else unchanged).
pub fn hiragana(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'ァ'..='ヶ' => char::from_u32(c as u32 - 0x60).unwrap_or(c),
            _ => c,
        })
        .collect()
}

/// Whether `s` is all kana (either script, ー included): such a word reads as it is written.
pub fn is_kana(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| matches!(c, 'ぁ'..='ゖ' | 'ァ'..='ヺ' | 'ー' | 'ゝ' | 'ゞ' | 'ヽ' | 'ヾ'))
}

/// `reading<TAB>display` of the tokenized sentences (`display/reading` words) whose reading
/// holds no digit, Latin letter or kanji, and whose display no digit or Latin letter: what a
/// person types as kana, as in the eval set (KWDLC's readings keep digits and letters as
/// written, so the eval set has none in its displays; ipadic reads digits one by one, ３０ as
/// さんぜろ, so a display with digits would hold a reading no one types).
pub fn conversion_set(sentences: &[String]) -> Vec<String> {
    let typeable = |c: char| {
        !(c.is_ascii_alphanumeric()
            || matches!(c, '０'..='９' | 'Ａ'..='Ｚ' | 'ａ'..='ｚ' | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}'))
    };
    sentences
        .iter()
        .filter_map(|line| {
            let (mut reading, mut display) = (String::new(), String::new());
            for w in line.split(' ') {
                let (d, r) = w.rsplit_once('/')?;
                display.push_str(d);
                reading.push_str(r);
            }
            let letters = |c: char| {
                c.is_ascii_alphanumeric() || matches!(c, '０'..='９' | 'Ａ'..='Ｚ' | 'ａ'..='ｚ')
            };
            (!reading.is_empty() && reading.chars().all(typeable) && !display.chars().any(letters))
                .then(|| format!("{reading}\t{display}"))
        })
        .collect()
}

/// One word: what is shown and what is typed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Token {
    pub display: String,
    pub reading: String,
}

impl Token {
    /// The LM's word: `display/reading`, with `/` and spaces in either made full-width so the
    /// word splits back unambiguously at its last `/`.
    pub fn word(&self) -> String {
        let clean = |s: &str| s.replace('/', "／").replace(char::is_whitespace, "　");
        format!("{}/{}", clean(&self.display), clean(&self.reading))
    }
}

/// A KWDLC line `display<TAB>reading<TAB>surface/reading/POS …`.
pub fn parse_kwdlc(line: &str) -> Option<(String, String, Vec<Token>)> {
    let mut cols = line.split('\t');
    let (display, reading, tokens) = (cols.next()?, cols.next()?, cols.next()?);
    let tokens = tokens
        .split(' ')
        .filter(|t| !t.is_empty())
        .map(|t| {
            // Split from the right: the surface itself may hold a `/`.
            let mut parts = t.rsplitn(3, '/');
            let (_pos, reading, surface) = (parts.next()?, parts.next()?, parts.next()?);
            Some(Token {
                display: surface.to_string(),
                reading: reading.to_string(),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some((display.to_string(), reading.to_string(), tokens))
}

/// mecab-ipadic as Debian ships it (EUC-JP CSV files, `matrix.def`, `char.def`, `unk.def`).
pub struct Ipadic {
    pub dir: PathBuf,
}

impl Ipadic {
    /// The dictionary under `root`, where `dpkg -x` put it.
    pub fn at(root: &Path) -> Result<Self> {
        let dir = root.join("usr/share/mecab/dic/ipadic");
        if !dir.join("matrix.def").is_file() {
            return Err(Error::Invalid(format!(
                "{} has no mecab-ipadic (matrix.def): run `apt-get download mecab-ipadic` and \
                 `dpkg -x mecab-ipadic_*.deb {}`, or let `data fetch ja` do it",
                dir.display(),
                root.display()
            )));
        }
        Ok(Ipadic { dir })
    }

    /// Downloads the Debian package into `root` unless it is there (needs `apt-get` and `dpkg`).
    pub fn fetch(root: &Path) -> Result<Self> {
        if let Ok(found) = Self::at(root) {
            return Ok(found);
        }
        std::fs::create_dir_all(root).map_err(io(root))?;
        let run = |cmd: &mut std::process::Command, what: &str| -> Result<()> {
            let status = cmd.status().map_err(|e| {
                Error::Invalid(format!("{what}: {e} (is this a Debian-based system?)"))
            })?;
            if !status.success() {
                return Err(Error::Invalid(format!("{what} failed ({status})")));
            }
            Ok(())
        };
        run(
            std::process::Command::new("apt-get")
                .args(["download", "mecab-ipadic"])
                .current_dir(root),
            "apt-get download mecab-ipadic",
        )?;
        let deb = std::fs::read_dir(root)
            .map_err(io(root))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .ok_or_else(|| Error::Invalid("apt-get left no .deb file".into()))?;
        run(
            std::process::Command::new("dpkg")
                .arg("-x")
                .arg(&deb)
                .arg(root),
            "dpkg -x",
        )?;
        Self::at(root)
    }

    fn read_euc_jp(&self, name: &str) -> Result<String> {
        let path = self.dir.join(name);
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        let (text, _, bad) = encoding_rs::EUC_JP.decode(&bytes);
        if bad {
            return Err(Error::Invalid(format!(
                "{}: not EUC-JP text",
                path.display()
            )));
        }
        Ok(text.into_owned())
    }

    /// Every lexicon line (all `*.csv`, decoded), sorted by file name for a stable order.
    pub fn lexicon_csv(&self) -> Result<String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map_err(io(&self.dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "csv"))
            .collect();
        files.sort();
        let mut all = String::new();
        for f in files {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            all.push_str(&self.read_euc_jp(name)?);
            if !all.ends_with('\n') {
                all.push('\n');
            }
        }
        Ok(all)
    }

    /// `(reading, display)` of every entry, readings in hiragana.
    pub fn entries(&self) -> Result<Vec<(String, String)>> {
        Ok(self
            .lexicon_csv()?
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f.len() >= 12 && f[11] != "*").then(|| (hiragana(f[11]), f[0].to_string()))
            })
            .collect())
    }

    /// The analyzer (builds vibrato's dictionary from the source files: a few seconds).
    pub fn tokenizer(&self) -> Result<vibrato::Tokenizer> {
        let lex = self.lexicon_csv()?;
        let matrix = std::fs::read(self.dir.join("matrix.def")).map_err(io(&self.dir))?;
        let chars = self.read_euc_jp("char.def")?;
        let unk = self.read_euc_jp("unk.def")?;
        let dict = vibrato::SystemDictionaryBuilder::from_readers(
            lex.as_bytes(),
            &matrix[..],
            chars.as_bytes(),
            unk.as_bytes(),
        )
        .map_err(|e| Error::Invalid(format!("building the ipadic dictionary: {e}")))?;
        Ok(vibrato::Tokenizer::new(dict))
    }
}

/// Segments one sentence (whitespace removed) into words with hiragana readings. A word ipadic
/// does not know gets its surface as reading when that is kana, else `None`: such words have
/// no reading and enter the training text as `<unk>`.
pub fn segment(
    worker: &mut vibrato::tokenizer::worker::Worker,
    sentence: &str,
) -> Vec<Option<Token>> {
    let text: String = sentence.chars().filter(|c| !c.is_whitespace()).collect();
    worker.reset_sentence(&text);
    worker.tokenize();
    (0..worker.num_tokens())
        .map(|i| {
            let t = worker.token(i);
            let surface = t.surface();
            let reading = t.feature().split(',').nth(7).filter(|r| *r != "*");
            let reading = match reading {
                Some(r) => hiragana(r),
                None if is_kana(surface) => hiragana(surface),
                None => return None,
            };
            Some(Token {
                display: surface.to_string(),
                reading,
            })
        })
        .collect()
}

/// A sentence as the LM's words (`<unk>` for a word with no reading).
pub(crate) fn line_of(tokens: &[Option<Token>]) -> String {
    tokens
        .iter()
        .map(|t| {
            t.as_ref()
                .map_or_else(|| crate::UNK.to_string(), Token::word)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What [`prepare`] did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Stats {
    pub train_sentences: usize,
    pub train_tokens: usize,
    pub aozora_sentences: usize,
    /// Aozora words ipadic could not read (written as `<unk>`).
    pub aozora_unreadable: usize,
    pub kwdlc_train_sentences: usize,
    pub valid_sentences: usize,
    pub test_sentences: usize,
    /// KWDLC sentences (train, valid and test) whose ipadic readings spell the gold reading, and
    /// so use ipadic's units; the others keep KWDLC's own.
    pub kwdlc_ipadic_units: usize,
    pub kwdlc_own_units: usize,
    pub distinct_words: usize,
    pub ipadic_entries: usize,
    pub eval_sentences: usize,
    /// Sentences of `dev.tsv`.
    #[serde(default)]
    pub dev_sentences: usize,
}

/// Writes `lines` to `path` atomically (a `.tmp` file, then a rename).
pub(crate) fn write_lines<'a>(
    path: &Path,
    lines: impl IntoIterator<Item = &'a String>,
) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut w = BufWriter::new(std::fs::File::create(&tmp).map_err(io(&tmp))?);
    for l in lines {
        writeln!(w, "{l}").map_err(io(&tmp))?;
    }
    w.flush().map_err(io(&tmp))?;
    drop(w);
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// KWDLC sentences as LM lines: ipadic's units where its readings spell the gold reading.
fn kwdlc_lines(
    path: &Path,
    worker: &mut vibrato::tokenizer::worker::Worker,
    stats: &mut Stats,
) -> Result<Vec<String>> {
    let file = std::fs::File::open(path).map_err(io(path))?;
    let mut out = Vec::new();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io(path))?;
        let (display, reading, own) = parse_kwdlc(&line).ok_or_else(|| {
            Error::Invalid(format!(
                "{}:{}: not `display<TAB>reading<TAB>surface/reading/POS …`",
                path.display(),
                n + 1
            ))
        })?;
        let ipadic = segment(worker, &display);
        let spelled: Option<String> = ipadic
            .iter()
            .map(|t| t.as_ref().map(|t| t.reading.as_str()))
            .collect();
        let gold: String = reading.chars().filter(|c| !c.is_whitespace()).collect();
        if spelled.as_deref() == Some(gold.as_str()) {
            stats.kwdlc_ipadic_units += 1;
            out.push(line_of(&ipadic));
        } else {
            stats.kwdlc_own_units += 1;
            out.push(line_of(&own.into_iter().map(Some).collect::<Vec<_>>()));
        }
    }
    Ok(out)
}

/// Prepares `out` (usually `data/ja`) from the four source files in `from`; `ipadic_root` holds
/// (or receives) the Debian package. `progress(done, total)` is called as Aozora is segmented.
pub fn prepare(
    from: &Path,
    out: &Path,
    ipadic_root: &Path,
    mut progress: impl FnMut(usize, usize),
) -> Result<Stats> {
    for f in SOURCES {
        if !from.join(f).is_file() {
            return Err(Error::Invalid(format!(
                "{} is missing: --from must hold {}",
                from.join(f).display(),
                SOURCES.join(", ")
            )));
        }
    }
    std::fs::create_dir_all(out).map_err(io(out))?;
    let ipadic = Ipadic::fetch(ipadic_root)?;
    let tokenizer = ipadic.tokenizer()?;
    let mut worker = tokenizer.new_worker();
    let mut stats = Stats::default();

    // KWDLC: train minus the held-out tail; the test split for perplexity only.
    let mut kwdlc = kwdlc_lines(&from.join("kwdlc-train.tsv"), &mut worker, &mut stats)?;
    let valid = kwdlc.split_off(kwdlc.len().saturating_sub(VALID_SENTENCES));
    let test = kwdlc_lines(&from.join("kwdlc-test.tsv"), &mut worker, &mut stats)?;
    stats.kwdlc_train_sentences = kwdlc.len();
    stats.valid_sentences = valid.len();
    stats.test_sentences = test.len();

    // Aozora, segmented here.
    let xz = from.join("aozora-modern.txt.xz");
    let mut compressed = BufReader::new(std::fs::File::open(&xz).map_err(io(&xz))?);
    let mut raw = Vec::new();
    lzma_rs::xz_decompress(&mut compressed, &mut raw)
        .map_err(|e| Error::Invalid(format!("{}: not an xz file ({e})", xz.display())))?;
    let mut text = String::new();
    (&raw[..]).read_to_string(&mut text).map_err(io(&xz))?;
    drop(raw);
    let sentences: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut train = Vec::with_capacity(sentences.len() + kwdlc.len());
    for (i, s) in sentences.iter().enumerate() {
        let tokens = segment(&mut worker, s);
        stats.aozora_unreadable += tokens.iter().filter(|t| t.is_none()).count();
        train.push(line_of(&tokens));
        if i % 10_000 == 0 {
            progress(i, sentences.len());
        }
    }
    progress(sentences.len(), sentences.len());
    stats.aozora_sentences = sentences.len();
    train.extend(kwdlc.iter().cloned());

    // Word counts of the training text.
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for l in &train {
        for w in l.split(' ') {
            *counts.entry(w).or_default() += 1;
            stats.train_tokens += 1;
        }
    }
    let mut words: Vec<(&str, usize)> = counts.into_iter().collect();
    words.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    stats.distinct_words = words.len();
    stats.train_sentences = train.len();
    let words_tsv: Vec<String> = words.iter().map(|(w, c)| format!("{w}\t{c}")).collect();

    let mut entries = ipadic.entries()?;
    entries.sort();
    entries.dedup();
    stats.ipadic_entries = entries.len();
    let ipadic_tsv: Vec<String> = entries.iter().map(|(r, d)| format!("{r}\t{d}")).collect();

    let eval_src = from.join("kwdlc-test-eval.tsv");
    let eval = std::fs::read_to_string(&eval_src).map_err(io(&eval_src))?;
    let eval: Vec<String> = eval.lines().map(str::to_string).collect();
    stats.eval_sentences = eval.len();
    let dev = conversion_set(&valid);
    stats.dev_sentences = dev.len();

    write_lines(&out.join("words.tsv"), &words_tsv)?;
    write_lines(&out.join("ipadic.tsv"), &ipadic_tsv)?;
    write_lines(&out.join("eval.tsv"), &eval)?;
    write_lines(&out.join("dev.tsv"), &dev)?;
    write_lines(&out.join("valid.txt"), &valid)?;
    write_lines(&out.join("test.txt"), &test)?;
    write_lines(&out.join("train.txt"), &train)?;
    write_lines(&out.join("kwdlc-train.txt"), &kwdlc)?;
    // Last, so its presence means the folder is complete.
    let json = serde_json::to_string_pretty(&stats).unwrap_or_default();
    write_lines(&out.join("stats.json"), [&json])?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conversion_set_keeps_sentences_typed_as_kana() {
        let lines = [
            "今日/きょう は/は 晴れ/はれ 。/。",
            "１９７０/せんきゅうひゃくななじゅう 年/ねん",
            "ＰＣ/ぴーしー を/を 使う/つかう",
            "Ｐ/Ｐ 社/しゃ",
            "bad-token",
        ]
        .map(String::from);
        assert_eq!(conversion_set(&lines), ["きょうははれ。\t今日は晴れ。"]);
    }

    #[test]
    fn katakana_becomes_hiragana() {
        assert_eq!(hiragana("キョウハイイテンキ"), "きょうはいいてんき");
        assert_eq!(hiragana("コーヒー、ヴァ"), "こーひー、ゔぁ");
        assert_eq!(hiragana("漢字abc"), "漢字abc");
        assert!(is_kana("コーヒー") && is_kana("ひらがな") && !is_kana("漢") && !is_kana(""));
    }

    #[test]
    fn kwdlc_lines_parse_with_slashes_in_surfaces() {
        let (d, r, t) =
            parse_kwdlc("a/bは\tえーびーは\ta/b/えーびー/名詞-* は/は/助詞-副助詞").unwrap();
        assert_eq!((d.as_str(), r.as_str()), ("a/bは", "えーびーは"));
        assert_eq!(
            t[0],
            Token {
                display: "a/b".into(),
                reading: "えーびー".into()
            }
        );
        assert_eq!(t[0].word(), "a／b/えーびー");
        assert_eq!(t[1].word(), "は/は");
        assert!(parse_kwdlc("only one column").is_none());
        assert!(parse_kwdlc("x\ty\tnoslash").is_none());
    }
}
