//! Loaders never panic on any bytes: every file of a model directory holding one trained head of
//! each kind is truncated, bit-flipped, overwritten with garbage and (for the JSON manifests)
//! edited field by field, and loaded again. The load must not panic; a loaded artifact must serve
//! without panicking; and a changed data file (weights, tensors, trigram table) must be refused
//! while its manifest records its digest. A second pass strips the digests (artifacts written
//! before them) so the parsers themselves meet the broken bytes.
//!
//! Deterministic: the mutations come from a fixed seed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use fastsoftmax_infer::heads::bucketed::Bucket;
use fastsoftmax_infer::heads::candidates::{CandidateParams, Shape};
use fastsoftmax_infer::heads::CandidateTable;
use fastsoftmax_infer::heads::{self, ds::Expert, trigram::TrigramConfig};
use fastsoftmax_infer::model::artifact::{MANIFEST_FILE, WEIGHTS_FILE};
use fastsoftmax_infer::{
    AdaptiveHead, CandidatesHead, Context, DsHead, DsoftmaxHead, L2sHead, LanguageModel, Predictor,
    SoftmaxHead, TopK, TrigramHead,
};

mod common;
use common::fixture;

/// splitmix64: the seeded source of every mutation.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn values(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.below(2001) as f32 - 1000.0) / 1000.0)
            .collect()
    }
}

/// The trained kinds, by the name their head directory gets.
const HEADS: [&str; 6] = ["l2s", "ds", "adaptive", "dsoftmax", "trigram", "candidates"];

/// A model directory with the fixture LM and one head of every trained kind.
fn model_with_every_head() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fixture().save(dir.path()).unwrap();
    let lm = LanguageModel::load(dir.path()).unwrap();
    let full = lm.full_head();
    let (d, v) = (full.dim(), lm.vocab().len());
    let mut rng = Rng(7);
    let at = |name: &str| dir.path().join("heads").join(name);
    let note = serde_json::json!({ "command": "fuzz fixture" });

    L2sHead::new(
        "l2s",
        full,
        &rng.values(2 * d),
        &[vec![0, 2, 3], vec![5, 1]],
    )
    .unwrap()
    .save(&at("l2s"), &lm, note.clone(), &[])
    .unwrap();

    let expert = |ids: Vec<u32>, rng: &mut Rng| Expert {
        weights: rng.values(ids.len() * d),
        bias: rng.values(ids.len()),
        ids,
    };
    let experts = [
        expert(vec![0, 1, 4], &mut rng),
        expert(vec![2, 3, 5, 1], &mut rng),
    ];
    DsHead::new("ds", full, &rng.values(2 * d), &rng.values(2), &experts)
        .unwrap()
        .save(&at("ds"), &lm, note.clone(), &[])
        .unwrap();

    let bucket = |ids: Vec<u32>, extra: usize, width: Option<usize>, rng: &mut Rng| {
        let di = width.unwrap_or(d);
        Bucket {
            proj: width.map(|w| rng.values(w * d)),
            weights: rng.values((ids.len() + extra) * di),
            bias: rng.values(ids.len() + extra),
            ids,
        }
    };
    let adaptive = [
        bucket(vec![0, 1, 2], 1, None, &mut rng),
        bucket(vec![3, 4, 5], 0, Some(2), &mut rng),
    ];
    AdaptiveHead::new("adaptive", d, v, &adaptive)
        .unwrap()
        .save(&at("adaptive"), &lm, note.clone(), &[])
        .unwrap();
    let dsoftmax = [
        bucket(vec![0, 1, 2], 0, None, &mut rng),
        bucket(vec![3, 4, 5], 0, Some(2), &mut rng),
    ];
    DsoftmaxHead::new("dsoftmax", d, v, &dsoftmax)
        .unwrap()
        .save(&at("dsoftmax"), &lm, note.clone(), &[])
        .unwrap();

    let stream: Vec<u32> = (0..400).map(|_| rng.below(v) as u32).collect();
    let cfg = TrigramConfig {
        per_context: 3,
        min_count: 1,
        n_frequent: 4,
        backoff: true,
    };
    let table = CandidateTable::build(&stream, v, &cfg).unwrap();
    let eos = lm.vocab().eos();
    TrigramHead::new("trigram", table.clone(), eos)
        .unwrap()
        .save(&at("trigram"), &lm, note.clone())
        .unwrap();
    let shape = Shape {
        context: 2,
        slots: 3,
        width: 5,
        rank: 3,
        vocab: v,
    };
    let params = CandidateParams {
        shape,
        u: rng.values(v * 3),
        m: rng.values(3 * 5),
        f: rng.values(5 * 2 * 5),
        f_bias: rng.values(5),
        o: rng.values(4 * 3),
        o_bias: rng.values(4),
    };
    CandidatesHead::new("candidates", params, table, eos, d)
        .unwrap()
        .save(&at("candidates"), &lm, note, &[])
        .unwrap();
    dir
}

/// Loads the model and `head` (None: the model alone) and serves a few queries.
fn load_and_serve(model: &Path, head: Option<&str>) -> Result<(), String> {
    let lm = LanguageModel::load(model).map_err(|e| e.to_string())?;
    let mut state = lm.new_state();
    let history: Vec<u32> = (0..lm.vocab().len() as u32).collect();
    let mut out = TopK::new(3);
    let predictor: Box<dyn Predictor> = match head {
        None => Box::new(lm.full_head().clone()),
        Some(name) => heads::load(name, model, &lm).map_err(|e| e.to_string())?,
    };
    for (i, &w) in history.iter().enumerate() {
        lm.step(w, &mut state).map_err(|e| e.to_string())?;
        let ctx = Context {
            h: state.context(),
            history: &history[..=i],
        };
        predictor.predict_into(ctx, 3, &mut out);
        let _ = predictor.cost(ctx);
    }
    Ok(())
}

/// Named byte-level mutants of `bytes`.
fn byte_mutants(bytes: &[u8], rng: &mut Rng) -> Vec<(String, Vec<u8>)> {
    let n = bytes.len();
    let mut out = Vec::new();
    let mut cuts = vec![0, 1, 7, 8, 9, n / 3, n / 2, n.saturating_sub(1)];
    cuts.extend((0..24).map(|_| rng.below(n)));
    for cut in cuts.into_iter().filter(|&c| c < n) {
        out.push((format!("truncated to {cut} bytes"), bytes[..cut].to_vec()));
    }
    for _ in 0..64 {
        let (pos, bit) = (rng.below(n), rng.below(8));
        let mut m = bytes.to_vec();
        m[pos] ^= 1 << bit;
        out.push((format!("bit {bit} of byte {pos} flipped"), m));
    }
    for _ in 0..24 {
        let pos = rng.below(n);
        let value = [0x00, 0xff, 0x7f, 0x80][rng.below(4)];
        let mut m = bytes.to_vec();
        m[pos..(pos + 4).min(n)].fill(value);
        out.push((format!("bytes {pos}.. set to {value:#04x}"), m));
    }
    for _ in 0..6 {
        let len = rng.below(2 * n + 16);
        let garbage = (0..len).map(|_| rng.next() as u8).collect();
        out.push((format!("{len} random bytes"), garbage));
    }
    out.push(("an extra byte appended".into(), [bytes, b"\0"].concat()));
    out
}

/// Named field-level mutants of a JSON manifest: every number, string, array and key in turn.
fn json_mutants(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let root: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    let mut paths = Vec::new();
    collect_paths(&root, String::new(), &mut paths);
    let mut out = Vec::new();
    let replacements = [
        serde_json::json!(0),
        serde_json::json!(1),
        serde_json::json!(-1),
        serde_json::json!(4_294_967_297u64),
        serde_json::json!(u64::MAX),
        serde_json::json!(1e300),
        serde_json::json!(""),
        serde_json::json!([]),
        serde_json::json!({}),
        serde_json::Value::Null,
    ];
    for path in &paths {
        for r in &replacements {
            let mut v = root.clone();
            *v.pointer_mut(path).unwrap() = r.clone();
            out.push((format!("{path} = {r}"), serde_json::to_vec(&v).unwrap()));
        }
        let (parent, key) = path.rsplit_once('/').unwrap();
        let mut v = root.clone();
        match v.pointer_mut(parent).unwrap() {
            serde_json::Value::Object(o) => {
                o.remove(key);
            }
            serde_json::Value::Array(a) => {
                a.remove(key.parse::<usize>().unwrap());
            }
            _ => unreachable!(),
        }
        out.push((format!("{path} removed"), serde_json::to_vec(&v).unwrap()));
    }
    out
}

fn collect_paths(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    let children: Vec<(String, &serde_json::Value)> = match v {
        serde_json::Value::Object(o) => o.iter().map(|(k, c)| (k.clone(), c)).collect(),
        // The vocabulary and long tensors lists: the first few elements stand for the rest.
        serde_json::Value::Array(a) => a
            .iter()
            .take(3)
            .enumerate()
            .map(|(i, c)| (i.to_string(), c))
            .collect(),
        _ => return,
    };
    for (k, c) in children {
        let path = format!("{at}/{k}");
        out.push(path.clone());
        collect_paths(c, path, out);
    }
}

/// Every file the engine reads: (path relative to the model directory, head it belongs to, is a
/// data file covered by a digest).
fn targets() -> Vec<(PathBuf, Option<&'static str>, bool)> {
    let mut t = vec![
        (PathBuf::from(MANIFEST_FILE), None, false),
        (PathBuf::from(WEIGHTS_FILE), None, true),
    ];
    for name in HEADS {
        let dir = Path::new("heads").join(name);
        t.push((dir.join(heads::HEAD_MANIFEST), Some(name), false));
        t.push((dir.join(heads::HEAD_TENSORS), Some(name), true));
        if matches!(name, "trigram" | "candidates") {
            t.push((dir.join(heads::format::TRIGRAM_TABLE), Some(name), true));
        }
    }
    t
}

/// Removes the `sha256` field from every manifest in the model directory.
fn strip_digests(model: &Path) {
    let manifests = std::iter::once(model.join(MANIFEST_FILE)).chain(
        HEADS
            .iter()
            .map(|h| model.join("heads").join(h).join(heads::HEAD_MANIFEST)),
    );
    for p in manifests {
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert!(
            v.as_object_mut().unwrap().remove("sha256").is_some(),
            "{}",
            p.display()
        );
        std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    }
}

fn fuzz(model: &Path, digests: bool, rng: &mut Rng) -> (usize, Vec<String>) {
    for head in [None].into_iter().chain(HEADS.map(Some)) {
        load_and_serve(model, head).unwrap_or_else(|e| panic!("the clean fixture must load: {e}"));
    }
    let (mut runs, mut failures) = (0, Vec::new());
    for (rel, head, data) in targets() {
        let path = model.join(&rel);
        let original = std::fs::read(&path).unwrap();
        let mut mutants = byte_mutants(&original, rng);
        if rel.extension().is_some_and(|e| e == "json") {
            mutants.extend(json_mutants(&original));
        }
        for (what, bytes) in mutants {
            if bytes == original {
                continue;
            }
            std::fs::write(&path, &bytes).unwrap();
            runs += 1;
            if std::env::var_os("FUZZ_TRACE").is_some() {
                eprintln!("{} {what}", rel.display());
            }
            let outcome = catch_unwind(AssertUnwindSafe(|| load_and_serve(model, head)));
            let context = format!("{} ({what}, digests {digests})", rel.display());
            match outcome {
                Err(_) => failures.push(format!("{context}: panicked")),
                Ok(Ok(())) if data && digests => {
                    failures.push(format!("{context}: a changed data file was served"))
                }
                Ok(Err(e))
                    if data
                        && digests
                        && !e.contains(&*rel.file_name().unwrap().to_string_lossy()) =>
                {
                    failures.push(format!("{context}: the error does not name the file: {e}"))
                }
                Ok(_) => {}
            }
        }
        std::fs::write(&path, &original).unwrap();
    }
    (runs, failures)
}

#[test]
fn loaders_refuse_broken_files_without_panicking() {
    let dir = model_with_every_head();
    let mut rng = Rng(2026);
    let (with, mut failures) = fuzz(dir.path(), true, &mut rng);
    strip_digests(dir.path());
    let (without, more) = fuzz(dir.path(), false, &mut rng);
    failures.extend(more);
    assert!(with + without > 3000, "only {} mutants ran", with + without);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn candidate_tables_from_any_bytes_are_an_error_or_a_valid_table() {
    let mut rng = Rng(11);
    let stream: Vec<u32> = (0..300).map(|_| rng.below(9) as u32).collect();
    let table = CandidateTable::build(&stream, 9, &TrigramConfig::default()).unwrap();
    let bytes = table.to_bytes();
    for (what, m) in byte_mutants(&bytes, &mut rng) {
        let result = catch_unwind(|| {
            CandidateTable::from_bytes(&m).map(|t| {
                // A table that parses answers every context with ids inside its vocabulary.
                let mut out = Vec::new();
                for (a, b) in [(0, 0), (3, 4), (8, 8)] {
                    t.candidates_into(a, b, 5, &mut out);
                    assert!(out.iter().all(|&id| (id as usize) < t.vocab_size()));
                }
            })
        });
        assert!(result.is_ok(), "{what}: panicked");
    }
}
