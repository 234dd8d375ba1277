//! `fastsoftmax quantize` on the shipped translator's values in f32: an int8 artifact a quarter of
//! the size that `translate` serves with int8 products, close to the f32 engine; version and
//! misuse errors.

mod common;

use std::path::{Path, PathBuf};

use fastsoftmax_translate::artifact::{NmtWeights, Precision};
use fastsoftmax_translate::{Profile, SearchOptions, Translator};

use common::cli;

/// The shipped English → German translator, stored as int8 with its vocabulary map.
fn shipped() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/models/bible-en-de-tiny")
}

/// The shipped translator widened to an f32 artifact in `dir`: what `quantize` takes, with the
/// values the shipped one serves.
fn f32_translator(dir: &Path) -> PathBuf {
    let w = common::shipped_bible_f32();
    assert_eq!(w.precision(), Precision::F32);
    let out = dir.join("f32");
    w.save(&out).unwrap();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in std::fs::read_dir(from).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
    }
}

fn size(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("model.safetensors"))
        .unwrap()
        .len()
}

#[test]
fn int8_artifact_serves_translations_close_to_f32() {
    let tmp = tempfile::tempdir().unwrap();
    let f32_dir = f32_translator(tmp.path());
    let out = tmp.path().join("int8");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (ok, stdout, err) = cli(&["quantize", "--model", &s(&f32_dir), "--out", &s(&out)]);
    assert!(ok, "{err}");
    assert!(stdout.contains("MB of weights"), "{stdout}");
    assert!(size(&out) * 3 < size(&f32_dir), "a quarter of the size");
    let w = NmtWeights::load(&out).unwrap();
    assert_eq!(w.precision(), Precision::Int8);
    // Widening is exact: quantizing the widened values gives the shipped int8 rows back.
    for (name, (q, scale)) in &NmtWeights::load(&shipped()).unwrap().int8 {
        let (q2, scale2) = &w.int8[name];
        assert_eq!(q, q2, "{name}");
        assert!(scale
            .iter()
            .zip(scale2)
            .all(|(a, b)| (a - b).abs() <= 1e-6 * a.abs()));
    }
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"format_version\": 2") && manifest.contains("\"int8\""));

    // Teacher-forced logits of a verse: int8 within a small fraction of the logits' spread of
    // f32, and the same best word at most steps.
    let f32_engine = Translator::load(&f32_dir).unwrap();
    let int8_engine = Translator::load(&out).unwrap();
    assert_eq!(int8_engine.precision(), Precision::Int8);
    let src = f32_engine.source("In the beginning was the Word.", 250);
    let tgt: Vec<u32> = ["<eos>", "Im", "Anfang", "war", "das", "Wort", "."]
        .iter()
        .map(|w| f32_engine.tgt_vocab().id_or_unk(w))
        .collect();
    let a = f32_engine.forced_logits(&src.ids, &tgt).unwrap();
    let b = int8_engine.forced_logits(&src.ids, &tgt).unwrap();
    let argmax = |v: &[f32]| {
        v.iter()
            .enumerate()
            .max_by(|x, y| x.1.total_cmp(y.1))
            .unwrap()
            .0
    };
    let mut same = 0;
    for (x, y) in a.iter().zip(&b) {
        let spread =
            x.iter().cloned().fold(f32::MIN, f32::max) - x.iter().cloned().fold(f32::MAX, f32::min);
        let worst = x
            .iter()
            .zip(y)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0, f32::max);
        assert!(
            worst < 0.05 * spread,
            "int8 logits off by {worst} of a spread {spread}"
        );
        same += (argmax(x) == argmax(y)) as usize;
    }
    assert!(
        same + 1 >= a.len(),
        "best words agree at {same} of {} steps",
        a.len()
    );
    let out_text = int8_engine
        .translate(
            &["Jesus wept.", ""],
            &SearchOptions::default(),
            &mut Profile::default(),
        )
        .unwrap();
    assert!(!out_text[0][0].text.is_empty() && out_text[1][0].text.is_empty());

    // int16 (one scale per matrix): half the size, closer still.
    let out16 = tmp.path().join("int16");
    let (ok, _, err) = cli(&[
        "quantize",
        "--model",
        &s(&f32_dir),
        "--to",
        "int16",
        "--out",
        &s(&out16),
    ]);
    assert!(ok, "{err}");
    assert!(size(&out16) * 3 < size(&f32_dir) * 2 && size(&out16) > size(&out));
    let int16_engine = Translator::load(&out16).unwrap();
    assert_eq!(int16_engine.precision(), Precision::Int16);
    let c = int16_engine.forced_logits(&src.ids, &tgt).unwrap();
    for (x, z) in a.iter().zip(&c) {
        assert_eq!(argmax(x), argmax(z));
        let worst = x
            .iter()
            .zip(z)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0, f32::max);
        assert!(worst < 0.05, "int16 logits off by {worst}");
    }

    // Misuse: quantizing twice, or over the f32 model.
    let (ok, _, err) = cli(&[
        "quantize",
        "--model",
        &s(&out),
        "--out",
        &s(&tmp.path().join("again")),
    ]);
    assert!(!ok && err.contains("already quantized"), "{err}");
    let (ok, _, err) = cli(&["quantize", "--model", &s(&out), "--out", &s(&out)]);
    assert!(!ok, "{err}");
    // 4-bit rows are for language models.
    let (ok, _, err) = cli(&[
        "quantize",
        "--model",
        &s(&f32_dir),
        "--to",
        "int4",
        "--out",
        &s(&tmp.path().join("int4")),
    ]);
    assert!(!ok && err.contains("int8 or int16"), "{err}");

    // A format from a newer engine is refused with a version error, not misread.
    let next = fastsoftmax_translate::artifact::FORMAT_VERSION + 1;
    let newer = manifest.replace(
        "\"format_version\": 2",
        &format!("\"format_version\": {next}"),
    );
    std::fs::write(out.join("manifest.json"), newer).unwrap();
    let e = Translator::load(&out).err().expect("refused").to_string();
    assert!(
        e.contains(&format!("format version {next}")) && e.contains("update fastsoftmax"),
        "{e}"
    );
    // And a v1 manifest cannot claim int8 weights.
    let v1 = manifest.replace("\"format_version\": 2", "\"format_version\": 1");
    std::fs::write(out.join("manifest.json"), v1).unwrap();
    let e = Translator::load(&out).err().expect("refused").to_string();
    assert!(e.contains("v1 manifest holds f32"), "{e}");
}

/// A language model's vocabulary rows stored as int8: under half the bytes, the same best word
/// after a few steps and logits within a small fraction of their spread; its heads come along,
/// bound to the rounded output layer, their word-row tables int8. As 4-bit rows: smaller still,
/// and it serves. A quantized model and int16 are refused.
#[test]
fn a_language_model_is_stored_with_int8_rows() {
    use fastsoftmax_infer::heads::DsHead;
    use fastsoftmax_infer::{LanguageModel, LmWeights, SoftmaxHead};
    let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/models/ptb-small-lstm");
    let tmp = tempfile::tempdir().unwrap();
    // The shipped model widened to f32 (the values it serves), with its heads: what `quantize`
    // takes. The heads read on it, as it has the shipped output layer.
    let lm = tmp.path().join("f32");
    LmWeights::load(&shipped).unwrap().save(&lm).unwrap();
    for head in ["ds", "l2s", "candidates"] {
        copy_dir(
            &shipped.join("heads").join(head),
            &lm.join("heads").join(head),
        );
    }
    let out = tmp.path().join("int8");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (ok, stdout, err) = cli(&["quantize", "--model", &s(&lm), "--out", &s(&out)]);
    assert!(ok, "{err}");
    assert!(
        stdout.contains("embedding and output rows int8")
            && stdout.contains("carried the heads candidates, ds, l2s over"),
        "{stdout}"
    );
    assert!(
        size(&out) * 2 < size(&lm),
        "{} vs {}",
        size(&out),
        size(&lm)
    );
    // Each head records the tables it stores as int8: the word rows, not the small matrices.
    for (head, tables) in [
        ("ds", vec!["weights"]),
        ("candidates", vec!["u"]),
        ("l2s", vec![]),
    ] {
        let m: serde_json::Value = serde_json::from_slice(
            &std::fs::read(out.join("heads").join(head).join("head.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            m["training"]["int8_rows"],
            serde_json::json!(tables),
            "{head}"
        );
    }
    let (ok, stdout, err) = cli(&["verify", "--model", &s(&out)]);
    assert!(
        ok && stdout.contains("heads/candidates") && !stdout.contains("FAIL"),
        "{stdout}{err}"
    );
    // Each carried head serves the int8 model; the DS head's routes and rows barely move, so
    // it keeps the f32 one's best word nearly everywhere.
    let f32_model = LanguageModel::load(&lm).unwrap();
    let int8_model = LanguageModel::load(&out).unwrap();
    for head in ["ds", "l2s", "candidates"] {
        fastsoftmax_infer::heads::load(head, &out, &int8_model).unwrap();
    }
    let f32_ds = DsHead::load(&lm.join("heads/ds"), &f32_model).unwrap();
    let int8_ds = DsHead::load(&out.join("heads/ds"), &int8_model).unwrap();
    let mut state = int8_model.new_state();
    let mut same = 0;
    let words = int8_model
        .encode_words("the company said it expects to report a loss for the third quarter");
    for &id in &words {
        int8_model.step(id, &mut state).unwrap();
        let top = |h: &DsHead| h.top_k(state.context(), 1).unwrap()[0].id;
        same += usize::from(top(&f32_ds) == top(&int8_ds));
    }
    assert!(same + 1 >= words.len(), "{same} of {}", words.len());
    let (a, b) = (
        LanguageModel::load(&lm).unwrap(),
        LanguageModel::load(&out).unwrap(),
    );
    let (mut sa, mut sb) = (a.new_state(), b.new_state());
    let vocab = a.spec().vocab_size;
    let (mut la, mut lb) = (vec![0.0f32; vocab], vec![0.0f32; vocab]);
    for id in a.encode_words("the company said it expects") {
        a.step(id, &mut sa).unwrap();
        b.step(id, &mut sb).unwrap();
        a.full_head().logits_into(sa.context(), &mut la);
        b.full_head().logits_into(sb.context(), &mut lb);
        let argmax = |v: &[f32]| (0..v.len()).max_by(|&i, &j| v[i].total_cmp(&v[j])).unwrap();
        assert_eq!(argmax(&la), argmax(&lb));
        let spread =
            la.iter().fold(f32::MIN, |m, &x| m.max(x)) - la.iter().fold(f32::MAX, |m, &x| m.min(x));
        let worst = la
            .iter()
            .zip(&lb)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(
            worst < 0.02 * spread,
            "logits differ by {worst} (spread {spread})"
        );
    }
    let (ok, _, err) = cli(&[
        "quantize",
        "--model",
        &s(&out),
        "--out",
        &s(&tmp.path().join("y")),
    ]);
    assert!(
        !ok && err.contains("already stores its vocabulary rows quantized"),
        "{err}"
    );
    let (ok, _, err) = cli(&[
        "quantize",
        "--model",
        &s(&lm),
        "--to",
        "int16",
        "--out",
        &s(&tmp.path().join("x")),
    ]);
    assert!(!ok && err.contains("int8 or 4-bit rows"), "{err}");

    // 4-bit rows: the embedding and output rows in half of int8's bytes; the model and its
    // heads load and verify, and its first prediction still has finite scores.
    let out4 = tmp.path().join("int4");
    let (ok, stdout, err) = cli(&[
        "quantize",
        "--model",
        &s(&lm),
        "--to",
        "int4",
        "--out",
        &s(&out4),
    ]);
    assert!(ok && stdout.contains("rows 4-bit"), "{stdout}{err}");
    assert!(
        size(&out4) < size(&out),
        "{} vs {}",
        size(&out4),
        size(&out)
    );
    let (ok, stdout, err) = cli(&["verify", "--model", &s(&out4)]);
    assert!(ok && !stdout.contains("FAIL"), "{stdout}{err}");
    let m4 = LanguageModel::load(&out4).unwrap();
    let mut st = m4.new_state();
    m4.step(m4.encode_words("the")[0], &mut st).unwrap();
    let mut l4 = vec![0.0f32; vocab];
    m4.full_head().logits_into(st.context(), &mut l4);
    assert!(l4.iter().all(|x| x.is_finite()));
}
