//! `fastsoftmax bench`: every head against the exact full softmax on the same contexts.

use std::path::{Path, PathBuf};

use clap::Args;
use fastsoftmax_infer::eval::{self, HeadReport};
use fastsoftmax_infer::{heads, LanguageModel, Predictor};

use super::export_npy::{write_npy, Npy};

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
    /// Print the table as Markdown (for results files).
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
    /// Also write the contexts as a float32 `.npy` array `[n, d]` (for peer scripts).
    #[arg(long)]
    save_contexts: Option<PathBuf>,
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let lm = LanguageModel::load(&a.model)?;
    let tokens = fastsoftmax_data::corpus::read_tokens(&a.text, lm.vocab())?;
    let reports = bench(
        &lm,
        &a.model,
        &tokens,
        &a.text,
        &a.heads,
        a.max_contexts,
        a.repeats,
        a.save_contexts.as_deref(),
    )?;
    if a.markdown {
        print_table(&reports, true);
        return Ok(());
    }
    print_reports(&reports, a.json)
}

/// The table, or one JSON object per head.
pub fn print_reports(reports: &[HeadReport], json: bool) -> anyhow::Result<()> {
    if json {
        for r in reports {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        print_table(reports, false);
    }
    Ok(())
}

/// Runs the benchmark of `lm` (loaded from `model`) on `tokens` (read from `text`); shared
/// with `quickstart`.
#[allow(clippy::too_many_arguments)]
pub fn bench(
    lm: &LanguageModel,
    model: &Path,
    tokens: &[u32],
    text: &Path,
    names: &[String],
    max_contexts: usize,
    repeats: usize,
    save_contexts: Option<&Path>,
) -> anyhow::Result<Vec<HeadReport>> {
    let names = if names.is_empty() {
        heads::available(model)
    } else {
        names.to_vec()
    };
    let loader = heads::HeadLoader::new(model, lm);
    loader.reserve(&names)?;
    let loaded = names
        .iter()
        .map(|n| loader.load(n))
        .collect::<Result<Vec<_>, _>>()?;
    let contexts = eval::collect_contexts(lm, tokens, max_contexts)?;
    // The LM step every softmax head needs first (a predictor that reads only the previous
    // words skips it), timed like the heads: the end-to-end columns.
    let lm_step = eval::time_lm_step(lm, &tokens[..contexts.len().min(LM_STEP_TOKENS)], repeats)?;
    eprintln!(
        "language model step: {lm_step:.1} µs per token (single thread, median of {repeats} passes over {} tokens)",
        contexts.len().min(LM_STEP_TOKENS)
    );
    if let Some(path) = save_contexts {
        write_npy(path, Npy::F32(&contexts.hs), &[contexts.len(), contexts.d])?;
    }
    eprintln!(
        "benchmarking {} on {} contexts of {} (single thread, batch 1 and {}, {} passes each)",
        names.join(", "),
        contexts.len(),
        text.display(),
        eval::BATCH,
        repeats
    );
    let refs: Vec<&dyn Predictor> = loaded.iter().map(|h| h.as_ref()).collect();
    Ok(eval::bench_heads(
        lm.full_head(),
        &refs,
        &contexts,
        repeats,
        Some(lm_step),
    )?)
}

/// Tokens the LM step is timed over (enough for a stable median).
const LM_STEP_TOKENS: usize = 20_000;

/// The human table, or the same rows as Markdown (for results files).
pub fn print_table(reports: &[HeadReport], markdown: bool) {
    let header = [
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
        "×FLOP",
        "×e2e",
    ];
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let mut row = vec![r.head.clone()];
            row.extend(
                [r.p_at_1, r.p_at_5, r.acc_at_1, r.acc_at_5, r.acc_at_10]
                    .map(|x| format!("{x:.4}")),
            );
            row.extend([r.us_per_query_b1, r.us_per_query_b64].map(|x| format!("{x:.1}")));
            row.extend([r.speedup_b1, r.speedup_b64, r.flop_speedup].map(|x| format!("{x:.2}")));
            row.push(
                r.speedup_end_to_end
                    .map_or("-".into(), |x| format!("{x:.1}")),
            );
            row
        })
        .collect();
    if markdown {
        println!("| {} |", header.join(" | "));
        println!("| --- |{}", " ---: |".repeat(header.len() - 1));
        for row in &rows {
            println!("| {} |", row.join(" | "));
        }
        return;
    }
    let width = rows
        .iter()
        .map(|r| r[0].chars().count())
        .max()
        .unwrap_or(4)
        .max(12);
    let line = |cells: &[String]| {
        let mut s = format!("{:<width$}", cells[0]);
        for (i, c) in cells[1..].iter().enumerate() {
            let w = if i < 5 {
                6
            } else if i < 7 {
                10
            } else {
                8
            };
            s.push_str(&format!(" {c:>w$}"));
        }
        println!("{s}");
    };
    line(&header.map(String::from));
    for row in &rows {
        line(row);
    }
}
