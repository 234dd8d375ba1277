//! The one interface every softmax head implements.

use crate::error::{Error, Result};
use crate::topk::{Scored, TopK};

/// A head that returns the `k` highest-logit words for a context vector.
///
/// Heads are built (and validated) once; the query methods never allocate and never fail:
/// their preconditions (`h.len() == dim()`, `1 <= k <= vocab_size()`) are checked with
/// [`check_query`] at the boundary and only debug-asserted inside.
pub trait SoftmaxHead: Send + Sync {
    /// Short name, as selected with `bench --heads NAME`.
    fn name(&self) -> &str;
    /// Width `d` of the context vector.
    fn dim(&self) -> usize;
    fn vocab_size(&self) -> usize;

    /// Best `k` words for context `h` (`[d]`) into `out`, best first.
    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK);

    /// Best `k` words for each context of `hs` (`[n, d]` row-major) into `out` (`[n]`).
    /// The default loops over [`Self::top_k_into`]; heads with a faster batched path override it.
    fn top_k_batch(&self, hs: &[f32], k: usize, out: &mut [TopK]) {
        let d = self.dim();
        for (h, o) in hs.chunks_exact(d).zip(out.iter_mut()) {
            self.top_k_into(h, k, o);
        }
    }

    /// Dot products (of length `d`) this head spends on context `h`: the FLOP cost reported
    /// beside wall-clock time. The full softmax spends `vocab_size()`.
    fn cost(&self, _h: &[f32]) -> usize {
        self.vocab_size()
    }

    /// Checked, allocating convenience around [`Self::top_k_into`].
    fn top_k(&self, h: &[f32], k: usize) -> Result<Vec<Scored>> {
        check_query(h, self.dim(), k, self.vocab_size())?;
        let mut out = TopK::new(k);
        self.top_k_into(h, k, &mut out);
        Ok(out.as_slice().to_vec())
    }
}

/// Validates a query: context length, finite values, `1 <= k <= vocab`.
pub fn check_query(h: &[f32], dim: usize, k: usize, vocab: usize) -> Result<()> {
    check_k(k, vocab)?;
    if h.len() != dim {
        return Err(Error::Invalid(format!(
            "context has {} values but the head expects {dim}; pass the language model's last hidden state",
            h.len()
        )));
    }
    if let Some(i) = h.iter().position(|x| !x.is_finite()) {
        return Err(Error::Invalid(format!(
            "context value {i} is {}; the language model state is corrupt (NaN/inf)",
            h[i]
        )));
    }
    Ok(())
}

/// `k` must be in `1..=vocab`.
pub fn check_k(k: usize, vocab: usize) -> Result<()> {
    if k == 0 || k > vocab {
        return Err(Error::Invalid(format!(
            "k = {k} is out of range: choose 1 ≤ k ≤ {vocab} (the vocabulary size)"
        )));
    }
    Ok(())
}
