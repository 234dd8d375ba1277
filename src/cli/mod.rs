//! Argument parsing and dispatch. Each subcommand lives in its own file.

mod bench;
mod bleu;
mod build_vmap;
mod compare;
mod data;
mod distill;
mod ds_figures;
mod eval;
mod export_npy;
mod ime;
mod plot;
mod predict;
mod quantize;
mod quickstart;
mod synthetic;
mod text;
mod train;
mod train_head;
mod train_nmt;
mod translate;
mod verify;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// A parallel corpus on disk: `DIR/SPLIT.SRC` and `DIR/SPLIT.TGT`, one sentence per line,
/// line `i` of one the translation of line `i` of the other (see `data fetch bible`).
#[derive(Args, Debug, Clone)]
pub struct Parallel {
    /// Directory of the parallel corpus: {train,valid,test}.{SRC,TGT}.
    #[arg(long, default_value = "data/bible")]
    pub data: PathBuf,
    /// Source language suffix of the files.
    #[arg(long, default_value = "en")]
    pub src: String,
    /// Target language suffix of the files.
    #[arg(long, default_value = "de")]
    pub tgt: String,
}

impl Parallel {
    /// The source and target files of `split`.
    pub fn files(&self, split: &str) -> (PathBuf, PathBuf) {
        let file = |lang: &str| self.data.join(format!("{split}.{lang}"));
        (file(&self.src), file(&self.tgt))
    }
}

/// Train language models on burn and make their large-vocabulary softmax fast on a CPU.
#[derive(Parser, Debug)]
#[command(name = "fastsoftmax", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Download and verify corpora (`data fetch ptb`).
    Data(data::DataArgs),
    /// Train an LSTM/GRU language model from a JSON config and export it for the engine.
    TrainLm(train::TrainLmArgs),
    /// Train an attention translator (seq2seq) from a JSON config and export it for the engine.
    TrainNmt(train_nmt::TrainNmtArgs),
    /// Translate lines of text with a trained translator (burn-free engine, beam search).
    Translate(translate::TranslateArgs),
    /// Sequence-level distillation: a teacher translator re-translates the training source
    /// (beam 5), for `train-nmt --distilled`.
    Distill(distill::DistillArgs),
    /// Quantize a translator's matrices to int8 or int16 (a quarter or half of the size).
    Quantize(quantize::QuantizeArgs),
    /// The Japanese input method: with no subcommand, the interactive converter (type romaji,
    /// Space converts, Enter commits, Ctrl-C quits); subcommands convert, evaluate, pack, and
    /// keep the user's dictionary and history.
    ///
    /// The interactive converter: type romaji (digits and symbols are typed; a capital starts
    /// Latin input until a space) and the kana, the best conversion and the n-best follow every
    /// key. Space converts into segments: ←/→ move between them, Shift+←/→ resize the focused
    /// one, Space or ↓ opens its candidates (1-9 pick, PgUp/PgDn page), F6–F10 write it in
    /// hiragana, katakana, half-width katakana, full-width or ASCII letters. Enter commits (on
    /// an empty input it starts a new paragraph), Esc or Backspace go back to the kana, Esc
    /// clears the input, Ctrl-C quits and prints what was committed. The committed text stays
    /// the language model's context for what is typed next, and is learned: the history and
    /// the user dictionary (`ime history`, `ime dict`) live in $FASTSOFTMAX_IME_DIR, else
    /// $XDG_DATA_HOME/fastsoftmax/ime, else ~/.local/share/fastsoftmax/ime. The LSTM runs with
    /// incremental vocabulary selection and its tail estimate unless --softmax says otherwise.
    Ime(Box<ime::ImeArgs>),
    /// Word-align the training split and write a vocabulary map (translate --vmap).
    BuildVmap(build_vmap::BuildVmapArgs),
    /// The translator's tokenizer and detokenizer as stdin → stdout filters.
    Text(text::TextArgs),
    /// Corpus BLEU of a system output against references, as sacreBLEU computes it by default.
    Bleu(bleu::BleuArgs),
    /// Train a fast softmax head (l2s, ds, adaptive, dsoftmax) for a model; saved under MODEL/heads/NAME.
    TrainHead(train_head::TrainHeadArgs),
    /// Perplexity of a model on a tokenized text.
    Eval(eval::EvalArgs),
    /// Precision, accuracy and speed of softmax heads against the exact full softmax.
    Bench(bench::BenchArgs),
    /// Sweep every method's knob on one model and text: Table 2 at P@1 ≥ 0.97, P@1/P@5 vs speedup plots, JSON.
    Compare(compare::CompareArgs),
    /// The output layer and a text's contexts as .npy arrays, for peer scripts (numpy, faiss).
    ExportNpy(export_npy::ExportNpyArgs),
    /// Precision-versus-speedup figures (PNG + SVG) from `bench --json` rows.
    Plot(plot::PlotArgs),
    /// The most likely next words after a prompt.
    Predict(predict::PredictArgs),
    /// DS-Softmax figures for a trained head: training memory, redundancy vs frequency.
    DsFigures(ds_figures::DsFiguresArgs),
    /// DS-Softmax on the paper's hierarchical Gaussian data: which sub-classes each expert keeps.
    Synthetic(synthetic::SyntheticArgs),
    /// Fetch PTB if needed, load the shipped model, and print the speedup table.
    Quickstart(quickstart::QuickstartArgs),
    /// Check a model's and its heads' files against the SHA-256 digests their manifests recorded.
    Verify(verify::VerifyArgs),
}

pub fn run() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Data(a) => data::run(a),
        Command::TrainLm(a) => train::run(a),
        Command::TrainNmt(a) => train_nmt::run(a),
        Command::Translate(a) => translate::run(a),
        Command::Distill(a) => distill::run(a),
        Command::Bleu(a) => bleu::run(a),
        Command::BuildVmap(a) => build_vmap::run(a),
        Command::Ime(a) => ime::run(*a),
        Command::Quantize(a) => quantize::run(a),
        Command::Text(a) => text::run(a),
        Command::TrainHead(a) => train_head::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Compare(a) => compare::run(a),
        Command::ExportNpy(a) => export_npy::run(a),
        Command::Plot(a) => plot::run(a),
        Command::Predict(a) => predict::run(a),
        Command::DsFigures(a) => ds_figures::run(a),
        Command::Synthetic(a) => synthetic::run(a),
        Command::Quickstart(a) => quickstart::run(a),
        Command::Verify(a) => verify::run(a),
    }
}
