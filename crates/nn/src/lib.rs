//! burn modules and training for fastsoftmax.
//!
//! - [`config`]: the JSON experiment configs (`experiments/configs/*.json`).
//! - [`lm`]: LSTM/GRU language models (embedding → recurrent layers → linear output).
//! - [`fused`]: whole-window LSTM/GRU and softmax cross-entropy ops with hand-written backwards.
//! - [`train`]: truncated-BPTT training with global-norm clipping, checkpoints and resume.
//! - [`data_parallel`]: a window's batch split over several devices, gradients summed on one.
//! - [`export`]: burn model → the engine's artifact (`fastsoftmax_infer::model::artifact`).
//! - [`seq2seq`]: the attention translator (bidirectional encoder, Luong decoder, input feeding).
//! - [`train_nmt`]: its teacher-forced training; [`export_nmt`]: → `fastsoftmax_translate`'s artifact.
//! - [`average`]: checkpoint averaging (the mean of several snapshots' parameters).
//! - [`bucketed`]: training D-softmax and adaptive softmax (frequency buckets) on a frozen LM.
//! - [`candidates`]: training the candidate attention predictor (trigram lists + attention).
//! - [`ds`]: training DS-Softmax (sparse mixture of sparse experts, group lasso, mitosis).
//! - [`l2s`]: training the L2S screening head (k-means, Gumbel straight-through, knapsack).
//! - [`synthetic`]: the DS-Softmax paper's hierarchical Gaussian check (Appendix A).
//! - [`backend`]: choosing the burn device at run time.
//! - `launches` (feature `wgpu`): counting the kernels a training window launches on a GPU.

pub mod average;
pub mod backend;
pub mod bucketed;
pub mod candidates;
pub mod config;
pub mod data_parallel;
pub mod ds;
pub mod export;
pub mod export_nmt;
pub mod fused;
pub mod l2s;
#[cfg(feature = "wgpu")]
pub mod launches;
pub mod lm;
pub mod seq2seq;
pub mod synthetic;
pub mod train;
pub mod train_nmt;
pub mod transformer;

pub use backend::Backend;
pub use config::{ExperimentConfig, LmConfig, TrainConfig, TrainingSoftmax};
pub use lm::LanguageModel;

/// Errors of training and export; each names the file or field and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Data(#[from] fastsoftmax_data::Error),
    #[error(transparent)]
    Engine(#[from] fastsoftmax_infer::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
