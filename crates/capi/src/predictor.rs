//! Next-word prediction: a language model, one of its heads, and the text read so far.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use fastsoftmax_infer::{NextWords, TopK};

use crate::{copy_out, failure, guard, guard_handle, null, text, Failure, FsStatus};

/// Next-word prediction: a language model, one of its heads, and the text read so far
/// ([`NextWords`], what `fastsoftmax predict` runs).
///
/// Threads: one at a time (a call changes the text read); it may move between threads. Open
/// one per thread to predict in parallel.
pub struct FsPredictor {
    next: NextWords,
    top: TopK,
}

/// Opens the language model in folder `dir` with head `head` (`full`, a trained head in
/// `dir/heads/NAME` such as `l2s` or `candidates`, or a built-in one such as `full-int8-m64`),
/// at a sentence start. NULL on failure (see [`fs_last_error`]). Free with
/// [`fs_predictor_free`].
///
/// # Safety
/// `dir` and `head` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn fs_predictor_open(
    dir: *const c_char,
    head: *const c_char,
) -> *mut FsPredictor {
    guard_handle(|| {
        let dir = PathBuf::from(text(dir, "dir")?);
        let name = text(head, "head")?;
        let next = NextWords::open(&dir, name)
            .map_err(|e| Failure(FsStatus::FsErrorModel, e.to_string()))?;
        Ok(Box::new(FsPredictor {
            next,
            top: TopK::new(1),
        }))
    })
}

/// Frees a predictor; NULL is ignored.
///
/// # Safety
/// `p` is NULL or a handle from [`fs_predictor_open`] not freed before.
#[no_mangle]
pub unsafe extern "C" fn fs_predictor_free(p: *mut FsPredictor) {
    if !p.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(p))));
    }
}

/// Starts a new sentence (forgets the words fed).
///
/// # Safety
/// `p` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fs_predictor_reset(p: *mut FsPredictor) -> i32 {
    guard(|| {
        let p = p.as_mut().ok_or_else(|| null("p"))?;
        p.next.reset().map_err(failure)?;
        Ok(0)
    })
}

/// Reads `words` (UTF-8, separated by spaces; a word outside the vocabulary reads as `<unk>`)
/// after the text fed before. Returns the number of words read, or a negative status.
///
/// # Safety
/// `p` is NULL or a live handle; `words` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn fs_predictor_feed(p: *mut FsPredictor, words: *const c_char) -> i32 {
    guard(|| {
        let p = p.as_mut().ok_or_else(|| null("p"))?;
        let words = text(words, "words")?;
        p.next.feed(words).map_err(failure)?;
        Ok(words.split_whitespace().count() as i32)
    })
}

/// The `k` likeliest next words, best first: their ids into `ids` and their scores (the head's
/// logits) into `scores` (NULL: not wanted), both caller-owned arrays of `k` elements. Returns
/// the number written, or a negative status (`k` must be 1 to the vocabulary size).
///
/// # Safety
/// `p` is NULL or a live handle; `ids` NULL or room for `k` values, `scores` likewise.
#[no_mangle]
pub unsafe extern "C" fn fs_predictor_topk(
    p: *mut FsPredictor,
    k: usize,
    ids: *mut u32,
    scores: *mut f32,
) -> i32 {
    guard(|| {
        let p = p.as_mut().ok_or_else(|| null("p"))?;
        if ids.is_null() {
            return Err(null("ids"));
        }
        // The head resets the buffer to `k` (it grows once, then is reused).
        p.next.top_k_into(k, &mut p.top).map_err(failure)?;
        let best = p.top.as_slice();
        let ids = std::slice::from_raw_parts_mut(ids, k);
        for (slot, s) in ids.iter_mut().zip(best) {
            *slot = s.id;
        }
        if !scores.is_null() {
            let scores = std::slice::from_raw_parts_mut(scores, k);
            for (slot, s) in scores.iter_mut().zip(best) {
                *slot = s.logit;
            }
        }
        Ok(best.len() as i32)
    })
}

/// Copies word `id` into `buf` (`len` bytes, NUL-terminated, cut to fit). Returns the word's
/// length in bytes (without the NUL; `len - 1` or more when cut), or a negative status.
///
/// # Safety
/// `p` is NULL or a live handle; `buf` NULL or room for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn fs_predictor_word(
    p: *const FsPredictor,
    id: u32,
    buf: *mut c_char,
    len: usize,
) -> i32 {
    guard(|| {
        let p = p.as_ref().ok_or_else(|| null("p"))?;
        let vocab = p.next.lm().vocab();
        if id as usize >= vocab.len() {
            return Err(Failure(
                FsStatus::FsErrorArgument,
                format!("id {id} is outside the vocabulary of {} words", vocab.len()),
            ));
        }
        copy_out(vocab.word(id), buf, len)
    })
}
