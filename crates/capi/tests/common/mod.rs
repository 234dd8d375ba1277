//! What the Rust API predicts, for the C functions' results to be compared with, and the
//! helpers of calling them.
#![allow(dead_code)] // each test file uses some of these

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

use fastsoftmax_infer::{LanguageModel, Scored, SoftmaxHead, TopK};

/// `s` as a C string.
pub fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// The message of the last failed call on this thread.
pub fn last_error() -> String {
    let e = fastsoftmax_c::fs_last_error();
    assert!(!e.is_null(), "a failed call leaves its message");
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

/// A shipped model folder.
pub fn asset(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../assets/models")
        .join(name)
}

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
