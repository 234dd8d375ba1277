//! `fastsoftmax train-nmt`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use fastsoftmax_nn::train_nmt::{train_nmt, NmtExperimentConfig, NmtOptions};
use fastsoftmax_nn::Backend;

#[derive(Args, Debug)]
pub struct TrainNmtArgs {
    /// Translator config (JSON with `model` and `train` sections), e.g.
    /// experiments/configs/bible-tiny.json (a recurrent translator) or
    /// experiments/configs/tanaka-transformer.json (`"arch": "transformer"`, the distillation
    /// teacher).
    #[arg(long)]
    config: PathBuf,
    #[command(flatten)]
    parallel: super::Parallel,
    /// Output directory: checkpoints, logs and the exported translator.
    #[arg(long)]
    out: PathBuf,
    /// Continue the run in OUT from its last checkpoint.
    #[arg(long)]
    resume: bool,
    /// Sequence-level distillation: train on a teacher's translations of the training source
    /// (the folder `fastsoftmax distill --out` wrote) instead of the reference targets;
    /// validation and BLEU stay on the references.
    #[arg(long, value_name = "DIR")]
    distilled: Option<PathBuf>,
    /// burn backend: flex (default), ndarray or wgpu (the latter two need the cargo feature).
    #[arg(long, default_value = "flex")]
    backend: String,
    /// Stop each epoch after N batches (smoke tests).
    #[arg(long)]
    max_batches: Option<usize>,
    /// Validate on the first N validation sentences only (smoke tests).
    #[arg(long)]
    max_valid: Option<usize>,
    /// Train for at most about this many minutes (validation not counted), in whole epochs:
    /// the next epoch starts only while the last one's time still fits. Resume with --resume.
    #[arg(long, value_name = "MINUTES")]
    budget_minutes: Option<f64>,
    /// Split each batch's sentences over N devices (data-parallel; the gradients are summed
    /// on the first, which steps): with --backend wgpu the first N discrete GPUs; on the CPU,
    /// N replicas of the model. train.batch_size must be a multiple of N.
    #[arg(long, default_value_t = 1, value_name = "N")]
    devices: usize,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Threads for training; default: every core.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
}

pub fn run(a: TrainNmtArgs) -> anyhow::Result<()> {
    super::train::set_threads(a.threads)?;
    let cfg = NmtExperimentConfig::load(&a.config)?;
    let backend: Backend = a.backend.parse()?;
    let devices = backend.autodiff_devices(a.devices)?;
    let opts = NmtOptions {
        data: a.parallel.data.clone(),
        src_lang: a.parallel.src.clone(),
        tgt_lang: a.parallel.tgt.clone(),
        distilled: a.distilled.clone(),
        out: a.out.clone(),
        resume: a.resume,
        max_batches: a.max_batches,
        max_valid: a.max_valid,
        budget: super::train::budget(a.budget_minutes)?,
        progress: !a.quiet,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    let m = train_nmt(&cfg, &opts, &devices)
        .with_context(|| format!("training into {}", a.out.display()))?;
    println!(
        "best epoch {} · valid BLEU {:.2} (greedy) · valid ppl {:.2}",
        m.best_epoch, m.valid_bleu, m.valid_ppl
    );
    if let Some(avg) = &m.average {
        println!(
            "average of the last {} epochs · valid BLEU {:.2} (greedy) · valid ppl {:.2}",
            avg.epochs.len(),
            avg.valid_bleu,
            avg.valid_ppl
        );
    }
    println!(
        "translator ({}) exported to {}",
        m.exported,
        a.out.display()
    );
    Ok(())
}
