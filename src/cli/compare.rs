//! `fastsoftmax compare`: every method's speed/precision knob swept on the same model and the
//! same contexts in one run, giving the L2S paper's Table 2 (each method's best batch-1 speedup
//! at P@1 ≥ 0.97), its Figures 2–7 (P@1 and P@5 against speedup) and the rows as JSON.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use fastsoftmax_infer::eval::{self, HeadReport};
use fastsoftmax_infer::{heads, LanguageModel, Predictor};
use serde::Serialize;

use super::plot::{line_plot, Series};

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Model directory, e.g. assets/models/ptb-small-lstm.
    #[arg(long)]
    model: PathBuf,
    /// Text whose contexts are scored, e.g. data/ptb/ptb.test.txt.
    #[arg(long)]
    text: PathBuf,
    /// Methods to sweep (svd, hnsw, hnsw-ip, greedy, pca, lsh: their built-in knob grids; l2s,
    /// ds, adaptive, dsoftmax, candidates: every trained head of that kind in MODEL/heads) or
    /// exact head names (e.g. hnsw-ef64). Default: all methods.
    #[arg(long, value_delimiter = ',')]
    heads: Vec<String>,
    /// Use at most N contexts (the first N positions of the text).
    #[arg(long, default_value_t = 10_000)]
    max_contexts: usize,
    /// Timed passes per setting and batch size; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// The precision a setting must reach to enter Table 2.
    #[arg(long, default_value_t = 0.97)]
    min_p1: f64,
    /// Write OUT.md (Table 2 + every setting), OUT.jsonl, and OUT-p_at_1 / OUT-p_at_5 plots
    /// (.png, .svg), e.g. experiments/results/table2-ptb-small.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Markdown appended to OUT.md (the hand-written analysis of the numbers).
    #[arg(long)]
    notes: Option<PathBuf>,
    /// Print the JSON rows instead of the tables.
    #[arg(long)]
    json: bool,
}

/// A method of Table 2: its `--heads` key (a head kind or built-in prefix), the paper's name
/// for it, and the paper's PTB-small row (speedup, P@1, P@5) where it has one.
struct Method {
    key: &'static str,
    paper_name: &'static str,
    paper: Option<(f64, f64, f64)>,
}

const fn method(
    key: &'static str,
    paper_name: &'static str,
    paper: Option<(f64, f64, f64)>,
) -> Method {
    Method {
        key,
        paper_name,
        paper,
    }
}

/// In the order of the paper's Table 2, ours first.
const METHODS: &[Method] = &[
    method("l2s", "L2S", Some((10.6, 0.998, 0.990))),
    method("ds", "DS-Softmax", None),
    method("candidates", "candidate attention", None),
    method("hnsw", "FGD", Some((1.3, 0.980, 0.989))),
    method("hnsw-ip", "inner-product graph (ip-NSW)", None),
    method("svd", "SVD-softmax", Some((0.8, 0.987, 0.99))),
    method("adaptive", "Adaptive-softmax", Some((1.9, 0.972, 0.981))),
    method("dsoftmax", "D-softmax", None),
    method("greedy", "Greedy-MIPS", Some((0.5, 0.998, 0.972))),
    method("pca", "PCA-MIPS", Some((0.14, 0.322, 0.341))),
    method("lsh", "LSH-MIPS", Some((1.3, 0.165, 0.33))),
];

/// The knob settings swept for a method built from the output layer, cheapest first, clipped
/// to the model's width `d` and vocabulary.
fn grid(method: &str, d: usize, vocab: usize) -> Option<Vec<String>> {
    let mut names: Vec<String> = match method {
        "svd" => [
            (10, 50),
            (10, 100),
            (20, 100),
            (20, 200),
            (20, 400),
            (50, 500),
            (50, 1000),
        ]
        .iter()
        .map(|&(r, n)| format!("svd-r{}-n{}", r.min(d), n.min(vocab)))
        .collect(),
        "hnsw" | "hnsw-ip" => [10, 20, 40, 80, 160, 320]
            .iter()
            .map(|ef| format!("{method}-ef{ef}"))
            .collect(),
        "greedy" => [10, 20, 50, 100, 300, 500, 1000, 1500, 2000, 3000]
            .iter()
            .map(|&b| format!("greedy-b{}", b.min(vocab)))
            .collect(),
        // Depth 0 and 0 bits are the exact softmax (checked by the tests), not settings.
        "pca" => (1..=4)
            .filter(|&depth| 1usize << depth < vocab)
            .map(|depth| format!("pca-d{depth}"))
            .collect(),
        "lsh" => [
            (4, 8),
            (4, 16),
            (4, 32),
            (5, 16),
            (5, 32),
            (5, 64),
            (6, 32),
            (6, 64),
            (8, 64),
        ]
        .iter()
        .map(|(b, t)| format!("lsh-b{b}-t{t}"))
        .collect(),
        _ => return None,
    };
    names.dedup();
    Some(names)
}

/// One measured setting.
#[derive(Debug, Clone, Serialize)]
pub struct CompareRow {
    pub method: String,
    #[serde(flatten)]
    pub report: HeadReport,
}

/// A method's Table 2 entry: its fastest setting at P@1 ≥ min, else its most precise one.
#[derive(Debug, Clone, Serialize)]
pub struct Table2Row {
    pub method: String,
    pub paper_name: String,
    pub reaches_min_p1: bool,
    #[serde(flatten)]
    pub report: HeadReport,
}

pub fn run(a: CompareArgs) -> anyhow::Result<()> {
    let lm = LanguageModel::load(&a.model)?;
    let tokens = fastsoftmax_data::corpus::read_tokens(&a.text, lm.vocab())?;
    if !(0.0..=1.0).contains(&a.min_p1) {
        anyhow::bail!("--min-p1 {} must be within 0..1", a.min_p1);
    }
    let wanted = if a.heads.is_empty() {
        METHODS.iter().map(|m| m.key.to_string()).collect()
    } else {
        a.heads.clone()
    };
    let settings = resolve(&wanted, &a.model, lm.spec().d_hidden, lm.spec().vocab_size);
    if settings.is_empty() {
        anyhow::bail!(
            "nothing to compare: none of {wanted:?} has settings or trained heads in {}",
            a.model.display()
        );
    }
    eprintln!(
        "loading {} settings (building each index once) …",
        settings.len()
    );
    let loader = heads::HeadLoader::new(&a.model, &lm);
    let names: Vec<String> = settings.iter().map(|(_, n)| n.clone()).collect();
    loader.reserve(&names)?;
    let loaded: Vec<(String, Box<dyn Predictor + '_>)> = settings
        .iter()
        .map(|(method, name)| Ok((method.clone(), loader.load(name)?)))
        .collect::<anyhow::Result<_>>()?;
    let contexts = eval::collect_contexts(&lm, &tokens, a.max_contexts)?;
    eprintln!(
        "measuring {} settings on {} contexts of {} (single thread, k = {}, {} passes each) …",
        loaded.len(),
        contexts.len(),
        a.text.display(),
        eval::K_MAX,
        a.repeats
    );
    let refs: Vec<&dyn Predictor> = loaded.iter().map(|(_, h)| h.as_ref()).collect();
    let reports = eval::bench_heads(lm.full_head(), &refs, &contexts, a.repeats, None)?;
    let rows: Vec<CompareRow> = loaded
        .iter()
        .zip(reports)
        .map(|((method, _), report)| CompareRow {
            method: method.clone(),
            report,
        })
        .collect();
    let table = table2(&rows, a.min_p1);
    if a.json {
        for r in &rows {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        println!("{}", table2_markdown(&table, a.min_p1));
    }
    if let Some(out) = &a.out {
        write_outputs(out, &a, &lm, &rows, &table, contexts.len())?;
    }
    Ok(())
}

/// `(method, head name)` for every setting asked for.
fn resolve(wanted: &[String], model: &Path, d: usize, vocab: usize) -> Vec<(String, String)> {
    let trained = heads::trained(model);
    let mut out = Vec::new();
    for w in wanted {
        if let Some(names) = grid(w, d, vocab) {
            out.extend(names.into_iter().map(|n| (w.clone(), n)));
        } else if METHODS.iter().any(|m| m.key == w) {
            // A trained kind: every head of that kind, whatever its name.
            out.extend(
                trained
                    .iter()
                    .filter(|(_, kind)| kind == w)
                    .map(|(name, _)| (w.clone(), name.clone())),
            );
        } else {
            // One head by name: its method is its kind, or the prefix of a built-in name.
            let method = match trained.iter().find(|(n, _)| n == w) {
                Some((_, kind)) => kind.clone(),
                None if w.starts_with("hnsw-ip-") => "hnsw-ip".into(),
                None => w.split('-').next().unwrap_or(w).to_string(),
            };
            out.push((method, w.clone()));
        }
    }
    out
}

/// Each method's entry, in the order of [`METHODS`] (unknown methods last).
pub fn table2(rows: &[CompareRow], min_p1: f64) -> Vec<Table2Row> {
    let mut by_method: BTreeMap<usize, Vec<&CompareRow>> = BTreeMap::new();
    for r in rows {
        let rank = METHODS
            .iter()
            .position(|m| m.key == r.method)
            .unwrap_or(METHODS.len());
        by_method.entry(rank).or_default().push(r);
    }
    by_method
        .into_values()
        .map(|rs| {
            let good = rs
                .iter()
                .filter(|r| r.report.p_at_1 >= min_p1)
                .max_by(|x, y| x.report.speedup_b1.total_cmp(&y.report.speedup_b1));
            let pick = good.unwrap_or_else(|| {
                rs.iter()
                    .max_by(|x, y| x.report.p_at_1.total_cmp(&y.report.p_at_1))
                    .expect("a method has at least one row")
            });
            Table2Row {
                method: pick.method.clone(),
                paper_name: METHODS
                    .iter()
                    .find(|m| m.key == pick.method)
                    .map_or(pick.method.clone(), |m| m.paper_name.to_string()),
                reaches_min_p1: good.is_some(),
                report: pick.report.clone(),
            }
        })
        .collect()
}

fn table2_markdown(table: &[Table2Row], min_p1: f64) -> String {
    let mut s = String::from(
        "| method | setting | speedup b1 | P@1 | P@5 | FLOP speedup | top-1 acc | paper speedup | paper P@1 | paper P@5 |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for t in table {
        let r = &t.report;
        let paper = METHODS
            .iter()
            .find(|m| m.key == t.method)
            .and_then(|m| m.paper)
            .map_or(
                ["—".to_string(), "—".into(), "—".into()],
                |(x, p1, p5)| [format!("{x}×"), format!("{p1:.3}"), format!("{p5:.3}")],
            );
        let mark = if t.reaches_min_p1 { "" } else { " †" };
        s.push_str(&format!(
            "| {}{mark} | `{}` | {:.2}× | {:.3} | {:.3} | {:.2}× | {:.4} | {} | {} | {} |\n",
            t.paper_name,
            r.head,
            r.speedup_b1,
            r.p_at_1,
            r.p_at_5,
            r.flop_speedup,
            r.acc_at_1,
            paper[0],
            paper[1],
            paper[2]
        ));
    }
    if table.iter().any(|t| !t.reaches_min_p1) {
        s.push_str(&format!(
            "\n† never reaches P@1 ≥ {min_p1} in the sweep; its most precise setting is shown.\n"
        ));
    }
    s
}

fn write_outputs(
    out: &Path,
    a: &CompareArgs,
    lm: &LanguageModel,
    rows: &[CompareRow],
    table: &[Table2Row],
    n_contexts: usize,
) -> anyhow::Result<()> {
    if let Some(dir) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let stem = |suffix: &str| {
        let mut s = out.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s)
    };
    let mut jsonl = String::new();
    for r in rows {
        jsonl.push_str(&serde_json::to_string(r)?);
        jsonl.push('\n');
    }
    fastsoftmax_infer::files::write_atomic(&stem(".jsonl"), jsonl.as_bytes())?;

    let file_name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let mut figures = String::new();
    for (field, label) in [("p_at_1", "precision@1"), ("p_at_5", "precision@5")] {
        let series = Series::group(rows.iter().map(|r| {
            let y = if field == "p_at_1" {
                r.report.p_at_1
            } else {
                r.report.p_at_5
            };
            (r.method.clone(), r.report.speedup_b1, y)
        }));
        let path = stem(&format!("-{field}"));
        line_plot(
            &path,
            &format!("{label} versus batch-1 speedup"),
            "speedup over the full softmax at batch 1 (log scale)",
            label,
            &series,
        )?;
        figures.push_str(&format!(
            "![{label} versus speedup]({}.svg)\n",
            file_name(&path)
        ));
    }

    let full_us = rows
        .first()
        .map(|r| r.report.us_per_query_b1 * r.report.speedup_b1)
        .unwrap_or(f64::NAN);
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut md = format!(
        "# Table 2 on {model}: every method at its fastest setting with P@1 ≥ {min}\n\n\
         Generated by `{command}`.\n\n\
         - git revision {rev}, {date}; machine: {cores} cores, {cpu}\n\
         - {n} contexts of `{text}`, vocabulary {vocab}, d = {d}; single thread, top-{k}, \
         median of {repeats} passes per setting; every row measured in this one run\n\
         - full softmax: {full_us:.1} µs per query at batch 1 (the 1× of every speedup)\n\
         - P@k = |top-k ∩ exact top-k| / k against the full softmax; top-1 acc against the true \
         next word; FLOP speedup = vocabulary / dot products per query\n\n",
        model = file_name(&a.model),
        min = a.min_p1,
        rev = git_revision(),
        date = today(),
        cores = std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu = cpu_model(),
        n = n_contexts,
        text = a.text.display(),
        vocab = lm.spec().vocab_size,
        d = lm.spec().d_hidden,
        k = eval::K_MAX,
        repeats = a.repeats,
    );
    md.push_str(&table2_markdown(table, a.min_p1));
    md.push_str("\nThe paper's columns are its PTB-small row (numpy/C++ on a Xeon E5-2620).\n\n");
    md.push_str("## Precision against speedup (the paper's Figures 2–7)\n\n");
    md.push_str(&figures);
    md.push_str("\n## Every setting\n\n");
    md.push_str(&settings_markdown(rows));
    if let Some(notes) = &a.notes {
        let text = std::fs::read_to_string(notes)
            .with_context(|| format!("reading --notes {}", notes.display()))?;
        md.push('\n');
        md.push_str(&text);
    }
    fastsoftmax_infer::files::write_atomic(&stem(".md"), md.as_bytes())?;
    eprintln!(
        "wrote {0}.md, {0}.jsonl and {0}-p_at_{{1,5}}.{{png,svg}}",
        out.display()
    );
    Ok(())
}

fn settings_markdown(rows: &[CompareRow]) -> String {
    let mut s = String::from(
        "| method | setting | P@1 | P@5 | top-1 acc | µs/q b1 | speedup b1 | µs/q b64 | speedup b64 | FLOP speedup |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        let x = &r.report;
        s.push_str(&format!(
            "| {} | `{}` | {:.4} | {:.4} | {:.4} | {:.1} | {:.2}× | {:.1} | {:.2}× | {:.2}× |\n",
            r.method,
            x.head,
            x.p_at_1,
            x.p_at_5,
            x.acc_at_1,
            x.us_per_query_b1,
            x.speedup_b1,
            x.us_per_query_b64,
            x.speedup_b64,
            x.flop_speedup
        ));
    }
    s
}

fn git_revision() -> String {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match run(&["rev-parse", "--short", "HEAD"]) {
        Some(rev) => {
            let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{rev} (with uncommitted changes)")
            } else {
                rev
            }
        }
        None => "unknown (not a git checkout)".into(),
    }
}

fn today() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown date".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(method: &str, head: &str, p1: f64, speedup: f64) -> CompareRow {
        CompareRow {
            method: method.into(),
            report: HeadReport {
                head: head.into(),
                contexts: 10,
                p_at_1: p1,
                p_at_5: p1,
                acc_at_1: 0.2,
                acc_at_5: 0.4,
                acc_at_10: 0.5,
                us_per_query_b1: 100.0 / speedup,
                us_per_query_b64: 10.0,
                speedup_b1: speedup,
                speedup_b64: 1.0,
                flop_speedup: speedup,
                us_per_word_end_to_end: None,
                speedup_end_to_end: None,
            },
        }
    }

    #[test]
    fn table2_picks_the_fastest_precise_setting_or_the_most_precise_one() {
        let rows = vec![
            row("svd", "svd-a", 0.99, 1.5),
            row("svd", "svd-b", 0.98, 2.5),
            row("svd", "svd-c", 0.90, 4.0),
            row("lsh", "lsh-a", 0.30, 1.2),
            row("lsh", "lsh-b", 0.50, 0.4),
            row("l2s", "l2s", 0.999, 12.0),
        ];
        let t = table2(&rows, 0.97);
        let picked: Vec<(&str, bool)> = t
            .iter()
            .map(|r| (r.report.head.as_str(), r.reaches_min_p1))
            .collect();
        // Paper order: L2S, SVD, LSH.
        assert_eq!(
            picked,
            vec![("l2s", true), ("svd-b", true), ("lsh-b", false)]
        );
        let md = table2_markdown(&t, 0.97);
        assert!(md.contains("LSH-MIPS †"), "{md}");
        assert!(md.contains("| 10.6× | 0.998 |"), "{md}");
    }
}
