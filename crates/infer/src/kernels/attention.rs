//! Dot-product attention of one query over one sequence, the translator's per-row attention
//! step, compiled for the widest vector unit the CPU has (the engine's own loops are built for
//! the baseline x86-64, SSE2).

use super::exp::exp_nonpositive;
use super::Simd;

/// Weights below `e^−40` of the largest are 0: they cannot move an f32 sum that holds 1, and
/// as subnormal products they would cost ~100 cycles each.
const NEGLIGIBLE: f32 = -40.0;

/// `context = Σ_s α_s values_s` with `α = softmax(keys · q)`, for `keys` and `values` `[S, H]`
/// and `q`, `context` `[H]`; `scores` is scratch (`[S]` on return: the unnormalised weights).
/// Returns the most attended position (the first on ties). `S` must be at least 1.
pub fn attend(
    keys: &[f32],
    values: &[f32],
    q: &[f32],
    scores: &mut Vec<f32>,
    context: &mut [f32],
) -> usize {
    match Simd::get() {
        // SAFETY: the CPU has the features the wrapper was compiled for.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512 => unsafe { attend_avx512(keys, values, q, scores, context) },
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => unsafe { attend_avx2(keys, values, q, scores, context) },
        Simd::Portable => attend_body(keys, values, q, scores, context),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn attend_avx512(
    keys: &[f32],
    values: &[f32],
    q: &[f32],
    scores: &mut Vec<f32>,
    context: &mut [f32],
) -> usize {
    attend_body(keys, values, q, scores, context)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn attend_avx2(
    keys: &[f32],
    values: &[f32],
    q: &[f32],
    scores: &mut Vec<f32>,
    context: &mut [f32],
) -> usize {
    attend_body(keys, values, q, scores, context)
}

#[inline(always)]
fn attend_body(
    keys: &[f32],
    values: &[f32],
    q: &[f32],
    scores: &mut Vec<f32>,
    context: &mut [f32],
) -> usize {
    let h = q.len();
    scores.clear();
    scores.extend(keys.chunks_exact(h).map(|k| super::dot(k, q)));
    let (mut best, mut max) = (0, f32::NEG_INFINITY);
    for (j, &s) in scores.iter().enumerate() {
        if s > max {
            (best, max) = (j, s);
        }
    }
    let mut sum = 0.0f32;
    for s in scores.iter_mut() {
        let d = *s - max;
        *s = if d < NEGLIGIBLE {
            0.0
        } else {
            exp_nonpositive(d)
        };
        sum += *s;
    }
    context.fill(0.0);
    for (&alpha, row) in scores.iter().zip(values.chunks_exact(h)) {
        if alpha == 0.0 {
            continue;
        }
        let w = alpha / sum;
        for (c, x) in context.iter_mut().zip(row) {
            *c += w * x;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    #[test]
    fn attention_matches_the_definition() {
        for (s, h) in [(1, 8), (7, 37), (30, 512)] {
            let keys: Vec<f32> = values(s * h, 1).iter().map(|x| x * 3.0).collect();
            let vals = values(s * h, 2);
            let q = values(h, 3);
            let mut scores = Vec::new();
            let mut ctx = vec![0.0; h];
            let best = attend(&keys, &vals, &q, &mut scores, &mut ctx);
            let raw: Vec<f64> = keys
                .chunks(h)
                .map(|k| k.iter().zip(&q).map(|(a, b)| (a * b) as f64).sum())
                .collect();
            let max = raw.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = raw.iter().map(|r| (r - max).exp()).sum();
            assert_eq!(raw[best], max);
            for u in 0..h {
                let want: f64 = raw
                    .iter()
                    .zip(vals.chunks(h))
                    .map(|(r, v)| (r - max).exp() / z * v[u] as f64)
                    .sum();
                assert!((ctx[u] as f64 - want).abs() < 1e-5, "s {s} h {h} u {u}");
            }
        }
    }
}
