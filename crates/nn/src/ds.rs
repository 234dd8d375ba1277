//! Training DS-Softmax (Liao et al., 2019): a sparse mixture of sparse experts, retrained on
//! top of a frozen, pre-trained model ("pre-train, replace the softmax layer, retrain it").
//!
//! Input: context vectors `h` (`[n, d]`, the model's last hidden state) and the word that
//! followed each. Output: a gate `U` and `K` experts, each keeping its own rows for the words
//! that survived pruning, served by [`fastsoftmax_infer::DsHead`].
//!
//! Per context (Eq. 1–2): `G = softmax(U·h)`, the top-1 expert `k*` is kept, and
//! `p(c | h) = softmax_c(G_k* · (W_c^(k*)·h + b_c^(k*)))` over the words `c` still in expert `k*`
//! (pruned words are excluded from the normaliser: probability 0, not logit 0). The loss is
//! - task: cross-entropy on the next word, over contexts whose word the chosen expert still has
//!   (the others give no gradient; their share is reported as "uncovered");
//! - group lasso `λ_lasso Σ_k Σ_c ‖W_c^(k)‖` on every (expert, word) row, bias included;
//! - expert lasso `λ_expert Σ_k sqrt(Σ_c ‖W_c^(k)‖²)` (the paper's formula);
//! - load balance `λ_load · CV(Σ_batch G)²` on the kept gate values.
//!
//! Rows whose norm falls below `threshold` are pruned — removed from memory with their optimizer
//! state, so training memory really shrinks. With `keep_every_word` the last copy of a word is
//! never pruned (the paper's default; off is its "*" variant).
//!
//! Mitosis (Algorithm 2): training starts with `start_experts`; after each stage every expert is
//! cloned into two (rows and optimizer state copied, plus noise), pruning inherited, until there
//! are `experts`. Where the paper draws a fresh random gate (`split = "fresh"`), we clone each
//! gate row as `U_k ± ε`, with `ε` chosen so the twins divide their parent's contexts between
//! the two 2-means centres of those contexts (`split = "kmeans"`; `"random"` uses Gaussian
//! `ε`). The first gate is a k-means gate (`gate_init`).
//!
//! burn computes the loss and its gradients; parameters live in plain memory between steps and
//! are updated by Adam with one second moment per row, so the lasso gradient `w/‖w‖` keeps its
//! direction inside a row and a pruned-to-be row settles at norm ≈ lr, under the threshold.

use std::time::Instant;

use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::{Device, Int, Tensor, TensorData};
use fastsoftmax_infer::eval::Contexts;
use fastsoftmax_infer::heads::ds::Expert;
use fastsoftmax_infer::{DsHead, FullHead, SoftmaxHead, TopK};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Hyper-parameters of DS-Softmax training (`--config FILE`, overridden by flags).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DsConfig {
    /// Final number of experts `K`.
    pub experts: usize,
    /// Experts of the first mitosis stage; doubled after every stage until `experts`.
    /// Equal to `experts`: no mitosis.
    pub start_experts: usize,
    /// Passes over the training contexts per stage.
    pub epochs_per_stage: f64,
    /// Passes over the training contexts in the last stage (more pruning at the final size).
    pub final_stage_epochs: f64,
    /// Pruning starts after this fraction of each stage (the paper: 10 of 15 epochs).
    pub prune_from: f64,
    /// Steps between pruning passes.
    pub prune_every: usize,
    /// Weight of the group lasso on every (expert, word) row (the paper's λ_lasso, `L_lasso`);
    /// 0 switches it off, as in Figure A.1(a) (rows are still pruned below `threshold`).
    pub lambda_lasso: f64,
    /// Weight of the expert-level lasso (λ_expert, `L_expert`); 0 switches it off (Figure
    /// A.1(b)).
    pub lambda_expert: f64,
    /// Weight of the squared coefficient of variation of the experts' summed gate values (the
    /// loading balance λ_load, `L_load`); 0 switches it off (Figure A.1(c)).
    pub lambda_load: f64,
    /// A row whose norm falls below this is pruned (the paper: 0.01).
    pub threshold: f64,
    /// Never prune a word's last copy. `false` is the paper's "*" variant: a word may vanish.
    pub keep_every_word: bool,
    /// Std of the noise added to the experts' copies of the pre-trained rows, and to clones.
    pub noise: f64,
    /// How the first stage's gate starts: `"kmeans"` (the gate's argmax is the nearest of `K`
    /// k-means centres of the contexts, so every expert gets traffic from the first step; a
    /// must when the first stage has many experts, as in the synthetic check) or `"random"`
    /// (the paper: Gaussian with std `gate_noise`).
    pub gate_init: String,
    /// How mitosis makes the gate of the doubled experts: twins `U_k ± ε` of each parent row,
    /// with `"kmeans"` (`ε` divides the expert's contexts between their two 2-means centres; on
    /// PTB it beats `"random"` at every stage) or `"random"` (Gaussian `ε`, std `gate_noise`);
    /// or `"fresh"`, the paper's Algorithm 2: a new Gaussian gate (std `gate_noise`, Adam state
    /// reset) that forgets which contexts each parent served.
    pub split: String,
    /// Std of the random gate, and of the antithetic noise that splits a cloned gate row.
    pub gate_noise: f64,
    pub lr: f64,
    pub batch_size: usize,
    /// Use at most this many training contexts (evenly spaced); 0 = all.
    pub max_contexts: usize,
    pub seed: u64,
}

impl Default for DsConfig {
    fn default() -> Self {
        DsConfig {
            experts: 64,
            start_experts: 2,
            epochs_per_stage: 1.0,
            final_stage_epochs: 2.0,
            prune_from: 0.3,
            prune_every: 50,
            lambda_lasso: 1e-4,
            lambda_expert: 1e-4,
            lambda_load: 10.0,
            threshold: 0.01,
            keep_every_word: true,
            noise: 0.01,
            gate_init: "kmeans".into(),
            split: "kmeans".into(),
            gate_noise: 0.5,
            lr: 1e-3,
            batch_size: 1024,
            max_contexts: 0,
            seed: 1,
        }
    }
}

impl DsConfig {
    /// Experts per stage: `start_experts, 2·start_experts, …, experts`.
    pub fn stages(&self) -> Vec<usize> {
        let mut k = vec![self.start_experts];
        while *k.last().unwrap() < self.experts {
            k.push(k.last().unwrap() * 2);
        }
        k
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(format!("ds config: {m}")));
        if self.experts == 0 || self.start_experts == 0 || self.start_experts > self.experts {
            return bad(format!(
                "need 1 ≤ start_experts ({}) ≤ experts ({})",
                self.start_experts, self.experts
            ));
        }
        if *self.stages().last().unwrap() != self.experts {
            return bad(format!(
                "experts ({}) must be start_experts ({}) times a power of two (mitosis doubles)",
                self.experts, self.start_experts
            ));
        }
        let nonneg = [
            self.lambda_lasso,
            self.lambda_expert,
            self.lambda_load,
            self.threshold,
            self.noise,
            self.gate_noise,
        ];
        if nonneg.iter().any(|x| x.is_nan() || *x < 0.0) {
            return bad("lambdas, threshold and noises must be ≥ 0".into());
        }
        if !(self.lr > 0.0 && self.epochs_per_stage > 0.0 && self.final_stage_epochs > 0.0) {
            return bad("lr and the epochs per stage must be > 0".into());
        }
        if !(0.0..=1.0).contains(&self.prune_from) || self.prune_every == 0 {
            return bad("prune_from must be in [0, 1] and prune_every ≥ 1".into());
        }
        if self.batch_size == 0 {
            return bad("batch_size must be ≥ 1".into());
        }
        if !matches!(self.gate_init.as_str(), "kmeans" | "random") {
            return bad(format!(
                "gate_init {:?} is unknown; use \"kmeans\" or \"random\"",
                self.gate_init
            ));
        }
        if !matches!(self.split.as_str(), "kmeans" | "random" | "fresh") {
            return bad(format!(
                "split {:?} is unknown; use \"kmeans\", \"random\" or \"fresh\"",
                self.split
            ));
        }
        Ok(())
    }
}

/// Rows with Adam state: `w` and `m` are `[n, width]`, `v` (one second moment per row) `[n]`.
#[derive(Debug, Clone, Default)]
struct Rows {
    width: usize,
    w: Vec<f32>,
    m: Vec<f32>,
    v: Vec<f32>,
}

impl Rows {
    fn new(w: Vec<f32>, width: usize) -> Self {
        let n = w.len() / width;
        Rows {
            width,
            m: vec![0.0; w.len()],
            v: vec![0.0; n],
            w,
        }
    }
    fn len(&self) -> usize {
        self.v.len()
    }
    fn row(&self, i: usize) -> &[f32] {
        &self.w[i * self.width..(i + 1) * self.width]
    }
    fn norm(&self, i: usize) -> f32 {
        self.row(i).iter().map(|x| x * x).sum::<f32>().sqrt()
    }
    /// Keeps the rows where `keep[i]`.
    fn retain(&mut self, keep: &[bool]) {
        let w = self.width;
        let mut j = 0;
        for (i, &k) in keep.iter().enumerate().take(self.len()) {
            if k {
                self.w.copy_within(i * w..(i + 1) * w, j * w);
                self.m.copy_within(i * w..(i + 1) * w, j * w);
                self.v[j] = self.v[i];
                j += 1;
            }
        }
        self.w.truncate(j * w);
        self.m.truncate(j * w);
        self.v.truncate(j);
    }
    /// One Adam step with gradient `g` (`[n, width]`); the second moment is the row's mean g².
    fn adam(&mut self, g: &[f32], lr: f32, t: i32) {
        const B1: f32 = 0.9;
        const B2: f32 = 0.999;
        const EPS: f32 = 1e-8;
        let w = self.width;
        let c1 = 1.0 - B1.powi(t);
        let c2 = 1.0 - B2.powi(t);
        self.w
            .par_chunks_mut(w)
            .zip(self.m.par_chunks_mut(w))
            .zip(self.v.par_iter_mut())
            .zip(g.par_chunks(w))
            .for_each(|(((w, m), v), g)| {
                let g2 = g.iter().map(|x| x * x).sum::<f32>() / g.len() as f32;
                *v = B2 * *v + (1.0 - B2) * g2;
                let denom = (*v / c2).sqrt() + EPS;
                for (wi, (mi, gi)) in w.iter_mut().zip(m.iter_mut().zip(g)) {
                    *mi = B1 * *mi + (1.0 - B1) * gi;
                    *wi -= lr * (*mi / c1) / denom;
                }
            });
    }
}

/// One expert during training: its surviving word ids and their rows `[n, d + 1]` (bias last).
#[derive(Debug, Clone, Default)]
struct ExpertRows {
    ids: Vec<u32>,
    rows: Rows,
}

/// The trainable DS layer in plain memory. Contexts are read as `[h, 1]` (width `d + 1`) so
/// biases live in the last column of every row, the gate's included.
#[derive(Debug, Clone)]
pub struct DsState {
    d: usize,
    vocab: usize,
    /// `[K, d + 1]`
    gate: Rows,
    experts: Vec<ExpertRows>,
    /// Adam steps taken.
    t: i32,
}

impl DsState {
    /// `k` experts, each a noisy copy of the pre-trained layer `full`, and a random gate.
    pub fn from_full(full: &FullHead, k: usize, noise: f64, gate_noise: f64, seed: u64) -> Self {
        let (d, vocab) = (full.dim(), full.vocab_size());
        let m = full.matrix();
        let mut rng = StdRng::seed_from_u64(seed);
        let base: Vec<f32> = (0..vocab)
            .flat_map(|c| m.row(c).into_iter().chain([m.bias(c)]))
            .collect();
        let experts = (0..k)
            .map(|_| ExpertRows {
                ids: (0..vocab as u32).collect(),
                rows: Rows::new(jitter(&base, noise, &mut rng), d + 1),
            })
            .collect();
        let gate = Rows::new(jitter(&vec![0.0; k * (d + 1)], gate_noise, &mut rng), d + 1);
        DsState {
            d,
            vocab,
            gate,
            experts,
            t: 0,
        }
    }

    /// Starts from a trained head (to continue mitosis from one of its stages).
    pub fn from_head(head: &DsHead) -> Self {
        let d = head.dim();
        let (g, gb) = head.gate_params();
        let gate: Vec<f32> = g
            .chunks(d)
            .zip(&gb)
            .flat_map(|(r, &b)| r.iter().copied().chain([b]))
            .collect();
        let experts = (0..head.n_experts())
            .map(|e| {
                let x = head.expert(e);
                let w: Vec<f32> = x
                    .weights
                    .chunks(d)
                    .zip(&x.bias)
                    .flat_map(|(r, &b)| r.iter().copied().chain([b]))
                    .collect();
                ExpertRows {
                    ids: x.ids,
                    rows: Rows::new(w, d + 1),
                }
            })
            .collect();
        DsState {
            d,
            vocab: head.vocab_size(),
            gate: Rows::new(gate, d + 1),
            experts,
            t: 0,
        }
    }

    pub fn n_experts(&self) -> usize {
        self.experts.len()
    }

    /// Rows held over all experts (each with its weights, gradient and Adam state).
    pub fn total_rows(&self) -> usize {
        self.experts.iter().map(|e| e.ids.len()).sum()
    }

    pub fn expert_sizes(&self) -> Vec<usize> {
        self.experts.iter().map(|e| e.ids.len()).collect()
    }

    /// Words that survive in no expert.
    pub fn lost_words(&self) -> usize {
        let mut seen = vec![false; self.vocab];
        for e in &self.experts {
            for &c in &e.ids {
                seen[c as usize] = true;
            }
        }
        seen.iter().filter(|s| !**s).count()
    }

    /// The serving head for this state.
    pub fn to_head(&self, name: &str, full: &FullHead) -> Result<DsHead> {
        let d = self.d;
        let split = |r: &Rows| -> (Vec<f32>, Vec<f32>) {
            let mut w = Vec::with_capacity(r.len() * d);
            let mut b = Vec::with_capacity(r.len());
            for i in 0..r.len() {
                w.extend_from_slice(&r.row(i)[..d]);
                b.push(r.row(i)[d]);
            }
            (w, b)
        };
        let (gate, gate_bias) = split(&self.gate);
        let experts: Vec<Expert> = self
            .experts
            .iter()
            .map(|e| {
                let (weights, bias) = split(&e.rows);
                Expert {
                    ids: e.ids.clone(),
                    weights,
                    bias,
                }
            })
            .collect();
        Ok(DsHead::new(name, full, &gate, &gate_bias, &experts)?)
    }

    /// The expert of each context `[n, d]` (top-1 gate), in parallel.
    fn route(&self, hs: &[f32]) -> Vec<u32> {
        let d = self.d;
        hs.par_chunks(d)
            .map(|h| {
                let mut best = (0u32, f32::NEG_INFINITY);
                for k in 0..self.gate.len() {
                    let u = self.gate.row(k);
                    let s = u[..d].iter().zip(h).map(|(a, b)| a * b).sum::<f32>() + u[d];
                    if s > best.1 {
                        best = (k as u32, s);
                    }
                }
                best.0
            })
            .collect()
    }

    /// Prunes rows with norm below `threshold` (keeping each word's strongest copy when
    /// `keep_every_word`). Returns the number of rows removed.
    pub fn prune(&mut self, threshold: f32, keep_every_word: bool) -> usize {
        let norms: Vec<Vec<f32>> = self
            .experts
            .par_iter()
            .map(|e| (0..e.ids.len()).map(|i| e.rows.norm(i)).collect())
            .collect();
        let mut keep: Vec<Vec<bool>> = norms
            .iter()
            .map(|n| n.iter().map(|&x| x >= threshold).collect())
            .collect();
        if keep_every_word {
            // The strongest pruned copy of each word that would otherwise vanish.
            let mut kept = vec![false; self.vocab];
            let mut strongest: Vec<Option<(f32, usize, usize)>> = vec![None; self.vocab];
            for (e, x) in self.experts.iter().enumerate() {
                for (i, &c) in x.ids.iter().enumerate() {
                    let c = c as usize;
                    if keep[e][i] {
                        kept[c] = true;
                    } else if strongest[c].is_none_or(|(n, _, _)| norms[e][i] > n) {
                        strongest[c] = Some((norms[e][i], e, i));
                    }
                }
            }
            for c in 0..self.vocab {
                if let (false, Some((_, e, i))) = (kept[c], strongest[c]) {
                    keep[e][i] = true;
                }
            }
        }
        let before = self.total_rows();
        for (x, keep) in self.experts.iter_mut().zip(&keep) {
            let mut j = 0;
            for (i, &k) in keep.iter().enumerate() {
                if k {
                    x.ids[j] = x.ids[i];
                    j += 1;
                }
            }
            x.ids.truncate(j);
            x.rows.retain(keep);
        }
        before - self.total_rows()
    }

    /// Mitosis: every expert becomes two (children of `k` are `2k`, `2k + 1`), rows and Adam
    /// state copied, each copy with fresh noise; gate rows split as `U_k ± ε`. With `data`,
    /// `ε` makes the twins divide their parent's contexts between the two 2-means centres of
    /// those contexts; without it (or for an expert with fewer than 2 contexts) `ε` is Gaussian
    /// noise of std `gate_noise`.
    pub fn split(
        &mut self,
        noise: f64,
        gate_noise: f64,
        data: Option<&Contexts>,
        rng: &mut StdRng,
    ) {
        let width = self.gate.width;
        let mut eps: Vec<Vec<f32>> = (0..self.gate.len())
            .map(|_| jitter(&vec![0.0; width], gate_noise, rng))
            .collect();
        if let Some(data) = data {
            for (k, e) in self.two_means_splits(data, rng).into_iter().enumerate() {
                if let Some(e) = e {
                    eps[k] = e;
                }
            }
        }
        let mut experts = Vec::with_capacity(2 * self.experts.len());
        for x in self.experts.drain(..) {
            for _ in 0..2 {
                let mut c = x.clone();
                c.rows.w = jitter(&c.rows.w, noise, rng);
                experts.push(c);
            }
        }
        self.experts = experts;
        let mut gate = Rows {
            width,
            ..Rows::default()
        };
        for (k, eps) in eps.iter().enumerate() {
            for sign in [1.0f32, -1.0] {
                gate.w
                    .extend(self.gate.row(k).iter().zip(eps).map(|(u, e)| u + sign * e));
                gate.m
                    .extend_from_slice(&self.gate.m[k * width..(k + 1) * width]);
                gate.v.push(self.gate.v[k]);
            }
        }
        self.gate = gate;
    }

    /// A new Gaussian gate (std `gate_noise`) for the current experts, with fresh Adam state.
    pub fn redraw_gate(&mut self, gate_noise: f64, rng: &mut StdRng) {
        let width = self.gate.width;
        let zeros = vec![0.0; self.n_experts() * width];
        self.gate = Rows::new(jitter(&zeros, gate_noise, rng), width);
    }

    /// For each expert, `ε = [c1 − c2, −(‖c1‖² − ‖c2‖²)/2]` from the 2-means centres of (up to
    /// 2,000 of) its contexts, so that `(U + ε)·[h, 1] > (U − ε)·[h, 1]` exactly when `h` is
    /// nearer `c1`. `None` for an expert with fewer than 2 contexts.
    fn two_means_splits(&self, data: &Contexts, rng: &mut StdRng) -> Vec<Option<Vec<f32>>> {
        let (d, k) = (self.d, self.n_experts());
        let step = data.len().div_ceil(2_000 * k).max(1);
        let sample: Vec<usize> = (0..data.len()).step_by(step).collect();
        let mut hs = Vec::with_capacity(sample.len() * d);
        for &i in &sample {
            hs.extend_from_slice(data.get(i));
        }
        let routes = self.route(&hs);
        let mut groups: Vec<Vec<&[f32]>> = vec![Vec::new(); k];
        for (h, &r) in hs.chunks(d).zip(&routes) {
            groups[r as usize].push(h);
        }
        groups
            .iter()
            .map(|g| {
                if g.len() < 2 {
                    return None;
                }
                let c = kmeans(g, 2, 10, rng.random());
                let sq = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>();
                let mut e: Vec<f32> = c[0].iter().zip(&c[1]).map(|(a, b)| a - b).collect();
                e.push(-(sq(&c[0]) - sq(&c[1])) / 2.0);
                Some(e)
            })
            .collect()
    }
}

/// One mitosis step as `cfg.split` says: every expert cloned into twins, and the gate split
/// around its parent rows, or drawn afresh (`"fresh"`, the paper's Algorithm 2).
fn mitosis(state: &mut DsState, cfg: &DsConfig, train: &Contexts, rng: &mut StdRng) {
    let data = (cfg.split == "kmeans").then_some(train);
    state.split(cfg.noise, cfg.gate_noise, data, rng);
    if cfg.split == "fresh" {
        state.redraw_gate(cfg.gate_noise, rng);
    }
}

/// Lloyd's k-means on `points` (each `[d]`), seeded by k-means++ (each new centre drawn with
/// probability ∝ squared distance to the nearest chosen one, so well-separated groups each get
/// a centre); an empty cluster restarts at a random point. Returns the centres.
fn kmeans(points: &[&[f32]], k: usize, iters: usize, seed: u64) -> Vec<Vec<f32>> {
    let d = points[0].len();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut centres: Vec<Vec<f32>> = vec![points[rng.random_range(0..points.len())].to_vec()];
    let mut nearest: Vec<f64> = points
        .iter()
        .map(|p| sq_dist(p, &centres[0]) as f64)
        .collect();
    while centres.len() < k {
        let total: f64 = nearest.iter().sum();
        let next = if total > 0.0 {
            let mut r = rng.random_range(0.0..total);
            nearest
                .iter()
                .position(|&w| {
                    r -= w;
                    r < 0.0
                })
                .unwrap_or(points.len() - 1)
        } else {
            rng.random_range(0..points.len())
        };
        centres.push(points[next].to_vec());
        let c = centres.last().expect("just pushed");
        for (n, p) in nearest.iter_mut().zip(points) {
            *n = n.min(sq_dist(p, c) as f64);
        }
    }
    for _ in 0..iters {
        let assign: Vec<usize> = points
            .par_iter()
            .map(|h| {
                (0..k)
                    .min_by(|&a, &b| sq_dist(h, &centres[a]).total_cmp(&sq_dist(h, &centres[b])))
                    .unwrap_or(0)
            })
            .collect();
        let mut sums = vec![vec![0.0f64; d]; k];
        let mut counts = vec![0usize; k];
        for (h, &a) in points.iter().zip(&assign) {
            counts[a] += 1;
            for (s, &x) in sums[a].iter_mut().zip(h.iter()) {
                *s += x as f64;
            }
        }
        for j in 0..k {
            centres[j] = if counts[j] == 0 {
                points[rng.random_range(0..points.len())].to_vec()
            } else {
                sums[j]
                    .iter()
                    .map(|s| (s / counts[j] as f64) as f32)
                    .collect()
            };
        }
    }
    centres
}

/// A gate `[k, d + 1]` whose argmax is the nearest of `k` k-means centres `c` (best of 8 runs)
/// of (up to 20,000 of) the contexts: `U_j = 2c_j`, `b_j = −‖c_j‖²`, since `‖h − c‖² = ‖h‖² − (2c·h − ‖c‖²)`.
fn kmeans_gate(data: &Contexts, k: usize, seed: u64) -> Vec<f32> {
    let step = data.len().div_ceil(20_000).max(1);
    let sample: Vec<&[f32]> = (0..data.len()).step_by(step).map(|i| data.get(i)).collect();
    // The best of several k-means++ runs: one run can still seed two centres in one group.
    let inertia = |c: &[Vec<f32>]| -> f64 {
        sample
            .par_iter()
            .map(|h| {
                c.iter()
                    .map(|c| sq_dist(h, c))
                    .fold(f32::INFINITY, f32::min) as f64
            })
            .sum()
    };
    (0..8u64)
        .map(|r| kmeans(&sample, k, 15, seed ^ 0x6a7e ^ (r << 32)))
        .map(|c| (inertia(&c), c))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .expect("eight runs")
        .1
        .iter()
        .flat_map(|c| {
            let sq: f32 = c.iter().map(|x| x * x).sum();
            c.iter().map(|x| 2.0 * x).chain([-sq])
        })
        .collect()
}

fn sq_dist(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

fn jitter(x: &[f32], std: f64, rng: &mut StdRng) -> Vec<f32> {
    if std == 0.0 {
        return x.to_vec();
    }
    x.iter()
        .map(|&v| v + (std * gaussian(rng)) as f32)
        .collect()
}

/// One mini-batch, sorted by expert, as burn tensors.
struct StepBatch {
    /// [b, d + 1] contexts with a trailing 1
    h: Tensor<2>,
    /// [b, 1] chosen expert of each context
    choice: Tensor<2, Int>,
    /// [b, K] one-hot of the chosen expert
    chosen: Tensor<2>,
    /// (expert, first, end) runs of the sorted batch
    runs: Vec<(usize, usize, usize)>,
    /// per run: [m, 1] target position inside the expert (0 when absent) and [m, 1] 1/0 present
    targets: Vec<(Tensor<2, Int>, Tensor<2>)>,
    /// contexts whose word the chosen expert has
    covered: usize,
}

/// The losses of one step (tracked tensors).
struct StepLoss {
    total: Tensor<1>,
    task: Tensor<1>,
}

/// Eq. 1–2 and the regularisers on one batch. `gate` is `[K, d + 1]`, `experts[k]` is
/// `[|v_k|, d + 1]` (None for an empty expert); all tracked.
fn step_loss(
    gate: &Tensor<2>,
    experts: &[Option<Tensor<2>>],
    b: &StepBatch,
    cfg: &DsConfig,
) -> StepLoss {
    let g = softmax(b.h.clone().matmul(gate.clone().transpose()), 1); // [b, K]
    let g_kept = g.clone().gather(1, b.choice.clone()); // [b, 1]
    let mut nll = Vec::with_capacity(b.runs.len());
    for (&(e, first, end), (target, present)) in b.runs.iter().zip(&b.targets) {
        let Some(w) = &experts[e] else { continue };
        let width = b.h.dims()[1];
        let h = b.h.clone().slice([first..end, 0..width]); // [m, d+1]
        let scale = g_kept.clone().slice([first..end, 0..1]); // [m, 1]
        let logits = h.matmul(w.clone().transpose()) * scale; // [m, |v_e|]
        let picked = log_softmax(logits, 1).gather(1, target.clone()); // [m, 1]
        nll.push((picked * present.clone()).sum());
    }
    let task = if nll.is_empty() {
        Tensor::<1>::zeros([1], &b.h.device())
    } else {
        Tensor::cat(nll, 0)
            .sum()
            .neg()
            .div_scalar(b.covered.max(1) as f64)
    };
    let mut total = task.clone();
    if cfg.lambda_load > 0.0 && g.dims()[1] > 1 {
        let importance = (g * b.chosen.clone()).sum_dim(0); // [1, K]
        let mean = importance.clone().mean();
        let var = (importance - mean.clone().unsqueeze())
            .powi_scalar(2)
            .mean();
        let cv2 = var / (mean.powi_scalar(2) + 1e-12);
        total = total + cv2.mul_scalar(cfg.lambda_load);
    }
    for w in experts.iter().flatten() {
        let sq = w.clone().powi_scalar(2).sum_dim(1); // [n, 1]
        if cfg.lambda_lasso > 0.0 {
            let lasso = sq.clone().add_scalar(1e-12).sqrt().sum();
            total = total + lasso.mul_scalar(cfg.lambda_lasso);
        }
        if cfg.lambda_expert > 0.0 {
            let expert = sq.sum().add_scalar(1e-12).sqrt();
            total = total + expert.mul_scalar(cfg.lambda_expert);
        }
    }
    StepLoss { total, task }
}

/// Validation numbers of one state.
#[derive(Debug, Clone, Serialize)]
pub struct DsEval {
    pub experts: usize,
    /// Top-1/5/10 accuracy against the word that followed.
    pub acc_at_1: f64,
    pub acc_at_5: f64,
    pub acc_at_10: f64,
    /// Agreement of the top-1 with the full softmax's top-1.
    pub p_at_1: f64,
    /// Fraction of contexts whose next word the chosen expert holds.
    pub coverage: f64,
    /// `Σ_k u_k |v_k|`: words scored per query, the gate not counted.
    pub mean_expert_size: f64,
    /// `|V| / (Σ_k u_k |v_k| + K)`.
    pub flop_speedup: f64,
}

/// Scores `head` on `data` (`full_top1[i]` = the full softmax's best word for context i).
pub fn evaluate(head: &DsHead, data: &Contexts, full_top1: &[u32]) -> DsEval {
    let n = data.len();
    let sums = (0..n)
        .into_par_iter()
        .fold(
            || ([0usize; 5], 0usize, TopK::new(10)),
            |(mut s, mut size, mut top), i| {
                let h = data.get(i);
                let e = head.expert_of(h);
                head.top_k_into(h, 10, &mut top);
                let rank = top.ids().position(|c| c == data.next[i]);
                s[0] += matches!(rank, Some(0)) as usize;
                s[1] += matches!(rank, Some(r) if r < 5) as usize;
                s[2] += rank.is_some() as usize;
                s[3] += (top.ids().next() == Some(full_top1[i])) as usize;
                s[4] += head.expert_covers(e, data.next[i]) as usize;
                size += head.expert_size(e);
                (s, size, top)
            },
        )
        .map(|(s, size, _)| (s, size))
        .reduce(
            || ([0; 5], 0),
            |(a, x), (b, y)| {
                let mut s = [0; 5];
                for j in 0..5 {
                    s[j] = a[j] + b[j];
                }
                (s, x + y)
            },
        );
    let nf = n.max(1) as f64;
    let (s, size) = sums;
    let mean = size as f64 / nf;
    DsEval {
        experts: head.n_experts(),
        acc_at_1: s[0] as f64 / nf,
        acc_at_5: s[1] as f64 / nf,
        acc_at_10: s[2] as f64 / nf,
        p_at_1: s[3] as f64 / nf,
        coverage: s[4] as f64 / nf,
        mean_expert_size: mean,
        flop_speedup: head.vocab_size() as f64 / (mean + head.n_experts() as f64),
    }
}

/// The full softmax's best word for every context of `data`.
pub fn full_top1(full: &FullHead, data: &Contexts) -> Vec<u32> {
    (0..data.len())
        .into_par_iter()
        .map_init(
            || TopK::new(1),
            |t, i| {
                full.top_k_into(data.get(i), 1, t);
                t.ids().next().unwrap_or(0)
            },
        )
        .collect()
}

/// A point of the training-memory curve (Figure D.1).
#[derive(Debug, Clone, Serialize)]
pub struct MemoryPoint {
    pub step: usize,
    pub experts: usize,
    /// Rows held over all experts / vocabulary: the head's weights, gradients and optimizer
    /// state relative to one full softmax trained the same way.
    pub relative: f64,
}

/// The record of one mitosis stage (Table D.1).
#[derive(Debug, Clone, Serialize)]
pub struct StageRecord {
    pub experts: usize,
    pub steps: usize,
    pub mean_task_loss: f64,
    /// Training contexts whose word the chosen expert lacked (no gradient), over the stage.
    pub uncovered: f64,
    pub rows: usize,
    pub lost_words: usize,
    pub valid: DsEval,
    pub seconds: f64,
}

/// What training produced besides the head.
#[derive(Debug, Clone, Serialize)]
pub struct DsReport {
    pub config: DsConfig,
    pub train_contexts: usize,
    pub valid_contexts: usize,
    pub stages: Vec<StageRecord>,
    pub memory: Vec<MemoryPoint>,
    /// Peak of `memory`.
    pub peak_memory: f64,
}

/// Trains DS-Softmax from the pre-trained layer `full` (or continues from `start`, a trained
/// head whose expert count is one of the stages). `log` receives progress lines; `on_stage`
/// gets the head after every stage (for snapshots and checkpoints).
#[allow(clippy::too_many_arguments)]
pub fn train_ds(
    name: &str,
    full: &FullHead,
    train: &Contexts,
    valid: &Contexts,
    cfg: &DsConfig,
    start: Option<&DsHead>,
    device: &Device,
    log: &mut dyn FnMut(&str),
    on_stage: &mut dyn FnMut(&DsHead, &StageRecord) -> Result<()>,
) -> Result<(DsHead, DsReport)> {
    cfg.validate()?;
    let (d, vocab) = (full.dim(), full.vocab_size());
    if train.d != d || valid.d != d {
        return Err(Error::Invalid(format!(
            "contexts have width {}/{}, the output layer {d}",
            train.d, valid.d
        )));
    }
    if train.is_empty() || valid.is_empty() {
        return Err(Error::Invalid(
            "no training or validation contexts; give texts with at least two tokens".into(),
        ));
    }
    if let Some(&c) = train
        .next
        .iter()
        .chain(&valid.next)
        .find(|&&c| c as usize >= vocab)
    {
        return Err(Error::Invalid(format!(
            "word id {c} is outside the {vocab}-word vocabulary"
        )));
    }
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let mut stages = cfg.stages();
    let mut state = match start {
        Some(head) => {
            let k = head.n_experts();
            let Some(pos) = stages.iter().position(|&s| s == k) else {
                return Err(Error::Invalid(format!(
                    "the starting head has {k} experts, not one of the stages {stages:?}"
                )));
            };
            stages.drain(..=pos);
            let mut s = DsState::from_head(head);
            if !stages.is_empty() {
                mitosis(&mut s, cfg, train, &mut rng);
            }
            s
        }
        None => {
            let mut s = DsState::from_full(full, stages[0], cfg.noise, cfg.gate_noise, cfg.seed);
            if cfg.gate_init == "kmeans" {
                s.gate = Rows::new(kmeans_gate(train, stages[0], cfg.seed), d + 1);
            }
            s
        }
    };
    if stages.is_empty() {
        return Err(Error::Invalid(format!(
            "the starting head already has {} experts; nothing to train",
            cfg.experts
        )));
    }
    let valid_top1 = full_top1(full, valid);
    let started = Instant::now();
    let n = train.len();
    let mut memory = vec![MemoryPoint {
        step: 0,
        experts: state.n_experts(),
        relative: state.total_rows() as f64 / vocab as f64,
    }];
    let mut records = Vec::new();
    let mut order: Vec<usize> = (0..n).collect();
    let mut cursor = n; // reshuffle on first use
    let mut step = 0usize;
    let last_stage = stages.len() - 1;
    for (si, &k) in stages.iter().enumerate() {
        let t0 = Instant::now();
        debug_assert_eq!(state.n_experts(), k);
        let epochs = if si == last_stage {
            cfg.final_stage_epochs
        } else {
            cfg.epochs_per_stage
        };
        let steps = ((epochs * n as f64) / cfg.batch_size as f64)
            .ceil()
            .max(1.0) as usize;
        let prune_start = (cfg.prune_from * steps as f64) as usize;
        let (mut loss_sum, mut uncovered, mut seen) = (0.0f64, 0usize, 0usize);
        for s in 0..steps {
            if cursor + cfg.batch_size > n {
                shuffle(&mut order, &mut rng);
                cursor = 0;
            }
            let idx = &order[cursor..(cursor + cfg.batch_size).min(n)];
            cursor += idx.len();
            let (task, covered) = train_step(&mut state, train, idx, cfg, device)?;
            loss_sum += task;
            uncovered += idx.len() - covered;
            seen += idx.len();
            step += 1;
            let prune_now =
                s >= prune_start && (s - prune_start) % cfg.prune_every == cfg.prune_every - 1;
            if prune_now && state.prune(cfg.threshold as f32, cfg.keep_every_word) > 0 {
                memory.push(MemoryPoint {
                    step,
                    experts: k,
                    relative: state.total_rows() as f64 / vocab as f64,
                });
            }
            if (s + 1) % (steps / 10).max(1) == 0 {
                log(&format!(
                    "  K={k} step {}/{steps}: task loss {:.3}, rows {:.2}×|V|, uncovered {:.3}, {:.0} s",
                    s + 1,
                    loss_sum / (s + 1) as f64,
                    state.total_rows() as f64 / vocab as f64,
                    uncovered as f64 / seen as f64,
                    started.elapsed().as_secs_f64()
                ));
            }
        }
        state.prune(cfg.threshold as f32, cfg.keep_every_word);
        memory.push(MemoryPoint {
            step,
            experts: k,
            relative: state.total_rows() as f64 / vocab as f64,
        });
        let head = state.to_head(&format!("{name}-{k}"), full)?;
        let eval = evaluate(&head, valid, &valid_top1);
        let rec = StageRecord {
            experts: k,
            steps,
            mean_task_loss: loss_sum / steps as f64,
            uncovered: uncovered as f64 / seen.max(1) as f64,
            rows: state.total_rows(),
            lost_words: state.lost_words(),
            valid: eval,
            seconds: t0.elapsed().as_secs_f64(),
        };
        log(&stage_line(&rec));
        on_stage(&head, &rec)?;
        records.push(rec);
        if si < last_stage {
            mitosis(&mut state, cfg, train, &mut rng);
            memory.push(MemoryPoint {
                step,
                experts: state.n_experts(),
                relative: state.total_rows() as f64 / vocab as f64,
            });
        }
    }
    let head = state.to_head(name, full)?;
    let peak_memory = memory.iter().map(|p| p.relative).fold(0.0, f64::max);
    log(&format!(
        "done: {} experts, {} rows ({:.2}×|V|), peak training memory {:.2}× one full softmax, {:.0} s",
        state.n_experts(),
        state.total_rows(),
        state.total_rows() as f64 / vocab as f64,
        peak_memory,
        started.elapsed().as_secs_f64()
    ));
    Ok((
        head,
        DsReport {
            config: cfg.clone(),
            train_contexts: n,
            valid_contexts: valid.len(),
            stages: records,
            memory,
            peak_memory,
        },
    ))
}

fn stage_line(r: &StageRecord) -> String {
    let v = &r.valid;
    format!(
        "DS-{}: valid top-1/5/10 {:.4}/{:.4}/{:.4}, P@1 {:.4}, coverage {:.4}, {:.0} words per query → {:.2}× fewer FLOPs; rows {} ({} words lost), {:.0} s",
        r.experts,
        v.acc_at_1,
        v.acc_at_5,
        v.acc_at_10,
        v.p_at_1,
        v.coverage,
        v.mean_expert_size,
        v.flop_speedup,
        r.rows,
        r.lost_words,
        r.seconds
    )
}

/// The contexts `idx` routed by `state`'s gate and sorted by expert, as a [`StepBatch`].
fn step_batch(state: &DsState, data: &Contexts, idx: &[usize], device: &Device) -> StepBatch {
    let (d, k) = (state.d, state.n_experts());
    let width = d + 1;
    let mut hs = Vec::with_capacity(idx.len() * d);
    for &i in idx {
        hs.extend_from_slice(data.get(i));
    }
    let routes = state.route(&hs);
    let mut order: Vec<usize> = (0..idx.len()).collect();
    order.sort_by_key(|&j| routes[j]);
    let b = idx.len();
    let mut h = Vec::with_capacity(b * width);
    let mut choice = Vec::with_capacity(b);
    let mut chosen = vec![0.0f32; b * k];
    for (row, &j) in order.iter().enumerate() {
        h.extend_from_slice(&hs[j * d..(j + 1) * d]);
        h.push(1.0);
        choice.push(routes[j] as i64);
        chosen[row * k + routes[j] as usize] = 1.0;
    }
    let mut runs = Vec::new();
    let mut targets = Vec::new();
    let mut covered = 0usize;
    let mut first = 0;
    while first < b {
        let e = routes[order[first]] as usize;
        let mut end = first;
        while end < b && routes[order[end]] as usize == e {
            end += 1;
        }
        let ids = &state.experts[e].ids;
        let (mut t, mut p) = (Vec::with_capacity(end - first), Vec::new());
        for &j in &order[first..end] {
            match ids.binary_search(&data.next[idx[j]]) {
                Ok(pos) => {
                    t.push(pos as i64);
                    p.push(1.0f32);
                    covered += 1;
                }
                Err(_) => {
                    t.push(0);
                    p.push(0.0);
                }
            }
        }
        let m = end - first;
        targets.push((
            Tensor::<2, Int>::from_data(TensorData::new(t, [m, 1]), device),
            Tensor::<2>::from_data(TensorData::new(p, [m, 1]), device),
        ));
        runs.push((e, first, end));
        first = end;
    }
    StepBatch {
        h: Tensor::from_data(TensorData::new(h, [b, width]), device),
        choice: Tensor::from_data(TensorData::new(choice, [b, 1]), device),
        chosen: Tensor::from_data(TensorData::new(chosen, [b, k]), device),
        runs,
        targets,
        covered,
    }
}

/// `state`'s gate `[K, d + 1]` and experts `[|v_k|, d + 1]` (None when empty) as tensors that
/// collect gradients.
fn tracked(state: &DsState, device: &Device) -> (Tensor<2>, Vec<Option<Tensor<2>>>) {
    let tensor = |r: &Rows| {
        Tensor::<2>::from_data(TensorData::new(r.w.clone(), [r.len(), r.width]), device)
            .require_grad()
    };
    let experts = state
        .experts
        .iter()
        .map(|e| (!e.ids.is_empty()).then(|| tensor(&e.rows)))
        .collect();
    (tensor(&state.gate), experts)
}

/// One optimisation step on the contexts `idx`. Returns (task loss, covered contexts).
fn train_step(
    state: &mut DsState,
    data: &Contexts,
    idx: &[usize],
    cfg: &DsConfig,
    device: &Device,
) -> Result<(f64, usize)> {
    let batch = step_batch(state, data, idx, device);
    let covered = batch.covered;
    let (gate, experts) = tracked(state, device);
    let loss = step_loss(&gate, &experts, &batch, cfg);
    let task = loss.task.clone().into_scalar::<f32>() as f64;
    let total = loss.total.clone().into_scalar::<f32>();
    if !total.is_finite() {
        return Err(Error::Invalid(format!(
            "the DS loss became {total} at step {}; lower lr in the ds config",
            state.t + 1
        )));
    }
    let grads = loss.total.backward();
    state.t += 1;
    let (lr, t) = (cfg.lr as f32, state.t);
    let grad_of = |x: &Tensor<2>, r: &Rows| -> Vec<f32> {
        x.grad(&grads)
            .map(|g| g.into_data().try_to_vec::<f32>().expect("f32 gradient"))
            .unwrap_or_else(|| vec![0.0; r.w.len()])
    };
    let g = grad_of(&gate, &state.gate);
    state.gate.adam(&g, lr, t);
    for (e, x) in state.experts.iter_mut().zip(&experts) {
        if let Some(x) = x {
            let g = grad_of(x, &e.rows);
            e.rows.adam(&g, lr, t);
        }
    }
    Ok((task, covered))
}

/// A standard normal sample (Box–Muller).
fn gaussian(rng: &mut StdRng) -> f64 {
    let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

fn shuffle(v: &mut [usize], rng: &mut StdRng) {
    for i in (1..v.len()).rev() {
        let j = rng.random_range(0..=i);
        v.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastsoftmax_infer::kernels::seeded_values as values;

    fn fixture(vocab: usize, d: usize) -> FullHead {
        FullHead::new(&values(vocab * d, 1), &values(vocab, 2), d).unwrap()
    }

    /// Contexts whose next word is the full layer's own top-1 (a learnable task).
    fn contexts(full: &FullHead, n: usize, seed: u64) -> Contexts {
        let d = full.dim();
        let hs: Vec<f32> = values(n * d, seed).iter().map(|x| 3.0 * x).collect();
        let mut c = Contexts {
            d,
            hs,
            next: vec![0; n],
            history: Vec::new(),
        };
        c.next = full_top1(full, &c);
        c
    }

    #[test]
    fn pruning_keeps_a_words_last_copy_unless_told_otherwise() {
        let full = fixture(6, 3);
        let mut s = DsState::from_full(&full, 2, 0.0, 0.1, 1);
        // Word 0 fades in both experts (expert 1's copy less so), word 1 only in expert 0.
        for (e, scale) in [(0, 0.001f32), (1, 0.002)] {
            for x in &mut s.experts[e].rows.w[0..4] {
                *x *= scale;
            }
        }
        for x in &mut s.experts[0].rows.w[4..8] {
            *x = 0.0;
        }
        let mut star = s.clone();
        assert_eq!(s.prune(0.01, true), 2);
        assert_eq!(s.experts[0].ids, vec![2, 3, 4, 5]);
        assert_eq!(
            s.experts[1].ids,
            vec![0, 1, 2, 3, 4, 5],
            "the stronger copy of word 0 stays"
        );
        assert_eq!(s.lost_words(), 0);
        assert_eq!(star.prune(0.01, false), 3);
        assert_eq!(star.lost_words(), 1);
        // Rows and optimizer state move together.
        assert_eq!(s.experts[0].rows.row(0), star.experts[0].rows.row(0));
        assert_eq!(s.experts[0].rows.m.len(), 4 * 4);
        assert_eq!(s.total_rows(), 10);
    }

    #[test]
    fn mitosis_doubles_experts_and_splits_the_gate_around_its_parent() {
        let full = fixture(5, 4);
        let mut s = DsState::from_full(&full, 2, 0.0, 0.3, 1);
        s.experts[1].ids.truncate(3);
        s.experts[1].rows.retain(&[true, true, true, false, false]);
        let parents = s.gate.clone();
        let mut rng = StdRng::seed_from_u64(3);
        s.split(0.0, 0.2, None, &mut rng);
        assert_eq!(s.n_experts(), 4);
        assert_eq!(s.expert_sizes(), vec![5, 5, 3, 3], "pruning is inherited");
        assert_eq!(s.total_rows(), 16);
        let g = &s.gate;
        for k in 0..2 {
            for j in 0..5 {
                // Antithetic: the twins differ and average to their parent.
                let (a, b) = (g.row(2 * k)[j], g.row(2 * k + 1)[j]);
                assert!(((a + b) / 2.0 - parents.row(k)[j]).abs() < 1e-6);
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn the_papers_mitosis_draws_a_fresh_gate() {
        let full = fixture(5, 4);
        let train = contexts(&full, 64, 3);
        let cfg = DsConfig {
            split: "fresh".into(),
            gate_noise: 0.3,
            ..DsConfig::default()
        };
        cfg.validate().unwrap();
        let mut s = DsState::from_full(&full, 2, 0.0, 0.3, 1);
        s.gate.m.fill(1.0);
        s.gate.v.fill(1.0);
        let parents = s.gate.clone();
        mitosis(&mut s, &cfg, &train, &mut StdRng::seed_from_u64(3));
        assert_eq!((s.n_experts(), s.gate.len()), (4, 4));
        let g = &s.gate;
        let twin_mean_gap: f32 = (0..5)
            .map(|j| ((g.row(0)[j] + g.row(1)[j]) / 2.0 - parents.row(0)[j]).abs())
            .sum();
        assert!(
            twin_mean_gap > 1e-3,
            "a fresh gate is not split around its parent"
        );
        assert!(
            g.m.iter().chain(&g.v).all(|&x| x == 0.0),
            "Adam state reset"
        );
        let bad = DsConfig {
            split: "clone".into(),
            ..DsConfig::default()
        };
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains("\"fresh\""), "{err}");
    }

    #[test]
    fn training_lowers_the_loss_and_the_head_matches_the_state() {
        let full = fixture(40, 8);
        let (train, valid) = (contexts(&full, 512, 3), contexts(&full, 128, 4));
        let cfg = DsConfig {
            experts: 4,
            epochs_per_stage: 4.0,
            final_stage_epochs: 4.0,
            batch_size: 64,
            prune_every: 4,
            lambda_lasso: 1e-3,
            lr: 1e-2,
            ..DsConfig::default()
        };
        let device = Device::flex().autodiff();
        let mut s = DsState::from_full(&full, 2, 0.01, 0.5, 1);
        let idx: Vec<usize> = (0..64).collect();
        let (first, _) = train_step(&mut s, &train, &idx, &cfg, &device).unwrap();
        for _ in 0..40 {
            train_step(&mut s, &train, &idx, &cfg, &device).unwrap();
        }
        let (last, covered) = train_step(&mut s, &train, &idx, &cfg, &device).unwrap();
        assert!(last < 0.8 * first, "task loss {first} → {last}");
        assert_eq!(covered, 64);

        let mut lines = Vec::new();
        let mut stages = Vec::new();
        let (head, report) = train_ds(
            "ds",
            &full,
            &train,
            &valid,
            &cfg,
            None,
            &device,
            &mut |l| lines.push(l.to_string()),
            &mut |h, r| {
                stages.push((h.n_experts(), r.experts));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(stages, vec![(2, 2), (4, 4)]);
        assert_eq!(head.n_experts(), 4);
        assert_eq!(report.stages.len(), 2);
        assert!(report.peak_memory >= 2.0 && report.peak_memory <= 4.0);
        let last = &report.stages[1].valid;
        assert_eq!(
            last.mean_expert_size,
            evaluate(&head, &valid, &full_top1(&full, &valid)).mean_expert_size
        );
        assert!(last.acc_at_10 > 0.5, "{last:?}");
        // A head saved from a state reloads into the same state.
        let again = DsState::from_head(&head).to_head("ds", &full).unwrap();
        for e in 0..4 {
            assert_eq!(again.expert(e), head.expert(e));
        }
    }

    #[test]
    fn a_zero_lambda_switches_its_regulariser_off() {
        // Figure A.1's ablations set one λ to 0: that term must leave the loss and the
        // gradient, and each term alone must be the paper's formula.
        let full = fixture(12, 4);
        let data = contexts(&full, 64, 3);
        let s = DsState::from_full(&full, 3, 0.05, 1.0, 1);
        let device = Device::flex().autodiff();
        let idx: Vec<usize> = (0..64).collect();
        let b = step_batch(&s, &data, &idx, &device);
        assert!(
            b.runs.len() >= 2,
            "the load term needs traffic on two experts"
        );
        // (total − task loss, gate gradient, experts' gradients) under `cfg`.
        let run = |cfg: &DsConfig| {
            let (gate, experts) = tracked(&s, &device);
            let loss = step_loss(&gate, &experts, &b, cfg);
            let extra = loss.total.clone().into_scalar::<f32>() - loss.task.into_scalar::<f32>();
            let grads = loss.total.backward();
            let grad = |x: &Tensor<2>| -> Vec<f32> {
                let g = x.grad(&grads).expect("tracked");
                g.into_data().try_to_vec::<f32>().expect("f32 gradient")
            };
            let experts: Vec<Vec<f32>> = experts.iter().flatten().map(grad).collect();
            (extra, grad(&gate), experts)
        };
        let near = |a: f32, b: f32| (a - b).abs() <= 1e-5 + 1e-4 * b.abs();
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| near(*x, *y));
        let off = DsConfig {
            lambda_lasso: 0.0,
            lambda_expert: 0.0,
            lambda_load: 0.0,
            ..DsConfig::default()
        };
        let (extra, gate_off, experts_off) = run(&off);
        assert_eq!(extra, 0.0, "with every λ at 0 the loss is the task loss");

        // Each lasso alone adds λ·Σ(norms) to the loss and λ·w/norm to each row's gradient:
        // the row's own norm (group lasso) or its expert's Frobenius norm (expert lasso).
        let lambda = 0.1f32;
        for group in [true, false] {
            let cfg = if group {
                DsConfig {
                    lambda_lasso: lambda as f64,
                    ..off.clone()
                }
            } else {
                DsConfig {
                    lambda_expert: lambda as f64,
                    ..off.clone()
                }
            };
            let (extra, gate, experts) = run(&cfg);
            let mut want = 0.0f32;
            for ((e, g), g_off) in s.experts.iter().zip(&experts).zip(&experts_off) {
                let norms: Vec<f32> = (0..e.ids.len()).map(|i| e.rows.norm(i)).collect();
                let frobenius = norms.iter().map(|n| n * n).sum::<f32>().sqrt();
                want += if group { norms.iter().sum() } else { frobenius };
                let added: Vec<f32> = g.iter().zip(g_off).map(|(a, b)| a - b).collect();
                let expected: Vec<f32> = e
                    .rows
                    .w
                    .chunks(e.rows.width)
                    .zip(&norms)
                    .flat_map(|(row, &n)| {
                        let n = if group { n } else { frobenius };
                        row.iter().map(move |w| lambda * w / n)
                    })
                    .collect();
                assert!(
                    same(&added, &expected),
                    "group {group}: {added:?} vs {expected:?}"
                );
            }
            assert!(
                near(extra, lambda * want),
                "group {group}: {extra} vs {}",
                lambda * want
            );
            assert!(same(&gate, &gate_off), "a lasso moved the gate's gradient");
        }

        // The load term alone: λ_load·CV² of the chosen experts' summed gate values; it acts on
        // the gate only.
        let cfg = DsConfig {
            lambda_load: 1.0,
            ..off.clone()
        };
        let (extra, gate, experts) = run(&cfg);
        let k = s.n_experts();
        let mut importance = vec![0.0f32; k];
        for h in idx.iter().map(|&i| data.get(i)) {
            let scores: Vec<f32> = (0..k)
                .map(|j| {
                    let u = s.gate.row(j);
                    u[..s.d].iter().zip(h).map(|(a, b)| a * b).sum::<f32>() + u[s.d]
                })
                .collect();
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let z: f32 = scores.iter().map(|x| (x - max).exp()).sum();
            let best = scores.iter().position(|&x| x == max).expect("a maximum");
            importance[best] += 1.0 / z;
        }
        let mean = importance.iter().sum::<f32>() / k as f32;
        let var = importance.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / k as f32;
        assert!(
            near(extra, var / (mean * mean)),
            "{extra} vs {}",
            var / (mean * mean)
        );
        assert!(
            !same(&gate, &gate_off),
            "the load term did not reach the gate"
        );
        for (g, g_off) in experts.iter().zip(&experts_off) {
            assert!(same(g, g_off), "the load term moved an expert's gradient");
        }
    }

    #[test]
    fn the_kmeans_gate_routes_to_the_nearest_centre() {
        let d = 2;
        let hs: Vec<f32> = (0..200)
            .flat_map(|i: usize| {
                if i.is_multiple_of(2) {
                    [5.0, 5.0]
                } else {
                    [-5.0, 1.0]
                }
            })
            .collect();
        let c = Contexts {
            d,
            hs,
            next: vec![0; 200],
            history: Vec::new(),
        };
        let mut s = DsState::from_full(&fixture(3, d), 2, 0.0, 0.0, 1);
        s.gate = Rows::new(kmeans_gate(&c, 2, 1), d + 1);
        let r = s.route(&[5.0, 4.0, -4.0, 1.0]);
        assert_ne!(r[0], r[1]);
    }

    #[test]
    fn a_two_means_split_divides_an_experts_contexts_between_the_twins() {
        let d = 2;
        let blob = |i: usize| {
            if i.is_multiple_of(2) {
                [4.0, 0.5]
            } else {
                [-3.0, 0.0]
            }
        };
        let c = Contexts {
            d,
            hs: (0..300).flat_map(blob).collect(),
            next: vec![0; 300],
            history: Vec::new(),
        };
        let mut s = DsState::from_full(&fixture(3, d), 1, 0.0, 0.0, 1);
        let mut rng = StdRng::seed_from_u64(5);
        s.split(0.0, 0.0, Some(&c), &mut rng);
        let r = s.route(&[3.0, 0.4, -2.0, 0.1]);
        assert_ne!(r[0], r[1], "the twins serve different blobs");
    }

    #[test]
    fn bad_configs_are_errors() {
        let bad = |f: &dyn Fn(&mut DsConfig)| {
            let mut c = DsConfig::default();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(&|c| c.experts = 48).contains("power of two"));
        assert!(bad(&|c| c.start_experts = 128).contains("start_experts"));
        assert!(bad(&|c| c.lambda_lasso = f64::NAN).contains("≥ 0"));
        assert!(bad(&|c| c.gate_init = "pca".into()).contains("kmeans"));
        assert!(bad(&|c| c.split = "halves".into()).contains("split"));
        assert_eq!(DsConfig::default().stages(), vec![2, 4, 8, 16, 32, 64]);
    }
}
