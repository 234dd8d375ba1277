//! The user's own data, in one folder every front end shares (the terminal converter, the
//! IBus engine, an app): `history.tsv` ([`History`]) and `dictionary.tsv`
//! ([`UserDictionary`], Mozc's dictionary-tool format).
//!
//! The folder is `$FASTSOFTMAX_IME_DIR`, else `$XDG_DATA_HOME/fastsoftmax/ime`, else
//! `~/.local/share/fastsoftmax/ime`.

use std::path::{Path, PathBuf};

use fastsoftmax_infer::{Error, Result};

use crate::decode::Scorer;
use crate::history::History;
use crate::session::Session;
use crate::user_dict::{UserDictionary, USER_BONUS};

pub const HISTORY_FILE: &str = "history.tsv";
pub const DICTIONARY_FILE: &str = "dictionary.tsv";

/// A user data folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserData {
    pub dir: PathBuf,
}

impl UserData {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        UserData { dir: dir.into() }
    }

    /// The default folder (see the module doc), or an error saying which variable to set.
    pub fn default_dir() -> Result<Self> {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(dir) = var("FASTSOFTMAX_IME_DIR") {
            return Ok(Self::new(dir));
        }
        if let Some(data) = var("XDG_DATA_HOME") {
            return Ok(Self::new(Path::new(&data).join("fastsoftmax/ime")));
        }
        if let Some(home) = var("HOME") {
            return Ok(Self::new(
                Path::new(&home).join(".local/share/fastsoftmax/ime"),
            ));
        }
        Err(Error::Invalid(
            "no folder for the user's history and dictionary: set FASTSOFTMAX_IME_DIR (or \
             XDG_DATA_HOME or HOME)"
                .into(),
        ))
    }

    pub fn history_path(&self) -> PathBuf {
        self.dir.join(HISTORY_FILE)
    }

    pub fn dictionary_path(&self) -> PathBuf {
        self.dir.join(DICTIONARY_FILE)
    }

    /// The history (empty when none was saved) and a warning when its file was cut short.
    pub fn history(&self) -> Result<(History, Option<String>)> {
        History::load(&self.history_path())
    }

    /// The dictionary (empty when none was saved).
    pub fn dictionary(&self) -> Result<UserDictionary> {
        UserDictionary::load(&self.dictionary_path())
    }

    pub fn save_history(&self, history: &History) -> Result<()> {
        self.create()?;
        history.save(&self.history_path())
    }

    pub fn save_dictionary(&self, dictionary: &UserDictionary) -> Result<()> {
        self.create()?;
        dictionary.save(&self.dictionary_path())
    }

    /// Gives `session` the saved history and dictionary; returns the warnings to show (a
    /// history cut short by a crash is kept as far as it goes).
    pub fn load_into<S: Scorer>(&self, session: &mut Session<'_, S>) -> Result<Vec<String>> {
        let (history, warning) = self.history()?;
        session.set_history(history);
        let dictionary = self.dictionary()?;
        if !dictionary.is_empty() {
            session.set_user_dictionary(&dictionary, USER_BONUS);
        }
        Ok(warning.into_iter().collect())
    }

    fn create(&self) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))
    }
}
