//! A rank-`r` approximation of the output layer from its SVD: `W ≈ W V_r V_rᵀ`, where `V_r`
//! `[d, r]` holds the top right-singular vectors (eigenvectors of `WᵀW`). Approximate logits
//! cost `r·d + vocab·r` multiply-adds instead of `vocab·d`. Screening heads use them for the
//! words outside their candidate set when a whole distribution is needed (perplexity, the L2S
//! paper's Table 6); SVD-softmax uses them as its preview.

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::full::FullHead;
use crate::kernels::PackedMatrix;

/// Approximate logits `(W V_r)(V_rᵀ h) + b` for all words.
#[derive(Debug, Clone)]
pub struct LowRank {
    /// `[r, d]`: `V_rᵀ`, zero bias.
    proj: PackedMatrix,
    /// `[vocab, r]`: `W V_r`, with the output bias.
    rows: PackedMatrix,
}

impl LowRank {
    /// The best rank-`rank` approximation of `full`'s weights (`1 ≤ rank ≤ d`).
    pub fn new(full: &FullHead, rank: usize) -> Result<Self> {
        let (d, vocab) = (full.dim(), full.vocab_size());
        if rank == 0 || rank > d {
            return Err(Error::Invalid(format!(
                "rank {rank} is out of range: choose 1 ≤ rank ≤ {d} (the context width)"
            )));
        }
        let m = full.matrix();
        let rows: Vec<Vec<f32>> = (0..vocab).map(|i| m.row(i)).collect();
        let vt = principal_directions(&rows.concat(), d, rank);
        let projected: Vec<f32> = rows
            .iter()
            .flat_map(|row| {
                vt.chunks_exact(d)
                    .map(|v| crate::kernels::dot_naive(v, row))
                    .collect::<Vec<_>>()
            })
            .collect();
        let bias: Vec<f32> = (0..vocab).map(|i| m.bias(i)).collect();
        Ok(LowRank {
            proj: PackedMatrix::new(&vt, &vec![0.0; rank], d, None),
            rows: PackedMatrix::new(&projected, &bias, rank, None),
        })
    }

    pub fn rank(&self) -> usize {
        self.proj.n_rows()
    }

    /// Approximate logits of every word into `out` (`[vocab]`); `q` is scratch `[rank]`.
    pub fn logits_into(&self, h: &[f32], q: &mut [f32], out: &mut [f32]) {
        self.proj.logits_into(h, q);
        self.rows.logits_into(q, out);
    }

    /// Offers every word's approximate logit to `out` (which the caller has reset); `q` is
    /// scratch `[rank]`.
    pub fn scan_into(&self, h: &[f32], q: &mut [f32], out: &mut crate::topk::TopK) {
        self.proj.logits_into(h, q);
        self.rows.scan_into(q, out);
    }

    /// Multiply-adds per query, in units of one length-`d` dot product.
    pub fn cost(&self) -> f64 {
        let (r, d) = (self.rank() as f64, self.proj.dim() as f64);
        r + self.rows.n_rows() as f64 * r / d
    }
}

/// The top `r` right-singular vectors of `rows` `[n, d]` (eigenvectors of `WᵀW`, by decreasing
/// eigenvalue) as the rows of `[r, d]`: the projection that keeps most of the rows' energy.
pub fn principal_directions(rows: &[f32], d: usize, r: usize) -> Vec<f32> {
    debug_assert!(r <= d && rows.len().is_multiple_of(d));
    // Gram matrix WᵀW [d, d] in f64.
    let mut gram = vec![0.0f64; d * d];
    for row in rows.chunks_exact(d) {
        for a in 0..d {
            let ra = row[a] as f64;
            for b in a..d {
                gram[a * d + b] += ra * row[b] as f64;
            }
        }
    }
    for a in 0..d {
        for b in 0..a {
            gram[a * d + b] = gram[b * d + a];
        }
    }
    let (values, vectors) = symmetric_eigen(gram, d);
    let mut order: Vec<usize> = (0..d).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    // Eigenvector `order[c]` is column order[c] of `vectors`.
    let vectors = &vectors;
    order[..r]
        .iter()
        .flat_map(|&c| (0..d).map(move |j| vectors[j * d + c] as f32))
        .collect()
}

/// Eigen-decomposition of the symmetric `a` `[n, n]` (row-major) by cyclic Jacobi rotations.
/// Returns the eigenvalues and the eigenvectors as the columns of `[n, n]`.
pub fn symmetric_eigen(mut a: Vec<f64>, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = vec![0.0f64; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    let scale: f64 = a
        .iter()
        .map(|x| x * x)
        .sum::<f64>()
        .sqrt()
        .max(f64::MIN_POSITIVE);
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|p| (0..n).filter(move |&q| q != p).map(move |q| (p, q)))
            .map(|(p, q)| a[p * n + q] * a[p * n + q])
            .sum::<f64>()
            .sqrt();
        if off <= 1e-14 * scale {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq.abs() <= 1e-300 {
                    continue;
                }
                // Rotation angle that zeroes a[p][q] (Golub & Van Loan 8.4).
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let (akp, akq) = (a[k * n + p], a[k * n + q]);
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[p * n + k], a[q * n + k]);
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jacobi_recovers_a_known_spectrum() {
        // A = Q diag(5, 2, -1) Qᵀ with Q a rotation.
        let (c, s) = (0.6f64, 0.8f64);
        let q = [c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0];
        let lam = [5.0, 2.0, -1.0];
        let mut a = vec![0.0; 9];
        for i in 0..3 {
            for j in 0..3 {
                a[i * 3 + j] = (0..3).map(|k| q[i * 3 + k] * lam[k] * q[j * 3 + k]).sum();
            }
        }
        let (vals, vecs) = symmetric_eigen(a.clone(), 3);
        let mut sorted = vals.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        for (x, y) in sorted.iter().zip([5.0, 2.0, -1.0]) {
            assert!((x - y).abs() < 1e-10);
        }
        // A v = λ v for every column.
        for col in 0..3 {
            for i in 0..3 {
                let av: f64 = (0..3).map(|k| a[i * 3 + k] * vecs[k * 3 + col]).sum();
                assert!((av - vals[col] * vecs[i * 3 + col]).abs() < 1e-10);
            }
        }
    }

    #[test]
    fn full_rank_reproduces_the_logits_and_low_rank_is_close() {
        let (vocab, d) = (60, 6);
        // Rank-2 weights plus a little noise.
        let w: Vec<f32> = (0..vocab * d)
            .map(|i| {
                let (r, j) = (i / d, i % d);
                (r as f32 * 0.1).sin() * (j as f32 + 1.0)
                    + (r as f32 * 0.3).cos() * (d - j) as f32
                    + 0.001 * ((i * 7919 % 13) as f32)
            })
            .collect();
        let b: Vec<f32> = (0..vocab).map(|i| i as f32 * 0.01).collect();
        let full = FullHead::new(&w, &b, d).unwrap();
        let h = [0.3, -0.2, 0.5, 0.1, -0.4, 0.25];
        let mut exact = vec![0.0; vocab];
        full.logits_into(&h, &mut exact);
        for (rank, tol) in [(d, 1e-3), (2, 0.05)] {
            let lr = LowRank::new(&full, rank).unwrap();
            let mut q = vec![0.0; rank];
            let mut approx = vec![0.0; vocab];
            lr.logits_into(&h, &mut q, &mut approx);
            for (a, e) in approx.iter().zip(&exact) {
                assert!((a - e).abs() < tol, "rank {rank}: {a} vs {e}");
            }
        }
        assert!(LowRank::new(&full, 0).is_err());
        assert!(LowRank::new(&full, d + 1).is_err());
    }
}
