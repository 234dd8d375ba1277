//! Measuring heads: perplexity, precision against the exact softmax, accuracy against the true
//! next word, and single-thread latency. Measurement, not something an app embeds: compiled only
//! with the `eval` feature (the CLI, the benches and the training crate turn it on).

use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::head::{Predictor, SoftmaxHead};
use crate::heads::FullHead;
use crate::kernels::log_sum_exp;
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

/// Perplexity when only a screened candidate set gets exact logits and every other word a
/// low-rank approximation (the L2S paper's Table 6), against the exact perplexity, with the
/// time of each softmax (logits + normaliser) measured on the same contexts, single thread.
#[derive(Debug, Clone, Serialize)]
pub struct ScreenedPerplexity {
    pub head: String,
    pub rank: usize,
    pub tokens: usize,
    pub ppl_full: f64,
    pub ppl_head: f64,
    pub us_per_token_full: f64,
    pub us_per_token_head: f64,
    pub speedup: f64,
    /// vocab / (clusters + exact candidates + low-rank cost), in length-d dot products.
    pub flop_speedup: f64,
}

/// Scores the first `max` predictions of `tokens` both ways; `repeats` timed passes each.
pub fn screened_perplexity(
    lm: &LanguageModel,
    head: &crate::heads::L2sHead,
    fallback: &crate::heads::LowRank,
    tokens: &[u32],
    max: usize,
    repeats: usize,
) -> Result<ScreenedPerplexity> {
    let c = collect_contexts(lm, tokens, max)?;
    let n = c.len();
    let vocab = lm.spec().vocab_size;
    let full = lm.full_head();
    let mut logits = vec![0.0f32; vocab];
    let mut q = vec![0.0f32; fallback.rank()];
    let mut exact_rows = 0usize;
    let run_full = |logits: &mut [f32]| {
        (0..n)
            .map(|i| {
                full.logits_into(c.get(i), logits);
                log_sum_exp(logits) - logits[c.next[i] as usize] as f64
            })
            .sum::<f64>()
    };
    let mut run_head = |logits: &mut [f32], rows: &mut usize| {
        (0..n)
            .map(|i| {
                *rows += head.logits_with_fallback(c.get(i), fallback, &mut q, logits);
                log_sum_exp(logits) - logits[c.next[i] as usize] as f64
            })
            .sum::<f64>()
    };
    let (mut t_full, mut t_head) = (Vec::new(), Vec::new());
    let (mut nll_full, mut nll_head) = (0.0, 0.0);
    for rep in 0..repeats.max(1) {
        let t = Instant::now();
        nll_full = run_full(&mut logits);
        t_full.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
        let t = Instant::now();
        let mut rows = 0;
        nll_head = run_head(&mut logits, &mut rows);
        t_head.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
        if rep == 0 {
            exact_rows = rows;
        }
    }
    let (us_full, us_head) = (median(&mut t_full), median(&mut t_head));
    let cost = head.n_clusters() as f64 + exact_rows as f64 / n as f64 + fallback.cost();
    Ok(ScreenedPerplexity {
        head: SoftmaxHead::name(head).to_string(),
        rank: fallback.rank(),
        tokens: n,
        ppl_full: (nll_full / n as f64).exp(),
        ppl_head: (nll_head / n as f64).exp(),
        us_per_token_full: us_full,
        us_per_token_head: us_head,
        speedup: us_full / us_head,
        flop_speedup: vocab as f64 / cost,
    })
}
