//! `fastsoftmax export-npy`: the output layer and test contexts as `.npy` arrays, so peer
//! implementations (numpy, faiss) run on exactly the data our heads see.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use fastsoftmax_infer::{eval, LanguageModel};

#[derive(Args, Debug)]
pub struct ExportNpyArgs {
    /// Model directory, e.g. assets/models/ptb-small-lstm.
    #[arg(long)]
    model: PathBuf,
    /// Text whose contexts are exported (one tokenized sentence per line).
    #[arg(long)]
    text: PathBuf,
    /// Output directory: W.npy `[vocab, d]`, b.npy `[vocab]`, contexts.npy `[n, d]` (float32)
    /// and next.npy `[n]` (int32, the word that followed each context).
    #[arg(long)]
    out: PathBuf,
    /// Export at most N contexts (the first N positions of the text).
    #[arg(long, default_value_t = 10_000)]
    max_contexts: usize,
}

pub fn run(a: ExportNpyArgs) -> anyhow::Result<()> {
    let lm = LanguageModel::load(&a.model)?;
    let tokens = fastsoftmax_data::corpus::read_tokens(&a.text, lm.vocab())?;
    let c = eval::collect_contexts(&lm, &tokens, a.max_contexts)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let m = lm.full_head().matrix();
    let (vocab, d) = (m.n_rows(), m.dim());
    let w: Vec<f32> = (0..vocab).flat_map(|i| m.row(i)).collect();
    let b: Vec<f32> = (0..vocab).map(|i| m.bias(i)).collect();
    write_npy(&a.out.join("W.npy"), Npy::F32(&w), &[vocab, d])?;
    write_npy(&a.out.join("b.npy"), Npy::F32(&b), &[vocab])?;
    write_npy(&a.out.join("contexts.npy"), Npy::F32(&c.hs), &[c.len(), d])?;
    let next: Vec<i32> = c.next.iter().map(|&x| x as i32).collect();
    write_npy(&a.out.join("next.npy"), Npy::I32(&next), &[c.len()])?;
    println!(
        "wrote {}/{{W,b,contexts,next}}.npy: {vocab} × {d} output layer, {} contexts of {}",
        a.out.display(),
        c.len(),
        a.text.display()
    );
    Ok(())
}

/// Data of an `.npy` array.
pub enum Npy<'a> {
    F32(&'a [f32]),
    I32(&'a [i32]),
}

/// Writes a C-order `.npy` file (format 1.0), atomically.
pub fn write_npy(path: &Path, data: Npy<'_>, shape: &[usize]) -> anyhow::Result<()> {
    let (descr, body): (&str, Vec<u8>) = match data {
        Npy::F32(x) => ("<f4", x.iter().flat_map(|v| v.to_le_bytes()).collect()),
        Npy::I32(x) => ("<i4", x.iter().flat_map(|v| v.to_le_bytes()).collect()),
    };
    let dims: Vec<String> = shape.iter().map(|n| n.to_string()).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + header length (2) + header, padded with spaces to 64 bytes, ending in \n.
    let total = (10 + header.len() + 1).div_ceil(64) * 64;
    header.push_str(&" ".repeat(total - 10 - header.len() - 1));
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend(body);
    fastsoftmax_infer::files::write_atomic(path, &bytes)?;
    Ok(())
}
