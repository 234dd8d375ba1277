//! Helpers shared by the end-to-end tests.

use std::process::Command;

/// Runs the `fastsoftmax` binary: `(success, stdout, stderr)`.
pub fn cli(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fastsoftmax"))
        .args(args)
        .output()
        .expect("run the fastsoftmax binary");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
