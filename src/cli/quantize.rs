//! `fastsoftmax quantize`: a translator's matrices to int8 rows with one scale per row, or to
//! int16 with one scale per matrix; a language model's vocabulary matrices stored as int8 or
//! 4-bit rows.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use fastsoftmax_infer::heads::{
    fingerprint, read_head, save_head, FullHead, HEAD_MANIFEST, HEAD_TENSORS,
};
use fastsoftmax_infer::model::artifact::{self, LmWeights, RowStorage};
use fastsoftmax_infer::LanguageModel;
use fastsoftmax_translate::artifact::{NmtWeights, Precision, WEIGHTS_FILE};
use fastsoftmax_translate::vmap::VocabMap;
use fastsoftmax_translate::Translator;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum To {
    /// int8 rows, one f32 scale per row (AVX-512 VNNI products where the CPU has them, else AVX2).
    Int8,
    /// int16, one f32 scale per matrix (Devlin 2017; AVX-512 BW or AVX2 products): half the size.
    Int16,
    /// 4-bit rows, one f32 scale per row, for a language model's storage (an eighth of f32,
    /// widened on load): the shipped Japanese converter's LSTM converts its dev sentences as
    /// well as with int8 rows, where the translators lost 0.1–0.4 BLEU, so translators refuse it.
    Int4,
}

#[derive(Args, Debug)]
pub struct QuantizeArgs {
    /// Translator directory with f32 weights (written by `train-nmt`), or a language model
    /// (`train-lm`): its embedding and output rows are then stored as int8 (a quarter of their
    /// bytes) and widened to f32 on load, so it serves as before but for the rounding; its
    /// trained heads come along, their word-row tables stored as int8 rows too.
    #[arg(long)]
    model: PathBuf,
    /// Precision of the matrices (biases stay f32).
    #[arg(long, value_enum, default_value_t = To::Int8)]
    to: To,
    /// Directory for the quantized translator (`translate --model` reads it).
    #[arg(long)]
    out: PathBuf,
    /// Ship this vocabulary map (from `build-vmap --model MODEL`) inside the quantized
    /// translator (`vocab.map.gz`, its digest in the manifest): `translate` and an app loading the
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
        To::Int4 => bail!(
            "a translator is quantized to int8 or int16; 4-bit rows serve language models \
             (the shipped translators lost 0.1–0.4 test BLEU with them)"
        ),
    };
    if let Some(path) = &a.vmap {
        let map = VocabMap::load(path)?;
        // Refused here, not when an app first loads the folder: a map of another vocabulary.
        map.for_vocab(&w.tgt_vocab)
            .with_context(|| format!("shipping the vocabulary map {}", path.display()))?;
        q.vmap = Some(map);
    }
    q.save(&a.out)?;
    // The screening heads (l2s, ds: `translate --head`) come along as they are: L2S stores
    // words, not rows, and DS its own rows. Int16 serves no head.
    let quantized = match a.model.join("heads").is_dir() {
        true => Translator::from_weights(q.clone())?.output_head(),
        false => None,
    };
    let carried = match quantized {
        Some(quantized) => {
            let f32_output = Translator::from_weights(w.clone())?
                .output_head()
                .context("the f32 translator has no f32 output layer")?;
            carry_heads(
                &a.model,
                &f32_output,
                &a.out,
                &quantized,
                |kind| matches!(kind, "l2s" | "ds"),
                false,
            )?
        }
        None => Vec::new(),
    };
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

/// A model folder's manifest, if it has a readable one.
fn manifest(dir: &Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).ok()?).ok()
}

/// The `format` a model folder's manifest records.
fn manifest_format(dir: &Path) -> Option<String> {
    Some(manifest(dir)?.get("format")?.as_str()?.to_string())
}

/// The `format_version` a model folder's manifest records.
fn manifest_version(dir: &Path) -> Option<u64> {
    manifest(dir)?.get("format_version")?.as_u64()
}

/// A language model's embedding and output rows stored as int8 or 4-bit rows (its recurrent
/// layers and biases stay f32), with its heads: each head's word-row tables go to int8 rows,
/// and it is bound to the rounded output layer (it was trained on the f32 one, so what it
/// serves changes by the rounding, as the model's own scores do).
fn quantize_lm(a: &QuantizeArgs) -> anyhow::Result<()> {
    let rows = match a.to {
        To::Int8 => RowStorage::Int8,
        To::Int4 => RowStorage::Int4,
        To::Int16 => bail!(
            "a language model is stored as int8 or 4-bit rows: int16 serves translators; use \
             --to int8 or --to int4"
        ),
    };
    if a.vmap.is_some() {
        bail!("--vmap ships a vocabulary map inside a translator, not a language model");
    }
    if manifest_version(&a.model) >= Some(artifact::INT8_FORMAT_VERSION.into()) {
        bail!(
            "{} already stores its vocabulary rows quantized; quantize the f32 model it came from",
            a.model.display()
        );
    }
    let w = LmWeights::load(&a.model)
        .with_context(|| format!("loading the language model in {}", a.model.display()))?;
    w.save_as(&a.out, rows)?;
    let f32_model = LanguageModel::from_weights(w)?;
    let int8_model =
        LanguageModel::load(&a.out).with_context(|| format!("reading back {}", a.out.display()))?;
    let carried = carry_heads(
        &a.model,
        f32_model.full_head(),
        &a.out,
        int8_model.full_head(),
        |_| true,
        true,
    )?;
    let what = match rows {
        RowStorage::Int4 => "embedding and output rows 4-bit",
        _ => "embedding and output rows int8",
    };
    record(a, what)?;
    if !carried.is_empty() {
        println!(
            "carried the heads {} over, their word-row tables as int8",
            carried.join(", ")
        );
    }
    Ok(())
}

/// Copies the heads in `model/heads/` whose kind `keep` accepts into `out/heads/`, each checked
/// against the f32 output layer and then bound to the quantized one; with `rows_int8`, their
/// word-row tables are stored as int8 rows
/// ([`fastsoftmax_infer::heads::Tensors::store_rows_int8`]). A head that does not read is
/// named and left behind. Returns the names carried.
fn carry_heads(
    model: &Path,
    f32_output: &FullHead,
    out: &Path,
    quantized: &FullHead,
    keep: impl Fn(&str) -> bool,
    rows_int8: bool,
) -> anyhow::Result<Vec<String>> {
    let Ok(entries) = std::fs::read_dir(model.join("heads")) else {
        return Ok(Vec::new());
    };
    let mut carried = Vec::new();
    for entry in entries {
        let dir = entry?.path();
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let Ok((mut m, mut tensors)) = read_head(&dir, f32_output) else {
            eprintln!(
                "warning: {} is not a readable head of this model; not carried over",
                dir.display()
            );
            continue;
        };
        if !keep(&m.kind) {
            continue;
        }
        m.model_fingerprint = fingerprint(quantized);
        if rows_int8 {
            let stored = tensors.store_rows_int8();
            if let serde_json::Value::Object(training) = &mut m.training {
                training.insert("int8_rows".into(), stored.into());
            }
        }
        // The kind's other data files (the trigram table) and the records for people.
        let mut extra = Vec::new();
        for f in std::fs::read_dir(&dir)? {
            let f = f?.path();
            let file = f
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            if f.is_file() && file != HEAD_MANIFEST && file != HEAD_TENSORS {
                let bytes =
                    std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?;
                extra.push((file, bytes));
            }
        }
        let extra: Vec<(&str, &[u8])> = extra.iter().map(|(n, b)| (n.as_str(), &b[..])).collect();
        save_head(&out.join("heads").join(&name), &m, &tensors, &extra)?;
        carried.push(name);
    }
    carried.sort();
    Ok(carried)
}
