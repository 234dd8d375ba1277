//! The input method through the C functions, on the shipped converter: what the Rust session
//! (the IBus engine's and the terminal converter's) shows and commits, the user's folder
//! written on save, and every bad argument a status and a message, never a crash.

use std::ffi::{c_char, CStr};
use std::ptr::{null, null_mut};

use fastsoftmax_c::*;
use fastsoftmax_ime::session::PAGE;
use fastsoftmax_ime::{Converter, Key};

mod common;
use common::{asset, c, last_error, model_dir};

fn open(user: Option<&std::path::Path>) -> *mut FsIme {
    let dir = c(asset("ime-ja").to_str().unwrap());
    let user = user.map(|u| c(u.to_str().unwrap()));
    let ime = unsafe { fs_ime_open(dir.as_ptr(), user.as_ref().map_or(null(), |u| u.as_ptr())) };
    assert!(!ime.is_null(), "{}", last_error());
    ime
}

fn text(ime: *const FsIme, what: FsImeText, i: usize) -> String {
    let len = unsafe { fs_ime_text(ime, what as u32, i, null_mut(), 0) };
    assert!(len >= 0, "{}", last_error());
    let mut buf = vec![0 as c_char; len as usize + 1];
    assert_eq!(
        unsafe { fs_ime_text(ime, what as u32, i, buf.as_mut_ptr(), buf.len()) },
        len
    );
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap()
        .to_string()
}

fn press(ime: *mut FsIme, key: FsKey, value: u32) -> i32 {
    let r = unsafe { fs_ime_key(ime, key as u32, value) };
    assert!(r >= 0, "{}", last_error());
    r
}

fn state(ime: *const FsIme) -> FsImeState {
    let mut s = FsImeState::default();
    assert_eq!(unsafe { fs_ime_state(ime, &mut s) }, 0);
    s
}

#[test]
fn keys_show_and_commit_what_the_rust_session_does() {
    let converter = Converter::open(&asset("ime-ja")).unwrap();
    let mut session = converter.session(PAGE).unwrap();
    let ime = open(None);
    let keys: Vec<(FsKey, u32, Key)> = "watashinonamaeha"
        .chars()
        .map(|ch| (FsKey::FsKeyChar, ch as u32, Key::Char(ch)))
        .chain([
            (FsKey::FsKeySpace, 0, Key::Space),
            (FsKey::FsKeySpace, 0, Key::Space),
            (FsKey::FsKeyRight, 0, Key::Right),
        ])
        .collect();
    for (key, value, rust) in keys {
        let consumed = press(ime, key, value);
        let reply = session.press(rust);
        let view = session.view();
        assert_eq!(consumed, reply.consumed as i32);
        let s = state(ime);
        assert_eq!(s.segments, view.segments.len());
        assert_eq!(s.focus, view.focus.map_or(-1, |f| f as i32));
        assert_eq!(s.highlighted, view.highlighted.map_or(-1, |h| h as i32));
        assert_eq!(s.page_start, view.page_start);
        let segments: Vec<_> = (0..s.segments)
            .map(|i| text(ime, FsImeText::FsImeSegment, i))
            .collect();
        assert_eq!(segments, view.segments);
        let candidates: Vec<_> = (0..s.candidates)
            .map(|i| text(ime, FsImeText::FsImeCandidate, i))
            .collect();
        assert_eq!(candidates, view.candidates);
        let suggestions: Vec<_> = (0..s.suggestions)
            .map(|i| text(ime, FsImeText::FsImeSuggestion, i))
            .collect();
        assert_eq!(suggestions, view.suggestions);
        assert_eq!(
            text(ime, FsImeText::FsImePreedit, 0),
            view.segments.concat()
        );
    }
    assert!(
        state(ime).segments > 1,
        "Space split the conversion into segments"
    );
    // Commit: what Enter commits in the Rust session.
    let n = unsafe { fs_ime_commit(ime) };
    let committed = session.press(Key::Enter).committed.unwrap();
    assert_eq!(text(ime, FsImeText::FsImeCommitted, 0), committed);
    assert_eq!(n as usize, committed.len());
    assert_eq!(
        state(ime),
        FsImeState {
            focus: -1,
            highlighted: -1,
            ..state(ime)
        }
    );
    assert_eq!(state(ime).segments, 0);
    // Nothing typed: Enter is the application's, and a commit commits nothing.
    assert_eq!(press(ime, FsKey::FsKeyEnter, 0), 0);
    assert_eq!(unsafe { fs_ime_commit(ime) }, 0);
    assert_eq!(text(ime, FsImeText::FsImeCommitted, 0), "");
    // Clear drops the input.
    press(ime, FsKey::FsKeyChar, 'a' as u32);
    assert_eq!(text(ime, FsImeText::FsImePreedit, 0), "あ");
    assert_eq!(unsafe { fs_ime_clear(ime) }, 0);
    assert_eq!(state(ime).segments, 0);
    unsafe { fs_ime_free(ime) };
}

#[test]
fn the_user_folder_gets_the_history_on_save() {
    let user = tempfile::tempdir().unwrap();
    let ime = open(Some(user.path()));
    for ch in "kyouhaiitenki".chars() {
        press(ime, FsKey::FsKeyChar, ch as u32);
    }
    assert!(unsafe { fs_ime_commit(ime) } > 0);
    assert_eq!(unsafe { fs_ime_save(ime) }, 0, "{}", last_error());
    unsafe { fs_ime_free(ime) };
    let history = fastsoftmax_ime::UserData::new(user.path())
        .history()
        .unwrap()
        .0;
    assert!(!history.is_empty(), "the commit was learned and saved");
    // Without a folder there is nowhere to save: an error that says so.
    let ime = open(None);
    assert_eq!(
        unsafe { fs_ime_save(ime) },
        FsStatus::FsErrorArgument as i32
    );
    assert!(last_error().contains("without a user folder"));
    unsafe { fs_ime_free(ime) };
}

#[test]
fn bad_arguments_are_statuses_with_messages() {
    let ime = open(None);
    let status = |r: i32| -> (i32, String) { (r, last_error()) };
    let (r, m) = status(unsafe { fs_ime_key(ime, 99, 0) });
    assert_eq!(r, FsStatus::FsErrorArgument as i32);
    assert!(m.contains("key 99"), "{m}");
    let (r, m) = status(unsafe { fs_ime_key(ime, FsKey::FsKeyChar as u32, 0xD800) });
    assert_eq!(r, FsStatus::FsErrorArgument as i32);
    assert!(m.contains("0xd800"), "{m}");
    let (r, m) = status(unsafe { fs_ime_key(ime, FsKey::FsKeyFunction as u32, 13) });
    assert_eq!(r, FsStatus::FsErrorArgument as i32);
    assert!(m.contains("F1–F12"), "{m}");
    let (r, m) = status(unsafe { fs_ime_text(ime, 7, 0, null_mut(), 0) });
    assert_eq!(r, FsStatus::FsErrorArgument as i32);
    assert!(m.contains("what 7"), "{m}");
    let (r, m) =
        status(unsafe { fs_ime_text(ime, FsImeText::FsImeCandidate as u32, 0, null_mut(), 0) });
    assert_eq!(r, FsStatus::FsErrorArgument as i32);
    assert!(m.contains("candidate 0 does not exist"), "{m}");
    assert_eq!(
        unsafe { fs_ime_key(null_mut(), FsKey::FsKeySpace as u32, 0) },
        FsStatus::FsErrorNull as i32
    );
    assert_eq!(last_error(), "ime is NULL");
    assert_eq!(
        unsafe { fs_ime_state(ime, null_mut()) },
        FsStatus::FsErrorNull as i32
    );
    assert_eq!(last_error(), "out is NULL");
    unsafe { fs_ime_free(ime) };
    unsafe { fs_ime_free(null_mut()) };

    // A folder of another kind (a language model): the folder named.
    let lm = c(model_dir().to_str().unwrap());
    assert!(unsafe { fs_ime_open(lm.as_ptr(), null()) }.is_null());
    assert!(last_error().contains("ptb-small-lstm"), "{}", last_error());
    let latin1 = [b'd', 0xe9, 0];
    assert!(unsafe { fs_ime_open(latin1.as_ptr() as *const c_char, null()) }.is_null());
    assert!(last_error().starts_with("dir is not UTF-8"));
}
