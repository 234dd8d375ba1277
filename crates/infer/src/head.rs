//! The interfaces: [`SoftmaxHead`], which every fast softmax implements (it scores words from
//! the language model's context vector), and [`Predictor`], what `bench`, `compare` and
//! `predict` run: anything that predicts the next words from a [`Context`] — every softmax head,
//! and predictors that read the previous words instead (the candidate attention predictor).

use crate::error::{Error, Result};
use crate::topk::{Scored, TopK};

/// What a predictor may read of the text so far.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The language model's context vector `[d]` after the last word read.
    pub h: &'a [f32],
    /// The word ids read so far, oldest first (the last one is the current word); predictors
    /// use the tail they need.
    pub history: &'a [u32],
}

/// Predicts the next word's top-k from a [`Context`]. Every [`SoftmaxHead`] is one (it reads
/// `h`); the query methods never allocate and never fail once [`check_context`] passed.
pub trait Predictor: Send + Sync {
    /// Short name, as selected with `bench --heads NAME`.
    fn name(&self) -> &str;
    fn vocab_size(&self) -> usize;
    /// Width of `Context::h` it reads; 0 when it ignores the language model (an app can then
    /// skip the LM step altogether).
    fn context_width(&self) -> usize;
    /// Previous words it reads from `Context::history` (0 for softmax heads).
    fn history_len(&self) -> usize {
        0
    }

    /// Best `k` words for `ctx` into `out`, best first.
    fn predict_into(&self, ctx: Context<'_>, k: usize, out: &mut TopK);

    /// Best `k` words for each context of a batch: `hs` is `[n, d]` row-major (the contexts'
    /// `h`), `histories[i]` the history of context `i`. The default loops over
    /// [`Self::predict_into`].
    fn predict_batch(&self, hs: &[f32], histories: &[&[u32]], k: usize, out: &mut [TopK]) {
        let d = self.context_width();
        for (i, (o, history)) in out.iter_mut().zip(histories).enumerate() {
            let h = if d == 0 {
                &[][..]
            } else {
                &hs[i * d..(i + 1) * d]
            };
            self.predict_into(Context { h, history }, k, o);
        }
    }

    /// Multiply-adds this predictor spends on `ctx`, in units of one length-`d` dot product of
    /// the language model's output layer (the full softmax spends `vocab_size()`).
    fn cost(&self, ctx: Context<'_>) -> usize;

    /// Checked, allocating convenience around [`Self::predict_into`].
    fn predict(&self, ctx: Context<'_>, k: usize) -> Result<Vec<Scored>> {
        check_context(self, ctx, k)?;
        let mut out = TopK::new(k);
        self.predict_into(ctx, k, &mut out);
        Ok(out.as_slice().to_vec())
    }
}

/// Validates a context for `p`: `h` of the width it reads (finite), enough history, and
/// `1 <= k <= vocab`.
pub fn check_context<P: Predictor + ?Sized>(p: &P, ctx: Context<'_>, k: usize) -> Result<()> {
    let d = p.context_width();
    if d > 0 {
        check_query(ctx.h, d, k, p.vocab_size())?;
    } else {
        check_k(k, p.vocab_size())?;
    }
    if ctx.history.is_empty() && p.history_len() > 0 {
        return Err(Error::Invalid(format!(
            "{} predicts from the previous words, but none were given; pass the text read so far",
            p.name()
        )));
    }
    if let Some(&id) = ctx
        .history
        .iter()
        .find(|&&id| id as usize >= p.vocab_size())
    {
        return Err(Error::Invalid(format!(
            "word id {id} in the history is outside the vocabulary of {}; encode the text with the model's vocabulary",
            p.vocab_size()
        )));
    }
    Ok(())
}

impl<T: SoftmaxHead> Predictor for T {
    fn name(&self) -> &str {
        SoftmaxHead::name(self)
    }
    fn vocab_size(&self) -> usize {
        SoftmaxHead::vocab_size(self)
    }
    fn context_width(&self) -> usize {
        self.dim()
    }
    fn predict_into(&self, ctx: Context<'_>, k: usize, out: &mut TopK) {
        self.top_k_into(ctx.h, k, out)
    }
    fn predict_batch(&self, hs: &[f32], _histories: &[&[u32]], k: usize, out: &mut [TopK]) {
        self.top_k_batch(hs, k, out)
    }
    fn cost(&self, ctx: Context<'_>) -> usize {
        SoftmaxHead::cost(self, ctx.h)
    }
}

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
