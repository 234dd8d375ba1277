//! `fastsoftmax bleu`: corpus BLEU as sacreBLEU computes it by default.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use fastsoftmax_translate::bleu::corpus_bleu;

#[derive(Args, Debug)]
pub struct BleuArgs {
    /// Reference translations, one detokenized sentence per line.
    #[arg(long = "ref")]
    reference: PathBuf,
    /// System output, line i translating the same sentence as reference line i.
    #[arg(long)]
    hyp: PathBuf,
    /// Print the score and its statistics as JSON.
    #[arg(long)]
    json: bool,
}

fn read_lines(p: &Path) -> anyhow::Result<Vec<String>> {
    let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} is not UTF-8 text ({e}); convert it to UTF-8",
            p.display()
        )
    })?;
    Ok(text.lines().map(str::to_string).collect())
}

pub fn run(a: BleuArgs) -> anyhow::Result<()> {
    let refs = read_lines(&a.reference)?;
    let hyps = read_lines(&a.hyp)?;
    if refs.len() != hyps.len() {
        bail!(
            "{} has {} lines but {} has {}: BLEU needs one hypothesis per reference line",
            a.hyp.display(),
            hyps.len(),
            a.reference.display(),
            refs.len()
        );
    }
    let b = corpus_bleu(&hyps, &refs);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&b)?);
    } else {
        println!("{}", b.summary());
    }
    Ok(())
}
