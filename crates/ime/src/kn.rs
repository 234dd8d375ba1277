//! Interpolated modified Kneser–Ney n-gram models (Chen & Goodman 1998; KenLM's estimation):
//! the IME paper's n-gram baselines (its Table 1), estimated here from word ids.
//!
//! - The highest order counts n-grams; every lower order counts *continuations*: the number of
//!   distinct words seen before the n-gram (n-grams that start a sentence keep their own count,
//!   since nothing can precede them).
//! - Each order has three discounts `D1, D2, D3+` from its count-of-counts `t1..t4`:
//!   `Y = t1 / (t1 + 2 t2)`, `Dk = k − (k + 1) Y t(k+1) / tk`.
//! - `p(w | h) = (a(hw) − D(a(hw))) / a(h·) + γ(h) p(w | h')` with
//!   `γ(h) = (D1 N1(h·) + D2 N2(h·) + D3+ N3+(h·)) / a(h·)`, where `h'` drops the oldest word,
//!   and the unigrams interpolate with the uniform distribution over the vocabulary. A history
//!   never seen at an order passes straight to the next lower one.
//!
//! Sentences are scored from a start symbol (only ever a history) to an end symbol (predicted).
//!
//! [`KneserNey::adapt`] moves a model toward other unigram frequencies (see [`crate::adapt`]):
//! `p'(w | h) = p(w | h) α(w) / Z(h)`. The normaliser follows the same recursion as `p`,
//! `Z(h) = Σ_{w seen after h} ((a(hw) − D) / a(h·)) α(w) + γ(h) Z(h')`, so it costs one more
//! lookup per order, not a sum over the vocabulary.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use fastsoftmax_infer::{Error, Result};

use crate::decode::Scorer;

/// Bits per word id in a packed n-gram key (3 × 21 bits fit a `u64`).
const ID_BITS: u32 = 21;
/// Longest n-gram.
pub const MAX_ORDER: usize = 3;

/// The n-gram tables: packed keys hashed by MurmurHash3's 64-bit finaliser, several times
/// cheaper than the default SipHash on the decoder's per-word lookups, and deterministic (so
/// are the estimate's sums over the tables).
pub(crate) type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }

    fn write_u64(&mut self, k: u64) {
        self.0 = k;
    }

    fn finish(&self) -> u64 {
        let mut k = self.0;
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^ (k >> 33)
    }
}

fn key(ids: &[u32]) -> u64 {
    ids.iter().fold(0u64, |k, &w| (k << ID_BITS) | w as u64)
}

/// One order's discounted n-gram probabilities and back-off weights.
#[derive(Debug, Clone, Default)]
struct Order {
    /// `[D1, D2, D3+]`
    discounts: [f64; 3],
    /// n-gram → `(a(hw) − D) / a(h·)`.
    ngrams: KeyMap<f32>,
    /// history → `γ(h)`.
    histories: KeyMap<f32>,
    /// With [`KneserNey::adapt`]: history → `Σ_{w seen after h} ((a(hw) − D) / a(h·)) α(w)`.
    adapted_mass: KeyMap<f64>,
}

/// A model's stored parts ([`KneserNey::parts`]).
pub(crate) struct Parts<'a> {
    pub vocab_size: usize,
    pub start: u32,
    /// Per order: discounts, n-grams, histories.
    pub orders: Vec<([f64; 3], &'a KeyMap<f32>, &'a KeyMap<f32>)>,
    pub ln_alpha: Vec<f32>,
}

/// An interpolated modified Kneser–Ney model over word ids `0..vocab_size`.
#[derive(Debug, Clone)]
pub struct KneserNey {
    vocab_size: usize,
    start: u32,
    /// `orders[n - 1]` holds the n-grams.
    orders: Vec<Order>,
    /// `α(w)` of [`KneserNey::adapt`], one per word; empty when not adapted.
    alpha: Vec<f64>,
    /// The mean of `alpha`: the uniform distribution's share of `Z`.
    mean_alpha: f64,
}

/// The discounts of one order from its count-of-counts `t[k] = #n-grams with count k + 1`.
/// Tiny corpora can leave a `tk` at zero, where the formula breaks down: a discount that is not
/// in `[0, k]` falls back to `k / 2` (absolute discounting's usual constant scaled per count).
fn discounts(t: [u64; 4]) -> [f64; 3] {
    let t = t.map(|x| x as f64);
    let y = t[0] / (t[0] + 2.0 * t[1]);
    std::array::from_fn(|i| {
        let k = (i + 1) as f64;
        let d = k - (k + 1.0) * y * t[i + 1] / t[i];
        if d.is_finite() && d > 0.0 && d <= k {
            d
        } else {
            k / 2.0
        }
    })
}

impl KneserNey {
    /// Estimates an `order`-gram model (1 ≤ order ≤ [`MAX_ORDER`]) from `sentences` of word ids.
    /// `start` is the sentence-start history symbol and `end` the end symbol appended to every
    /// sentence; both must be ids below `vocab_size`.
    pub fn estimate(
        sentences: &[Vec<u32>],
        order: usize,
        vocab_size: usize,
        start: u32,
        end: u32,
    ) -> Result<Self> {
        if !(1..=MAX_ORDER).contains(&order) {
            return Err(Error::Invalid(format!(
                "n-gram order {order} is not supported: use 1, 2 or 3"
            )));
        }
        if vocab_size == 0 || vocab_size >= 1 << ID_BITS {
            return Err(Error::Invalid(format!(
                "vocabulary of {vocab_size} words: n-gram models take 1 to {} words",
                (1u32 << ID_BITS) - 1
            )));
        }
        let valid = |w: u32| (w as usize) < vocab_size;
        if !valid(start) || !valid(end) {
            return Err(Error::Invalid(
                "start or end symbol outside the vocabulary".into(),
            ));
        }
        // Raw counts of the highest order and of every n-gram that starts a sentence (which
        // keeps its raw count at every order); continuation counts of the lower orders. Keys
        // are packed ids: n-grams of one order all have the same length, so packing is unique.
        let mut counts: Vec<KeyMap<u64>> = vec![KeyMap::default(); order];
        // Per suffix length: the (left word + suffix) extensions seen.
        let mut seen_extension: Vec<HashSet<u64>> = vec![HashSet::new(); order];
        let mut seq = Vec::new();
        for (n, s) in sentences.iter().enumerate() {
            if let Some(&w) = s.iter().find(|&&w| !valid(w)) {
                return Err(Error::Invalid(format!(
                    "sentence {n} has word id {w}, outside the vocabulary of {vocab_size}"
                )));
            }
            seq.clear();
            seq.push(start);
            seq.extend_from_slice(s);
            seq.push(end);
            for i in 1..seq.len() {
                // The longest n-gram ending at i (shorter at the sentence start).
                let first = i.saturating_sub(order - 1);
                let gram = &seq[first..=i];
                *counts[gram.len() - 1].entry(key(gram)).or_default() += 1;
                // Every suffix of it: a lower-order n-gram continued by the word before it.
                for j in first + 1..=i {
                    let len = i + 1 - j;
                    if seen_extension[len].insert(key(&seq[j - 1..=i])) {
                        *counts[len - 1].entry(key(&seq[j..=i])).or_default() += 1;
                    }
                }
            }
        }
        drop(seen_extension);
        let orders = counts
            .iter()
            .map(|grams| {
                let mut t = [0u64; 4];
                for &c in grams.values() {
                    if (1..=4).contains(&c) {
                        t[c as usize - 1] += 1;
                    }
                }
                let d = discounts(t);
                let discount = |c: u64| d[(c.min(3) - 1) as usize];
                // a(h·) and Σ_k Dk Nk(h·) per history (the n-gram key without its last word).
                let mut per_history: KeyMap<(f64, f64)> = KeyMap::default();
                for (&g, &c) in grams {
                    let e = per_history.entry(g >> ID_BITS).or_default();
                    e.0 += c as f64;
                    e.1 += discount(c);
                }
                Order {
                    discounts: d,
                    ngrams: grams
                        .iter()
                        .map(|(&g, &c)| {
                            let total = per_history[&(g >> ID_BITS)].0;
                            (g, ((c as f64 - discount(c)) / total) as f32)
                        })
                        .collect(),
                    histories: per_history
                        .iter()
                        .map(|(&h, &(total, mass))| (h, (mass / total) as f32))
                        .collect(),
                    adapted_mass: KeyMap::default(),
                }
            })
            .collect();
        Ok(KneserNey {
            vocab_size,
            start,
            orders,
            alpha: Vec::new(),
            mean_alpha: 1.0,
        })
    }

    /// Unigram adaptation: `p'(w | h) = p(w | h) α(w) / Z(h)` with `ln α(w) = ln_alpha[w]`
    /// (one per word, finite), every history's distribution renormalised exactly.
    pub fn adapt(&mut self, ln_alpha: &[f32]) -> Result<()> {
        if ln_alpha.len() != self.vocab_size {
            return Err(Error::Invalid(format!(
                "unigram adaptation: {} shifts for a vocabulary of {} words",
                ln_alpha.len(),
                self.vocab_size
            )));
        }
        if let Some(w) = ln_alpha.iter().position(|x| !x.is_finite()) {
            return Err(Error::Invalid(format!(
                "unigram adaptation: the shift of word {w} is not a finite number"
            )));
        }
        self.alpha = ln_alpha.iter().map(|&x| (x as f64).exp()).collect();
        self.mean_alpha = self.alpha.iter().sum::<f64>() / self.vocab_size as f64;
        let mask = (1u64 << ID_BITS) - 1;
        for order in &mut self.orders {
            let mut mass: KeyMap<f64> = KeyMap::default();
            for (&g, &p) in &order.ngrams {
                *mass.entry(g >> ID_BITS).or_default() +=
                    p as f64 * self.alpha[(g & mask) as usize];
            }
            order.adapted_mass = mass;
        }
        Ok(())
    }

    pub fn order(&self) -> usize {
        self.orders.len()
    }

    /// What [`crate::kn_file`] stores: the estimated tables and the adaptation's `ln α`.
    pub(crate) fn parts(&self) -> Parts<'_> {
        Parts {
            vocab_size: self.vocab_size,
            start: self.start,
            orders: self
                .orders
                .iter()
                .map(|o| (o.discounts, &o.ngrams, &o.histories))
                .collect(),
            ln_alpha: self.alpha.iter().map(|a| a.ln() as f32).collect(),
        }
    }

    /// A model from stored parts, the adaptation recomputed from `ln_alpha` (empty: none).
    pub(crate) fn from_parts(
        vocab_size: usize,
        start: u32,
        orders: Vec<crate::kn_file::OrderParts>,
        ln_alpha: &[f32],
    ) -> Result<Self> {
        if vocab_size == 0 || vocab_size >= 1 << ID_BITS || start as usize >= vocab_size {
            return Err(Error::Invalid(format!(
                "a vocabulary of {vocab_size} words with start word {start}"
            )));
        }
        let finite = |t: &KeyMap<f32>| t.values().all(|v| v.is_finite() && *v >= 0.0);
        let mut model = KneserNey {
            vocab_size,
            start,
            orders: Vec::with_capacity(orders.len()),
            alpha: Vec::new(),
            mean_alpha: 1.0,
        };
        // A key of `len` words: every id inside the vocabulary, nothing above them.
        let fits = |k: u64, len: usize| {
            let mask = (1u64 << ID_BITS) - 1;
            k >> (ID_BITS as usize * len) == 0
                && (0..len).all(|i| ((k >> (ID_BITS as usize * i)) & mask) < vocab_size as u64)
        };
        for (n, (discounts, ngrams, histories)) in orders.into_iter().enumerate() {
            if !(finite(&ngrams) && finite(&histories) && discounts.iter().all(|d| d.is_finite())) {
                return Err(Error::Invalid(format!(
                    "the {}-grams hold a negative or non-finite value",
                    n + 1
                )));
            }
            if !(ngrams.keys().all(|&k| fits(k, n + 1)) && histories.keys().all(|&k| fits(k, n))) {
                return Err(Error::Invalid(format!(
                    "the {}-grams hold a word outside the vocabulary of {vocab_size}",
                    n + 1
                )));
            }
            model.orders.push(Order {
                discounts,
                ngrams,
                histories,
                adapted_mass: KeyMap::default(),
            });
        }
        if !ln_alpha.is_empty() {
            model.adapt(ln_alpha)?;
        }
        Ok(model)
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The sentence-start symbol (a history only).
    pub fn start(&self) -> u32 {
        self.start
    }

    /// The discounts `[D1, D2, D3+]` of the `n`-grams.
    pub fn discounts(&self, n: usize) -> [f64; 3] {
        self.orders[n - 1].discounts
    }

    /// `p(w | history)`; only the last `order − 1` words of `history` count, and a history
    /// that begins with the start symbol must hold it first.
    pub fn prob(&self, history: &[u32], w: u32) -> f32 {
        let n = self.orders.len();
        let h = &history[history.len().saturating_sub(n - 1)..];
        // Unigram level: interpolated with the uniform distribution.
        let uni = &self.orders[0];
        let uniform = uni.histories.get(&key(&[])).copied().unwrap_or(1.0);
        let mut p =
            uniform / self.vocab_size as f32 + uni.ngrams.get(&key(&[w])).copied().unwrap_or(0.0);
        // Z(h) of the adaptation, along the same path (the uniform part: γ() Σ α / V).
        let adapted = !self.alpha.is_empty();
        let mut z = match adapted {
            true => {
                let seen = uni.adapted_mass.get(&key(&[])).copied().unwrap_or(0.0);
                seen + uniform as f64 * self.mean_alpha
            }
            false => 1.0,
        };
        // Longer histories, shortest first.
        let mut gram = Vec::with_capacity(n);
        for len in 1..=h.len() {
            let hist = &h[h.len() - len..];
            let level = &self.orders[len];
            let Some(&gamma) = level.histories.get(&key(hist)) else {
                break;
            };
            gram.clear();
            gram.extend_from_slice(hist);
            gram.push(w);
            p = level.ngrams.get(&key(&gram)).copied().unwrap_or(0.0) + gamma * p;
            if adapted {
                let seen = level.adapted_mass.get(&key(hist)).copied().unwrap_or(0.0);
                z = seen + gamma as f64 * z;
            }
        }
        match adapted {
            true => (p as f64 * self.alpha[w as usize] / z) as f32,
            false => p,
        }
    }

    /// `ln p(w | history)`.
    pub fn log_prob(&self, history: &[u32], w: u32) -> f32 {
        self.prob(history, w).ln()
    }
}

/// Linear interpolation weights of n-gram models over one vocabulary, fitted by EM to maximise
/// the likelihood of `held_out` (sentences of word ids, each ended by `end`): the standard
/// domain adaptation of a large general model with a small in-domain one (see
/// [`crate::mix::fit_weights`]).
pub fn mixture_weights(models: &[&KneserNey], held_out: &[Vec<u32>], end: u32) -> Vec<f64> {
    let columns: Vec<Vec<f64>> = models
        .iter()
        .map(|&m| {
            let mut one = KnScorer {
                models: vec![(m, 1.0)],
                end,
            };
            crate::mix::token_probs(&mut one, held_out)
        })
        .collect();
    crate::mix::fit_weights(&columns)
}

/// [`KneserNey`] models as the decoder's [`Scorer`]: `p(w | h) = Σ λ_i p_i(w | h)` (one model
/// with weight 1, or a mixture from [`mixture_weights`]); the state is the last `order − 1`
/// words of the longest model.
pub struct KnScorer<'a> {
    /// `(model, λ)`; the models share the vocabulary and the start symbol.
    pub models: Vec<(&'a KneserNey, f32)>,
    /// The end-of-sentence word.
    pub end: u32,
}

impl<'a> KnScorer<'a> {
    /// One model; word 0 ends sentences.
    pub fn new(lm: &'a KneserNey) -> Self {
        KnScorer {
            models: vec![(lm, 1.0)],
            end: 0,
        }
    }

    /// `ln p(w | history)` under the mixture.
    pub fn log_prob(&self, history: &[u32], w: u32) -> f32 {
        self.models
            .iter()
            .map(|&(m, l)| l * m.prob(history, w))
            .sum::<f32>()
            .ln()
    }
}

impl Scorer for KnScorer<'_> {
    type State = Vec<u32>;

    fn initial(&mut self) -> Vec<u32> {
        vec![self.models[0].0.start()]
    }

    fn log_probs(&mut self, state: &Vec<u32>, words: &[u32], out: &mut [f32]) {
        for (o, &w) in out.iter_mut().zip(words) {
            *o = self.log_prob(state, w);
        }
    }

    fn advance(&mut self, from: &[(&Vec<u32>, u32)]) -> Vec<Vec<u32>> {
        let keep = self
            .models
            .iter()
            .map(|(m, _)| m.order())
            .max()
            .unwrap_or(1)
            - 1;
        from.iter()
            .map(|&(h, w)| {
                let mut next: Vec<u32> = h.iter().copied().chain([w]).collect();
                next.drain(..next.len().saturating_sub(keep));
                next
            })
            .collect()
    }

    fn end(&self) -> u32 {
        self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Words: 0 = <s>/</s> (one symbol, as in the LSTM's data), 1 = a, 2 = b, 3 = c.
    const S: u32 = 0;

    fn corpus() -> Vec<Vec<u32>> {
        vec![vec![1, 2], vec![1, 3], vec![2, 3], vec![1, 2, 3]]
    }

    /// Every history's distribution sums to one, seen or not, at every order.
    #[test]
    fn every_distribution_sums_to_one() {
        for order in 1..=3 {
            let lm = KneserNey::estimate(&corpus(), order, 4, S, S).unwrap();
            for h in [
                vec![],
                vec![S],
                vec![1],
                vec![S, 1],
                vec![1, 2],
                vec![3, 3],
                vec![2, 1],
            ] {
                let total: f32 = (0..4).map(|w| lm.prob(&h, w)).sum();
                assert!(
                    (total - 1.0).abs() < 1e-5,
                    "order {order} history {h:?}: {total}"
                );
            }
        }
    }

    /// The bigram model worked by hand.
    ///
    /// Sentences with their symbols: `<s> a b </s>`, `<s> a c </s>`, `<s> b c </s>`,
    /// `<s> a b c </s>`; `</s>` and `<s>` are both word 0, `V = 4`.
    ///
    /// Bigram counts: `<s>a 3, <s>b 1, ab 2, ac 1, bc 2, b</s> 1, c</s> 3`; count-of-counts
    /// `t = [3, 2, 2, 0]`, so `Y = 3/7`, `D1 = 1 − 2·(3/7)·(2/3) = 3/7`, `D2 = 2 − 3·(3/7)·(2/2)
    /// = 5/7`, `D3+ = 3 − 4·(3/7)·(0/2) = 3`.
    ///
    /// Unigram continuation counts (distinct left neighbours): `a: {<s>} 1`, `b: {<s>, a} 2`,
    /// `c: {a, b} 2`, `</s>: {b, c} 2`; `t = [1, 3, 0, 0]`, `Y = 1/7`, `D1 = 1 − 2·(1/7)·3 =
    /// 1/7`, `D2 = 2 − 3·(1/7)·0/3 = 2`, `D3+ = 0/0` falls back to `1.5`. Total 7, discounted
    /// mass `1/7 + 3·2 = 43/7`, so `γ() = 43/49`.
    ///
    /// `p_uni(a) = (1 − 1/7)/7 + (43/49)/4 = 6/49 + 43/196 = 67/196`.
    /// `p_uni(b) = (2 − 2)/7 + 43/196 = 43/196`.
    ///
    /// History `a`: `a(a·) = 3` (ab 2, ac 1), mass `D2 + D1 = 8/7`, `γ(a) = 8/21`.
    /// `p(b | a) = (2 − 5/7)/3 + (8/21)·(43/196) = 3/7 + 344/4116`.
    /// `p(a | a) = 0 + (8/21)·(67/196) = 536/4116`.
    #[test]
    fn matches_the_hand_worked_bigram_model() {
        let lm = KneserNey::estimate(&corpus(), 2, 4, S, S).unwrap();
        let close = |got: f32, want: f64| {
            assert!((got as f64 - want).abs() < 1e-6, "{got} against {want}");
        };
        let d2 = lm.discounts(2);
        close(d2[0] as f32, 3.0 / 7.0);
        close(d2[1] as f32, 5.0 / 7.0);
        close(d2[2] as f32, 3.0);
        assert_eq!(lm.discounts(1)[2], 1.5, "0/0 falls back to k/2");
        close(lm.discounts(1)[0] as f32, 1.0 / 7.0);
        close(lm.prob(&[], 1), 67.0 / 196.0);
        close(lm.prob(&[], 2), 43.0 / 196.0);
        close(lm.prob(&[1], 2), 3.0 / 7.0 + 344.0 / 4116.0);
        close(lm.prob(&[1], 1), 536.0 / 4116.0);
        // An unseen history backs off to the unigrams entirely.
        let lm3 = KneserNey::estimate(&corpus(), 3, 4, S, S).unwrap();
        close(lm3.prob(&[3, 3], 1), lm3.prob(&[3], 1) as f64);
    }

    /// The adapted model is `p · α` renormalised per history: every distribution still sums to
    /// one, and the ratio of two words' probabilities moves by the ratio of their `α`.
    #[test]
    fn unigram_adaptation_renormalises_every_history() {
        let ln_alpha = [0.0, 1.5, -0.7, 0.3];
        for order in 1..=3 {
            let plain = KneserNey::estimate(&corpus(), order, 4, S, S).unwrap();
            let mut lm = plain.clone();
            lm.adapt(&ln_alpha).unwrap();
            for h in [vec![], vec![S], vec![1], vec![S, 1], vec![1, 2], vec![3, 3]] {
                let total: f32 = (0..4).map(|w| lm.prob(&h, w)).sum();
                assert!((total - 1.0).abs() < 1e-5, "order {order} {h:?}: {total}");
                let moved = (lm.prob(&h, 1) / lm.prob(&h, 2)).ln();
                let before = (plain.prob(&h, 1) / plain.prob(&h, 2)).ln();
                assert!(
                    (moved - before - 2.2).abs() < 1e-4,
                    "{h:?}: {moved} {before}"
                );
            }
        }
        let mut lm = KneserNey::estimate(&corpus(), 2, 4, S, S).unwrap();
        assert!(lm.adapt(&[0.0; 3]).is_err(), "one shift per word");
        assert!(lm.adapt(&[0.0, f32::NAN, 0.0, 0.0]).is_err());
    }

    #[test]
    fn bad_settings_are_errors() {
        let c = corpus();
        assert!(KneserNey::estimate(&c, 4, 4, S, S).is_err());
        assert!(KneserNey::estimate(&c, 0, 4, S, S).is_err());
        assert!(
            KneserNey::estimate(&c, 2, 3, S, S).is_err(),
            "word 3 outside a vocabulary of 3"
        );
        assert!(KneserNey::estimate(&c, 2, 4, 9, S).is_err());
    }

    /// EM puts the weight on the model of the held-out text's domain, and the mixture is still
    /// a distribution.
    #[test]
    fn mixture_weights_follow_the_held_out_domain() {
        let general = KneserNey::estimate(&corpus(), 2, 4, S, S).unwrap();
        let domain: Vec<Vec<u32>> = vec![vec![3, 3, 1]; 4];
        let local = KneserNey::estimate(&domain, 2, 4, S, S).unwrap();
        let w = mixture_weights(&[&general, &local], &[vec![3, 3, 1], vec![3, 1]], S);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert!(w[1] > 0.7, "{w:?}");
        let s = KnScorer {
            models: vec![(&general, w[0] as f32), (&local, w[1] as f32)],
            end: S,
        };
        for h in [vec![S], vec![S, 3], vec![2]] {
            let total: f32 = (0..4).map(|v| s.log_prob(&h, v).exp()).sum();
            assert!((total - 1.0).abs() < 1e-5, "{h:?}: {total}");
        }
        assert_eq!(mixture_weights(&[&general, &local], &[], S), vec![0.5, 0.5]);
    }
}
