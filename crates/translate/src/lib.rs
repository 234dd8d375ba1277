//! The burn-free CPU translation engine of fastsoftmax.
//!
//! - [`artifact`]: the translator on disk (manifest + safetensors).
//! - [`engine`]: the network: encoder, decoder step, attention, output layer.
//! - [`beam`]: beam search over a batch of sentences, n-best, length normalisation.
//! - [`text`]: word tokens and the way back to text.
//! - [`bleu`]: corpus BLEU as sacreBLEU computes it by default.

pub mod artifact;
pub mod beam;
pub mod bleu;
pub mod engine;
pub mod text;

pub use beam::{SearchOptions, Source, Translation};
pub use engine::{Profile, Translator};
