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

pub mod error;
#[cfg(feature = "eval")]
pub mod eval;
pub mod files;
pub mod head;
pub mod heads;
pub mod kernels;
pub mod model;
pub mod next_words;
pub mod topk;

pub use error::{Error, Result};
pub use head::{check_context, check_k, check_query, Context, Predictor, SoftmaxHead};
pub use heads::{
    AdaptiveHead, CandidatesHead, DsHead, DsSvdHead, DsoftmaxHead, FullHead, GreedyHead,
    GreedyIndex, HnswHead, HnswIndex, L2sHead, LowRank, LshHead, LshIndex, NaiveFullHead, PcaHead,
    PcaIndex, SvdHead, TrigramHead,
};
pub use kernels::{exp_nonpositive, log_sum_exp, log_sum_exp_top_k};
pub use model::{Cell, LanguageModel, LmSpec, LmState, LmWeights, Vocab};
pub use next_words::NextWords;
pub use topk::{Scored, TopK, K_MAX};
