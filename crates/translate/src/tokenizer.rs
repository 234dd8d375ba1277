//! How a translator cuts source text into tokens: words ([`crate::text::tokenize`], for
//! languages printed with spaces) or subwords (byte-pair encoding learnt from the training
//! source, for Japanese, which has no spaces to cut at).
//!
//! Subwords are the `tokenizers` crate's BPE behind NFKC normalisation (half-width katakana and
//! full-width Latin letters and digits read as their usual forms), pre-split at whitespace,
//! punctuation and digit runs so no piece crosses them. Training is deterministic (its merges
//! break count ties by symbol id, and the alphabet is sorted), so the same text and size give
//! the same tokenizer. The trained tokenizer is a JSON file beside the translator
//! ([`SUBWORDS_FILE`]).
//!
//! A token is the normalised text of its piece; a character the BPE never saw comes out as
//! its own text (the vocabulary then maps it to `<unk>`, and the beam's `<unk>` replacement can
//! copy it through).

use std::path::Path;

use fastsoftmax_infer::files::write_atomic;
use fastsoftmax_infer::{Error, Result};
use serde::{Deserialize, Serialize};
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::normalizers::unicode::NFKC;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::punctuation::Punctuation;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::whitespace::WhitespaceSplit;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, Normalizer, TokenizerBuilder};

/// The subword tokenizer's file in a translator's folder.
pub const SUBWORDS_FILE: &str = "src.subwords.json";
/// What an unknown character reads as inside the BPE (never a token we hand out).
const UNK: &str = "<unk>";

/// Which tokens a translator reads (`train.src_tokens` in a translator config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum TokenKind {
    /// Words and punctuation ([`crate::text::tokenize`]).
    #[default]
    Words,
    /// Byte-pair-encoded subwords with a vocabulary of `size` pieces, learnt from the
    /// training source.
    Subwords { size: usize },
}

/// A source tokenizer (see the module docs).
#[derive(Clone)]
pub enum Tokenizer {
    Words,
    Subwords(Box<tokenizers::Tokenizer>),
}

/// Two tokenizers are equal when they cut every text alike: the same kind and, for subwords,
/// the same saved form.
impl PartialEq for Tokenizer {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind() && self.to_json() == other.to_json()
    }
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tokenizer::Words => f.write_str("Tokenizer::Words"),
            Tokenizer::Subwords(t) => {
                write!(f, "Tokenizer::Subwords({} pieces)", t.get_vocab_size(false))
            }
        }
    }
}

fn bpe_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("{what}: {e}"))
}

/// NFKC, then pieces cut at whitespace, punctuation and digit runs.
fn pipeline() -> TokenizerBuilder<
    BPE,
    NFKC,
    Sequence,
    tokenizers::PostProcessorWrapper,
    tokenizers::DecoderWrapper,
> {
    let split = Sequence::new(vec![
        PreTokenizerWrapper::WhitespaceSplit(WhitespaceSplit),
        PreTokenizerWrapper::Punctuation(Punctuation::default()),
        PreTokenizerWrapper::Digits(Digits::new(false)),
    ]);
    TokenizerBuilder::new()
        .with_normalizer(Some(NFKC))
        .with_pre_tokenizer(Some(split))
}

impl Tokenizer {
    /// The tokenizer of `kind`, learnt from `lines` when it is subwords.
    pub fn train(kind: TokenKind, lines: &[String]) -> Result<Tokenizer> {
        let size = match kind {
            TokenKind::Words => return Ok(Tokenizer::Words),
            TokenKind::Subwords { size } => size,
        };
        if size < 2 {
            return Err(Error::Invalid(format!(
                "train.src_tokens subwords size ({size}) must be at least 2"
            )));
        }
        let model = BPE::builder()
            .unk_token(UNK.into())
            .build()
            .map_err(|e| bpe_error("building the BPE", e))?;
        let mut trainer = BpeTrainerBuilder::new()
            .vocab_size(size)
            .min_frequency(2)
            .show_progress(false)
            .special_tokens(vec![AddedToken::from(UNK, true)])
            .build();
        let mut tokenizer = pipeline()
            .with_model(model)
            .build()
            .map_err(|e| bpe_error("building the tokenizer", e))?;
        tokenizer
            .train(&mut trainer, lines.iter())
            .map_err(|e| bpe_error("learning the subwords", e))?;
        Ok(Tokenizer::Subwords(Box::new(tokenizer.into())))
    }

    /// The tokenizer a translator in `dir` reads: words, or `dir/`[`SUBWORDS_FILE`].
    pub fn load(kind: TokenKind, dir: &Path) -> Result<Tokenizer> {
        if kind == TokenKind::Words {
            return Ok(Tokenizer::Words);
        }
        let path = dir.join(SUBWORDS_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            Error::Invalid(format!(
                "{}: {e}; a subword translator needs its tokenizer beside it (restore the file or train the translator again)",
                path.display()
            ))
        })?;
        Self::from_json(&text).map_err(|e| {
            Error::Invalid(format!("{}: not a subword tokenizer ({e})", path.display()))
        })
    }

    /// The subword tokenizer of its JSON text.
    pub fn from_json(text: &str) -> std::result::Result<Tokenizer, String> {
        let t: tokenizers::Tokenizer = text.parse().map_err(|e| format!("{e}"))?;
        Ok(Tokenizer::Subwords(Box::new(t)))
    }

    /// Its JSON text (subwords only; words have no file).
    pub fn to_json(&self) -> Option<String> {
        match self {
            Tokenizer::Words => None,
            Tokenizer::Subwords(t) => t.to_string(false).ok(),
        }
    }

    /// Writes `dir/`[`SUBWORDS_FILE`] (atomically) when this is a subword tokenizer.
    pub fn save(&self, dir: &Path) -> Result<()> {
        match self.to_json() {
            Some(json) => write_atomic(&dir.join(SUBWORDS_FILE), json.as_bytes()),
            None => Ok(()),
        }
    }

    pub fn kind(&self) -> TokenKind {
        match self {
            Tokenizer::Words => TokenKind::Words,
            Tokenizer::Subwords(t) => TokenKind::Subwords {
                size: t.get_vocab_size(false),
            },
        }
    }

    /// `line` as this tokenizer reads it: NFKC-normalised for subwords, unchanged for words.
    pub fn normalize<'a>(&self, line: &'a str) -> std::borrow::Cow<'a, str> {
        if let Tokenizer::Subwords(_) = self {
            let mut normalized = tokenizers::NormalizedString::from(line);
            if NFKC.normalize(&mut normalized).is_ok() {
                return normalized.get().to_string().into();
            }
        }
        line.into()
    }

    /// Whether a piece spells `c` (else `c` is `<unk>` to the network); every character is a
    /// word character to the word tokenizer.
    pub fn knows_char(&self, c: char) -> bool {
        match self {
            Tokenizer::Words => true,
            Tokenizer::Subwords(t) => t.token_to_id(c.encode_utf8(&mut [0; 4])).is_some(),
        }
    }

    /// The tokens of `line` (see the module docs).
    pub fn tokenize(&self, line: &str) -> Vec<String> {
        // Normalised first, so that an unknown character's text is the normalised one too
        // (NFKC is idempotent: the tokenizer's own pass changes nothing more).
        self.tokenize_normalized(&self.normalize(line))
    }

    /// The tokens of `line` once [`Tokenizer::normalize`]d (one NFKC pass fewer).
    pub fn tokenize_normalized(&self, line: &str) -> Vec<String> {
        let Tokenizer::Subwords(t) = self else {
            return crate::text::tokenize(line);
        };
        let Ok(enc) = t.encode(line, false) else {
            // The BPE refuses nothing we feed it; fall back to characters rather than lose text.
            return line
                .chars()
                .filter(|c| !c.is_whitespace())
                .map(String::from)
                .collect();
        };
        enc.get_tokens()
            .iter()
            .zip(enc.get_offsets())
            .map(|(tok, &(a, b))| {
                if tok == UNK {
                    line.get(a..b).unwrap_or(UNK).to_string()
                } else {
                    tok.clone()
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<String> {
        let base = [
            "私は学生です。",
            "彼は先生です。",
            "私は東京に住んでいます。",
            "彼女は大阪に住んでいます。",
            "これは本です。",
            "あれは車です。",
            "１２時に会いましょう。",
        ];
        (0..20)
            .flat_map(|_| base.iter().map(|s| s.to_string()))
            .collect()
    }

    #[test]
    fn words_are_the_word_tokenizer() {
        let t = Tokenizer::train(TokenKind::Words, &[]).unwrap();
        assert_eq!(t.tokenize("Hello, world!"), ["Hello", ",", "world", "!"]);
        assert_eq!(t.kind(), TokenKind::Words);
        assert!(t.to_json().is_none());
    }

    #[test]
    fn subwords_learn_pieces_round_trip_and_are_deterministic() {
        let lines = corpus();
        let kind = TokenKind::Subwords { size: 60 };
        let a = Tokenizer::train(kind, &lines).unwrap();
        let b = Tokenizer::train(kind, &lines).unwrap();
        assert_eq!(
            a.to_json(),
            b.to_json(),
            "the same text gives the same tokenizer"
        );
        let toks = a.tokenize("私は学生です。");
        assert!(toks.len() < "私は学生です。".chars().count(), "{toks:?}");
        assert_eq!(toks.concat(), "私は学生です。");
        assert_eq!(toks.last().unwrap(), "。", "punctuation is its own piece");
        // NFKC: half-width katakana and full-width digits read as the usual forms; digits
        // never join letters.
        let t = a.tokenize("ｶﾀｶﾅ12時");
        assert_eq!(t.concat(), "カタカナ12時");
        assert!(t.contains(&"12".to_string()), "{t:?}");
        // A character never seen comes out as its own text, and nothing is lost.
        assert_eq!(a.tokenize("猫😀"), ["猫", "😀"]);
        assert!(a.knows_char('私') && !a.knows_char('猫') && !a.knows_char('😀'));
        assert!(a.tokenize("").is_empty());
        assert!(a.tokenize("   ").is_empty());
        // Saved and loaded: the same pieces.
        let dir = tempfile::tempdir().unwrap();
        a.save(dir.path()).unwrap();
        let c = Tokenizer::load(kind, dir.path()).unwrap();
        assert_eq!(
            c.tokenize("彼女は東京に住んでいます。"),
            a.tokenize("彼女は東京に住んでいます。")
        );
    }

    #[test]
    fn a_missing_or_corrupt_tokenizer_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let kind = TokenKind::Subwords { size: 100 };
        let err = Tokenizer::load(kind, dir.path()).unwrap_err().to_string();
        assert!(err.contains(SUBWORDS_FILE), "{err}");
        std::fs::write(dir.path().join(SUBWORDS_FILE), "{not json").unwrap();
        let err = Tokenizer::load(kind, dir.path()).unwrap_err().to_string();
        assert!(err.contains("not a subword tokenizer"), "{err}");
        assert!(Tokenizer::train(TokenKind::Subwords { size: 1 }, &corpus()).is_err());
    }
}
