//! A converter as an app ships it: one folder with the LSTM language model (infer's artifact,
//! `manifest.json` + `model.safetensors`, 4-bit or int8 rows, or f32) and `lexicon.tsv.gz`, the
//! words outside the model's vocabulary.
//!
//! `lexicon.tsv.gz` (gzip, UTF-8): a first line `#lm-sha256<TAB>HEX` naming the weights it was
//! built with (a lexicon beside another model is refused), then `reading<TAB>display<TAB>count`:
//! the rarer training words with their training counts, then dictionary words with count 0.
//! The vocabulary's own `display/reading` words join the lexicon from the manifest.
//!
//! `unigram-shift.tsv.gz` (optional, [`crate::adapt`]): the unigram adaptation the converter
//! applies at load time, to the output bias and to the lexicon's words outside the vocabulary,
//! whose katakana words it also extends.

use std::io::{Read, Write};
use std::path::Path;

use fastsoftmax_infer::files::{sha256_hex, write_atomic};
use fastsoftmax_infer::model::artifact::{LmWeights, WEIGHTS_FILE};
use fastsoftmax_infer::{Error, LanguageModel, Result};

use crate::adapt::{adapt_lexicon, UnigramShift, SHIFT_FILE};
use crate::decode::Spelling;
use crate::lattice::{split_word, Lexicon};
use crate::mozc::{MozcDictionary, MozcWeights};

pub const LEXICON_FILE: &str = "lexicon.tsv.gz";
const HEADER: &str = "#lm-sha256";

/// A word outside the LM's vocabulary: `(reading, display, training count)`.
pub type Entry = (String, String, u64);

/// The lexicon over `vocab` (the LM's words; `<unk>` at `unk`) plus `extra`, and the spelling
/// model of the training words the LM reads as `<unk>` (the entries with a count).
pub fn lexicon_of(vocab: &[String], unk: u32, extra: &[Entry]) -> (Lexicon, Spelling) {
    let spelling = Spelling::estimate(
        unk,
        extra
            .iter()
            .filter(|e| e.2 > 0)
            .map(|(_, d, c)| (d.as_str(), *c)),
    );
    let lexicon = Lexicon::build(
        vocab,
        extra.iter().map(|(r, d, c)| (r.as_str(), d.as_str(), *c)),
        &spelling,
    );
    (lexicon, spelling)
}

/// The language model, its lexicon and spelling model.
pub struct ImeModel {
    pub lm: LanguageModel,
    pub lexicon: Lexicon,
    pub spelling: Spelling,
    /// The unigram adaptation applied to both, if any.
    pub shift: Option<UnigramShift>,
}

impl ImeModel {
    /// Checks that `lm` is an IME model (most words `display/reading`, `<unk>` present) and
    /// builds its lexicon with `extra`.
    pub fn new(lm: LanguageModel, extra: &[Entry]) -> Result<Self> {
        let words = lm.vocab().words();
        let readable = words.iter().filter(|w| split_word(w).is_some()).count();
        if readable * 2 < words.len() {
            return Err(Error::Invalid(format!(
                "only {readable} of the language model's {} words are `display/reading`: not an \
                 IME language model (train it on data/ja/train.txt)",
                words.len()
            )));
        }
        let unk = lm.vocab().get("<unk>").ok_or_else(|| {
            Error::Invalid("the language model has no <unk> word: re-export it".into())
        })?;
        let (lexicon, spelling) = lexicon_of(words, unk, extra);
        Ok(ImeModel {
            lm,
            lexicon,
            spelling,
            shift: None,
        })
    }

    /// As [`ImeModel::new`], with the model moved by `shift` when given: its output bias, the
    /// target's katakana words added to the lexicon, and the scores of the lexicon's words
    /// outside the vocabulary.
    pub fn adapted(
        weights: LmWeights,
        extra: &[Entry],
        shift: Option<UnigramShift>,
    ) -> Result<Self> {
        Self::assemble(weights, extra, shift, None)
    }

    /// As [`ImeModel::adapted`], with Mozc's dictionary in the lexicon when given (before the
    /// adaptation, which moves its words too).
    pub fn assemble(
        weights: LmWeights,
        extra: &[Entry],
        shift: Option<UnigramShift>,
        mozc: Option<(&MozcDictionary, MozcWeights)>,
    ) -> Result<Self> {
        let mut model = Self::new(shifted_lm(weights, shift.as_ref())?, extra)?;
        if let Some((dict, weights)) = mozc {
            model.lexicon.add_mozc(dict, &model.spelling, weights);
        }
        if let Some(s) = &shift {
            adapt_lexicon(&mut model.lexicon, &model.spelling, s);
        }
        model.shift = shift;
        Ok(model)
    }

    /// Loads a converter folder (see the module docs), with Mozc's dictionary when the folder
    /// has it, weighted as its `converter.json` says.
    pub fn load(dir: &Path) -> Result<Self> {
        Self::load_with(dir, crate::converter::ConverterConfig::read(dir)?.mozc)
    }

    /// As [`ImeModel::load`], with Mozc's dictionary weighted by `mozc` (`None`: without it).
    pub fn load_with(dir: &Path, mozc: Option<MozcWeights>) -> Result<Self> {
        let dict = match mozc {
            Some(_) => Some(MozcDictionary::read(dir)?),
            None => None,
        };
        let mozc = dict.as_ref().zip(mozc);
        Self::assemble(
            LmWeights::load(dir)?,
            &read_lexicon(dir)?,
            read_shift(dir)?,
            mozc,
        )
    }
}

/// The folder's unigram shift ([`SHIFT_FILE`]), `None` when it has none.
pub fn read_shift(dir: &Path) -> Result<Option<UnigramShift>> {
    let path = dir.join(SHIFT_FILE);
    if path.exists() {
        UnigramShift::read(&path).map(Some)
    } else {
        Ok(None)
    }
}

/// The folder's language model as its converter scores with it: its unigram shift, if any,
/// applied to the output bias.
pub fn load_lm(dir: &Path) -> Result<LanguageModel> {
    shifted_lm(LmWeights::load(dir)?, read_shift(dir)?.as_ref())
}

/// The language model of `weights`, its output bias moved by `shift` when given.
fn shifted_lm(mut weights: LmWeights, shift: Option<&UnigramShift>) -> Result<LanguageModel> {
    if let Some(s) = shift {
        s.shift_bias(weights.vocab.words(), &mut weights.output_bias);
    }
    LanguageModel::from_weights(weights)
}

/// The SHA-256 of the folder's weights file.
fn weights_digest(dir: &Path) -> Result<String> {
    let path = dir.join(WEIGHTS_FILE);
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    Ok(sha256_hex(&bytes))
}

/// Writes `dir/lexicon.tsv.gz` for the model already in `dir` (atomically).
pub fn write_lexicon(dir: &Path, extra: &[Entry]) -> Result<()> {
    let mut text = format!("{HEADER}\t{}\n", weights_digest(dir)?);
    for (reading, display, count) in extra {
        if [reading, display]
            .iter()
            .any(|s| s.is_empty() || s.contains(['\t', '\n']))
        {
            return Err(Error::Invalid(format!(
                "lexicon entry {reading:?} → {display:?}: readings and displays must be \
                 non-empty and hold no tab or newline"
            )));
        }
        text.push_str(&format!("{reading}\t{display}\t{count}\n"));
    }
    write_gz_text(&dir.join(LEXICON_FILE), &text)
}

/// Reads `dir/lexicon.tsv.gz`, refusing one built for other weights.
pub fn read_lexicon(dir: &Path) -> Result<Vec<Entry>> {
    let path = dir.join(LEXICON_FILE);
    let file = std::fs::File::open(&path).map_err(|e| {
        Error::io(
            &path,
            std::io::Error::new(
                e.kind(),
                format!("{e}; a converter folder holds the lexicon `fastsoftmax ime pack` writes"),
            ),
        )
    })?;
    let file = GzText::read(&path, file, HEADER, "HEX", "re-run `ime pack`")?;
    if file.value != weights_digest(dir)? {
        return Err(file.error(format!(
            "built for another language model than {} (its weights' SHA-256 differs)",
            dir.join(WEIGHTS_FILE).display()
        )));
    }
    let mut out = Vec::new();
    for (n, line) in file.lines() {
        let mut f = line.split('\t');
        let entry = match (
            f.next(),
            f.next(),
            f.next().map(str::parse::<u64>),
            f.next(),
        ) {
            (Some(r), Some(d), Some(Ok(c)), None) if !r.is_empty() && !d.is_empty() => {
                (r.to_string(), d.to_string(), c)
            }
            _ => {
                return Err(file.error(format!(
                    "line {n}: not `reading<TAB>display<TAB>count`: {line:?}"
                )))
            }
        };
        out.push(entry);
    }
    Ok(out)
}

/// Writes `text` gzip'd to `path`, atomically: the converter folder's text files.
pub(crate) fn write_gz_text(path: &Path, text: &str) -> Result<()> {
    write_gz(path, text.as_bytes())
}

/// Writes `bytes` gzip'd (best compression) to `path`, atomically: the converter folder's files.
pub(crate) fn write_gz(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(bytes)
        .and_then(|_| gz.finish())
        .map_err(|e| Error::io(path, e))
        .and_then(|bytes| write_atomic(path, &bytes))
}

/// A converter folder's gzip text file as [`write_gz_text`] wrote it: a first line
/// `KEY<TAB>value`, then the body.
pub(crate) struct GzText<'a> {
    path: &'a Path,
    /// How to make the file again, ending every error.
    fix: &'a str,
    pub(crate) value: String,
    body: String,
}

impl<'a> GzText<'a> {
    /// Reads `file` (opened from `path`); `value_name` names the value in the error for a
    /// wrong first line.
    pub(crate) fn read(
        path: &'a Path,
        file: std::fs::File,
        key: &str,
        value_name: &str,
        fix: &'a str,
    ) -> Result<Self> {
        let mut text = GzText {
            path,
            fix,
            value: String::new(),
            body: String::new(),
        };
        let mut all = String::new();
        flate2::read::GzDecoder::new(file)
            .read_to_string(&mut all)
            .map_err(|e| text.error(format!("not a gzip text file ({e})")))?;
        let (first, body) = all.split_once('\n').unwrap_or((&all, ""));
        text.value = first
            .strip_prefix(key)
            .and_then(|h| h.strip_prefix('\t'))
            .ok_or_else(|| text.error(format!("the first line is not `{key}<TAB>{value_name}`")))?
            .to_string();
        text.body = body.to_string();
        Ok(text)
    }

    /// An error about the file, with its fix.
    pub(crate) fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::format(self.path, format!("{message}; {}", self.fix))
    }

    /// The lines after the first, with their line numbers (from 2).
    pub(crate) fn lines(&self) -> impl Iterator<Item = (usize, &str)> {
        self.body.lines().enumerate().map(|(n, l)| (n + 2, l))
    }
}
