//! LSH-MIPS (Neyshabur & Srebro, 2015, "simple LSH"), a baseline of the L2S paper: reduce MIPS
//! to angular search ([`Augmented`]: rows `[w_i, b_i, sqrt(φ² − ‖x_i‖²)]`, all of norm `φ`,
//! query `[h, 1, 0]`), then hash with sign random projections in `T` tables of `B` bits.
//! Named `lsh-bB-tT`.
//!
//! A bit is `sign(a · r)` for a Gaussian vector `a`; two vectors agree on it with probability
//! `1 − angle/π`. Every row has the same norm, so a smaller angle to the query is a larger
//! logit; the query needs no normalising (a sign ignores scale). Each table keys a word by `B`
//! bits; a query is hashed into every table, the union of its `T` buckets gets exact logits,
//! and the top-k of those is the answer. If the union holds fewer than `k` words, the query
//! falls back to the full softmax (and pays for it). `B = 0` puts every word in one bucket: the
//! exact full softmax.
//!
//! [`LshIndex`] is built once for up to `max_bits` bits and `max_tables` tables and shared
//! (through `Arc`) by heads of any `B ≤ max_bits`, `T ≤ max_tables`: a head uses the first `B`
//! bits of the first `T` tables. Each table lists the words sorted by their `max_bits`-bit code,
//! first bit most significant, so the words sharing a `B`-bit prefix are one contiguous run,
//! found by binary search. Projections come from a fixed seed through a small SplitMix64 +
//! Box–Muller generator, one stream per (table, bit), so two builds are identical and a head's
//! answers do not depend on the maxima of the index it shares.
//!
//! Cost per query, in length-`d` dot products: `B·T (d + 1)/d` (projections of `[h, 1]`; the
//! lift coordinate meets the query's 0) + the words in the union (+ `vocab` on a fallback),
//! against `vocab` for the full softmax. Bucket look-ups (`2 log₂ vocab` comparisons per table)
//! and duplicate checks are not multiply-adds and are not counted. The fallback depends on `k`,
//! so [`SoftmaxHead::cost`] reports a top-[`K_MAX`] query, the `k` the benchmarks run, and
//! [`LshHead::cost_k`] any other.

use std::cell::RefCell;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::full::FullHead;
use crate::heads::mips::Augmented;
use crate::kernels::rows::{ExactRows, Stamps};
use crate::kernels::{dot, PackedMatrix};
use crate::topk::TopK;
use crate::topk::K_MAX;

/// Seed of [`LshIndex::new`]'s projections.
pub const DEFAULT_SEED: u64 = 0x5eed_15b5;

/// Most bits per table (codes are `u32`).
pub const MAX_BITS: usize = 32;

/// Sign-random-projection tables over the augmented output layer.
#[derive(Debug, Clone)]
pub struct LshIndex {
    d: usize,
    max_bits: usize,
    max_tables: usize,
    seed: u64,
    /// `[max_tables, max_bits, d + 1]`: Gaussian projection vectors on the query's coordinates
    /// `[h, 1]` (their lift coordinate only ever meets the query's 0).
    projections: Vec<f32>,
    /// `[max_tables, vocab]`: each table's codes, ascending.
    codes: Vec<u32>,
    /// `[max_tables, vocab]`: the word of each code (ids ascending among equal codes).
    ids: Vec<u32>,
    /// The output layer, for exact logits.
    exact: ExactRows,
    /// The packed output layer, for the fallback.
    full: Arc<PackedMatrix>,
}

impl PartialEq for LshIndex {
    /// Same knobs, projections and tables (the exact layer is the one it was built from).
    fn eq(&self, o: &Self) -> bool {
        (self.d, self.max_bits, self.max_tables, self.seed)
            == (o.d, o.max_bits, o.max_tables, o.seed)
            && self.projections == o.projections
            && self.codes == o.codes
            && self.ids == o.ids
    }
}

impl LshIndex {
    /// Tables for up to `max_bits` (`0..=32`) bits and `max_tables` (≥ 1) tables, from
    /// [`DEFAULT_SEED`].
    pub fn new(full: &FullHead, max_bits: usize, max_tables: usize) -> Result<Self> {
        Self::with_seed(full, max_bits, max_tables, DEFAULT_SEED)
    }

    /// [`Self::new`] with the projections drawn from `seed`.
    pub fn with_seed(
        full: &FullHead,
        max_bits: usize,
        max_tables: usize,
        seed: u64,
    ) -> Result<Self> {
        if max_bits > MAX_BITS || max_tables == 0 {
            return Err(Error::Invalid(format!(
                "lsh: {max_bits} bits × {max_tables} tables: choose 0 ≤ bits ≤ {MAX_BITS} and \
                 tables ≥ 1"
            )));
        }
        let (d, vocab) = (full.dim(), full.vocab_size());
        let aug = Augmented::new(full);
        let dim = aug.dim;
        // Projection (table t, bit j) has a generator of its own, so `lsh-bB-tT` hashes the
        // same way whatever the index's maxima.
        let full_proj: Vec<f32> = (0..max_tables)
            .flat_map(|t| (0..max_bits).map(move |j| (t, j)))
            .flat_map(|(t, j)| {
                let key = (t * MAX_BITS + j) as u64 + 1;
                let mut rng = SplitMix64(seed ^ key.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                (0..dim).map(move |_| rng.gaussian() as f32)
            })
            .collect();
        let mut codes = Vec::with_capacity(max_tables * vocab);
        let mut ids = Vec::with_capacity(max_tables * vocab);
        let mut keyed: Vec<(u32, u32)> = Vec::with_capacity(vocab);
        for t in 0..max_tables {
            let table = &full_proj[t * max_bits * dim..(t + 1) * max_bits * dim];
            keyed.clear();
            keyed.extend((0..vocab).map(|i| {
                let r = aug.row(i);
                let code = table
                    .chunks_exact(dim)
                    .fold(0u32, |c, a| c << 1 | (dot(a, r) > 0.0) as u32);
                (code, i as u32)
            }));
            // Stable: words of equal codes stay in id order, so the tables are deterministic.
            keyed.sort_by_key(|&(c, _)| c);
            codes.extend(keyed.iter().map(|&(c, _)| c));
            ids.extend(keyed.iter().map(|&(_, i)| i));
        }
        Ok(LshIndex {
            d,
            max_bits,
            max_tables,
            seed,
            projections: full_proj
                .chunks_exact(dim)
                .flat_map(|a| a[..d + 1].to_vec())
                .collect(),
            codes,
            ids,
            exact: ExactRows::new(full.matrix(), None),
            full: full.matrix().clone(),
        })
    }

    pub fn dim(&self) -> usize {
        self.d
    }

    pub fn vocab_size(&self) -> usize {
        self.exact.len()
    }

    pub fn max_bits(&self) -> usize {
        self.max_bits
    }

    pub fn max_tables(&self) -> usize {
        self.max_tables
    }

    /// Table `t`'s words whose code starts with the `bits`-bit `key`.
    #[inline]
    fn bucket(&self, t: usize, bits: usize, key: u32) -> &[u32] {
        let vocab = self.vocab_size();
        let codes = &self.codes[t * vocab..(t + 1) * vocab];
        let shift = self.max_bits - bits;
        let lo = (key as u64) << shift;
        let hi = (key as u64 + 1) << shift;
        let start = codes.partition_point(|&c| (c as u64) < lo);
        let end = start + codes[start..].partition_point(|&c| (c as u64) < hi);
        &self.ids[t * vocab + start..t * vocab + end]
    }
}

/// SplitMix64 (Steele et al., 2014): a tiny seeded generator, enough for projection vectors.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `(0, 1]`.
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller, cosine branch).
    fn gaussian(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// Per-thread scratch, so queries do not allocate once warm.
#[derive(Default)]
struct Scratch {
    /// The words in this query's union.
    seen: Stamps,
    /// `[B·T]`: the query's projections.
    proj: Vec<f32>,
    /// `[≤ vocab]`: the union, bucket by bucket.
    found: Vec<u32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// LSH-MIPS with `B` bits in each of `T` tables of a shared [`LshIndex`].
#[derive(Debug, Clone)]
pub struct LshHead {
    name: String,
    index: Arc<LshIndex>,
    bits: usize,
    tables: usize,
    /// `[T·B, d]` with bias: the head's projection vectors, packed so hashing a query is one
    /// small matrix-vector product.
    proj: PackedMatrix,
}

impl LshHead {
    /// The head hashing with the first `bits` (`0..=index.max_bits()`) bits of the first
    /// `tables` (`1..=index.max_tables()`) tables.
    pub fn new(index: Arc<LshIndex>, bits: usize, tables: usize) -> Result<Self> {
        let (mb, mt) = (index.max_bits, index.max_tables);
        if bits > mb || tables == 0 || tables > mt {
            return Err(Error::Invalid(format!(
                "lsh: {bits} bits × {tables} tables is out of range for this index: choose \
                 0 ≤ bits ≤ {mb} and 1 ≤ tables ≤ {mt} (more bits: smaller buckets, faster and \
                 less precise; more tables: larger unions; bits = 0 is the exact full softmax), \
                 or build the index with more"
            )));
        }
        let d = index.d;
        let mut w = Vec::with_capacity(tables * bits * d);
        let mut b = Vec::with_capacity(tables * bits);
        for t in 0..tables {
            for j in 0..bits {
                let a = &index.projections[(t * mb + j) * (d + 1)..(t * mb + j + 1) * (d + 1)];
                w.extend_from_slice(&a[..d]);
                b.push(a[d]);
            }
        }
        Ok(LshHead {
            name: format!("lsh-b{bits}-t{tables}"),
            proj: PackedMatrix::new(&w, &b, d, None),
            index,
            bits,
            tables,
        })
    }

    /// `(B, T)` if `name` is `lsh-bB-tT`.
    pub fn parse_name(name: &str) -> Option<(usize, usize)> {
        let (b, t) = name.strip_prefix("lsh-b")?.split_once("-t")?;
        Some((b.parse().ok()?, t.parse().ok()?))
    }

    pub fn bits(&self) -> usize {
        self.bits
    }

    pub fn tables(&self) -> usize {
        self.tables
    }

    pub fn index(&self) -> &Arc<LshIndex> {
        &self.index
    }

    /// Hashes `h` into every table and lists the union of its buckets in `s.found`.
    fn union(&self, h: &[f32], s: &mut Scratch) {
        let ix = &*self.index;
        let bits = self.bits;
        s.seen.clear(ix.vocab_size());
        s.found.clear();
        s.proj.resize(self.tables * bits, 0.0);
        if bits > 0 {
            self.proj.logits_into(h, &mut s.proj);
        }
        for t in 0..self.tables {
            let key = s.proj[t * bits..(t + 1) * bits]
                .iter()
                .fold(0u32, |c, &p| c << 1 | (p > 0.0) as u32);
            for &i in ix.bucket(t, bits, key) {
                if s.seen.insert(i as usize) {
                    s.found.push(i);
                }
            }
        }
    }

    /// [`SoftmaxHead::cost`] of a top-`k` query (which falls back to the full softmax when the
    /// union holds fewer than `k` words).
    pub fn cost_k(&self, h: &[f32], k: usize) -> usize {
        let (d, vocab) = (self.index.d as f64, self.vocab_size());
        let n = SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            self.union(h, s);
            s.found.len()
        });
        let hashing = (self.bits * self.tables) as f64 * (d + 1.0) / d;
        hashing.ceil() as usize + n + if n < k { vocab } else { 0 }
    }
}

impl SoftmaxHead for LshHead {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.index.d
    }
    fn vocab_size(&self) -> usize {
        self.index.vocab_size()
    }

    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        let ix = &*self.index;
        out.reset(k);
        let n = SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            self.union(h, s);
            ix.exact.push_rows(&s.found, h, out);
            s.found.len()
        });
        if n < k {
            out.reset(k);
            ix.full.scan_into(h, out);
        }
    }

    /// The cost of a top-[`K_MAX`] query, the `k` the benchmarks run (see [`LshHead::cost_k`]).
    fn cost(&self, h: &[f32]) -> usize {
        self.cost_k(h, K_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    fn ids(head: &dyn SoftmaxHead, h: &[f32], k: usize) -> Vec<u32> {
        head.top_k(h, k).unwrap().iter().map(|s| s.id).collect()
    }

    #[test]
    fn zero_bits_is_the_full_softmax_and_builds_are_deterministic() {
        let (v, d) = (300, 16);
        let full = FullHead::new(&values(v * d, 1), &values(v, 2), d).unwrap();
        let index = Arc::new(LshIndex::new(&full, 12, 4).unwrap());
        let head = LshHead::new(index.clone(), 0, 3).unwrap();
        assert_eq!(head.name(), "lsh-b0-t3");
        for h in values(40 * d, 3).chunks(d) {
            assert_eq!(ids(&head, h, 10), ids(&full, h, 10));
            assert_eq!(head.cost(h), v);
        }
        assert_eq!(LshIndex::new(&full, 12, 4).unwrap(), *index);
        assert_ne!(LshIndex::with_seed(&full, 12, 4, 7).unwrap(), *index);
        // Every table lists every word once, codes ascending.
        for t in 0..4 {
            let mut words = index.ids[t * v..(t + 1) * v].to_vec();
            words.sort_unstable();
            assert_eq!(words, (0..v as u32).collect::<Vec<_>>());
            assert!(index.codes[t * v..(t + 1) * v].is_sorted());
        }
        // The Gaussian generator: mean ≈ 0, variance ≈ 1.
        let mut rng = SplitMix64(1);
        let x: Vec<f64> = (0..20_000).map(|_| rng.gaussian()).collect();
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / x.len() as f64;
        assert!(
            mean.abs() < 0.03 && (var - 1.0).abs() < 0.05,
            "{mean} {var}"
        );
    }

    #[test]
    fn mid_range_tables_find_the_top_word_and_more_bits_cost_less() {
        // Structured fixture: words in 16 well-separated groups, contexts near one group.
        let (v, d, groups) = (2048, 16, 16);
        let centres = values(groups * d, 4);
        let noise = values(v * d, 5);
        let w: Vec<f32> = (0..v * d)
            .map(|i| 2.0 * centres[(i / d % groups) * d + i % d] + 0.3 * noise[i])
            .collect();
        let full = FullHead::new(&w, &vec![0.0; v], d).unwrap();
        let index = Arc::new(LshIndex::new(&full, 16, 8).unwrap());
        let picks = values(200 * d, 6);
        let hs: Vec<f32> = picks
            .chunks(d)
            .enumerate()
            .flat_map(|(q, p)| {
                let (g, centres) = (q % groups, &centres);
                (0..d).map(move |j| 3.0 * centres[g * d + j] + 0.5 * p[j])
            })
            .collect();
        let agree = |bits: usize, tables: usize| {
            let head = LshHead::new(index.clone(), bits, tables).unwrap();
            let hits = hs
                .chunks(d)
                .filter(|h| ids(&head, h, 1) == ids(&full, h, 1))
                .count();
            let cost: usize = hs.chunks(d).map(|h| head.cost_k(h, 1)).sum();
            (hits as f64 / 200.0, cost as f64 / 200.0)
        };
        // More tables: a larger union, a better P@1; more bits: smaller buckets.
        let (p8, c8) = agree(6, 8);
        let (p2, c2) = agree(6, 2);
        let (_, c4_bits) = agree(4, 8);
        assert!(p8 >= 0.8 && p8 >= p2, "P@1 {p8} {p2}");
        assert!(
            c2 < c8 && c8 < c4_bits && c8 < v as f64 * 0.4,
            "{c2} {c8} {c4_bits}"
        );
    }

    #[test]
    fn small_unions_fall_back_and_bad_knobs_are_errors() {
        let (v, d) = (64, 8);
        let full = FullHead::new(&values(v * d, 7), &values(v, 8), d).unwrap();
        let index = Arc::new(LshIndex::new(&full, 32, 2).unwrap());
        // 32 bits on 64 words: buckets of about one word, so top-10 needs the fallback.
        let head = LshHead::new(index.clone(), 32, 1).unwrap();
        for h in values(10 * d, 9).chunks(d) {
            assert_eq!(ids(&head, h, 10), ids(&full, h, 10));
            assert!(head.cost_k(h, 10) > v);
        }
        let err = LshHead::new(index.clone(), 33, 1).unwrap_err().to_string();
        assert!(
            err.contains("0 ≤ bits ≤ 32") && err.contains("1 ≤ tables ≤ 2"),
            "{err}"
        );
        assert!(LshHead::new(index.clone(), 8, 0).is_err());
        assert!(LshHead::new(index, 8, 3).is_err());
        assert!(LshIndex::new(&full, 33, 1).is_err());
        assert!(LshIndex::new(&full, 8, 0).is_err());
        assert_eq!(LshHead::parse_name("lsh-b16-t8"), Some((16, 8)));
        assert_eq!(LshHead::parse_name("lsh-b16"), None);
        assert_eq!(LshHead::parse_name("lsh-16-t8"), None);
    }

    #[test]
    fn a_setting_hashes_the_same_in_any_index_that_holds_it() {
        let (v, d) = (400, 12);
        let full = FullHead::new(&values(v * d, 31), &values(v, 32), d).unwrap();
        let small = Arc::new(LshIndex::new(&full, 4, 3).unwrap());
        let large = Arc::new(LshIndex::new(&full, 12, 9).unwrap());
        let a = LshHead::new(small, 4, 3).unwrap();
        let b = LshHead::new(large, 4, 3).unwrap();
        for h in values(30 * d, 33).chunks(d) {
            assert_eq!(a.top_k(h, 5).unwrap(), b.top_k(h, 5).unwrap());
            assert_eq!(a.cost(h), b.cost(h));
        }
    }
}
