//! Sampled softmax (Jean et al. 2015, "On Using Very Large Target Vocabulary for Neural Machine
//! Translation"): the training loss looks at each row's target and `S` negatives shared by the
//! whole window instead of all `V` words, so the output layer costs `O(N·S·H)` instead of
//! `O(N·V·H)`. The negatives are drawn from a proposal `Q` (unigram counts raised to a power)
//! and every logit is corrected by `− log E[count]` (the log-Q correction), which makes the
//! sampled loss's gradient an estimate of the full softmax's.
//!
//! Row n's loss: with `z_t = h·w_t + b_t − log E(t)` and `z_j = h·w_j + b_j − log E(j)` for the
//! sampled `j ≠ t`, `loss_n = logsumexp(z_t, z_1 … z_S) − z_t`. A sampled word equal to the
//! row's target (an accidental hit) is left out of that row.
//!
//! Evaluation always uses the exact full softmax ([`super::xent`]).

use std::collections::HashMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::gemm::{matmul, MatRef};
use super::vector::{exp_in_place, repeated_rows, rows_scaled, weighted_column_sums};

/// The proposal distribution `Q(w) ∝ count(w)^power` over the vocabulary, with its cumulative
/// sums for drawing.
#[derive(Debug)]
pub struct Sampler {
    q: Vec<f64>,
    cumulative: Vec<f64>,
    /// `[V]`: `log(1 − Q(w))`, the log-probability that one draw misses `w`, from which a GPU
    /// kernel derives every word's correction for any number of draws without the host's
    /// `O(V)` transcendental work per window (1.5 ms at 56k words).
    log_miss: Vec<f32>,
}

/// One window's negatives: `ids` distinct words drawn from `sampler` in `tries` draws.
#[derive(Debug, Clone)]
pub struct Negatives {
    pub ids: Vec<u32>,
    pub tries: u64,
    pub sampler: Arc<Sampler>,
}

impl Sampler {
    /// `counts[w]` is the training count of word `w` (zero counts get a floor of one so that
    /// every word can be drawn); `power` 0.75 flattens the unigram as word2vec does.
    pub fn new(counts: &[u64], power: f64) -> Sampler {
        let weights: Vec<f64> = counts
            .iter()
            .map(|&c| (c.max(1) as f64).powf(power))
            .collect();
        let total: f64 = weights.iter().sum();
        let q: Vec<f64> = weights.iter().map(|w| w / total).collect();
        let mut acc = 0.0;
        let cumulative = q
            .iter()
            .map(|p| {
                acc += p;
                acc
            })
            .collect();
        let log_miss = q.iter().map(|&q| (-q).ln_1p() as f32).collect();
        Sampler {
            q,
            cumulative,
            log_miss,
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.q.len()
    }

    /// Draws until `n` distinct words are in hand (`n` is capped at the vocabulary size), or
    /// until `64·n` draws (rare words can take very long to come up; the expected counts
    /// account for however many draws were made).
    pub fn draw(self: &Arc<Self>, n: usize, seed: u64) -> Negatives {
        let n = n.min(self.q.len());
        let max_tries = 64 * n as u64;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut seen = std::collections::HashSet::with_capacity(2 * n);
        let mut ids = Vec::with_capacity(n);
        let mut tries = 0u64;
        while ids.len() < n && tries < max_tries {
            let u: f64 = rng.random::<f64>() * self.cumulative[self.cumulative.len() - 1];
            let w = self
                .cumulative
                .partition_point(|&c| c <= u)
                .min(self.q.len() - 1) as u32;
            tries += 1;
            if seen.insert(w) {
                ids.push(w);
            }
        }
        Negatives {
            ids,
            tries,
            sampler: Arc::clone(self),
        }
    }

    /// `[V]`: `log(1 − Q(w))` of every word: [`Sampler::log_expected`] is
    /// `log(1 − exp(tries · log_miss[w]))`.
    pub fn log_miss(&self) -> &[f32] {
        &self.log_miss
    }

    /// `log E[times w appears in tries draws, counted once]` = `log(1 − (1 − Q(w))^tries)`.
    pub fn log_expected(&self, w: u32, tries: u64) -> f32 {
        let q = self.q[w as usize];
        (-(tries as f64 * (-q).ln_1p()).exp_m1()).ln() as f32
    }
}

impl Negatives {
    /// The log-Q correction [`Sampler::log_expected`] of every word of the vocabulary for this
    /// window's draws, `[V]`, computed on the host: the composed sampled softmax uploads it
    /// (the CubeCL kernels derive it from [`Sampler::log_miss`]; the fused CPU op looks up its
    /// words).
    pub fn log_expected_all(&self) -> Vec<f32> {
        (0..self.sampler.vocab_size() as u32)
            .map(|j| self.sampler.log_expected(j, self.tries))
            .collect()
    }
}

/// What the backward needs.
#[derive(Clone)]
pub struct Tape {
    /// `[H, S]`: the sampled words' output columns.
    w_neg: Vec<f32>,
    /// `[N, H]`: each row's target column.
    w_target: Vec<f32>,
    /// `[N, S]`: `exp(sampled logit − row's max over the sampled)`, 0 at accidental hits.
    e_neg: Vec<f32>,
    /// `[N]`: what turns a row of `e_neg` into probabilities.
    factor: Vec<f32>,
    /// `[N]`: the softmax's probability of the target.
    p_target: Vec<f32>,
}

/// Forward. `h [N, H]`, `w [H, V]`, `b [V]`, `targets [N]`. Returns the summed loss and the tape.
pub fn forward(h: MatRef, w: MatRef, b: &[f32], targets: &[u32], neg: &Negatives) -> (f64, Tape) {
    let (n, d, s) = (h.rows, h.cols, neg.ids.len());
    assert_eq!(w.rows, d, "h [N, {d}] and W [{}, V] disagree", w.rows);
    assert_eq!(
        neg.sampler.vocab_size(),
        w.cols,
        "the sampler's vocabulary is not W's"
    );
    if let Some(&bad) = targets.iter().find(|&&y| y as usize >= w.cols) {
        panic!(
            "target id {bad} is outside the vocabulary of {} words",
            w.cols
        );
    }
    let w_neg = gather_columns(w, &neg.ids);
    let w_target = transpose(&gather_columns(w, targets), d, n);
    let log_e = |id: u32| neg.sampler.log_expected(id, neg.tries);
    // Sampled logits [N, S]: bias and correction first, then the product accumulated on top.
    let neg_offset: Vec<f32> = neg.ids.iter().map(|&j| b[j as usize] - log_e(j)).collect();
    let mut e_neg = repeated_rows(Vec::new(), n, &neg_offset);
    matmul(&mut e_neg, s, h, MatRef::rows(&w_neg, d, s), true);
    let position: HashMap<u32, usize> = neg.ids.iter().enumerate().map(|(k, &j)| (j, k)).collect();
    // Row r: exponentials of the sampled logits in place (relative to their max), the target's
    // logit beside them; fills the row's factor and target probability, returns its loss.
    let row_loss = |r: usize, row: &mut [f32], factor: &mut f32, pt: &mut f32| -> f64 {
        let y = targets[r];
        let z_t = (0..d)
            .map(|i| h.data[h.offset + r * h.rs + i * h.cs] * w_target[r * d + i])
            .sum::<f32>()
            + b[y as usize]
            - log_e(y);
        let hit = position.get(&y).copied();
        if let Some(k) = hit {
            row[k] = f32::MIN; // finite, so the row's max stays finite
        }
        let (m_row, mut sum_row) = exp_in_place(row);
        if sum_row.is_nan() || !z_t.is_finite() {
            return f64::NAN;
        }
        if let Some(k) = hit {
            sum_row -= row[k] as f64;
            row[k] = 0.0;
        }
        let m = m_row.max(z_t);
        let row_scale = ((m_row - m) as f64).exp();
        let e_t = ((z_t - m) as f64).exp();
        let total = sum_row * row_scale + e_t;
        *factor = (row_scale / total) as f32;
        *pt = (e_t / total) as f32;
        m as f64 + total.ln() - z_t as f64
    };
    let mut factor = vec![0.0f32; n];
    let mut p_target = vec![0.0f32; n];
    let mut losses = vec![0.0f64; n];
    e_neg
        .par_chunks_mut(s.max(1))
        .zip(factor.par_iter_mut().zip(p_target.par_iter_mut()))
        .zip(losses.par_iter_mut())
        .enumerate()
        .for_each(|(r, ((row, (f, pt)), loss))| *loss = row_loss(r, row, f, pt));
    // Summed in row order, so that a run repeats exactly whatever the threads did.
    let loss: f64 = losses.iter().sum();
    (
        loss,
        Tape {
            w_neg,
            w_target,
            e_neg,
            factor,
            p_target,
        },
    )
}

/// Backward with each row's loss gradient `scale`. Returns dense `(dh [N, H], dw [H, V], db [V])`.
pub fn backward(
    scale: f32,
    h: MatRef,
    vocab: usize,
    targets: &[u32],
    neg: &Negatives,
    tape: Tape,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (n, d, s) = (h.rows, h.cols, neg.ids.len());
    // d loss / d z_j = factor·e_j for the sampled, p_t − 1 for the target, all times `scale`:
    // the row weights ride in the small operands, the big [N, S] matrix is only read.
    let weights: Vec<f32> = tape.factor.iter().map(|f| f * scale).collect();
    let d_target: Vec<f32> = tape.p_target.iter().map(|p| (p - 1.0) * scale).collect();
    let e_neg = MatRef::rows(&tape.e_neg, n, s);
    let mut dh = vec![0.0; n * d];
    matmul(
        &mut dh,
        d,
        e_neg,
        MatRef::rows(&tape.w_neg, d, s).t(),
        false,
    );
    for (r, row) in dh.chunks_exact_mut(d).enumerate() {
        let wt = &tape.w_target[r * d..(r + 1) * d];
        row.iter_mut()
            .zip(wt)
            .for_each(|(g, &x)| *g = *g * weights[r] + d_target[r] * x);
    }
    let h_scaled = rows_scaled(h, &weights);
    let mut dw_neg = vec![0.0; d * s];
    matmul(
        &mut dw_neg,
        s,
        MatRef::rows(&h_scaled, n, d).t(),
        e_neg,
        false,
    );
    // Scatter into the dense [H, V] gradient burn's parameter expects, row by row of W.
    let mut dw = vec![0.0; d * vocab];
    dw.par_chunks_mut(vocab).enumerate().for_each(|(i, row)| {
        for (k, &j) in neg.ids.iter().enumerate() {
            row[j as usize] += dw_neg[i * s + k];
        }
        for (r, &y) in targets.iter().enumerate() {
            row[y as usize] += d_target[r] * h.data[h.offset + r * h.rs + i * h.cs];
        }
    });
    let mut db = vec![0.0; vocab];
    for (k, sum) in weighted_column_sums(&tape.e_neg, s, &weights)
        .into_iter()
        .enumerate()
    {
        db[neg.ids[k] as usize] += sum;
    }
    for (r, &y) in targets.iter().enumerate() {
        db[y as usize] += d_target[r];
    }
    (dh, dw, db)
}

/// `[H, ids.len()]`: columns `ids` of `w`, gathered one row of `w` at a time (each row stays in
/// cache while its columns are picked).
fn gather_columns(w: MatRef, ids: &[u32]) -> Vec<f32> {
    let k = ids.len();
    let mut out = vec![0.0; w.rows * k];
    out.par_chunks_mut(k.max(1))
        .enumerate()
        .for_each(|(i, row)| {
            let base = w.offset + i * w.rs;
            for (o, &j) in row.iter_mut().zip(ids) {
                *o = w.data[base + j as usize * w.cs];
            }
        });
    out
}

/// `[cols, rows]` from row-major `[rows, cols]`.
fn transpose(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0; m.len()];
    for i in 0..rows {
        for j in 0..cols {
            t[j * rows + i] = m[i * cols + j];
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastsoftmax_infer::kernels::seeded_values;

    /// The sampled loss in f64 straight from its definition.
    fn reference(h: &[f32], w: &[f32], b: &[f32], y: &[u32], neg: &Negatives, d: usize) -> f64 {
        let v = b.len();
        let z = |r: usize, j: u32| {
            let j = j as usize;
            (0..d)
                .map(|i| (h[r * d + i] * w[i * v + j]) as f64)
                .sum::<f64>()
                + b[j] as f64
                - neg.sampler.log_expected(j as u32, neg.tries) as f64
        };
        (0..y.len())
            .map(|r| {
                let zt = z(r, y[r]);
                let zs: Vec<f64> = neg
                    .ids
                    .iter()
                    .filter(|&&j| j != y[r])
                    .map(|&j| z(r, j))
                    .collect();
                let m = zs.iter().cloned().fold(zt, f64::max);
                m + ((zt - m).exp() + zs.iter().map(|x| (x - m).exp()).sum::<f64>()).ln() - zt
            })
            .sum()
    }

    #[test]
    fn loss_and_gradients_match_the_definition() {
        let (n, d, v) = (4, 5, 30);
        let counts: Vec<u64> = (0..v as u64).map(|i| 100 / (i + 1)).collect();
        let sampler = Arc::new(Sampler::new(&counts, 0.75));
        let neg = sampler.draw(8, 42);
        let h = seeded_values(n * d, 1);
        let w = seeded_values(d * v, 2);
        let b = seeded_values(v, 3);
        // Row 0's target is among the negatives: an accidental hit.
        let y = [neg.ids[3], 29, 7, 0];
        let (hm, wm) = (MatRef::rows(&h, n, d), MatRef::rows(&w, d, v));
        let (loss, tape) = forward(hm, wm, &b, &y, &neg);
        let want = reference(&h, &w, &b, &y, &neg, d);
        assert!((loss - want).abs() < 1e-4, "{loss} vs {want}");
        let (dh, dw, db) = backward(1.0, hm, v, &y, &neg, tape);
        let eps = 1e-2f32;
        let numeric = |f: &dyn Fn(f32) -> f64| (f(eps) - f(-eps)) / (2.0 * eps as f64);
        for k in [0, 7, 19] {
            let g = numeric(&|e| {
                let mut h2 = h.clone();
                h2[k] += e;
                reference(&h2, &w, &b, &y, &neg, d)
            });
            assert!((dh[k] as f64 - g).abs() < 1e-3, "dh[{k}] {} vs {g}", dh[k]);
        }
        // A target column, a sampled column, and an untouched one (gradient 0).
        let untouched = (0..v as u32)
            .find(|j| !neg.ids.contains(j) && !y.contains(j))
            .unwrap();
        for col in [y[1], neg.ids[0], untouched] {
            for i in [0, 4] {
                let k = i * v + col as usize;
                let g = numeric(&|e| {
                    let mut w2 = w.clone();
                    w2[k] += e;
                    reference(&h, &w2, &b, &y, &neg, d)
                });
                assert!((dw[k] as f64 - g).abs() < 1e-3, "dw[{k}] {} vs {g}", dw[k]);
            }
            let g = numeric(&|e| {
                let mut b2 = b.clone();
                b2[col as usize] += e;
                reference(&h, &w, &b2, &y, &neg, d)
            });
            assert!(
                (db[col as usize] as f64 - g).abs() < 1e-3,
                "db[{col}] {} vs {g}",
                db[col as usize]
            );
        }
    }

    #[test]
    fn draws_are_distinct_seeded_and_follow_the_counts() {
        let counts: Vec<u64> = (0..1000u64).map(|i| 10_000 / (i + 1)).collect();
        let sampler = Arc::new(Sampler::new(&counts, 1.0));
        let a = sampler.draw(100, 7);
        assert_eq!(a.ids, sampler.draw(100, 7).ids);
        let mut sorted = a.ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 100);
        assert!(a.tries >= 100);
        // Frequent words are drawn far more often than rare ones.
        assert!(
            a.ids.iter().filter(|&&w| w < 50).count() > a.ids.iter().filter(|&&w| w >= 500).count()
        );
        // Expected counts: near 1 for the most frequent word, far below for the rarest.
        assert!(sampler.log_expected(0, a.tries) > -0.1);
        assert!(sampler.log_expected(999, a.tries) < -1.0);
        // Asking for more than the vocabulary draws all of it.
        assert_eq!(
            Arc::new(Sampler::new(&[3, 2, 1], 0.75))
                .draw(10, 1)
                .ids
                .len(),
            3
        );
    }
}
