//! The trigram candidate table of the candidate attention predictor (Nguyen et al. 2020,
//! section 2.1): for the last two words, the words that most often came next in the training
//! text. Trigrams seen fewer than `min_count` times are dropped (the paper's threshold T); a
//! context left without words backs off to the last word's bigram list (our addition, switchable
//! with `backoff`; the paper goes straight to frequent words), and the caller fills the list
//! with globally frequent words.
//!
//! Binary format (little-endian, every array padded to 8 bytes, so a memory map can read it in
//! place; look-ups are binary searches on sorted keys):
//! ```text
//! header  b"FSCT", version u32, vocab u32, per_context u32, id_bytes u32 (2 or 4),
//!         n_tri u32, n_tri_ids u32, n_bi u32, n_bi_ids u32, n_frequent u32   (40 bytes)
//! tri_keys    u64 [n_tri]        (prev2 << 32 | prev1), strictly increasing
//! tri_offsets u32 [n_tri + 1]    into tri_ids
//! tri_ids     u16|u32 [n_tri_ids]
//! bi_keys     u32 [n_bi]         (prev1), strictly increasing
//! bi_offsets  u32 [n_bi + 1]
//! bi_ids      u16|u32 [n_bi_ids]
//! frequent    u32 [n_frequent]   most frequent first
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::head::{Context, Predictor};
use crate::heads::format::{self, HeadManifest, Tensors, TRIGRAM_TABLE};
use crate::heads::full::FullHead;
use crate::topk::TopK;

const MAGIC: &[u8; 4] = b"FSCT";
const VERSION: u32 = 1;
const HEADER: usize = 40;

/// How the table is built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrigramConfig {
    /// Potential words kept per context.
    pub per_context: usize,
    /// Trigrams (and bigrams) seen fewer times are dropped.
    pub min_count: u32,
    /// Globally frequent words kept (the fill of every list).
    pub n_frequent: usize,
    /// Back off to the last word's list when the two-word context has none.
    pub backoff: bool,
}

impl Default for TrigramConfig {
    fn default() -> Self {
        TrigramConfig {
            per_context: 5,
            min_count: 2,
            n_frequent: 100,
            backoff: true,
        }
    }
}

/// Context → most frequent next words, for two-word and one-word contexts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateTable {
    vocab: u32,
    per_context: u32,
    tri_keys: Vec<u64>,
    tri_offsets: Vec<u32>,
    tri_ids: Vec<u32>,
    bi_keys: Vec<u32>,
    bi_offsets: Vec<u32>,
    bi_ids: Vec<u32>,
    frequent: Vec<u32>,
}

/// Groups sorted `(key, next)` pairs into per-key lists of the `keep` most frequent `next`
/// (count ≥ `min_count`, ties by id); returns keys, offsets and ids.
fn top_lists<K: Copy + Eq>(
    pairs: &[(K, u32)],
    keep: usize,
    min_count: u32,
) -> (Vec<K>, Vec<u32>, Vec<u32>) {
    let (mut keys, mut offsets, mut ids) = (Vec::new(), vec![0u32], Vec::new());
    let mut counted: Vec<(u32, u32)> = Vec::new(); // (count, next)
    let mut i = 0;
    while i < pairs.len() {
        let key = pairs[i].0;
        counted.clear();
        while i < pairs.len() && pairs[i].0 == key {
            let next = pairs[i].1;
            let mut n = 0;
            while i < pairs.len() && pairs[i].0 == key && pairs[i].1 == next {
                n += 1;
                i += 1;
            }
            if n >= min_count {
                counted.push((n, next));
            }
        }
        if counted.is_empty() {
            continue;
        }
        counted.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        keys.push(key);
        ids.extend(counted.iter().take(keep).map(|&(_, w)| w));
        offsets.push(ids.len() as u32);
    }
    (keys, offsets, ids)
}

impl CandidateTable {
    /// Counts `tokens` (one stream, `<eos>` between sentences) over a vocabulary of
    /// `vocab_size` words.
    pub fn build(tokens: &[u32], vocab_size: usize, cfg: &TrigramConfig) -> Result<Self> {
        if cfg.per_context == 0 || cfg.n_frequent == 0 {
            return Err(Error::Invalid(
                "trigram table: per_context and n_frequent must be at least 1".into(),
            ));
        }
        if tokens.len() < 3 {
            return Err(Error::Invalid(format!(
                "trigram table: {} tokens are too few; give a training text of at least 3 words",
                tokens.len()
            )));
        }
        if vocab_size == 0 || vocab_size > u32::MAX as usize {
            return Err(Error::Invalid(format!(
                "trigram table: vocabulary of {vocab_size} words"
            )));
        }
        if let Some(&w) = tokens.iter().find(|&&w| w as usize >= vocab_size) {
            return Err(Error::Invalid(format!(
                "trigram table: token id {w} is outside the vocabulary of {vocab_size}; encode the text with the model's vocabulary"
            )));
        }
        let mut tri: Vec<(u64, u32)> = tokens
            .windows(3)
            .map(|w| ((w[0] as u64) << 32 | w[1] as u64, w[2]))
            .collect();
        tri.sort_unstable();
        let mut bi: Vec<(u32, u32)> = tokens.windows(2).map(|w| (w[0], w[1])).collect();
        bi.sort_unstable();
        let (tri_keys, tri_offsets, tri_ids) = top_lists(&tri, cfg.per_context, cfg.min_count);
        let (bi_keys, bi_offsets, bi_ids) = if cfg.backoff {
            top_lists(&bi, cfg.per_context, cfg.min_count)
        } else {
            (Vec::new(), vec![0], Vec::new())
        };
        let mut count = vec![0u64; vocab_size];
        for &w in &tokens[1..] {
            count[w as usize] += 1;
        }
        let mut frequent: Vec<u32> = (0..vocab_size as u32).collect();
        frequent.sort_by(|&a, &b| count[b as usize].cmp(&count[a as usize]).then(a.cmp(&b)));
        frequent.truncate(cfg.n_frequent);
        Ok(CandidateTable {
            vocab: vocab_size as u32,
            per_context: cfg.per_context as u32,
            tri_keys,
            tri_offsets,
            tri_ids,
            bi_keys,
            bi_offsets,
            bi_ids,
            frequent,
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab as usize
    }

    /// Two-word contexts with a list.
    pub fn n_trigram_contexts(&self) -> usize {
        self.tri_keys.len()
    }

    /// One-word contexts with a list (the backoff).
    pub fn n_bigram_contexts(&self) -> usize {
        self.bi_keys.len()
    }

    /// The most frequent next words after `prev2 prev1`, most frequent first (backing off to
    /// `prev1` alone); empty when neither context was seen often enough.
    pub fn potential(&self, prev2: u32, prev1: u32) -> &[u32] {
        let key = (prev2 as u64) << 32 | prev1 as u64;
        if let Ok(i) = self.tri_keys.binary_search(&key) {
            return &self.tri_ids[self.tri_offsets[i] as usize..self.tri_offsets[i + 1] as usize];
        }
        match self.bi_keys.binary_search(&prev1) {
            Ok(i) => &self.bi_ids[self.bi_offsets[i] as usize..self.bi_offsets[i + 1] as usize],
            Err(_) => &[],
        }
    }

    /// The most frequent words of the training text, most frequent first.
    pub fn frequent(&self) -> &[u32] {
        &self.frequent
    }

    /// The paper's "P + F" list of `k` distinct words (fewer only if the vocabulary is smaller):
    /// the potential words, then frequent words not already in it, then the lowest ids.
    pub fn candidates_into(&self, prev2: u32, prev1: u32, k: usize, out: &mut Vec<u32>) {
        out.clear();
        out.extend(self.potential(prev2, prev1).iter().take(k));
        let rest = self.frequent.iter().copied().chain(0..self.vocab);
        for w in rest {
            if out.len() >= k {
                break;
            }
            if !out.contains(&w) {
                out.push(w);
            }
        }
    }

    fn id_bytes(&self) -> usize {
        if self.vocab <= 1 << 16 {
            2
        } else {
            4
        }
    }

    /// The table in the binary format of the module docs.
    pub fn to_bytes(&self) -> Vec<u8> {
        let ib = self.id_bytes();
        let mut b = Vec::with_capacity(self.size_bytes());
        b.extend_from_slice(MAGIC);
        for x in [
            VERSION,
            self.vocab,
            self.per_context,
            ib as u32,
            self.tri_keys.len() as u32,
            self.tri_ids.len() as u32,
            self.bi_keys.len() as u32,
            self.bi_ids.len() as u32,
            self.frequent.len() as u32,
        ] {
            b.extend_from_slice(&x.to_le_bytes());
        }
        let pad = |b: &mut Vec<u8>| b.resize(b.len().next_multiple_of(8), 0);
        let ids = |b: &mut Vec<u8>, v: &[u32]| {
            for &x in v {
                if ib == 2 {
                    b.extend_from_slice(&(x as u16).to_le_bytes());
                } else {
                    b.extend_from_slice(&x.to_le_bytes());
                }
            }
        };
        let u32s = |b: &mut Vec<u8>, v: &[u32]| {
            v.iter().for_each(|x| b.extend_from_slice(&x.to_le_bytes()))
        };
        self.tri_keys
            .iter()
            .for_each(|x| b.extend_from_slice(&x.to_le_bytes()));
        u32s(&mut b, &self.tri_offsets);
        pad(&mut b);
        ids(&mut b, &self.tri_ids);
        pad(&mut b);
        u32s(&mut b, &self.bi_keys);
        pad(&mut b);
        u32s(&mut b, &self.bi_offsets);
        pad(&mut b);
        ids(&mut b, &self.bi_ids);
        pad(&mut b);
        u32s(&mut b, &self.frequent);
        pad(&mut b);
        b
    }

    /// Size of [`Self::to_bytes`].
    pub fn size_bytes(&self) -> usize {
        let up = |n: usize| n.next_multiple_of(8);
        let ib = self.id_bytes();
        HEADER
            + up(self.tri_keys.len() * 8 + self.tri_offsets.len() * 4)
            + up(self.tri_ids.len() * ib)
            + up(self.bi_keys.len() * 4)
            + up(self.bi_offsets.len() * 4)
            + up(self.bi_ids.len() * ib)
            + up(self.frequent.len() * 4)
    }

    /// Reads and checks a table written by [`Self::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let bad = |what: &str| {
            Err(Error::Invalid(format!(
                "trigram table: {what}; the file is corrupt or from another tool — rebuild it with `fastsoftmax train-head candidates`"
            )))
        };
        if bytes.len() < HEADER || &bytes[..4] != MAGIC {
            return bad("not a candidate table (bad magic bytes)");
        }
        let word = |i: usize| u32::from_le_bytes(bytes[4 + 4 * i..8 + 4 * i].try_into().unwrap());
        let [version, vocab, per_context, ib, n_tri, n_tri_ids, n_bi, n_bi_ids, n_freq] =
            std::array::from_fn(word);
        if version != VERSION {
            return bad(&format!(
                "format version {version}, this engine reads {VERSION}"
            ));
        }
        let ib = ib as usize;
        if !(ib == 2 || ib == 4) || (ib == 2) != (vocab <= 1 << 16) || vocab == 0 {
            return bad("inconsistent id width");
        }
        let (n_tri, n_tri_ids, n_bi, n_bi_ids, n_freq) = (
            n_tri as usize,
            n_tri_ids as usize,
            n_bi as usize,
            n_bi_ids as usize,
            n_freq as usize,
        );
        let up = |n: usize| n.next_multiple_of(8);
        let want = HEADER
            + up(n_tri * 8 + (n_tri + 1) * 4)
            + up(n_tri_ids * ib)
            + up(n_bi * 4)
            + up((n_bi + 1) * 4)
            + up(n_bi_ids * ib)
            + up(n_freq * 4);
        if bytes.len() != want {
            return bad(&format!(
                "{} bytes where the header needs {want} (truncated?)",
                bytes.len()
            ));
        }
        let mut at = HEADER;
        let mut take = |n: usize, width: usize| {
            let s = &bytes[at..at + n * width];
            at += n * width;
            s
        };
        let u32v = |s: &[u8]| -> Vec<u32> {
            s.chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let idv = |s: &[u8]| -> Vec<u32> {
            if ib == 2 {
                s.chunks_exact(2)
                    .map(|c| u16::from_le_bytes(c.try_into().unwrap()) as u32)
                    .collect()
            } else {
                u32v(s)
            }
        };
        let tri_keys: Vec<u64> = take(n_tri, 8)
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let tri_offsets = u32v(take(n_tri + 1, 4));
        at = up(at);
        let mut take = |n: usize, width: usize| {
            let s = &bytes[at..at + n * width];
            at = up(at + n * width);
            s
        };
        let tri_ids = idv(take(n_tri_ids, ib));
        let bi_keys = u32v(take(n_bi, 4));
        let bi_offsets = u32v(take(n_bi + 1, 4));
        let bi_ids = idv(take(n_bi_ids, ib));
        let frequent = u32v(take(n_freq, 4));
        let lists_ok = |offsets: &[u32], n_ids: usize| {
            offsets.first() == Some(&0)
                && offsets.last() == Some(&(n_ids as u32))
                && offsets
                    .windows(2)
                    .all(|w| w[0] < w[1] && w[1] - w[0] <= per_context)
        };
        if !tri_keys.windows(2).all(|w| w[0] < w[1]) || !bi_keys.windows(2).all(|w| w[0] < w[1]) {
            return bad("context keys are not sorted");
        }
        if !lists_ok(&tri_offsets, n_tri_ids) || !lists_ok(&bi_offsets, n_bi_ids) {
            return bad("list offsets are out of order or out of range");
        }
        let in_range = |v: &[u32]| v.iter().all(|&w| w < vocab);
        let keys_in_range = tri_keys
            .iter()
            .all(|&k| ((k >> 32) as u32) < vocab && (k as u32) < vocab)
            && in_range(&bi_keys);
        if !keys_in_range || !in_range(&tri_ids) || !in_range(&bi_ids) || !in_range(&frequent) {
            return bad(&format!("a word id is outside the vocabulary of {vocab}"));
        }
        Ok(CandidateTable {
            vocab,
            per_context,
            tri_keys,
            tri_offsets,
            tri_ids,
            bi_keys,
            bi_offsets,
            bi_ids,
            frequent,
        })
    }

    /// Writes the table atomically (write, then rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        crate::files::write_atomic(path, &self.to_bytes())
    }

    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Self::from_bytes(&bytes).map_err(|e| Error::format(path, e.to_string()))
    }

    /// The table of the head in `dir`, from the verified bytes [`format::read_head`] read.
    pub fn from_head(dir: &Path, t: &Tensors) -> Result<Self> {
        Self::from_bytes(t.file(TRIGRAM_TABLE)?)
            .map_err(|e| Error::format(dir.join(TRIGRAM_TABLE), e.to_string()))
    }
}

/// The trigram model alone as a predictor (the paper's "N-gram" row): the candidate list in
/// the table's order, potential words by frequency, then frequent words. Saved by
/// `train-head candidates` beside the network as `NAME-trigram` (kind `trigram`).
#[derive(Debug, Clone)]
pub struct TrigramHead {
    name: String,
    table: CandidateTable,
    /// Id read before the start of a text.
    pad: u32,
}

thread_local! {
    static LIST: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl TrigramHead {
    pub fn new(name: &str, table: CandidateTable, pad: u32) -> Result<Self> {
        if pad as usize >= table.vocab_size() {
            return Err(Error::Invalid(format!(
                "trigram head: padding id {pad} is outside the vocabulary of {}",
                table.vocab_size()
            )));
        }
        Ok(TrigramHead {
            name: name.into(),
            table,
            pad,
        })
    }

    pub fn table(&self) -> &CandidateTable {
        &self.table
    }

    /// Writes the head to `dir` (atomically): the table as `trigram.bin`.
    pub fn save(
        &self,
        dir: &Path,
        output: &impl AsRef<FullHead>,
        training: serde_json::Value,
    ) -> Result<()> {
        let mut m = HeadManifest::new("trigram", output, serde_json::json!({ "pad": self.pad }));
        m.training = training;
        let bytes = self.table.to_bytes();
        format::save_head(dir, &m, &Tensors::default(), &[(TRIGRAM_TABLE, &bytes)])
    }

    /// Builds the head from a head directory's contents (already checked against the model).
    pub fn from_files(name: &str, dir: &Path, m: &HeadManifest, t: &Tensors) -> Result<Self> {
        let pad = m.params["pad"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(|| {
                Error::format(
                    dir.join(format::HEAD_MANIFEST),
                    "`params.pad` is missing or not a word id; retrain the head",
                )
            })?;
        Self::new(name, CandidateTable::from_head(dir, t)?, pad)
    }
}

impl Predictor for TrigramHead {
    fn name(&self) -> &str {
        &self.name
    }
    fn vocab_size(&self) -> usize {
        self.table.vocab_size()
    }
    fn context_width(&self) -> usize {
        0
    }
    fn history_len(&self) -> usize {
        2
    }
    /// Scores are `−rank`.
    fn predict_into(&self, ctx: Context<'_>, k: usize, out: &mut TopK) {
        let h = ctx.history;
        let at = |back: usize| h.len().checked_sub(back).map_or(self.pad, |i| h[i]);
        out.reset(k);
        LIST.with(|l| {
            let l = &mut *l.borrow_mut();
            self.table.candidates_into(at(2), at(1), k, l);
            for (rank, &w) in l.iter().enumerate() {
                out.push(w, -(rank as f32));
            }
        });
    }
    /// A binary search, no multiply-adds.
    fn cost(&self, _ctx: Context<'_>) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Words: 0 <eos>, 1 the, 2 cat, 3 sat, 4 dog, 5 ran, 6 <unk>, 7 never seen.
    fn stream() -> Vec<u32> {
        let mut t = vec![0];
        for s in [[1, 2, 3], [1, 2, 3], [1, 2, 5], [1, 4, 5], [1, 6, 6]] {
            t.extend(s);
            t.push(0);
        }
        t
    }

    fn cfg(min_count: u32, backoff: bool) -> TrigramConfig {
        TrigramConfig {
            per_context: 2,
            min_count,
            n_frequent: 4,
            backoff,
        }
    }

    #[test]
    fn lists_hold_the_most_frequent_next_words_above_the_threshold() {
        let t = CandidateTable::build(&stream(), 8, &cfg(1, true)).unwrap();
        assert_eq!(t.potential(1, 2), &[3, 5]); // "the cat" → sat ×2, ran ×1
        assert_eq!(t.potential(0, 1), &[2, 4]); // after <eos> the: cat ×3, dog ×1, <unk> ×1
        let t2 = CandidateTable::build(&stream(), 8, &cfg(2, true)).unwrap();
        assert_eq!(t2.potential(1, 2), &[3]); // "ran" once: dropped
        assert_eq!(t2.potential(1, 4), &[] as &[u32]); // "the dog ran" once, "dog" → ran once
                                                       // Backoff: "<unk> cat" was never seen, "cat" alone was.
        assert_eq!(t.potential(6, 2), &[3, 5]);
        let plain = CandidateTable::build(&stream(), 8, &cfg(1, false)).unwrap();
        assert_eq!(plain.potential(6, 2), &[] as &[u32]);
        assert_eq!(t.frequent(), &[0, 1, 2, 3]); // <eos> 5, the 5, cat 3, sat 2 (ties by id)
    }

    #[test]
    fn candidate_lists_are_distinct_in_range_and_filled_with_frequent_words() {
        let t = CandidateTable::build(&stream(), 8, &cfg(1, true)).unwrap();
        let mut out = Vec::new();
        // "the <unk>" → <unk> is both potential and frequent: once.
        t.candidates_into(1, 6, 5, &mut out);
        assert_eq!(out, vec![6, 0, 1, 2, 3]);
        // k larger than the vocabulary: every word once.
        t.candidates_into(3, 0, 20, &mut out);
        let mut all = out.clone();
        all.sort();
        assert_eq!(all, (0..8).collect::<Vec<u32>>());
    }

    #[test]
    fn the_binary_format_round_trips_and_corruption_is_an_error() {
        let t = CandidateTable::build(&stream(), 8, &cfg(1, true)).unwrap();
        let bytes = t.to_bytes();
        assert_eq!(bytes.len(), t.size_bytes());
        assert_eq!(CandidateTable::from_bytes(&bytes).unwrap(), t);
        assert!(CandidateTable::from_bytes(&bytes[..bytes.len() - 8]).is_err());
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert!(CandidateTable::from_bytes(&bad)
            .unwrap_err()
            .to_string()
            .contains("magic"));
        // An id past the vocabulary in the frequent list (the last array).
        let mut bad = bytes.clone();
        let at = bad.len() - (t.frequent().len() * 4).next_multiple_of(8);
        bad[at..at + 4].copy_from_slice(&99u32.to_le_bytes());
        assert!(CandidateTable::from_bytes(&bad).is_err());
        // Unsorted keys.
        let mut bad = bytes.clone();
        let (a, b) = (
            bad[HEADER..HEADER + 8].to_vec(),
            bad[HEADER + 8..HEADER + 16].to_vec(),
        );
        bad[HEADER..HEADER + 8].copy_from_slice(&b);
        bad[HEADER + 8..HEADER + 16].copy_from_slice(&a);
        assert!(CandidateTable::from_bytes(&bad).is_err());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        t.save(&p).unwrap();
        assert_eq!(CandidateTable::load(&p).unwrap(), t);
        assert!(CandidateTable::build(&[0, 9, 1], 8, &cfg(1, true)).is_err());
        assert!(CandidateTable::build(&[0, 1], 8, &cfg(1, true)).is_err());
    }
}
