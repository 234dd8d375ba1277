//! The burn-free CPU translation engine of fastsoftmax.
//!
//! - [`artifact`]: the translator on disk (manifest + safetensors).
//! - [`engine`]: the network: encoder, decoder step, attention, output layer.
//! - [`beam`]: beam search over a batch of sentences, n-best, length normalisation.
//! - [`text`]: word tokens and the way back to text.
//! - [`bleu`]: corpus BLEU as sacreBLEU computes it by default.
//! - [`tokenizer`]: source words or subwords (BPE, for Japanese).
//! - [`placeholder`]: stand-ins for Latin names in a Japanese source, put back in the output.
//! - [`transformer`]: the Transformer translator (the distillation teacher) and its beam.
//! - [`distill`]: sequence-level distillation, a teacher re-translating the training source.
//! - [`align`], [`vmap`]: word alignment and the vocabulary map built from it, which cuts the
//!   output layer to the words a sentence's source n-grams can bring.
//! - [`serve`]: a translator folder opened as the CLI serves it (either kind, its map or
//!   head); what the CLI and the bindings open.
//! - [`screen`]: L2S and DS-Softmax heads inside beam search, each row scoring only the words
//!   of the route its context is sent to.

pub mod align;
pub mod artifact;
pub mod beam;
pub mod bleu;
pub mod distill;
pub mod engine;
pub mod placeholder;
pub mod screen;
pub mod serve;
pub mod text;
pub mod tokenizer;
pub mod transformer;
pub mod vmap;

pub use beam::{SearchOptions, Source, Translation, VmapScope};
pub use engine::{Profile, Translator};
pub use screen::Screen;
pub use serve::{ServeOptions, Served, Vmap};
pub use vmap::{MapUnit, Shortlister, VmapConfig, VocabMap};
