//! Reading tokenized text: one sentence per line, words separated by whitespace, `<eos>` appended.

use std::path::Path;

use crate::{io_err, Error, Result, Vocab, EOS, UNK};

/// Reads a text file as a list of lines, with a clear error when it is missing.
fn read_text(path: &Path) -> Result<String> {
    if !path.exists() {
        return Err(Error::Invalid(format!(
            "{}: no such file (for PTB run `fastsoftmax data fetch ptb` first)",
            path.display()
        )));
    }
    std::fs::read_to_string(path).map_err(io_err(path))
}

/// Builds the training vocabulary of a file (every word it contains, plus `<unk>` and `<eos>`).
pub fn vocab_of_file(path: &Path) -> Result<Vocab> {
    vocab_of_file_min_count(path, 1)
}

/// The words of a file seen at least `min_count` times, most frequent first (ties by spelling),
/// plus `<unk>` and `<eos>`; rarer words will read as `<unk>`.
pub fn vocab_of_file_min_count(path: &Path, min_count: usize) -> Result<Vocab> {
    vocab_of_file_limited(path, min_count, None)
}

/// As [`vocab_of_file_min_count`], with at most `max_size` entries (`<unk>` and `<eos>`
/// included): the most frequent words, as the L2S paper shrinks PTB's vocabulary for its
/// Figure 8. `None`: no cap.
pub fn vocab_of_file_limited(
    path: &Path,
    min_count: usize,
    max_size: Option<usize>,
) -> Result<Vocab> {
    if let Some(m) = max_size.filter(|&m| m < 3) {
        return Err(Error::Invalid(format!(
            "a vocabulary of at most {m} entries holds no word beside <unk> and <eos>: choose train.max_vocab ≥ 3"
        )));
    }
    let text = read_text(path)?;
    let mut counts: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for t in text.split_whitespace() {
        *counts.entry(t).or_default() += 1;
    }
    let mut entries: Vec<(&str, u64)> = counts
        .into_iter()
        .filter(|&(_, c)| c >= min_count as u64)
        .collect();
    entries.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut words: Vec<String> = entries.into_iter().map(|(w, _)| w.to_string()).collect();
    if let Some(max) = max_size {
        // The longest prefix that leaves room for the specials it lacks.
        let special = |w: &String| w == UNK || w == EOS;
        let (mut len, mut specials) = (0, 0);
        while len < words.len() && len + 1 + (2 - specials - special(&words[len]) as usize) <= max {
            specials += special(&words[len]) as usize;
            len += 1;
        }
        words.truncate(len);
    }
    let vocab = Vocab::from_words(words)?;
    if vocab.len() <= 2 && min_count > 1 {
        return Err(Error::Invalid(format!(
            "{}: no word appears {min_count} times; lower train.min_count",
            path.display()
        )));
    }
    if vocab.len() <= 2 {
        return Err(Error::Invalid(format!(
            "{}: the file has no words; a training text needs at least one tokenized sentence per line",
            path.display()
        )));
    }
    Ok(vocab)
}

/// Reads a file into token ids; unknown words become `<unk>`, each line ends with `<eos>`.
/// Blank lines are skipped. Errors when the file holds no words at all.
pub fn read_tokens(path: &Path, vocab: &Vocab) -> Result<Vec<u32>> {
    let text = read_text(path)?;
    let tokens = encode_text(&text, vocab);
    if tokens.is_empty() {
        return Err(Error::Invalid(format!(
            "{}: the file has no words (empty or only whitespace); give a text with one tokenized sentence per line",
            path.display()
        )));
    }
    Ok(tokens)
}

/// Encodes text already in memory, line by line (blank lines skipped).
pub fn encode_text(text: &str, vocab: &Vocab) -> Vec<u32> {
    let mut tokens = Vec::with_capacity(text.len() / 5);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        vocab.encode_line(line, &mut tokens);
    }
    tokens
}

/// Share of tokens that are `<unk>`: a quick check that a foreign text fits the vocabulary.
pub fn unk_rate(tokens: &[u32], vocab: &Vocab) -> f64 {
    if tokens.is_empty() {
        return 0.0;
    }
    tokens.iter().filter(|&&t| t == vocab.unk()).count() as f64 / tokens.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_with_eos_and_unk() {
        let dir = tempfile::tempdir().unwrap();
        let train = dir.path().join("train.txt");
        std::fs::write(&train, " the cat sat \n\n the dog \n").unwrap();
        let vocab = vocab_of_file(&train).unwrap();
        let test = dir.path().join("test.txt");
        std::fs::write(&test, "the bird sat\n").unwrap();
        let ids = read_tokens(&test, &vocab).unwrap();
        let words: Vec<&str> = ids.iter().map(|&i| vocab.word(i)).collect();
        assert_eq!(words, ["the", "<unk>", "sat", "<eos>"]);
        assert!((unk_rate(&ids, &vocab) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn empty_and_missing_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.txt");
        std::fs::write(&empty, "  \n\n").unwrap();
        let vocab = Vocab::from_words(vec!["a".into()]).unwrap();
        let err = read_tokens(&empty, &vocab).unwrap_err().to_string();
        assert!(err.contains("no words"), "{err}");
        let err = read_tokens(&dir.path().join("nope.txt"), &vocab)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no such file"), "{err}");
        assert!(vocab_of_file(&empty).is_err());
    }

    #[test]
    fn min_count_keeps_frequent_words_most_frequent_first() {
        let dir = tempfile::tempdir().unwrap();
        let train = dir.path().join("train.txt");
        std::fs::write(&train, "b a b c\na b b\n").unwrap();
        let all = vocab_of_file(&train).unwrap();
        assert_eq!((all.word(0), all.word(1), all.word(2)), ("b", "a", "c"));
        let frequent = vocab_of_file_min_count(&train, 2).unwrap();
        assert_eq!(frequent.len(), 4); // b, a, <unk>, <eos>
        assert_eq!(frequent.get("c"), None);
        let err = vocab_of_file_min_count(&train, 9).unwrap_err().to_string();
        assert!(err.contains("min_count"), "{err}");
    }

    #[test]
    fn max_size_keeps_the_most_frequent_words_and_the_specials() {
        let dir = tempfile::tempdir().unwrap();
        let train = dir.path().join("train.txt");
        std::fs::write(&train, "b a b c <unk>\na b b <unk> d\n").unwrap();
        // b ×4, a ×2, <unk> ×2, c, d: three entries leave room for b and <eos> only.
        let v = vocab_of_file_limited(&train, 1, Some(3)).unwrap();
        assert_eq!((v.len(), v.word(0)), (3, "b"));
        assert!(v.get("<unk>").is_some() && v.get("<eos>").is_some() && v.get("a").is_none());
        // <unk> is among the text's four most frequent entries, so it takes no extra room.
        let v = vocab_of_file_limited(&train, 1, Some(4)).unwrap();
        assert_eq!(v.len(), 4);
        assert!(v.get("a").is_some() && v.get("c").is_none());
        assert_eq!(vocab_of_file_limited(&train, 1, Some(99)).unwrap().len(), 6);
        let err = vocab_of_file_limited(&train, 1, Some(2))
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_vocab"), "{err}");
    }
}
