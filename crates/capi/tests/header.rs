//! The committed header is what cbindgen makes of the crate now: a changed function without a
//! regenerated header fails here (`FASTSOFTMAX_UPDATE_HEADER=1` rewrites it).

use std::path::PathBuf;

#[test]
fn the_header_matches_the_code() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .expect("cbindgen")
        .write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();
    let path = dir.join("include/fastsoftmax.h");
    if std::env::var_os("FASTSOFTMAX_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is not what the code declares: run FASTSOFTMAX_UPDATE_HEADER=1 cargo test -p \
         fastsoftmax-capi --test header, and commit it",
        path.display()
    );
}
