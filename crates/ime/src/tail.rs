//! The tail estimate of the selected softmax: `ln Σ_{w ∉ S} exp(logit_w(h)) ≈ a·h + c`, where
//! `S` = `<eos>`, `<unk>` and the `top` most frequent words (the fixed sample of
//! [`crate::ivs::Sample::Top`]).
//!
//! Vocabulary selection normalises over the lattice's words and `S` only, so every word's
//! probability is too high by the mass of the words left out. That mass varies from context to
//! context (on the shipped model, `ln Z − ln Z_S` has a standard deviation of 1.6 over KWDLC
//! contexts), which reorders paths whose contexts differ. A least-squares line in the context
//! predicts it to a few tenths (fitted on training text, `ime fit-tail`), for one dot product
//! per new state: the normaliser becomes `Z_S + max(estimate, Σ lattice words outside S)`.

use std::path::{Path, PathBuf};

use fastsoftmax_infer::files::write_atomic;
use fastsoftmax_infer::{Error, LanguageModel, Result};

/// `a·h + c` for the words outside the top `top` (and `<eos>`, `<unk>`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TailEstimate {
    pub top: usize,
    /// `a`, `[d]`.
    pub weights: Vec<f32>,
    /// `c`.
    pub bias: f32,
    /// The output layer's fingerprint: an estimate is never used with another model.
    pub fingerprint: String,
    /// How it was fitted: contexts, the root-mean-square error on them, and the error of the
    /// best constant in its place (the spread the line removes).
    pub contexts: usize,
    pub rmse: f64,
    #[serde(default)]
    pub rmse_constant: f64,
}

/// The estimate's file in a converter folder.
pub fn tail_file(dir: &Path, top: usize) -> PathBuf {
    dir.join(format!("tail-{top}.json"))
}

/// Words of the fixed sample: `<eos>`, `<unk>` and ids below `top`.
fn in_sample(lm: &LanguageModel, top: usize, w: usize) -> bool {
    w < top || w == lm.vocab().eos() as usize || w == lm.vocab().unk() as usize
}

impl TailEstimate {
    /// `ln Σ exp` of the words outside the sample at context `h`, as estimated.
    pub fn log_z(&self, h: &[f32]) -> f64 {
        self.weights
            .iter()
            .zip(h)
            .map(|(&a, &x)| a as f64 * x as f64)
            .sum::<f64>()
            + self.bias as f64
    }

    /// Least squares (with a little ridge) of the exact tail `ln Σ exp` on the contexts the
    /// model reaches over `sentences` (word ids, each read from the sentence start).
    pub fn fit(lm: &LanguageModel, top: usize, sentences: &[Vec<u32>]) -> Result<Self> {
        let v = lm.vocab().len();
        if top == 0 || top >= v {
            return Err(Error::Invalid(format!(
                "the fixed sample must hold 1 to {} words, not {top}",
                v - 1
            )));
        }
        // Contexts: after the start, then after every word.
        let mut contexts: Vec<f32> = Vec::new();
        for sentence in sentences {
            let mut s = lm.new_state();
            lm.step(lm.vocab().eos(), &mut s)?;
            contexts.extend_from_slice(s.context());
            for &w in sentence {
                lm.step(w, &mut s)?;
                contexts.extend_from_slice(s.context());
            }
        }
        let head = lm.full_head().matrix();
        let d = head.dim();
        let n = contexts.len() / d;
        if n < 2 * d {
            return Err(Error::Invalid(format!(
                "{n} contexts are too few to fit {d} weights: give more sentences (at least {})",
                2 * d
            )));
        }
        // Normal equations of [h, 1]: (XᵀX + λI) w = Xᵀy.
        let k = d + 1;
        let mut xtx = vec![0.0f64; k * k];
        let mut xty = vec![0.0f64; k];
        let mut ys = Vec::with_capacity(n);
        const BATCH: usize = 64;
        let mut logits = vec![0.0f32; BATCH * v];
        let outside: Vec<usize> = (0..v).filter(|&w| !in_sample(lm, top, w)).collect();
        let mut tail = Vec::with_capacity(outside.len());
        for hs in contexts.chunks(BATCH * d) {
            let m = hs.len() / d;
            head.logits_batch(hs, &mut logits[..m * v]);
            for (q, row) in logits[..m * v].chunks_exact(v).enumerate() {
                tail.clear();
                tail.extend(outside.iter().map(|&w| row[w]));
                let y = fastsoftmax_infer::log_sum_exp(&tail);
                ys.push(y);
                let h = &hs[q * d..(q + 1) * d];
                let x = |i: usize| if i < d { h[i] as f64 } else { 1.0 };
                for i in 0..k {
                    let xi = x(i);
                    xty[i] += xi * y;
                    for j in 0..=i {
                        xtx[i * k + j] += xi * x(j);
                    }
                }
            }
        }
        let ridge = 1e-3 * n as f64 / k as f64;
        for i in 0..d {
            xtx[i * k + i] += ridge;
        }
        let w = solve_spd(&mut xtx, &xty, k)
            .ok_or_else(|| Error::Invalid("the contexts do not determine the estimate".into()))?;
        let mut est = TailEstimate {
            top,
            weights: w[..d].iter().map(|&x| x as f32).collect(),
            bias: w[d] as f32,
            fingerprint: format!("{:016x}", head.fingerprint()),
            contexts: n,
            rmse: 0.0,
            rmse_constant: 0.0,
        };
        let se: f64 = contexts
            .chunks_exact(d)
            .zip(&ys)
            .map(|(h, y)| (est.log_z(h) - y).powi(2))
            .sum();
        est.rmse = (se / n as f64).sqrt();
        let mean = ys.iter().sum::<f64>() / n as f64;
        est.rmse_constant = (ys.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        Ok(est)
    }

    /// Writes `DIR/tail-TOP.json` (atomically).
    pub fn save(&self, dir: &Path) -> Result<PathBuf> {
        let path = tail_file(dir, self.top);
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::Invalid(format!("tail estimate: {e}")))?;
        write_atomic(&path, text.as_bytes())?;
        Ok(path)
    }

    /// Reads `DIR/tail-TOP.json` and checks it belongs to `lm`.
    pub fn load(dir: &Path, top: usize, lm: &LanguageModel) -> Result<Self> {
        let path = tail_file(dir, top);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            Error::Invalid(format!(
                "{}: {e}; fit it with `fastsoftmax ime fit-tail --model {} --samples {top}`",
                path.display(),
                dir.display()
            ))
        })?;
        let est: TailEstimate = serde_json::from_str(&text)
            .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
        let want = format!("{:016x}", lm.full_head().matrix().fingerprint());
        if est.fingerprint != want || est.top != top {
            return Err(Error::Invalid(format!(
                "{} was fitted for another language model: fit it again with `fastsoftmax ime \
                 fit-tail --model {} --samples {top}`",
                path.display(),
                dir.display()
            )));
        }
        if est.weights.len() != lm.full_head().matrix().dim() || !est.bias.is_finite() {
            return Err(Error::Invalid(format!(
                "{}: {} weights for a model of width {}",
                path.display(),
                est.weights.len(),
                lm.full_head().matrix().dim()
            )));
        }
        Ok(est)
    }
}

/// Solves `A x = b` for a symmetric positive definite `A` (`[k, k]`, lower triangle filled)
/// by Cholesky; `None` when `A` is not positive definite.
fn solve_spd(a: &mut [f64], b: &[f64], k: usize) -> Option<Vec<f64>> {
    for j in 0..k {
        let mut diag = a[j * k + j];
        for p in 0..j {
            diag -= a[j * k + p] * a[j * k + p];
        }
        if diag <= 0.0 || !diag.is_finite() {
            return None;
        }
        let l = diag.sqrt();
        a[j * k + j] = l;
        for i in j + 1..k {
            let mut s = a[i * k + j];
            for p in 0..j {
                s -= a[i * k + p] * a[j * k + p];
            }
            a[i * k + j] = s / l;
        }
    }
    // L y = b, then Lᵀ x = y.
    let mut y = b.to_vec();
    for i in 0..k {
        for p in 0..i {
            y[i] -= a[i * k + p] * y[p];
        }
        y[i] /= a[i * k + i];
    }
    for i in (0..k).rev() {
        for p in i + 1..k {
            y[i] -= a[p * k + i] * y[p];
        }
        y[i] /= a[i * k + i];
    }
    Some(y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_solves_a_small_system() {
        // A = [[4, 2], [2, 3]], b = [2, 1] → x = [0.5, 0].
        let mut a = vec![4.0, 0.0, 2.0, 3.0];
        let x = solve_spd(&mut a, &[2.0, 1.0], 2).unwrap();
        assert!((x[0] - 0.5).abs() < 1e-12 && x[1].abs() < 1e-12, "{x:?}");
        let mut singular = vec![1.0, 0.0, 1.0, 1.0];
        assert!(solve_spd(&mut singular, &[1.0, 1.0], 2).is_none());
    }
}
