//! Training the candidate attention predictor (`fastsoftmax_infer::heads::candidates`) on burn.
//!
//! Every position of the training stream is a sample: the previous `n` words (padded with
//! `<eos>` at the start), a candidate list of `k` words and the slot of the true next word
//! (slot `k`, "not in the list", when it is absent: the paper's negative samples, which the
//! stream provides wherever the trigram table misses). The list is built as in section 2.2:
//! the table's potential words for the last two words, then words drawn at random from the
//! `frequent_pool` most frequent (`fill = frequent`, the paper's "PF") or from the whole
//! vocabulary (`random`, "P"/"PR"), or the most frequent words in order (`top`: exactly the
//! list served at prediction time); the paper then permutes the list at random (`permute`),
//! which measurably loses accuracy here, so by default the potential words keep their rank.

use std::time::Instant;

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use fastsoftmax_infer::heads::candidates::{CandidateParams, CandidatesHead, Shape};
use fastsoftmax_infer::heads::trigram::{CandidateTable, TrigramConfig};
use fastsoftmax_infer::kernels::rows::ExactRows;
use fastsoftmax_infer::{Context, FullHead, Predictor, SoftmaxHead, TopK};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// How a training list is filled after the table's potential words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fill {
    /// Random words among the `frequent_pool` most frequent (the paper's "PF").
    Frequent,
    /// Random words of the vocabulary (the paper's "PR"; with `slots = potential`, "P").
    Random,
    /// The most frequent words not already listed, in order: exactly the list the predictor
    /// serves, so training sees what prediction will (our addition).
    Top,
}

/// Hyper-parameters (`experiments/configs/candidates.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CandidatesConfig {
    /// Previous words read, `n`.
    pub context: usize,
    /// Candidate slots, `k`.
    pub slots: usize,
    /// Embedding width `D`.
    pub width: usize,
    /// Factorisation rank `r` of the embeddings; 0 = unfactorised (`[vocab, D]`).
    pub rank: usize,
    pub fill: Fill,
    /// Shuffle every training list (the paper, against position bias). Off (the default), the
    /// potential words keep the table's frequency order in the first slots, as at prediction
    /// time, and the output layer can use a slot's rank: on PTB that is worth +0.8 points of
    /// validation WPR unfactorised and +3.7 factorised (experiments/results/candidates.md).
    pub permute: bool,
    pub frequent_pool: usize,
    /// The trigram table (its `per_context` is the number of potential words).
    pub table: TrigramConfig,
    /// Weight of the language model as teacher (0 = learn the true next word only): the loss is
    /// `distill · CE(teacher's slot distribution) + (1 − distill) · CE(true slot)`, where the
    /// teacher's probability of each candidate is its full-softmax probability and "not in the
    /// list" gets the rest (knowledge distillation, as the paper distils its factorised model).
    pub distill: f64,
    pub epochs: usize,
    /// Adam's learning rate at the first step.
    pub lr: f64,
    /// The learning rate at the last step, as a fraction of `lr`: it decays linearly over the
    /// steps of all epochs (1 = constant).
    pub final_lr_fraction: f64,
    pub batch_size: usize,
    /// Training positions used, evenly spaced (0 = all).
    pub max_samples: usize,
    pub seed: u64,
}

/// The defaults are the best recipe measured on PTB (experiments/results/candidates.md): the
/// paper's k = 10 and D = 100, but 5 context words at rank 30 instead of its 15 at rank 10 (the
/// same multiply-adds, +0.4 points of test WPR on the same lists), the served lists in training,
/// and distillation from the LSTM. Distilling from a trained unfactorised predictor instead
/// (`Teacher::Assistant`) gains another 0.4 points.
impl Default for CandidatesConfig {
    fn default() -> Self {
        CandidatesConfig {
            context: 5,
            slots: 10,
            width: 100,
            rank: 30,
            fill: Fill::Top,
            permute: false,
            frequent_pool: 50,
            table: TrigramConfig::default(),
            distill: 0.9,
            epochs: 12,
            lr: 2e-3,
            final_lr_fraction: 0.05,
            batch_size: 256,
            max_samples: 0,
            seed: 29,
        }
    }
}

impl CandidatesConfig {
    pub fn validate(&self, vocab: usize) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(format!("candidates config: {m}")));
        if self.context == 0 || self.slots == 0 || self.width == 0 {
            return bad("context, slots and width must be positive".into());
        }
        if self.slots > vocab || self.frequent_pool < self.slots || self.frequent_pool > vocab {
            return bad(format!(
                "need slots ≤ frequent_pool ≤ vocabulary ({} ≤ {} ≤ {vocab})",
                self.slots, self.frequent_pool
            ));
        }
        if self.table.n_frequent < self.frequent_pool {
            return bad(format!(
                "the table keeps {} frequent words, fewer than frequent_pool {}; raise table.n_frequent",
                self.table.n_frequent, self.frequent_pool
            ));
        }
        if self.rank > self.width {
            return bad(format!(
                "rank {} must not exceed width {} (0 = unfactorised)",
                self.rank, self.width
            ));
        }
        if !(0.0..=1.0).contains(&self.distill) {
            return bad(format!("distill {} must be within 0..1", self.distill));
        }
        if self.epochs == 0 || self.batch_size == 0 || self.lr.is_nan() || self.lr <= 0.0 {
            return bad("epochs, batch_size and lr must be positive".into());
        }
        if !(0.0..=1.0).contains(&self.final_lr_fraction) {
            return bad(format!(
                "final_lr_fraction {} must be within 0..1",
                self.final_lr_fraction
            ));
        }
        Ok(())
    }

    fn shape(&self, vocab: usize) -> Shape {
        Shape {
            context: self.context,
            slots: self.slots,
            width: self.width,
            rank: if self.rank == 0 {
                self.width
            } else {
                self.rank
            },
            vocab,
        }
    }
}

/// The network on burn (see the engine's module docs for the equations).
#[derive(Module, Debug)]
pub struct CandidateNet {
    /// `[vocab, r]` (or `[vocab, D]` unfactorised)
    pub u: Embedding,
    /// `r → D`, no bias; absent when unfactorised
    pub m: Option<Linear>,
    /// `n·D → D`
    pub f: Linear,
    /// `k → k + 1`
    pub o: Linear,
}

impl CandidateNet {
    pub fn new(cfg: &CandidatesConfig, vocab: usize, device: &Device) -> Self {
        let s = cfg.shape(vocab);
        CandidateNet {
            u: EmbeddingConfig::new(vocab, s.rank).init(device),
            m: (cfg.rank > 0).then(|| {
                LinearConfig::new(s.rank, s.width)
                    .with_bias(false)
                    .init(device)
            }),
            f: LinearConfig::new(s.context * s.width, s.width).init(device),
            o: LinearConfig::new(s.slots, s.slots + 1).init(device),
        }
    }

    fn embed(&self, ids: Tensor<2, Int>) -> Tensor<3> {
        let e = self.u.forward(ids);
        match &self.m {
            Some(m) => m.forward(e),
            None => e,
        }
    }

    /// Slot logits `[b, k + 1]` for contexts `[b, n]` and candidate lists `[b, k]`.
    pub fn forward(&self, context: Tensor<2, Int>, candidates: Tensor<2, Int>) -> Tensor<2> {
        let [b, n] = context.dims();
        let k = candidates.dims()[1];
        let e = self.embed(context);
        let width = e.dims()[2];
        let e_c = self.f.forward(e.reshape([b, n * width])).tanh(); // [b, D]
        let keys = self.embed(candidates); // [b, k, D]
        let a = keys
            .matmul(e_c.unsqueeze_dim::<3>(2))
            .reshape([b, k])
            .div_scalar((width as f32).sqrt());
        self.o.forward(a)
    }

    /// The parameters in the engine's layout.
    pub fn export(&self, shape: Shape) -> CandidateParams {
        let v2 = |t: Tensor<2>| t.into_data().try_to_vec::<f32>().expect("f32 parameters");
        let v1 = |t: Tensor<1>| t.into_data().try_to_vec::<f32>().expect("f32 parameters");
        let m = match &self.m {
            Some(m) => v2(m.weight.val()), // stored [d_in = r, d_out = D]
            None => (0..shape.width * shape.width)
                .map(|i| (i / shape.width == i % shape.width) as u8 as f32)
                .collect(),
        };
        CandidateParams {
            shape,
            u: v2(self.u.weight.val()),
            m,
            f: v2(self.f.weight.val().transpose()),
            f_bias: v1(self.f.bias.as_ref().expect("f has a bias").val()),
            o: v2(self.o.weight.val().transpose()),
            o_bias: v1(self.o.bias.as_ref().expect("o has a bias").val()),
        }
    }
}

/// Builds training lists: potential words, a fill, optionally a random permutation; returns the
/// slot of `next` (`k` when absent).
pub struct ListMaker<'a> {
    pub table: &'a CandidateTable,
    pub cfg: &'a CandidatesConfig,
    pub vocab: usize,
}

impl ListMaker<'_> {
    pub fn make(
        &self,
        prev2: u32,
        prev1: u32,
        next: u32,
        rng: &mut StdRng,
        out: &mut Vec<u32>,
    ) -> usize {
        let k = self.cfg.slots;
        let pool = self.table.frequent();
        let pool = &pool[..self.cfg.frequent_pool.min(pool.len())];
        match self.cfg.fill {
            Fill::Top => self.table.candidates_into(prev2, prev1, k, out),
            fill => {
                out.clear();
                out.extend(self.table.potential(prev2, prev1).iter().take(k));
                while out.len() < k {
                    let w = match fill {
                        Fill::Frequent => pool[rng.random_range(0..pool.len())],
                        _ => rng.random_range(0..self.vocab as u32),
                    };
                    if !out.contains(&w) {
                        out.push(w);
                    }
                }
            }
        }
        if self.cfg.permute {
            for i in (1..k).rev() {
                out.swap(i, rng.random_range(0..=i));
            }
        }
        out.iter().position(|&w| w == next).unwrap_or(k)
    }
}

/// Where the soft targets of distillation come from.
pub enum Teacher<'a> {
    /// The language model: each candidate gets its full-softmax probability and "not in the
    /// list" the rest.
    Lm {
        /// `[positions, d]`: row `t` is the context after reading `train[..=t]`.
        hs: &'a [f32],
        full: &'a FullHead,
    },
    /// A trained candidate predictor, distilled from the LM (the paper's teacher assistant: r = 50
    /// there, the unfactorised predictor here): its slot distribution for the same list.
    Assistant(&'a CandidatesHead),
}

/// A teacher ready to give soft targets (the LM's normalisers computed once).
enum Targets<'a> {
    Lm {
        hs: &'a [f32],
        /// `[positions]`: `log Z` of the full softmax at each training position.
        log_z: Vec<f32>,
        rows: ExactRows,
    },
    Assistant(&'a CandidatesHead),
}

impl<'a> Targets<'a> {
    fn new(teacher: &Teacher<'a>, log: &mut dyn FnMut(&str)) -> Self {
        match *teacher {
            Teacher::Lm { hs, full } => {
                use rayon::prelude::*;
                let t0 = Instant::now();
                // 64 contexts per product: each tile of the output layer is read once for
                // all of them (5× faster than one context at a time at 58k words).
                const BATCH: usize = 64;
                let (d, vocab) = (full.dim(), SoftmaxHead::vocab_size(full));
                let log_z: Vec<f32> = hs
                    .par_chunks(BATCH * d)
                    .map_init(
                        || vec![0.0f32; BATCH * vocab],
                        |buf, hs| {
                            let buf = &mut buf[..hs.len() / d * vocab];
                            full.matrix().logits_batch(hs, buf);
                            buf.chunks(vocab)
                                .map(|logits| fastsoftmax_infer::log_sum_exp(logits) as f32)
                                .collect::<Vec<_>>()
                        },
                    )
                    .flatten()
                    .collect();
                log(&format!(
                    "teacher: the language model's normaliser at {} positions ({:.0} s)",
                    log_z.len(),
                    t0.elapsed().as_secs_f64()
                ));
                Targets::Lm {
                    hs,
                    log_z,
                    rows: ExactRows::new(full.matrix(), None),
                }
            }
            Teacher::Assistant(head) => {
                log(&format!(
                    "teacher: the candidate predictor {} (rank {})",
                    Predictor::name(head),
                    head.shape().rank
                ));
                Targets::Assistant(head)
            }
        }
    }

    /// Appends the teacher's `k + 1` slot probabilities for `list` at training position `t`
    /// (`history` = the stream up to and including `t`).
    fn push(
        &self,
        t: usize,
        history: &[u32],
        list: &[u32],
        buf: &mut Vec<f32>,
        out: &mut Vec<f32>,
    ) {
        match self {
            Targets::Lm { hs, log_z, rows } => {
                let d = rows.dim();
                let h = &hs[t * d..(t + 1) * d];
                let mut rest = 1.0f32;
                for &w in list {
                    let (row, bias) = rows.row(w as usize);
                    let q = (fastsoftmax_infer::kernels::dot(row, h) + bias - log_z[t]).exp();
                    rest -= q;
                    out.push(q);
                }
                out.push(rest.max(0.0));
            }
            Targets::Assistant(head) => {
                head.slot_log_probs(history, list, buf);
                out.extend(buf.iter().map(|lp| lp.exp()));
            }
        }
    }
}

/// One epoch's record.
#[derive(Debug, Clone, Serialize)]
pub struct EpochRecord {
    pub epoch: usize,
    pub train_loss: f64,
    /// Share of training samples whose next word was in the list.
    pub train_in_list: f64,
    pub valid: Evaluation,
    pub seconds: f64,
}

/// Word prediction rate and friends on a token stream.
#[derive(Debug, Clone, Serialize)]
pub struct Evaluation {
    pub positions: usize,
    /// Top-1 accuracy against the true next word (the paper's WPR).
    pub wpr: f64,
    /// The trigram table alone: its first potential word (else the most frequent word).
    pub trigram_wpr: f64,
    /// Share of positions whose next word is among the `k` candidates (the ceiling).
    pub coverage: f64,
    /// WPR when every list is built the paper's "P" way instead (up to `k` potential words,
    /// random words where the table runs short) and the "PF" way (up to `k/2` potential words,
    /// then random frequent words): the two validation sets of its Table 3, the same whatever
    /// lists the model trained on.
    pub wpr_lists_p: f64,
    pub wpr_lists_pf: f64,
}

/// The validation lists of the paper's Table 3, built once per run with a fixed seed.
pub struct Table3Lists {
    /// `(p, pf)`: per position of the validation stream, `[k]` ids and the true word's slot.
    p: Vec<(Vec<u32>, usize)>,
    pf: Vec<(Vec<u32>, usize)>,
}

impl Table3Lists {
    /// Lists for every position of `valid`, from tables counted on `train`.
    pub fn build(
        train: &[u32],
        valid: &[u32],
        vocab: usize,
        pad: u32,
        cfg: &CandidatesConfig,
    ) -> Result<Self> {
        let k = cfg.slots;
        let p_table = CandidateTable::build(
            train,
            vocab,
            &TrigramConfig {
                per_context: k,
                ..cfg.table.clone()
            },
        )?;
        let pf_table = CandidateTable::build(
            train,
            vocab,
            &TrigramConfig {
                per_context: (k / 2).max(1),
                ..cfg.table.clone()
            },
        )?;
        let lists = |table: &CandidateTable, fill: Fill| {
            let c = CandidatesConfig {
                fill,
                permute: false,
                ..cfg.clone()
            };
            let maker = ListMaker {
                table,
                cfg: &c,
                vocab,
            };
            let mut rng = StdRng::seed_from_u64(cfg.seed ^ 0x7ab1e3);
            let mut list = Vec::with_capacity(k);
            (0..valid.len().saturating_sub(1))
                .map(|t| {
                    let prev2 = if t == 0 { pad } else { valid[t - 1] };
                    let slot = maker.make(prev2, valid[t], valid[t + 1], &mut rng, &mut list);
                    (list.clone(), slot)
                })
                .collect()
        };
        Ok(Table3Lists {
            p: lists(&p_table, Fill::Random),
            pf: lists(&pf_table, Fill::Frequent),
        })
    }

    /// `(P, PF)` WPR of `head` on `valid` (the stream the lists were built for).
    fn wpr(&self, head: &CandidatesHead, valid: &[u32]) -> (f64, f64) {
        let mut lp = Vec::new();
        let mut score = |lists: &[(Vec<u32>, usize)]| {
            let hits = lists
                .iter()
                .enumerate()
                .filter(|(t, (list, slot))| {
                    head.slot_log_probs(&valid[..=*t], list, &mut lp);
                    let best = (0..list.len()).max_by(|&a, &b| lp[a].total_cmp(&lp[b]));
                    best == Some(*slot)
                })
                .count();
            hits as f64 / lists.len().max(1) as f64
        };
        (score(&self.p), score(&self.pf))
    }
}

/// Scores `head` on `tokens` (every position after the first), and on the Table 3 lists built
/// for `tokens` when given.
pub fn evaluate(
    head: &CandidatesHead,
    tokens: &[u32],
    max: usize,
    table3: Option<&Table3Lists>,
) -> Evaluation {
    let n = tokens
        .len()
        .saturating_sub(1)
        .min(if max == 0 { usize::MAX } else { max });
    let (mut hit, mut tri, mut cov) = (0usize, 0usize, 0usize);
    let mut out = TopK::new(1);
    let mut cands = Vec::new();
    let table = head.table();
    for t in 0..n {
        let history = &tokens[..=t];
        let next = tokens[t + 1];
        head.predict_into(Context { h: &[], history }, 1, &mut out);
        hit += (out.as_slice()[0].id == next) as usize;
        let prev2 = if t == 0 { head.pad() } else { tokens[t - 1] };
        let first = table
            .potential(prev2, tokens[t])
            .first()
            .or(table.frequent().first())
            .copied();
        tri += (first == Some(next)) as usize;
        head.candidates_into(history, &mut cands);
        cov += cands.contains(&next) as usize;
    }
    let nf = n.max(1) as f64;
    let (wpr_lists_p, wpr_lists_pf) = table3.map_or((f64::NAN, f64::NAN), |l| l.wpr(head, tokens));
    Evaluation {
        positions: n,
        wpr: hit as f64 / nf,
        trigram_wpr: tri as f64 / nf,
        coverage: cov as f64 / nf,
        wpr_lists_p,
        wpr_lists_pf,
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CandidatesReport {
    pub config: CandidatesConfig,
    pub train_positions: usize,
    pub table_bytes: usize,
    pub network_bytes: usize,
    pub epochs: Vec<EpochRecord>,
}

/// Trains the predictor on the `train` stream (token ids, `<eos>` between sentences), scoring
/// `valid` after every epoch; `on_epoch` sees the head after each (to checkpoint it).
#[allow(clippy::too_many_arguments)]
pub fn train_candidates(
    name: &str,
    train: &[u32],
    valid: &[u32],
    vocab: usize,
    pad: u32,
    lm_width: usize,
    cfg: &CandidatesConfig,
    teacher: Option<&Teacher>,
    device: &Device,
    log: &mut dyn FnMut(&str),
    on_epoch: &mut dyn FnMut(&CandidatesHead, &EpochRecord) -> Result<()>,
) -> Result<(CandidatesHead, CandidatesReport)> {
    cfg.validate(vocab)?;
    match teacher {
        _ if cfg.distill == 0.0 => {}
        None => {
            return Err(Error::Invalid(
                "distill > 0 needs a teacher (the language model or a trained predictor)".into(),
            ))
        }
        Some(Teacher::Lm { hs, full }) if hs.len() < (train.len() - 1) * full.dim() => {
            return Err(Error::Invalid(
                "distill > 0 needs the language model's context at every training position".into(),
            ))
        }
        Some(Teacher::Assistant(a)) if a.shape().slots != cfg.slots || a.shape().vocab != vocab => {
            return Err(Error::Invalid(format!(
                "the teacher predictor has {} slots over {} words, this run {} over {vocab}; train the assistant with the same slots and vocabulary",
                a.shape().slots,
                a.shape().vocab,
                cfg.slots
            )))
        }
        Some(_) => {}
    }
    if train.len() < 2 || valid.len() < 2 {
        return Err(Error::Invalid(
            "the training and validation texts need at least two words each".into(),
        ));
    }
    let started = Instant::now();
    let table = CandidateTable::build(train, vocab, &cfg.table)?;
    log(&format!(
        "trigram table: {} bytes from {} tokens ({:.1} s)",
        table.size_bytes(),
        train.len(),
        started.elapsed().as_secs_f64()
    ));
    let table3 = Table3Lists::build(train, valid, vocab, pad, cfg)?;
    let shape = cfg.shape(vocab);
    let (n, k) = (cfg.context, cfg.slots);
    let lists = ListMaker {
        table: &table,
        cfg,
        vocab,
    };
    let positions: Vec<usize> = {
        let all = train.len() - 1;
        let stride = if cfg.max_samples == 0 {
            1
        } else {
            all.div_ceil(cfg.max_samples)
        };
        (0..all).step_by(stride).collect()
    };
    let teacher = teacher
        .filter(|_| cfg.distill > 0.0)
        .map(|t| Targets::new(t, &mut *log));
    let mut teacher_buf = Vec::with_capacity(k + 1);
    let steps_per_epoch = positions.len().div_ceil(cfg.batch_size);
    let total_steps = (cfg.epochs * steps_per_epoch).max(2);
    let lr_at = |step: usize| {
        cfg.lr * (1.0 - (1.0 - cfg.final_lr_fraction) * step as f64 / (total_steps - 1) as f64)
    };
    device.seed(cfg.seed); // burn's parameter init
    let mut model = CandidateNet::new(cfg, vocab, device);
    let mut optim = AdamConfig::new().init();
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let mut order = positions.clone();
    let mut epochs = Vec::new();
    let mut head = None;
    let word = |t: isize| if t < 0 { pad } else { train[t as usize] };
    let mut list = Vec::with_capacity(k);
    for epoch in 1..=cfg.epochs {
        let t0 = Instant::now();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let (mut loss_sum, mut steps, mut in_list) = (0.0f64, 0usize, 0usize);
        for batch in order.chunks(cfg.batch_size) {
            let b = batch.len();
            let mut ctx = Vec::with_capacity(b * n);
            let mut cands = Vec::with_capacity(b * k);
            let mut target = Vec::with_capacity(b);
            let mut soft = Vec::with_capacity(if teacher.is_some() { b * (k + 1) } else { 0 });
            for &t in batch {
                let t = t as isize;
                ctx.extend((0..n as isize).map(|j| word(t - (n as isize - 1) + j) as i64));
                let slot = lists.make(
                    word(t - 1),
                    word(t),
                    train[t as usize + 1],
                    &mut rng,
                    &mut list,
                );
                in_list += (slot < k) as usize;
                cands.extend(list.iter().map(|&w| w as i64));
                target.push(slot as i64);
                if let Some(tr) = &teacher {
                    let t = t as usize;
                    tr.push(t, &train[..=t], &list, &mut teacher_buf, &mut soft);
                }
            }
            let ctx = Tensor::<2, Int>::from_data(TensorData::new(ctx, [b, n]), device);
            let cands = Tensor::<2, Int>::from_data(TensorData::new(cands, [b, k]), device);
            let target = Tensor::<2, Int>::from_data(TensorData::new(target, [b, 1]), device);
            let log_p = log_softmax(model.forward(ctx, cands), 1);
            let data_loss = log_p.clone().gather(1, target).mean().neg();
            let loss = if teacher.is_some() {
                let q = Tensor::<2>::from_data(TensorData::new(soft, [b, k + 1]), device);
                let distilled = (q * log_p).sum_dim(1).mean().neg();
                distilled.mul_scalar(cfg.distill) + data_loss.mul_scalar(1.0 - cfg.distill)
            } else {
                data_loss
            };
            loss_sum += loss.clone().into_scalar::<f32>() as f64;
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(lr_at((epoch - 1) * steps_per_epoch + steps), model, grads);
            steps += 1;
        }
        let h = CandidatesHead::new(name, model.export(shape), table.clone(), pad, lm_width)
            .map_err(|e| {
                Error::Invalid(format!(
                    "epoch {epoch} produced an unusable network ({e}); lower lr in the config"
                ))
            })?;
        let rec = EpochRecord {
            epoch,
            train_loss: loss_sum / steps.max(1) as f64,
            train_in_list: in_list as f64 / order.len().max(1) as f64,
            valid: evaluate(&h, valid, 0, Some(&table3)),
            seconds: t0.elapsed().as_secs_f64(),
        };
        log(&format!(
            "epoch {epoch}: train loss {:.4} (next word in the list {:.1}%) · validation WPR {:.4} (trigram alone {:.4}, ceiling {:.4}; on P lists {:.4}, PF lists {:.4}) ({:.0} s)",
            rec.train_loss,
            100.0 * rec.train_in_list,
            rec.valid.wpr,
            rec.valid.trigram_wpr,
            rec.valid.coverage,
            rec.valid.wpr_lists_p,
            rec.valid.wpr_lists_pf,
            rec.seconds
        ));
        on_epoch(&h, &rec)?;
        epochs.push(rec);
        head = Some(h);
    }
    let head = head.expect("at least one epoch");
    let (network_bytes, table_bytes) = head.size_bytes();
    let report = CandidatesReport {
        config: cfg.clone(),
        train_positions: positions.len(),
        table_bytes,
        network_bytes,
        epochs,
    };
    Ok((head, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rank: usize) -> CandidatesConfig {
        CandidatesConfig {
            context: 3,
            slots: 4,
            width: 8,
            rank,
            frequent_pool: 4,
            table: TrigramConfig {
                per_context: 2,
                min_count: 1,
                n_frequent: 6,
                backoff: true,
            },
            epochs: 1,
            batch_size: 16,
            distill: 0.0,
            fill: Fill::Frequent,
            ..CandidatesConfig::default()
        }
    }

    #[test]
    fn the_engine_matches_burns_probabilities() {
        let vocab = 20;
        let stream: Vec<u32> = (0..300u32).map(|i| (i * 7 + i / 5) % vocab).collect();
        let table = CandidateTable::build(&stream, vocab as usize, &cfg(2).table).unwrap();
        for rank in [2, 0] {
            let c = cfg(rank);
            let device = Device::flex();
            let net = CandidateNet::new(&c, vocab as usize, &device);
            let head = CandidatesHead::new(
                "x",
                net.export(c.shape(vocab as usize)),
                table.clone(),
                0,
                8,
            )
            .unwrap();
            let (mut cands, mut engine) = (Vec::new(), Vec::new());
            for end in [1usize, 2, 5, 40, 299] {
                let history = &stream[..end];
                head.candidates_into(history, &mut cands);
                head.slot_log_probs(history, &cands, &mut engine);
                let ctx: Vec<i64> = (0..3)
                    .map(|j| (end + j).checked_sub(3).map_or(0, |i| stream[i]) as i64)
                    .collect();
                let ctx = Tensor::<2, Int>::from_data(TensorData::new(ctx, [1, 3]), &device);
                let ids: Vec<i64> = cands.iter().map(|&w| w as i64).collect();
                let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [1, 4]), &device);
                let burn: Vec<f32> = log_softmax(net.forward(ctx, ids), 1)
                    .into_data()
                    .try_to_vec()
                    .unwrap();
                for (a, b) in engine.iter().zip(&burn) {
                    assert!((a - b).abs() < 1e-4, "rank {rank}: {engine:?} vs {burn:?}");
                }
            }
        }
    }

    #[test]
    fn the_lm_teachers_normalisers_match_the_log_sum_exp_of_every_logit() {
        // 150 contexts: two whole batches of 64 and a short one.
        let (vocab, d, n) = (70, 8, 150);
        let wave = |i: usize, m: usize| ((i * m % 997) as f32 / 498.0 - 1.0) * 0.5;
        let w: Vec<f32> = (0..vocab * d).map(|i| wave(i, 7919)).collect();
        let b: Vec<f32> = (0..vocab).map(|i| wave(i, 31)).collect();
        let hs: Vec<f32> = (0..n * d).map(|i| wave(i, 104729) * 4.0).collect();
        let full = FullHead::new(&w, &b, d).unwrap();
        let teacher = Teacher::Lm {
            hs: &hs,
            full: &full,
        };
        let Targets::Lm { log_z, .. } = Targets::new(&teacher, &mut |_| {}) else {
            unreachable!()
        };
        assert_eq!(log_z.len(), n);
        for (t, h) in hs.chunks(d).enumerate() {
            let logits: Vec<f64> = (0..vocab)
                .map(|i| (0..d).map(|j| (w[i * d + j] * h[j]) as f64).sum::<f64>() + b[i] as f64)
                .collect();
            let max = logits.iter().cloned().fold(f64::MIN, f64::max);
            let naive = max + logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln();
            assert!(
                (log_z[t] as f64 - naive).abs() < 1e-4,
                "position {t}: {} vs {naive}",
                log_z[t]
            );
        }
    }

    #[test]
    fn table3_lists_are_distinct_in_range_and_find_the_true_slot() {
        let vocab = 20;
        let stream: Vec<u32> = (0..400u32).map(|i| (i * 7 + i / 5) % vocab).collect();
        let c = CandidatesConfig {
            frequent_pool: 6,
            ..cfg(2)
        };
        let lists = Table3Lists::build(&stream, &stream, vocab as usize, 0, &c).unwrap();
        let p_table = CandidateTable::build(
            &stream,
            vocab as usize,
            &TrigramConfig {
                per_context: c.slots,
                ..c.table.clone()
            },
        )
        .unwrap();
        let frequent = &p_table.frequent()[..c.frequent_pool];
        for (kind, all) in [("P", &lists.p), ("PF", &lists.pf)] {
            assert_eq!(all.len(), stream.len() - 1);
            for (t, (list, slot)) in all.iter().enumerate() {
                let mut sorted = list.clone();
                sorted.sort();
                sorted.dedup();
                assert_eq!(sorted.len(), c.slots, "{kind} {list:?}");
                assert!(list.iter().all(|&w| w < vocab));
                let next = stream[t + 1];
                assert_eq!(list.get(*slot), (*slot < c.slots).then_some(&next));
                assert_eq!(*slot == c.slots, !list.contains(&next));
                let prev2 = if t == 0 { 0 } else { stream[t - 1] };
                let potential = p_table.potential(prev2, stream[t]);
                if kind == "P" {
                    // Up to k potential words, in the table's order.
                    let m = potential.len().min(c.slots);
                    assert_eq!(&list[..m], &potential[..m]);
                } else {
                    // Up to k/2 potential words, then frequent ones.
                    let m = potential.len().min(c.slots / 2);
                    assert_eq!(&list[..m], &potential[..m]);
                    assert!(list[m..].iter().all(|w| frequent.contains(w)), "{list:?}");
                }
            }
        }
    }

    #[test]
    fn the_none_slot_wins_where_the_next_word_is_never_a_candidate() {
        // Four frequent words cycle; now and then "8 9" is followed by 7, a word too rare to
        // be a candidate (no trigram passes min_count, the fill is the 4 most frequent words).
        let mut stream = Vec::new();
        for i in 0..600u32 {
            stream.push(i % 4);
            if i % 10 == 3 {
                stream.extend([8, 9, 7]);
            }
        }
        let mut c = cfg(0);
        c.table.min_count = 10_000;
        c.epochs = 30;
        c.lr = 0.01;
        let device = Device::flex().autodiff();
        let (head, report) = train_candidates(
            "x",
            &stream,
            &stream,
            10,
            0,
            8,
            &c,
            None,
            &device,
            &mut |_| {},
            &mut |_, _| Ok(()),
        )
        .unwrap();
        assert!(report.epochs.last().unwrap().train_in_list < 0.95);
        let mut cands = Vec::new();
        let mut lp = Vec::new();
        // After "… 8 9": the next word (7) is not in the list; "none" (slot 4) is most likely.
        let after = [0, 1, 2, 3, 8, 9];
        head.candidates_into(&after, &mut cands);
        assert!(!cands.contains(&7));
        head.slot_log_probs(&after, &cands, &mut lp);
        let best = (0..lp.len())
            .max_by(|&a, &b| lp[a].total_cmp(&lp[b]))
            .unwrap();
        assert_eq!(best, 4, "{lp:?}");
        // After "… 0 1 2": the next word (3) is a candidate and wins.
        let before = [3, 0, 1, 2];
        head.candidates_into(&before, &mut cands);
        head.slot_log_probs(&before, &cands, &mut lp);
        let best = (0..lp.len())
            .max_by(|&a, &b| lp[a].total_cmp(&lp[b]))
            .unwrap();
        assert_eq!(cands.get(best), Some(&3), "{cands:?} {lp:?}");
    }
}
