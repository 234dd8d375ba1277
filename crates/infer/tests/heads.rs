//! Trained heads on disk: a saved head loads back exactly, and a head that is corrupt, of an
//! unknown kind, or trained for another model is an error that names the fix.

use std::path::Path;

use fastsoftmax_infer::heads::{self, HEAD_MANIFEST, HEAD_TENSORS};
use fastsoftmax_infer::{L2sHead, LanguageModel, SoftmaxHead};

mod common;
use common::fixture;

/// A model directory holding the fixture LM and an L2S head named `l2s`.
fn model_with_head() -> (tempfile::TempDir, L2sHead) {
    let dir = tempfile::tempdir().unwrap();
    fixture().save(dir.path()).unwrap();
    let lm = LanguageModel::load(dir.path()).unwrap();
    let clusters = [1.0, 0.0, 0.0, 0.0, -1.0, 0.5, 0.0, 0.0];
    let head = L2sHead::new(
        "l2s",
        lm.full_head(),
        &clusters,
        &[vec![0, 2, 3], vec![5, 1]],
    )
    .unwrap();
    let note = serde_json::json!({ "command": "test" });
    head.save(
        &dir.path().join("heads/l2s"),
        &lm,
        note,
        &[("train.log", b"log\n")],
    )
    .unwrap();
    (dir, head)
}

fn load_err(model: &Path, name: &str) -> String {
    let lm = LanguageModel::load(model).unwrap();
    let result = heads::load(name, model, &lm).map(|_| ());
    match result {
        Ok(()) => panic!("loading head {name} should fail"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn saved_head_loads_back_and_is_listed() {
    let (dir, head) = model_with_head();
    let lm = LanguageModel::load(dir.path()).unwrap();
    assert_eq!(heads::available(dir.path()), vec!["full", "l2s"]);
    let loaded = L2sHead::load(&dir.path().join("heads/l2s"), &lm).unwrap();
    assert_eq!(loaded.cluster_vectors(), head.cluster_vectors());
    assert_eq!(loaded.candidates(0), vec![0, 2, 3]);
    assert_eq!(loaded.candidates(1), vec![1, 5]);
    let boxed = heads::load("l2s", dir.path(), &lm).unwrap();
    for h in [[0.3, 0.1, -0.2, 0.4], [-0.5, 0.2, 0.1, 0.0]] {
        let ctx = fastsoftmax_infer::Context {
            h: &h,
            history: &[],
        };
        assert_eq!(boxed.predict(ctx, 2).unwrap(), head.top_k(&h, 2).unwrap());
    }
    assert!(dir.path().join("heads/l2s/train.log").exists());
    assert!(!dir.path().join("heads/l2s.tmp").exists());
}

#[test]
fn a_head_of_another_model_is_refused() {
    let (dir, _) = model_with_head();
    let mut other = fixture();
    other.output_bias[0] += 0.5;
    other.save(dir.path()).unwrap();
    let err = load_err(dir.path(), "l2s");
    assert!(
        err.contains("another model") && err.contains("train-head"),
        "{err}"
    );
}

#[test]
fn corrupt_or_unknown_heads_are_errors() {
    let (dir, _) = model_with_head();
    let hd = dir.path().join("heads/l2s");

    let err = load_err(dir.path(), "nope");
    assert!(
        err.contains("does not exist") && err.contains("available: full, l2s"),
        "{err}"
    );

    let bytes = std::fs::read(hd.join(HEAD_TENSORS)).unwrap();
    std::fs::write(hd.join(HEAD_TENSORS), &bytes[..bytes.len() / 2]).unwrap();
    let err = load_err(dir.path(), "l2s");
    assert!(
        err.contains("head.safetensors") && err.contains("corrupted or changed"),
        "{err}"
    );
    // A byte flipped inside the tensor data (the last byte of the file) keeps it parseable
    // and finite: only the digest in head.json tells.
    let mut flipped = bytes.clone();
    *flipped.last_mut().unwrap() ^= 1;
    std::fs::write(hd.join(HEAD_TENSORS), &flipped).unwrap();
    let err = load_err(dir.path(), "l2s");
    assert!(
        err.starts_with(&hd.join(HEAD_TENSORS).display().to_string()) && err.contains("restore it"),
        "{err}"
    );
    std::fs::write(hd.join(HEAD_TENSORS), &bytes).unwrap();

    let manifest = std::fs::read_to_string(hd.join(HEAD_MANIFEST)).unwrap();
    std::fs::write(
        hd.join(HEAD_MANIFEST),
        manifest.replace("\"l2s\"", "\"magic\""),
    )
    .unwrap();
    let err = load_err(dir.path(), "l2s");
    assert!(
        err.contains("\"magic\" is not one this engine knows"),
        "{err}"
    );
    assert_eq!(heads::available(dir.path()), vec!["full"]);

    std::fs::write(
        hd.join(HEAD_MANIFEST),
        manifest.replace("\"clusters\": 2", "\"clusters\": 3"),
    )
    .unwrap();
    let err = load_err(dir.path(), "l2s");
    assert!(err.contains("shape") && err.contains("retrain"), "{err}");

    std::fs::write(hd.join(HEAD_MANIFEST), "{ not json").unwrap();
    let err = load_err(dir.path(), "l2s");
    assert!(err.contains("not a valid head manifest"), "{err}");
}
