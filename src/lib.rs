#![doc = include_str!("../README.md")]
//!
//! This facade re-exports the workspace crates; the `fastsoftmax` binary is the CLI.
//!
//! - [`infer`]: the burn-free engine an app embeds (LM steps, softmax heads, artifacts).
//! - [`nn`]: burn modules and training.
//! - [`data`]: corpora, vocabularies, batching, PTB.

pub use fastsoftmax_data as data;
pub use fastsoftmax_infer as infer;
pub use fastsoftmax_nn as nn;
