//! The softmax heads, one file per head, all behind [`crate::SoftmaxHead`] (or
//! [`crate::Predictor`] for the candidate predictor, which reads the previous words instead).
//!
//! - exact: [`full`] (the baseline every speedup divides);
//! - learned screening and sparse experts: [`l2s`], [`ds`], both on the shared `routed` core,
//!   and [`ds_svd`], SVD-softmax inside DS's experts;
//! - built from the output layer alone (named by their knobs): [`svd`], [`hnsw`], [`greedy`],
//!   [`pca`], [`lsh`], on the shared [`mips`] reduction and [`lowrank`] factorisation;
//! - frequency buckets: [`adaptive`], [`dsoftmax`], on the shared [`bucketed`] layout;
//! - no LM step: [`candidates`] (attention over [`trigram`] candidates) and [`trigram`] itself.
//!
//! [`format`](mod@format) is the on-disk format of trained heads (heads import it to save and load
//! themselves); [`registry`] finds a head by name and is the only file that imports every head.

pub mod adaptive;
pub mod bucketed;
pub mod candidates;
pub mod ds;
pub mod ds_svd;
pub mod dsoftmax;
pub mod format;
pub mod full;
pub mod full_int8;
pub mod greedy;
pub mod hnsw;
pub mod l2s;
pub mod l2s_int8;
pub mod lowrank;
pub mod lsh;
pub mod mips;
pub mod pca;
pub mod registry;
mod routed;
pub mod svd;
pub mod trigram;

pub use adaptive::AdaptiveHead;
pub use candidates::CandidatesHead;
pub use ds::DsHead;
pub use ds_svd::DsSvdHead;
pub use dsoftmax::DsoftmaxHead;
pub use format::{
    fingerprint, read_head, save_head, HeadManifest, Tensors, HEAD_FORMAT, HEAD_FORMAT_VERSION,
    HEAD_MANIFEST, HEAD_TENSORS, INT8_MIN_ROWS,
};
pub use full::{FullHead, NaiveFullHead};
pub use full_int8::FullInt8Head;
pub use greedy::{GreedyHead, GreedyIndex};
pub use hnsw::{HnswHead, HnswIndex};
pub use l2s::L2sHead;
pub use l2s_int8::L2sInt8Head;
pub use lowrank::LowRank;
pub use lsh::{LshHead, LshIndex};
pub use pca::{PcaHead, PcaIndex};
pub use registry::{available, load, trained, HeadLoader, BUILT_IN, KINDS};
pub use svd::SvdHead;
pub use trigram::{CandidateTable, TrigramHead};
