//! Corpora, vocabularies and batching for fastsoftmax.
//!
//! - [`corpus`]: read any whitespace-tokenized text (one sentence per line) into ids.
//! - [`batch`]: split a token stream into parallel streams and truncated-BPTT windows.
//! - [`ptb`]: fetch and verify the Penn Treebank (Mikolov's 10k-word version).
//! - [`brown`]: fetch the Brown corpus and map it to PTB style (out-of-domain test text).
//! - [`bible`]: fetch the English → German Bible (verse pairs, split by book) for translation.
//! - [`ja`]: Japanese text for the IME (KWDLC, Aozora segmented with mecab-ipadic);
//!   [`ja_sources`] fetches both from their repositories where no copy is at hand.

pub mod batch;
pub mod bible;
pub mod brown;
pub mod corpus;
pub mod ja;
pub mod ja_sources;
pub mod ptb;

pub use fastsoftmax_infer::model::vocab::{Vocab, EOS, UNK};

use std::path::PathBuf;

/// Errors of the data layer; each names the file and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Engine(#[from] fastsoftmax_infer::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, source }
}

/// A directory removed (with its contents) when dropped, errors included: where fetchers
/// download before they verify.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn create(path: PathBuf) -> Result<Self> {
        std::fs::create_dir_all(&path).map_err(io_err(&path))?;
        Ok(Self(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
