//! The reduction of maximum-inner-product search (the softmax's top-k) to nearest-neighbour
//! search (Bachrach et al. 2014), shared by the graph (`hnsw`), tree (`pca`) and hashing (`lsh`)
//! heads.
//!
//! The bias joins the weights as one more input, `x_i = [w_i, b_i]`, so a logit is the inner
//! product `x_i · [h, 1]`. Every row then gets one more coordinate that lifts it onto the sphere
//! of radius `φ = max_i ‖x_i‖`:
//!
//! ```text
//! row   r_i = [w_i, b_i, sqrt(φ² − ‖x_i‖²)]        ‖r_i‖ = φ for every i
//! query q   = [h, 1, 0]
//! ‖q − r_i‖² = ‖q‖² + φ² − 2 (w_i · h + b_i)
//! ```
//!
//! so the nearest row is the largest logit, and the k nearest are the top-k, in order. Because
//! every row has the same norm, angular methods (sign random projections, Neyshabur & Srebro
//! 2015's "simple LSH") work on the rows unchanged: `q · r_i` is the logit itself.

use crate::head::SoftmaxHead;
use crate::heads::full::FullHead;

/// The output layer as points on a sphere: `[vocab, d + 2]` row-major.
#[derive(Debug, Clone)]
pub struct Augmented {
    /// Width of a transformed row or query, `d + 2`.
    pub dim: usize,
    /// `[vocab, dim]`
    pub rows: Vec<f32>,
    /// The common norm of every row.
    pub radius: f32,
}

impl Augmented {
    pub fn new(full: &FullHead) -> Self {
        let (d, vocab) = (full.dim(), full.vocab_size());
        let m = full.matrix();
        let dim = d + 2;
        let mut rows = Vec::with_capacity(vocab * dim);
        let mut norms = Vec::with_capacity(vocab);
        for i in 0..vocab {
            let start = rows.len();
            rows.extend(m.row(i));
            rows.push(m.bias(i));
            // f64 so the lift of the longest rows is not lost to cancellation.
            norms.push(
                rows[start..]
                    .iter()
                    .map(|&x| x as f64 * x as f64)
                    .sum::<f64>(),
            );
            rows.push(0.0);
        }
        let phi2 = norms.iter().copied().fold(0.0f64, f64::max);
        for (i, n2) in norms.iter().enumerate() {
            rows[i * dim + dim - 1] = (phi2 - n2).max(0.0).sqrt() as f32;
        }
        Augmented {
            dim,
            rows,
            radius: phi2.sqrt() as f32,
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len() / self.dim
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Transformed row `i` (`[dim]`).
    pub fn row(&self, i: usize) -> &[f32] {
        &self.rows[i * self.dim..(i + 1) * self.dim]
    }

    /// The transformed query `[h, 1, 0]` into `out` (`[dim]`).
    pub fn query_into(&self, h: &[f32], out: &mut [f32]) {
        debug_assert_eq!(h.len() + 2, self.dim);
        out[..h.len()].copy_from_slice(h);
        out[h.len()] = 1.0;
        out[h.len() + 1] = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{dot, seeded_values as values};

    fn sq_dist(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
    }

    #[test]
    fn the_nearest_transformed_row_is_the_largest_logit() {
        let (v, d) = (500, 24);
        // Rows of very different norms, as in a trained output layer.
        let mut w = values(v * d, 11);
        for (i, x) in w.iter_mut().enumerate() {
            *x *= 1.0 + (i / d % 7) as f32;
        }
        let full = FullHead::new(&w, &values(v, 12), d).unwrap();
        let aug = Augmented::new(&full);
        assert_eq!((aug.dim, aug.len()), (d + 2, v));
        for i in 0..v {
            let n = dot(aug.row(i), aug.row(i)).sqrt();
            assert!((n - aug.radius).abs() < 1e-3 * aug.radius, "row {i}: {n}");
        }
        let mut q = vec![0.0; d + 2];
        for h in values(50 * d, 13).chunks(d) {
            aug.query_into(h, &mut q);
            // Logits are the inner products with the transformed query…
            let best = full.top_k(h, 5).unwrap();
            for s in &best {
                let ip = dot(aug.row(s.id as usize), &q);
                assert!((ip - s.logit).abs() < 1e-3 * (1.0 + s.logit.abs()));
            }
            // …and the nearest rows are the top-k, in order.
            let mut by_dist: Vec<(f32, u32)> = (0..v)
                .map(|i| (sq_dist(aug.row(i), &q), i as u32))
                .collect();
            by_dist.sort_by(|a, b| a.0.total_cmp(&b.0));
            let near: Vec<u32> = by_dist[..5].iter().map(|p| p.1).collect();
            let top: Vec<u32> = best.iter().map(|s| s.id).collect();
            assert_eq!(near, top);
        }
    }
}
