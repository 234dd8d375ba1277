//! `fastsoftmax bench`: every head against the exact full softmax on the same contexts.

use std::path::{Path, PathBuf};

use clap::Args;
use fastsoftmax_infer::eval::{self, HeadReport};
use fastsoftmax_infer::{heads, LanguageModel, SoftmaxHead};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Model directory, e.g. assets/models/ptb-small-lstm.
    #[arg(long)]
    model: PathBuf,
    /// Text whose contexts are scored (one tokenized sentence per line), e.g. data/ptb/ptb.test.txt.
    #[arg(long)]
    text: PathBuf,
    /// Comma-separated head names; `full` is always measured as the reference. Default: all available.
    #[arg(long, value_delimiter = ',')]
    heads: Vec<String>,
    /// Use at most N contexts (the first N positions of the text).
    #[arg(long, default_value_t = 10_000)]
    max_contexts: usize,
    /// Timed passes per head and batch size; medians are reported.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Print one JSON object per head instead of the table.
    #[arg(long)]
    json: bool,
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let reports = bench(&a.model, &a.text, &a.heads, a.max_contexts, a.repeats)?;
    if a.json {
        for r in &reports {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        print_table(&reports);
    }
    Ok(())
}

/// Runs the benchmark (shared with `quickstart`).
pub fn bench(
    model: &Path,
    text: &Path,
    names: &[String],
    max_contexts: usize,
    repeats: usize,
) -> anyhow::Result<Vec<HeadReport>> {
    let lm = LanguageModel::load(model)?;
    let tokens = fastsoftmax_data::corpus::read_tokens(text, lm.vocab())?;
    let names = if names.is_empty() {
        heads::available(model)
    } else {
        names.to_vec()
    };
    let loaded = names
        .iter()
        .map(|n| heads::load(n, model, &lm))
        .collect::<Result<Vec<_>, _>>()?;
    let contexts = eval::collect_contexts(&lm, &tokens, max_contexts)?;
    eprintln!(
        "benchmarking {} on {} contexts of {} (single thread, batch 1 and {}, {} passes each)",
        names.join(", "),
        contexts.len(),
        text.display(),
        eval::BATCH,
        repeats
    );
    let refs: Vec<&dyn SoftmaxHead> = loaded.iter().map(|h| h.as_ref()).collect();
    Ok(eval::bench_heads(lm.full_head(), &refs, &contexts, repeats))
}

pub fn print_table(reports: &[HeadReport]) {
    println!(
        "{:<12} {:>6} {:>6} {:>6} {:>6} {:>6} {:>10} {:>10} {:>8} {:>8} {:>8}",
        "head",
        "P@1",
        "P@5",
        "acc@1",
        "acc@5",
        "acc@10",
        "µs/q b1",
        "µs/q b64",
        "×b1",
        "×b64",
        "×FLOP"
    );
    for r in reports {
        println!(
            "{:<12} {:>6.4} {:>6.4} {:>6.4} {:>6.4} {:>6.4} {:>10.1} {:>10.1} {:>8.2} {:>8.2} {:>8.2}",
            r.head,
            r.p_at_1,
            r.p_at_5,
            r.acc_at_1,
            r.acc_at_5,
            r.acc_at_10,
            r.us_per_query_b1,
            r.us_per_query_b64,
            r.speedup_b1,
            r.speedup_b64,
            r.flop_speedup
        );
    }
}
