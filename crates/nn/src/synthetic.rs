//! The DS-Softmax paper's synthetic check (its Appendix A): a two-level hierarchy of Gaussian
//! classes, a two-layer MLP, and the question whether the experts recover the hierarchy.
//!
//! Data: `S` super-class centres `c_s ~ N(0, d³ I)`, `M` sub-classes per super class
//! `c_j ~ N(c_s, d² I)`, points `x ~ N(c_j, d I)`; the label is the sub-class (`S·M` classes),
//! the super class is never shown. The MLP (`d → hidden → hidden`, ReLU) is pre-trained with a
//! full softmax, then its softmax is replaced by a DS layer retrained on the frozen features —
//! the same recipe as for language models. The result is an expert × sub-class map of which
//! classes each expert kept, and its purity: how much of each expert comes from one super class.

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::activation::{log_softmax, relu};
use burn::tensor::{Device, Int, Tensor, TensorData};
use fastsoftmax_infer::eval::Contexts;
use fastsoftmax_infer::{DsHead, FullHead};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::ds::{train_ds, DsConfig, DsReport};
use crate::Result;

/// A hierarchical Gaussian data set.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    pub supers: usize,
    pub subs_per_super: usize,
    pub dim: usize,
    /// `[n, dim]`
    pub x: Vec<f32>,
    /// `[n]` sub-class `s · subs_per_super + j`
    pub y: Vec<u32>,
}

impl Hierarchy {
    /// `points` points per sub-class, drawn as in Appendix A (Eq. 3–5). The centres depend on
    /// `seed` only, the points on `point_seed` too, so train and test sets share the classes.
    pub fn generate(
        supers: usize,
        subs: usize,
        dim: usize,
        points: usize,
        seed: u64,
        point_seed: u64,
    ) -> Self {
        let d = dim as f64;
        let normal = |mean: &[f64], var: f64, rng: &mut StdRng| -> Vec<f64> {
            mean.iter()
                .map(|m| m + var.sqrt() * gaussian(rng))
                .collect()
        };
        let mut rng = StdRng::seed_from_u64(seed);
        let origin = vec![0.0; dim];
        let mut centres = Vec::with_capacity(supers * subs);
        for _ in 0..supers {
            let c_super = normal(&origin, d.powi(3), &mut rng);
            for _ in 0..subs {
                centres.push(normal(&c_super, d.powi(2), &mut rng));
            }
        }
        let mut rng = StdRng::seed_from_u64(seed ^ point_seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut x = Vec::with_capacity(centres.len() * points * dim);
        let mut y = Vec::with_capacity(centres.len() * points);
        for (c, centre) in centres.iter().enumerate() {
            for _ in 0..points {
                x.extend(normal(centre, d, &mut rng).into_iter().map(|v| v as f32));
                y.push(c as u32);
            }
        }
        Hierarchy {
            supers,
            subs_per_super: subs,
            dim,
            x,
            y,
        }
    }

    pub fn classes(&self) -> usize {
        self.supers * self.subs_per_super
    }

    pub fn len(&self) -> usize {
        self.y.len()
    }

    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }
}

/// The two-layer MLP with its pre-training softmax.
#[derive(Module, Debug)]
pub struct Mlp {
    l1: Linear,
    l2: Linear,
    /// The full softmax, replaced by DS after pre-training.
    out: Linear,
}

impl Mlp {
    pub fn new(d_input: usize, d_hidden: usize, classes: usize, device: &Device) -> Self {
        Mlp {
            l1: LinearConfig::new(d_input, d_hidden).init(device),
            l2: LinearConfig::new(d_hidden, d_hidden).init(device),
            out: LinearConfig::new(d_hidden, classes).init(device),
        }
    }

    /// `[n, d_input]` → features `[n, d_hidden]`.
    pub fn features(&self, x: Tensor<2>) -> Tensor<2> {
        relu(self.l2.forward(relu(self.l1.forward(x))))
    }

    /// The pre-trained softmax as the engine's exact head.
    pub fn full_head(&self) -> Result<FullHead> {
        let [d, v] = self.out.weight.val().dims();
        let w = self.out.weight.val().transpose().into_data();
        let b = self.out.bias.as_ref().expect("bias").val().into_data();
        let w = w.convert::<f32>().try_to_vec::<f32>().expect("f32");
        let b = b.convert::<f32>().try_to_vec::<f32>().expect("f32");
        debug_assert_eq!(w.len(), v * d);
        Ok(FullHead::new(&w, &b, d)?)
    }
}

/// DS settings for the synthetic task: no mitosis, a stronger lasso (few classes, many
/// points each), several passes.
pub fn default_config() -> DsConfig {
    DsConfig {
        start_experts: usize::MAX,
        epochs_per_stage: 20.0,
        final_stage_epochs: 20.0,
        prune_from: 0.3,
        prune_every: 10,
        lambda_lasso: 1e-3,
        lambda_expert: 1e-3,
        batch_size: 256,
        lr: 3e-3,
        gate_init: "kmeans".into(),
        ..DsConfig::default()
    }
}

/// Everything the synthetic run reports.
#[derive(Debug, Clone, Serialize)]
pub struct SyntheticReport {
    pub supers: usize,
    pub subs_per_super: usize,
    pub experts: usize,
    pub train_points: usize,
    /// Accuracy of the pre-trained MLP with its full softmax, on held-out points.
    pub full_accuracy: f64,
    /// Accuracy with the DS head, on the same points.
    pub ds_accuracy: f64,
    /// Mean over non-empty experts of the share of its classes from its main super class.
    pub purity: f64,
    pub ds: DsReport,
    /// `[experts][classes]`: 1 where the expert kept the sub-class (drawn, not serialized).
    #[serde(skip)]
    pub kept: Vec<Vec<u8>>,
}

/// Generates the data, pre-trains the MLP, trains DS on its features and measures purity.
pub fn run(
    supers: usize,
    subs: usize,
    experts: usize,
    cfg: &DsConfig,
    device: &Device,
    log: &mut dyn FnMut(&str),
) -> Result<(SyntheticReport, DsHead)> {
    const DIM: usize = 10;
    const HIDDEN: usize = 64;
    let points = (20_000 / (supers * subs)).clamp(20, 100);
    let train = Hierarchy::generate(supers, subs, DIM, points, cfg.seed, 1);
    let held = Hierarchy::generate(supers, subs, DIM, points.div_ceil(4), cfg.seed, 2);
    let classes = train.classes();
    device.seed(cfg.seed); // burn's parameter init: the same MLP for the same seed
    let mut mlp = Mlp::new(DIM, HIDDEN, classes, device);
    let mut optim = AdamConfig::new().init();
    let mut rng = StdRng::seed_from_u64(cfg.seed ^ 0x51);
    let n = train.len();
    let mut order: Vec<usize> = (0..n).collect();
    let scale = 1.0 / (DIM as f32).powf(1.5); // inputs of std ~d^1.5 → O(1)
    let tensor_x = |idx: &[usize], data: &Hierarchy| -> Tensor<2> {
        let x: Vec<f32> = idx
            .iter()
            .flat_map(|&i| data.x[i * DIM..(i + 1) * DIM].iter().map(|v| v * scale))
            .collect();
        Tensor::from_data(TensorData::new(x, [idx.len(), DIM]), device)
    };
    // Enough passes for ~300k examples in all: 30 on 10×10, 5 on 100×100.
    let epochs = (300_000 / n).clamp(5, 30);
    for epoch in 0..epochs {
        for i in (1..n).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let mut sum = 0.0;
        for idx in order.chunks(256) {
            let y: Vec<i64> = idx.iter().map(|&i| train.y[i] as i64).collect();
            let y = Tensor::<2, Int>::from_data(TensorData::new(y, [idx.len(), 1]), device);
            let logits = mlp.out.forward(mlp.features(tensor_x(idx, &train)));
            let loss = log_softmax(logits, 1).gather(1, y).mean().neg();
            sum += loss.clone().into_scalar::<f32>() as f64;
            let grads = GradientsParams::from_grads(loss.backward(), &mlp);
            mlp = optim.step(3e-3, mlp, grads);
        }
        if epoch % 5 == 4 || epoch + 1 == epochs {
            log(&format!(
                "MLP pre-training epoch {}: loss {:.4}",
                epoch + 1,
                sum / n.div_ceil(256) as f64
            ));
        }
    }
    let full = mlp.full_head()?;
    let features = |data: &Hierarchy| -> Contexts {
        let all: Vec<usize> = (0..data.len()).collect();
        let f = mlp.features(tensor_x(&all, data)).into_data();
        Contexts {
            d: HIDDEN,
            hs: f.convert::<f32>().try_to_vec::<f32>().expect("f32"),
            next: data.y.clone(),
            history: Vec::new(),
        }
    };
    let (train_f, held_f) = (features(&train), features(&held));
    let mut cfg = cfg.clone();
    cfg.experts = experts;
    cfg.start_experts = cfg.start_experts.min(experts);
    let (head, ds) = train_ds(
        "ds",
        &full,
        &train_f,
        &held_f,
        &cfg,
        None,
        device,
        log,
        &mut |_, _| Ok(()),
    )?;
    let full_accuracy = accuracy(&full, &held_f);
    let ds_accuracy = accuracy(&head, &held_f);
    let mut kept = vec![vec![0u8; classes]; head.n_experts()];
    for (e, row) in kept.iter_mut().enumerate() {
        for c in head.expert(e).ids {
            row[c as usize] = 1;
        }
    }
    let report = SyntheticReport {
        supers,
        subs_per_super: subs,
        experts: head.n_experts(),
        train_points: n,
        full_accuracy,
        ds_accuracy,
        purity: purity(&kept, subs),
        ds,
        kept,
    };
    Ok((report, head))
}

fn accuracy(head: &dyn fastsoftmax_infer::SoftmaxHead, data: &Contexts) -> f64 {
    let mut t = fastsoftmax_infer::TopK::new(1);
    let hits = (0..data.len())
        .filter(|&i| {
            head.top_k_into(data.get(i), 1, &mut t);
            t.ids().next() == Some(data.next[i])
        })
        .count();
    hits as f64 / data.len().max(1) as f64
}

/// Mean over experts that kept any class of the share of their classes that belong to their
/// most common super class (classes `s·subs .. (s+1)·subs` form super class `s`).
pub fn purity(kept: &[Vec<u8>], subs: usize) -> f64 {
    let shares: Vec<f64> = kept
        .iter()
        .filter_map(|row| {
            let total: usize = row.iter().map(|&k| k as usize).sum();
            let best = row
                .chunks(subs)
                .map(|s| s.iter().map(|&k| k as usize).sum::<usize>())
                .max()?;
            (total > 0).then(|| best as f64 / total as f64)
        })
        .collect();
    shares.iter().sum::<f64>() / shares.len().max(1) as f64
}

fn gaussian(rng: &mut StdRng) -> f64 {
    let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}
