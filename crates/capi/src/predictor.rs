//! Next-word prediction: a language model, one of its heads, and the text read so far.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use fastsoftmax_infer::{NextWords, Scored, TopK};

use crate::{copy_out, failure, guard, guard_handle, null, text, Failure, FsStatus};

/// Next-word prediction: a language model, one of its heads, and the text read so far
/// ([`NextWords`], what `fastsoftmax predict` runs).
///
/// Threads: one at a time (a call changes the text read); it may move between threads. Open
/// one per thread to predict in parallel.
pub struct FsPredictor {
    next: NextWords,
    top: TopK,
    /// [`fs_predictor_topk_batch`]'s results, reused.
    batch: Vec<TopK>,
}

/// Opens the language model in folder `dir` with head `head` (`full`, a trained head in
/// `dir/heads/NAME` such as `l2s` or `candidates`, or a built-in one such as `full-int8-m64`),
/// at a sentence start. NULL on failure (see `fs_last_error()`). Free with
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
            batch: Vec::new(),
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
        write_top(best, ids, scores);
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

/// Copies the language model's context vector after the text read (`d` floats, what
/// [`fs_predictor_topk_batch`] takes as a row) into `out`, at most `len` of them. Returns `d`,
/// or a negative status.
///
/// # Safety
/// `p` is NULL or a live handle; `out` NULL or room for `len` floats.
#[no_mangle]
pub unsafe extern "C" fn fs_predictor_context(
    p: *const FsPredictor,
    out: *mut f32,
    len: usize,
) -> i32 {
    guard(|| {
        let p = p.as_ref().ok_or_else(|| null("p"))?;
        let h = p.next.context().h;
        if !out.is_null() {
            let n = h.len().min(len);
            std::ptr::copy_nonoverlapping(h.as_ptr(), out, n);
        }
        Ok(h.len() as i32)
    })
}

/// The `k` likeliest words for each of `n` context vectors (`contexts`: `n × d` floats, row
/// after row; `d` the model's width, [`fs_predictor_context`]): row `i`'s ids into
/// `ids[i·k ..]` and its scores into `scores[i·k ..]` (NULL: not wanted), best first. For the
/// heads that score context vectors (every softmax head), not the ones that read the previous
/// words. Returns `n · k`, or a negative status.
///
/// # Safety
/// `p` is NULL or a live handle; `contexts` NULL or `n · d` floats; `ids` NULL or room for
/// `n · k` values, `scores` likewise.
#[no_mangle]
pub unsafe extern "C" fn fs_predictor_topk_batch(
    p: *mut FsPredictor,
    contexts: *const f32,
    n: usize,
    d: usize,
    k: usize,
    ids: *mut u32,
    scores: *mut f32,
) -> i32 {
    guard(|| {
        let p = p.as_mut().ok_or_else(|| null("p"))?;
        if contexts.is_null() {
            return Err(null("contexts"));
        }
        if ids.is_null() {
            return Err(null("ids"));
        }
        let width = p.next.context().h.len();
        if d != width {
            return Err(Failure(
                FsStatus::FsErrorArgument,
                format!("d = {d}, but this model's context vectors have {width} numbers"),
            ));
        }
        let total = n.checked_mul(k).filter(|&t| t <= i32::MAX as usize);
        let total = total.ok_or_else(|| {
            Failure(
                FsStatus::FsErrorArgument,
                format!("n · k = {n} · {k} is too large: ask in smaller batches"),
            )
        })?;
        let hs = std::slice::from_raw_parts(contexts, n * d);
        p.batch.resize_with(n, || TopK::new(1));
        p.next
            .top_k_batch(hs, k, &mut p.batch[..n])
            .map_err(failure)?;
        for (i, top) in p.batch[..n].iter().enumerate() {
            write_top(top.as_slice(), ids.add(i * k), scores_at(scores, i * k));
        }
        Ok(total as i32)
    })
}

/// Writes `best`'s ids to `ids` and, unless it is NULL, its scores to `scores`.
///
/// # Safety
/// `ids` has room for `best.len()` values; `scores` is NULL or likewise.
unsafe fn write_top(best: &[Scored], ids: *mut u32, scores: *mut f32) {
    for (j, s) in best.iter().enumerate() {
        *ids.add(j) = s.id;
        if !scores.is_null() {
            *scores.add(j) = s.logit;
        }
    }
}

/// `scores + at`, or NULL when `scores` is (scores not wanted).
unsafe fn scores_at(scores: *mut f32, at: usize) -> *mut f32 {
    match scores.is_null() {
        true => scores,
        false => scores.add(at),
    }
}
