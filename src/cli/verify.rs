//! `fastsoftmax verify`: are a model directory's files the ones their manifests were written
//! with? Checks the SHA-256 of every data file (the model's weights, each trained head's tensors
//! and tables) against its manifest, then loads each artifact as the engine would.
//! `--record` adds the digests that artifacts written before digests existed lack.

use std::path::{Path, PathBuf};

use clap::Args;
use fastsoftmax_infer::files::{self, FileCheck};
use fastsoftmax_infer::heads::{self, format};
use fastsoftmax_infer::model::artifact::{MANIFEST_FILE, WEIGHTS_FILE};
use fastsoftmax_infer::LanguageModel;
use fastsoftmax_infer::LmWeights;
use fastsoftmax_translate::artifact::{VMAP_FILE, VMAP_TEXT_FILE};
use fastsoftmax_translate::tokenizer::SUBWORDS_FILE;
use serde::Serialize;

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Model directory, e.g. assets/models/ptb-small-lstm (its trained heads are checked too)
    /// or a translator (recurrent or Transformer) such as assets/models/bible-en-de-tiny.
    #[arg(long)]
    model: PathBuf,
    /// Record the SHA-256 of files whose manifest has none (artifacts written before digests
    /// existed). Only do this for files you trust: the digest vouches for them from then on.
    /// A recorded digest is never replaced.
    #[arg(long)]
    record: bool,
    /// One JSON object per file instead of the table.
    #[arg(long)]
    json: bool,
}

/// One data file's row.
#[derive(Debug, Serialize)]
struct Row {
    /// `model` or `heads/NAME`.
    artifact: String,
    file: String,
    /// `verified`, `recorded` (by this run), `unrecorded`, `differs`, or `error`.
    status: &'static str,
    /// Why the artifact does not load (the engine's error), if it does not.
    error: Option<String>,
}

pub fn run(a: VerifyArgs) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let manifest = a.model.join(MANIFEST_FILE);
    let format = read_field(&manifest, "format");
    let transformer = format.as_deref() == Some(fastsoftmax_translate::transformer::FORMAT);
    if transformer || format.as_deref() == Some(fastsoftmax_translate::artifact::FORMAT) {
        // A translator's files (its weights and, for subword sources, its tokenizer; a
        // shipped vocabulary map) are digested since its format's first version.
        let mut data = vec![WEIGHTS_FILE];
        for file in [SUBWORDS_FILE, VMAP_FILE, VMAP_TEXT_FILE] {
            if a.model.join(file).exists() {
                data.push(file);
            }
        }
        check_artifact("translator", &manifest, &data, Ok(vec![]), &mut rows);
        if transformer {
            let engine = fastsoftmax_translate::transformer::TransformerTranslator::load(&a.model);
            if let Err(e) = engine {
                mark_error(&mut rows, "translator", e.to_string());
            }
            return report(&a, &rows);
        }
        let engine = fastsoftmax_translate::Translator::load(&a.model);
        if let Err(e) = &engine {
            mark_error(&mut rows, "translator", e.to_string());
        }
        // Its screening heads (`translate --head`).
        check_heads(&a, &mut rows, |name| match &engine {
            Ok(engine) => fastsoftmax_translate::Screen::load(engine, &a.model, name).map(|_| ()),
            Err(_) => Ok(()),
        });
        return report(&a, &rows);
    }
    let added = match a.record {
        false => Ok(vec![]),
        true => LmWeights::record_digest(&a.model).map(|added| {
            added
                .then(|| WEIGHTS_FILE.to_string())
                .into_iter()
                .collect()
        }),
    };
    check_artifact("model", &manifest, &[WEIGHTS_FILE], added, &mut rows);
    let lm = LanguageModel::load(&a.model);
    if let Err(e) = &lm {
        mark_error(&mut rows, "model", e.to_string());
    }
    check_heads(&a, &mut rows, |name| match &lm {
        Ok(lm) => heads::load(name, &a.model, lm).map(|_| ()),
        Err(_) => Ok(()),
    });
    report(&a, &rows)
}

/// Checks every head of the model: its files against its manifest's digests, then `load`
/// (which reports why it does not load, if it does not).
fn check_heads(
    a: &VerifyArgs,
    rows: &mut Vec<Row>,
    load: impl Fn(&str) -> fastsoftmax_infer::Result<()>,
) {
    for (name, dir) in head_dirs(&a.model) {
        let artifact = format!("heads/{name}");
        let manifest = dir.join(format::HEAD_MANIFEST);
        let kind = read_field(&manifest, "kind");
        let data = format::data_files(kind.as_deref().unwrap_or(""));
        let added = match a.record {
            false => Ok(vec![]),
            true => format::record_digests(&dir),
        };
        check_artifact(&artifact, &manifest, data, added, rows);
        if let Err(e) = load(&name) {
            mark_error(rows, &artifact, e.to_string());
        }
    }
}

/// Prints the rows; an error when a file differs or an artifact does not load.
fn report(a: &VerifyArgs, rows: &[Row]) -> anyhow::Result<()> {
    if a.json {
        for r in rows {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        print_table(rows);
    }
    let bad = rows
        .iter()
        .filter(|r| matches!(r.status, "differs" | "error"))
        .count();
    let unrecorded = rows.iter().filter(|r| r.status == "unrecorded").count();
    if bad > 0 {
        anyhow::bail!(
            "{bad} file(s) of {} differ from their manifests or do not load; see above",
            a.model.display()
        );
    }
    if unrecorded > 0 && !a.json {
        eprintln!(
            "{unrecorded} file(s) have no recorded digest; if they are intact, run again with --record"
        );
    }
    Ok(())
}

/// Checks the data files of one artifact into `rows`; `added` is what recording its missing
/// digests did (the files whose digests it added).
fn check_artifact(
    artifact: &str,
    manifest: &Path,
    data: &[&str],
    added: fastsoftmax_infer::Result<Vec<String>>,
    rows: &mut Vec<Row>,
) {
    let row = |file: &str, status, error| Row {
        artifact: artifact.into(),
        file: file.into(),
        status,
        error,
    };
    let added = match added {
        Ok(added) => added,
        Err(e) => {
            rows.push(row("", "error", Some(e.to_string())));
            return;
        }
    };
    match files::check_dir(manifest, data) {
        Err(e) => rows.push(row("", "error", Some(e.to_string()))),
        Ok(checks) => rows.extend(checks.into_iter().map(|(file, check)| {
            let status = match check {
                FileCheck::Verified if added.contains(&file) => "recorded",
                FileCheck::Verified => "verified",
                FileCheck::Unrecorded => "unrecorded",
                FileCheck::Differs { .. } => "differs",
            };
            row(&file, status, None)
        })),
    }
}

/// Notes on `artifact`'s rows that it does not load (a row of its own if it has none).
fn mark_error(rows: &mut Vec<Row>, artifact: &str, error: String) {
    let mut marked = false;
    for r in rows.iter_mut().filter(|r| r.artifact == artifact) {
        if r.status != "differs" {
            r.status = "error";
        }
        r.error.get_or_insert_with(|| error.clone());
        marked = true;
    }
    if !marked {
        rows.push(Row {
            artifact: artifact.into(),
            file: String::new(),
            status: "error",
            error: Some(error),
        });
    }
}

/// `(name, dir)` of every directory in `model/heads` that holds a `head.json`, by name.
fn head_dirs(model: &Path) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(model.join("heads"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join(format::HEAD_MANIFEST).exists())
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .collect();
    out.sort();
    out
}

/// A top-level string field of a JSON manifest (`kind` of a head, `format` of a translator).
fn read_field(manifest: &Path, field: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(manifest).ok()?).ok()?;
    Some(v.get(field)?.as_str()?.to_string())
}

fn print_table(rows: &[Row]) {
    println!("{:<24} {:<18} status", "artifact", "file");
    for r in rows {
        println!("{:<24} {:<18} {}", r.artifact, r.file, r.status);
        if let Some(e) = &r.error {
            println!("    {e}");
        }
    }
}
