//! Teacher-forced training of the [`Translator`]: Adam on the mean target-token loss (the full
//! softmax or the sampled one of the large-vocabulary option), per-epoch validation perplexity
//! and greedy BLEU (decoded by the burn-free engine the run exports), an atomic checkpoint
//! after every epoch and `--resume`.
//!
//! Batches hold sentences of one source length (bucketed, shuffled within each length, batch
//! order shuffled per epoch): the encoder then needs no padding or masks, the backward
//! direction is a flip, and attention never sees a padded position.
//!
//! Files in the output directory:
//! - `config.json`, `command.txt`, `src.vocab` / `tgt.vocab` (one word per line, id order);
//! - `checkpoint.bpk` + `optimizer.bpk` (Adam's moments) + `train_state.json`: the latest
//!   epoch, for `--resume`;
//! - `best.bpk`: the epoch with the best validation BLEU, exported as the engine artifact
//!   (`crate::export_nmt`) whenever it improves; at the end, with `train.average_last`, the
//!   mean of the last epochs' weights (`epoch-N.bpk`) replaces it if its BLEU is higher;
//! - `train.log`: one line per epoch; `metrics.json`: the final numbers.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::Module;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::AdamConfig;
use burn::tensor::{Device, Tensor};
use fastsoftmax_infer::Vocab;
use fastsoftmax_translate::distill::TranslateLines;
use fastsoftmax_translate::{bleu, SearchOptions};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::config::TrainingSoftmax;
use crate::data_parallel::DataParallel;
use crate::export_nmt::EngineWeights;
use crate::fused::Sampler;
use crate::lm::Ops;
use crate::seq2seq::{NmtBatch, NmtConfig, Translator};
use crate::train::{
    append_line, lap, load_module, progress_bar, record_command, save_module, write_text,
    PendingLosses, Phases,
};
use crate::transformer::{TransformerConfig, TransformerNmt};
use crate::{Error, Result};
use fastsoftmax_translate::tokenizer::{TokenKind, Tokenizer, SUBWORDS_FILE};

/// Optimisation and data settings of a translator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NmtTrainConfig {
    /// Adam's learning rate.
    pub lr: f64,
    /// Multiply the learning rate by this at the end of each epoch from `decay_from_epoch` on.
    pub lr_decay: f64,
    /// First epoch (1-based) after which the learning rate decays.
    pub decay_from_epoch: usize,
    pub epochs: usize,
    /// Sentences per batch (all of one source length).
    pub batch_size: usize,
    /// Clip each parameter's gradient norm to this value.
    pub clip_norm: f64,
    pub seed: u64,
    /// Source vocabulary: the most frequent words of the training text, at most this many
    /// (0: all); the rest read as `<unk>`.
    #[serde(default)]
    pub src_vocab: usize,
    /// Target vocabulary, likewise.
    #[serde(default)]
    pub tgt_vocab: usize,
    /// Training pairs with more tokens than this on either side (before `<eos>`) are skipped.
    #[serde(default = "default_max_len")]
    pub max_len: usize,
    /// The softmax of the training loss; evaluation always uses the full one.
    #[serde(default)]
    pub softmax: TrainingSoftmax,
    /// Label smoothing ε of the training loss (0 = none): the target distribution puts `ε`
    /// uniformly over the vocabulary. Perplexities are always of the plain likelihood.
    #[serde(default)]
    pub label_smoothing: f64,
    /// Checkpoint averaging (0 or 1: off): keep the last this many epochs' weights
    /// (`epoch-N.bpk`) and, at the end, validate their mean; it is exported when its valid BLEU
    /// beats every single epoch's.
    #[serde(default)]
    pub average_last: usize,
    /// Source tokens: `"words"` (default) or `{"subwords": {"size": N}}`, a BPE of N pieces
    /// learnt from the training source (for Japanese; saved as `src.subwords.json`).
    #[serde(default)]
    pub src_tokens: TokenKind,
    /// Warm-up steps of the inverse-square-root schedule (Vaswani et al.): the rate rises
    /// linearly to `lr` over this many batches, then falls as `lr·√(warmup/step)`; the
    /// per-epoch `lr_decay` still multiplies it. 0: a constant rate between decays.
    #[serde(default)]
    pub warmup_steps: usize,
    /// Adam's β₂ (0.98 for Transformers, as Vaswani et al.).
    #[serde(default = "default_beta2")]
    pub adam_beta2: f64,
}

fn default_max_len() -> usize {
    100
}

fn default_beta2() -> f64 {
    0.999
}

impl NmtTrainConfig {
    /// The learning rate of global step `step` (1-based) given the epoch's base rate.
    pub fn rate_at(&self, base: f64, step: usize) -> f64 {
        if self.warmup_steps == 0 {
            return base;
        }
        let (s, w) = (step.max(1) as f64, self.warmup_steps as f64);
        base * (s / w).min((w / s).sqrt())
    }
}

/// A whole translator config file (`experiments/configs/bible-*.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NmtExperimentConfig {
    pub model: NmtModelConfig,
    pub train: NmtTrainConfig,
}

/// The network of a translator config: the recurrent one (the default: no `"arch"`, or
/// `"arch": "rnn"`) or `"arch": "transformer"`.
#[derive(Debug, Clone, PartialEq)]
pub enum NmtModelConfig {
    Rnn(NmtConfig),
    Transformer(TransformerConfig),
}

impl NmtModelConfig {
    pub fn validate(&self) -> Result<(), String> {
        match self {
            NmtModelConfig::Rnn(c) => c.validate(),
            NmtModelConfig::Transformer(c) => c.validate(),
        }
    }
}

impl Serialize for NmtModelConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::Error as _;
        let (arch, mut value) = match self {
            NmtModelConfig::Rnn(c) => ("rnn", serde_json::to_value(c)),
            NmtModelConfig::Transformer(c) => ("transformer", serde_json::to_value(c)),
        };
        let value = value.as_mut().map_err(S::Error::custom)?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("arch".into(), arch.into());
        }
        value.serialize(s)
    }
}

impl<'de> Deserialize<'de> for NmtModelConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut value = serde_json::Value::deserialize(d)?;
        let arch = match value.as_object_mut().and_then(|o| o.remove("arch")) {
            None => "rnn".to_string(),
            Some(serde_json::Value::String(a)) => a,
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "model.arch must be \"rnn\" or \"transformer\", got {other}"
                )))
            }
        };
        match arch.as_str() {
            "rnn" => serde_json::from_value(value)
                .map(NmtModelConfig::Rnn)
                .map_err(D::Error::custom),
            "transformer" => serde_json::from_value(value)
                .map(NmtModelConfig::Transformer)
                .map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "model.arch must be \"rnn\" or \"transformer\", got \"{other}\""
            ))),
        }
    }
}

impl NmtExperimentConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
        let cfg: Self = serde_json::from_str(&text).map_err(|e| {
            Error::Invalid(format!(
                "{}: not a translator config ({e}); see experiments/configs/bible-tiny.json",
                path.display()
            ))
        })?;
        cfg.validate()
            .map_err(|m| Error::Invalid(format!("{}: {m}", path.display())))?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<(), String> {
        self.model.validate()?;
        let t = &self.train;
        if t.epochs == 0 || t.batch_size == 0 || t.max_len == 0 {
            return Err("train.epochs, batch_size and max_len must be at least 1".into());
        }
        if !(t.lr > 0.0 && t.clip_norm > 0.0 && t.lr_decay > 0.0) {
            return Err("train.lr, lr_decay and clip_norm must be positive".into());
        }
        if !(0.0..1.0).contains(&t.adam_beta2) {
            return Err(format!(
                "train.adam_beta2 ({}) must be in [0, 1)",
                t.adam_beta2
            ));
        }
        if !(0.0..1.0).contains(&t.label_smoothing) {
            return Err(format!(
                "train.label_smoothing ({}) must be in [0, 1)",
                t.label_smoothing
            ));
        }
        if t.label_smoothing > 0.0 && !matches!(t.softmax, TrainingSoftmax::Full) {
            return Err("train.label_smoothing needs the full training softmax".into());
        }
        Ok(())
    }
}

/// Where the data is and what to do besides the config.
#[derive(Debug, Clone)]
pub struct NmtOptions {
    /// Holds `{train,valid,test}.{src,tgt}`.
    pub data: PathBuf,
    pub src_lang: String,
    pub tgt_lang: String,
    /// Train on a teacher's translations of the training source (`fastsoftmax distill`'s
    /// folder) in place of the references; validation keeps the references.
    pub distilled: Option<PathBuf>,
    pub out: PathBuf,
    pub resume: bool,
    /// Stop each epoch after this many batches (quick runs and tests).
    pub max_batches: Option<usize>,
    /// Validate on the first this many valid sentences only (quick runs and tests).
    pub max_valid: Option<usize>,
    /// Training time this invocation may spend, in whole epochs: the next epoch starts only
    /// while the last epoch's time still fits in what is left.
    pub budget: Option<std::time::Duration>,
    pub progress: bool,
    /// Recorded in `command.txt`.
    pub command: String,
}

/// One finished epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NmtEpoch {
    pub epoch: usize,
    pub lr: f64,
    pub train_ppl: f64,
    pub valid_ppl: f64,
    /// Greedy, detokenized, sacreBLEU-compatible.
    pub valid_bleu: f64,
    pub seconds: f64,
    /// Target tokens per second of training.
    pub tokens_per_s: f64,
    /// Where the epoch's training time went (clipping is inside Adam's step here).
    pub phases: Phases,
}

/// What `--resume` needs, saved beside `checkpoint.bpk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NmtState {
    pub config: NmtExperimentConfig,
    pub src_vocab: usize,
    pub tgt_vocab: usize,
    pub epochs_done: usize,
    /// Optimiser steps taken (the warm-up schedule's clock).
    #[serde(default)]
    pub steps_done: usize,
    pub lr: f64,
    pub best_valid_bleu: f64,
    pub history: Vec<NmtEpoch>,
}

/// Final numbers of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NmtMetrics {
    pub best_epoch: usize,
    pub valid_bleu: f64,
    pub valid_ppl: f64,
    pub epochs: Vec<NmtEpoch>,
    /// Training pairs skipped for exceeding `max_len`.
    pub skipped_long: usize,
    /// The mean of the last epochs' weights, when `train.average_last` asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average: Option<NmtAverage>,
    /// What was exported: `epoch N` or `average of epochs A-B`.
    #[serde(default)]
    pub exported: String,
}

/// The validation of an averaged checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NmtAverage {
    /// The epochs averaged, oldest first.
    pub epochs: Vec<usize>,
    pub valid_ppl: f64,
    /// Greedy, detokenized, sacreBLEU-compatible.
    pub valid_bleu: f64,
}

const STATE_FILE: &str = "train_state.json";
const CHECKPOINT: &str = "checkpoint.bpk";
const BEST: &str = "best.bpk";
const OPTIMIZER: &str = "optimizer.bpk";

/// Where `train.average_last` keeps an epoch's weights.
fn epoch_checkpoint(epoch: usize) -> String {
    format!("epoch-{epoch}.bpk")
}

/// A parallel text read and encoded: per sentence the source and target ids, each ending with
/// `<eos>`, the raw source line (what validation translates) and the raw target line (the BLEU
/// reference).
pub struct Parallel {
    pub pairs: Vec<(Vec<u32>, Vec<u32>)>,
    pub sources: Vec<String>,
    pub references: Vec<String>,
}

/// Reads `dir/{part}.{src}` and `dir/{part}.{tgt}` (one sentence per line, aligned by line).
pub fn read_part(
    dir: &Path,
    part: &str,
    src: &str,
    tgt: &str,
) -> Result<(Vec<String>, Vec<String>)> {
    let read = |lang: &str| {
        let p = dir.join(format!("{part}.{lang}"));
        std::fs::read_to_string(&p)
            .map(|t| t.lines().map(str::to_string).collect::<Vec<_>>())
            .map_err(|e| {
                Error::Invalid(format!(
                    "{}: {e}; fetch the corpus first (fastsoftmax data fetch bible)",
                    p.display()
                ))
            })
    };
    let (s, t) = (read(src)?, read(tgt)?);
    if s.len() != t.len() {
        return Err(Error::Invalid(format!(
            "{}: {part}.{src} has {} lines but {part}.{tgt} has {}: a parallel text needs one line per sentence on both sides",
            dir.display(),
            s.len(),
            t.len()
        )));
    }
    Ok((s, t))
}

/// The most frequent `max` tokens of `lines` (0: all), ties in byte order, then `<unk>`, `<eos>`.
pub fn build_vocab(lines: &[String], max: usize, tokenizer: &Tokenizer) -> Result<Vocab> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    for l in lines {
        for t in tokenizer.tokenize(l) {
            *counts.entry(t).or_default() += 1;
        }
    }
    let mut entries: Vec<(String, u64)> = counts.into_iter().collect();
    entries.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    if max > 0 {
        entries.truncate(max.saturating_sub(2));
    }
    Ok(Vocab::from_words(
        entries.into_iter().map(|(w, _)| w).collect(),
    )?)
}

/// Token ids of a line, `<unk>` for unknown words, then `<eos>`.
pub fn encode(line: &str, vocab: &Vocab, tokenizer: &Tokenizer) -> Vec<u32> {
    let mut ids: Vec<u32> = tokenizer
        .tokenize(line)
        .iter()
        .map(|t| vocab.id_or_unk(t))
        .collect();
    ids.push(vocab.eos());
    ids
}

fn encode_part(
    src: &[String],
    tgt: &[String],
    (sv, tokenizer): (&Vocab, &Tokenizer),
    tv: &Vocab,
) -> Parallel {
    Parallel {
        pairs: src
            .iter()
            .zip(tgt)
            .map(|(s, t)| (encode(s, sv, tokenizer), encode(t, tv, &Tokenizer::Words)))
            .collect(),
        sources: src.to_vec(),
        references: tgt.to_vec(),
    }
}

/// Batches of at most `batch_size` pairs of one source length, pair order shuffled within each
/// length and batch order shuffled, by `seed`.
pub fn batches(pairs: &[(Vec<u32>, Vec<u32>)], batch_size: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut by_len: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, (s, _)) in pairs.iter().enumerate() {
        by_len.entry(s.len()).or_default().push(i);
    }
    let mut out = Vec::new();
    for (_, mut ids) in by_len {
        ids.shuffle(&mut rng);
        out.extend(ids.chunks(batch_size).map(<[usize]>::to_vec));
    }
    out.shuffle(&mut rng);
    out
}

/// The batch of pairs `ids`; `tgt_eos` starts every target (see [`NmtBatch::new`]).
fn make_batch(pairs: &[(Vec<u32>, Vec<u32>)], ids: &[usize], tgt_eos: u32) -> NmtBatch {
    let refs: Vec<(&[u32], &[u32])> = ids
        .iter()
        .map(|&i| (pairs[i].0.as_slice(), pairs[i].1.as_slice()))
        .collect();
    NmtBatch::new(&refs, tgt_eos)
}

/// What the training loop needs of a translator network: the recurrent [`Translator`] or the
/// [`TransformerNmt`].
pub trait NmtNetwork: Module + Sized {
    /// `(objective, nll)` of a batch (label smoothing `ε` in the objective only).
    fn smoothed_loss(
        &self,
        batch: &NmtBatch,
        ops: Ops,
        negatives: Option<&crate::fused::Negatives>,
        label_smoothing: f64,
    ) -> (Tensor<1>, Tensor<1>);
    fn device(&self) -> Device;
}

impl NmtNetwork for Translator {
    fn smoothed_loss(
        &self,
        batch: &NmtBatch,
        ops: Ops,
        negatives: Option<&crate::fused::Negatives>,
        label_smoothing: f64,
    ) -> (Tensor<1>, Tensor<1>) {
        Translator::smoothed_loss(self, batch, ops, negatives, label_smoothing)
    }
    fn device(&self) -> Device {
        self.src_embedding.weight.device()
    }
}

impl NmtNetwork for TransformerNmt {
    fn smoothed_loss(
        &self,
        batch: &NmtBatch,
        ops: Ops,
        negatives: Option<&crate::fused::Negatives>,
        label_smoothing: f64,
    ) -> (Tensor<1>, Tensor<1>) {
        TransformerNmt::smoothed_loss(self, batch, ops, negatives, label_smoothing)
    }
    fn device(&self) -> Device {
        self.src_embedding.weight.device()
    }
}

/// The data of a run, read and encoded.
struct Prepared {
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    tokenizer: Tokenizer,
    train: Parallel,
    valid: Parallel,
    skipped_long: usize,
}

/// The source tokenizer of a run: learnt from the training source, or, on `--resume`, the
/// one the run saved (so the vocabulary cannot drift).
fn source_tokenizer(
    cfg: &NmtTrainConfig,
    opts: &NmtOptions,
    train_src: &[String],
) -> Result<Tokenizer> {
    let saved = opts.out.join(SUBWORDS_FILE);
    if opts.resume && saved.exists() {
        return Ok(Tokenizer::load(cfg.src_tokens, &opts.out)?);
    }
    if matches!(cfg.src_tokens, TokenKind::Subwords { .. }) && opts.progress {
        eprintln!("learning the source subwords ({:?})", cfg.src_tokens);
    }
    Ok(Tokenizer::train(cfg.src_tokens, train_src)?)
}

fn prepare(cfg: &NmtExperimentConfig, opts: &NmtOptions) -> Result<Prepared> {
    let t = &cfg.train;
    let (train_src, mut train_tgt) =
        read_part(&opts.data, "train", &opts.src_lang, &opts.tgt_lang)?;
    if let Some(dir) = &opts.distilled {
        let source = opts.data.join(format!("train.{}", opts.src_lang));
        train_tgt = fastsoftmax_translate::distill::read_distilled(dir, &source, &opts.tgt_lang)?;
    }
    let (valid_src, valid_tgt) = read_part(&opts.data, "valid", &opts.src_lang, &opts.tgt_lang)?;
    let tokenizer = source_tokenizer(t, opts, &train_src)?;
    let src_vocab = build_vocab(&train_src, t.src_vocab, &tokenizer)?;
    let tgt_vocab = build_vocab(&train_tgt, t.tgt_vocab, &Tokenizer::Words)?;
    let mut train = encode_part(&train_src, &train_tgt, (&src_vocab, &tokenizer), &tgt_vocab);
    let before = train.pairs.len();
    train
        .pairs
        .retain(|(s, y)| s.len() <= t.max_len + 1 && y.len() <= t.max_len + 1 && s.len() > 1);
    let skipped_long = before - train.pairs.len();
    if train.pairs.is_empty() {
        return Err(Error::Invalid(format!(
            "{}: no training pair is at most train.max_len ({}) tokens long",
            opts.data.display(),
            t.max_len
        )));
    }
    let mut valid = encode_part(&valid_src, &valid_tgt, (&src_vocab, &tokenizer), &tgt_vocab);
    if let Some(n) = opts.max_valid {
        valid.pairs.truncate(n);
        valid.sources.truncate(n);
        valid.references.truncate(n);
    }
    Ok(Prepared {
        src_vocab,
        tgt_vocab,
        tokenizer,
        train,
        valid,
        skipped_long,
    })
}

/// Trains (or resumes) and returns the final metrics; the best epoch is exported to `opts.out`
/// as the engine's artifact (`fastsoftmax_translate::engine` for a recurrent translator,
/// `fastsoftmax_translate::transformer` for a Transformer).
///
/// Trains on `devices`: one, or several that split each batch's sentences
/// ([`DataParallel`]; the first holds the model and runs validation).
pub fn train_nmt(
    cfg: &NmtExperimentConfig,
    opts: &NmtOptions,
    devices: &[Device],
) -> Result<NmtMetrics> {
    let parallel = DataParallel::new(devices, cfg.train.batch_size)?;
    let device = parallel.main();
    let data = prepare(cfg, opts)?;
    let (vs, vt) = (data.src_vocab.len(), data.tgt_vocab.len());
    let languages = fastsoftmax_translate::artifact::Languages {
        src: opts.src_lang.clone(),
        tgt: opts.tgt_lang.clone(),
    };
    let languages = Some(&languages);
    match &cfg.model {
        NmtModelConfig::Rnn(m) => {
            let engine = |model: &Translator, d: &Prepared| {
                EngineWeights::Recurrent(crate::export_nmt::to_weights(
                    model,
                    (&d.src_vocab, &d.tokenizer),
                    &d.tgt_vocab,
                    m,
                    languages,
                ))
            };
            train_network(
                cfg,
                opts,
                &parallel,
                &data,
                || m.init(vs, vt, device),
                engine,
            )
        }
        NmtModelConfig::Transformer(m) => {
            let engine = |model: &TransformerNmt, d: &Prepared| {
                EngineWeights::Transformer(crate::export_nmt::transformer_weights(
                    model,
                    (&d.src_vocab, &d.tokenizer),
                    &d.tgt_vocab,
                    m,
                    languages,
                ))
            };
            train_network(
                cfg,
                opts,
                &parallel,
                &data,
                || m.init(vs, vt, device),
                engine,
            )
        }
    }
}

fn train_network<M: NmtNetwork + Send + Sync>(
    cfg: &NmtExperimentConfig,
    opts: &NmtOptions,
    parallel: &DataParallel,
    data: &Prepared,
    init: impl Fn() -> M,
    engine: impl Fn(&M, &Prepared) -> EngineWeights,
) -> Result<NmtMetrics> {
    let t = &cfg.train;
    let device = parallel.main();
    let (src_vocab, tgt_vocab) = (&data.src_vocab, &data.tgt_vocab);
    let (train, valid) = (&data.train, &data.valid);
    let skipped_long = data.skipped_long;
    let sampler = match t.softmax {
        TrainingSoftmax::Full => None,
        TrainingSoftmax::Sampled { samples, power } => {
            if samples >= tgt_vocab.len() {
                return Err(Error::Invalid(format!(
                    "train.softmax samples ({samples}) must be smaller than the target vocabulary ({} words); use kind full",
                    tgt_vocab.len()
                )));
            }
            let mut counts = vec![0u64; tgt_vocab.len()];
            for (_, y) in &train.pairs {
                for &id in y {
                    counts[id as usize] += 1;
                }
            }
            Some((std::sync::Arc::new(Sampler::new(&counts, power)), samples))
        }
    };
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| Error::Invalid(format!("{}: {e}", opts.out.display())))?;
    let out = |f: &str| opts.out.join(f);

    device.seed(t.seed);
    crate::fused::seed_dropout(t.seed);
    let mut model = init();
    let mut state = NmtState {
        config: cfg.clone(),
        src_vocab: src_vocab.len(),
        tgt_vocab: tgt_vocab.len(),
        epochs_done: 0,
        steps_done: 0,
        lr: t.lr,
        best_valid_bleu: f64::NEG_INFINITY,
        history: Vec::new(),
    };
    if opts.resume {
        (state, model) = resume(cfg, &state, &opts.out, model)?;
        eprintln!(
            "resuming {} after epoch {} (lr {}, best valid BLEU {:.2})",
            opts.out.display(),
            state.epochs_done,
            state.lr,
            state.best_valid_bleu
        );
    } else if out(STATE_FILE).exists() {
        return Err(Error::Invalid(format!(
            "{} already holds a training run; pass --resume to continue it or choose another --out",
            opts.out.display()
        )));
    }
    write_text(
        &out("config.json"),
        &serde_json::to_string_pretty(cfg).unwrap(),
    )?;
    write_text(&out("src.vocab"), &vocab_text(src_vocab))?;
    write_text(&out("tgt.vocab"), &vocab_text(tgt_vocab))?;
    data.tokenizer.save(&opts.out)?;
    record_command(&opts.out, opts.resume, &opts.command)?;
    eprintln!(
        "{} training pairs ({skipped_long} longer than {} skipped), vocabularies {} → {} words",
        train.pairs.len(),
        t.max_len,
        src_vocab.len(),
        tgt_vocab.len()
    );

    let mut optim = AdamConfig::new()
        .with_beta_2(t.adam_beta2 as f32)
        .with_grad_clipping(Some(GradientClippingConfig::Norm(t.clip_norm as f32)))
        .init();
    if opts.resume && out(OPTIMIZER).exists() {
        optim = optim.load(out(OPTIMIZER)).map_err(|e| {
            Error::Invalid(format!(
                "{}: could not load Adam's state ({e:?}); delete the file to resume with fresh moments",
                out(OPTIMIZER).display()
            ))
        })?;
    }
    let ops = Ops::for_device(device);
    let pad = tgt_vocab.eos();
    let mut trained = std::time::Duration::ZERO;
    for epoch in state.epochs_done + 1..=t.epochs {
        // A budget never cuts an epoch short (a cut epoch would count as done with part of
        // the data unseen): the next epoch starts only when the last one's time still fits.
        if let Some(budget) = opts.budget {
            let left = budget.saturating_sub(trained);
            let last = state.history.last().map_or(0.0, |e| e.seconds);
            if left.is_zero() || last > left.as_secs_f64() {
                eprintln!(
                    "time budget: {:.0} s left after {:.0} s of training, less than an epoch ({last:.0} s); run again with --resume to go on",
                    left.as_secs_f64(),
                    trained.as_secs_f64()
                );
                break;
            }
        }
        device.seed(t.seed.wrapping_add(epoch as u64));
        crate::fused::seed_dropout(t.seed.wrapping_add(epoch as u64));
        let started = Instant::now();
        let order = batches(&train.pairs, t.batch_size, t.seed ^ epoch as u64);
        let n_batches = order.len().min(opts.max_batches.unwrap_or(usize::MAX));
        let total_tokens: usize = order[..n_batches]
            .iter()
            .flat_map(|b| b.iter().map(|&i| train.pairs[i].1.len()))
            .sum();
        let bar = progress_bar(
            opts.progress,
            total_tokens as u64,
            &format!("epoch {epoch}/{}", t.epochs),
            "target tokens",
        );
        let mut losses = PendingLosses::new(device);
        let mut phases = Phases::default();
        for (i, ids) in order.iter().take(n_batches).enumerate() {
            let negatives = sampler
                .as_ref()
                .map(|(s, n)| s.draw(*n, t.seed ^ ((epoch as u64) << 40) ^ i as u64));
            let mut clock = Instant::now();
            // Each device takes a contiguous share of the batch's sentences (fewer shares when
            // a bucket's last batch has fewer sentences than there are devices).
            let shares: Vec<&[usize]> = ids
                .chunks(ids.len().div_ceil(parallel.devices().len()))
                .collect();
            let targets: usize = ids.iter().map(|&i| train.pairs[i].1.len()).sum();
            let step = parallel.gradients(&model, vec![(); shares.len()], |d, replica, ()| {
                let batch = make_batch(&train.pairs, shares[d], pad);
                let (objective, nll) =
                    replica.smoothed_loss(&batch, ops, negatives.as_ref(), t.label_smoothing);
                let share = batch.num_targets() as f64 / targets as f64;
                (objective, share, (nll.detach(), batch.num_targets()))
            });
            for (nll, n) in step.carried {
                losses.push(nll.to_device(device), n);
            }
            let grads = step.grads;
            let step_s = lap(&mut clock);
            phases.forward_s += step.forward_s;
            phases.backward_s += step_s - step.forward_s;
            state.steps_done += 1;
            model = optim.step(t.rate_at(state.lr, state.steps_done), model, grads);
            phases.step_s += lap(&mut clock);
            bar.inc(targets as u64);
            if losses.due() {
                losses.read().map_err(|e| e.in_epoch(epoch))?;
                bar.set_message(format!(
                    "ppl {:.1} · {:.0} tok/s",
                    losses.perplexity(),
                    losses.tokens() as f64 / started.elapsed().as_secs_f64()
                ));
            }
        }
        losses.read().map_err(|e| e.in_epoch(epoch))?;
        let tokens = losses.tokens();
        bar.finish_and_clear();
        trained += started.elapsed();
        let seconds = started.elapsed().as_secs_f64();
        if tokens == 0 {
            break;
        }
        let inference = model.valid();
        let valid_ppl = perplexity(&inference, valid, t.batch_size, pad);
        let hyps = translate_greedy(&*engine(&inference, data).translator()?, &valid.sources)?;
        let valid_bleu = bleu::corpus_bleu(&hyps, &valid.references).score;
        let record = NmtEpoch {
            epoch,
            lr: t.rate_at(state.lr, state.steps_done),
            train_ppl: losses.perplexity(),
            valid_ppl,
            valid_bleu,
            seconds,
            tokens_per_s: tokens as f64 / seconds,
            phases,
        };
        let line = format!(
            "epoch {epoch:>3} | lr {:.5} | train ppl {:8.2}{} | valid ppl {:8.2} | valid BLEU {:5.2} (greedy) | {:.0} s | {:.0} tok/s | {}",
            record.lr,
            record.train_ppl,
            if sampler.is_some() { " (sampled loss)" } else { "" },
            record.valid_ppl,
            record.valid_bleu,
            record.seconds,
            record.tokens_per_s,
            phases.summary(crate::fused::on_cpu(device))
        );
        eprintln!("{line}");
        append_line(&out("train.log"), &line)?;
        if !valid_ppl.is_finite() {
            return Err(Error::Invalid(format!(
                "validation perplexity is {valid_ppl} after epoch {epoch}; lower train.lr"
            )));
        }
        if valid_bleu > state.best_valid_bleu {
            state.best_valid_bleu = valid_bleu;
            save_module(&model, &out(BEST))?;
            engine(&inference, data).save(&opts.out)?;
        }
        state.history.push(record);
        state.epochs_done = epoch;
        if epoch >= t.decay_from_epoch {
            state.lr *= t.lr_decay;
        }
        save_module(&model, &out(CHECKPOINT))?;
        // Adam's moments beside the weights, through a scratch file: a resumed run continues
        // the same descent instead of restarting the moments at full step size.
        let scratch = out(&format!("{OPTIMIZER}.tmp"));
        optim.save(&scratch).map_err(|e| {
            Error::Invalid(format!("{}: could not save ({e:?})", scratch.display()))
        })?;
        std::fs::rename(&scratch, out(OPTIMIZER))
            .map_err(|e| Error::Invalid(format!("{}: {e}", out(OPTIMIZER).display())))?;
        if t.average_last > 1 {
            save_module(&model, &out(&epoch_checkpoint(epoch)))?;
            if let Some(old) = epoch.checked_sub(t.average_last) {
                // Best effort: a leftover file costs disk, not correctness.
                let _ = std::fs::remove_file(out(&epoch_checkpoint(old)));
            }
        }
        write_text(
            &out(STATE_FILE),
            &serde_json::to_string_pretty(&state).unwrap(),
        )?;
    }
    if state.history.is_empty() {
        return Err(Error::Invalid(
            "no epoch was trained: train.epochs is 0, or no training pair fits train.max_len"
                .into(),
        ));
    }
    let best_epoch = state
        .history
        .iter()
        .max_by(|a, b| a.valid_bleu.total_cmp(&b.valid_bleu))
        .expect("at least one epoch");
    let mut exported = format!("epoch {}", best_epoch.epoch);
    let mut average = None;
    let kept: Vec<usize> = (state.epochs_done.saturating_sub(t.average_last) + 1
        ..=state.epochs_done)
        .filter(|&e| out(&epoch_checkpoint(e)).exists())
        .collect();
    if kept.len() > 1 {
        let models = kept
            .iter()
            .map(|&e| load_module(init(), &out(&epoch_checkpoint(e))))
            .collect::<Result<Vec<_>>>()?;
        let mean = crate::average::average(models)?;
        let inference = mean.valid();
        let valid_ppl = perplexity(&inference, valid, t.batch_size, pad);
        let hyps = translate_greedy(&*engine(&inference, data).translator()?, &valid.sources)?;
        let valid_bleu = bleu::corpus_bleu(&hyps, &valid.references).score;
        let (first, last) = (kept[0], kept[kept.len() - 1]);
        let line = format!(
            "average of epochs {first}-{last} | valid ppl {valid_ppl:8.2} | valid BLEU {valid_bleu:5.2} (greedy) | {}",
            if valid_bleu > state.best_valid_bleu {
                "exported"
            } else {
                "not better than the best epoch"
            }
        );
        eprintln!("{line}");
        append_line(&out("train.log"), &line)?;
        if valid_bleu > state.best_valid_bleu {
            save_module(&mean, &out(BEST))?;
            exported = format!("average of epochs {first}-{last}");
        }
        average = Some(NmtAverage {
            epochs: kept,
            valid_ppl,
            valid_bleu,
        });
    }
    let best = load_module(init(), &out(BEST))?;
    engine(&best.valid(), data).save(&opts.out)?;
    let metrics = NmtMetrics {
        best_epoch: best_epoch.epoch,
        valid_bleu: best_epoch.valid_bleu,
        valid_ppl: best_epoch.valid_ppl,
        epochs: state.history.clone(),
        skipped_long,
        average,
        exported,
    };
    write_text(
        &out("metrics.json"),
        &serde_json::to_string_pretty(&metrics).unwrap(),
    )?;
    Ok(metrics)
}

/// Perplexity of the targets of `data` under teacher forcing (full softmax, no autodiff).
pub fn perplexity<M: NmtNetwork>(model: &M, data: &Parallel, batch_size: usize, pad: u32) -> f64 {
    let device = model.device();
    let ops = Ops::for_device(&device);
    let mut losses = PendingLosses::new(&device);
    for ids in batches(&data.pairs, batch_size, 0) {
        let batch = make_batch(&data.pairs, &ids, pad);
        losses.push(
            model.smoothed_loss(&batch, ops, None, 0.0).1,
            batch.num_targets(),
        );
    }
    match losses.read() {
        Ok(()) => losses.perplexity(),
        Err(_) => f64::NAN,
    }
}

/// Greedy translations of `sources` (beam 1, `<unk>` kept), detokenized, in input order, by
/// the burn-free engine an app serves: its decoder keeps a key/value cache where burn's graph
/// would run the whole prefix again at every step. Chunks of sentences decode in parallel.
pub fn translate_greedy(engine: &dyn TranslateLines, sources: &[String]) -> Result<Vec<String>> {
    let opts = SearchOptions {
        beam: 1,
        replace_unk: false,
        max_source_tokens: usize::MAX,
        ..SearchOptions::default()
    };
    let chunks: Vec<Vec<String>> = sources
        .par_chunks(32)
        .map(|chunk| {
            let lines: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let best = engine.translate_lines(&lines, &opts)?;
            Ok(best
                .into_iter()
                .map(|n| n.into_iter().next().map(|t| t.text).unwrap_or_default())
                .collect())
        })
        .collect::<Result<_>>()?;
    Ok(chunks.concat())
}

fn resume<M: NmtNetwork>(
    cfg: &NmtExperimentConfig,
    fresh: &NmtState,
    dir: &Path,
    model: M,
) -> Result<(NmtState, M)> {
    let path = dir.join(STATE_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::Invalid(format!(
            "{}: {e}; there is no run to resume here — drop --resume to start one",
            path.display()
        ))
    })?;
    let mut state: NmtState = serde_json::from_str(&text)
        .map_err(|e| Error::Invalid(format!("{}: corrupt training state ({e})", path.display())))?;
    if state.config.model != cfg.model
        || state.src_vocab != fresh.src_vocab
        || state.tgt_vocab != fresh.tgt_vocab
    {
        return Err(Error::Invalid(format!(
            "{}: the checkpoint was trained with another model config or vocabulary than the one given; resume with the original config or choose another --out",
            path.display()
        )));
    }
    if state.config.train != cfg.train {
        eprintln!(
            "note: training settings differ from the checkpoint's; continuing with the new ones"
        );
        // The state records what the run now follows (e.g. more or fewer epochs).
        state.config.train = cfg.train.clone();
    }
    let model = load_module(model, &dir.join(CHECKPOINT))?;
    Ok((state, model))
}

fn vocab_text(v: &Vocab) -> String {
    (0..v.len() as u32)
        .map(|i| format!("{}\n", v.word(i)))
        .collect()
}
