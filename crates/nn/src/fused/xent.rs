//! The output layer and its softmax cross-entropy as one op: `logits = h·W + b`, row n's loss is
//! `logsumexp(logits_n) − logits_n[y_n]`, plus `α·logsumexp(logits_n)²` with self-normalisation
//! (Devlin et al. 2014: the model learns `log Z ≈ 0`, so an engine may skip the normaliser).
//!
//! The forward writes `exp(logit − row max)` into one `[N, V]` matrix and keeps each row's
//! `1/Σ`; the normalisation and the backward's scale ride in the small operands of the
//! backward's products (`diag(s)·h`, and a row scale of `dh`), so the big matrix is written
//! once and read by the products, never scaled in a pass of its own. burn's chain of max, sub,
//! exp, sum, log, gather and their gradients, each allocating `[N, V]`, is gone.
//!
//! (Measured and dropped: cutting the vocabulary into one block per thread with
//! single-threaded products — a core's full speed on each block — was no faster on 2 cores
//! than `gemm`'s own split: 31.9 ms forward + backward both ways.)

use rayon::prelude::*;

use super::gemm::{matmul, MatRef};
use super::vector::{exp_in_place, repeated_rows, rows_scaled, weighted_column_sums};

/// What the backward needs from the forward.
#[derive(Clone)]
pub struct Tape {
    /// `[N, V]`: `exp(logit − row max)`.
    exps: Vec<f32>,
    /// `[N]`: `1 / Σ_row exps`, which turns a row of `exps` into probabilities.
    inv_sums: Vec<f32>,
    /// `[N]`: `log Z` of each row, and the self-normalisation weight `α`.
    log_z: Vec<f32>,
    alpha: f32,
}

/// Forward. `h [N, H]`, `w [H, V]`, `b [V]`, `targets [N]` (each `< V`), `alpha` the
/// self-normalisation weight (0: plain cross-entropy). Returns the summed loss (f64) and the
/// tape.
pub fn forward(h: MatRef, w: MatRef, b: &[f32], targets: &[u32], alpha: f32) -> (f64, Tape) {
    check(h, w, b, targets);
    let (n, v) = (h.rows, w.cols);
    // The bias in every row, then the product accumulated on top.
    let mut exps = repeated_rows(take_spare(), n, b);
    matmul(&mut exps, v, h, w, true);
    let mut inv_sums = vec![0.0f32; n];
    let mut log_z = vec![0.0f32; n];
    let mut losses = vec![0.0f64; n];
    exps.par_chunks_mut(v)
        .zip(inv_sums.par_iter_mut().zip(losses.par_iter_mut()))
        .zip(log_z.par_iter_mut().zip(targets.par_iter()))
        .for_each(|((row, (inv, loss)), (lz, &y))| {
            let target = row[y as usize];
            let (max, sum) = exp_in_place(row);
            *inv = (1.0 / sum) as f32;
            let z = max as f64 + sum.ln();
            *lz = z as f32;
            *loss = z - target as f64 + alpha as f64 * z * z;
        });
    // Summed in row order, so that a run repeats exactly whatever the threads did.
    let tape = Tape {
        exps,
        inv_sums,
        log_z,
        alpha,
    };
    (losses.iter().sum(), tape)
}

/// Backward with each row's loss gradient `scale` (`1/N` times the incoming gradient for a
/// mean). Returns `(dh [N, H], dw [H, V], db [V])`.
pub fn backward(
    scale: f32,
    h: MatRef,
    w: MatRef,
    targets: &[u32],
    tape: Tape,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (n, d, v) = (h.rows, h.cols, w.cols);
    let Tape {
        mut exps,
        inv_sums,
        log_z,
        alpha,
    } = tape;
    // dlogits = k·softmax − onehot, with k = 1 + 2α·log Z (1 without self-normalisation), is
    // diag(s)·(exps − onehot/(k·inv_sum)) with s = scale·k·inv_sum: the onehot goes into `exps`
    // (divided by the factor that multiplies it back), the diagonal into small operands. A k
    // within 1e-3 of 0 is held there (log Z = −1/(2α), where the two terms cancel).
    let k: Vec<f32> = log_z
        .iter()
        .map(|&z| {
            let k = 1.0 + 2.0 * alpha * z;
            if k.abs() < 1e-3 {
                1e-3f32.copysign(k)
            } else {
                k
            }
        })
        .collect();
    for (r, &y) in targets.iter().enumerate() {
        exps[r * v + y as usize] -= 1.0 / (inv_sums[r] * k[r]);
    }
    let s: Vec<f32> = inv_sums
        .iter()
        .zip(&k)
        .map(|(x, k)| x * scale * k)
        .collect();
    let e = MatRef::rows(&exps, n, v);
    let h_scaled = rows_scaled(h, &s);
    let mut dw = vec![0.0f32; d * v];
    matmul(&mut dw, v, MatRef::rows(&h_scaled, n, d).t(), e, false);
    let mut dh = vec![0.0f32; n * d];
    matmul(&mut dh, d, e, w.t(), false);
    for (row, s) in dh.chunks_exact_mut(d).zip(&s) {
        row.iter_mut().for_each(|x| *x *= s);
    }
    let db = weighted_column_sums(&exps, v, &s);
    recycle(exps);
    (dh, dw, db)
}

/// The `[N, V]` matrix is tens of megabytes; a fresh one per window costs a page fault per
/// 4 KiB. The last one is kept here and reused.
static SPARE: std::sync::Mutex<Vec<f32>> = std::sync::Mutex::new(Vec::new());

fn take_spare() -> Vec<f32> {
    std::mem::take(&mut *SPARE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Hands the matrix back for the next window (the forward without a backward calls this).
pub fn recycle(buf: Vec<f32>) {
    *SPARE.lock().unwrap_or_else(|e| e.into_inner()) = buf;
}

impl Tape {
    /// Gives the tape's buffer back for the next window.
    pub fn recycle(self) {
        recycle(self.exps);
    }
}

fn check(h: MatRef, w: MatRef, b: &[f32], targets: &[u32]) {
    assert_eq!(
        h.cols, w.rows,
        "h [N, {}] and W [{}, V] disagree",
        h.cols, w.rows
    );
    assert_eq!(b.len(), w.cols, "bias must be [V] = [{}]", w.cols);
    assert_eq!(targets.len(), h.rows, "one target per row of h");
    if let Some(&bad) = targets.iter().find(|&&y| y as usize >= w.cols) {
        panic!(
            "target id {bad} is outside the vocabulary of {} words",
            w.cols
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastsoftmax_infer::kernels::seeded_values;

    #[test]
    fn loss_and_gradients_match_the_definition() {
        for alpha in [0.0, 0.1] {
            check_gradients(alpha);
        }
    }

    fn check_gradients(alpha: f32) {
        let (n, d, v) = (3, 4, 37);
        let h = seeded_values(n * d, 1);
        let w = seeded_values(d * v, 2);
        let b = seeded_values(v, 3);
        let y = [0u32, 36, 17];
        let logits = |h: &[f32], w: &[f32], b: &[f32]| -> Vec<f64> {
            (0..n * v)
                .map(|i| {
                    let (r, c) = (i / v, i % v);
                    b[c] as f64
                        + (0..d)
                            .map(|k| (h[r * d + k] * w[k * v + c]) as f64)
                            .sum::<f64>()
                })
                .collect()
        };
        let loss_of = |h: &[f32], w: &[f32], b: &[f32]| -> f64 {
            let l = logits(h, w, b);
            (0..n)
                .map(|r| {
                    let row = &l[r * v..(r + 1) * v];
                    let m = row.iter().cloned().fold(f64::MIN, f64::max);
                    let z = m + row.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
                    z - row[y[r] as usize] + alpha as f64 * z * z
                })
                .sum()
        };
        let (hm, wm) = (MatRef::rows(&h, n, d), MatRef::rows(&w, d, v));
        {
            let (loss, tape) = forward(hm, wm, &b, &y, alpha);
            assert!((loss - loss_of(&h, &w, &b)).abs() < 1e-4);
            let (dh, dw, db) = backward(1.0, hm, wm, &y, tape);
            // Central differences in f64 arithmetic on the f32 inputs.
            let eps = 1e-2;
            let numeric = |f: &dyn Fn(f32) -> f64| (f(eps) - f(-eps)) / (2.0 * eps as f64);
            for k in [0, 5, 11] {
                let g = numeric(&|e| {
                    let mut h2 = h.clone();
                    h2[k] += e;
                    loss_of(&h2, &w, &b)
                });
                assert!((dh[k] as f64 - g).abs() < 1e-3, "dh[{k}] {} vs {g}", dh[k]);
            }
            for k in [0, 40, 147] {
                let g = numeric(&|e| {
                    let mut w2 = w.clone();
                    w2[k] += e;
                    loss_of(&h, &w2, &b)
                });
                assert!((dw[k] as f64 - g).abs() < 1e-3, "dw[{k}] {} vs {g}", dw[k]);
            }
            for k in [0, 17, 36] {
                let g = numeric(&|e| {
                    let mut b2 = b.clone();
                    b2[k] += e;
                    loss_of(&h, &w, &b2)
                });
                assert!((db[k] as f64 - g).abs() < 1e-3, "db[{k}] {} vs {g}", db[k]);
            }
        }
    }

    #[test]
    fn non_finite_logits_give_a_non_finite_loss() {
        let h = [1.0, 1.0];
        let w = [1.0, 2.0, 3.0, 4.0];
        for bias in [[f32::NAN, 0.0], [0.0, f32::NAN], [f32::INFINITY, 0.0]] {
            let (loss, _) = forward(
                MatRef::rows(&h, 1, 2),
                MatRef::rows(&w, 2, 2),
                &bias,
                &[1],
                0.0,
            );
            assert!(!loss.is_finite(), "bias {bias:?}");
        }
    }
}
