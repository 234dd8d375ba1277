//! Bad artifacts are errors that name the file and the problem, never panics or wrong answers.

use std::path::Path;

use fastsoftmax_infer::files::{self, FileCheck};
use fastsoftmax_infer::model::artifact::{LmWeights, RowStorage, MANIFEST_FILE, WEIGHTS_FILE};
use fastsoftmax_infer::LanguageModel;

mod common;
use common::fixture;

fn saved() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fixture().save(dir.path()).unwrap();
    dir
}

fn load_err(dir: &Path) -> String {
    match LanguageModel::load(dir) {
        Ok(_) => panic!("loading {} should fail", dir.display()),
        Err(e) => e.to_string(),
    }
}

fn edit_manifest(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join(MANIFEST_FILE);
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
}

#[test]
fn round_trip_is_exact() {
    let dir = saved();
    assert_eq!(LmWeights::load(dir.path()).unwrap(), fixture());
    let lm = LanguageModel::load(dir.path()).unwrap();
    let mut s = lm.new_state();
    lm.step(0, &mut s).unwrap();
    assert!(s.context().iter().all(|x| x.is_finite()));
    let err = lm.step(6, &mut s).unwrap_err().to_string();
    assert!(err.contains("outside the vocabulary"), "{err}");
}

/// int8 and 4-bit storage: the vocabulary matrices come back within half a quantization step
/// of each row, the rest exactly; a missing scale is an error that names it.
#[test]
fn int8_and_int4_storage_round_trip_within_rounding() {
    for (rows, levels, version) in [(RowStorage::Int8, 127.0, 2), (RowStorage::Int4, 7.0, 3)] {
        row_storage_round_trips(rows, levels, version);
    }
}

fn row_storage_round_trips(rows: RowStorage, levels: f32, version: u32) {
    let dir = tempfile::tempdir().unwrap();
    let w = fixture();
    w.save_as(dir.path(), rows).unwrap();
    let back = LmWeights::load(dir.path()).unwrap();
    assert_eq!(back.layers, w.layers);
    assert_eq!(back.output_bias, w.output_bias);
    let d = w.spec.d_embed;
    for (a, b) in w.embedding.chunks(d).zip(back.embedding.chunks(d)) {
        let step = a.iter().fold(0.0f32, |m, x| m.max(x.abs())) / levels;
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 0.5 * step + 1e-7, "{x} vs {y}");
        }
    }
    assert_ne!(
        back.embedding, w.embedding,
        "the fixture should need rounding"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(MANIFEST_FILE)).unwrap()).unwrap();
    assert_eq!(manifest["format_version"], version);

    // Rewrite the weights without the scale (and the digest to match): refused by name.
    let bytes = std::fs::read(dir.path().join(WEIGHTS_FILE)).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let kept: Vec<(String, safetensors::tensor::TensorView)> = st
        .tensors()
        .into_iter()
        .filter(|(n, _)| n != "embedding.scale")
        .collect();
    let mut kept_plus_dummy = kept;
    // Keep the tensor count the manifest needs: another scale in place of this one.
    let dummy = [0u8; 4];
    kept_plus_dummy.push((
        "other.scale".into(),
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1], &dummy).unwrap(),
    ));
    let broken = safetensors::serialize(kept_plus_dummy, &None).unwrap();
    std::fs::write(dir.path().join(WEIGHTS_FILE), &broken).unwrap();
    edit_manifest(dir.path(), |v| {
        v["sha256"][WEIGHTS_FILE] = files::sha256_hex(&broken).into();
    });
    let err = load_err(dir.path());
    assert!(err.contains("embedding.scale"), "{err}");
}

#[test]
fn missing_directory() {
    let err = load_err(Path::new("/nonexistent/model"));
    assert!(
        err.contains("manifest.json") && err.contains("train-lm"),
        "{err}"
    );
}

#[test]
fn truncated_weights() {
    let dir = saved();
    let p = dir.path().join(WEIGHTS_FILE);
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let err = load_err(dir.path());
    assert!(
        err.contains("model.safetensors") && err.contains("corrupted or changed"),
        "{err}"
    );
    // Without a recorded digest (an artifact from before digests), the parser still refuses it.
    edit_manifest(dir.path(), |v| {
        v.as_object_mut().unwrap().remove("sha256");
    });
    let err = load_err(dir.path());
    assert!(
        err.contains("model.safetensors") && err.contains("truncated or corrupt"),
        "{err}"
    );
}

#[test]
fn a_flipped_byte_inside_the_weights_is_refused() {
    let dir = saved();
    let p = dir.path().join(WEIGHTS_FILE);
    let mut bytes = std::fs::read(&p).unwrap();
    // The last byte is inside `output.bias` (the data section ends the file); flipping its
    // lowest bit keeps every value finite, so only the digest can tell.
    let n = bytes.len();
    bytes[n - 1] ^= 1;
    std::fs::write(&p, &bytes).unwrap();
    let err = load_err(dir.path());
    assert!(
        err.starts_with(&p.display().to_string())
            && err.contains("SHA-256")
            && err.contains("restore it"),
        "{err}"
    );
}

#[test]
fn an_artifact_without_digests_loads_and_can_record_them() {
    let dir = saved();
    let manifest = dir.path().join(MANIFEST_FILE);
    let recorded = files::check_dir(&manifest, &[WEIGHTS_FILE]).unwrap();
    assert_eq!(
        recorded,
        vec![(WEIGHTS_FILE.to_string(), FileCheck::Verified)]
    );
    edit_manifest(dir.path(), |v| {
        v.as_object_mut().unwrap().remove("sha256");
    });
    assert_eq!(LmWeights::load(dir.path()).unwrap(), fixture());
    let unrecorded = files::check_dir(&manifest, &[WEIGHTS_FILE]).unwrap();
    assert_eq!(unrecorded[0].1, FileCheck::Unrecorded);
    assert!(LmWeights::record_digest(dir.path()).unwrap());
    assert_eq!(
        files::check_dir(&manifest, &[WEIGHTS_FILE]).unwrap(),
        recorded
    );
    assert!(!LmWeights::record_digest(dir.path()).unwrap());
    assert_eq!(LmWeights::load(dir.path()).unwrap(), fixture());
    // A recorded digest is never replaced by the digest of a changed file.
    let p = dir.path().join(WEIGHTS_FILE);
    let mut bytes = std::fs::read(&p).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 1;
    std::fs::write(&p, &bytes).unwrap();
    let err = LmWeights::record_digest(dir.path()).unwrap_err();
    assert!(err.to_string().contains("restore it"), "{err}");
}

#[test]
fn corrupt_manifest() {
    let dir = saved();
    std::fs::write(dir.path().join(MANIFEST_FILE), b"{not json").unwrap();
    let err = load_err(dir.path());
    assert!(
        err.contains("manifest.json") && err.contains("not a valid manifest"),
        "{err}"
    );
}

#[test]
fn dimensions_disagree_with_weights() {
    let dir = saved();
    edit_manifest(dir.path(), |v| v["d_hidden"] = 5.into());
    let err = load_err(dir.path());
    assert!(
        err.contains("layers.0.w_ih") && err.contains("different models"),
        "{err}"
    );
}

#[test]
fn vocabulary_mismatch() {
    let dir = saved();
    edit_manifest(dir.path(), |v| {
        v["vocab"].as_array_mut().unwrap().remove(0);
    });
    let err = load_err(dir.path());
    assert!(
        err.contains("vocab_size is 6 but the vocabulary lists 5"),
        "{err}"
    );
    let dir = saved();
    edit_manifest(dir.path(), |v| {
        v["vocab"].as_array_mut().unwrap().pop(); // drops <eos>
    });
    let err = load_err(dir.path());
    assert!(err.contains("lacks <unk> or <eos>"), "{err}");
}

#[test]
fn unsupported_version() {
    let dir = saved();
    edit_manifest(dir.path(), |v| v["format_version"] = 99.into());
    let err = load_err(dir.path());
    assert!(err.contains("v99 is not supported"), "{err}");
}

#[test]
fn another_kind_of_model_is_named() {
    let dir = saved();
    edit_manifest(dir.path(), |v| v["format"] = "fastsoftmax-nmt".into());
    let err = load_err(dir.path());
    assert!(
        err.contains("holds a recurrent translator") && err.contains("`translate`"),
        "{err}"
    );
    edit_manifest(dir.path(), |v| v["format"] = "onnx".into());
    let err = load_err(dir.path());
    assert!(err.contains("format `onnx`"), "{err}");
}

#[test]
fn nan_in_weights() {
    let mut w = fixture();
    w.output_bias[2] = f32::NAN;
    let dir = tempfile::tempdir().unwrap();
    let err = w.save(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("output.bias") && err.contains("non-finite"),
        "{err}"
    );
    // A file that holds a NaN anyway (written by another tool) is refused at load.
    let dir = saved();
    let p = dir.path().join(WEIGHTS_FILE);
    let mut bytes = std::fs::read(&p).unwrap();
    let n = bytes.len();
    bytes[n - 4..].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(&p, bytes).unwrap();
    edit_manifest(dir.path(), |v| {
        v.as_object_mut().unwrap().remove("sha256");
    });
    let err = load_err(dir.path());
    assert!(err.contains("non-finite"), "{err}");
}
