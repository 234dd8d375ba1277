//! How artifacts meet the disk: atomic writes, and SHA-256 digests that prove a data file is the
//! one its manifest was written with.
//!
//! safetensors has no checksum, so a flipped byte inside the weights would load and serve
//! silently wrong answers. Every manifest (`manifest.json`, `head.json`) therefore records
//! `sha256: { file name: hex digest }` for the data files it describes, and loading refuses a
//! file whose digest differs. Artifacts written before digests existed still load, with one
//! warning per file on stderr; `fastsoftmax verify --record` adds their digests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// File name → lowercase hex SHA-256, as recorded in a manifest's `sha256` field.
pub type Digests = BTreeMap<String, String>;

/// The kinds of model folder, by the `format` their `manifest.json` records: what each is and
/// the commands that take it. Every loader names these when it is given a folder of another
/// kind, so a user learns which command the folder was meant for.
pub const MODEL_KINDS: &[(&str, &str, &str)] = &[
    (
        "fastsoftmax-lm",
        "a language model (from `train-lm` or `ime pack`)",
        "`predict`, `eval`, `bench`, `compare`, `train-head`, `export-npy`, `ds-figures`, `quantize`, `quickstart` and `ime`",
    ),
    (
        "fastsoftmax-nmt",
        "a recurrent translator (from `train-nmt`)",
        "`translate`, `quantize`, `distill --teacher`, `build-vmap --model`, `text tokenize --model`, `train-head l2s|ds` and `quickstart --translate`",
    ),
    (
        "fastsoftmax-nmt-transformer",
        "a Transformer translator (from `train-nmt` with \"arch\": \"transformer\")",
        "`translate`, `distill --teacher`, `build-vmap --model`, `text tokenize --model` and `quickstart --translate`",
    ),
];

/// The error for a manifest of format `found` where a `wanted` one was expected: what the
/// folder is, what was wanted, and which commands take the folder.
pub fn wrong_kind(found: &str, wanted: &str) -> String {
    let what = |format: &str| MODEL_KINDS.iter().find(|k| k.0 == format);
    let wanted_what = what(wanted).map_or(wanted, |k| k.1);
    match what(found) {
        Some((_, is, takes)) => format!(
            "this folder holds {is}, not {wanted_what}; {takes} take it"
        ),
        None => format!(
            "this folder's manifest has format `{found}`, not {wanted_what} (`{wanted}`); it was not written by this toolkit, or by a newer one"
        ),
    }
}

/// The manifest at `path` as JSON, refused unless its `format` is `format` (a folder of another
/// kind is named, with the commands that take it: [`wrong_kind`]).
pub fn read_manifest(path: &Path, format: &str) -> Result<serde_json::Value> {
    let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let value: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| Error::format(path, format!("not a valid manifest: {e}")))?;
    let found = value.get("format").and_then(|f| f.as_str()).unwrap_or("?");
    if found != format {
        return Err(Error::format(path, wrong_kind(found, format)));
    }
    Ok(value)
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `path` exists as something other than a plain file or folder: a device such as
/// `/dev/null`, a pipe, or a symbolic link (`/dev/stdout`). Such a path is written in place:
/// renaming a finished file onto it would replace the device or the link itself (as root,
/// `/dev/null` with a plain file).
pub fn is_special(path: &Path) -> bool {
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    link || std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// Writes bytes to `path` atomically (temporary file in the same directory, then rename); a
/// device, pipe or link ([`is_special`]) is written in place.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if is_special(path) {
        return std::fs::write(path, bytes).map_err(|e| Error::io(path, e));
    }
    let mut tmp = PathBuf::from(path);
    tmp.as_mut_os_string().push(".tmp");
    std::fs::write(&tmp, bytes).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

/// What a data file's bytes say against the digest its manifest recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileCheck {
    /// The digest matches.
    Verified,
    /// The manifest records no digest for the file (written before digests existed).
    Unrecorded,
    /// The file differs from the one the manifest was written with.
    Differs { recorded: String, actual: String },
}

/// Checks `bytes` against `recorded[name]`.
pub fn check(recorded: &Digests, name: &str, bytes: &[u8]) -> FileCheck {
    match recorded.get(name) {
        None => FileCheck::Unrecorded,
        Some(want) => {
            let actual = sha256_hex(bytes);
            if actual.eq_ignore_ascii_case(want) {
                FileCheck::Verified
            } else {
                FileCheck::Differs {
                    recorded: want.clone(),
                    actual,
                }
            }
        }
    }
}

/// Checks the bytes of `path` against `recorded` (the digests of the manifest at `manifest`, in
/// the model directory `model_dir`): a difference is an error that names the file and the fix
/// (`fix` says how to make a good copy anew); a missing digest is a warning, printed once per
/// file.
pub fn verify(
    path: &Path,
    bytes: &[u8],
    recorded: &Digests,
    manifest: &Path,
    model_dir: &Path,
    fix: &str,
) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match check(recorded, &name, bytes) {
        FileCheck::Verified => Ok(()),
        FileCheck::Unrecorded => {
            warn_once(
                path,
                &format!(
                    "warning: {} records no SHA-256 of {name} (written before digests existed), so the file cannot be verified; if it is intact, record its digest with `fastsoftmax verify --model {} --record`, or {fix}",
                    manifest.display(),
                    model_dir.display()
                ),
            );
            Ok(())
        }
        FileCheck::Differs { recorded, actual } => Err(Error::format(
            path,
            format!(
                "the file is not the one {} was written with (SHA-256 {actual}, recorded {recorded}): it was corrupted or changed after it was saved — restore it (from git, a backup or the download) or {fix}",
                manifest.display()
            ),
        )),
    }
}

/// Checks each of `data_files` in the directory of the manifest at `manifest` against the
/// manifest's `sha256` field, without loading anything else: what `fastsoftmax verify` reports.
pub fn check_dir(manifest: &Path, data_files: &[&str]) -> Result<Vec<(String, FileCheck)>> {
    let recorded = recorded_digests(manifest)?;
    let dir = manifest.parent().unwrap_or(Path::new("."));
    data_files
        .iter()
        .map(|name| {
            let path = dir.join(name);
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            Ok((name.to_string(), check(&recorded, name, &bytes)))
        })
        .collect()
}

/// The digests of those `data_files` in `dir` that `recorded` lacks (an artifact written before
/// digests existed), for the artifact's manifest at `manifest` to record. A recorded digest is
/// never replaced: a file that differs from it is an error, and must be restored.
pub(crate) fn missing_digests(
    dir: &Path,
    manifest: &Path,
    recorded: &Digests,
    data_files: &[&str],
) -> Result<Digests> {
    let mut missing = Digests::new();
    for name in data_files {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        match check(recorded, name, &bytes) {
            FileCheck::Verified => {}
            FileCheck::Unrecorded => {
                missing.insert(name.to_string(), sha256_hex(&bytes));
            }
            FileCheck::Differs { .. } => verify(
                &path,
                &bytes,
                recorded,
                manifest,
                dir,
                "write the artifact anew",
            )?,
        }
    }
    Ok(missing)
}

fn read_json(manifest: &Path) -> Result<serde_json::Value> {
    let text = std::fs::read(manifest).map_err(|e| Error::io(manifest, e))?;
    let json: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| Error::format(manifest, format!("not valid JSON ({e})")))?;
    if !json.is_object() {
        return Err(Error::format(manifest, "not a manifest (a JSON object)"));
    }
    Ok(json)
}

fn recorded_digests(manifest: &Path) -> Result<Digests> {
    match read_json(manifest)?.get("sha256") {
        None => Ok(Digests::new()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
            Error::format(
                manifest,
                format!("field `sha256` is not a map of file names to digests ({e})"),
            )
        }),
    }
}

fn warn_once(path: &Path, message: &str) {
    static WARNED: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.insert(path.to_path_buf()) {
        eprintln!("{message}");
    }
}

/// Serialises named f32 tensors (`(name, shape, values)`, row-major) as a safetensors file.
/// Lengths are the caller's contract (artifacts validate before saving).
pub fn f32_safetensors(
    tensors: &[(String, Vec<usize>, &[f32])],
) -> std::result::Result<Vec<u8>, String> {
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, _, d)| d.iter().flat_map(|x| x.to_le_bytes()).collect())
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), b)| {
            let view =
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), b)
                    .map_err(|e| format!("tensor `{name}`: {e}"))?;
            Ok((name.clone(), view))
        })
        .collect::<std::result::Result<_, String>>()?;
    safetensors::serialize(views, &None).map_err(|e| e.to_string())
}

/// The values of an f32 tensor read from a safetensors file (little-endian).
pub fn f32_values(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_the_standard_test_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_changed_byte_is_an_error_naming_the_file() {
        let recorded: Digests = [("w.bin".to_string(), sha256_hex(b"weights"))].into();
        let (path, manifest) = (Path::new("m/w.bin"), Path::new("m/manifest.json"));
        let dir = Path::new("m");
        assert!(verify(path, b"weights", &recorded, manifest, dir, "re-export").is_ok());
        let err = verify(path, b"weightz", &recorded, manifest, dir, "re-export")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("m/w.bin: ") && err.contains("re-export"),
            "{err}"
        );
        assert_eq!(check(&Digests::new(), "w.bin", b"x"), FileCheck::Unrecorded);
        assert!(verify(path, b"x", &Digests::new(), manifest, dir, "re-export").is_ok());
    }

    /// A pipe or a link (as `/dev/null` or `/dev/stdout` are) is written, not replaced.
    #[cfg(unix)]
    #[test]
    fn an_atomic_write_to_a_pipe_or_link_keeps_it() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let (fifo, file) = (dir.path().join("out.fifo"), dir.path().join("out.json"));
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_atomic(&fifo, b"{}").unwrap();
        // Checked before the join: had the pipe been replaced, the reader would wait forever.
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(reader.join().unwrap(), b"{}");
        assert!(is_special(&fifo) && !is_special(&file) && !is_special(dir.path()));
        write_atomic(&file, b"[]").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"[]");
        assert!(!dir.path().join("out.json.tmp").exists());
        // A link (as `/dev/stdout` is) stays a link; the file it names gets the bytes.
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(is_special(&link));
        write_atomic(&link, b"{}").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&file).unwrap(), b"{}");
    }
}
