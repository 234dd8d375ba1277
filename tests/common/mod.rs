//! Helpers shared by the end-to-end tests.

use std::process::Command;

/// Runs the `fastsoftmax` binary: `(success, stdout, stderr)`.
#[allow(dead_code)] // not every test binary that includes this module uses it
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

/// The shipped English → German translator (stored as int8 with its vocabulary map) widened to
/// f32, without the map: the values it serves, for the f32 engine over every word.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn shipped_bible_f32() -> fastsoftmax_translate::artifact::NmtWeights {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/models/bible-en-de-tiny");
    let mut w = fastsoftmax_translate::artifact::NmtWeights::load(&dir)
        .unwrap()
        .to_f32();
    w.vmap = None;
    w
}
