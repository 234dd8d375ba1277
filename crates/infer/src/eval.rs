//! Measuring heads: perplexity, precision against the exact softmax, accuracy against the true
//! next word, and single-thread latency. Measurement, not something an app embeds: compiled only
//! with the `eval` feature (the CLI, the benches and the training crate turn it on).

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::head::{Predictor, SoftmaxHead};
use crate::heads::hnsw::Space;
use crate::heads::registry::HeadLoader;
use crate::heads::{
    read_head, AdaptiveHead, FullHead, HnswHead, L2sHead, LowRank, SvdHead, HEAD_MANIFEST,
};
use crate::kernels::rows::ExactRows;
use crate::kernels::{dot, log_sum_exp};
use crate::model::LanguageModel;
use crate::topk::TopK;

pub use crate::model::contexts::{collect_contexts, Contexts};
pub use crate::topk::K_MAX;

/// Contexts per batch in the throughput measurement.
pub const BATCH: usize = 64;

/// Perplexity of `tokens` read as one stream from the zero state, and the number of predictions.
/// The first token is only read, every later one is predicted.
pub fn perplexity(lm: &LanguageModel, tokens: &[u32]) -> Result<(f64, usize)> {
    if tokens.len() < 2 {
        return Err(Error::Invalid(
            "the text has fewer than two tokens; perplexity needs at least one prediction".into(),
        ));
    }
    let mut state = lm.new_state();
    let mut logits = vec![0.0f32; lm.spec().vocab_size];
    let mut nll = 0.0f64;
    for w in tokens.windows(2) {
        lm.step(w[0], &mut state)?;
        lm.full_head().logits_into(state.context(), &mut logits);
        nll += log_sum_exp(&logits) - logits[w[1] as usize] as f64;
    }
    let n = tokens.len() - 1;
    Ok(((nll / n as f64).exp(), n))
}

/// One head's row of the benchmark table (the fields `bench --json` prints).
#[derive(Debug, Clone, Serialize)]
pub struct HeadReport {
    pub head: String,
    pub contexts: usize,
    /// |top-1 ∩ exact top-1|, averaged.
    pub p_at_1: f64,
    /// |top-5 ∩ exact top-5| / 5, averaged.
    pub p_at_5: f64,
    pub acc_at_1: f64,
    pub acc_at_5: f64,
    pub acc_at_10: f64,
    pub us_per_query_b1: f64,
    pub us_per_query_b64: f64,
    pub speedup_b1: f64,
    pub speedup_b64: f64,
    /// vocab / mean dot products per query.
    pub flop_speedup: f64,
    /// What an app pays per predicted word at batch 1: the LM step (when the head reads the
    /// LM's context) plus the head; `None` when the LM step was not timed.
    pub us_per_word_end_to_end: Option<f64>,
    /// (LM step + full softmax) / [`Self::us_per_word_end_to_end`].
    pub speedup_end_to_end: Option<f64>,
}

/// Median µs per query of `repeats` passes over all contexts, at batch 1 and at batch [`BATCH`].
fn time_head(head: &dyn Predictor, c: &Contexts, repeats: usize) -> (f64, f64) {
    let n = c.len();
    let mut one = TopK::new(K_MAX);
    let mut b1 = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t = Instant::now();
        for i in 0..n {
            head.predict_into(std::hint::black_box(c.context(i)), K_MAX, &mut one);
            std::hint::black_box(one.as_slice());
        }
        b1.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
    let histories: Vec<&[u32]> = (0..n).map(|i| c.history(i)).collect();
    let mut outs = vec![TopK::new(K_MAX); BATCH];
    let mut bn = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t = Instant::now();
        for (start, hist) in (0..n).step_by(BATCH).zip(histories.chunks(BATCH)) {
            let m = hist.len();
            let hs = &c.hs[start * c.d..(start + m) * c.d];
            head.predict_batch(std::hint::black_box(hs), hist, K_MAX, &mut outs[..m]);
            std::hint::black_box(&outs);
        }
        bn.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
    (median(&mut b1), median(&mut bn))
}

/// Median µs per token of the LM step (reading one word, single thread) over `repeats` passes
/// of `tokens` from the zero state: what every softmax head needs first.
pub fn time_lm_step(lm: &LanguageModel, tokens: &[u32], repeats: usize) -> Result<f64> {
    if tokens.is_empty() {
        return Err(Error::Invalid("no tokens to time the LM step on".into()));
    }
    let mut times = Vec::with_capacity(repeats.max(1));
    for _ in 0..repeats.max(1) {
        let mut state = lm.new_state();
        let t = Instant::now();
        for &w in tokens {
            lm.step(std::hint::black_box(w), &mut state)?;
        }
        std::hint::black_box(state.context());
        times.push(t.elapsed().as_secs_f64() * 1e6 / tokens.len() as f64);
    }
    Ok(median(&mut times))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if !v.len().is_multiple_of(2) {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Benchmarks `heads` against `full` on the same contexts, single thread. `repeats` ≥ 1 passes
/// are timed per head and batch size; the medians are reported. Predictors that read the
/// previous words need contexts with their history ([`collect_contexts`]). With `lm_step_us`
/// (from [`time_lm_step`]) the end-to-end columns are filled in.
pub fn bench_heads(
    full: &FullHead,
    heads: &[&dyn Predictor],
    c: &Contexts,
    repeats: usize,
    lm_step_us: Option<f64>,
) -> Result<Vec<HeadReport>> {
    if let Some(p) = heads
        .iter()
        .find(|p| p.history_len() > 0 && c.history.is_empty())
    {
        return Err(Error::Invalid(format!(
            "{} predicts from the previous words, but these contexts carry none; collect them from one stream of text",
            p.name()
        )));
    }
    let repeats = repeats.max(1);
    let n = c.len();
    let mut exact = vec![TopK::new(K_MAX); n];
    for (i, e) in exact.iter_mut().enumerate() {
        full.top_k_into(c.get(i), K_MAX, e);
    }
    let (full_b1, full_bn) = time_head(full, c, repeats);
    let vocab = SoftmaxHead::vocab_size(full) as f64;
    Ok(heads
        .iter()
        .map(|head| {
            let mut got = TopK::new(K_MAX);
            let (mut p1, mut p5, mut a1, mut a5, mut a10, mut cost) =
                (0usize, 0usize, 0, 0, 0, 0usize);
            for (i, (exact, &truth)) in exact.iter().zip(&c.next).enumerate() {
                head.predict_into(c.context(i), K_MAX, &mut got);
                cost += head.cost(c.context(i));
                let g: Vec<u32> = got.ids().collect();
                let e: Vec<u32> = exact.ids().collect();
                p1 += (g.first() == e.first()) as usize;
                p5 += g
                    .iter()
                    .take(5)
                    .filter(|id| e[..5.min(e.len())].contains(id))
                    .count();
                let rank = g.iter().position(|&id| id == truth);
                a1 += matches!(rank, Some(r) if r < 1) as usize;
                a5 += matches!(rank, Some(r) if r < 5) as usize;
                a10 += rank.is_some() as usize;
            }
            let (b1, bn) = if head.name() == "full" {
                (full_b1, full_bn)
            } else {
                time_head(*head, c, repeats)
            };
            let nf = n as f64;
            let end_to_end =
                lm_step_us.map(|lm| b1 + if head.context_width() > 0 { lm } else { 0.0 });
            HeadReport {
                head: head.name().to_string(),
                contexts: n,
                p_at_1: p1 as f64 / nf,
                p_at_5: p5 as f64 / (5.0 * nf),
                acc_at_1: a1 as f64 / nf,
                acc_at_5: a5 as f64 / nf,
                acc_at_10: a10 as f64 / nf,
                us_per_query_b1: b1,
                us_per_query_b64: bn,
                speedup_b1: full_b1 / b1,
                speedup_b64: full_bn / bn,
                flop_speedup: vocab / (cost as f64 / nf),
                us_per_word_end_to_end: end_to_end,
                speedup_end_to_end: lm_step_us.zip(end_to_end).map(|(lm, e)| (lm + full_b1) / e),
            }
        })
        .collect())
}

/// How a fast head gives the next word's probability when a whole distribution is needed (the
/// columns of the L2S paper's Table 6). The screening heads score exact logits for some words
/// and a low-rank approximation (`W V_r V_rᵀ h + b`, [`LowRank`]) for every other word, then
/// normalise over all of them; adaptive softmax has a distribution of its own.
#[derive(Debug, Clone)]
pub enum Scorer {
    /// L2S (or spherical k-means): exact logits for the screened cluster's candidates.
    Cluster { head: L2sHead, fallback: LowRank },
    /// FGD: exact logits for the words the graph search finds (its beam `ef`).
    Graph {
        head: HnswHead,
        fallback: LowRank,
        exact: ExactRows,
    },
    /// SVD-softmax: the low-rank preview of every word, exact logits for its best `N`.
    Preview(SvdHead),
    /// Adaptive softmax: its own `log p(w)`, from the head level and the target's cluster only.
    Adaptive(AdaptiveHead),
}

impl Scorer {
    /// `head` (an L2S head) with a rank-`rank` fallback from `full`.
    pub fn cluster(head: L2sHead, full: &FullHead, rank: usize) -> Result<Self> {
        Ok(Scorer::Cluster {
            head,
            fallback: LowRank::new(full, rank)?,
        })
    }

    /// `head` (FGD) with a rank-`rank` fallback from `full`.
    pub fn graph(head: HnswHead, full: &FullHead, rank: usize) -> Result<Self> {
        Ok(Scorer::Graph {
            head,
            fallback: LowRank::new(full, rank)?,
            exact: ExactRows::new(full.matrix(), None),
        })
    }

    /// SVD-softmax with a rank-`rank` preview and `n` exact words (`svd-rR-nN`).
    pub fn preview(full: &FullHead, rank: usize, n: usize) -> Result<Self> {
        Ok(Scorer::Preview(SvdHead::new(full, rank, n)?))
    }

    pub fn name(&self) -> String {
        match self {
            Scorer::Cluster { head, .. } => SoftmaxHead::name(head).to_string(),
            Scorer::Graph { head, .. } => SoftmaxHead::name(head).to_string(),
            Scorer::Preview(head) => SoftmaxHead::name(head).to_string(),
            Scorer::Adaptive(head) => SoftmaxHead::name(head).to_string(),
        }
    }

    /// Rank of the low-rank logits (0 for adaptive softmax, which needs none).
    pub fn rank(&self) -> usize {
        match self {
            Scorer::Cluster { fallback, .. } | Scorer::Graph { fallback, .. } => fallback.rank(),
            Scorer::Preview(head) => head.rank(),
            Scorer::Adaptive(_) => 0,
        }
    }

    /// `−log p(next | h)` and the length-`d` dot products spent. `logits` is scratch `[vocab]`,
    /// `q` scratch `[rank]`, `top` scratch for the candidates.
    fn nll(&self, h: &[f32], next: u32, s: &mut ScorerScratch) -> (f64, f64) {
        let ScorerScratch { logits, q, top } = s;
        let cost = match self {
            Scorer::Cluster { head, fallback } => {
                let rows = head.logits_with_fallback(h, fallback, q, logits);
                head.n_clusters() as f64 + rows as f64 + fallback.cost()
            }
            Scorer::Graph {
                head,
                fallback,
                exact,
            } => {
                fallback.logits_into(h, q, logits);
                let searched = head.search_into(h, head.ef_search(), top);
                for id in top.ids() {
                    let (row, b) = exact.row(id as usize);
                    logits[id as usize] = dot(row, h) + b;
                }
                (searched + top.as_slice().len()) as f64 + fallback.cost()
            }
            Scorer::Preview(head) => head.logits_into(h, logits),
            Scorer::Adaptive(head) => {
                let (log_p, cost) = head.log_prob(h, next);
                return (-log_p, cost);
            }
        };
        (log_sum_exp(logits) - logits[next as usize] as f64, cost)
    }
}

/// The [`Scorer`] for head `name` of the model in `model_dir` (`lm`): a trained `l2s` or
/// `adaptive` head, `svd-rR-nN` or `hnsw-efE` / `hnsw-ip-efE`, the screening heads with a
/// rank-`rank` fallback (SVD-softmax's own preview is its fallback).
pub fn scorer_for(model_dir: &Path, lm: &LanguageModel, name: &str, rank: usize) -> Result<Scorer> {
    let full = lm.full_head();
    if let Some((r, n)) = SvdHead::parse_name(name) {
        return Scorer::preview(full, r, n);
    }
    let space = if let Some(ef) = HnswHead::parse_name(name) {
        Some((Space::Sphere, ef))
    } else {
        HnswHead::parse_ip_name(name).map(|ef| (Space::InnerProduct, ef))
    };
    if let Some((space, ef)) = space {
        let index = HeadLoader::new(model_dir, full).hnsw_index(space)?;
        return Scorer::graph(HnswHead::new(index, ef)?, full, rank);
    }
    let dir = model_dir.join("heads").join(name);
    let kinds = "a trained l2s or adaptive head, svd-rR-nN, hnsw-efE or hnsw-ip-efE";
    if !dir.join(HEAD_MANIFEST).exists() {
        return Err(Error::Invalid(format!(
            "no head {name:?} to score perplexity with: {} is not a trained head; perplexity takes {kinds}",
            dir.display()
        )));
    }
    let (m, t) = read_head(&dir, full)?;
    match m.kind.as_str() {
        "l2s" => Scorer::cluster(L2sHead::from_files(name, &m, &t, full)?, full, rank),
        "adaptive" => Ok(Scorer::Adaptive(AdaptiveHead::from_files(name, &m, &t, full)?)),
        kind => Err(Error::Invalid(format!(
            "{name} is a {kind} head, which gives no probability to the words it does not score; perplexity takes {kinds}"
        ))),
    }
}

/// Buffers a [`Scorer`] reuses across tokens.
#[derive(Default)]
struct ScorerScratch {
    logits: Vec<f32>,
    q: Vec<f32>,
    top: TopK,
}

/// Perplexity from a fast head's distribution (a [`Scorer`]) against the exact perplexity, with
/// the time of each softmax (logits + normaliser) measured on the same contexts, single thread.
#[derive(Debug, Clone, Serialize)]
pub struct ScreenedPerplexity {
    pub head: String,
    /// Rank of the low-rank logits outside the exact words (0: the head's own distribution).
    pub rank: usize,
    pub tokens: usize,
    pub ppl_full: f64,
    pub ppl_head: f64,
    pub us_per_token_full: f64,
    pub us_per_token_head: f64,
    pub speedup: f64,
    /// vocab / the head's mean cost (selection + exact words + low-rank logits), in length-d
    /// dot products.
    pub flop_speedup: f64,
}

/// Scores the first `max` predictions of `tokens` both ways; `repeats` timed passes each.
pub fn screened_perplexity(
    lm: &LanguageModel,
    scorer: &Scorer,
    tokens: &[u32],
    max: usize,
    repeats: usize,
) -> Result<ScreenedPerplexity> {
    let c = collect_contexts(lm, tokens, max)?;
    let n = c.len();
    let vocab = lm.spec().vocab_size;
    let full = lm.full_head();
    let mut s = ScorerScratch {
        logits: vec![0.0; vocab],
        q: vec![0.0; scorer.rank()],
        ..Default::default()
    };
    let run_full = |logits: &mut [f32]| {
        (0..n)
            .map(|i| {
                full.logits_into(c.get(i), logits);
                log_sum_exp(logits) - logits[c.next[i] as usize] as f64
            })
            .sum::<f64>()
    };
    let (mut t_full, mut t_head) = (Vec::new(), Vec::new());
    let (mut nll_full, mut nll_head, mut cost) = (0.0, 0.0, 0.0);
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        nll_full = run_full(&mut s.logits);
        t_full.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
        let t = Instant::now();
        (nll_head, cost) = (0..n).fold((0.0, 0.0), |(nll, cost), i| {
            let (x, c) = scorer.nll(c.get(i), c.next[i], &mut s);
            (nll + x, cost + c)
        });
        t_head.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
    if !nll_head.is_finite() {
        return Err(Error::Invalid(format!(
            "{} gives a next word of the text no probability (log p = −∞); it cannot score perplexity",
            scorer.name()
        )));
    }
    let (us_full, us_head) = (median(&mut t_full), median(&mut t_head));
    Ok(ScreenedPerplexity {
        head: scorer.name(),
        rank: scorer.rank(),
        tokens: n,
        ppl_full: (nll_full / n as f64).exp(),
        ppl_head: (nll_head / n as f64).exp(),
        us_per_token_full: us_full,
        us_per_token_head: us_head,
        speedup: us_full / us_head,
        flop_speedup: vocab as f64 * n as f64 / cost,
    })
}
