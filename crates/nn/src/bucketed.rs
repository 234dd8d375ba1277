//! Training the frequency-bucketed heads, D-softmax and adaptive softmax, on top of a frozen
//! language model (see `fastsoftmax_infer::heads::{dsoftmax, adaptive}` for how they serve).
//!
//! 1. Words are sorted by their count as next word in the training contexts and cut at
//!    `cutoffs` into buckets; bucket `i` gets width `d / width_divisor^i` (bucket 0 sees `h`).
//! 2. Initialisation from the model's own output layer, so training starts close: a narrow
//!    bucket's projection is the top principal directions of its rows (the best rank-`d_i`
//!    approximation of its logits); adaptive softmax's cluster rows start at the mean of
//!    their words' rows with bias `mean b + ln n_c`.
//! 3. SGD with momentum on burn (`optimizer = adam` moved rare rows as far as frequent ones and
//!    lost P@1), on cross-entropy against either the frozen full softmax's distribution
//!    (`target = teacher`, the default: the comparison measures agreement with it) or the
//!    true next word (`data`, as the papers train them).

use std::time::Instant;

use burn::module::{Module, Param};
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, GradientsParams, SgdConfig};
use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::{Device, Int, Tensor, TensorData};
use fastsoftmax_infer::eval::{bench_heads, Contexts, HeadReport};
use fastsoftmax_infer::heads::bucketed::Bucket;
use fastsoftmax_infer::heads::lowrank::principal_directions;
use fastsoftmax_infer::{
    AdaptiveHead, DsoftmaxHead, FullHead, LanguageModel, Predictor, SoftmaxHead,
};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BucketKind {
    /// One softmax over every bucket.
    Dsoftmax,
    /// A head level (frequent words + one row per cluster) and one softmax per tail cluster.
    Adaptive,
}

impl BucketKind {
    pub fn name(self) -> &'static str {
        match self {
            BucketKind::Dsoftmax => "dsoftmax",
            BucketKind::Adaptive => "adaptive",
        }
    }
}

/// What the head learns to predict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// The frozen full softmax's distribution (distillation).
    Teacher,
    /// The true next word.
    Data,
}

/// Hyper-parameters (`experiments/configs/{dsoftmax,adaptive}.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketConfig {
    pub kind: BucketKind,
    /// Frequency ranks where buckets end: `[2500, 5000]` makes words 0..2500, 2500..5000 and
    /// 5000..vocab by frequency. For adaptive softmax the first cutoff is the head size.
    pub cutoffs: Vec<usize>,
    /// Bucket `i` has width `d / width_divisor^i` (D-softmax paper: 2; adaptive softmax: 4).
    pub width_divisor: usize,
    pub target: Target,
    /// `sgd` (with momentum 0.9) or `adam`. Adam's per-weight step moves the rows of rare words
    /// as far as frequent ones on noisy gradients, which measurably costs P@1 here.
    pub optimizer: String,
    pub epochs: usize,
    pub lr: f64,
    pub batch_size: usize,
    /// Training contexts used, evenly spaced (0 = all).
    pub max_contexts: usize,
    /// Validation contexts scored after every epoch (0 = all).
    pub valid_contexts: usize,
    pub seed: u64,
}

impl BucketConfig {
    /// The DS-Softmax paper's D-softmax for PTB: 2,500 / 2,500 / 5,000 words at d, d/2, d/4.
    pub fn dsoftmax() -> Self {
        BucketConfig {
            kind: BucketKind::Dsoftmax,
            cutoffs: vec![2500, 5000],
            width_divisor: 2,
            target: Target::Teacher,
            optimizer: "sgd".into(),
            epochs: 1,
            lr: 0.1,
            batch_size: 512,
            max_contexts: 200_000,
            valid_contexts: 10_000,
            seed: 17,
        }
    }

    /// Adaptive softmax with a 2,000-word head and two tail clusters at d/4 and d/16.
    pub fn adaptive() -> Self {
        BucketConfig {
            kind: BucketKind::Adaptive,
            cutoffs: vec![2000, 5000],
            width_divisor: 4,
            ..Self::dsoftmax()
        }
    }

    pub fn defaults(kind: BucketKind) -> Self {
        match kind {
            BucketKind::Dsoftmax => Self::dsoftmax(),
            BucketKind::Adaptive => Self::adaptive(),
        }
    }

    pub fn validate(&self, d: usize, vocab: usize) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(format!("{} config: {m}", self.kind.name())));
        if self.cutoffs.is_empty()
            || self.cutoffs.windows(2).any(|w| w[0] >= w[1])
            || self.cutoffs[0] == 0
            || *self.cutoffs.last().unwrap() >= vocab
        {
            return bad(format!(
                "cutoffs {:?} must rise strictly within 1..{vocab} (e.g. [2500, 5000])",
                self.cutoffs
            ));
        }
        if self.width_divisor < 2 {
            return bad("width_divisor must be ≥ 2 (each bucket narrower than the last)".into());
        }
        if self.widths(d).contains(&0) {
            return bad(format!(
                "{} buckets with width_divisor {} leave a bucket of width 0 at d = {d}; use fewer cutoffs",
                self.cutoffs.len() + 1,
                self.width_divisor
            ));
        }
        if !matches!(self.optimizer.as_str(), "sgd" | "adam") {
            return bad(format!(
                "optimizer {:?}: choose sgd or adam",
                self.optimizer
            ));
        }
        if self.epochs == 0 || self.batch_size == 0 || self.lr.is_nan() || self.lr <= 0.0 {
            return bad("epochs, batch_size and lr must be positive".into());
        }
        Ok(())
    }

    /// Width of every bucket.
    pub fn widths(&self, d: usize) -> Vec<usize> {
        (0..=self.cutoffs.len())
            .map(|i| d / self.width_divisor.pow(i as u32))
            .collect()
    }
}

/// Word ids by decreasing count in `next` (ties by id; unseen words last).
pub fn frequency_order(next: &[u32], vocab: usize) -> Vec<u32> {
    let mut count = vec![0usize; vocab];
    for &w in next {
        count[w as usize] += 1;
    }
    let mut order: Vec<u32> = (0..vocab as u32).collect();
    order.sort_by(|&a, &b| count[b as usize].cmp(&count[a as usize]).then(a.cmp(&b)));
    order
}

/// The buckets of `cfg`, initialised from `full` (see the module docs).
pub fn init_buckets(full: &FullHead, order: &[u32], cfg: &BucketConfig) -> Vec<Bucket> {
    let (d, m) = (full.dim(), full.matrix());
    let mut bounds = vec![0];
    bounds.extend(&cfg.cutoffs);
    bounds.push(order.len());
    let widths = cfg.widths(d);
    let mut buckets: Vec<Bucket> = bounds
        .windows(2)
        .zip(&widths)
        .map(|(w, &di)| {
            let ids = order[w[0]..w[1]].to_vec();
            let rows: Vec<f32> = ids.iter().flat_map(|&i| m.row(i as usize)).collect();
            let bias: Vec<f32> = ids.iter().map(|&i| m.bias(i as usize)).collect();
            if di == d {
                return Bucket {
                    ids,
                    proj: None,
                    weights: rows,
                    bias,
                };
            }
            let p = principal_directions(&rows, d, di);
            let weights = rows
                .chunks_exact(d)
                .flat_map(|r| {
                    p.chunks_exact(d)
                        .map(|v| fastsoftmax_infer::kernels::dot(v, r))
                })
                .collect();
            Bucket {
                ids,
                proj: Some(p),
                weights,
                bias,
            }
        })
        .collect();
    if cfg.kind == BucketKind::Adaptive {
        let (head, tail) = buckets.split_first_mut().expect("at least two buckets");
        for c in tail.iter() {
            let n = c.ids.len() as f32;
            for j in 0..d {
                let mean = c.ids.iter().map(|&i| m.row(i as usize)[j]).sum::<f32>() / n;
                head.weights.push(mean);
            }
            head.bias.push(c.bias.iter().sum::<f32>() / n + n.ln());
        }
    }
    buckets
}

/// Either trained head (adaptive boxed: it is the larger by far).
#[derive(Debug, Clone)]
pub enum BucketedHead {
    Dsoftmax(DsoftmaxHead),
    Adaptive(Box<AdaptiveHead>),
}

impl BucketedHead {
    pub fn new(kind: BucketKind, name: &str, d: usize, vocab: usize, b: &[Bucket]) -> Result<Self> {
        Ok(match kind {
            BucketKind::Dsoftmax => Self::Dsoftmax(DsoftmaxHead::new(name, d, vocab, b)?),
            BucketKind::Adaptive => Self::Adaptive(Box::new(AdaptiveHead::new(name, d, vocab, b)?)),
        })
    }

    pub fn head(&self) -> &dyn Predictor {
        match self {
            Self::Dsoftmax(h) => h,
            Self::Adaptive(h) => h.as_ref(),
        }
    }

    pub fn buckets(&self) -> Vec<Bucket> {
        match self {
            Self::Dsoftmax(h) => h.buckets(),
            Self::Adaptive(h) => h.buckets(),
        }
    }

    pub fn save(
        &self,
        dir: &std::path::Path,
        lm: &LanguageModel,
        training: serde_json::Value,
        extra: &[(&str, &[u8])],
    ) -> fastsoftmax_infer::Result<()> {
        match self {
            Self::Dsoftmax(h) => h.save(dir, lm, training, extra),
            Self::Adaptive(h) => h.save(dir, lm, training, extra),
        }
    }
}

/// The trainable parameters: bucket `i`'s rows and bias, and for `i ≥ 1` its projection.
#[derive(Module, Debug)]
pub struct BucketModel {
    /// `[d_i, d]` for buckets 1..
    pub proj: Vec<Param<Tensor<2>>>,
    /// `[rows_i, d_i]`
    pub weights: Vec<Param<Tensor<2>>>,
    /// `[rows_i]`
    pub bias: Vec<Param<Tensor<1>>>,
}

impl BucketModel {
    pub fn new(buckets: &[Bucket], d: usize, device: &Device) -> Self {
        let t2 = |v: &[f32], shape: [usize; 2]| {
            Param::from_tensor(Tensor::from_data(
                TensorData::new(v.to_vec(), shape),
                device,
            ))
        };
        BucketModel {
            proj: buckets[1..]
                .iter()
                .map(|b| {
                    let p = b
                        .proj
                        .as_ref()
                        .expect("buckets after the first are projected");
                    t2(p, [p.len() / d, d])
                })
                .collect(),
            weights: buckets
                .iter()
                .map(|b| t2(&b.weights, [b.bias.len(), b.width(d)]))
                .collect(),
            bias: buckets
                .iter()
                .map(|b| {
                    Param::from_tensor(Tensor::from_data(
                        TensorData::new(b.bias.clone(), [b.bias.len()]),
                        device,
                    ))
                })
                .collect(),
        }
    }

    /// The parameters back as buckets (ids from `like`).
    pub fn to_buckets(&self, like: &[Bucket]) -> Vec<Bucket> {
        let v = |t: Tensor<2>| t.into_data().try_to_vec::<f32>().expect("f32 parameters");
        like.iter()
            .enumerate()
            .map(|(i, b)| Bucket {
                ids: b.ids.clone(),
                proj: (i > 0).then(|| v(self.proj[i - 1].val())),
                weights: v(self.weights[i].val()),
                bias: self.bias[i]
                    .val()
                    .into_data()
                    .try_to_vec::<f32>()
                    .expect("f32 parameters"),
            })
            .collect()
    }

    /// Log-probabilities `[b, vocab]` of every word, columns in bucket order.
    pub fn log_probs(&self, h: Tensor<2>, kind: BucketKind, head_words: usize) -> Tensor<2> {
        let logits: Vec<Tensor<2>> = self
            .weights
            .iter()
            .zip(&self.bias)
            .enumerate()
            .map(|(i, (w, b))| {
                let view = if i == 0 {
                    h.clone()
                } else {
                    h.clone().matmul(self.proj[i - 1].val().transpose())
                };
                view.matmul(w.val().transpose()) + b.val().unsqueeze_dim(0)
            })
            .collect();
        match kind {
            BucketKind::Dsoftmax => log_softmax(Tensor::cat(logits, 1), 1),
            BucketKind::Adaptive => {
                let mut levels = logits.into_iter();
                let head = log_softmax(levels.next().expect("a head level"), 1);
                let [b, _] = head.dims();
                let mut parts = vec![head.clone().slice([0..b, 0..head_words])];
                for (c, cluster) in levels.enumerate() {
                    let p_cluster = head
                        .clone()
                        .slice([0..b, head_words + c..head_words + c + 1]);
                    parts.push(log_softmax(cluster, 1) + p_cluster);
                }
                Tensor::cat(parts, 1)
            }
        }
    }
}

/// One epoch's line in the report.
#[derive(Debug, Clone, Serialize)]
pub struct EpochRecord {
    pub epoch: usize,
    pub train_loss: f64,
    pub valid: HeadReport,
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BucketReport {
    pub config: BucketConfig,
    pub train_contexts: usize,
    pub valid_contexts: usize,
    pub bucket_sizes: Vec<usize>,
    pub widths: Vec<usize>,
    /// The initialisation from the output layer, before any training.
    pub init: HeadReport,
    pub epochs: Vec<EpochRecord>,
}

/// Trains the head of `cfg.kind` for `full` on `train` (next words and contexts of the frozen
/// LM); `start` continues from an earlier head's buckets. `on_epoch` sees the head after every
/// epoch (to checkpoint it).
#[allow(clippy::too_many_arguments)]
pub fn train_bucketed(
    name: &str,
    full: &FullHead,
    train: &Contexts,
    valid: &Contexts,
    cfg: &BucketConfig,
    start: Option<Vec<Bucket>>,
    device: &Device,
    log: &mut dyn FnMut(&str),
    on_epoch: &mut dyn FnMut(&BucketedHead, &EpochRecord) -> Result<()>,
) -> Result<(BucketedHead, BucketReport)> {
    let (d, vocab) = (full.dim(), SoftmaxHead::vocab_size(full));
    cfg.validate(d, vocab)?;
    if train.is_empty() || valid.is_empty() {
        return Err(Error::Invalid(
            "no training or validation contexts; check --train/--valid".into(),
        ));
    }
    let init = match start {
        Some(b) => b,
        None => init_buckets(full, &frequency_order(&train.next, vocab), cfg),
    };
    let kind = cfg.kind;
    let head_words = init[0].ids.len();
    let order: Vec<u32> = init.iter().flat_map(|b| b.ids.iter().copied()).collect();
    let mut column = vec![0u32; vocab];
    for (c, &w) in order.iter().enumerate() {
        column[w as usize] = c as u32;
    }
    let valid = subsample(valid, cfg.valid_contexts);
    let score = |b: &[Bucket]| -> Result<(BucketedHead, HeadReport)> {
        let head = BucketedHead::new(kind, name, d, vocab, b)?;
        let report = bench_heads(full, &[head.head()], &valid, 1, None)?.remove(0);
        Ok((head, report))
    };
    let (_, init_report) = score(&init)?;
    log(&format!(
        "init from the output layer: {}",
        line(&init_report)
    ));

    // The teacher's weights, in column order: `[d, vocab]`.
    let m = full.matrix();
    let wt: Vec<f32> = (0..d)
        .flat_map(|j| order.iter().map(move |&w| (w, j)))
        .map(|(w, j)| m.row(w as usize)[j])
        .collect();
    let teacher_w = Tensor::<2>::from_data(TensorData::new(wt, [d, vocab]), device);
    let teacher_b = Tensor::<1>::from_data(
        TensorData::new(order.iter().map(|&w| m.bias(w as usize)).collect(), [vocab]),
        device,
    )
    .unsqueeze_dim(0);

    let mut model = BucketModel::new(&init, d, device);
    let mut optim = match cfg.optimizer.as_str() {
        "adam" => AdamConfig::new().init(),
        _ => SgdConfig::new()
            .with_momentum(Some(MomentumConfig::new()))
            .init(),
    };
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let mut idx: Vec<usize> = (0..train.len()).collect();
    let mut epochs = Vec::new();
    let mut head = None;
    for epoch in 1..=cfg.epochs {
        let t0 = Instant::now();
        rand::seq::SliceRandom::shuffle(&mut idx[..], &mut rng);
        let (mut loss_sum, mut steps) = (0.0f64, 0usize);
        for batch in idx.chunks(cfg.batch_size) {
            let b = batch.len();
            let h: Vec<f32> = batch
                .iter()
                .flat_map(|&i| train.get(i).iter().copied())
                .collect();
            let h = Tensor::<2>::from_data(TensorData::new(h, [b, d]), device);
            let target = match cfg.target {
                Target::Teacher => {
                    softmax(h.clone().matmul(teacher_w.clone()) + teacher_b.clone(), 1)
                }
                Target::Data => {
                    let cols: Vec<i64> = batch
                        .iter()
                        .map(|&i| column[train.next[i] as usize] as i64)
                        .collect();
                    Tensor::<1, Int>::from_data(TensorData::new(cols, [b]), device)
                        .one_hot::<2>(vocab)
                        .float()
                }
            };
            let lp = model.log_probs(h, kind, head_words);
            let loss = (target * lp).sum_dim(1).mean().neg();
            loss_sum += loss.clone().into_scalar::<f32>() as f64;
            steps += 1;
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(cfg.lr, model, grads);
        }
        let buckets = model.to_buckets(&init);
        let (h, report) = score(&buckets).map_err(|e| {
            Error::Invalid(format!(
                "epoch {epoch} produced an unusable head ({e}); lower lr in the config"
            ))
        })?;
        let rec = EpochRecord {
            epoch,
            train_loss: loss_sum / steps.max(1) as f64,
            valid: report,
            seconds: t0.elapsed().as_secs_f64(),
        };
        log(&format!(
            "epoch {epoch}: train loss {:.4} · {} ({:.0} s)",
            rec.train_loss,
            line(&rec.valid),
            rec.seconds
        ));
        on_epoch(&h, &rec)?;
        epochs.push(rec);
        head = Some(h);
    }
    let head = head.expect("at least one epoch");
    let report = BucketReport {
        config: cfg.clone(),
        train_contexts: train.len(),
        valid_contexts: valid.len(),
        bucket_sizes: init.iter().map(|b| b.ids.len()).collect(),
        widths: init.iter().map(|b| b.width(d)).collect(),
        init: init_report,
        epochs,
    };
    Ok((head, report))
}

fn line(r: &HeadReport) -> String {
    format!(
        "validation P@1 {:.4} P@5 {:.4} top-1 {:.4} · {:.2}× fewer dot products",
        r.p_at_1, r.p_at_5, r.acc_at_1, r.flop_speedup
    )
}

/// At most `max` contexts of `c`, evenly spaced (0 = all).
pub fn subsample(c: &Contexts, max: usize) -> Contexts {
    if max == 0 || c.len() <= max {
        return c.clone();
    }
    let stride = c.len().div_ceil(max);
    let keep: Vec<usize> = (0..c.len()).step_by(stride).collect();
    Contexts {
        d: c.d,
        hs: keep
            .iter()
            .flat_map(|&i| c.get(i).iter().copied())
            .collect(),
        next: keep.iter().map(|&i| c.next[i]).collect(),
        history: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastsoftmax_infer::kernels::seeded_values as values;

    fn fixture(v: usize, d: usize, n: usize) -> (FullHead, Contexts) {
        let full = FullHead::new(&values(v * d, 1), &values(v, 2), d).unwrap();
        let hs: Vec<f32> = values(n * d, 3).iter().map(|x| 2.0 * x).collect();
        let next = (0..n).map(|i| ((i * i) % v) as u32).collect();
        (
            full,
            Contexts {
                d,
                hs,
                next,
                history: Vec::new(),
            },
        )
    }

    #[test]
    fn frequency_order_puts_frequent_words_first() {
        assert_eq!(frequency_order(&[3, 1, 3, 2, 1, 3], 5), vec![3, 1, 2, 0, 4]);
    }

    #[test]
    fn config_errors_name_the_field() {
        let mut c = BucketConfig::dsoftmax();
        c.cutoffs = vec![5000, 2500];
        assert!(c
            .validate(200, 10_000)
            .unwrap_err()
            .to_string()
            .contains("cutoffs"));
        let mut c = BucketConfig::adaptive();
        c.cutoffs = vec![10, 20, 30, 40];
        assert!(c
            .validate(16, 100)
            .unwrap_err()
            .to_string()
            .contains("width 0"));
        assert!(BucketConfig::adaptive().validate(200, 10_000).is_ok());
    }

    #[test]
    fn both_kinds_train_and_their_burn_probabilities_match_the_engine() {
        let (v, d) = (60, 16);
        let (full, data) = fixture(v, d, 400);
        let device = Device::flex().autodiff();
        for kind in [BucketKind::Dsoftmax, BucketKind::Adaptive] {
            let cfg = BucketConfig {
                cutoffs: vec![10, 30],
                width_divisor: 2,
                epochs: 3,
                batch_size: 64,
                lr: 0.5,
                // The init is already the teacher's best low-rank copy; the data's labels are
                // far from it, so the loss must fall.
                target: Target::Data,
                max_contexts: 0,
                valid_contexts: 0,
                ..BucketConfig::defaults(kind)
            };
            let mut seen = 0;
            let (head, report) = train_bucketed(
                "x",
                &full,
                &data,
                &data,
                &cfg,
                None,
                &device,
                &mut |_| {},
                &mut |_, _| {
                    seen += 1;
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(seen, 3);
            assert_eq!(report.widths, vec![16, 8, 4]);
            let losses: Vec<f64> = report.epochs.iter().map(|e| e.train_loss).collect();
            assert!(losses[2] < losses[0], "{kind:?}: loss {losses:?}");
            // burn's log-probabilities agree with the engine's scores.
            let buckets = head.buckets();
            let model = BucketModel::new(&buckets, d, &Device::flex());
            let h = data.get(7).to_vec();
            let lp = model
                .log_probs(
                    Tensor::from_data(TensorData::new(h.clone(), [1, d]), &Device::flex()),
                    kind,
                    buckets[0].ids.len(),
                )
                .into_data()
                .try_to_vec::<f32>()
                .unwrap();
            let order: Vec<u32> = buckets.iter().flat_map(|b| b.ids.clone()).collect();
            let ctx = fastsoftmax_infer::Context {
                h: &h,
                history: &[],
            };
            let best = head.head().predict(ctx, 3).unwrap();
            let lse = lp.iter().map(|x| (*x as f64).exp()).sum::<f64>().ln();
            assert!(lse.abs() < 1e-4, "log-probabilities normalise");
            // The engine scores log-probabilities (adaptive) or logits (D-softmax: one
            // softmax, so they differ from burn's log-probabilities by one constant).
            let offsets: Vec<f32> = best
                .iter()
                .map(|s| lp[order.iter().position(|&w| w == s.id).unwrap()] - s.logit)
                .collect();
            let want = if kind == BucketKind::Adaptive {
                0.0
            } else {
                offsets[0]
            };
            for o in &offsets {
                assert!((o - want).abs() < 1e-3, "{kind:?}: {offsets:?}");
            }
        }
    }
}
