//! `fastsoftmax eval`: perplexity of a model on any tokenized text.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use fastsoftmax_infer::{eval, LanguageModel};

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// Model directory (manifest.json + model.safetensors), e.g. assets/models/ptb-small-lstm.
    #[arg(long)]
    model: PathBuf,
    /// Text to score: one tokenized sentence per line (words outside the vocabulary count as <unk>).
    #[arg(long)]
    text: PathBuf,
    /// Also score with a fast head (the L2S paper's Table 6): a trained `l2s` head (exact logits
    /// for the screened cluster's candidates), `hnsw-efE` (FGD: for the words the graph search
    /// finds) or `svd-rR-nN` (SVD-softmax: for the N best of its rank-R preview), each with a
    /// low-rank approximation for every other word; or a trained `adaptive` head (its own
    /// distribution).
    #[arg(long)]
    head: Option<String>,
    /// Rank of the SVD approximation used outside the exact words (l2s and hnsw heads).
    #[arg(long, default_value_t = 20)]
    fallback_rank: usize,
    /// With --head: score at most N predictions (timed passes repeat over them).
    #[arg(long, default_value_t = usize::MAX)]
    max_contexts: usize,
    /// With --head: timed passes per softmax; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Print one JSON object instead of a sentence.
    #[arg(long)]
    json: bool,
}

pub fn run(a: EvalArgs) -> anyhow::Result<()> {
    let lm = LanguageModel::load(&a.model)?;
    let tokens = fastsoftmax_data::corpus::read_tokens(&a.text, lm.vocab())?;
    if let Some(name) = &a.head {
        return screened(&a, &lm, &tokens, name);
    }
    let unk = fastsoftmax_data::corpus::unk_rate(&tokens, lm.vocab());
    let (ppl, n) =
        eval::perplexity(&lm, &tokens).with_context(|| format!("scoring {}", a.text.display()))?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({"model": a.model, "text": a.text, "perplexity": ppl, "tokens": n, "unk_rate": unk})
        );
    } else {
        println!(
            "perplexity {ppl:.2} over {n} predicted tokens ({:.1}% <unk>) — {} on {}",
            unk * 100.0,
            a.model.display(),
            a.text.display()
        );
    }
    Ok(())
}

/// Exact perplexity against a fast head's, both timed.
fn screened(a: &EvalArgs, lm: &LanguageModel, tokens: &[u32], name: &str) -> anyhow::Result<()> {
    let scorer = eval::scorer_for(&a.model, lm, name, a.fallback_rank)?;
    let r = eval::screened_perplexity(lm, &scorer, tokens, a.max_contexts, a.repeats)?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        let how = match r.rank {
            0 => format!("{} (its own distribution)", r.head),
            rank => format!("{} + rank-{rank} logits elsewhere", r.head),
        };
        println!(
            "{} tokens of {}: exact perplexity {:.2} at {:.1} µs/token; {how} {:.2} at {:.1} µs/token ({:.2}× faster, {:.2}× fewer FLOPs)",
            r.tokens,
            a.text.display(),
            r.ppl_full,
            r.us_per_token_full,
            r.ppl_head,
            r.us_per_token_head,
            r.speedup,
            r.flop_speedup
        );
    }
    Ok(())
}
