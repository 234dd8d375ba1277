//! What the Rust API predicts, for the C functions' results to be compared with.

use std::path::{Path, PathBuf};

use fastsoftmax_infer::{LanguageModel, Scored, SoftmaxHead, TopK};

/// The shipped PTB model.
pub fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../assets/models/ptb-small-lstm")
}

/// The full softmax's top `k` after `words` from a sentence start, and the model.
pub fn rust_top_k(model: &Path, words: &str, k: usize) -> (Vec<Scored>, LanguageModel) {
    let lm = LanguageModel::load(model).unwrap();
    let mut state = lm.new_state();
    lm.step(lm.vocab().eos(), &mut state).unwrap();
    for id in lm.encode_words(words) {
        lm.step(id, &mut state).unwrap();
    }
    let mut best = TopK::new(k);
    lm.full_head().top_k_into(state.context(), k, &mut best);
    (best.as_slice().to_vec(), lm)
}
