//! `ime dict` and `ime history`: the user's dictionary and what the converter learned, in the
//! folder every front end shares (`UserData`).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use fastsoftmax_ime::history::Learned;
use fastsoftmax_ime::{Pos, UserData, UserWord};

#[derive(Args, Debug)]
pub struct Folder {
    /// The user data folder (default: $FASTSOFTMAX_IME_DIR, else
    /// $XDG_DATA_HOME/fastsoftmax/ime, else ~/.local/share/fastsoftmax/ime).
    #[arg(long, global = true)]
    dir: Option<PathBuf>,
}

impl Folder {
    pub fn data(&self) -> anyhow::Result<UserData> {
        Ok(match &self.dir {
            Some(dir) => UserData::new(dir),
            None => UserData::default_dir()?,
        })
    }
}

#[derive(Subcommand, Debug)]
pub enum DictAction {
    /// List the words, one per line in the dictionary's format.
    List,
    /// Add a word: its reading (hiragana), how it is written, and its part of speech.
    Add {
        reading: String,
        surface: String,
        /// A part of speech of Mozc's dictionary tool (名詞, 固有名詞, 人名, 地名, 動詞一段, 抑制単語
        /// to never offer the surface for the reading, …).
        #[arg(long, default_value = "名詞")]
        pos: String,
        #[arg(long, default_value = "")]
        comment: String,
    },
    /// Remove a word (every part of speech of that reading and surface).
    Remove { reading: String, surface: String },
    /// Add the words of a file exported by Mozc's or Google Japanese Input's dictionary tool
    /// (`reading<TAB>surface<TAB>part of speech<TAB>comment`, UTF-8 or UTF-16). A bad line
    /// stops the import and changes nothing.
    Import { file: PathBuf },
    /// Write the dictionary in that format (what those tools import).
    Export { file: PathBuf },
}

#[derive(Subcommand, Debug)]
pub enum HistoryAction {
    /// List what was learned, heaviest first.
    List {
        /// Entries to show.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Forget one conversion of a reading (and the pairs its text is part of).
    Forget { reading: String, surface: String },
    /// Forget everything learned.
    ForgetAll,
}

pub fn dict(folder: &Folder, action: DictAction) -> anyhow::Result<()> {
    let data = folder.data()?;
    let path = data.dictionary_path();
    let mut dictionary = data
        .dictionary()
        .with_context(|| format!("reading the user dictionary {}", path.display()))?;
    match action {
        DictAction::List => {
            for w in dictionary.list() {
                println!("{}\t{}\t{}\t{}", w.reading, w.surface, w.pos, w.comment);
            }
            eprintln!("{} words in {}", dictionary.len(), path.display());
            return Ok(());
        }
        DictAction::Add {
            reading,
            surface,
            pos,
            comment,
        } => {
            let pos: Pos = pos.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
            dictionary.add(UserWord::new(&reading, &surface, pos, &comment))?;
            println!("added {reading} → {surface} ({pos})");
        }
        DictAction::Remove { reading, surface } => {
            if !dictionary.remove(&reading, &surface) {
                anyhow::bail!(
                    "{reading} → {surface} is not in {} (`ime dict list` shows its words)",
                    path.display()
                );
            }
            println!("removed {reading} → {surface}");
        }
        DictAction::Import { file } => {
            let report = dictionary.import(&file)?;
            println!(
                "{}: {} words added, {} already there",
                file.display(),
                report.added,
                report.duplicates
            );
        }
        DictAction::Export { file } => {
            dictionary.export(&file)?;
            println!("{} words written to {}", dictionary.len(), file.display());
            return Ok(());
        }
    }
    data.save_dictionary(&dictionary)?;
    Ok(())
}

pub fn history(folder: &Folder, action: HistoryAction) -> anyhow::Result<()> {
    let data = folder.data()?;
    let (mut history, warning) = data
        .history()
        .with_context(|| format!("reading the history {}", data.history_path().display()))?;
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    match action {
        HistoryAction::List { limit } => {
            let entries = history.entries();
            for e in entries.iter().take(limit) {
                match e.learned {
                    Learned::Word { reading, surface } => {
                        println!(
                            "{reading} → {surface}\tweight {:.2}\tage {}",
                            e.weight, e.age
                        )
                    }
                    Learned::Pair { prev, surface } => {
                        println!("{prev} · {surface}\tweight {:.2}\tage {}", e.weight, e.age)
                    }
                }
            }
            eprintln!(
                "{} entries in {}",
                entries.len(),
                data.history_path().display()
            );
            return Ok(());
        }
        HistoryAction::Forget { reading, surface } => {
            let n = history.forget(&reading, &surface);
            if n == 0 {
                anyhow::bail!("nothing learned for {reading} → {surface}");
            }
            println!("forgot {n} entries");
        }
        HistoryAction::ForgetAll => {
            history.forget_all();
            println!("forgot everything learned");
        }
    }
    data.save_history(&history)?;
    Ok(())
}
