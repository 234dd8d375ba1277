//! `fastsoftmax build-vmap`: word-align the training split and write the vocabulary map.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use fastsoftmax_translate::align::{align, AlignConfig, Links};
use fastsoftmax_translate::distill;
use fastsoftmax_translate::tokenizer::Tokenizer;
use fastsoftmax_translate::{MapUnit, VmapConfig, VocabMap};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Args, Debug)]
pub struct BuildVmapArgs {
    #[command(flatten)]
    parallel: super::Parallel,
    /// The map to write (CTranslate2's text format: `source n-gram<TAB>target words`).
    #[arg(long)]
    out: PathBuf,
    /// Longest source n-gram with an entry.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=8))]
    max_ngram: u32,
    /// Times an (n-gram, target word) link must be seen to enter the map.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    min_freq: u32,
    /// Translation hypotheses kept per n-gram, the most frequent first: target words, or
    /// target phrases with `--unit phrases`.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    per_ngram: u32,
    /// An n-gram's hypotheses: `words` (each target word linked to one of its words) or
    /// `phrases` (the paper's phrase table: target phrases aligned to the n-gram as a unit,
    /// with the unaligned target words at their ends).
    #[arg(long, value_enum, default_value_t = Unit::Words)]
    unit: Unit,
    /// Size of the 0-gram list (target words every sentence may use): the most frequent
    /// unaligned target words.
    #[arg(long, default_value_t = 100)]
    zero_gram: u32,
    /// EM iterations of the aligner in each direction.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
    /// Symmetrise with grow-diag-final-and (fewer, surer links) instead of grow-diag-final.
    #[arg(long)]
    final_and: bool,
    /// Also write the alignment of the training split here (Pharaoh format, `i-j` pairs of
    /// 0-based source-target positions per line, as fast_align writes it).
    #[arg(long)]
    links_out: Option<PathBuf>,
    /// Read the alignment from this Pharaoh file instead of aligning (maps with other settings
    /// from one alignment).
    #[arg(long, conflicts_with_all = ["links_out", "iterations", "final_and"])]
    links: Option<PathBuf>,
    /// Split whose references measure the map's coverage (`none` to skip).
    #[arg(long, default_value = "test")]
    eval: String,
    /// Print the map's statistics as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// The translator the map is for: its source tokenizer cuts the source side (a subword
    /// translator's map keys are subwords). Default: word tokens.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Align the training source with a teacher's translations of it (the folder
    /// `fastsoftmax distill --out` wrote) instead of the references: the map of a student
    /// trained with `train-nmt --distilled DIR`, whose target words are the teacher's.
    #[arg(long, value_name = "DIR")]
    distilled: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Unit {
    Words,
    Phrases,
}

/// What a map covers of a split's references.
#[derive(serde::Serialize)]
struct Report {
    file: String,
    max_ngram: u32,
    min_freq: u32,
    per_ngram: u32,
    zero_gram: u32,
    unit: Unit,
    /// Keys, the 0-gram list included.
    entries: usize,
    bytes: u64,
    /// Distinct target words in the map.
    target_words: usize,
    eval_split: Option<String>,
    /// Share of the split's reference tokens among their sentence's candidates.
    coverage: Option<f64>,
    /// Candidate target words per sentence (the 0-gram list included), mean.
    candidates_per_sentence: Option<f64>,
    /// Candidates per reference token, the paper's Table 1 measure.
    candidates_per_token: Option<f64>,
    align_seconds: f64,
}

fn read_tokens(path: &Path, tokenizer: &Tokenizer) -> anyhow::Result<Vec<Vec<String>>> {
    let bytes = std::fs::read(path).with_context(|| {
        format!(
            "reading {} (fetch the corpus with `fastsoftmax data fetch bible`)",
            path.display()
        )
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("{} is not UTF-8 text ({e})", path.display()))?;
    Ok(text.lines().map(|l| tokenizer.tokenize(l)).collect())
}

/// Word ids of every token (each side its own dictionary).
fn to_ids(sentences: &[Vec<String>]) -> (Vec<Vec<u32>>, usize) {
    let mut dict: HashMap<&str, u32> = HashMap::new();
    let ids = sentences
        .iter()
        .map(|s| {
            s.iter()
                .map(|w| {
                    let n = dict.len() as u32;
                    *dict.entry(w.as_str()).or_insert(n)
                })
                .collect()
        })
        .collect();
    (ids, dict.len())
}

fn write_links(path: &Path, links: &[Links]) -> anyhow::Result<()> {
    let mut text = String::new();
    for l in links {
        let pairs: Vec<String> = l.iter().map(|(s, t)| format!("{s}-{t}")).collect();
        text.push_str(&pairs.join(" "));
        text.push('\n');
    }
    fastsoftmax_infer::files::write_atomic(path, text.as_bytes())?;
    Ok(())
}

fn read_links(path: &Path, src: &[Vec<String>], tgt: &[Vec<String>]) -> anyhow::Result<Vec<Links>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() != src.len() {
        bail!(
            "{} has {} lines but the training split has {} sentence pairs: it aligns another corpus",
            path.display(),
            lines.len(),
            src.len()
        );
    }
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            line.split_whitespace()
                .map(|pair| {
                    let parsed = pair
                        .split_once('-')
                        .and_then(|(s, t)| Some((s.parse::<u32>().ok()?, t.parse::<u32>().ok()?)));
                    match parsed {
                        Some((s, t)) if (s as usize) < src[i].len() && (t as usize) < tgt[i].len() => {
                            Ok((s, t))
                        }
                        _ => bail!(
                            "{} line {}: `{pair}` is not an `i-j` link within the sentence pair ({} × {} tokens)",
                            path.display(),
                            i + 1,
                            src[i].len(),
                            tgt[i].len()
                        ),
                    }
                })
                .collect()
        })
        .collect()
}

pub fn run(a: BuildVmapArgs) -> anyhow::Result<()> {
    let (src_file, tgt_file) = a.parallel.files("train");
    let source_tokens = match &a.model {
        Some(dir) => distill::load_any(dir)
            .with_context(|| format!("loading the translator in {}", dir.display()))?
            .src_tokenizer()
            .clone(),
        None => Tokenizer::Words,
    };
    let src = read_tokens(&src_file, &source_tokens)?;
    let (tgt, tgt_file) = match &a.distilled {
        Some(dir) => {
            let lines = distill::read_distilled(dir, &src_file, &a.parallel.tgt)?;
            let tokens = lines.iter().map(|l| Tokenizer::Words.tokenize(l)).collect();
            (tokens, distill::files(dir, &a.parallel.tgt).0)
        }
        None => (read_tokens(&tgt_file, &Tokenizer::Words)?, tgt_file),
    };
    if src.len() != tgt.len() {
        bail!(
            "{} has {} lines but {} has {}: the training split must be one sentence pair per line",
            src_file.display(),
            src.len(),
            tgt_file.display(),
            tgt.len()
        );
    }
    let started = Instant::now();
    let links = match &a.links {
        Some(path) => read_links(path, &src, &tgt)?,
        None => {
            let bar = ProgressBar::new(2).with_style(
                ProgressStyle::with_template(
                    "aligning {pos}/{len} directions [{elapsed_precise}, ETA {eta}] {msg}",
                )
                .expect("a valid template"),
            );
            if a.json {
                bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
            }
            bar.set_message(format!(
                "{} sentence pairs, IBM model 2 + diagonal prior",
                src.len()
            ));
            let (src_ids, n_src) = to_ids(&src);
            let (tgt_ids, n_tgt) = to_ids(&tgt);
            let cfg = AlignConfig {
                iterations: a.iterations as usize,
                final_and: a.final_and,
                ..AlignConfig::default()
            };
            let links = align(&src_ids, &tgt_ids, n_src, n_tgt, cfg, &mut |done| {
                bar.set_message(format!("{done} done"));
                bar.inc(1);
            });
            bar.finish_and_clear();
            if let Some(path) = &a.links_out {
                write_links(path, &links)?;
            }
            links
        }
    };
    let align_seconds = started.elapsed().as_secs_f64();
    let cfg = VmapConfig {
        max_ngram: a.max_ngram as usize,
        min_freq: a.min_freq,
        per_ngram: a.per_ngram as usize,
        zero_gram: a.zero_gram as usize,
        unit: match a.unit {
            Unit::Words => MapUnit::Words,
            Unit::Phrases => MapUnit::Phrases,
        },
    };
    let map = VocabMap::build(&src, &tgt, &links, cfg);
    map.save(&a.out)?;
    let mut words: Vec<&str> = map.entries.values().flatten().map(String::as_str).collect();
    words.sort_unstable();
    words.dedup();
    let mut report = Report {
        file: a.out.display().to_string(),
        max_ngram: a.max_ngram,
        min_freq: a.min_freq,
        per_ngram: a.per_ngram,
        zero_gram: a.zero_gram,
        unit: a.unit,
        entries: map.entries.len(),
        bytes: std::fs::metadata(&a.out)?.len(),
        target_words: words.len(),
        eval_split: None,
        coverage: None,
        candidates_per_sentence: None,
        candidates_per_token: None,
        align_seconds,
    };
    if a.eval != "none" {
        let (es, et) = a.parallel.files(&a.eval);
        let (es, et) = (
            read_tokens(&es, &source_tokens)?,
            read_tokens(&et, &Tokenizer::Words)?,
        );
        if es.len() != et.len() {
            bail!("the {} split's two sides differ in length", a.eval);
        }
        let (mut covered, mut tokens, mut candidates) = (0usize, 0usize, 0usize);
        for (s, t) in es.iter().zip(&et) {
            let cands = map.candidate_words(s);
            candidates += cands.len();
            tokens += t.len();
            covered += t
                .iter()
                .filter(|w| cands.binary_search(&w.as_str()).is_ok())
                .count();
        }
        report.eval_split = Some(a.eval.clone());
        report.coverage = Some(covered as f64 / tokens.max(1) as f64);
        report.candidates_per_sentence = Some(candidates as f64 / es.len().max(1) as f64);
        report.candidates_per_token = Some(candidates as f64 / tokens.max(1) as f64);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "wrote {} ({} entries, {} target words, {:.1} MB) from {} aligned sentence pairs in {:.0} s",
            report.file,
            report.entries,
            report.target_words,
            report.bytes as f64 / 1e6,
            src.len(),
            align_seconds
        );
        if let (Some(c), Some(n), Some(k)) = (
            report.coverage,
            report.candidates_per_sentence,
            report.candidates_per_token,
        ) {
            println!(
                "{}: the map covers {:.2}% of the reference tokens with {n:.0} candidates per sentence ({k:.1} per token)",
                a.eval,
                100.0 * c
            );
        }
    }
    Ok(())
}
