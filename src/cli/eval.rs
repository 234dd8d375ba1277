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
    /// Print one JSON object instead of a sentence.
    #[arg(long)]
    json: bool,
}

pub fn run(a: EvalArgs) -> anyhow::Result<()> {
    let lm = LanguageModel::load(&a.model)?;
    let tokens = fastsoftmax_data::corpus::read_tokens(&a.text, lm.vocab())?;
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
