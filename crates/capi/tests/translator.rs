//! Translation through the C functions, on the shipped Bible translator: the translations the
//! Rust API (what `fastsoftmax translate` runs) makes, and every bad argument a status and a
//! message, never a crash.

use std::ffi::{c_char, CStr};
use std::ptr::{null, null_mut};

use fastsoftmax_c::*;
use fastsoftmax_translate::{SearchOptions, ServeOptions, Served};

mod common;
use common::{asset, c, last_error, model_dir};

const LINES: [&str; 3] = [
    "In the beginning was the Word, and the Word was with God, and the Word was God.",
    "",
    "Jesus wept.",
];

fn open(options: *const FsServeOptions) -> *mut FsTranslator {
    let dir = c(asset("bible-en-de-tiny").to_str().unwrap());
    let t = unsafe { fs_translator_open(dir.as_ptr(), options) };
    assert!(!t.is_null(), "{}", last_error());
    t
}

/// `(line, rank, text, score)` of each translation in `r`.
fn read(r: *const FsTranslations) -> Vec<(usize, usize, String, f64)> {
    (0..unsafe { fs_translations_count(r) })
        .map(|i| {
            let t = unsafe { &*fs_translations_get(r, i) };
            let text = unsafe { CStr::from_ptr(t.text) }
                .to_str()
                .unwrap()
                .to_string();
            (t.line, t.rank, text, t.score)
        })
        .collect()
}

#[test]
fn translations_are_the_rust_apis_with_n_best() {
    let t = open(null());
    let lines: Vec<_> = LINES.iter().map(|l| c(l)).collect();
    let ptrs: Vec<*const c_char> = lines.iter().map(|l| l.as_ptr()).collect();
    let mut opts = fs_translate_options_default();
    opts.n_best = 3;
    let mut out = null_mut();
    let n = unsafe { fs_translate(t, ptrs.as_ptr(), ptrs.len(), &opts, &mut out) };
    assert!(n > 0, "{}", last_error());
    let got = read(out);
    assert_eq!(got.len(), n as usize);
    let served = Served::open(&asset("bible-en-de-tiny"), &ServeOptions::default()).unwrap();
    let expected = served
        .translate(
            &LINES,
            &SearchOptions {
                n_best: 3,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    let expected: Vec<_> = expected
        .iter()
        .enumerate()
        .flat_map(|(line, nbest)| {
            nbest
                .iter()
                .enumerate()
                .map(move |(rank, t)| (line, rank, t.text.clone(), t.score))
        })
        .collect();
    assert_eq!(got, expected);
    assert!(got.iter().any(|(line, rank, ..)| (*line, *rank) == (0, 2)));
    // Out of range: NULL, not a read past the end.
    assert!(unsafe { fs_translations_get(out, n as usize) }.is_null());
    unsafe { fs_translations_free(out) };

    // No map: the whole vocabulary scored; still a translation of every line.
    let no_vmap = FsServeOptions {
        vmap: null(),
        no_vmap: true,
        batch_scope: false,
        head: null(),
    };
    let full = open(&no_vmap);
    let mut out = null_mut();
    let n = unsafe { fs_translate(full, ptrs.as_ptr(), ptrs.len(), null(), &mut out) };
    assert_eq!(n, 3, "{}", last_error());
    unsafe { fs_translations_free(out) };
    unsafe { fs_translator_free(full) };
    unsafe { fs_translator_free(t) };
}

#[test]
fn bad_arguments_are_statuses_with_messages() {
    let t = open(null());
    let line = c("Jesus wept.");
    let ptrs = [line.as_ptr()];
    let mut out = null_mut();
    let mut opts = fs_translate_options_default();
    opts.beam = 0;
    assert_eq!(
        unsafe { fs_translate(t, ptrs.as_ptr(), 1, &opts, &mut out) },
        FsStatus::FsErrorArgument as i32
    );
    assert!(last_error().contains("beam size 0"), "{}", last_error());
    assert!(out.is_null());
    opts.beam = 2;
    opts.n_best = 3;
    assert_eq!(
        unsafe { fs_translate(t, ptrs.as_ptr(), 1, &opts, &mut out) },
        FsStatus::FsErrorArgument as i32
    );
    assert!(last_error().contains("n-best 3"), "{}", last_error());
    // Null pointers, each named (the message read right after its call).
    let status = |r: i32| (r, last_error());
    let cases = [
        (
            status(unsafe { fs_translate(null(), ptrs.as_ptr(), 1, null(), &mut out) }),
            "t is NULL",
        ),
        (
            status(unsafe { fs_translate(t, null(), 1, null(), &mut out) }),
            "lines is NULL",
        ),
        (
            status(unsafe { fs_translate(t, ptrs.as_ptr(), 1, null(), null_mut()) }),
            "out is NULL",
        ),
    ];
    for ((status, got), message) in cases {
        assert_eq!(status, FsStatus::FsErrorNull as i32);
        assert_eq!(got, message);
    }
    let with_null = [line.as_ptr(), null()];
    assert_eq!(
        unsafe { fs_translate(t, with_null.as_ptr(), 2, null(), &mut out) },
        FsStatus::FsErrorNull as i32
    );
    assert_eq!(last_error(), "lines[1] is NULL");
    // Not UTF-8.
    let latin1 = [b'G', 0xf6, b't', b't', 0];
    let bad = [latin1.as_ptr() as *const c_char];
    assert_eq!(
        unsafe { fs_translate(t, bad.as_ptr(), 1, null(), &mut out) },
        FsStatus::FsErrorUtf8 as i32
    );
    assert!(last_error().starts_with("lines[0] is not UTF-8"));
    // No lines: no translations.
    assert_eq!(unsafe { fs_translate(t, null(), 0, null(), &mut out) }, 0);
    assert_eq!(unsafe { fs_translations_count(out) }, 0);
    unsafe { fs_translations_free(out) };
    unsafe { fs_translator_free(t) };

    // A folder of another kind (a language model), and a missing one: the folder named.
    let lm = c(model_dir().to_str().unwrap());
    assert!(unsafe { fs_translator_open(lm.as_ptr(), null()) }.is_null());
    assert!(last_error().contains("ptb-small-lstm"), "{}", last_error());
    assert!(unsafe { fs_translator_open(c("/no/such").as_ptr(), null()) }.is_null());
    assert!(last_error().contains("/no/such"), "{}", last_error());
    // A head that is not there.
    let head = c("nope");
    let options = FsServeOptions {
        vmap: null(),
        no_vmap: false,
        batch_scope: false,
        head: head.as_ptr(),
    };
    let dir = c(asset("bible-en-de-tiny").to_str().unwrap());
    assert!(unsafe { fs_translator_open(dir.as_ptr(), &options) }.is_null());
    assert!(last_error().contains("nope"), "{}", last_error());
    // Every free takes NULL.
    unsafe {
        fs_translator_free(null_mut());
        fs_translations_free(null_mut());
    }
    assert_eq!(unsafe { fs_translations_count(null()) }, 0);
}
