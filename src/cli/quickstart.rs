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
    /// Instead: fetch the Bible, translate verses of John (English → German) with the shipped
    /// tiny translator, and print examples, BLEU and words/s.
    #[arg(long)]
    translate: bool,
    /// With --translate: the translator.
    #[arg(long, default_value = "assets/models/bible-en-de-tiny")]
    translator: PathBuf,
    /// With --translate: verses of John to translate (all 879: 0).
    #[arg(long, default_value_t = 200)]
    verses: usize,
}

pub fn run(a: QuickstartArgs) -> anyhow::Result<()> {
    if a.translate {
        return translate(&a);
    }
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

/// The translation demo: John in German with beam 5, BLEU against the Elberfelder text.
fn translate(a: &QuickstartArgs) -> anyhow::Result<()> {
    use fastsoftmax_data::bible;
    use fastsoftmax_translate::{bleu, Profile, SearchOptions, Translator};

    let dir = PathBuf::from("data/bible");
    if let bible::Fetched::Downloaded = bible::fetch(&dir, None)? {
        eprintln!("Bible written to {}", dir.display());
    }
    let engine = Translator::load(&a.translator)?;
    let (src, reference) = bible::part(&dir, "test");
    let read = |p: &PathBuf| -> anyhow::Result<Vec<String>> {
        Ok(std::fs::read_to_string(p)?
            .lines()
            .map(str::to_string)
            .collect())
    };
    let n = if a.verses == 0 { usize::MAX } else { a.verses };
    let src: Vec<String> = read(&src)?.into_iter().take(n).collect();
    let reference: Vec<String> = read(&reference)?.into_iter().take(src.len()).collect();
    let opts = SearchOptions::default();
    let mut profile = Profile::default();
    let started = std::time::Instant::now();
    let mut hyps = Vec::with_capacity(src.len());
    for chunk in src.chunks(16) {
        let lines: Vec<&str> = chunk.iter().map(String::as_str).collect();
        for nbest in engine.translate(&lines, &opts, &mut profile)? {
            hyps.push(nbest.into_iter().next().expect("one translation per line"));
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    for i in [0, 1, 2] {
        if let (Some(s), Some(h), Some(r)) = (src.get(i), hyps.get(i), reference.get(i)) {
            println!("EN  {s}\nOUT {}\nREF {r}\n", h.text);
        }
    }
    let texts: Vec<&str> = hyps.iter().map(|h| h.text.as_str()).collect();
    let words: usize = hyps.iter().map(|h| h.tokens.len()).sum();
    println!(
        "John 1–{} (English → German, beam 5, batch 16, 1 thread): {}; {:.0} words/s",
        src.len(),
        bleu::corpus_bleu(&texts, &reference).summary(),
        words as f64 / seconds
    );
    Ok(())
}
