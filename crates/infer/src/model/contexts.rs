//! The context vectors of a text: the LM run over it as one stream, each position's context
//! with the word that actually followed (what heads are measured and trained on).

use crate::error::{Error, Result};
use crate::head::Context;
use crate::model::lm::LanguageModel;

/// Context vectors and the word that actually followed each.
#[derive(Debug, Clone, Default)]
pub struct Contexts {
    pub d: usize,
    /// [n, d]
    pub hs: Vec<f32>,
    /// `[n]`
    pub next: Vec<u32>,
    /// The words read, when the contexts are the consecutive positions of one stream: context
    /// `i` has read `history[..=i]`. Empty when contexts were sampled (training data).
    pub history: Vec<u32>,
}

impl Contexts {
    pub fn len(&self) -> usize {
        self.next.len()
    }
    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }
    pub fn get(&self, i: usize) -> &[f32] {
        &self.hs[i * self.d..(i + 1) * self.d]
    }
    /// The words context `i` has read (empty when unknown).
    pub fn history(&self, i: usize) -> &[u32] {
        self.history.get(..=i).unwrap_or(&[])
    }
    /// Context `i` as a predictor sees it.
    pub fn context(&self, i: usize) -> Context<'_> {
        Context {
            h: self.get(i),
            history: self.history(i),
        }
    }
}

/// Runs the LM over `tokens` as one stream and keeps up to `max` (context, next word) pairs.
pub fn collect_contexts(lm: &LanguageModel, tokens: &[u32], max: usize) -> Result<Contexts> {
    let d = lm.spec().d_hidden;
    let n = tokens.len().saturating_sub(1).min(max);
    if n == 0 {
        return Err(Error::Invalid(
            "no contexts: the text needs at least two tokens (and --max-contexts ≥ 1)".into(),
        ));
    }
    let mut state = lm.new_state();
    let mut hs = Vec::with_capacity(n * d);
    for &t in &tokens[..n] {
        lm.step(t, &mut state)?;
        hs.extend_from_slice(state.context());
    }
    Ok(Contexts {
        d,
        hs,
        next: tokens[1..=n].to_vec(),
        history: tokens[..n].to_vec(),
    })
}
