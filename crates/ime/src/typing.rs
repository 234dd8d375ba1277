//! The shipped converter and one typing session on it as one value: what an app or a binding
//! keeps for a text field (the C ABI's `FsIme`, the Python module's `ImeSession`), which it
//! may hand from one thread to another.

use std::path::Path;

use fastsoftmax_infer::Result;

use crate::converter::ConverterScorer;
use crate::session::PAGE;
use crate::{Converter, Session, UserData};

type Typing<'c> = Session<'c, ConverterScorer<'c>>;

self_cell::self_cell!(
    struct Cell {
        owner: Converter,
        #[not_covariant]
        dependent: Typing,
    }
);

/// A converter and a session on it, offering a page ([`PAGE`]) of candidates.
pub struct OwnedSession {
    cell: Cell,
}

// SAFETY: the session's LM states are reference-counted (`Rc`) and cache their normalisers in
// `RefCell`s, so the compiler does not call the session `Send`. Every clone of those states
// lives inside this value (in the session, its decoder and its scorer, all owned here; none is
// handed out: `session` lends them only for the duration of a call), so moving the whole value
// to another thread moves every count and cell with it. It is not `Sync`: one thread at a time.
unsafe impl Send for OwnedSession {}

impl OwnedSession {
    /// Opens the converter in `dir` (see [`Converter::open`]) and a session on it, with the
    /// user's history and dictionary from `user` when given. Returns the warnings to show (a
    /// history cut short by a crash loads as far as it goes).
    pub fn open(dir: &Path, user: Option<&UserData>) -> Result<(OwnedSession, Vec<String>)> {
        let converter = Converter::open(dir)?;
        let mut warnings = Vec::new();
        let cell = Cell::try_new(converter, |c| {
            let mut session = c.session(PAGE)?;
            if let Some(user) = user {
                warnings = user.load_into(&mut session)?;
            }
            Ok::<_, fastsoftmax_infer::Error>(session)
        })?;
        Ok((OwnedSession { cell }, warnings))
    }

    /// Runs `f` on the session.
    pub fn with<R>(&mut self, f: impl FnOnce(&mut Session<'_, ConverterScorer<'_>>) -> R) -> R {
        self.cell.with_dependent_mut(|_, s| f(s))
    }

    /// The converter the session runs on.
    pub fn converter(&self) -> &Converter {
        self.cell.borrow_owner()
    }
}
