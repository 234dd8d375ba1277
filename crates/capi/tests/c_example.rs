//! The C example, built with `cc` against the static library and run on the shipped model:
//! the predictions the Rust API makes, and (where valgrind is installed) no leak and no
//! memory error.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{model_dir, rust_top_k};

/// `target/<profile>`, where cargo put the static library beside this test's binary.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The static library, when `cargo build -p fastsoftmax-capi` made it from the sources as they
/// are (`cargo test` builds the Rust library only: `.ci/run` builds it, then runs this test).
fn static_library() -> Result<PathBuf, String> {
    let lib = profile_dir().join("libfastsoftmax_c.a");
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified());
    match (modified(&lib), modified(&source)) {
        (Ok(built), Ok(edited)) if built >= edited => Ok(lib),
        (Ok(_), _) => Err(format!("{} is older than src/lib.rs", lib.display())),
        _ => Err(format!("{} is not built", lib.display())),
    }
}

fn build(lib: &Path, out: &Path) -> bool {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("cc")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-o")
        .arg(out)
        .arg(crate_dir.join("examples/c/predict.c"))
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(lib)
        .args(["-lm", "-lpthread", "-ldl"])
        .status();
    match status {
        Ok(s) => {
            assert!(s.success(), "cc failed on examples/c/predict.c");
            true
        }
        Err(_) => false,
    }
}

#[test]
fn the_c_example_predicts_as_rust_does_and_leaks_nothing() {
    let lib = match static_library() {
        Ok(lib) => lib,
        Err(why) => {
            eprintln!(
                "the C example is skipped: {why} (cargo build --release -p fastsoftmax-capi \
                 builds it; .ci/run does)"
            );
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("predict");
    if !build(&lib, &exe) {
        eprintln!("no C compiler (cc): the C example is skipped");
        return;
    }
    let model = model_dir();
    let out = Command::new(&exe)
        .args([model.to_str().unwrap(), "full", "the company said"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let words: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    let (best, lm) = rust_top_k(&model, "the company said", 5);
    let expected: Vec<String> = best
        .iter()
        .map(|s| lm.vocab().word(s.id).to_string())
        .collect();
    assert_eq!(words, expected);
    // A missing model: exit status 1 and the folder named.
    let out = Command::new(&exe)
        .args(["/no/such/model", "full", "the"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/model"));

    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("valgrind is not installed: the memory check is skipped");
        return;
    }
    let out = Command::new("valgrind")
        .args([
            "--leak-check=full",
            "--error-exitcode=99",
            "--errors-for-leak-kinds=definite",
        ])
        .arg(&exe)
        .args([model.to_str().unwrap(), "full", "the company said"])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "valgrind: {report}");
    assert!(report.contains("ERROR SUMMARY: 0 errors"), "{report}");
    assert!(
        report.contains("definitely lost: 0 bytes")
            || report.contains("All heap blocks were freed"),
        "{report}"
    );
}
