//! X keysyms and IBus modifier masks → the session's keys.
//!
//! IBus hands an engine the keysym the client's keymap produced (so Shift+a arrives as `A`,
//! and a layout's symbols as themselves), the hardware keycode (unused here: the keysym
//! already says what the key means on the user's layout) and the modifier state.

use fastsoftmax_ime::Key;

/// `IBusModifierType` bits (`src/ibustypes.h`).
pub const SHIFT_MASK: u32 = 1 << 0;
pub const CONTROL_MASK: u32 = 1 << 2;
pub const MOD1_MASK: u32 = 1 << 3;
pub const MOD4_MASK: u32 = 1 << 6;
pub const SUPER_MASK: u32 = 1 << 26;
pub const HYPER_MASK: u32 = 1 << 27;
pub const META_MASK: u32 = 1 << 28;
pub const RELEASE_MASK: u32 = 1 << 30;

/// Modifiers that make a key a shortcut of the application (Ctrl+C, Alt+F4, Super+…), which the
/// input method never takes.
const SHORTCUT_MASK: u32 =
    CONTROL_MASK | MOD1_MASK | MOD4_MASK | SUPER_MASK | HYPER_MASK | META_MASK;

/// What a key event is to the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A key the session handles.
    Key(Key),
    /// A key the session has no binding for (Tab, Home, Delete, a shortcut): the application's,
    /// unless an input is being typed, which it would otherwise land in the middle of.
    Other,
    /// Releases and lone modifiers: always the application's.
    Ignored,
}

/// Maps one key event.
pub fn event(keyval: u32, state: u32) -> Event {
    if state & RELEASE_MASK != 0 {
        return Event::Ignored;
    }
    if state & SHORTCUT_MASK != 0 {
        return match keyval {
            0xffe1..=0xffee => Event::Ignored,
            _ => Event::Other,
        };
    }
    let shift = state & SHIFT_MASK != 0;
    let key = match keyval {
        0x20 => Key::Space,
        // Printable ASCII and Latin-1: the keysym is the character.
        0x21..=0x7e | 0xa1..=0xff => Key::Char(char::from_u32(keyval).unwrap_or('?')),
        // Unicode keysyms (0x0100_0000 + code point), which layouts use beyond Latin-1.
        0x0100_00a0..=0x0110_ffff => match char::from_u32(keyval - 0x0100_0000) {
            Some(c) => Key::Char(c),
            None => return Event::Other,
        },
        0xff0d | 0xff8d => Key::Enter, // Return, KP_Enter
        0xff08 => Key::Backspace,
        0xff1b => Key::Escape,
        0xff51 | 0xff96 if shift => Key::ShiftLeft, // Left, KP_Left
        0xff53 | 0xff98 if shift => Key::ShiftRight,
        0xff51 | 0xff96 => Key::Left,
        0xff53 | 0xff98 => Key::Right,
        0xff52 | 0xff97 => Key::Up,
        0xff54 | 0xff99 => Key::Down,
        // Tab takes the first suggestion while typing and walks the candidates while
        // converting, as in the terminal converter; Shift+Tab (ISO_Left_Tab) walks back.
        0xff09 => Key::Tab,
        0xfe20 => Key::Up,
        0xff55 | 0xff9a => Key::PageUp, // Prior, KP_Prior
        0xff56 | 0xff9b => Key::PageDown,
        0xffbe..=0xffc9 => Key::Function((keyval - 0xffbe + 1) as u8), // F1–F12
        0xffb0..=0xffb9 => Key::Char((b'0' + (keyval - 0xffb0) as u8) as char), // KP_0–KP_9
        0xffe1..=0xffee => return Event::Ignored, // Shift, Control, Caps Lock, Meta, Alt, Super
        _ => return Event::Other,
    };
    Event::Key(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(keyval: u32, state: u32) -> Event {
        event(keyval, state)
    }

    #[test]
    fn letters_digits_and_capitals_are_characters() {
        assert_eq!(key(b'k' as u32, 0), Event::Key(Key::Char('k')));
        assert_eq!(key(b'U' as u32, SHIFT_MASK), Event::Key(Key::Char('U')));
        assert_eq!(key(b'7' as u32, 0), Event::Key(Key::Char('7')));
        assert_eq!(key(0xffb7, 0), Event::Key(Key::Char('7')));
        assert_eq!(key(b'-' as u32, 0), Event::Key(Key::Char('-')));
        assert_eq!(key(0xa5, 0), Event::Key(Key::Char('¥')));
        assert_eq!(key(0x0100_3042, 0), Event::Key(Key::Char('あ')));
        assert_eq!(key(0x20, 0), Event::Key(Key::Space));
    }

    #[test]
    fn shift_arrows_resize_and_function_keys_transliterate() {
        assert_eq!(key(0xff51, SHIFT_MASK), Event::Key(Key::ShiftLeft));
        assert_eq!(key(0xff53, SHIFT_MASK), Event::Key(Key::ShiftRight));
        assert_eq!(key(0xff51, 0), Event::Key(Key::Left));
        assert_eq!(key(0xff53, 0), Event::Key(Key::Right));
        assert_eq!(key(0xffc3, 0), Event::Key(Key::Function(6)));
        assert_eq!(key(0xffc7, 0), Event::Key(Key::Function(10)));
        assert_eq!(key(0xff0d, 0), Event::Key(Key::Enter));
        assert_eq!(key(0xff56, 0), Event::Key(Key::PageDown));
    }

    #[test]
    fn releases_modifiers_and_shortcuts_are_not_the_sessions() {
        assert_eq!(key(b'a' as u32, RELEASE_MASK), Event::Ignored);
        assert_eq!(key(0xffe1, SHIFT_MASK), Event::Ignored);
        assert_eq!(key(0xffe3, 0), Event::Ignored);
        assert_eq!(key(b'c' as u32, CONTROL_MASK), Event::Other);
        assert_eq!(key(0xffc1, MOD1_MASK), Event::Other);
        assert_eq!(key(0xff50, 0), Event::Other); // Home
                                                  // Any 32-bit value is safe: what a client sends is not trusted.
        for keyval in [0, 0x1f, 0x7f, 0xa0, 0x0100_d800, 0x0111_0000, u32::MAX] {
            event(keyval, 0);
            event(keyval, u32::MAX);
        }
    }
}
