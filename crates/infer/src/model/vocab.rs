//! Word ↔ id mapping shared by training and the engine.

use std::collections::HashMap;

use crate::error::{Error, Result};

/// The end-of-sentence token appended to every line.
pub const EOS: &str = "<eos>";
/// The token that stands for every word outside the vocabulary.
pub const UNK: &str = "<unk>";

/// A fixed vocabulary. Ids are dense `0..len()`; `<unk>` and `<eos>` are always present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocab {
    words: Vec<String>,
    index: HashMap<String, u32>,
    unk: u32,
    eos: u32,
}

impl Vocab {
    /// Builds a vocabulary from an ordered word list; adds `<unk>` and `<eos>` at the end if missing.
    pub fn from_words(mut words: Vec<String>) -> Result<Self> {
        for special in [UNK, EOS] {
            if !words.iter().any(|w| w == special) {
                words.push(special.to_string());
            }
        }
        let mut index = HashMap::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            if w.is_empty() || w.chars().any(char::is_whitespace) {
                return Err(Error::Invalid(format!(
                    "vocabulary entry {i} ({w:?}) is empty or contains whitespace: words must be single tokens"
                )));
            }
            if index.insert(w.clone(), i as u32).is_some() {
                return Err(Error::Invalid(format!(
                    "vocabulary word {w:?} appears twice (second time at id {i}): every word must be unique"
                )));
            }
        }
        let unk = index[UNK];
        let eos = index[EOS];
        Ok(Vocab {
            words,
            index,
            unk,
            eos,
        })
    }

    /// Builds the training vocabulary of a token stream: most frequent first, ties in byte order,
    /// so the same text always yields the same ids.
    pub fn from_counts<'a>(tokens: impl IntoIterator<Item = &'a str>) -> Result<Self> {
        let mut counts: HashMap<&str, u64> = HashMap::new();
        for t in tokens {
            *counts.entry(t).or_default() += 1;
        }
        let mut entries: Vec<(&str, u64)> = counts.into_iter().collect();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        Self::from_words(entries.into_iter().map(|(w, _)| w.to_string()).collect())
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The id of `word`, or `None` when it is outside the vocabulary.
    pub fn get(&self, word: &str) -> Option<u32> {
        self.index.get(word).copied()
    }

    /// The id of `word`, with unknown words mapped to `<unk>`.
    pub fn id_or_unk(&self, word: &str) -> u32 {
        self.get(word).unwrap_or(self.unk)
    }

    /// The word of `id`. Panics when `id` is out of range (ids come from this vocabulary).
    pub fn word(&self, id: u32) -> &str {
        &self.words[id as usize]
    }

    pub fn words(&self) -> &[String] {
        &self.words
    }

    pub fn unk(&self) -> u32 {
        self.unk
    }

    pub fn eos(&self) -> u32 {
        self.eos
    }

    /// Tokenizes one line of whitespace-separated text and appends `<eos>`, as the models were trained.
    pub fn encode_line(&self, line: &str, out: &mut Vec<u32>) {
        out.extend(line.split_whitespace().map(|w| self.id_or_unk(w)));
        out.push(self.eos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_order_is_deterministic_and_specials_exist() {
        let v = Vocab::from_counts("b a b c a b".split(' ')).unwrap();
        assert_eq!(&v.words()[..3], &["b", "a", "c"]);
        assert_eq!(v.word(v.unk()), UNK);
        assert_eq!(v.word(v.eos()), EOS);
        let mut ids = Vec::new();
        v.encode_line(" a zebra ", &mut ids);
        assert_eq!(ids, vec![1, v.unk(), v.eos()]);
    }

    #[test]
    fn duplicates_are_rejected() {
        let err = Vocab::from_words(vec!["a".into(), "a".into()]).unwrap_err();
        assert!(err.to_string().contains("appears twice"));
    }
}
