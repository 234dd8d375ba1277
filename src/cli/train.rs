//! `fastsoftmax train-lm`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use fastsoftmax_nn::train::{train, TrainOptions};
use fastsoftmax_nn::{Backend, ExperimentConfig};

#[derive(Args, Debug)]
pub struct TrainLmArgs {
    /// Experiment config (JSON with `model` and `train` sections), e.g. experiments/configs/ptb-small-lstm.json.
    #[arg(long)]
    config: PathBuf,
    /// Directory with ptb.train.txt, ptb.valid.txt and ptb.test.txt (see `data fetch ptb`).
    #[arg(long, default_value = "data/ptb")]
    data: PathBuf,
    /// Training text instead of DATA/ptb.train.txt (one tokenized sentence per line).
    #[arg(long)]
    train: Option<PathBuf>,
    /// Validation text instead of DATA/ptb.valid.txt.
    #[arg(long)]
    valid: Option<PathBuf>,
    /// Test text, evaluated once at the end (default: DATA/ptb.test.txt when training on PTB;
    /// none with --train).
    #[arg(long)]
    test: Option<PathBuf>,
    /// Output directory: checkpoints, logs and the exported model.
    #[arg(long)]
    out: PathBuf,
    /// Continue the run in OUT from its last checkpoint.
    #[arg(long)]
    resume: bool,
    /// Start from a trained model: its vocabulary and weights, e.g. to fine-tune a general
    /// model on in-domain text with a lower learning rate. A `train-lm` output folder gives its
    /// best checkpoint; any other model folder (a shipped one, its rows int8 or 4-bit) the
    /// weights it serves, widened to f32. The config's model section must match it.
    #[arg(long, value_name = "DIR")]
    init: Option<PathBuf>,
    /// burn backend: flex (default), ndarray or wgpu (the latter two need the cargo feature).
    #[arg(long, default_value = "flex")]
    backend: String,
    /// Stop each epoch after N windows (smoke tests).
    #[arg(long)]
    max_windows: Option<usize>,
    /// Stop training after this many minutes of it (validation not counted); the epoch in
    /// progress ends early and is validated, checkpointed and exported like any other. For
    /// comparisons at equal training time.
    #[arg(long, value_name = "MINUTES")]
    budget_minutes: Option<f64>,
    /// Split each window's batch over N devices (data-parallel; the gradients are summed on
    /// the first, which steps): with --backend wgpu the first N discrete GPUs; on the CPU, N
    /// replicas of the model in N threads. train.batch_size must be a multiple of N.
    #[arg(long, default_value_t = 1, value_name = "N")]
    devices: usize,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Threads for training (burn's matrix products run on a rayon pool of this size); default:
    /// every core. The fused recurrent layers split the batch over them and the products run on
    /// all of them (experiments/results/training-speed.md).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
}

/// Sizes the global rayon pool that training runs on (`--threads`); default: every core.
pub(super) fn set_threads(threads: Option<u16>) -> anyhow::Result<()> {
    if let Some(n) = threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n as usize)
            .build_global()
            .context("setting the training threads (--threads)")?;
    }
    Ok(())
}

/// `--budget-minutes` as a duration; a clear error unless it is a positive number.
pub(super) fn budget(minutes: Option<f64>) -> anyhow::Result<Option<std::time::Duration>> {
    minutes
        .map(|m| {
            if m.is_finite() && m > 0.0 {
                Ok(std::time::Duration::from_secs_f64(m * 60.0))
            } else {
                Err(anyhow::anyhow!(
                    "--budget-minutes must be a positive number, got {m}"
                ))
            }
        })
        .transpose()
}

pub fn run(a: TrainLmArgs) -> anyhow::Result<()> {
    set_threads(a.threads)?;
    let cfg = ExperimentConfig::load(&a.config)?;
    let backend: Backend = a.backend.parse()?;
    let devices = backend.autodiff_devices(a.devices)?;
    let pick = |given: Option<PathBuf>, file: &str| given.unwrap_or_else(|| a.data.join(file));
    // PTB's test file is the default only for PTB's training text.
    let test = match (&a.test, &a.train) {
        (Some(t), _) if !t.is_file() => {
            anyhow::bail!("--test {}: no such file", t.display())
        }
        (Some(t), _) => t.clone(),
        (None, None) => a.data.join("ptb.test.txt"),
        (None, Some(_)) => PathBuf::new(),
    };
    let opts = TrainOptions {
        train: pick(a.train.clone(), "ptb.train.txt"),
        valid: pick(a.valid.clone(), "ptb.valid.txt"),
        test: test.is_file().then_some(test),
        out: a.out.clone(),
        resume: a.resume,
        init: a.init.clone(),
        max_windows: a.max_windows,
        budget: budget(a.budget_minutes)?,
        progress: !a.quiet,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    let m = train(&cfg, &opts, &devices)
        .with_context(|| format!("training into {}", a.out.display()))?;
    println!(
        "best epoch {} · valid ppl {:.2}{}",
        m.best_epoch,
        m.valid_ppl,
        m.test_ppl
            .map(|t| format!(" · test ppl {t:.2}"))
            .unwrap_or_default()
    );
    println!("model exported to {}", a.out.display());
    Ok(())
}
