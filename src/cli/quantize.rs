//! `fastsoftmax quantize`: a translator's matrices to int8 rows with one scale per row, or to
//! int16 with one scale per matrix.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use fastsoftmax_translate::artifact::{NmtWeights, Precision, WEIGHTS_FILE};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum To {
    /// int8 rows, one f32 scale per row (AVX-512 VNNI products where the CPU has them).
    Int8,
    /// int16, one f32 scale per matrix (Devlin 2017; AVX-512 BW products): half the size.
    Int16,
}

#[derive(Args, Debug)]
pub struct QuantizeArgs {
    /// Translator directory with f32 weights (written by `train-nmt`).
    #[arg(long)]
    model: PathBuf,
    /// Precision of the matrices (biases stay f32).
    #[arg(long, value_enum, default_value_t = To::Int8)]
    to: To,
    /// Directory for the quantized translator (`translate --model` reads it).
    #[arg(long)]
    out: PathBuf,
}

pub fn run(a: QuantizeArgs) -> anyhow::Result<()> {
    let w = NmtWeights::load(&a.model)
        .with_context(|| format!("loading the translator in {}", a.model.display()))?;
    if w.precision() != Precision::F32 {
        bail!(
            "{} is already quantized ({:?}); quantize the f32 model it came from",
            a.model.display(),
            w.precision()
        );
    }
    if a.out.canonicalize().ok() == a.model.canonicalize().ok() {
        bail!("--out must differ from --model: the f32 model stays as it is");
    }
    let q = match a.to {
        To::Int8 => w.quantize_int8(),
        To::Int16 => w.quantize_int16(),
    };
    q.save(&a.out)?;
    let size = |d: &PathBuf| std::fs::metadata(d.join(WEIGHTS_FILE)).map_or(0, |m| m.len());
    let command: Vec<String> = std::env::args().collect();
    fastsoftmax_infer::files::write_atomic(
        &a.out.join("command.txt"),
        format!("{}\n", command.join(" ")).as_bytes(),
    )?;
    println!(
        "wrote {} ({:?}): {:.1} MB of weights, from {:.1} MB",
        a.out.display(),
        q.precision(),
        size(&a.out) as f64 / 1e6,
        size(&a.model) as f64 / 1e6
    );
    Ok(())
}
