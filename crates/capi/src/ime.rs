//! The Japanese input method: the shipped converter and one typing session
//! ([`OwnedSession`]), driven one key at a time with Mozc's bindings as the IBus engine drives it.
//! After each call the handle holds what a front end draws (`fastsoftmax_ime::View`) and the text the key
//! committed; `fs_ime_state` and `fs_ime_text` read them.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use fastsoftmax_ime::{Key, OwnedSession, UserData};

use crate::{copy_out, failure, guard, guard_handle, null, text, Failure, FsStatus};

/// A key, as [`fs_ime_key`] takes it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsKey {
    /// A printable character (romaji, digits, symbols; a capital starts Latin input): the
    /// code point is `fs_ime_key`'s `value`.
    FsKeyChar = 0,
    FsKeySpace,
    FsKeyEnter,
    FsKeyBackspace,
    FsKeyEscape,
    FsKeyLeft,
    FsKeyRight,
    /// Shift+← / Shift+→: shrink / grow the focused segment.
    FsKeyShiftLeft,
    FsKeyShiftRight,
    FsKeyUp,
    FsKeyDown,
    FsKeyPageUp,
    FsKeyPageDown,
    /// F1–F12 (`value` 1–12; F6–F10 turn the input into hiragana, katakana, half-width, …).
    FsKeyFunction,
    /// The first suggestion while composing; the next candidate while converting.
    FsKeyTab,
}

/// Which text [`fs_ime_text`] copies.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsImeText {
    /// What the last key committed ("" when nothing).
    FsImeCommitted = 0,
    /// The whole preedit (the segments joined).
    FsImePreedit,
    /// Segment `i` of the preedit.
    FsImeSegment,
    /// Candidate `i` of the window's page.
    FsImeCandidate,
    /// Suggestion `i` (what Tab takes first, then the others).
    FsImeSuggestion,
}

/// What a front end draws, in numbers (the texts come from [`fs_ime_text`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsImeState {
    /// Segments of the preedit (0: nothing typed; 1 while composing).
    pub segments: usize,
    /// The focused segment while converting, else -1.
    pub focus: i32,
    /// Candidates on the window's page (0: the window is closed).
    pub candidates: usize,
    /// The highlighted candidate of the page, else -1.
    pub highlighted: i32,
    /// The page's first candidate's index in the whole list.
    pub page_start: usize,
    /// Suggestions offered while composing.
    pub suggestions: usize,
}

/// An input method: the converter, a typing session and what it shows, and the user's
/// folder if one was given.
///
/// Threads: one at a time; it may move between threads.
pub struct FsIme {
    typing: OwnedSession,
}

/// The claim [`FsIme`]'s documentation makes: it may move between threads.
const _: fn() = || {
    fn movable<T: Send>() {}
    movable::<FsIme>();
};

/// The C enum `E` a `u32` names (an out-of-range value from C is an error, not undefined).
fn enumerated<E: Copy>(value: u32, all: &[E], name: &str) -> Result<E, Failure> {
    all.get(value as usize).copied().ok_or_else(|| {
        Failure(
            FsStatus::FsErrorArgument,
            format!(
                "{name} {value} is not one of the {} in the header",
                all.len()
            ),
        )
    })
}

const KEYS: [FsKey; 15] = [
    FsKey::FsKeyChar,
    FsKey::FsKeySpace,
    FsKey::FsKeyEnter,
    FsKey::FsKeyBackspace,
    FsKey::FsKeyEscape,
    FsKey::FsKeyLeft,
    FsKey::FsKeyRight,
    FsKey::FsKeyShiftLeft,
    FsKey::FsKeyShiftRight,
    FsKey::FsKeyUp,
    FsKey::FsKeyDown,
    FsKey::FsKeyPageUp,
    FsKey::FsKeyPageDown,
    FsKey::FsKeyFunction,
    FsKey::FsKeyTab,
];

const TEXTS: [FsImeText; 5] = [
    FsImeText::FsImeCommitted,
    FsImeText::FsImePreedit,
    FsImeText::FsImeSegment,
    FsImeText::FsImeCandidate,
    FsImeText::FsImeSuggestion,
];

/// Opens the input method in converter folder `dir` (the shipped one is
/// `assets/models/ime-ja`). With `user_dir` (NULL: none), the user's history and dictionary
/// there are used, as `fastsoftmax ime` and the IBus engine use theirs, and [`fs_ime_save`]
/// writes what was learned back. NULL on failure (see `fs_last_error()`). Free with
/// [`fs_ime_free`].
///
/// # Safety
/// `dir` and `user_dir` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn fs_ime_open(dir: *const c_char, user_dir: *const c_char) -> *mut FsIme {
    guard_handle(|| {
        let dir = PathBuf::from(text(dir, "dir")?);
        let user = match user_dir.is_null() {
            true => None,
            false => Some(UserData::new(text(user_dir, "user_dir")?)),
        };
        // A history cut short by a crash loads as far as it goes: nothing to report.
        let (typing, _warnings) = OwnedSession::open(&dir, user).map_err(failure)?;
        Ok(Box::new(FsIme { typing }))
    })
}

/// Frees an input method (what was learned since the last [`fs_ime_save`] is not saved);
/// NULL is ignored.
///
/// # Safety
/// `ime` is NULL or a handle from [`fs_ime_open`] not freed before.
#[no_mangle]
pub unsafe extern "C" fn fs_ime_free(ime: *mut FsIme) {
    if !ime.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(ime))));
    }
}

/// Presses `key`, an [`FsKey`] (`value`: the code point of an [`FsKey::FsKeyChar`], the number of an
/// [`FsKey::FsKeyFunction`], else ignored). Returns 1 when the input method used the key, 0
/// when the application should have it (a Space or Enter with nothing typed), or a negative
/// status. The text it committed is then [`FsImeText::FsImeCommitted`].
///
/// # Safety
/// `ime` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fs_ime_key(ime: *mut FsIme, key: u32, value: u32) -> i32 {
    guard(|| {
        let ime = ime.as_mut().ok_or_else(|| null("ime"))?;
        let key = match enumerated(key, &KEYS, "key")? {
            FsKey::FsKeyChar => Key::Char(char::from_u32(value).filter(|c| !c.is_control()).ok_or_else(
                || {
                    Failure(
                        FsStatus::FsErrorArgument,
                        format!("value {value:#x} is not a printable character (a Unicode code point)"),
                    )
                },
            )?),
            FsKey::FsKeySpace => Key::Space,
            FsKey::FsKeyEnter => Key::Enter,
            FsKey::FsKeyBackspace => Key::Backspace,
            FsKey::FsKeyEscape => Key::Escape,
            FsKey::FsKeyLeft => Key::Left,
            FsKey::FsKeyRight => Key::Right,
            FsKey::FsKeyShiftLeft => Key::ShiftLeft,
            FsKey::FsKeyShiftRight => Key::ShiftRight,
            FsKey::FsKeyUp => Key::Up,
            FsKey::FsKeyDown => Key::Down,
            FsKey::FsKeyPageUp => Key::PageUp,
            FsKey::FsKeyPageDown => Key::PageDown,
            FsKey::FsKeyFunction => match u8::try_from(value) {
                Ok(n @ 1..=12) => Key::Function(n),
                _ => {
                    return Err(Failure(
                        FsStatus::FsErrorArgument,
                        format!("function key {value} is not F1–F12: pass 1 to 12"),
                    ))
                }
            },
            FsKey::FsKeyTab => Key::Tab,
        };
        Ok(ime.typing.press(key) as i32)
    })
}

/// Commits what is shown (the preedit, converted or not), as a text field losing focus
/// should. Returns the committed text's length in bytes (0: nothing was typed); the text is
/// then [`FsImeText::FsImeCommitted`].
///
/// # Safety
/// `ime` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fs_ime_commit(ime: *mut FsIme) -> i32 {
    guard(|| {
        let ime = ime.as_mut().ok_or_else(|| null("ime"))?;
        Ok(ime.typing.commit().len() as i32)
    })
}

/// Drops what is typed, committing nothing (the text committed before still conditions the
/// next conversion).
///
/// # Safety
/// `ime` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fs_ime_clear(ime: *mut FsIme) -> i32 {
    guard(|| {
        let ime = ime.as_mut().ok_or_else(|| null("ime"))?;
        ime.typing.clear();
        Ok(0)
    })
}

/// What a front end draws now, into `*out`.
///
/// # Safety
/// `ime` is NULL or a live handle; `out` NULL or a place for the struct.
#[no_mangle]
pub unsafe extern "C" fn fs_ime_state(ime: *const FsIme, out: *mut FsImeState) -> i32 {
    guard(|| {
        let ime = ime.as_ref().ok_or_else(|| null("ime"))?;
        let out = out.as_mut().ok_or_else(|| null("out"))?;
        let index = |i: Option<usize>| i.map_or(-1, |i| i as i32);
        let v = ime.typing.view();
        *out = FsImeState {
            segments: v.segments.len(),
            focus: index(v.focus),
            candidates: v.candidates.len(),
            highlighted: index(v.highlighted),
            page_start: v.page_start,
            suggestions: v.suggestions.len(),
        };
        Ok(0)
    })
}

/// Copies text `what`, an [`FsImeText`] (item `i` of the segments, candidates or suggestions; `i` is ignored
/// for the others) into `buf` (`len` bytes, NUL-terminated, cut to fit). Returns its length in
/// bytes without the NUL (`len - 1` or more when cut: call with `len` 0 to learn it), or a
/// negative status (`i` out of range is [`FsStatus::FsErrorArgument`]).
///
/// # Safety
/// `ime` is NULL or a live handle; `buf` NULL or room for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn fs_ime_text(
    ime: *const FsIme,
    what: u32,
    i: usize,
    buf: *mut c_char,
    len: usize,
) -> i32 {
    guard(|| {
        let ime = ime.as_ref().ok_or_else(|| null("ime"))?;
        let what = enumerated(what, &TEXTS, "what")?;
        let v = ime.typing.view();
        let item = |list: &[String], name: &str| {
            list.get(i).cloned().ok_or_else(|| {
                Failure(
                    FsStatus::FsErrorArgument,
                    format!(
                        "{name} {i} does not exist: there are {} (fs_ime_state)",
                        list.len()
                    ),
                )
            })
        };
        let s = match what {
            FsImeText::FsImeCommitted => ime.typing.committed().to_string(),
            FsImeText::FsImePreedit => v.segments.concat(),
            FsImeText::FsImeSegment => item(&v.segments, "segment")?,
            FsImeText::FsImeCandidate => item(&v.candidates, "candidate")?,
            FsImeText::FsImeSuggestion => item(&v.suggestions, "suggestion")?,
        };
        copy_out(&s, buf, len)
    })
}

/// Writes what the session learned (the history) to the user folder given to
/// [`fs_ime_open`], atomically.
///
/// # Safety
/// `ime` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn fs_ime_save(ime: *mut FsIme) -> i32 {
    guard(|| {
        let ime = ime.as_mut().ok_or_else(|| null("ime"))?;
        ime.typing.save().map_err(failure)?;
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value from C names the variant of that discriminant.
    #[test]
    fn the_tables_are_in_discriminant_order() {
        for (i, key) in KEYS.iter().enumerate() {
            assert_eq!(*key as usize, i);
        }
        for (i, what) in TEXTS.iter().enumerate() {
            assert_eq!(*what as usize, i);
        }
        assert_eq!(
            KEYS.last(),
            Some(&FsKey::FsKeyTab),
            "a key added to FsKey goes in KEYS"
        );
        assert_eq!(TEXTS.last(), Some(&FsImeText::FsImeSuggestion));
    }
}
