//! `fastsoftmax synthetic`: the DS-Softmax paper's hierarchical Gaussian check (Appendix A):
//! does each expert keep the sub-classes of one super class?

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use fastsoftmax_nn::ds::DsConfig;
use fastsoftmax_nn::Backend;
use plotters::prelude::*;

#[derive(Args, Debug)]
pub struct SyntheticArgs {
    /// Super classes (the hidden first level).
    #[arg(long, default_value_t = 10)]
    supers: usize,
    /// Sub-classes per super class (the labels are the sub-classes).
    #[arg(long, default_value_t = 10)]
    subs: usize,
    /// Experts of the DS layer [default: one per super class].
    #[arg(long)]
    experts: Option<usize>,
    /// JSON with any of the DS hyper-parameters (see experiments/configs/ds-synthetic-100.json).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Output path without extension: STEM.png (expert × sub-class map) and STEM.json.
    #[arg(long)]
    out: PathBuf,
    /// burn backend: flex (default), ndarray or wgpu.
    #[arg(long, default_value = "flex")]
    backend: String,
}

pub fn run(a: SyntheticArgs) -> anyhow::Result<()> {
    if a.supers == 0 || a.subs == 0 {
        anyhow::bail!("--supers and --subs must be ≥ 1");
    }
    let cfg = match &a.config {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str::<DsConfig>(&text)
                .with_context(|| format!("{}: not a valid DS config", p.display()))?
        }
        None => fastsoftmax_nn::synthetic::default_config(),
    };
    let experts = a.experts.unwrap_or(a.supers);
    let device = a.backend.parse::<Backend>()?.autodiff_device()?;
    let (report, _) =
        fastsoftmax_nn::synthetic::run(a.supers, a.subs, experts, &cfg, &device, &mut |l| {
            eprintln!("{l}")
        })?;
    if let Some(dir) = a.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let title = format!(
        "{}×{}: sub-classes kept by each of {} experts (purity {:.3})",
        a.supers, a.subs, report.experts, report.purity
    );
    heatmap(&a.out, &title, &report.kept)?;
    let json = serde_json::to_vec_pretty(&report)?;
    fastsoftmax_infer::files::write_atomic(&a.out.with_extension("json"), &json)?;
    println!(
        "{}×{}: purity {:.3}, accuracy full {:.4} / DS {:.4}, {:.2}× fewer FLOPs; wrote {}.png and .json",
        a.supers,
        a.subs,
        report.purity,
        report.full_accuracy,
        report.ds_accuracy,
        report.ds.stages.last().map_or(1.0, |s| s.valid.flop_speedup),
        a.out.display()
    );
    Ok(())
}

/// `kept[expert][class]` as a black-on-white map, experts down, classes across (binned to at
/// most 1000 columns; grey = some of the bin kept). Written atomically as STEM.png.
pub fn heatmap(stem: &Path, title: &str, kept: &[Vec<u8>]) -> anyhow::Result<()> {
    let rows = kept.len();
    let cols = kept.first().map_or(0, |r| r.len());
    if rows == 0 || cols == 0 {
        anyhow::bail!("nothing to draw");
    }
    let bin = cols.div_ceil(1000);
    let bins = cols.div_ceil(bin);
    let cell_w = (1000 / bins).max(1) as u32;
    let cell_h = (600 / rows).clamp(1, 40) as u32;
    let (w, h) = (bins as u32 * cell_w + 40, rows as u32 * cell_h + 80);
    crate::cli::plot::write_png(&stem.with_extension("png"), (w, h), |root| {
        let err = |e| anyhow::anyhow!("plotting: {e:?}");
        root.fill(&WHITE).map_err(err)?;
        crate::cli::plot::register_font();
        root.draw(&Text::new(title.to_string(), (20, 10), ("sans-serif", 18)))
            .map_err(err)?;
        root.draw(&Text::new(
            "x: sub-classes, grouped by super class · y: experts".to_string(),
            (20, h as i32 - 25),
            ("sans-serif", 14),
        ))
        .map_err(err)?;
        for (e, row) in kept.iter().enumerate() {
            for (b, chunk) in row.chunks(bin).enumerate() {
                let share = chunk.iter().map(|&k| k as f64).sum::<f64>() / chunk.len() as f64;
                if share == 0.0 {
                    continue;
                }
                let shade = (255.0 * (1.0 - share)) as u8;
                let (x0, y0) = (20 + b as i32 * cell_w as i32, 40 + e as i32 * cell_h as i32);
                root.draw(&Rectangle::new(
                    [(x0, y0), (x0 + cell_w as i32, y0 + cell_h as i32)],
                    RGBColor(shade, shade, shade).filled(),
                ))
                .map_err(err)?;
            }
        }
        root.present().map_err(err)?;
        Ok(())
    })
}
