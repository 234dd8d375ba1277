//! The engines from C: opaque handles and plain functions (`include/fastsoftmax.h`, generated
//! by cbindgen from this file).
//!
//! Every entry point catches panics, checks its pointers for null and its strings for UTF-8,
//! and reports failure as a negative [`FsStatus`] (or a null handle) with the message in
//! [`fs_last_error`], a thread-local string naming the file or the argument. Buffers the caller
//! passes are filled up to the length it gives; what the library returns is freed by its
//! `*_free` (the handles, and a batch's translations).
//!
//! - [`predictor`]: next-word prediction (a language model and a head).
//! - [`translator`]: translation of a batch of lines, n-best.
//! - [`ime`]: the Japanese input method, one key at a time.

pub mod ime;
pub mod predictor;
pub mod translator;

pub use ime::*;
pub use predictor::*;
pub use translator::*;

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

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
pub(crate) struct Failure(pub(crate) FsStatus, pub(crate) String);

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_error(message: String) {
    // An interior NUL cannot be in a C string: cut there.
    let message = message.split('\0').next().unwrap_or_default().to_string();
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(message).ok());
}

/// Runs `f`, turning a failure or a panic into its status and the thread's last error.
pub(crate) fn guard(f: impl FnOnce() -> Result<i32, Failure>) -> i32 {
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
pub(crate) fn guard_handle<T>(f: impl FnOnce() -> Result<Box<T>, Failure>) -> *mut T {
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
pub(crate) unsafe fn text<'a>(ptr: *const c_char, name: &str) -> Result<&'a str, Failure> {
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

pub(crate) fn null(name: &str) -> Failure {
    Failure(FsStatus::FsErrorNull, format!("{name} is NULL"))
}

/// The message of the last failed call on this thread, or NULL when it succeeded. Owned by the
/// library: valid until the next call on this thread.
#[no_mangle]
pub extern "C" fn fs_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ref().map_or(std::ptr::null(), |s| s.as_ptr()))
}

/// Copies `s` into `buf` (`len` bytes, NUL-terminated, cut to fit; NULL or 0: nothing is
/// written). Returns `s`'s length in bytes without the NUL, which is `len - 1` or more when it
/// was cut, so a caller can ask with `len` 0 and call again with room.
///
/// # Safety
/// `buf` is NULL or has room for `len` bytes.
pub(crate) unsafe fn copy_out(s: &str, buf: *mut c_char, len: usize) -> Result<i32, Failure> {
    let bytes = s.as_bytes();
    if !buf.is_null() && len > 0 {
        let n = bytes.len().min(len - 1);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
    }
    i32::try_from(bytes.len()).map_err(|_| {
        Failure(
            FsStatus::FsErrorArgument,
            "the text is longer than 2 GiB".into(),
        )
    })
}

/// A library error as a status: a missing or damaged file is the model's; the rest are the
/// arguments'.
pub(crate) fn failure(e: fastsoftmax_infer::Error) -> Failure {
    let status = match e {
        fastsoftmax_infer::Error::Invalid(_) => FsStatus::FsErrorArgument,
        _ => FsStatus::FsErrorModel,
    };
    Failure(status, e.to_string())
}
