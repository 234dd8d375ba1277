//! The vocabulary map (vmap) of the OpenNMT WNMT-2018 paper (section 3.2): for every source
//! n-gram, the target words its aligned translations use, so that the output layer scores only
//! the words a sentence's n-grams can bring (plus the 0-gram list of words that appear
//! unaligned: articles, particles, punctuation) instead of the whole vocabulary.
//!
//! An n-gram's translation hypotheses are either the target words linked to its words
//! ([`MapUnit::Words`]) or, as the paper builds it, the target phrases aligned to the n-gram as
//! a unit ([`MapUnit::Phrases`]: phrase pairs consistent with the alignment, grown over
//! unaligned target words, Koehn et al. 2003). The map keeps an n-gram's `N` most frequent
//! hypotheses and lists their words.
//!
//! File format (CTranslate2's): one line per key, `source n-gram<TAB>target tokens`, tokens
//! separated by spaces; the 0-gram list is the line with an empty key.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use fastsoftmax_infer::{Error, Result, Vocab};

use crate::align::Links;

/// What a source n-gram's translation hypotheses are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapUnit {
    /// Each target word linked to one of the n-gram's words.
    #[default]
    Words,
    /// Each target phrase aligned to the n-gram as a unit: the smallest target span holding
    /// every word linked to it, when none of that span's words links outside the n-gram, and
    /// that span grown over unaligned target words at either end (up to [`MAX_PHRASE`] words).
    Phrases,
}

/// Longest target phrase a [`MapUnit::Phrases`] map counts (Moses' default phrase length).
pub const MAX_PHRASE: usize = 7;

/// How a map is built from aligned sentence pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VmapConfig {
    /// Longest source n-gram (the paper's n).
    pub max_ngram: usize,
    /// A pair (n-gram, hypothesis) must be seen this often.
    pub min_freq: u32,
    /// Hypotheses kept per n-gram, most frequent first (the paper's N).
    pub per_ngram: usize,
    /// Size of the 0-gram list: the most frequent unaligned target words.
    pub zero_gram: usize,
    /// Linked words or aligned phrases.
    pub unit: MapUnit,
}

impl Default for VmapConfig {
    fn default() -> Self {
        VmapConfig {
            max_ngram: 2,
            min_freq: 2,
            per_ngram: 20,
            zero_gram: 100,
            unit: MapUnit::Words,
        }
    }
}

/// Source n-gram (words joined by a space; `""` = the 0-gram list) → target words.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VocabMap {
    pub entries: BTreeMap<String, Vec<String>>,
}

impl VocabMap {
    /// Counts, over aligned sentence pairs, each source n-gram (n ≤ `max_ngram`) with each of
    /// its hypotheses ([`MapUnit`]); keeps per n-gram the words of its `per_ngram` most
    /// frequent hypotheses seen at least `min_freq` times. Target words never linked in a
    /// sentence count towards the 0-gram list.
    pub fn build<S: AsRef<str>>(
        src: &[Vec<S>],
        tgt: &[Vec<S>],
        links: &[Links],
        cfg: VmapConfig,
    ) -> Self {
        // n-gram → hypothesis (target words) → count.
        let mut pairs: HashMap<String, HashMap<Vec<&str>, u32>> = HashMap::new();
        let mut unaligned: HashMap<Vec<&str>, u32> = HashMap::new();
        for ((e, f), l) in src.iter().zip(tgt).zip(links) {
            let f: Vec<&str> = f.iter().map(AsRef::as_ref).collect();
            // Per source position the target positions linked to it; per target position the
            // first and last source position linked to it.
            let mut linked: Vec<Vec<usize>> = vec![Vec::new(); e.len()];
            let mut sources: Vec<Option<(usize, usize)>> = vec![None; f.len()];
            for &(s, t) in l {
                let (s, t) = (s as usize, t as usize);
                linked[s].push(t);
                let r = sources[t].get_or_insert((s, s));
                *r = (r.0.min(s), r.1.max(s));
            }
            for (w, _) in f.iter().zip(&sources).filter(|(_, x)| x.is_none()) {
                *unaligned.entry(vec![*w]).or_insert(0) += 1;
            }
            for n in 1..=cfg.max_ngram.min(e.len()) {
                for start in 0..=e.len() - n {
                    let span = start..start + n;
                    let mut targets: Vec<usize> = span
                        .clone()
                        .flat_map(|p| linked[p].iter().copied())
                        .collect();
                    if targets.is_empty() {
                        continue;
                    }
                    targets.sort_unstable();
                    targets.dedup();
                    let key: Vec<&str> = e[span.clone()].iter().map(AsRef::as_ref).collect();
                    let counts = pairs.entry(key.join(" ")).or_default();
                    match cfg.unit {
                        MapUnit::Words => {
                            let mut words: Vec<&str> = targets.iter().map(|&t| f[t]).collect();
                            words.sort_unstable();
                            words.dedup();
                            for w in words {
                                *counts.entry(vec![w]).or_insert(0) += 1;
                            }
                        }
                        MapUnit::Phrases => {
                            let (first, last) = (targets[0], targets[targets.len() - 1]);
                            for phrase in aligned_phrases(&sources, span, first..last + 1) {
                                *counts.entry(f[phrase].to_vec()).or_insert(0) += 1;
                            }
                        }
                    }
                }
            }
        }
        let mut entries = BTreeMap::new();
        for (key, counts) in pairs {
            let words = best_words(counts, cfg.per_ngram, cfg.min_freq);
            if !words.is_empty() {
                entries.insert(key, words);
            }
        }
        let zero = best_words(unaligned, cfg.zero_gram, 1);
        if !zero.is_empty() {
            entries.insert(String::new(), zero);
        }
        VocabMap { entries }
    }

    /// The text format: one `key<TAB>words` line per key, keys in order.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for (key, words) in &self.entries {
            text.push_str(key);
            text.push('\t');
            text.push_str(&words.join(" "));
            text.push('\n');
        }
        text
    }

    /// Writes the text format, atomically (a temporary file renamed over `path`).
    pub fn save(&self, path: &Path) -> Result<()> {
        fastsoftmax_infer::files::write_atomic(path, self.to_text().as_bytes())
    }

    /// Reads a vmap file; see [`Self::parse`].
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::Invalid(format!(
                "{}: {e}; build a map with `fastsoftmax build-vmap`",
                path.display()
            ))
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            Error::Invalid(format!(
                "{}: not UTF-8 text (byte {}); a vmap is a text file of `n-gram<TAB>words` lines",
                path.display(),
                e.utf8_error().valid_up_to()
            ))
        })?;
        Self::parse(&text).map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))
    }

    /// Reads the text format. An empty line, a line without a tab, or a key without target
    /// words is an error naming its line number; a key seen twice gathers both lists.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let mut entries: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let bad = |why: &str| {
                format!(
                    "line {}: {why}; each line is `source n-gram<TAB>target words`",
                    i + 1
                )
            };
            let (key, words) = line.split_once('\t').ok_or_else(|| {
                bad(if line.trim().is_empty() {
                    "empty line"
                } else {
                    "no tab"
                })
            })?;
            let words: Vec<String> = words.split_whitespace().map(String::from).collect();
            if words.is_empty() {
                return Err(bad("no target words after the tab"));
            }
            let key = key.split_whitespace().collect::<Vec<_>>().join(" ");
            entries.entry(key).or_default().extend(words);
        }
        if entries.is_empty() {
            return Err("the file holds no entries".into());
        }
        Ok(VocabMap { entries })
    }

    /// The map in target ids of `vocab`: words it does not know become `<unk>` (counted in
    /// [`Shortlister::unknown`]). An error when most of its words are unknown: the map was built
    /// for another vocabulary (another language pair or tokenization).
    pub fn for_vocab(&self, vocab: &Vocab) -> Result<Shortlister> {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut unknown = HashSet::new();
        let mut keys = HashMap::with_capacity(self.entries.len());
        let mut zero = Vec::new();
        for (key, words) in &self.entries {
            let mut ids: Vec<u32> = words
                .iter()
                .map(|w| {
                    seen.insert(w);
                    vocab.get(w).unwrap_or_else(|| {
                        unknown.insert(w.as_str());
                        vocab.unk()
                    })
                })
                .collect();
            ids.sort_unstable();
            ids.dedup();
            if key.is_empty() {
                zero = ids;
            } else {
                keys.insert(key.clone(), ids);
            }
        }
        if unknown.len() * 2 > seen.len() {
            let examples: Vec<&str> = unknown.iter().take(5).copied().collect();
            return Err(Error::Invalid(format!(
                "{} of the map's {} target words are not in the translator's target vocabulary \
                 (e.g. {}): the map was built for another vocabulary; build one from this \
                 translator's training data with `fastsoftmax build-vmap`",
                unknown.len(),
                seen.len(),
                examples.join(", ")
            )));
        }
        let max_ngram = keys
            .keys()
            .map(|k: &String| k.split(' ').count())
            .max()
            .unwrap_or(0);
        // Every search needs these whatever the map says: `<eos>` ends every hypothesis, and
        // `<unk>` is what the full softmax would write for a word it does not know.
        let mut always = zero;
        always.extend([vocab.eos(), vocab.unk()]);
        always.sort_unstable();
        always.dedup();
        Ok(Shortlister {
            keys,
            always,
            max_ngram,
            unknown: unknown.len(),
            words: seen.len(),
        })
    }

    /// The target words a tokenized source sentence may use under this map (the 0-gram list
    /// and the words of every n-gram found), sorted and distinct; for coverage statistics.
    pub fn candidate_words<'a, S: AsRef<str>>(&'a self, src: &[S]) -> Vec<&'a str> {
        let mut out: Vec<&str> = Vec::new();
        let max_ngram = self
            .entries
            .keys()
            .map(|k| k.split_whitespace().count())
            .max()
            .unwrap_or(0);
        if let Some(zero) = self.entries.get("") {
            out.extend(zero.iter().map(String::as_str));
        }
        for_each_ngram(src, max_ngram, |key| {
            if let Some(words) = self.entries.get(key) {
                out.extend(words.iter().map(String::as_str));
            }
        });
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// The words of the `keep` most frequent hypotheses seen at least `min` times, in that order
/// (ties by the hypothesis, so that the file is reproducible), each word once.
fn best_words(counts: HashMap<Vec<&str>, u32>, keep: usize, min: u32) -> Vec<String> {
    let mut v: Vec<(Vec<&str>, u32)> = counts.into_iter().filter(|&(_, c)| c >= min).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut seen = HashSet::new();
    v.into_iter()
        .take(keep)
        .flat_map(|(words, _)| words)
        .filter(|w| seen.insert(*w))
        .map(str::to_string)
        .collect()
}

/// The target phrases aligned to the source `span` as a unit: `core` (the smallest target span
/// holding every word linked to `span`) when none of its words links outside `span`, grown over
/// unaligned target words (`sources[t] == None`) at either end, at most [`MAX_PHRASE`] words.
/// `sources[t]`: the first and last source position linked to target position `t`.
fn aligned_phrases(
    sources: &[Option<(usize, usize)>],
    span: std::ops::Range<usize>,
    core: std::ops::Range<usize>,
) -> Vec<std::ops::Range<usize>> {
    let outside = |t: usize| matches!(sources[t], Some((a, b)) if a < span.start || b >= span.end);
    if core.len() > MAX_PHRASE || core.clone().any(outside) {
        return Vec::new();
    }
    let mut lo = core.start;
    while lo > 0 && sources[lo - 1].is_none() {
        lo -= 1;
    }
    let mut hi = core.end;
    while hi < sources.len() && sources[hi].is_none() {
        hi += 1;
    }
    let mut phrases = Vec::new();
    for a in (lo..=core.start).rev() {
        for b in core.end..=hi {
            if b - a <= MAX_PHRASE {
                phrases.push(a..b);
            }
        }
    }
    phrases
}

/// `f(key)` for every n-gram (n ≤ `max_ngram`) of `src`, its words joined by a space.
fn for_each_ngram<S: AsRef<str>>(src: &[S], max_ngram: usize, mut f: impl FnMut(&str)) {
    let mut key = String::new();
    for n in 1..=max_ngram.min(src.len()) {
        for window in src.windows(n) {
            key.clear();
            for (i, w) in window.iter().enumerate() {
                if i > 0 {
                    key.push(' ');
                }
                key.push_str(w.as_ref());
            }
            f(&key);
        }
    }
}

/// A [`VocabMap`] in target ids, ready to give each sentence its shortlist.
#[derive(Debug, Clone)]
pub struct Shortlister {
    keys: HashMap<String, Vec<u32>>,
    /// The 0-gram list, `<eos>` and `<unk>`, sorted.
    always: Vec<u32>,
    max_ngram: usize,
    /// Distinct target words of the map outside the vocabulary (read as `<unk>`).
    pub unknown: usize,
    /// Distinct target words of the map.
    pub words: usize,
}

impl Shortlister {
    /// The sorted, distinct target ids the sentences `sources` (tokenized) may use: the union
    /// of their n-grams' words, the 0-gram list, `<eos>` and `<unk>`.
    pub fn shortlist<S: AsRef<str>>(&self, sources: &[&[S]]) -> Vec<u32> {
        let mut out = self.always.clone();
        for src in sources {
            for_each_ngram(src, self.max_ngram, |key| {
                if let Some(ids) = self.keys.get(key) {
                    out.extend_from_slice(ids);
                }
            });
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(words: &[&str]) -> Vocab {
        Vocab::from_words(words.iter().map(|w| w.to_string()).collect()).unwrap()
    }

    #[test]
    fn counts_ngrams_and_unaligned_words_then_round_trips_the_file() {
        let src = vec![
            vec!["the", "house"],
            vec!["the", "book"],
            vec!["a", "house"],
        ];
        let tgt = vec![
            vec!["das", "Haus", "."],
            vec!["das", "Buch", "."],
            vec!["ein", "Haus", "."],
        ];
        let links: Vec<Links> = vec![[(0, 0), (1, 1)].into(); 3];
        let cfg = VmapConfig {
            min_freq: 1,
            ..Default::default()
        };
        let m = VocabMap::build(&src, &tgt, &links, cfg);
        assert_eq!(m.entries["house"], vec!["Haus"]);
        assert_eq!(m.entries["the"], vec!["das"]);
        assert_eq!(m.entries["the house"], vec!["Haus", "das"]);
        assert_eq!(m.entries[""], vec!["."]);
        let strict = VocabMap::build(
            &src,
            &tgt,
            &links,
            VmapConfig {
                min_freq: 2,
                ..Default::default()
            },
        );
        assert_eq!(strict.entries["house"], vec!["Haus"]);
        assert!(!strict.entries.contains_key("book"));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map.txt");
        m.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("\t.\n"), "{text}");
        assert_eq!(VocabMap::load(&path).unwrap(), m);
        assert_eq!(
            m.candidate_words(&["the", "house"]),
            vec![".", "Haus", "das"]
        );
    }

    #[test]
    fn phrase_maps_count_aligned_phrases_with_their_unaligned_words() {
        // "u" sits unaligned inside the phrase of "a"; "." and "den" are unaligned at the ends.
        let src = vec![vec!["a", "b"], vec!["kick", "bucket"], vec!["p", "q"]];
        let tgt = vec![
            vec!["x", "u", "y", "z", "."],
            vec!["den", "Löffel", "abgeben"],
            vec!["s", "t"],
        ];
        let links: Vec<Links> = vec![
            [(0, 0), (0, 2), (1, 3)].into(),
            [(0, 2), (1, 1)].into(),
            // Crossed: "p" links to both, "q" to the first: no phrase holds "p" alone.
            [(0, 0), (0, 1), (1, 0)].into(),
        ];
        let cfg = |unit| VmapConfig {
            min_freq: 1,
            unit,
            ..Default::default()
        };
        let words = VocabMap::build(&src, &tgt, &links, cfg(MapUnit::Words));
        let phrases = VocabMap::build(&src, &tgt, &links, cfg(MapUnit::Phrases));
        assert_eq!(words.entries["a"], vec!["x", "y"]);
        assert_eq!(phrases.entries["a"], vec!["x", "u", "y"]);
        assert_eq!(words.entries["b"], vec!["z"]);
        // "z" alone, and grown over the unaligned "." that follows it.
        assert_eq!(phrases.entries["b"], vec!["z", "."]);
        assert_eq!(phrases.entries["a b"], vec!["x", "u", "y", "z", "."]);
        assert_eq!(
            phrases.entries["kick bucket"],
            vec!["Löffel", "abgeben", "den"]
        );
        assert_eq!(words.entries["kick bucket"], vec!["Löffel", "abgeben"]);
        assert_eq!(words.entries["p"], vec!["s", "t"]);
        assert!(!phrases.entries.contains_key("p"));
        assert_eq!(phrases.entries["p q"], vec!["s", "t"]);
        // N counts phrases: the most frequent one's words only.
        let one = VocabMap::build(
            &src,
            &tgt,
            &links,
            VmapConfig {
                per_ngram: 1,
                ..cfg(MapUnit::Phrases)
            },
        );
        assert_eq!(one.entries["b"], vec!["z"]);
        assert_eq!(one.entries["kick bucket"], vec!["Löffel", "abgeben"]);
    }

    #[test]
    fn malformed_files_name_the_line() {
        assert!(VocabMap::parse("house\tHaus\nhouse Haus\n")
            .unwrap_err()
            .contains("line 2: no tab"));
        assert!(VocabMap::parse("house\tHaus\n\nbook\tBuch\n")
            .unwrap_err()
            .contains("line 2: empty line"));
        assert!(VocabMap::parse("house\t \n")
            .unwrap_err()
            .contains("line 1: no target words"));
        assert!(VocabMap::parse("").unwrap_err().contains("no entries"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.txt");
        std::fs::write(&path, b"house\tH\xffus\n").unwrap();
        let e = VocabMap::load(&path).unwrap_err().to_string();
        assert!(e.contains("bad.txt") && e.contains("UTF-8"), "{e}");
        let e = VocabMap::load(&dir.path().join("missing.txt"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.txt"), "{e}");
    }

    #[test]
    fn shortlists_are_unions_in_ids_with_eos_and_unk_always_in() {
        let v = vocab(&["das", "Haus", "Buch", "ein", "."]);
        let m = VocabMap::parse("\t.\nthe\tdas\nhouse\tHaus Hütte\nthe house\tHaus\nbook\tBuch\n")
            .unwrap();
        let s = m.for_vocab(&v).unwrap();
        assert_eq!(s.unknown, 1, "Hütte is not in the vocabulary");
        let id = |w: &str| v.get(w).unwrap();
        let mut want = vec![id("."), id("das"), id("Haus"), v.unk(), v.eos()];
        want.sort_unstable();
        assert_eq!(s.shortlist(&[&["the", "house"][..]]), want);
        // The union over a batch; unknown source words bring nothing.
        want.push(id("Buch"));
        want.sort_unstable();
        assert_eq!(
            s.shortlist(&[&["the", "house"][..], &["book", "zzz"][..]]),
            want
        );
        // An empty sentence still gets the specials and the 0-gram list.
        let empty: &[&str] = &[];
        assert_eq!(s.shortlist(&[empty]).len(), 3);
    }

    #[test]
    fn a_map_for_another_vocabulary_is_refused() {
        let v = vocab(&["house", "book"]);
        let m = VocabMap::parse("the\tdas\nhouse\tHaus\nbook\tBuch\n").unwrap();
        let e = m.for_vocab(&v).unwrap_err().to_string();
        assert!(
            e.contains("another vocabulary") && e.contains("3 of the map's 3"),
            "{e}"
        );
    }
}
