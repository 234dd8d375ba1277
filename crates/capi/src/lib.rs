//! The engines from C: opaque handles and plain functions (`include/fastsoftmax.h`, generated
//! by cbindgen from this file).
//!
//! Every entry point catches panics, checks its pointers for null and its strings for UTF-8,
//! and reports failure as a negative [`FsStatus`] (or a null handle) with the message in
//! [`fs_last_error`], a thread-local string naming the file or the argument. Buffers the caller
//! passes are filled up to the length it gives; nothing returned needs freeing except the
//! handles, by their `*_free`.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use fastsoftmax_infer::{heads, Context, LanguageModel, LmState, Predictor, TopK};

/// What a call returns: 0 or a negative code.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsStatus {
    FsOk = 0,
    /// A pointer argument was null.
    FsErrorNull = -1,
    /// A string argument was not UTF-8.
    FsErrorUtf8 = -2,
    /// An argument out of range (k = 0, k larger than the vocabulary, an unknown id).
    FsErrorArgument = -3,
    /// A model folder missing, damaged or of another kind.
    FsErrorModel = -4,
    /// A bug: the engine panicked (the handle should be freed).
    FsErrorPanic = -5,
}

/// A failure: its status and message.
struct Failure(FsStatus, String);

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_error(message: String) {
    // An interior NUL cannot be in a C string: cut there.
    let message = message.split('\0').next().unwrap_or_default().to_string();
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(message).ok());
}

/// Runs `f`, turning a failure or a panic into its status and the thread's last error.
fn guard(f: impl FnOnce() -> Result<i32, Failure>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(n)) => {
            LAST_ERROR.with(|e| *e.borrow_mut() = None);
            n
        }
        Ok(Err(Failure(status, message))) => {
            set_error(message);
            status as i32
        }
        Err(_) => {
            set_error("the engine panicked: a bug; please report it with the input".into());
            FsStatus::FsErrorPanic as i32
        }
    }
}

/// [`guard`] for calls that return a handle: null on failure.
fn guard_handle<T>(f: impl FnOnce() -> Result<Box<T>, Failure>) -> *mut T {
    let mut out = std::ptr::null_mut();
    guard(|| {
        out = Box::into_raw(f()?);
        Ok(0)
    });
    out
}

/// The UTF-8 string at `ptr`, argument `name`.
///
/// # Safety
/// `ptr` is null or a NUL-terminated string.
unsafe fn text<'a>(ptr: *const c_char, name: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure(FsStatus::FsErrorNull, format!("{name} is NULL")));
    }
    CStr::from_ptr(ptr).to_str().map_err(|e| {
        Failure(
            FsStatus::FsErrorUtf8,
            format!("{name} is not UTF-8 ({e}): pass UTF-8 text"),
        )
    })
}

fn null(name: &str) -> Failure {
    Failure(FsStatus::FsErrorNull, format!("{name} is NULL"))
}

/// The message of the last failed call on this thread, or NULL when it succeeded. Owned by the
/// library: valid until the next call on this thread.
#[no_mangle]
pub extern "C" fn fs_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ref().map_or(std::ptr::null(), |s| s.as_ptr()))
}

/// A model folder and the language model loaded from it (what a head borrows).
struct Model {
    dir: PathBuf,
    lm: LanguageModel,
}

type Head<'a> = Box<dyn Predictor + 'a>;

self_cell::self_cell!(
    struct Loaded {
        owner: Model,
        #[covariant]
        dependent: Head,
    }
);

/// Next-word prediction: a language model, one of its heads, and the text read so far.
pub struct FsPredictor {
    loaded: Loaded,
    state: LmState,
    /// Word ids read since the sentence start (what history-reading heads use).
    history: Vec<u32>,
    top: TopK,
}

impl FsPredictor {
    fn lm(&self) -> &LanguageModel {
        &self.loaded.borrow_owner().lm
    }

    /// Back to a sentence start: the state after `<eos>`.
    fn reset(&mut self) -> Result<(), Failure> {
        let lm = &self.loaded.borrow_owner().lm;
        self.state = lm.new_state();
        lm.step(lm.vocab().eos(), &mut self.state)
            .map_err(|e| Failure(FsStatus::FsErrorModel, e.to_string()))?;
        self.history.clear();
        Ok(())
    }
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
        let name = text(head, "head")?.to_string();
        let lm = LanguageModel::load(&dir)
            .map_err(|e| Failure(FsStatus::FsErrorModel, e.to_string()))?;
        let loaded = Loaded::try_new(Model { dir, lm }, |m| {
            heads::load(&name, &m.dir, &m.lm)
                .map_err(|e| Failure(FsStatus::FsErrorModel, format!("head {name}: {e}")))
        })?;
        let mut p = Box::new(FsPredictor {
            state: loaded.borrow_owner().lm.new_state(),
            loaded,
            history: Vec::new(),
            top: TopK::new(1),
        });
        p.reset()?;
        Ok(p)
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
        p.reset()?;
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
        let ids = p.lm().encode_words(words);
        for &id in &ids {
            let lm = &p.loaded.borrow_owner().lm;
            lm.step(id, &mut p.state)
                .map_err(|e| Failure(FsStatus::FsErrorModel, e.to_string()))?;
            p.history.push(id);
        }
        Ok(ids.len() as i32)
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
        let head = p.loaded.borrow_dependent();
        let ctx = Context {
            h: p.state.context(),
            history: &p.history,
        };
        fastsoftmax_infer::check_context(head.as_ref(), ctx, k)
            .map_err(|e| Failure(FsStatus::FsErrorArgument, e.to_string()))?;
        // The head resets the buffer to `k` (it grows once, then is reused).
        head.predict_into(ctx, k, &mut p.top);
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
/// length in bytes (without the NUL; more than `len - 1` when cut), or a negative status.
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
        let vocab = p.lm().vocab();
        if id as usize >= vocab.len() {
            return Err(Failure(
                FsStatus::FsErrorArgument,
                format!("id {id} is outside the vocabulary of {} words", vocab.len()),
            ));
        }
        let word = vocab.word(id).as_bytes();
        if !buf.is_null() && len > 0 {
            let n = word.len().min(len - 1);
            std::ptr::copy_nonoverlapping(word.as_ptr(), buf as *mut u8, n);
            *buf.add(n) = 0;
        }
        Ok(word.len() as i32)
    })
}
