//! `fastsoftmax ds-figures`: the DS-Softmax paper's figures for a trained head — training
//! memory during mitosis (Figure D.1) and word redundancy against frequency (Figure C.1).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use fastsoftmax_infer::{DsHead, LanguageModel};
use plotters::prelude::*;

#[derive(Args, Debug)]
pub struct DsFiguresArgs {
    /// Model directory, e.g. assets/models/ptb-small-lstm.
    #[arg(long)]
    model: PathBuf,
    /// The DS head (trained by `train-head ds`).
    #[arg(long, default_value = "ds")]
    head: String,
    /// Text whose word counts give the frequencies (the training text).
    #[arg(long, default_value = "data/ptb/ptb.train.txt")]
    text: PathBuf,
    /// Output directory: memory.png, redundancy.png and redundancy.json.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(a: DsFiguresArgs) -> anyhow::Result<()> {
    let lm = LanguageModel::load(&a.model)?;
    let dir = a.model.join("heads").join(&a.head);
    let head = DsHead::load(&dir, &lm)
        .with_context(|| format!("--head {} must be a DS head in {}", a.head, dir.display()))?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    crate::cli::plot::register_font();

    // Figure D.1: the memory curve recorded in the head's training report.
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("head.json"))
            .with_context(|| format!("reading {}", dir.display()))?,
    )?;
    let memory: Vec<(f64, f64, u64)> = manifest["training"]["report"]["memory"]
        .as_array()
        .map(|pts| {
            pts.iter()
                .filter_map(|p| {
                    Some((
                        p["step"].as_f64()?,
                        p["relative"].as_f64()?,
                        p["experts"].as_u64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    if memory.is_empty() {
        eprintln!("{}: no memory curve in its training report (stage snapshots carry none: use the final head)", dir.display());
    } else {
        let peak = memory.iter().map(|p| p.1).fold(0.0, f64::max);
        chart(
            &a.out.join("memory.png"),
            &format!(
                "Training memory of {} relative to one full softmax (peak {peak:.2}×)",
                a.head
            ),
            "training step",
            "rows held / |V|",
            &memory.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(),
            true,
        )?;
    }

    // Figure C.1: how many experts hold each word, against how often it occurs.
    let tokens = fastsoftmax_data::corpus::read_tokens(&a.text, lm.vocab())?;
    let vocab = lm.spec().vocab_size;
    let mut freq = vec![0usize; vocab];
    for &t in &tokens {
        freq[t as usize] += 1;
    }
    let mut redundancy = vec![0usize; vocab];
    for e in 0..head.n_experts() {
        for c in head.expert(e).ids {
            redundancy[c as usize] += 1;
        }
    }
    let points: Vec<(f64, f64)> = (0..vocab)
        .filter(|&c| freq[c] > 0 && redundancy[c] > 0)
        .map(|c| ((freq[c] as f64).ln(), (redundancy[c] as f64).ln()))
        .collect();
    chart(
        &a.out.join("redundancy.png"),
        &format!("{}: experts holding a word vs its frequency", a.head),
        "ln(word count in the training text)",
        "ln(experts holding the word)",
        &points,
        false,
    )?;
    let rows: Vec<serde_json::Value> = (0..vocab)
        .map(|c| serde_json::json!({"word": lm.vocab().word(c as u32), "count": freq[c], "experts": redundancy[c]}))
        .collect();
    fastsoftmax_infer::files::write_atomic(
        &a.out.join("redundancy.json"),
        &serde_json::to_vec(&rows)?,
    )?;
    let corr = pearson(&points);
    println!(
        "wrote {}/memory.png, redundancy.png, redundancy.json · correlation of ln count and ln experts {corr:.3}",
        a.out.display()
    );
    Ok(())
}

fn pearson(p: &[(f64, f64)]) -> f64 {
    let n = p.len().max(1) as f64;
    let (mx, my) = (
        p.iter().map(|q| q.0).sum::<f64>() / n,
        p.iter().map(|q| q.1).sum::<f64>() / n,
    );
    let cov: f64 = p.iter().map(|q| (q.0 - mx) * (q.1 - my)).sum();
    let vx: f64 = p.iter().map(|q| (q.0 - mx).powi(2)).sum();
    let vy: f64 = p.iter().map(|q| (q.1 - my).powi(2)).sum();
    cov / (vx * vy).sqrt().max(1e-300)
}

/// A line (`line`) or a translucent scatter of `points` on linear axes, written atomically.
fn chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    points: &[(f64, f64)],
    line: bool,
) -> anyhow::Result<()> {
    if points.is_empty() {
        anyhow::bail!("nothing to plot for {}", path.display());
    }
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    let (px, py) = (((x1 - x0) * 0.05).max(0.1), ((y1 - y0) * 0.08).max(0.1));
    crate::cli::plot::write_png(path, (900, 600), |root| {
        let err = |e| anyhow::anyhow!("plotting: {e:?}");
        root.fill(&WHITE).map_err(err)?;
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(60)
            .build_cartesian_2d(x0 - px..x1 + px, (y0 - py).min(0.0)..y1 + py)
            .map_err(err)?;
        c.configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(err)?;
        if line {
            c.draw_series(LineSeries::new(points.to_vec(), BLUE.stroke_width(2)))
                .map_err(err)?;
        } else {
            c.draw_series(
                points
                    .iter()
                    .map(|&p| Circle::new(p, 3, BLUE.mix(0.15).filled())),
            )
            .map_err(err)?;
        }
        root.present().map_err(err)?;
        Ok(())
    })
}
