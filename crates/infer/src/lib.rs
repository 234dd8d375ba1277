//! The burn-free inference engine of fastsoftmax: load a trained language model, step it over
//! text, and get the next word's top-k from a softmax head — exact ([`FullHead`]) or fast.
//!
//! ```no_run
//! use fastsoftmax_infer::{LanguageModel, SoftmaxHead, TopK};
//!
//! let lm = LanguageModel::load("assets/models/ptb-small-lstm".as_ref())?;
//! let mut state = lm.new_state();
//! lm.step(lm.vocab().eos(), &mut state)?; // start of a sentence
//! for id in lm.encode_words("the stock market") {
//!     lm.step(id, &mut state)?;
//! }
//! let mut best = TopK::new(5);
//! lm.full_head().top_k_into(state.context(), 5, &mut best);
//! for s in best.as_slice() {
//!     println!("{} {:.2}", lm.vocab().word(s.id), s.logit);
//! }
//! # Ok::<(), fastsoftmax_infer::Error>(())
//! ```

pub mod artifact;
pub mod error;
pub mod eval;
pub mod full;
pub mod head;
pub mod heads;
pub mod kernels;
pub mod l2s;
pub mod lm;
pub mod lowrank;
pub mod topk;
pub mod vocab;

pub use artifact::{Cell, LmSpec, LmWeights};
pub use error::{Error, Result};
pub use full::{FullHead, NaiveFullHead};
pub use head::{check_k, check_query, SoftmaxHead};
pub use l2s::L2sHead;
pub use lm::{LanguageModel, LmState};
pub use lowrank::LowRank;
pub use topk::{Scored, TopK};
pub use vocab::Vocab;

/// Log-softmax normaliser `log Σ exp(logits)`, computed stably.
pub fn log_sum_exp(logits: &[f32]) -> f64 {
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let s: f64 = logits.iter().map(|&x| (x as f64 - m).exp()).sum();
    m + s.ln()
}
