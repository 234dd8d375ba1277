//! Incremental vocabulary selection (the paper's section 4, Algorithm 1): the LSTM's softmax
//! over `V_t ∪ Ṽ` only, where `V_t = ∪_{i ≤ t} D_i` holds the words of every lattice node so
//! far and `Ṽ` a fixed sample of the vocabulary.
//!
//! Each key adds the words of `D_t` that `V` lacks. A context scored before they arrived has a
//! stale normaliser; it is repaired by adding their exponentiated logits (Eq. 3), all stale
//! contexts against all missing rows in one batched product (the paper's `V_fix`). The decoder
//! then rescores the paths through the repaired contexts ([`Scorer::select`]).
//!
//! Per context the work is the rows of `V` it had not covered, once: on a 40-kana sentence a
//! few thousand rows instead of the whole vocabulary at every new state.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use fastsoftmax_infer::kernels::dot;
use fastsoftmax_infer::kernels::rows::ExactRows;
use fastsoftmax_infer::kernels::PackedMatrix;
use fastsoftmax_infer::{LanguageModel, LmState, Result};

use crate::decode::Scorer;
use crate::lstm::{sentence_start, step_each, Timers};
use crate::tail::TailEstimate;

/// The fixed part `Ṽ` of the selected vocabulary, beside `<eos>` and `<unk>` (always in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    /// Nothing beyond the lattice's words.
    None,
    /// The `n` most frequent words (the vocabulary's first ids: `train-lm` orders it by count).
    Top(usize),
    /// `n` words drawn uniformly without replacement (seeded).
    Uniform { n: usize, seed: u64 },
}

/// How normalisers follow the growing vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// Algorithm 1: a context adds only the rows it has not covered yet.
    Incremental,
    /// Non-incremental selection: every live context is recomputed over the whole of `V_t` at
    /// every key (the baseline the incremental repair is measured against).
    FromScratch,
}

/// A hypothesis' LM state: the recurrent state and its normaliser over the selected rows.
#[derive(Clone)]
pub struct IvsState(Rc<Inner>);

struct Inner {
    lm: LmState,
    /// The estimated `ln Σ exp(logit)` of the words outside the fixed sample
    /// ([`TailEstimate`]; −∞ without one).
    tail: f64,
    /// The normaliser after each repair, latest last (older ones serve a backspace).
    norms: RefCell<Vec<Norm>>,
    /// The logits of the selected rows it covers, `[rows]`: the words' scores are read here,
    /// computed once with the normaliser.
    logits: RefCell<Vec<f32>>,
}

/// A context's normaliser over the first `rows` selected rows, as selected after key `key`.
#[derive(Debug, Clone, Copy)]
struct Norm {
    rows: usize,
    /// The key whose words the rows end with (0: the fixed sample) and that key's serial:
    /// after a backspace and new words, the same key number is a different selection.
    key: usize,
    serial: u64,
    /// `ln Σ exp(logit)` over the fixed sample's rows, and over the lattice's rows after them.
    fixed: f64,
    lattice: f64,
    /// `ln Z`: both sums, the lattice's raised to the tail estimate when that is larger.
    log_z: f64,
}

impl IvsState {
    /// The context vector `[d]` the output layer scores.
    pub fn context(&self) -> &[f32] {
        self.0.lm.context()
    }

    /// `ln Z` over the rows covered so far.
    pub fn log_z(&self) -> f32 {
        self.0.norms.borrow().last().map_or(0.0, |n| n.log_z as f32)
    }
}

/// `row_of` of a word not selected.
const NONE: u32 = u32::MAX;

/// The rows selected after one key: `V` up to `end`.
#[derive(Debug, Clone, Copy)]
struct Segment {
    end: usize,
    serial: u64,
}

/// The LSTM with the softmax over the selected vocabulary.
pub struct IvsScorer<'a> {
    lm: &'a LanguageModel,
    rows: ExactRows,
    eos: u32,
    repair: Repair,
    /// `[|V|, d]`: the selected rows, in the order selected.
    selected: PackedMatrix,
    /// `row_of[w]`: word `w`'s row in `selected` (`NONE`: not selected).
    row_of: Vec<u32>,
    /// Rows of the fixed sample (`<eos>`, `<unk>`, `Ṽ`).
    base: usize,
    /// `n` of `Sample::Top(n)`, else 0.
    top: usize,
    /// `segments[k]`: the rows after key `k + 1`.
    segments: Vec<Segment>,
    next_serial: u64,
    contexts: Vec<f32>,
    logits: Vec<f32>,
    pub timers: Timers,
    /// Logits computed for normalisers (rows × contexts), to compare with the full softmax's.
    pub normaliser_rows: u64,
    tail: Option<TailEstimate>,
}

impl<'a> IvsScorer<'a> {
    pub fn new(lm: &'a LanguageModel, sample: Sample, repair: Repair) -> Result<Self> {
        let vocab = lm.vocab();
        let eos = vocab.get("<eos>").ok_or_else(|| {
            fastsoftmax_infer::Error::Invalid(
                "the language model has no <eos> word: train it on one sentence per line".into(),
            )
        })?;
        let v = vocab.len();
        let head = lm.full_head().matrix();
        let mut scorer = IvsScorer {
            lm,
            rows: ExactRows::new(head, None),
            eos,
            repair,
            selected: PackedMatrix::new(&[], &[], head.dim(), Some(Vec::new())),
            row_of: vec![NONE; v],
            base: 0,
            top: match sample {
                Sample::Top(n) => n.min(v),
                _ => 0,
            },
            segments: Vec::new(),
            next_serial: 1,
            contexts: Vec::new(),
            logits: Vec::new(),
            timers: Timers::default(),
            normaliser_rows: 0,
            tail: None,
        };
        let mut fixed = vec![eos];
        fixed.extend(vocab.get("<unk>"));
        match sample {
            Sample::None => {}
            Sample::Top(n) => fixed.extend(0..n.min(v) as u32),
            Sample::Uniform { n, seed } => fixed.extend(uniform_sample(v, n, seed)),
        }
        scorer.add(&fixed);
        scorer.base = scorer.selected.n_rows();
        Ok(scorer)
    }

    pub fn model(&self) -> &LanguageModel {
        self.lm
    }

    /// Raises each normaliser's lattice part to `tail`'s estimate of the words outside the
    /// fixed sample, which must be `Sample::Top(tail.top)` of this model.
    pub fn with_tail(mut self, tail: TailEstimate) -> Result<Self> {
        let top = self.top;
        if tail.top != top || tail.weights.len() != self.selected.dim() {
            return Err(fastsoftmax_infer::Error::Invalid(format!(
                "the tail estimate was fitted for the top {} words at width {}, the selection \
                 holds the top {top} at width {}: fit it again with `ime fit-tail --samples {top}`",
                tail.top,
                tail.weights.len(),
                self.selected.dim()
            )));
        }
        self.tail = Some(tail);
        Ok(self)
    }

    /// A new state's entry: the tail estimate at its context.
    fn wrap(&self, lm: LmState) -> IvsState {
        let tail = self
            .tail
            .as_ref()
            .map_or(f64::NEG_INFINITY, |t| t.log_z(lm.context()));
        IvsState(Rc::new(Inner {
            lm,
            tail,
            norms: RefCell::new(Vec::new()),
            logits: RefCell::new(Vec::new()),
        }))
    }

    /// Words selected now (`|V_t ∪ Ṽ|`).
    pub fn selected(&self) -> usize {
        self.selected.n_rows()
    }

    /// Selects the words of `words` not yet selected.
    fn add(&mut self, words: &[u32]) {
        for &w in words {
            if self.row_of[w as usize] == NONE {
                self.row_of[w as usize] = self.selected.n_rows() as u32;
                let (row, bias) = self.rows.row(w as usize);
                self.selected.push_row(row, bias, w);
            }
        }
    }

    /// Keeps the selection of the first `keys` keys.
    fn truncate(&mut self, keys: usize) {
        if keys >= self.segments.len() {
            return;
        }
        self.segments.truncate(keys);
        let end = self.segments.last().map_or(self.base, |s| s.end);
        for r in end..self.selected.n_rows() {
            self.row_of[self.selected.id(r) as usize] = NONE;
        }
        self.selected.truncate(end);
    }

    /// Whether `n` still describes a prefix of the selection.
    fn valid(&self, n: &Norm) -> bool {
        n.key == 0
            || self
                .segments
                .get(n.key - 1)
                .is_some_and(|s| s.serial == n.serial)
    }

    /// The current end of the selection as a [`Norm`] label: `(rows, key, serial)`.
    fn head(&self) -> (usize, usize, u64) {
        match self.segments.last() {
            Some(s) => (s.end, self.segments.len(), s.serial),
            None => (self.base, 0, 0),
        }
    }

    /// Brings the normaliser of every state up to the whole selection, one batched product per
    /// group of states that covered the same rows. Returns whether any changed.
    fn repair(&mut self, states: &[&IvsState]) -> bool {
        let t = Instant::now();
        let (rows, key, serial) = self.head();
        // (rows covered, ln Z so far, state) for each state that lacks rows.
        let mut stale: Vec<(usize, (f64, f64), &IvsState)> = Vec::new();
        for &s in states {
            let mut norms = s.0.norms.borrow_mut();
            if self.repair == Repair::FromScratch {
                norms.clear();
            }
            while norms.last().is_some_and(|n| !self.valid(n)) {
                norms.pop();
            }
            s.0.logits
                .borrow_mut()
                .truncate(norms.last().map_or(0, |n| n.rows));
            let (covered, sums) = norms
                .last()
                .map_or((0, (f64::NEG_INFINITY, f64::NEG_INFINITY)), |n| {
                    (n.rows, (n.fixed, n.lattice))
                });
            if covered < rows {
                stale.push((covered, sums, s));
            }
        }
        let changed = !stale.is_empty();
        stale.sort_by_key(|&(covered, _, _)| covered);
        for group in stale.chunk_by(|a, b| a.0 == b.0) {
            let covered = group[0].0;
            let width = rows - covered;
            self.contexts.clear();
            for (_, _, s) in group {
                self.contexts.extend_from_slice(s.context());
            }
            self.logits.resize(group.len() * width, 0.0);
            self.selected
                .logits_batch_from(covered, &self.contexts, &mut self.logits);
            self.normaliser_rows += (group.len() * width) as u64;
            // Rows before `base` are the fixed sample's.
            let split = self.base.saturating_sub(covered).min(width);
            for (&(_, (fixed, lattice), s), logits) in
                group.iter().zip(self.logits.chunks_exact(width))
            {
                s.0.logits.borrow_mut().extend_from_slice(logits);
                let (a, b) = logits.split_at(split);
                let fixed = log_add(fixed, lse(a));
                let lattice = log_add(lattice, lse(b));
                s.0.norms.borrow_mut().push(Norm {
                    rows,
                    key,
                    serial,
                    fixed,
                    lattice,
                    log_z: log_add(fixed, lattice.max(s.0.tail)),
                });
            }
        }
        self.timers.softmax += t.elapsed();
        changed
    }
}

/// `ln Σ exp` of `logits` (−∞ when empty).
fn lse(logits: &[f32]) -> f64 {
    if logits.is_empty() {
        f64::NEG_INFINITY
    } else {
        fastsoftmax_infer::log_sum_exp(logits)
    }
}

/// `ln(e^a + e^b)`.
fn log_add(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if m == f64::NEG_INFINITY {
        m
    } else {
        m + ((a - m).exp() + (b - m).exp()).ln()
    }
}

/// `n` distinct ids of `0..v`, drawn uniformly (a seeded partial Fisher–Yates shuffle).
fn uniform_sample(v: usize, n: usize, seed: u64) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..v as u32).collect();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let n = n.min(v);
    for i in 0..n {
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let j = i + (r % (v - i) as u64) as usize;
        ids.swap(i, j);
    }
    ids.truncate(n);
    ids
}

impl Scorer for IvsScorer<'_> {
    type State = IvsState;

    fn initial(&mut self) -> IvsState {
        let state = self.wrap(sentence_start(self.lm, self.eos));
        self.repair(&[&state]);
        state
    }

    /// `logit(w) − ln Z` over the selection; `words` must be selected (the decoder selects the
    /// lattice's words before it scores them).
    fn log_probs(&mut self, state: &IvsState, words: &[u32], out: &mut [f32]) {
        let t = Instant::now();
        let log_z = state.log_z();
        let cached = state.0.logits.borrow();
        for (o, &w) in out.iter_mut().zip(words) {
            let logit = match cached.get(self.row_of[w as usize] as usize) {
                Some(&l) => l,
                // Not selected (a caller that skipped `select`): scored, though its normaliser
                // lacks it.
                None => {
                    let (row, bias) = self.rows.row(w as usize);
                    dot(row, state.context()) + bias
                }
            };
            *o = logit - log_z;
        }
        self.timers.softmax += t.elapsed();
    }

    fn advance(&mut self, from: &[(&IvsState, u32)]) -> Vec<IvsState> {
        let t = Instant::now();
        let next = step_each(self.lm, from.iter().map(|&(s, w)| (&s.0.lm, w)));
        let states: Vec<IvsState> = next.into_iter().map(|s| self.wrap(s)).collect();
        self.timers.lstm += t.elapsed();
        let refs: Vec<&IvsState> = states.iter().collect();
        self.repair(&refs);
        states
    }

    fn end(&self) -> u32 {
        self.eos
    }

    fn select(&mut self, key: usize, words: &[u32], live: &[&IvsState]) -> bool {
        let t = Instant::now();
        self.truncate(key.saturating_sub(1));
        self.add(words);
        self.segments.push(Segment {
            end: self.selected.n_rows(),
            serial: self.next_serial,
        });
        self.next_serial += 1;
        self.timers.softmax += t.elapsed();
        self.repair(live)
    }

    fn log_z(&self, state: &IvsState) -> f32 {
        state.log_z()
    }

    /// The best words of the fixed sample (the top words of the vocabulary), whose logits every
    /// state holds already: the sentence's end and `<unk>` left out.
    fn predict(&mut self, state: &IvsState, k: usize) -> Vec<u32> {
        let logits = state.0.logits.borrow();
        let unk = self.lm.vocab().get("<unk>");
        let mut rows: Vec<usize> = (0..self.base.min(logits.len()))
            .filter(|&r| {
                let id = self.selected.id(r);
                id != self.eos && Some(id) != unk
            })
            .collect();
        rows.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        rows.truncate(k);
        rows.into_iter().map(|r| self.selected.id(r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_samples_are_distinct_seeded_and_in_range() {
        let a = uniform_sample(1000, 400, 7);
        assert_eq!(a, uniform_sample(1000, 400, 7));
        assert_ne!(a, uniform_sample(1000, 400, 8));
        let mut s = a.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 400);
        assert!(s.iter().all(|&w| w < 1000));
        assert_eq!(uniform_sample(5, 9, 1).len(), 5);
    }

    #[test]
    fn log_add_is_stable() {
        assert_eq!(
            log_add(f64::NEG_INFINITY, f64::NEG_INFINITY),
            f64::NEG_INFINITY
        );
        assert!((log_add(0.0, 0.0) - 2f64.ln()).abs() < 1e-12);
        assert!((log_add(1000.0, 0.0) - 1000.0).abs() < 1e-12);
    }
}
