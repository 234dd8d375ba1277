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
    /// Instead: translate with a shipped translator and print examples, BLEU and words/s.
    /// `en-de` (the default): verses of John from the Bible; `ja-en`: everyday sentences of
    /// the Tanaka corpus's test split. The corpus is fetched first when missing.
    #[arg(long, value_name = "PAIR", num_args = 0..=1, default_missing_value = "en-de")]
    translate: Option<Pair>,
    /// With --translate: the translator (default: the shipped one of the pair).
    #[arg(long)]
    translator: Option<PathBuf>,
    /// With --translate: the corpus folder (default: data/bible or data/tanaka).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// With --translate: test sentences to translate (all: 0).
    #[arg(long, alias = "verses", default_value_t = 200)]
    sentences: usize,
}

/// The language pairs with a shipped translator.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pair {
    /// English → German, the Bible (test: the Gospel of John).
    #[value(name = "en-de")]
    EnDe,
    /// Japanese → English, the Tanaka corpus (everyday sentences from Tatoeba).
    #[value(name = "ja-en")]
    JaEn,
}

pub fn run(a: QuickstartArgs) -> anyhow::Result<()> {
    if let Some(pair) = a.translate {
        return translate(&a, pair);
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

/// The translation demo: the pair's test sentences with beam 5, BLEU against the references.
fn translate(a: &QuickstartArgs, pair: Pair) -> anyhow::Result<()> {
    use anyhow::Context;
    use fastsoftmax_data::{bible, tanaka_pairs};
    use fastsoftmax_translate::{bleu, distill, SearchOptions};

    let (langs, corpus, model, what) = match pair {
        Pair::EnDe => (
            ("en", "de"),
            "data/bible",
            "assets/models/bible-en-de-tiny",
            "John",
        ),
        Pair::JaEn => (
            ("ja", "en"),
            "data/tanaka",
            "assets/models/ja-en-tiny",
            "Tanaka test",
        ),
    };
    let dir = a.corpus.clone().unwrap_or_else(|| PathBuf::from(corpus));
    let fetched = match pair {
        Pair::EnDe => matches!(bible::fetch(&dir, None)?, bible::Fetched::Downloaded),
        Pair::JaEn => matches!(
            tanaka_pairs::fetch(&dir, None)?,
            tanaka_pairs::Fetched::Written(_)
        ),
    };
    if fetched {
        eprintln!("corpus written to {}", dir.display());
    }
    let model = a.translator.clone().unwrap_or_else(|| PathBuf::from(model));
    let engine = distill::load_any(&model)
        .with_context(|| format!("loading the translator in {}", model.display()))?;
    // A model under another pair's name would translate nonsense: say so instead.
    if let Some(l) = engine.languages() {
        if (l.src.as_str(), l.tgt.as_str()) != langs {
            anyhow::bail!(
                "{} translates {l}, not {} → {}: pass a {} → {} translator with --translator",
                model.display(),
                langs.0,
                langs.1,
                langs.0,
                langs.1
            );
        }
    }
    let read = |lang: &str| -> anyhow::Result<Vec<String>> {
        let p = dir.join(format!("test.{lang}"));
        Ok(std::fs::read_to_string(&p)
            .with_context(|| format!("reading {}", p.display()))?
            .lines()
            .map(str::to_string)
            .collect())
    };
    let n = if a.sentences == 0 {
        usize::MAX
    } else {
        a.sentences
    };
    let src: Vec<String> = read(langs.0)?.into_iter().take(n).collect();
    let reference: Vec<String> = read(langs.1)?.into_iter().take(src.len()).collect();
    let opts = SearchOptions::default();
    let started = std::time::Instant::now();
    let mut hyps = Vec::with_capacity(src.len());
    for chunk in src.chunks(16) {
        let lines: Vec<&str> = chunk.iter().map(String::as_str).collect();
        for nbest in engine.translate_lines(&lines, &opts)? {
            hyps.push(nbest.into_iter().next().expect("one translation per line"));
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let (from, to) = (langs.0.to_uppercase(), langs.1.to_uppercase());
    for i in 0..3 {
        if let (Some(s), Some(h), Some(r)) = (src.get(i), hyps.get(i), reference.get(i)) {
            println!("{from}  {s}\nOUT {}\nREF {r}\n", h.text);
        }
    }
    let texts: Vec<&str> = hyps.iter().map(|h| h.text.as_str()).collect();
    let words: usize = hyps.iter().map(|h| h.tokens.len()).sum();
    println!(
        "{what} 1–{} ({from} → {to}, beam 5, batch 16, 1 thread): {}; {:.0} words/s",
        src.len(),
        bleu::corpus_bleu(&texts, &reference).summary(),
        words as f64 / seconds
    );
    Ok(())
}
