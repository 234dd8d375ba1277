//! The C functions called as C calls them, on the shipped PTB model: the same predictions as
//! the Rust API, and every bad argument a status and a message, never a crash.

use std::ffi::{c_char, CStr};

use fastsoftmax_c::*;

mod common;
use common::{c, last_error, model_dir, rust_top_k};

#[test]
fn predictions_are_the_rust_apis() {
    let dir = c(model_dir().to_str().unwrap());
    let p = unsafe { fs_predictor_open(dir.as_ptr(), c("full").as_ptr()) };
    assert!(!p.is_null(), "{}", last_error());
    assert!(fs_last_error().is_null());
    assert_eq!(
        unsafe { fs_predictor_feed(p, c("the company said").as_ptr()) },
        3
    );
    let (mut ids, mut scores) = ([0u32; 5], [0f32; 5]);
    let n = unsafe { fs_predictor_topk(p, 5, ids.as_mut_ptr(), scores.as_mut_ptr()) };
    assert_eq!(n, 5);
    // The same through the Rust API.
    let (best, lm) = rust_top_k(&model_dir(), "the company said", 5);
    let expected: Vec<u32> = best.iter().map(|s| s.id).collect();
    assert_eq!(ids.to_vec(), expected);
    assert_eq!(scores[0], best[0].logit);
    // Words into a caller's buffer, cut to fit.
    let mut buf = [0 as c_char; 64];
    let len = unsafe { fs_predictor_word(p, ids[0], buf.as_mut_ptr(), buf.len()) };
    let word = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
    assert_eq!((len as usize, word), (word.len(), lm.vocab().word(ids[0])));
    let mut small = [0 as c_char; 2];
    let len = unsafe { fs_predictor_word(p, ids[0], small.as_mut_ptr(), 2) };
    assert_eq!(len as usize, word.len());
    assert_eq!(
        unsafe { CStr::from_ptr(small.as_ptr()) }.to_bytes().len(),
        1
    );
    // A reset is a sentence start again.
    assert_eq!(unsafe { fs_predictor_reset(p) }, 0);
    let mut again = [0u32; 5];
    unsafe { fs_predictor_feed(p, c("the company said").as_ptr()) };
    unsafe { fs_predictor_topk(p, 5, again.as_mut_ptr(), std::ptr::null_mut()) };
    assert_eq!(again, ids);
    unsafe { fs_predictor_free(p) };
}

#[test]
fn bad_arguments_get_a_status_and_a_message() {
    let dir = c(model_dir().to_str().unwrap());
    let full = c("full");
    unsafe {
        assert!(fs_predictor_open(std::ptr::null(), full.as_ptr()).is_null());
        assert_eq!(last_error(), "dir is NULL");
        let bad = [0xffu8 as c_char, 0];
        assert!(fs_predictor_open(bad.as_ptr(), full.as_ptr()).is_null());
        assert!(
            last_error().starts_with("dir is not UTF-8"),
            "{}",
            last_error()
        );
        assert!(fs_predictor_open(c("/no/such/model").as_ptr(), full.as_ptr()).is_null());
        assert!(last_error().contains("/no/such/model"), "{}", last_error());
        assert!(fs_predictor_open(dir.as_ptr(), c("no-such-head").as_ptr()).is_null());
        assert!(last_error().contains("no-such-head"), "{}", last_error());
        // A translator folder is not a language model.
        let nmt = model_dir().join("../bible-en-de-tiny");
        let nmt = c(nmt.to_str().unwrap());
        assert!(fs_predictor_open(nmt.as_ptr(), full.as_ptr()).is_null());
        assert!(!last_error().is_empty());

        let p = fs_predictor_open(dir.as_ptr(), full.as_ptr());
        assert!(!p.is_null());
        let mut ids = [0u32; 4];
        assert_eq!(
            fs_predictor_topk(p, 0, ids.as_mut_ptr(), std::ptr::null_mut()),
            -3
        );
        assert!(last_error().contains("k = 0"), "{}", last_error());
        assert_eq!(
            fs_predictor_topk(p, 1 << 30, ids.as_mut_ptr(), std::ptr::null_mut()),
            FsStatus::FsErrorArgument as i32
        );
        assert_eq!(
            fs_predictor_topk(p, 4, std::ptr::null_mut(), std::ptr::null_mut()),
            -1
        );
        assert_eq!(last_error(), "ids is NULL");
        assert_eq!(fs_predictor_feed(p, std::ptr::null()), -1);
        assert_eq!(fs_predictor_feed(std::ptr::null_mut(), c("a").as_ptr()), -1);
        assert_eq!(last_error(), "p is NULL");
        assert_eq!(fs_predictor_word(p, u32::MAX, std::ptr::null_mut(), 0), -3);
        // Unknown words read as <unk>; the predictor goes on.
        assert_eq!(fs_predictor_feed(p, c("zzqxj the").as_ptr()), 2);
        assert_eq!(
            fs_predictor_topk(p, 4, ids.as_mut_ptr(), std::ptr::null_mut()),
            4
        );
        assert!(fs_last_error().is_null(), "a success clears the message");
        fs_predictor_free(p);
        fs_predictor_free(std::ptr::null_mut());
        assert_eq!(fs_predictor_reset(std::ptr::null_mut()), -1);
    }
}

#[test]
fn a_batch_of_contexts_is_each_contexts_topk() {
    let dir = c(model_dir().to_str().unwrap());
    let p = unsafe { fs_predictor_open(dir.as_ptr(), c("full").as_ptr()) };
    assert!(!p.is_null(), "{}", last_error());
    let d = unsafe { fs_predictor_context(p, std::ptr::null_mut(), 0) } as usize;
    assert!(d > 0);
    // The contexts after each word, and each one's top 3 as the fed predictor gives it.
    let (mut hs, mut expected) = (Vec::new(), Vec::new());
    for w in ["the", "company", "said"] {
        unsafe { fs_predictor_feed(p, c(w).as_ptr()) };
        let mut h = vec![0f32; d];
        assert_eq!(
            unsafe { fs_predictor_context(p, h.as_mut_ptr(), d) },
            d as i32
        );
        hs.extend(h);
        let mut ids = [0u32; 3];
        unsafe { fs_predictor_topk(p, 3, ids.as_mut_ptr(), std::ptr::null_mut()) };
        expected.extend(ids);
    }
    let (mut ids, mut scores) = (vec![0u32; 9], vec![0f32; 9]);
    let n = unsafe {
        fs_predictor_topk_batch(
            p,
            hs.as_ptr(),
            3,
            d,
            3,
            ids.as_mut_ptr(),
            scores.as_mut_ptr(),
        )
    };
    assert_eq!(n, 9, "{}", last_error());
    assert_eq!(ids, expected);
    assert!(scores[0] >= scores[1] && scores[1] >= scores[2]);
    // A width that is not the model's, NULL contexts, NaN: errors that say so.
    let r = unsafe {
        fs_predictor_topk_batch(
            p,
            hs.as_ptr(),
            1,
            d - 1,
            3,
            ids.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(r, FsStatus::FsErrorArgument as i32);
    assert!(
        last_error().contains(&format!("have {d} numbers")),
        "{}",
        last_error()
    );
    let r = unsafe {
        fs_predictor_topk_batch(
            p,
            std::ptr::null(),
            1,
            d,
            3,
            ids.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(
        (r, last_error()),
        (FsStatus::FsErrorNull as i32, "contexts is NULL".to_string())
    );
    hs[5] = f32::NAN;
    let r = unsafe {
        fs_predictor_topk_batch(
            p,
            hs.as_ptr(),
            1,
            d,
            3,
            ids.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(r, FsStatus::FsErrorArgument as i32);
    // A head that reads the previous words has no use for context vectors.
    let candidates = unsafe { fs_predictor_open(dir.as_ptr(), c("candidates").as_ptr()) };
    let r = unsafe {
        fs_predictor_topk_batch(
            candidates,
            hs.as_ptr(),
            1,
            d,
            3,
            ids.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(r, FsStatus::FsErrorArgument as i32);
    assert!(last_error().contains("previous words"), "{}", last_error());
    unsafe { fs_predictor_free(candidates) };
    unsafe { fs_predictor_free(p) };
}
