//! `fastsoftmax quickstart`: the README's main job in one command.

use std::path::PathBuf;

use clap::Args;

#[derive(Args, Debug)]
pub struct QuickstartArgs {
    /// Where PTB is (or will be fetched to).
    #[arg(long, default_value = "data/ptb")]
    data: PathBuf,
    /// The model to benchmark.
    #[arg(long, default_value = "assets/models/ptb-small-lstm")]
    model: PathBuf,
    /// Contexts of the PTB test set to benchmark on.
    #[arg(long, default_value_t = 10_000)]
    max_contexts: usize,
    /// Print JSON rows instead of the table.
    #[arg(long)]
    json: bool,
}

pub fn run(a: QuickstartArgs) -> anyhow::Result<()> {
    super::data::fetch_ptb(&a.data, None)?;
    let test = a.data.join("ptb.test.txt");
    let lm = fastsoftmax_infer::LanguageModel::load(&a.model)?;
    let tokens = fastsoftmax_data::corpus::read_tokens(&test, lm.vocab())?;
    let (ppl, n) = fastsoftmax_infer::eval::perplexity(&lm, &tokens)?;
    eprintln!(
        "{}: test perplexity {ppl:.2} over {n} tokens",
        a.model.display()
    );
    let reports = super::bench::bench(&lm, &a.model, &tokens, &test, &[], a.max_contexts, 5, None)?;
    super::bench::print_reports(&reports, a.json)
}
