//! `fastsoftmax train-head KIND`: train a fast softmax head for an exported language model.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use fastsoftmax_infer::eval::Contexts;
use fastsoftmax_infer::heads::candidates::CandidatesHead;
use fastsoftmax_infer::heads::trigram::TrigramHead;
use fastsoftmax_infer::{AdaptiveHead, DsHead, DsoftmaxHead, FullHead, LanguageModel, SoftmaxHead};
use fastsoftmax_nn::bucketed::{
    train_bucketed, BucketConfig, BucketKind, BucketedHead, EpochRecord, Target,
};
use fastsoftmax_nn::candidates::{
    train_candidates, CandidatesConfig, EpochRecord as CandidatesEpoch, Teacher,
};
use fastsoftmax_nn::ds::{train_ds, DsConfig, StageRecord};
use fastsoftmax_nn::l2s::{train_l2s, L2sConfig, Labeled};
use fastsoftmax_nn::Backend;
use fastsoftmax_translate::Translator;
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

#[derive(Args, Debug)]
pub struct TrainHeadArgs {
    #[command(subcommand)]
    kind: HeadKind,
}

#[derive(Subcommand, Debug)]
enum HeadKind {
    /// L2S (learning to screen): context clusters + per-cluster candidate words, trained with
    /// spherical k-means, Gumbel-softmax straight-through and a greedy knapsack.
    L2s(L2sArgs),
    /// DS-Softmax (doubly sparse): a gate picks one of K sparse experts, retrained from the
    /// model's output layer with group lasso, load balancing, pruning and mitosis (2 → K).
    Ds(DsArgs),
    /// D-softmax (differentiated softmax): frequency buckets with narrower embeddings for rarer
    /// words (PTB: 2,500 / 2,500 / 5,000 words at d, d/2, d/4), one softmax, trained on the
    /// frozen LM.
    Dsoftmax(BucketArgs),
    /// Adaptive softmax: frequent words + one row per tail cluster at full width, rarer
    /// clusters at d/4, d/16; prediction stops when the top-k are in the head. Trained on the
    /// frozen LM.
    Adaptive(BucketArgs),
    /// Candidate attention predictor: a trigram table proposes k words, a small network reads
    /// the previous n words and scores them (no LM step, no full softmax). Needs only the
    /// model's vocabulary.
    Candidates(CandidatesArgs),
}

#[derive(Args, Debug)]
pub struct CandidatesArgs {
    /// Model directory whose vocabulary the predictor uses, e.g. assets/models/ptb-small-lstm.
    #[arg(long)]
    model: PathBuf,
    /// JSON with any of the hyper-parameters (see experiments/configs/candidates.json); flags
    /// below override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Embedding factorisation rank r (0 = unfactorised) [default 30].
    #[arg(long)]
    rank: Option<usize>,
    /// Passes over the training positions [default 12].
    #[arg(long)]
    epochs: Option<usize>,
    /// Seed of the initialisation, the lists and the batch order (overrides the config's), to
    /// measure how far two runs of one recipe land.
    #[arg(long)]
    seed: Option<u64>,
    /// Use at most N training positions, evenly spaced (0 = all).
    #[arg(long)]
    max_samples: Option<usize>,
    /// Weight of the teacher's soft targets, 0..1 (0 = the true next word only) [default 0.9].
    /// The teacher is the model's own LSTM (run over the training text once) unless --teacher
    /// names one.
    #[arg(long)]
    distill: Option<f64>,
    /// How training lists are filled after the potential words: `top` (the most frequent
    /// words, exactly the served list), `frequent` (random frequent words, the paper's PF) or
    /// `random` (random words, PR) [default top].
    #[arg(long)]
    fill: Option<String>,
    /// Shuffle every training list (the paper's choice; measured to lose WPR on PTB).
    #[arg(long)]
    permute: bool,
    /// Distil from this trained candidate predictor of the same model (MODEL/heads/NAME, the
    /// same slots) instead of the LSTM: the paper's teacher assistant. On PTB the unfactorised
    /// predictor (experiments/configs/candidates-full.json) teaching the default shape gains
    /// 0.4 points of test WPR over learning from the LSTM.
    #[arg(long)]
    teacher: Option<String>,
    /// Training text (one tokenized sentence per line).
    #[arg(long, default_value = "data/ptb/ptb.train.txt")]
    train: PathBuf,
    /// Validation text, scored after every epoch.
    #[arg(long, default_value = "data/ptb/ptb.valid.txt")]
    valid: PathBuf,
    /// Save as MODEL/heads/NAME.
    #[arg(long, default_value = "candidates")]
    name: String,
    /// burn backend: flex (default), ndarray or wgpu.
    #[arg(long, default_value = "flex")]
    backend: String,
}

#[derive(Args, Debug)]
pub struct BucketArgs {
    /// Model directory (from `train-lm`), e.g. assets/models/ptb-small-lstm.
    #[arg(long)]
    model: PathBuf,
    /// JSON with any of the hyper-parameters (see experiments/configs/{dsoftmax,adaptive}.json);
    /// flags below override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Frequency ranks where buckets end, e.g. 2000,5000 (for adaptive: the first is the head
    /// size) [default dsoftmax 2500,5000; adaptive 2000,5000].
    #[arg(long, value_delimiter = ',')]
    cutoffs: Vec<usize>,
    /// Learn the full softmax's distribution (teacher, default) or the true next word (data).
    #[arg(long)]
    target: Option<String>,
    /// Passes over the training contexts [default 1].
    #[arg(long)]
    epochs: Option<usize>,
    /// Use at most N training contexts, evenly spaced (0 = all) [default 200000].
    #[arg(long)]
    max_contexts: Option<usize>,
    /// Continue from this trained head of the same kind and model (an interrupted run's
    /// checkpoint: the head is saved after every epoch); its cut-offs and widths are kept.
    #[arg(long)]
    resume_from: Option<String>,
    /// Training text (one tokenized sentence per line).
    #[arg(long, default_value = "data/ptb/ptb.train.txt")]
    train: PathBuf,
    /// Validation text, scored after every epoch.
    #[arg(long, default_value = "data/ptb/ptb.valid.txt")]
    valid: PathBuf,
    /// Save as MODEL/heads/NAME [default: the kind].
    #[arg(long)]
    name: Option<String>,
    /// burn backend: flex (default), ndarray or wgpu.
    #[arg(long, default_value = "flex")]
    backend: String,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args, Debug)]
pub struct DsArgs {
    /// Model directory (from `train-lm`, or a translator from `train-nmt`), e.g.
    /// assets/models/ptb-small-lstm or assets/models/bible-en-de-tiny.
    #[arg(long)]
    model: PathBuf,
    /// JSON with any of the DS hyper-parameters (see experiments/configs/ds.json); flags below
    /// override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Final number of experts K [default 64].
    #[arg(long)]
    experts: Option<usize>,
    /// Experts of the first mitosis stage [default 2]; equal to --experts trains without mitosis.
    #[arg(long)]
    start_experts: Option<usize>,
    /// Weight of both lasso terms (group and expert level).
    #[arg(long)]
    lambda: Option<f64>,
    /// Let pruning remove a word's last copy (the paper's DS-* variant).
    #[arg(long)]
    allow_lost_words: bool,
    /// Continue mitosis from this trained DS head of the same model (e.g. a `--save-stages`
    /// snapshot `ds-16`): how an interrupted run resumes.
    #[arg(long)]
    resume_from: Option<String>,
    /// Also save the head after every stage as NAME-K (e.g. ds-8), a checkpoint to resume from.
    #[arg(long)]
    save_stages: bool,
    /// Use at most N training contexts, evenly spaced [default: all].
    #[arg(long)]
    max_contexts: Option<usize>,
    /// For a translator (--model from `train-nmt`): the parallel corpus whose training and
    /// validation splits give the decoder's contexts under teacher forcing (--train/--valid
    /// are for language models).
    #[command(flatten)]
    parallel: super::Parallel,
    /// Training text (one tokenized sentence per line).
    #[arg(long, default_value = "data/ptb/ptb.train.txt")]
    train: PathBuf,
    /// Validation text, scored after every stage.
    #[arg(long, default_value = "data/ptb/ptb.valid.txt")]
    valid: PathBuf,
    /// Save as MODEL/heads/NAME.
    #[arg(long, default_value = "ds")]
    name: String,
    /// burn backend: flex (default), ndarray or wgpu.
    #[arg(long, default_value = "flex")]
    backend: String,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args, Debug)]
pub struct L2sArgs {
    /// Model directory (from `train-lm`, or a translator from `train-nmt`), e.g.
    /// assets/models/ptb-small-lstm or assets/models/bible-en-de-tiny.
    #[arg(long)]
    model: PathBuf,
    /// JSON with any of the L2S hyper-parameters (see experiments/configs/l2s-ptb-small.json);
    /// flags below override it. Several (comma-separated) train one head each, named
    /// NAME-STEM-rR-bB after the file stem.
    #[arg(long, value_delimiter = ',')]
    config: Vec<PathBuf>,
    /// Number of clusters r [default 100]. A comma-separated list trains one head per value
    /// (named NAME-rR-bB), sharing the contexts.
    #[arg(long, value_delimiter = ',')]
    clusters: Vec<usize>,
    /// Budget B: average candidate words per context [default 200]. A list sweeps it.
    #[arg(long, value_delimiter = ',')]
    budget: Vec<f64>,
    /// Alternating rounds (Gumbel step + knapsack) [default 5].
    #[arg(long)]
    rounds: Option<usize>,
    /// Spherical k-means + knapsack only, no Gumbel step (the paper's Table 5 baseline).
    #[arg(long)]
    kmeans_only: bool,
    /// Use at most N training contexts, evenly spaced [default: all].
    #[arg(long)]
    max_contexts: Option<usize>,
    /// For a translator (--model from `train-nmt`): the parallel corpus whose training and
    /// validation splits give the decoder's contexts under teacher forcing (--train/--valid
    /// are for language models).
    #[command(flatten)]
    parallel: super::Parallel,
    /// Training text (one tokenized sentence per line).
    #[arg(long, default_value = "data/ptb/ptb.train.txt")]
    train: PathBuf,
    /// Validation text, for choosing the best round.
    #[arg(long, default_value = "data/ptb/ptb.valid.txt")]
    valid: PathBuf,
    /// Save as MODEL/heads/NAME.
    #[arg(long, default_value = "l2s")]
    name: String,
    /// burn backend for the Gumbel step: flex (default), ndarray or wgpu.
    #[arg(long, default_value = "flex")]
    backend: String,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

pub fn run(a: TrainHeadArgs) -> anyhow::Result<()> {
    match a.kind {
        HeadKind::L2s(a) => run_l2s(a),
        HeadKind::Ds(a) => run_ds(a),
        HeadKind::Dsoftmax(a) => run_bucketed(BucketKind::Dsoftmax, a),
        HeadKind::Adaptive(a) => run_bucketed(BucketKind::Adaptive, a),
        HeadKind::Candidates(a) => run_candidates(a),
    }
}

fn run_l2s(a: L2sArgs) -> anyhow::Result<()> {
    check_name(&a.name)?;
    let lm = HeadModel::load(&a.model, &a.parallel)?;
    let mut configs: Vec<(String, L2sConfig)> = Vec::new();
    for p in &a.config {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let cfg = serde_json::from_str::<L2sConfig>(&text)
            .with_context(|| format!("{}: not a valid L2S config", p.display()))?;
        let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("config");
        configs.push((stem.to_string(), cfg));
    }
    if configs.is_empty() {
        configs.push((String::new(), L2sConfig::default()));
    }
    let mut runs = Vec::new();
    for (stem, base) in &configs {
        let mut base = base.clone();
        if let Some(x) = a.rounds {
            base.rounds = x;
        }
        if a.kmeans_only {
            base.rounds = 0;
        }
        if let Some(x) = a.max_contexts {
            base.max_contexts = x;
        }
        let clusters = if a.clusters.is_empty() {
            vec![base.clusters]
        } else {
            a.clusters.clone()
        };
        let budgets = if a.budget.is_empty() {
            vec![base.budget]
        } else {
            a.budget.clone()
        };
        for &r in &clusters {
            for &b in &budgets {
                let mut c = base.clone();
                c.clusters = r;
                c.budget = b;
                c.validate(lm.full().vocab_size())?;
                let name = if configs.len() * clusters.len() * budgets.len() == 1 {
                    a.name.clone()
                } else if configs.len() == 1 {
                    format!("{}-r{r}-b{b}", a.name)
                } else {
                    format!("{}-{stem}-r{r}-b{b}", a.name)
                };
                runs.push((name, c));
            }
        }
    }
    // Contexts are shared by all runs: sample as the first run asks.
    let (max_contexts, top_k) = (runs[0].1.max_contexts, runs[0].1.top_k);
    if runs
        .iter()
        .any(|(_, c)| c.max_contexts != max_contexts || c.top_k != top_k)
    {
        anyhow::bail!("configs trained together must agree on max_contexts and top_k");
    }
    let device = a.backend.parse::<Backend>()?.autodiff_device()?;
    let started = Instant::now();

    let (train, train_name) = lm.contexts(&a.train, "train", max_contexts, !a.quiet)?;
    let train = Labeled::new(lm.full(), train.hs, top_k);
    let (valid, valid_name) = lm.contexts(&a.valid, "valid", 0, !a.quiet)?;
    let valid = Labeled::new(lm.full(), valid.hs, top_k);
    let contexts_line = format!(
        "contexts: {} from {train_name}, {} from {valid_name} ({:.0} s)",
        train.len(),
        valid.len(),
        started.elapsed().as_secs_f64()
    );
    for (name, cfg) in runs {
        eprintln!("== {name}: r = {}, B = {}", cfg.clusters, cfg.budget);
        let mut log_text = TrainLog::default();
        let mut log = |line: &str| log_text.line(line);
        log(&contexts_line);
        let (head, report) =
            train_l2s(&name, lm.full(), &train, &valid, &cfg, &device, &mut log)
                .with_context(|| format!("training the L2S head for {}", a.model.display()))?;
        let out = write_head(
            &a.model,
            &name,
            &cfg,
            &report,
            &log_text.0,
            |dir, t, extra| head.save(dir, &lm, t, extra),
        )?;
        let best = &report.rounds[report.best_round];
        if report.best_round == 0 && cfg.rounds > 0 {
            println!(
                "note: none of the {} learned rounds raised validation P@{}, so {name} keeps round 0: its clusters are spherical k-means + the knapsack, not learned ones",
                cfg.rounds, cfg.top_k
            );
        }
        println!(
            "saved {} · validation P@1 {:.4} P@{} {:.4} · {:.1} candidates per context + {} clusters = {:.1}× fewer dot products",
            out.display(),
            best.valid_p1,
            cfg.top_k,
            best.valid_pk,
            best.valid_mean_candidates,
            cfg.clusters,
            lm.full().vocab_size() as f64 / (best.valid_mean_candidates + cfg.clusters as f64)
        );
    }
    Ok(())
}

fn run_ds(a: DsArgs) -> anyhow::Result<()> {
    check_name(&a.name)?;
    let lm = HeadModel::load(&a.model, &a.parallel)?;
    let mut cfg = read_config(a.config.as_deref(), "DS", DsConfig::default)?;
    if let Some(k) = a.experts {
        cfg.experts = k;
        cfg.start_experts = cfg.start_experts.min(k);
    }
    if let Some(k) = a.start_experts {
        cfg.start_experts = k;
    }
    if let Some(l) = a.lambda {
        cfg.lambda_lasso = l;
        cfg.lambda_expert = l;
    }
    if a.allow_lost_words {
        cfg.keep_every_word = false;
    }
    if let Some(x) = a.max_contexts {
        cfg.max_contexts = x;
    }
    cfg.validate()?;
    let start = match &a.resume_from {
        Some(h) => Some(
            DsHead::load(&a.model.join("heads").join(h), &lm)
                .with_context(|| format!("--resume-from {h} must be a DS head of this model"))?,
        ),
        None => None,
    };
    let device = a.backend.parse::<Backend>()?.autodiff_device()?;
    let started = Instant::now();
    let (train, train_name) = lm.contexts(&a.train, "train", cfg.max_contexts, !a.quiet)?;
    let (valid, valid_name) = lm.contexts(&a.valid, "valid", 0, !a.quiet)?;
    let mut log_text = TrainLog::default();
    let mut log = |line: &str| log_text.line(line);
    log(&format!(
        "contexts: {} from {train_name}, {} from {valid_name} ({:.0} s); stages {:?}",
        train.len(),
        valid.len(),
        started.elapsed().as_secs_f64(),
        cfg.stages()
    ));
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let config_json = serde_json::to_string_pretty(&cfg)?;
    let mut on_stage = |head: &DsHead, rec: &StageRecord| -> fastsoftmax_nn::Result<()> {
        if a.save_stages && rec.experts != cfg.experts {
            let dir = a
                .model
                .join("heads")
                .join(format!("{}-{}", a.name, rec.experts));
            let training = serde_json::json!({ "command": command, "stage": rec });
            head.save(
                &dir,
                &lm,
                training,
                &[("config.json", config_json.as_bytes())],
            )?;
        }
        Ok(())
    };
    let (head, report) = train_ds(
        &a.name,
        lm.full(),
        &train,
        &valid,
        &cfg,
        start.as_ref(),
        &device,
        &mut log,
        &mut on_stage,
    )
    .with_context(|| format!("training the DS head for {}", a.model.display()))?;
    let out = write_head(
        &a.model,
        &a.name,
        &cfg,
        &report,
        &log_text.0,
        |dir, t, extra| head.save(dir, &lm, t, extra),
    )?;
    let last = report.stages.last().expect("at least one stage");
    println!(
        "saved {} · validation top-1 {:.4} (P@1 {:.4}) · {:.0} words per query + {} experts = {:.1}× fewer dot products · peak training memory {:.2}× one full softmax",
        out.display(),
        last.valid.acc_at_1,
        last.valid.p_at_1,
        last.valid.mean_expert_size,
        cfg.experts,
        last.valid.flop_speedup,
        report.peak_memory
    );
    Ok(())
}

fn run_bucketed(kind: BucketKind, a: BucketArgs) -> anyhow::Result<()> {
    let name = a.name.clone().unwrap_or_else(|| kind.name().to_string());
    check_name(&name)?;
    let lm = LanguageModel::load(&a.model)?;
    let mut cfg = read_config(a.config.as_deref(), kind.name(), || {
        BucketConfig::defaults(kind)
    })?;
    if cfg.kind != kind {
        anyhow::bail!(
            "the config is for {}, not {}; pass a {} config",
            cfg.kind.name(),
            kind.name(),
            kind.name()
        );
    }
    if !a.cutoffs.is_empty() {
        cfg.cutoffs = a.cutoffs.clone();
    }
    if let Some(t) = &a.target {
        cfg.target = match t.as_str() {
            "teacher" => Target::Teacher,
            "data" => Target::Data,
            other => anyhow::bail!("--target {other:?}: choose teacher or data"),
        };
    }
    if let Some(e) = a.epochs {
        cfg.epochs = e;
    }
    if let Some(x) = a.max_contexts {
        cfg.max_contexts = x;
    }
    let d = lm.spec().d_hidden;
    let start = match &a.resume_from {
        Some(h) => {
            let dir = a.model.join("heads").join(h);
            let (m, t) = fastsoftmax_infer::heads::read_head(&dir, &lm)
                .with_context(|| format!("--resume-from {h}: no readable head there"))?;
            if m.kind != kind.name() {
                anyhow::bail!(
                    "--resume-from {h} is a {} head, not {}",
                    m.kind,
                    kind.name()
                );
            }
            Some(match kind {
                BucketKind::Dsoftmax => {
                    DsoftmaxHead::from_files(h, &m, &t, lm.full_head())?.buckets()
                }
                BucketKind::Adaptive => {
                    AdaptiveHead::from_files(h, &m, &t, lm.full_head())?.buckets()
                }
            })
        }
        None => None,
    };
    if let Some(b) = &start {
        if b.len() < 2 {
            anyhow::bail!("--resume-from: the head has a single bucket; train a new one instead");
        }
        // The buckets are the checkpoint's: record its cut-offs and widths.
        cfg.cutoffs = b[..b.len() - 1]
            .iter()
            .scan(0, |n, x| {
                *n += x.ids.len();
                Some(*n)
            })
            .collect();
        cfg.width_divisor = d / b[1].width(d);
    }
    cfg.validate(d, lm.spec().vocab_size)?;
    let device = a.backend.parse::<Backend>()?.autodiff_device()?;
    let started = Instant::now();
    let train = contexts(&lm, &a.train, cfg.max_contexts, !a.quiet)?;
    let valid = contexts(&lm, &a.valid, 0, !a.quiet)?;
    let mut log_text = TrainLog::default();
    let mut log = |line: &str| log_text.line(line);
    log(&format!(
        "contexts: {} from {}, {} from {} ({:.0} s); cutoffs {:?}, widths {:?}, target {:?}",
        train.len(),
        a.train.display(),
        valid.len(),
        a.valid.display(),
        started.elapsed().as_secs_f64(),
        cfg.cutoffs,
        cfg.widths(d),
        cfg.target
    ));
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let config_json = serde_json::to_string_pretty(&cfg)?;
    // Checkpoint after every epoch, in place: `--resume-from NAME` continues from it.
    let dir = a.model.join("heads").join(&name);
    let mut on_epoch = |head: &BucketedHead, rec: &EpochRecord| -> fastsoftmax_nn::Result<()> {
        let training = serde_json::json!({ "command": command, "checkpoint_after_epoch": rec });
        Ok(head.save(
            &dir,
            &lm,
            training,
            &[("config.json", config_json.as_bytes())],
        )?)
    };
    let (head, report) = train_bucketed(
        &name,
        lm.full_head(),
        &train,
        &valid,
        &cfg,
        start,
        &device,
        &mut log,
        &mut on_epoch,
    )
    .with_context(|| {
        format!(
            "training the {} head for {}",
            kind.name(),
            a.model.display()
        )
    })?;
    let out = write_head(
        &a.model,
        &name,
        &cfg,
        &report,
        &log_text.0,
        |dir, t, extra| head.save(dir, &lm, t, extra),
    )?;
    let last = &report.epochs.last().expect("at least one epoch").valid;
    println!(
        "saved {} · validation P@1 {:.4} P@5 {:.4} top-1 {:.4} · {:.2}× fewer dot products",
        out.display(),
        last.p_at_1,
        last.p_at_5,
        last.acc_at_1,
        last.flop_speedup
    );
    Ok(())
}

/// Writes head `name` of `model` through `save` (atomically, with `training` = the command and
/// `report` in its manifest) and config.json, command.txt and train.log beside it; returns its
/// directory.
fn write_head(
    model: &Path,
    name: &str,
    cfg: &impl serde::Serialize,
    report: &impl serde::Serialize,
    log_text: &str,
    save: impl FnOnce(&Path, serde_json::Value, &[(&str, &[u8])]) -> fastsoftmax_infer::Result<()>,
) -> anyhow::Result<PathBuf> {
    let out = model.join("heads").join(name);
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let training = serde_json::json!({ "command": command, "report": report });
    let config = serde_json::to_string_pretty(cfg)?;
    save(
        &out,
        training,
        &[
            ("config.json", config.as_bytes()),
            ("command.txt", format!("{command}\n").as_bytes()),
            ("train.log", log_text.as_bytes()),
        ],
    )?;
    Ok(out)
}

fn run_candidates(a: CandidatesArgs) -> anyhow::Result<()> {
    check_name(&a.name)?;
    let lm = LanguageModel::load(&a.model)?;
    let mut cfg = read_config(a.config.as_deref(), "candidates", CandidatesConfig::default)?;
    if let Some(r) = a.rank {
        cfg.rank = r;
    }
    if let Some(e) = a.epochs {
        cfg.epochs = e;
    }
    if let Some(seed) = a.seed {
        cfg.seed = seed;
    }
    if let Some(m) = a.max_samples {
        cfg.max_samples = m;
    }
    if let Some(x) = a.distill {
        cfg.distill = x;
    }
    if let Some(f) = &a.fill {
        cfg.fill = serde_json::from_value(serde_json::json!(f)).map_err(|_| {
            anyhow::anyhow!("--fill {f:?} is not a list fill: use top, frequent or random")
        })?;
    }
    cfg.permute |= a.permute;
    let vocab = lm.spec().vocab_size;
    cfg.validate(vocab)?;
    let read = |p: &Path| -> anyhow::Result<Vec<u32>> {
        if !p.exists() {
            anyhow::bail!(
                "{} does not exist: run `fastsoftmax data fetch ptb`, or pass --train/--valid with your own text",
                p.display()
            );
        }
        Ok(fastsoftmax_data::corpus::read_tokens(p, lm.vocab())?)
    };
    let (train, valid) = (read(&a.train)?, read(&a.valid)?);
    let assistant = match &a.teacher {
        Some(name) => {
            if *name == a.name {
                anyhow::bail!(
                    "--teacher {name} is the head being trained (--name {}): give the student another --name",
                    a.name
                );
            }
            let dir = a.model.join("heads").join(name);
            let (m, t) = fastsoftmax_infer::heads::read_head(&dir, &lm)
                .with_context(|| format!("loading the teacher predictor {name:?}"))?;
            if m.kind != "candidates" {
                anyhow::bail!(
                    "--teacher {name}: {} holds a {} head; name a candidate predictor trained with `train-head candidates`",
                    dir.display(),
                    m.kind
                );
            }
            if cfg.distill == 0.0 {
                anyhow::bail!("--teacher {name} needs --distill above 0 (its weight in the loss)");
            }
            Some(CandidatesHead::from_files(
                name,
                &dir,
                &m,
                &t,
                lm.full_head(),
            )?)
        }
        None => None,
    };
    // The LM teacher's contexts: every position of the training stream, in order.
    let teacher_hs = if cfg.distill > 0.0 && assistant.is_none() {
        contexts(&lm, &a.train, 0, true)?.hs
    } else {
        Vec::new()
    };
    let teacher = match &assistant {
        Some(head) => Teacher::Assistant(head),
        None => Teacher::Lm {
            hs: &teacher_hs,
            full: lm.full_head(),
        },
    };
    let device = a.backend.parse::<Backend>()?.autodiff_device()?;
    let mut log_text = TrainLog::default();
    let mut log = |line: &str| log_text.line(line);
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let config_json = serde_json::to_string_pretty(&cfg)?;
    let dir = a.model.join("heads").join(&a.name);
    let mut on_epoch =
        |head: &CandidatesHead, rec: &CandidatesEpoch| -> fastsoftmax_nn::Result<()> {
            let training = serde_json::json!({ "command": command, "checkpoint_after_epoch": rec });
            Ok(head.save(
                &dir,
                &lm,
                training,
                &[("config.json", config_json.as_bytes())],
            )?)
        };
    let (head, report) = train_candidates(
        &a.name,
        &train,
        &valid,
        vocab,
        lm.vocab().eos(),
        lm.spec().d_hidden,
        &cfg,
        Some(&teacher),
        &device,
        &mut log,
        &mut on_epoch,
    )
    .with_context(|| format!("training the candidate predictor for {}", a.model.display()))?;
    let out = write_head(
        &a.model,
        &a.name,
        &cfg,
        &report,
        &log_text.0,
        |dir, t, extra| head.save(dir, &lm, t, extra),
    )?;
    // The trigram model alone, as a head of its own (the paper's "N-gram" row).
    let trigram = TrigramHead::new(
        &format!("{}-trigram", a.name),
        head.table().clone(),
        lm.vocab().eos(),
    )?;
    let trigram_dir = a.model.join("heads").join(format!("{}-trigram", a.name));
    trigram.save(
        &trigram_dir,
        &lm,
        serde_json::json!({ "command": command, "of": a.name }),
    )?;
    let last = &report.epochs.last().expect("at least one epoch").valid;
    println!(
        "saved {} and {} · validation WPR {:.4} (trigram alone {:.4}, ceiling {:.4}) · network {} bytes + table {} bytes",
        out.display(),
        trigram_dir.display(),
        last.wpr,
        last.trigram_wpr,
        last.coverage,
        report.network_bytes,
        report.table_bytes
    );
    Ok(())
}

/// Training log lines: printed to stderr and kept for the head's train.log.
#[derive(Default)]
struct TrainLog(String);

impl TrainLog {
    fn line(&mut self, line: &str) {
        eprintln!("{line}");
        self.0.push_str(line);
        self.0.push('\n');
    }
}

/// The JSON config at `path`, or the defaults.
fn read_config<T: serde::de::DeserializeOwned>(
    path: Option<&Path>,
    what: &str,
    default: impl FnOnce() -> T,
) -> anyhow::Result<T> {
    let Some(p) = path else {
        return Ok(default());
    };
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{}: not a valid {what} config", p.display()))
}

/// A head name is a directory name that cannot be mistaken for the exact head.
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name != "full"
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if !ok {
        anyhow::bail!(
            "--name {name:?} is not usable: use letters, digits, '-', '_' or '.', not starting with '.', and not \"full\" (the exact head)"
        );
    }
    Ok(())
}

/// The model a head is trained for: a language model (contexts: its state after each word of a
/// text) or a translator (contexts: its decoder's `h̃` under teacher forcing on a parallel
/// corpus, the reference word as the next word).
enum HeadModel {
    Lm(LanguageModel),
    Translator {
        engine: Box<Translator>,
        full: FullHead,
        parallel: super::Parallel,
    },
}

impl HeadModel {
    /// Loads `dir` as a translator when its manifest says so, else as a language model.
    fn load(dir: &Path, parallel: &super::Parallel) -> anyhow::Result<HeadModel> {
        let manifest = std::fs::read(dir.join("manifest.json")).ok();
        let format = manifest
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["format"].as_str().map(str::to_string));
        if format.as_deref() != Some(fastsoftmax_translate::artifact::FORMAT) {
            return Ok(HeadModel::Lm(LanguageModel::load(dir)?));
        }
        let engine = Translator::load(dir)
            .with_context(|| format!("loading the translator in {}", dir.display()))?;
        let full = engine.output_head().ok_or_else(|| {
            anyhow::anyhow!(
                "{} is a quantized translator; train heads on its f32 artifact (the one `quantize` read)",
                dir.display()
            )
        })?;
        Ok(HeadModel::Translator {
            engine: Box::new(engine),
            full,
            parallel: parallel.clone(),
        })
    }

    /// The exact output layer the head approximates.
    fn full(&self) -> &FullHead {
        match self {
            HeadModel::Lm(lm) => lm.full_head(),
            HeadModel::Translator { full, .. } => full,
        }
    }

    /// At most `max` (context, next word) pairs, evenly spaced (0 = all), and where they came
    /// from: a language model reads `text`; a translator the `split` of its parallel corpus.
    fn contexts(
        &self,
        text: &Path,
        split: &str,
        max: usize,
        progress: bool,
    ) -> anyhow::Result<(Contexts, String)> {
        match self {
            HeadModel::Lm(lm) => Ok((
                contexts(lm, text, max, progress)?,
                text.display().to_string(),
            )),
            HeadModel::Translator {
                engine, parallel, ..
            } => {
                let (src, tgt) = parallel.files(split);
                let name = format!("{} → {}", src.display(), tgt.display());
                Ok((decoder_contexts(engine, &src, &tgt, max, progress)?, name))
            }
        }
    }
}

impl AsRef<FullHead> for HeadModel {
    fn as_ref(&self) -> &FullHead {
        self.full()
    }
}

/// The translator's decoder contexts under teacher forcing on the sentence pairs of `src` and
/// `tgt`, with the reference word each one predicts; every `k`-th pair so that about `max`
/// contexts are kept (0 = all). Batches of 64 pairs run on every core.
fn decoder_contexts(
    engine: &Translator,
    src: &Path,
    tgt: &Path,
    max: usize,
    progress: bool,
) -> anyhow::Result<Contexts> {
    let read = |p: &Path| -> anyhow::Result<Vec<String>> {
        let text = std::fs::read_to_string(p).with_context(|| {
            format!(
                "reading {} (fetch the corpus with `fastsoftmax data fetch bible`, or pass --data/--src/--tgt)",
                p.display()
            )
        })?;
        Ok(text.lines().map(str::to_string).collect())
    };
    let (src_lines, tgt_lines) = (read(src)?, read(tgt)?);
    if src_lines.len() != tgt_lines.len() {
        anyhow::bail!(
            "{} has {} lines but {} has {}: a parallel corpus needs one translation per line",
            src.display(),
            src_lines.len(),
            tgt.display(),
            tgt_lines.len()
        );
    }
    let vocab = engine.tgt_vocab();
    let mut pairs: Vec<(Vec<u32>, Vec<u32>)> = Vec::with_capacity(src_lines.len());
    for (s, t) in src_lines.iter().zip(&tgt_lines) {
        let source = engine.source(s, 250);
        let tokens = fastsoftmax_translate::text::tokenize(t);
        if source.tokens.is_empty() || tokens.is_empty() {
            continue;
        }
        let mut ids: Vec<u32> = tokens.iter().map(|w| vocab.id_or_unk(w)).collect();
        ids.push(vocab.eos());
        pairs.push((source.ids, ids));
    }
    let total: usize = pairs.iter().map(|p| p.1.len()).sum();
    if total == 0 {
        anyhow::bail!(
            "{} and {} hold no sentence pairs",
            src.display(),
            tgt.display()
        );
    }
    let stride = if max == 0 { 1 } else { total.div_ceil(max) };
    let pairs: Vec<_> = pairs.into_iter().step_by(stride).collect();
    let bar = if progress {
        ProgressBar::new(pairs.len() as u64).with_style(
            ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} sentences ({eta})")
                .expect("valid template"),
        )
    } else {
        ProgressBar::hidden()
    };
    bar.set_message(format!("decoder contexts of {}", tgt.display()));
    let parts: Vec<anyhow::Result<(Vec<f32>, Vec<u32>)>> = pairs
        .par_chunks(64)
        .map(|chunk| {
            let batch: Vec<(&[u32], &[u32])> =
                chunk.iter().map(|(s, t)| (&s[..], &t[..])).collect();
            let out = engine.forced_contexts(&batch)?;
            bar.inc(chunk.len() as u64);
            Ok(out)
        })
        .collect();
    bar.finish_and_clear();
    joined(engine.spec().d_attn, parts)
}

/// The contexts of `parts` (each `hs [m, d]` and `next [m]`) in order, or the first error.
fn joined(d: usize, parts: Vec<anyhow::Result<(Vec<f32>, Vec<u32>)>>) -> anyhow::Result<Contexts> {
    let mut c = Contexts {
        d,
        hs: Vec::new(),
        next: Vec::new(),
        history: Vec::new(),
    };
    for part in parts {
        let (hs, next) = part?;
        c.hs.extend(hs);
        c.next.extend(next);
    }
    Ok(c)
}

/// Runs the LM over `text` and keeps at most `max` (context, next word) pairs, evenly spaced
/// (0 = all).
fn contexts(
    lm: &LanguageModel,
    text: &Path,
    max: usize,
    progress: bool,
) -> anyhow::Result<Contexts> {
    if !text.exists() {
        anyhow::bail!(
            "{} does not exist: run `fastsoftmax data fetch ptb`, or pass --train/--valid with your own text",
            text.display()
        );
    }
    let tokens = fastsoftmax_data::corpus::read_tokens(text, lm.vocab())?;
    let n = tokens.len().saturating_sub(1);
    if n == 0 {
        anyhow::bail!(
            "{}: no contexts (the text needs at least two tokens)",
            text.display()
        );
    }
    let stride = if max == 0 { 1 } else { n.div_ceil(max) };
    let bar = if progress {
        ProgressBar::new(n as u64).with_style(
            ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} tokens ({eta})")
                .expect("valid template"),
        )
    } else {
        ProgressBar::hidden()
    };
    bar.set_message(format!("contexts of {}", text.display()));
    // The stream is cut into one piece per core, each read from the zero state (as training
    // batches cut it too); only the first few contexts of each piece differ from one stream.
    let d = lm.spec().d_hidden;
    let pieces = rayon::current_num_threads().max(1);
    let len = n.div_ceil(pieces);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let parts: Vec<anyhow::Result<(Vec<f32>, Vec<u32>)>> = (0..pieces)
        .into_par_iter()
        .map(|p| {
            let mut state = lm.new_state();
            let (mut hs, mut next) = (Vec::new(), Vec::new());
            let end = ((p + 1) * len).min(n);
            for (i, &t) in tokens.iter().enumerate().take(end).skip(p * len) {
                lm.step(t, &mut state)?;
                if i % stride == 0 {
                    hs.extend_from_slice(state.context());
                    next.push(tokens[i + 1]);
                }
                if i % 4096 == 0 {
                    let all = done.fetch_add(4096, std::sync::atomic::Ordering::Relaxed);
                    bar.set_position(all as u64);
                }
            }
            Ok((hs, next))
        })
        .collect();
    bar.finish_and_clear();
    joined(d, parts)
}
