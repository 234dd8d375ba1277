//! `fastsoftmax text tokenize|detokenize`: the translator's word tokens as a filter (stdin →
//! stdout), for peers that train on the same tokenized text and for looking at what the model
//! sees.

use std::io::{BufRead, Write};

use anyhow::Context;
use clap::{Args, Subcommand};
use fastsoftmax_translate::text::detokenize;
use fastsoftmax_translate::tokenizer::Tokenizer;

#[derive(Args, Debug)]
pub struct TextArgs {
    #[command(subcommand)]
    action: TextAction,
}

#[derive(Subcommand, Debug)]
enum TextAction {
    /// Split each line into word and punctuation tokens joined by single spaces.
    Tokenize {
        /// Cut the text as this translator cuts its source (a subword translator's pieces,
        /// e.g. Japanese for a peer to train on the same tokens); default: word tokens.
        #[arg(long)]
        model: Option<std::path::PathBuf>,
    },
    /// Join space-separated tokens back into text (the inverse on ordinary prose).
    Detokenize,
}

pub fn run(a: TextArgs) -> anyhow::Result<()> {
    let tokenizer = match &a.action {
        TextAction::Tokenize { model: Some(dir) } => fastsoftmax_translate::distill::load_any(dir)
            .with_context(|| format!("loading the translator in {}", dir.display()))?
            .src_tokenizer()
            .clone(),
        _ => Tokenizer::Words,
    };
    let stdin = std::io::stdin().lock();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (i, line) in stdin.lines().enumerate() {
        let line =
            line.map_err(|e| anyhow::anyhow!("line {} of stdin: {e} (is it UTF-8?)", i + 1))?;
        let text = match a.action {
            TextAction::Tokenize { .. } => tokenizer.tokenize(&line).join(" "),
            TextAction::Detokenize => detokenize(&line.split_whitespace().collect::<Vec<_>>()),
        };
        if let Err(e) = writeln!(out, "{text}") {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(e.into());
        }
    }
    out.flush().or_else(|e| match e.kind() {
        std::io::ErrorKind::BrokenPipe => Ok(()),
        _ => Err(e.into()),
    })
}
