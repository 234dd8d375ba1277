//! The language model: its artifact on disk ([`artifact`]), its vocabulary ([`vocab`]), the
//! burn-free LSTM/GRU step that turns words into context vectors ([`lm`]), and the context
//! vectors of a whole text ([`contexts`]).

pub mod artifact;
pub mod contexts;
pub mod lm;
pub mod vocab;

pub use artifact::{Cell, LmSpec, LmWeights, RowStorage};
pub use contexts::{collect_contexts, Contexts};
pub use lm::{LanguageModel, LmState};
pub use vocab::Vocab;
