//! `fastsoftmax distill`: a teacher re-translates the training source (sequence-level
//! distillation); `train-nmt --distilled DIR` then trains a student on its translations.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use fastsoftmax_translate::distill::{self, DistillOptions};
use fastsoftmax_translate::SearchOptions;
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Args, Debug)]
pub struct DistillArgs {
    /// The teacher: a translator directory written by `train-nmt` (a Transformer, or any
    /// recurrent translator).
    #[arg(long)]
    teacher: PathBuf,
    #[command(flatten)]
    parallel: super::Parallel,
    /// Where the translations go: OUT/train.TGT and OUT/distill.json (pass OUT to
    /// `train-nmt --distilled`). An interrupted run continues where it stopped.
    #[arg(long)]
    out: PathBuf,
    /// The teacher's beam (the paper distils at 5).
    #[arg(long, default_value_t = 5)]
    beam: usize,
    /// Sentences decoded together.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    batch: u32,
    /// Threads decoding at once; default: every core.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

pub fn run(a: DistillArgs) -> anyhow::Result<()> {
    let teacher = distill::load_any(&a.teacher)
        .with_context(|| format!("loading the teacher in {}", a.teacher.display()))?;
    let (source, _) = a.parallel.files("train");
    let threads = a.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    );
    let opts = DistillOptions {
        search: SearchOptions {
            beam: a.beam,
            ..SearchOptions::default()
        },
        batch: a.batch as usize,
        threads,
        ..DistillOptions::default()
    };
    let bar = if a.quiet {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "distilling {bar:30} {pos}/{len} sentences · {per_sec} · eta {eta}",
            )
            .expect("valid template"),
        );
        bar
    };
    let stats = distill::distill(
        teacher.as_ref(),
        &a.teacher.display().to_string(),
        &source,
        &a.out,
        &a.parallel.tgt,
        &opts,
        |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    )
    .with_context(|| format!("distilling {} into {}", source.display(), a.out.display()))?;
    bar.finish_and_clear();
    println!(
        "{} sentences ({} words, {} empty) translated by {} at beam {} in {:.0} s on {} threads → {}",
        stats.sentences,
        stats.words,
        stats.empty,
        stats.teacher,
        stats.beam,
        stats.seconds,
        stats.threads,
        distill::files(&a.out, &a.parallel.tgt).0.display()
    );
    Ok(())
}
