//! The LSTM with a frequency-bucketed softmax trained on top of it (`fastsoftmax train-head
//! dsoftmax|adaptive`): the paper's D-softmax (Chen et al. 2016) and D-softmax* (adaptive
//! softmax, Joulin et al. 2017) rows. Every word keeps a probability, so every new state still
//! pays for a normaliser over the whole vocabulary, but over narrower rows (rarer words see a
//! projection of the context to `d_i < d`).
//!
//! A word `w` in level `b` at row `r`: `ln p(w | h) = W_b[r]·v_b + bias_b[r] − shift_b`, with
//! `v_b = P_b h` (or `h`) the level's view of the context and `shift_b`:
//! - D-softmax: `ln Z`, the log-sum-exp of every level's logits (one softmax);
//! - adaptive: `ln Z_0` for the head words, and `ln Z_0 − cluster logit_c + ln Z_c` for the
//!   words of tail cluster `c` (`p(c) · p(w | c)`).

use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

use fastsoftmax_infer::heads::bucketed::Bucket;
use fastsoftmax_infer::heads::{read_head, AdaptiveHead, DsoftmaxHead};
use fastsoftmax_infer::kernels::dot;
use fastsoftmax_infer::kernels::rows::ExactRows;
use fastsoftmax_infer::kernels::PackedMatrix;
use fastsoftmax_infer::{log_sum_exp, Error, LanguageModel, LmState, Result};

use crate::decode::Scorer;
use crate::lstm::{sentence_start, step_each, Timers};

/// How the levels normalise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketKind {
    /// One softmax over every level.
    Dsoftmax,
    /// A softmax over the head words and one row per tail cluster, then one per cluster.
    Adaptive,
}

/// One level: its projection, its rows packed for the normaliser's product and row by row for
/// a single word's logit.
struct Level {
    /// `[d_b, d]` (none: the level sees `h`).
    proj: Option<PackedMatrix>,
    /// `[n_b, d_b]`.
    rows: PackedMatrix,
    exact: ExactRows,
    width: usize,
    /// Where the level's view starts in a state's views.
    offset: usize,
}

/// A hypothesis' LM state with its levels' views `[Σ d_b]` and shifts `[levels]`.
#[derive(Clone)]
pub struct BucketState(Rc<(LmState, Vec<f32>, Vec<f32>)>);

pub struct BucketScorer<'a> {
    lm: &'a LanguageModel,
    kind: BucketKind,
    levels: Vec<Level>,
    /// `slot[w] = (level, row)`.
    slot: Vec<(u32, u32)>,
    /// Head rows that stand for the tail clusters (adaptive): `words..words + clusters`.
    head_words: usize,
    eos: u32,
    logits: Vec<f32>,
    views: Vec<f32>,
    pub timers: Timers,
    /// Normaliser work, in length-`d` dot products (the full softmax: vocabulary × states).
    pub normaliser_rows: u64,
}

impl<'a> BucketScorer<'a> {
    /// The head trained by `train-head dsoftmax|adaptive` in `dir` (checked against `lm`'s
    /// output layer).
    pub fn load(lm: &'a LanguageModel, dir: &Path) -> Result<Self> {
        let (m, t) = read_head(dir, lm.full_head())?;
        let name = dir
            .file_name()
            .map_or("head".into(), |n| n.to_string_lossy());
        let (kind, buckets) = match m.kind.as_str() {
            "dsoftmax" => (
                BucketKind::Dsoftmax,
                DsoftmaxHead::from_files(&name, &m, &t, lm.full_head())?.buckets(),
            ),
            "adaptive" => (
                BucketKind::Adaptive,
                AdaptiveHead::from_files(&name, &m, &t, lm.full_head())?.buckets(),
            ),
            other => {
                return Err(Error::Invalid(format!(
                    "{} is a `{other}` head; the IME scores with a dsoftmax or adaptive head \
                     (`fastsoftmax train-head dsoftmax|adaptive`)",
                    dir.display()
                )))
            }
        };
        Self::new(lm, kind, &buckets)
    }

    /// `buckets` partition the vocabulary (adaptive: `buckets[0]` holds the head words, then
    /// one row per tail cluster `buckets[1..]`), as the infer heads hold them.
    pub fn new(lm: &'a LanguageModel, kind: BucketKind, buckets: &[Bucket]) -> Result<Self> {
        let (d, vocab) = (lm.full_head().matrix().dim(), lm.vocab().len());
        let eos = lm.vocab().get("<eos>").ok_or_else(|| {
            Error::Invalid(
                "the language model has no <eos> word: train it on one sentence per line".into(),
            )
        })?;
        let mut slot = vec![(u32::MAX, 0); vocab];
        let mut levels = Vec::new();
        let mut offset = 0;
        for (b, bucket) in buckets.iter().enumerate() {
            let width = bucket.width(d);
            let rows = bucket.bias.len();
            if width == 0
                || bucket.weights.len() != rows * width
                || rows < bucket.ids.len()
                || bucket.proj.as_ref().is_some_and(|p| p.len() != width * d)
            {
                return Err(Error::Invalid(format!(
                    "bucket {b}: weights [{}], bias [{rows}] and projection do not fit {} words \
                     at width {width} of {d}: a corrupt head",
                    bucket.weights.len(),
                    bucket.ids.len()
                )));
            }
            for (r, &w) in bucket.ids.iter().enumerate() {
                if let Some(s) = slot.get_mut(w as usize) {
                    *s = (b as u32, r as u32);
                }
            }
            let packed = PackedMatrix::new(&bucket.weights, &bucket.bias, width, None);
            levels.push(Level {
                proj: bucket
                    .proj
                    .as_ref()
                    .map(|p| PackedMatrix::new(p, &vec![0.0; width], d, None)),
                exact: ExactRows::new(&packed, None),
                rows: packed,
                width,
                offset,
            });
            offset += width;
        }
        if slot.iter().any(|s| s.0 == u32::MAX) {
            return Err(Error::Invalid(format!(
                "the head's buckets do not cover the language model's {vocab} words: train it on \
                 this model"
            )));
        }
        Ok(BucketScorer {
            lm,
            kind,
            levels,
            slot,
            head_words: buckets.first().map_or(0, |b| b.ids.len()),
            eos,
            logits: Vec::new(),
            views: Vec::new(),
            timers: Timers::default(),
            normaliser_rows: 0,
        })
    }

    pub fn kind(&self) -> BucketKind {
        self.kind
    }

    /// Views and shifts of each state, one batched product per level.
    fn prepare(&mut self, states: Vec<LmState>) -> Vec<BucketState> {
        let t = Instant::now();
        let n = states.len();
        let d = self.lm.full_head().matrix().dim();
        let total: usize = self.levels.iter().map(|l| l.width).sum();
        let mut views = vec![vec![0.0f32; total]; n];
        // lse[b][q]; adaptive also needs the cluster rows' logits of the head level.
        let mut lse = vec![vec![0.0f64; n]; self.levels.len()];
        let mut cluster_logits = vec![Vec::new(); n];
        for (b, level) in self.levels.iter().enumerate() {
            self.views.clear();
            for (s, v) in states.iter().zip(views.iter_mut()) {
                let view = &mut v[level.offset..level.offset + level.width];
                match &level.proj {
                    None => view.copy_from_slice(s.context()),
                    Some(p) => p.logits_into(s.context(), view),
                }
                self.views.extend_from_slice(view);
            }
            let rows = level.rows.n_rows();
            self.logits.resize(n * rows, 0.0);
            level.rows.logits_batch(&self.views, &mut self.logits);
            let proj = if level.proj.is_some() { level.width } else { 0 };
            self.normaliser_rows += (n * (proj * d + rows * level.width) / d) as u64;
            for (q, logits) in self.logits.chunks_exact(rows).enumerate() {
                lse[b][q] = log_sum_exp(logits);
                if b == 0 && self.kind == BucketKind::Adaptive {
                    cluster_logits[q] = logits[self.head_words..].to_vec();
                }
            }
        }
        let out = states
            .into_iter()
            .zip(views)
            .enumerate()
            .map(|(q, (s, v))| {
                let shifts = match self.kind {
                    BucketKind::Dsoftmax => {
                        let m = lse.iter().map(|l| l[q]).fold(f64::NEG_INFINITY, f64::max);
                        let z = m + lse.iter().map(|l| (l[q] - m).exp()).sum::<f64>().ln();
                        vec![z as f32; self.levels.len()]
                    }
                    BucketKind::Adaptive => std::iter::once(lse[0][q])
                        .chain(
                            cluster_logits[q]
                                .iter()
                                .zip(&lse[1..])
                                .map(|(&c, l)| lse[0][q] - c as f64 + l[q]),
                        )
                        .map(|x| x as f32)
                        .collect(),
                };
                BucketState(Rc::new((s, v, shifts)))
            })
            .collect();
        self.timers.softmax += t.elapsed();
        out
    }
}

impl Scorer for BucketScorer<'_> {
    type State = BucketState;

    fn initial(&mut self) -> BucketState {
        let s = sentence_start(self.lm, self.eos);
        self.prepare(vec![s]).remove(0)
    }

    fn log_probs(&mut self, state: &BucketState, words: &[u32], out: &mut [f32]) {
        let t = Instant::now();
        let (_, views, shifts) = &*state.0;
        for (o, &w) in out.iter_mut().zip(words) {
            let (b, r) = self.slot[w as usize];
            let level = &self.levels[b as usize];
            let (row, bias) = level.exact.row(r as usize);
            let view = &views[level.offset..level.offset + level.width];
            *o = dot(row, view) + bias - shifts[b as usize];
        }
        self.timers.softmax += t.elapsed();
    }

    fn advance(&mut self, from: &[(&BucketState, u32)]) -> Vec<BucketState> {
        let t = Instant::now();
        let states = step_each(self.lm, from.iter().map(|&(s, w)| (&s.0 .0, w)));
        self.timers.lstm += t.elapsed();
        self.prepare(states)
    }

    fn end(&self) -> u32 {
        self.eos
    }
}
