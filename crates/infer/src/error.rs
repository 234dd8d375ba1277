//! One error type for the engine. Every message names the file or field at fault and the fix.

use std::path::PathBuf;

/// What went wrong, with enough context to act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file exists but its contents are not what the format requires.
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },
    /// Arguments that cannot work together (dimensions, k, ids).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// An I/O failure on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
    /// A file at `path` that is not what it should be; `message` names the problem and the fix.
    pub fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
