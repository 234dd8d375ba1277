//! The exact full softmax: every word's logit, then top-k. The baseline every speedup is
//! divided by, so it runs at the memory-bandwidth floor (one pass over the packed matrix).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::kernels::PackedMatrix;
use crate::topk::TopK;

/// Exact top-k over `W [vocab, d]` and `b [vocab]`.
#[derive(Debug, Clone)]
pub struct FullHead {
    /// Shared with the heads that fall back to it (cloning a head is cheap).
    matrix: Arc<PackedMatrix>,
}

impl FullHead {
    /// `weight` is row-major `[vocab, d]`, `bias` is `[vocab]`; all values must be finite.
    pub fn new(weight: &[f32], bias: &[f32], d: usize) -> Result<Self> {
        if d == 0
            || weight.is_empty()
            || !weight.len().is_multiple_of(d)
            || weight.len() / d != bias.len()
        {
            return Err(Error::Invalid(format!(
                "full head: weight has {} values and bias {}, which is not [vocab, {d}] and [vocab]",
                weight.len(),
                bias.len()
            )));
        }
        if weight.iter().chain(bias).any(|x| !x.is_finite()) {
            return Err(Error::Invalid(
                "full head: weights contain NaN or infinity".into(),
            ));
        }
        Ok(FullHead {
            matrix: Arc::new(PackedMatrix::new(weight, bias, d, None)),
        })
    }

    /// The packed output layer `[vocab, d]`.
    pub fn matrix(&self) -> &Arc<PackedMatrix> {
        &self.matrix
    }

    /// All logits `[vocab]` for context `h` (for perplexity).
    pub fn logits_into(&self, h: &[f32], out: &mut [f32]) {
        self.matrix.logits_into(h, out)
    }
}

impl AsRef<FullHead> for FullHead {
    fn as_ref(&self) -> &FullHead {
        self
    }
}

impl SoftmaxHead for FullHead {
    fn name(&self) -> &str {
        "full"
    }
    fn dim(&self) -> usize {
        self.matrix.dim()
    }
    fn vocab_size(&self) -> usize {
        self.matrix.n_rows()
    }
    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        out.reset(k);
        self.matrix.scan_into(h, out);
    }
    fn top_k_batch(&self, hs: &[f32], k: usize, out: &mut [TopK]) {
        for o in out.iter_mut() {
            o.reset(k);
        }
        self.matrix.scan_batch(hs, out);
    }
}

/// The naive reference: one dot product per word, then a full sort. For tests and benches.
#[derive(Debug, Clone)]
pub struct NaiveFullHead {
    weight: Vec<f32>,
    bias: Vec<f32>,
    d: usize,
}

impl NaiveFullHead {
    pub fn new(weight: &[f32], bias: &[f32], d: usize) -> Self {
        NaiveFullHead {
            weight: weight.to_vec(),
            bias: bias.to_vec(),
            d,
        }
    }
}

impl SoftmaxHead for NaiveFullHead {
    fn name(&self) -> &str {
        "full-naive"
    }
    fn dim(&self) -> usize {
        self.d
    }
    fn vocab_size(&self) -> usize {
        self.bias.len()
    }
    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        out.reset(k);
        for (i, row) in self.weight.chunks_exact(self.d).enumerate() {
            out.push(i as u32, crate::kernels::dot_naive(row, h) + self.bias[i]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optimized_and_naive_full_heads_agree() {
        let (v, d) = (1000, 64);
        let w: Vec<f32> = (0..v * d)
            .map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0)
            .collect();
        let b: Vec<f32> = (0..v).map(|i| (i % 13) as f32 * 0.01).collect();
        let fast = FullHead::new(&w, &b, d).unwrap();
        let naive = NaiveFullHead::new(&w, &b, d);
        let hs: Vec<f32> = (0..70 * d)
            .map(|i| ((i * 104729 % 997) as f32 / 498.0) - 1.0)
            .collect();
        let mut batch = vec![TopK::new(10); 70];
        fast.top_k_batch(&hs, 10, &mut batch);
        for (q, h) in hs.chunks(d).enumerate() {
            let a = fast.top_k(h, 10).unwrap();
            let b = naive.top_k(h, 10).unwrap();
            let ids = |s: &[crate::Scored]| s.iter().map(|x| x.id).collect::<Vec<_>>();
            assert_eq!(ids(&a), ids(&b));
            assert_eq!(ids(batch[q].as_slice()), ids(&b));
            for (x, y) in a.iter().zip(&b) {
                assert!((x.logit - y.logit).abs() < 1e-4);
            }
        }
    }

    #[test]
    fn bad_queries_are_errors() {
        let head = FullHead::new(&[1.0, 2.0, 3.0, 4.0], &[0.0, 0.0], 2).unwrap();
        assert!(head
            .top_k(&[1.0, 1.0], 0)
            .unwrap_err()
            .to_string()
            .contains("k = 0"));
        assert!(head
            .top_k(&[1.0, 1.0], 3)
            .unwrap_err()
            .to_string()
            .contains("1 ≤ k ≤ 2"));
        assert!(head
            .top_k(&[1.0], 1)
            .unwrap_err()
            .to_string()
            .contains("expects 2"));
        assert!(head
            .top_k(&[f32::NAN, 1.0], 1)
            .unwrap_err()
            .to_string()
            .contains("NaN"));
        assert!(FullHead::new(&[1.0, f32::NAN], &[0.0], 2).is_err());
        assert!(FullHead::new(&[1.0, 2.0, 3.0], &[0.0], 2).is_err());
    }
}
