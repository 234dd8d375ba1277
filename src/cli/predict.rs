//! `fastsoftmax predict`: the next words after a prompt.

use std::path::PathBuf;

use clap::Args;
use fastsoftmax_infer::{NextWords, TopK};

#[derive(Args, Debug)]
pub struct PredictArgs {
    /// Model directory, e.g. assets/models/ptb-small-lstm.
    #[arg(long)]
    model: PathBuf,
    /// Head to predict with (`full` = exact softmax).
    #[arg(long, default_value = "full")]
    head: String,
    /// Number of words to show.
    #[arg(short, default_value_t = 5)]
    k: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The prompt: tokenized words (PTB style: lower case, `N` for numbers); may be empty.
    prompt: String,
}

pub fn run(a: PredictArgs) -> anyhow::Result<()> {
    let mut next = NextWords::open(&a.model, &a.head)?;
    let unknown = next.feed(&a.prompt)?;
    if !unknown.is_empty() {
        eprintln!(
            "note: not in the vocabulary, read as <unk>: {}",
            unknown.join(" ")
        );
    }
    let mut best = TopK::new(a.k);
    next.top_k_into(a.k, &mut best)?;
    let (lm, head) = (next.lm(), next.head());
    let mut logits = vec![0.0f32; lm.spec().vocab_size];
    lm.full_head().logits_into(next.context().h, &mut logits);
    let log_z = fastsoftmax_infer::log_sum_exp(&logits);
    // Every head's words are shown with the model's exact probability of them; a predictor
    // that reads only the previous words (no LM step) also shows its own probability.
    let own = head.context_width() == 0;
    let rows: Vec<(String, f64, Option<f64>)> = best
        .as_slice()
        .iter()
        .map(|s| {
            (
                lm.vocab().word(s.id).to_string(),
                (logits[s.id as usize] as f64 - log_z).exp(),
                (own && s.logit > f32::MIN).then(|| (s.logit as f64).exp()),
            )
        })
        .collect();
    if a.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(w, p, q)| match q {
                Some(q) => serde_json::json!({"word": w, "prob": p, "head_prob": q}),
                None => serde_json::json!({"word": w, "prob": p}),
            })
            .collect();
        println!("{}", serde_json::Value::Array(v));
    } else {
        let label = format!("{} p", a.head);
        let width = label.chars().count().max(8);
        if own {
            println!("{:>8}  {label:>width$}  word", "model p");
        } else {
            println!("{:>8}  word", "model p");
        }
        for (w, p, q) in rows {
            match (own, q) {
                (false, _) => println!("{p:>8.4}  {w}"),
                (true, Some(q)) => println!("{p:>8.4}  {q:>width$.4}  {w}"),
                (true, None) => println!("{p:>8.4}  {:>width$}  {w}", "-"),
            }
        }
    }
    Ok(())
}
