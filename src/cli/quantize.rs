//! `fastsoftmax quantize`: a translator's matrices to int8 rows with one scale per row, or to
//! int16 with one scale per matrix; a language model's vocabulary matrices stored as int8 rows.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use fastsoftmax_infer::heads::{fingerprint, read_head};
use fastsoftmax_infer::model::artifact::{self, LmWeights};
use fastsoftmax_translate::artifact::{NmtWeights, Precision, WEIGHTS_FILE};
use fastsoftmax_translate::vmap::VocabMap;
use fastsoftmax_translate::Translator;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum To {
    /// int8 rows, one f32 scale per row (AVX-512 VNNI products where the CPU has them).
    Int8,
    /// int16, one f32 scale per matrix (Devlin 2017; AVX-512 BW products): half the size.
    Int16,
}

#[derive(Args, Debug)]
pub struct QuantizeArgs {
    /// Translator directory with f32 weights (written by `train-nmt`), or a language model
    /// (`train-lm`): its embedding and output rows are then stored as int8 (a quarter of their
    /// bytes) and widened to f32 on load, so it serves as before but for the rounding.
    #[arg(long)]
    model: PathBuf,
    /// Precision of the matrices (biases stay f32).
    #[arg(long, value_enum, default_value_t = To::Int8)]
    to: To,
    /// Directory for the quantized translator (`translate --model` reads it).
    #[arg(long)]
    out: PathBuf,
    /// Ship this vocabulary map (from `build-vmap --model MODEL`) inside the quantized
    /// translator (`vocab.map`, its digest in the manifest): `translate` and an app loading the
    /// folder then decode with it by default. Without it, a map --model ships is carried over.
    #[arg(long)]
    vmap: Option<PathBuf>,
}

pub fn run(a: QuantizeArgs) -> anyhow::Result<()> {
    if a.out.canonicalize().ok() == a.model.canonicalize().ok() {
        bail!("--out must differ from --model: the f32 model stays as it is");
    }
    if manifest_format(&a.model).as_deref() == Some(artifact::FORMAT) {
        return quantize_lm(&a);
    }
    let w = NmtWeights::load(&a.model)
        .with_context(|| format!("loading the translator in {}", a.model.display()))?;
    if w.precision() != Precision::F32 {
        bail!(
            "{} is already quantized ({:?}); quantize the f32 model it came from",
            a.model.display(),
            w.precision()
        );
    }
    let mut q = match a.to {
        To::Int8 => w.quantize_int8(),
        To::Int16 => w.quantize_int16(),
    };
    if let Some(path) = &a.vmap {
        let map = VocabMap::load(path)?;
        // Refused here, not when an app first loads the folder: a map of another vocabulary.
        map.for_vocab(&w.tgt_vocab)
            .with_context(|| format!("shipping the vocabulary map {}", path.display()))?;
        q.vmap = Some(map);
    }
    q.save(&a.out)?;
    let carried = carry_heads(&a.model, &w, &a.out, &q)?;
    record(&a, &format!("{:?}", q.precision()))?;
    if !carried.is_empty() {
        println!("carried the screening heads {} over", carried.join(", "));
    }
    Ok(())
}

/// Writes the command into `--out` and says what was written (`what`) and how large it is.
fn record(a: &QuantizeArgs, what: &str) -> anyhow::Result<()> {
    let command: Vec<String> = std::env::args().collect();
    fastsoftmax_infer::files::write_atomic(
        &a.out.join("command.txt"),
        format!("{}\n", command.join(" ")).as_bytes(),
    )?;
    let size = |d: &Path| std::fs::metadata(d.join(WEIGHTS_FILE)).map_or(0, |m| m.len());
    println!(
        "wrote {} ({what}): {:.1} MB of weights, from {:.1} MB",
        a.out.display(),
        size(&a.out) as f64 / 1e6,
        size(&a.model) as f64 / 1e6
    );
    Ok(())
}

/// The `format` a model folder's manifest records, if it has a readable one.
fn manifest_format(dir: &Path) -> Option<String> {
    let text = std::fs::read(dir.join("manifest.json")).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&text).ok()?;
    Some(value.get("format")?.as_str()?.to_string())
}

/// A language model's embedding and output rows stored as int8 (its recurrent layers and
/// biases stay f32). Its heads stay behind: each is bound to the f32 output layer it was
/// trained on, and the rounded rows are another layer.
fn quantize_lm(a: &QuantizeArgs) -> anyhow::Result<()> {
    if !matches!(a.to, To::Int8) {
        bail!("a language model is stored as int8 only: int16 serves translators; drop --to");
    }
    if a.vmap.is_some() {
        bail!("--vmap ships a vocabulary map inside a translator, not a language model");
    }
    let w = LmWeights::load(&a.model)
        .with_context(|| format!("loading the language model in {}", a.model.display()))?;
    w.save_int8(&a.out)?;
    record(a, "embedding and output rows int8")?;
    let heads: Vec<String> = fastsoftmax_infer::heads::trained(&a.model)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    if !heads.is_empty() {
        eprintln!(
            "warning: the heads {} stay behind: each is bound to the f32 output layer; train them again on {} with `fastsoftmax train-head`",
            heads.join(", "),
            a.out.display()
        );
    }
    Ok(())
}

/// Copies the f32 model's screening heads (l2s, ds: `translate --head`) into the quantized
/// artifact, each checked against the f32 output layer and then bound to the quantized one
/// (their manifest's fingerprint is the only change: L2S stores words, not rows, and DS its
/// own rows). Other heads, and every head for int16 (which serves none), stay behind.
fn carry_heads(
    model: &Path,
    w: &NmtWeights,
    out: &Path,
    q: &NmtWeights,
) -> anyhow::Result<Vec<String>> {
    let Ok(entries) = std::fs::read_dir(model.join("heads")) else {
        return Ok(Vec::new());
    };
    let f32_output = Translator::from_weights(w.clone())?.output_head();
    let Some(quantized) = Translator::from_weights(q.clone())?.output_head() else {
        return Ok(Vec::new());
    };
    let f32_output = f32_output.context("the f32 translator has no f32 output layer")?;
    let mut carried = Vec::new();
    for entry in entries {
        let dir = entry?.path();
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let Ok((mut m, _)) = read_head(&dir, &f32_output) else {
            eprintln!(
                "warning: {} is not a readable head of this model; not carried over",
                dir.display()
            );
            continue;
        };
        if !matches!(m.kind.as_str(), "l2s" | "ds") {
            continue;
        }
        m.model_fingerprint = fingerprint(&quantized);
        let dest = out.join("heads").join(&name);
        let tmp = out.join("heads").join(format!("{name}.tmp"));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        for f in std::fs::read_dir(&dir)? {
            let f = f?.path();
            if f.is_file() {
                std::fs::copy(&f, tmp.join(f.file_name().unwrap_or_default()))?;
            }
        }
        std::fs::write(tmp.join("head.json"), serde_json::to_vec_pretty(&m)?)?;
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::rename(&tmp, &dest).with_context(|| format!("writing {}", dest.display()))?;
        carried.push(name);
    }
    carried.sort();
    Ok(carried)
}
