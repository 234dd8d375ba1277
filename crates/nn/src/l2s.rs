//! Training the L2S screening head (Chen et al., ICLR 2019, Algorithm 1).
//!
//! Input: context vectors `h` (the LM's last hidden state over a training text) and the exact
//! top-k of the full softmax for each (`y`, k = 5 by default). Output: cluster vectors `v_t`
//! (`[r, d]`) and each cluster's candidate set `c_t`, served by
//! [`fastsoftmax_infer::L2sHead`].
//!
//! 1. Spherical k-means on the contexts initialises `v`.
//! 2. Greedy knapsack: with the assignment `z(h) = argmax_t v_t·h` fixed, pick the (cluster,
//!    word) items with the best value/weight ratio until the average candidate count over the
//!    training contexts, `L̄ = Σ_t (N_t/N)|c_t|`, reaches the budget `B`.
//! 3. For `rounds` rounds: fix `c`, learn `v` on burn by SGD (Adam) on Eq. 8 through a
//!    Gumbel-softmax straight-through sample of the cluster, then re-run the knapsack.
//!    The Gumbel step starts from `init_scale` × the unit k-means vectors (see the field), and
//!    the round whose sets cover the validation contexts' labels best is kept.
//!
//! Per context the Eq. 6 loss of cluster `t` is `(k − hit) + λ(|c_t| − hit)`, where
//! `hit = |y ∩ c_t|`: missed labels cost 1, wasted candidates cost λ.

use std::time::Instant;

use burn::module::{Module, Param};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::activation::{log_softmax, relu, softmax};
use burn::tensor::{Device, Tensor, TensorData};
use fastsoftmax_infer::kernels::PackedMatrix;
use fastsoftmax_infer::{FullHead, L2sHead, SoftmaxHead, TopK};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Hyper-parameters of L2S training (`--config FILE`, overridden by flags).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct L2sConfig {
    /// Number of clusters `r`.
    pub clusters: usize,
    /// Budget `B`: average candidate count per context over the training contexts.
    pub budget: f64,
    /// Labels per context: the exact top-`top_k` words.
    pub top_k: usize,
    /// Weight λ of a wasted candidate (Eq. 6).
    pub lambda: f64,
    /// Weight γ of the budget overshoot `max(0, L̄ − B)` (Eq. 8).
    pub gamma: f64,
    /// Gumbel-softmax temperature.
    pub temperature: f64,
    /// Length of the k-means cluster vectors the Gumbel step starts from. The argmax does not
    /// depend on it, but the spread of `P(t|h)` does: unit vectors give logits within a few
    /// units, so Gumbel noise would mostly sample the wrong cluster.
    pub init_scale: f64,
    /// Alternating rounds T (Gumbel step + knapsack). 0 = spherical k-means only (Table 5).
    pub rounds: usize,
    /// Passes over the training contexts per Gumbel step.
    pub epochs_per_round: usize,
    pub batch_size: usize,
    /// Adam learning rate of the cluster vectors.
    pub lr: f64,
    /// Decay of the moving average of L̄ over mini-batches.
    pub budget_decay: f64,
    pub kmeans_iters: usize,
    /// Use at most this many training contexts (evenly spaced); 0 = all.
    pub max_contexts: usize,
    pub seed: u64,
}

impl Default for L2sConfig {
    fn default() -> Self {
        L2sConfig {
            clusters: 100,
            budget: 200.0,
            top_k: 5,
            lambda: 0.0003,
            gamma: 10.0,
            temperature: 1.0,
            init_scale: 5.0,
            rounds: 5,
            epochs_per_round: 1,
            batch_size: 256,
            lr: 0.01,
            budget_decay: 0.9,
            kmeans_iters: 15,
            max_contexts: 0,
            seed: 1,
        }
    }
}

impl L2sConfig {
    pub fn validate(&self, vocab: usize) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(format!("l2s config: {m}")));
        if self.clusters == 0 {
            return bad("clusters must be ≥ 1".into());
        }
        if self.top_k == 0 || self.top_k > vocab {
            return bad(format!("top_k = {} must be in 1..={vocab}", self.top_k));
        }
        if !(self.budget >= self.top_k as f64 && self.budget <= vocab as f64) {
            return bad(format!(
                "budget = {} must be between top_k ({}) and the vocabulary size ({vocab})",
                self.budget, self.top_k
            ));
        }
        if !(self.lambda >= 0.0 && self.gamma >= 0.0) {
            return bad("lambda and gamma must be ≥ 0".into());
        }
        if !(self.temperature > 0.0 && self.lr > 0.0 && self.init_scale > 0.0) {
            return bad("temperature, init_scale and lr must be > 0".into());
        }
        if self.batch_size == 0 || !(0.0..1.0).contains(&self.budget_decay) {
            return bad("batch_size must be ≥ 1 and budget_decay in [0, 1)".into());
        }
        Ok(())
    }
}

/// Contexts `[n, d]` with their exact top-k labels `[n, k]` (best first).
pub struct Labeled {
    pub d: usize,
    pub k: usize,
    pub hs: Vec<f32>,
    pub labels: Vec<u32>,
}

impl Labeled {
    /// Labels `hs` with `full`'s exact top-`k`, in parallel.
    pub fn new(full: &FullHead, hs: Vec<f32>, k: usize) -> Self {
        let d = full.dim();
        let mut labels = vec![0u32; hs.len() / d * k];
        const CHUNK: usize = 64;
        labels
            .par_chunks_mut(CHUNK * k)
            .zip(hs.par_chunks(CHUNK * d))
            .for_each(|(lab, h)| {
                let mut outs = vec![TopK::new(k); h.len() / d];
                full.top_k_batch(h, k, &mut outs);
                for (l, o) in lab.chunks_mut(k).zip(&outs) {
                    for (x, id) in l.iter_mut().zip(o.ids()) {
                        *x = id;
                    }
                }
            });
        Labeled { d, k, hs, labels }
    }

    pub fn len(&self) -> usize {
        self.hs.len() / self.d
    }

    pub fn is_empty(&self) -> bool {
        self.hs.is_empty()
    }

    fn h(&self, i: usize) -> &[f32] {
        &self.hs[i * self.d..(i + 1) * self.d]
    }

    fn y(&self, i: usize) -> &[u32] {
        &self.labels[i * self.k..(i + 1) * self.k]
    }
}

/// Argmax cluster of every context, in parallel.
fn assign(v: &[f32], d: usize, data: &Labeled) -> Vec<u32> {
    let r = v.len() / d;
    let m = PackedMatrix::new(v, &vec![0.0; r], d, None);
    (0..data.len())
        .into_par_iter()
        .map(|i| m.argmax(data.h(i)).0 as u32)
        .collect()
}

/// Spherical k-means: unit cluster vectors maximising Σ cos(h, v_z(h)).
pub fn spherical_kmeans(data: &Labeled, r: usize, iters: usize, seed: u64) -> Vec<f32> {
    let d = data.d;
    let n = data.len();
    let mut rng = StdRng::seed_from_u64(seed);
    let norm = |x: &[f32]| x.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
    let unit = |x: &[f32]| -> Vec<f32> {
        let n = norm(x);
        x.iter().map(|a| a / n).collect()
    };
    let norms: Vec<f32> = (0..n).map(|i| norm(data.h(i))).collect();
    let mut v: Vec<f32> = (0..r)
        .flat_map(|_| unit(data.h(rng.random_range(0..n))))
        .collect();
    for _ in 0..iters {
        let z = assign(&v, d, data);
        let mut sums = vec![0.0f64; r * d];
        let mut counts = vec![0usize; r];
        for (i, &t) in z.iter().enumerate() {
            counts[t as usize] += 1;
            let sum = &mut sums[t as usize * d..(t as usize + 1) * d];
            for (s, x) in sum.iter_mut().zip(data.h(i)) {
                *s += (x / norms[i]) as f64;
            }
        }
        for t in 0..r {
            let row: Vec<f32> = if counts[t] == 0 {
                // An empty cluster restarts at a random context.
                unit(data.h(rng.random_range(0..n)))
            } else {
                unit(
                    &sums[t * d..(t + 1) * d]
                        .iter()
                        .map(|&x| x as f32)
                        .collect::<Vec<_>>(),
                )
            };
            v[t * d..(t + 1) * d].copy_from_slice(&row);
        }
    }
    v
}

/// Greedy knapsack (the paper's step 7): with the assignment `z` fixed, every (cluster `t`,
/// word `s`) is an item of value `n_ts − λ(N_t − n_ts)` (misses avoided minus wasted products)
/// and weight `N_t / N` (its share of `L̄`). Items go in by value/weight, best first, while
/// `L̄ ≤ budget`; an item that does not fit is skipped and smaller ones may still enter.
/// Returns each cluster's word ids, ascending.
pub fn knapsack(
    z: &[u32],
    data: &Labeled,
    r: usize,
    vocab: usize,
    budget: f64,
    lambda: f64,
) -> Vec<Vec<u32>> {
    let n = z.len();
    let mut counts = vec![0u32; r * vocab];
    let mut sizes = vec![0usize; r];
    for (i, &t) in z.iter().enumerate() {
        sizes[t as usize] += 1;
        for &s in data.y(i) {
            counts[t as usize * vocab + s as usize] += 1;
        }
    }
    let mut items: Vec<(f64, u32, u32)> = counts
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .filter_map(|(idx, &c)| {
            let (t, s) = (idx / vocab, idx % vocab);
            let nt = sizes[t] as f64;
            let value = c as f64 - lambda * (nt - c as f64);
            (value > 0.0).then(|| (value / (nt / n as f64), t as u32, s as u32))
        })
        .collect();
    items.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut sets = vec![Vec::new(); r];
    let mut load = 0.0f64;
    for (_, t, s) in items {
        let w = sizes[t as usize] as f64 / n as f64;
        if load + w <= budget + 1e-9 {
            load += w;
            sets[t as usize].push(s);
        }
    }
    for s in &mut sets {
        s.sort_unstable();
    }
    sets
}

/// Coverage of `data`'s labels by the sets of its assigned clusters `z`: (P@1, P@k, mean
/// candidates per context). P@k equals the head's precision: inside a set the logits are exact.
pub fn coverage(z: &[u32], sets: &[Vec<u32>], data: &Labeled, vocab: usize) -> (f64, f64, f64) {
    let member = Membership::new(sets, vocab);
    let (mut p1, mut pk, mut size) = (0usize, 0usize, 0usize);
    for (i, &t) in z.iter().enumerate() {
        let y = data.y(i);
        p1 += member.has(t as usize, y[0]) as usize;
        pk += y.iter().filter(|&&s| member.has(t as usize, s)).count();
        size += sets[t as usize].len();
    }
    let n = data.len() as f64;
    (
        p1 as f64 / n,
        pk as f64 / (n * data.k as f64),
        size as f64 / n,
    )
}

/// Bitsets of the candidate sets: `has(t, s)` in O(1).
struct Membership {
    words: usize,
    bits: Vec<u64>,
}

impl Membership {
    fn new(sets: &[Vec<u32>], vocab: usize) -> Self {
        let words = vocab.div_ceil(64);
        let mut bits = vec![0u64; sets.len() * words];
        for (t, set) in sets.iter().enumerate() {
            for &s in set {
                bits[t * words + s as usize / 64] |= 1 << (s % 64);
            }
        }
        Membership { words, bits }
    }

    #[inline]
    fn has(&self, t: usize, s: u32) -> bool {
        self.bits[t * self.words + s as usize / 64] >> (s % 64) & 1 == 1
    }
}

/// The trainable part: the cluster vectors.
#[derive(Module, Debug)]
pub struct Screener {
    /// [r, d]
    pub v: Param<Tensor<2>>,
}

impl Screener {
    pub fn new(v: &[f32], r: usize, d: usize, device: &Device) -> Self {
        Screener {
            v: Param::from_tensor(Tensor::from_data(
                TensorData::new(v.to_vec(), [r, d]),
                device,
            )),
        }
    }

    pub fn to_vec(&self) -> Vec<f32> {
        self.v
            .val()
            .into_data()
            .try_to_vec::<f32>()
            .expect("f32 parameters")
    }
}

/// Inputs of one Gumbel step, built in plain Rust.
pub struct StepBatch {
    /// [b, d] contexts
    pub h: Tensor<2>,
    /// [b, r] Eq. 6 loss of each context in each cluster
    pub cost: Tensor<2>,
    /// [1, r] candidate count of each cluster
    pub sizes: Tensor<2>,
    /// [b, r] Gumbel(0, 1) noise
    pub noise: Tensor<2>,
}

/// Eq. 8 on one mini-batch, through the straight-through Gumbel-softmax sample
/// `p̄ = onehot(argmax p) − sg(p) + p`, `p = softmax((log P(t|h) + g) / τ)`.
/// Returns (loss, batch L̄); `l_prev` is the moving average of L̄ so far.
pub fn gumbel_loss(
    model: &Screener,
    batch: StepBatch,
    cfg: &L2sConfig,
    l_prev: f64,
) -> (Tensor<1>, Tensor<1>) {
    let [b, r] = batch.cost.dims();
    let logits = batch.h.matmul(model.v.val().transpose());
    let p = softmax(
        (log_softmax(logits, 1) + batch.noise).div_scalar(cfg.temperature),
        1,
    );
    let hard: Tensor<2> = p
        .clone()
        .detach()
        .argmax(1)
        .reshape([b])
        .one_hot::<2>(r)
        .float();
    let p_bar = hard - p.clone().detach() + p;
    let task = (p_bar.clone() * batch.cost).sum_dim(1).mean();
    let l_batch = (p_bar * batch.sizes).sum_dim(1).mean();
    let a = cfg.budget_decay;
    let l_avg = l_batch.clone().mul_scalar(1.0 - a).add_scalar(a * l_prev);
    let over = relu(l_avg.sub_scalar(cfg.budget)).mul_scalar(cfg.gamma);
    (task + over, l_batch)
}

/// One round's record in the training log.
#[derive(Debug, Clone, Serialize)]
pub struct RoundRecord {
    pub round: usize,
    pub train_p1: f64,
    pub train_pk: f64,
    pub train_mean_candidates: f64,
    pub valid_p1: f64,
    pub valid_pk: f64,
    pub valid_mean_candidates: f64,
    pub seconds: f64,
}

/// What training produced besides the head.
#[derive(Debug, Clone, Serialize)]
pub struct L2sReport {
    pub config: L2sConfig,
    pub train_contexts: usize,
    pub valid_contexts: usize,
    pub rounds: Vec<RoundRecord>,
    /// The round whose head was kept (0 = k-means + knapsack).
    pub best_round: usize,
}

/// Algorithm 1. `log` receives one line per stage.
pub fn train_l2s(
    name: &str,
    full: &FullHead,
    train: &Labeled,
    valid: &Labeled,
    cfg: &L2sConfig,
    device: &Device,
    log: &mut dyn FnMut(&str),
) -> Result<(L2sHead, L2sReport)> {
    let vocab = full.vocab_size();
    cfg.validate(vocab)?;
    let (d, r) = (full.dim(), cfg.clusters);
    if train.len() < r {
        return Err(Error::Invalid(format!(
            "{} training contexts are fewer than {r} clusters; use more text or fewer clusters",
            train.len()
        )));
    }
    if train.k != cfg.top_k || valid.k != cfg.top_k {
        return Err(Error::Invalid("labels were made for another top_k".into()));
    }
    let started = Instant::now();
    let mut v = spherical_kmeans(train, r, cfg.kmeans_iters, cfg.seed);
    log(&format!(
        "spherical k-means: {r} clusters, {} iterations over {} contexts ({:.0} s)",
        cfg.kmeans_iters,
        train.len(),
        started.elapsed().as_secs_f64()
    ));
    let (mut sets, first) = refit(0, &v, train, valid, cfg, vocab, started);
    let mut rounds = vec![first];
    log(&round_line(&rounds[0]));
    let mut best = (rounds[0].valid_pk, 0, v.clone(), sets.clone());

    let scaled: Vec<f32> = v.iter().map(|x| x * cfg.init_scale as f32).collect();
    let mut model = Screener::new(&scaled, r, d, device);
    let mut optim = AdamConfig::new().init();
    let mut rng = StdRng::seed_from_u64(cfg.seed ^ 0x5eed);
    let mut order: Vec<usize> = (0..train.len()).collect();
    for round in 1..=cfg.rounds {
        let t0 = Instant::now();
        let member = Membership::new(&sets, vocab);
        let sizes_row: Vec<f32> = sets.iter().map(|s| s.len() as f32).collect();
        let sizes = Tensor::<2>::from_data(TensorData::new(sizes_row.clone(), [1, r]), device);
        // The moving average starts at the L̄ the knapsack just filled.
        let mut l_avg = rounds.last().unwrap().train_mean_candidates;
        let (mut l_sum, mut steps) = (0.0f64, 0usize);
        for _ in 0..cfg.epochs_per_round {
            shuffle(&mut order, &mut rng);
            for idx in order.chunks(cfg.batch_size) {
                let b = idx.len();
                let mut h = Vec::with_capacity(b * d);
                let mut cost = Vec::with_capacity(b * r);
                for &i in idx {
                    h.extend_from_slice(train.h(i));
                    let y = train.y(i);
                    for (t, &size) in sizes_row.iter().enumerate() {
                        let hit = y.iter().filter(|&&s| member.has(t, s)).count() as f64;
                        let miss = train.k as f64 - hit;
                        cost.push((miss + cfg.lambda * (size as f64 - hit)) as f32);
                    }
                }
                let noise: Vec<f32> = (0..b * r)
                    .map(|_| {
                        let u: f32 = rng.random_range(f32::MIN_POSITIVE..1.0);
                        -(-u.ln()).ln()
                    })
                    .collect();
                let batch = StepBatch {
                    h: Tensor::from_data(TensorData::new(h, [b, d]), device),
                    cost: Tensor::from_data(TensorData::new(cost, [b, r]), device),
                    sizes: sizes.clone(),
                    noise: Tensor::from_data(TensorData::new(noise, [b, r]), device),
                };
                let (loss, l_batch) = gumbel_loss(&model, batch, cfg, l_avg);
                let l_batch = l_batch.into_scalar::<f32>() as f64;
                l_avg = cfg.budget_decay * l_avg + (1.0 - cfg.budget_decay) * l_batch;
                let grads = GradientsParams::from_grads(loss.backward(), &model);
                model = optim.step(cfg.lr, model, grads);
                steps += 1;
                l_sum += l_batch;
            }
        }
        v = model.to_vec();
        if v.iter().any(|x| !x.is_finite()) {
            return Err(Error::Invalid(format!(
                "cluster vectors became non-finite in round {round}; lower lr in the l2s config"
            )));
        }
        let sgd_seconds = t0.elapsed().as_secs_f64();
        let rec;
        (sets, rec) = refit(round, &v, train, valid, cfg, vocab, t0);
        log(&format!(
            "{} | Gumbel step {steps} batches, mean sampled L̄ {:.1}, {sgd_seconds:.0} s",
            round_line(&rec),
            l_sum / steps.max(1) as f64
        ));
        if rec.valid_pk > best.0 {
            best = (rec.valid_pk, round, v.clone(), sets.clone());
        }
        rounds.push(rec);
    }
    let (_, best_round, v, sets) = best;
    log(&format!(
        "kept round {best_round} (best validation P@{}); total {:.0} s",
        cfg.top_k,
        started.elapsed().as_secs_f64()
    ));
    let head = L2sHead::new(name, full, &v, &sets)?;
    Ok((
        head,
        L2sReport {
            config: cfg.clone(),
            train_contexts: train.len(),
            valid_contexts: valid.len(),
            rounds,
            best_round,
        },
    ))
}

/// The knapsack step for the clusters `v`, and how well its sets cover train and valid.
fn refit(
    round: usize,
    v: &[f32],
    train: &Labeled,
    valid: &Labeled,
    cfg: &L2sConfig,
    vocab: usize,
    t0: Instant,
) -> (Vec<Vec<u32>>, RoundRecord) {
    let z = assign(v, train.d, train);
    let sets = knapsack(&z, train, cfg.clusters, vocab, cfg.budget, cfg.lambda);
    let (train_p1, train_pk, train_mean_candidates) = coverage(&z, &sets, train, vocab);
    let z_valid = assign(v, valid.d, valid);
    let (valid_p1, valid_pk, valid_mean_candidates) = coverage(&z_valid, &sets, valid, vocab);
    let record = RoundRecord {
        round,
        train_p1,
        train_pk,
        train_mean_candidates,
        valid_p1,
        valid_pk,
        valid_mean_candidates,
        seconds: t0.elapsed().as_secs_f64(),
    };
    (sets, record)
}

fn round_line(r: &RoundRecord) -> String {
    format!(
        "round {} | train P@1 {:.4} P@k {:.4} L̄ {:.1} | valid P@1 {:.4} P@k {:.4} L̄ {:.1}",
        r.round,
        r.train_p1,
        r.train_pk,
        r.train_mean_candidates,
        r.valid_p1,
        r.valid_pk,
        r.valid_mean_candidates
    )
}

fn shuffle(v: &mut [usize], rng: &mut StdRng) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.random_range(0..=i));
    }
}
