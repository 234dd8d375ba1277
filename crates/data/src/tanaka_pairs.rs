//! The Tanaka corpus as Japanese → English sentence pairs for the translation engine.
//!
//! Source: the verified `examples.utf.xz` of [`crate::tanaka`] (Tatoeba's sentences, CC BY 2.0
//! FR): `--from`'s `tanaka-examples.utf.xz`, else cargo's copy of the crate `tanaka` 0.1.0 (see
//! [`tanaka::source`]). Every `A: japanese<TAB>english#ID=…` line is a pair; `B:` lines are
//! ignored. The `#ID=…` suffix (Tatoeba's sentence ids, not text) is stripped, both sides are
//! trimmed and their whitespace collapsed, pairs with an empty side are dropped, and exact
//! repeats of a pair are dropped, the first kept.
//!
//! Many Japanese sentences have several English translations, so the split goes by Japanese
//! sentence and none is in two parts: the distinct Japanese sentences are ranked by
//! [`tanaka::seeded_key`] under [`PAIRS_SPLIT_SEED`] (independent of the IME's split), ties by
//! text; the first [`TEST_PAIRS`] are test and the next [`VALID_PAIRS`] valid, each with one pair,
//! its first translation in file order (one reference per sentence: its other translations are
//! dropped, not moved to train, where they would leak the source sentence); every pair of the
//! other sentences is train. The ranking depends on the sentences, not on their order in the file;
//! each part is in file order.
//!
//! [`fetch`] writes into `data/tanaka/` `{train,valid,test}.{ja,en}`, one sentence per line,
//! aligned line by line, raw text (tokenization belongs to the model, see
//! `fastsoftmax_translate::text`), checked against [`TEXT_SHA256`] before anything is written;
//! then `stats.json`, last, so that its presence means the six files are complete.
//!
//! On the crate's file: 147,893 `A:` lines, 25 exact repeats dropped, 147,868 pairs of 147,859
//! Japanese sentences (9 extra translations, none of a held-out sentence): 143,868 train, 2,000
//! valid and 2,000 test pairs.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use fastsoftmax_infer::files::{sha256_hex, write_atomic};

use crate::tanaka::{self, seeded_key};
use crate::{io_err, Error, Result};

/// Held-out Japanese sentences (one pair each) of the test and the valid part.
pub const TEST_PAIRS: usize = 2000;
pub const VALID_PAIRS: usize = 2000;
/// The seed of the split's ranking; changing it changes the split (and [`TEXT_SHA256`]).
pub const PAIRS_SPLIT_SEED: u64 = 0x7061_6972_735f_0001;
/// SHA-256 of the six files' contents concatenated in [`FILES`] order, as [`fetch`] writes them.
pub const TEXT_SHA256: &str = "58fda8ebe29997e87526c4cbd52b63a473e00d83b660fd86191b5119dfd52594";

/// The six files [`fetch`] writes, in checksum order, and the stats written after them.
pub const FILES: [&str; 6] = [
    "train.ja", "train.en", "valid.ja", "valid.en", "test.ja", "test.en",
];
pub const STATS: &str = "stats.json";

/// The source and target files of one part (`"train"`, `"valid"`, `"test"`) in `dir`.
pub fn part(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{name}.ja")),
        dir.join(format!("{name}.en")),
    )
}

/// True when `dir` holds the six files and [`STATS`] (written last, so they are complete).
pub fn is_present(dir: &Path) -> bool {
    FILES.iter().chain([&STATS]).all(|f| dir.join(f).is_file())
}

/// One sentence pair, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub ja: String,
    pub en: String,
}

/// The pairs of the corpus text and what was dropped on the way.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// Distinct pairs, in file order.
    pub pairs: Vec<Pair>,
    /// `A:` lines read.
    pub read: usize,
    /// `A:` lines without a TAB (no way to tell the Japanese from the English): skipped.
    pub without_tab: usize,
    /// Pairs with an empty side.
    pub empty: usize,
    /// Exact repeats of a pair already kept.
    pub duplicates: usize,
}

/// Whitespace runs (any Unicode whitespace, line breaks included) as single spaces, trimmed.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The English side without its `#ID=…` suffix.
fn strip_id(en: &str) -> &str {
    en.rfind("#ID=").map_or(en, |i| &en[..i])
}

/// The pairs of every `A:` line of `text` (see the module docs); other lines are ignored.
pub fn parse(text: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut seen = HashSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("A:") else {
            continue;
        };
        parsed.read += 1;
        let Some((ja, en)) = rest.split_once('\t') else {
            parsed.without_tab += 1;
            continue;
        };
        let pair = Pair {
            ja: collapse(ja),
            en: collapse(strip_id(en)),
        };
        if pair.ja.is_empty() || pair.en.is_empty() {
            parsed.empty += 1;
        } else if seen.insert((pair.ja.clone(), pair.en.clone())) {
            parsed.pairs.push(pair);
        } else {
            parsed.duplicates += 1;
        }
    }
    parsed
}

/// Indices into the pairs of each part, each in file order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Split {
    pub train: Vec<usize>,
    pub valid: Vec<usize>,
    pub test: Vec<usize>,
    /// Pairs of held-out Japanese sentences beyond their first: dropped.
    pub other_translations: usize,
    /// Distinct Japanese sentences.
    pub japanese: usize,
}

/// Holds out the `test` Japanese sentences of smallest [`seeded_key`] under [`PAIRS_SPLIT_SEED`]
/// (ties by text) and the next `valid`, one pair each; the rest is train (see the module docs).
pub fn split(pairs: &[Pair], test: usize, valid: usize) -> Split {
    // Each Japanese sentence by the index of its first pair.
    let mut first: HashMap<&str, usize> = HashMap::new();
    let mut distinct = Vec::new();
    for (i, p) in pairs.iter().enumerate() {
        first.entry(&p.ja).or_insert_with(|| {
            distinct.push(i);
            i
        });
    }
    let mut order: Vec<(u64, usize)> = distinct
        .iter()
        .map(|&i| (seeded_key(PAIRS_SPLIT_SEED, &pairs[i].ja), i))
        .collect();
    order.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| pairs[a.1].ja.cmp(&pairs[b.1].ja))
    });
    // By first pair: 0 = train, 1 = test, 2 = valid.
    let mut held = vec![0u8; pairs.len()];
    for (rank, &(_, i)) in order.iter().enumerate() {
        held[i] = match rank {
            r if r < test => 1,
            r if r < test.saturating_add(valid) => 2,
            _ => 0,
        };
    }
    let mut s = Split {
        japanese: distinct.len(),
        ..Split::default()
    };
    for (j, p) in pairs.iter().enumerate() {
        let f = first.get(p.ja.as_str()).copied().unwrap_or(j);
        match held[f] {
            0 => s.train.push(j),
            _ if f != j => s.other_translations += 1,
            1 => s.test.push(j),
            _ => s.valid.push(j),
        }
    }
    s
}

/// What [`fetch`] did; written as [`STATS`].
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// `A:` lines read.
    pub pairs_read: usize,
    /// `A:` lines without a TAB, skipped.
    pub without_tab_dropped: usize,
    /// Pairs with an empty side.
    pub empty_dropped: usize,
    /// Exact repeats of a (Japanese, English) pair.
    pub duplicates_dropped: usize,
    /// Translations of held-out Japanese sentences beyond the first.
    pub other_translations_dropped: usize,
    pub train_pairs: usize,
    pub valid_pairs: usize,
    pub test_pairs: usize,
    /// Distinct Japanese sentences of the kept pairs (all parts).
    pub japanese_sentences: usize,
    pub split_seed: u64,
    pub source_sha256: String,
    /// SHA-256 of the six files in [`FILES`] order.
    pub text_sha256: String,
}

/// The six texts of [`FILES`] from the corpus text, holding out `test` and `valid` Japanese
/// sentences, and their stats.
pub fn build(text: &str, test: usize, valid: usize) -> ([String; 6], Stats) {
    let parsed = parse(text);
    let s = split(&parsed.pairs, test, valid);
    let mut texts: [String; 6] = Default::default();
    for (k, ids) in [&s.train, &s.valid, &s.test].into_iter().enumerate() {
        for &i in ids {
            let p = &parsed.pairs[i];
            for (t, side) in [&p.ja, &p.en].into_iter().enumerate() {
                texts[2 * k + t].push_str(side);
                texts[2 * k + t].push('\n');
            }
        }
    }
    let stats = Stats {
        pairs_read: parsed.read,
        without_tab_dropped: parsed.without_tab,
        empty_dropped: parsed.empty,
        duplicates_dropped: parsed.duplicates,
        other_translations_dropped: s.other_translations,
        train_pairs: s.train.len(),
        valid_pairs: s.valid.len(),
        test_pairs: s.test.len(),
        japanese_sentences: s.japanese,
        split_seed: PAIRS_SPLIT_SEED,
        source_sha256: tanaka::SHA256.to_string(),
        text_sha256: text_sha256(&texts),
    };
    (texts, stats)
}

/// SHA-256 of the texts concatenated in order.
fn text_sha256(texts: &[String; 6]) -> String {
    sha256_hex(texts.concat().as_bytes())
}

/// The result of [`fetch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    AlreadyPresent,
    Written(Stats),
}

/// Makes sure `dir` (usually `data/tanaka`) holds the six files and [`STATS`]; a no-op when
/// they are there. `from` is a folder holding [`tanaka::FILE`] (or that file itself); without
/// it, or when the folder lacks it, cargo's copy of the crate is used (see [`tanaka::source`]).
pub fn fetch(dir: &Path, from: Option<&Path>) -> Result<Fetched> {
    if is_present(dir) {
        return Ok(Fetched::AlreadyPresent);
    }
    let from = from.map(folder_of).transpose()?;
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let (compressed, origin) = tanaka::source(from, dir)?;
    let text = tanaka::decompress(&compressed, &origin)?;
    drop(compressed);
    let (texts, stats) = build(&text, TEST_PAIRS, VALID_PAIRS);
    drop(text);
    write(dir, &texts, &stats, TEXT_SHA256)?;
    Ok(Fetched::Written(stats))
}

/// `--from` as the folder [`tanaka::source`] looks in: the folder itself, or the folder of
/// [`tanaka::FILE`] when the file was passed.
fn folder_of(from: &Path) -> Result<&Path> {
    if from.is_dir() {
        return Ok(from);
    }
    if from.is_file() && from.file_name().is_some_and(|n| n == tanaka::FILE) {
        return Ok(from.parent().unwrap_or(Path::new(".")));
    }
    Err(Error::Invalid(format!(
        "{}: not a folder holding {} (nor that file); pass the folder that holds it with --from, \
         or leave --from out to have cargo fetch the crate {} {}",
        from.display(),
        tanaka::FILE,
        tanaka::CRATE,
        tanaka::VERSION
    )))
}

/// Writes the six texts and then `stats` into `dir` when the texts' digest is `expected`;
/// otherwise writes nothing.
fn write(dir: &Path, texts: &[String; 6], stats: &Stats, expected: &str) -> Result<()> {
    if stats.text_sha256 != expected {
        return Err(Error::Invalid(format!(
            "{}: the Tanaka pairs ({}) came out with SHA-256 {}, expected {expected}; nothing was \
             written. The source is verified, so the parsing or split code differs from the one \
             that recorded the checksum: undo that change, or if it is intended, set TEXT_SHA256 \
             in crates/data/src/tanaka_pairs.rs to the new digest",
            dir.display(),
            FILES.join(", "),
            stats.text_sha256
        )));
    }
    // A stale STATS would mark a half-rewritten folder complete.
    let stats_path = dir.join(STATS);
    match std::fs::remove_file(&stats_path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(io_err(&stats_path)(e));
        }
        _ => {}
    }
    for (name, text) in FILES.iter().zip(texts) {
        write_atomic(&dir.join(name), text.as_bytes())?;
    }
    let json = serde_json::to_string_pretty(stats)
        .map_err(|e| Error::Invalid(format!("{}: {e}", stats_path.display())))?;
    write_atomic(&stats_path, format!("{json}\n").as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "A: 彼は忙しい。\tHe is busy.#ID=1_2\n\
        B: 彼(かれ)[01] は 忙しい\n\
        A:   \tOnly English.#ID=3_4\n\
        A: 英語のない文。\t #ID=5_6\n\
        A: 雨が  降る。\tIt   rains. #ID=7_8\n\
        B: 雨 が 降る\n\
        A:  彼は忙しい。 \tHe is busy.#ID=9_10\n\
        A: 彼は忙しい。\tHe's busy.#ID=11_12\n\
        A: タブのない行\n\
        \n\
        A: 猫だ。\tA cat.#ID=13_14\r\n\
        B: 猫 だ\r\n";

    fn pair(ja: &str, en: &str) -> Pair {
        Pair {
            ja: ja.into(),
            en: en.into(),
        }
    }

    #[test]
    fn a_lines_parse_into_distinct_pairs_without_ids() {
        let p = parse(SAMPLE);
        assert_eq!(
            p.pairs,
            [
                pair("彼は忙しい。", "He is busy."),
                pair("雨が 降る。", "It rains."),
                pair("彼は忙しい。", "He's busy."),
                pair("猫だ。", "A cat."),
            ]
        );
        assert_eq!((p.read, p.without_tab, p.empty, p.duplicates), (8, 1, 2, 1));
        assert_eq!(parse(""), Parsed::default());
        assert_eq!(strip_id("No id."), "No id.");
        assert_eq!(strip_id("C# is #ID=1#ID=2_3"), "C# is #ID=1");
    }

    /// `n` Japanese sentences, the i-th with `i % 3 + 1` translations, interleaved in file order.
    fn corpus(n: usize) -> Vec<Pair> {
        let mut pairs = Vec::new();
        for t in 0..3 {
            for i in 0..n {
                if t <= i % 3 {
                    pairs.push(pair(
                        &format!("文{i}です。"),
                        &format!("Sentence {i}, take {t}."),
                    ));
                }
            }
        }
        pairs
    }

    fn japanese(pairs: &[Pair], ids: &[usize]) -> Vec<String> {
        let mut ja: Vec<String> = ids.iter().map(|&i| pairs[i].ja.clone()).collect();
        ja.sort();
        ja
    }

    #[test]
    fn the_split_is_by_japanese_sentence_one_pair_each_and_independent_of_order() {
        let pairs = corpus(300);
        let s = split(&pairs, 40, 30);
        assert_eq!(s, split(&pairs, 40, 30), "deterministic");
        assert_eq!((s.test.len(), s.valid.len(), s.japanese), (40, 30, 300));
        assert_eq!(
            s.train.len() + s.valid.len() + s.test.len() + s.other_translations,
            pairs.len()
        );
        let (train, valid, test) = (
            japanese(&pairs, &s.train),
            japanese(&pairs, &s.valid),
            japanese(&pairs, &s.test),
        );
        let held: HashSet<&String> = valid.iter().chain(&test).collect();
        assert_eq!(held.len(), 70, "one pair per held-out sentence");
        for held in [&valid, &test] {
            assert!(held.iter().all(|ja| train.binary_search(ja).is_err()));
        }
        assert!(valid.iter().all(|ja| test.binary_search(ja).is_err()));
        for part in [&s.train, &s.valid, &s.test] {
            assert!(part.windows(2).all(|w| w[0] < w[1]), "file order");
        }
        // Held out: the first translation. Train: every translation of its sentences.
        for &i in s.valid.iter().chain(&s.test) {
            assert!(pairs[i].en.ends_with("take 0."), "{:?}", pairs[i]);
        }
        let train_sentences = {
            let mut t = train.clone();
            t.dedup();
            t.len()
        };
        assert_eq!(train_sentences, 300 - 70);
        let all_of_train = pairs
            .iter()
            .filter(|p| train.binary_search(&p.ja).is_ok())
            .count();
        assert_eq!(all_of_train, s.train.len());

        // The same pairs in another order: the same sentences held out, the same pairs written.
        let reversed: Vec<Pair> = pairs.iter().rev().cloned().collect();
        let r = split(&reversed, 40, 30);
        assert_eq!(japanese(&reversed, &r.test), test);
        assert_eq!(japanese(&reversed, &r.valid), valid);
        assert_eq!(japanese(&reversed, &r.train), train);
        // Here the first translation in file order is the last one written above.
        for &i in r.valid.iter().chain(&r.test) {
            let takes = pairs.iter().filter(|p| p.ja == reversed[i].ja).count();
            assert!(reversed[i].en.ends_with(&format!("take {}.", takes - 1)));
        }
        // Fewer sentences than held out: nothing is lost, nothing panics.
        let few = split(&corpus(50), 40, 30);
        assert_eq!(
            (few.train.len(), few.test.len(), few.valid.len()),
            (0, 40, 10)
        );
        assert_eq!(split(&[], 40, 30), Split::default());
        assert_eq!(split(&pairs, usize::MAX, usize::MAX).test.len(), 300);
    }

    #[test]
    fn texts_are_aligned_and_the_checksum_guards_the_write() {
        let (texts, stats) = build(SAMPLE, 1, 1);
        for k in 0..3 {
            assert_eq!(
                texts[2 * k].lines().count(),
                texts[2 * k + 1].lines().count()
            );
        }
        assert_eq!((stats.valid_pairs, stats.test_pairs), (1, 1));
        // 彼は忙しい。 has two translations: both in train, or one held out and one dropped.
        assert_eq!(stats.train_pairs + stats.other_translations_dropped, 2);
        assert_eq!(stats.japanese_sentences, 3);
        assert_eq!(stats.pairs_read, 8);
        assert_eq!(stats.text_sha256, sha256_hex(texts.concat().as_bytes()));

        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("tanaka");
        std::fs::create_dir(&out).unwrap();
        let err = write(&out, &texts, &stats, TEXT_SHA256)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("train.ja") && err.contains("TEXT_SHA256"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_dir(&out).unwrap().count(),
            0,
            "nothing written"
        );

        write(&out, &texts, &stats, &stats.text_sha256).unwrap();
        assert!(is_present(&out));
        for (name, text) in FILES.iter().zip(&texts) {
            assert_eq!(&std::fs::read_to_string(out.join(name)).unwrap(), text);
        }
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(STATS)).unwrap()).unwrap();
        assert_eq!(json["split_seed"], PAIRS_SPLIT_SEED);
        // Complete: no source is needed.
        assert_eq!(fetch(&out, None).unwrap(), Fetched::AlreadyPresent);
        assert_eq!(part(&out, "valid").0, out.join("valid.ja"));
    }

    #[test]
    fn a_corpus_file_with_another_digest_is_refused_and_nothing_written() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join(tanaka::FILE);
        std::fs::write(&source, b"not the corpus").unwrap();
        let out = dir.path().join("tanaka");
        for from in [dir.path(), source.as_path()] {
            let err = fetch(&out, Some(from)).unwrap_err().to_string();
            assert!(err.contains(&source.display().to_string()), "{err}");
            assert!(err.contains(tanaka::SHA256), "{err}");
            assert!(!out.join(STATS).exists());
        }
        // Neither a folder nor the corpus file: said so, not a silent cargo fetch.
        let other = dir.path().join("other.txt");
        std::fs::write(&other, b"x").unwrap();
        for from in [other, dir.path().join("missing")] {
            let err = fetch(&out, Some(&from)).unwrap_err().to_string();
            assert!(
                err.contains(&from.display().to_string()) && err.contains("--from"),
                "{err}"
            );
        }
    }
}
