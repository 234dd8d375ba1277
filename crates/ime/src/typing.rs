//! The shipped converter and one typing session on it as one value, with what it shows after
//! each call: what an app or a binding keeps for a text field (the C ABI's `FsIme`, the Python
//! module's `ImeSession`), which it may hand from one thread to another.

use std::path::Path;

use fastsoftmax_infer::{Error, Result};

use crate::converter::ConverterScorer;
use crate::session::PAGE;
use crate::{Converter, Key, Session, UserData, View};

type Typing<'c> = Session<'c, ConverterScorer<'c>>;

self_cell::self_cell!(
    struct Cell {
        owner: Converter,
        #[not_covariant]
        dependent: Typing,
    }
);

/// A converter and a session on it, offering a page ([`PAGE`]) of candidates, what the last
/// call left to draw and commit, and the user's folder if one was given.
pub struct OwnedSession {
    cell: Cell,
    view: View,
    committed: String,
    user: Option<UserData>,
}

// SAFETY: the session's LM states are reference-counted (`Rc`) and cache their normalisers in
// `RefCell`s, so the compiler does not call the session `Send`. Every clone of those states
// lives inside this value (in the session, its decoder and its scorer, all owned here), and
// none can leave it: `with` lends the session to a closure that is `Send` and returns a `Send`
// value, so neither can carry an `Rc` out. Moving the whole value to another thread therefore
// moves every count and cell with it. It is not `Sync`: one thread at a time.
unsafe impl Send for OwnedSession {}

impl OwnedSession {
    /// Opens the converter in `dir` (see [`Converter::open`]) and a session on it, with the
    /// user's history and dictionary from `user` when given ([`Self::save`] writes back to
    /// it). Returns the warnings to show (a history cut short by a crash loads as far as it
    /// goes).
    pub fn open(dir: &Path, user: Option<UserData>) -> Result<(OwnedSession, Vec<String>)> {
        let converter = Converter::open(dir)?;
        let mut warnings = Vec::new();
        let cell = Cell::try_new(converter, |c| {
            let mut session = c.session(PAGE)?;
            if let Some(user) = &user {
                warnings = user.load_into(&mut session)?;
            }
            Ok::<_, fastsoftmax_infer::Error>(session)
        })?;
        let owned = OwnedSession {
            cell,
            view: View::default(),
            committed: String::new(),
            user,
        };
        Ok((owned, warnings))
    }

    /// Presses `key` (Mozc's bindings, [`Session::press`]); whether the input method used it.
    /// [`Self::view`] and [`Self::committed`] then say what it did.
    pub fn press(&mut self, key: Key) -> bool {
        self.after(Some(key))
    }

    /// Commits what is shown (converted or not), as a text field losing focus should; returns
    /// it ("" when nothing was typed).
    pub fn commit(&mut self) -> &str {
        let typed = !self.view.segments.is_empty();
        self.after(typed.then_some(Key::Enter));
        &self.committed
    }

    /// Drops what is typed, committing nothing.
    pub fn clear(&mut self) {
        self.with(|s| s.clear());
        self.after(None);
    }

    /// Presses `key`, if any, and keeps what it committed and what the view is now.
    fn after(&mut self, key: Option<Key>) -> bool {
        let (reply, view) = self.cell.with_dependent_mut(|_, s| {
            let reply = key.map(|k| s.press(k)).unwrap_or_default();
            (reply, s.view())
        });
        self.committed = reply.committed.unwrap_or_default();
        self.view = view;
        reply.consumed
    }

    /// Writes what the session learned (the history) to the user's folder, atomically.
    pub fn save(&mut self) -> Result<()> {
        let Some(user) = &self.user else {
            return Err(Error::Invalid(
                "the input method was opened without a user folder: give one when opening it"
                    .into(),
            ));
        };
        self.cell
            .with_dependent_mut(|_, s| user.save_history(s.history()))
    }

    /// What a front end draws after the last call.
    pub fn view(&self) -> &View {
        &self.view
    }

    /// What the last call committed ("" when nothing).
    pub fn committed(&self) -> &str {
        &self.committed
    }

    /// Runs `f` on the session (call [`Self::press`] or [`Self::clear`] after a change that the
    /// view should show). `Send` on both sides keeps the session's states inside (see the
    /// SAFETY note on `Send`).
    pub fn with<R: Send>(
        &mut self,
        f: impl FnOnce(&mut Session<'_, ConverterScorer<'_>>) -> R + Send,
    ) -> R {
        self.cell.with_dependent_mut(|_, s| f(s))
    }

    /// The converter the session runs on.
    pub fn converter(&self) -> &Converter {
        self.cell.borrow_owner()
    }
}
