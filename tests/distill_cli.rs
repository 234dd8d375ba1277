//! End-to-end distillation on a fixture: `train-nmt` trains a tiny Transformer teacher on
//! raw Japanese (subwords learnt inside), `translate` serves it, `distill` re-translates the
//! training source, and `train-nmt --distilled` trains a recurrent student on that; a folder
//! of another source or an unfinished one is refused by name.

use std::path::Path;
use std::process::Command;

fn cli(args: &[&str]) -> (bool, String, String) {
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

const PAIRS: [(&str, &str); 4] = [
    ("猫が寝る。", "the cat sleeps."),
    ("犬が走る。", "the dog runs."),
    ("猫が走る。", "the cat runs."),
    ("犬が寝る。", "the dog sleeps."),
];

fn write_fixture(dir: &Path) {
    for (part, n) in [("train", 96), ("valid", 4)] {
        let (mut ja, mut en) = (String::new(), String::new());
        for i in 0..n {
            let (j, e) = PAIRS[i % PAIRS.len()];
            ja.push_str(&format!("{j}\n"));
            en.push_str(&format!("{e}\n"));
        }
        std::fs::write(dir.join(format!("{part}.ja")), ja).unwrap();
        std::fs::write(dir.join(format!("{part}.en")), en).unwrap();
    }
    std::fs::write(
        dir.join("teacher.json"),
        r#"{"model": {"arch": "transformer", "d_model": 16, "d_ff": 32, "n_heads": 2,
                      "enc_layers": 1, "dec_layers": 1, "dropout": 0.0, "tied": true},
            "train": {"lr": 0.01, "warmup_steps": 10, "adam_beta2": 0.98, "lr_decay": 1.0,
                      "decay_from_epoch": 1, "epochs": 6, "batch_size": 8, "clip_norm": 1.0,
                      "seed": 1, "src_tokens": {"subwords": {"size": 30}}}}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("student.json"),
        r#"{"model": {"cell": "gru", "d_embed": 16, "d_hidden": 16, "enc_layers": 1, "dec_layers": 1, "tied": true},
            "train": {"lr": 0.02, "lr_decay": 1.0, "decay_from_epoch": 1, "epochs": 2, "batch_size": 8,
                      "clip_norm": 5.0, "seed": 1, "src_tokens": {"subwords": {"size": 30}}}}"#,
    )
    .unwrap();
}

#[test]
fn teacher_translate_distill_and_student() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write_fixture(d);
    let s = |p: &str| d.join(p).to_str().unwrap().to_string();
    let data = ["--data", &s(""), "--src", "ja", "--tgt", "en"];
    let train = |config: &str, out: &str, extra: &[&str]| {
        let mut args = vec![
            "train-nmt",
            "--config",
            config,
            "--out",
            out,
            "--quiet",
            "--threads",
            "1",
        ];
        args.extend(data);
        args.extend(extra);
        cli(&args)
    };
    let (teacher_dir, vmap) = (s("teacher"), s("ja.vmap"));
    let (ok, _, err) = train(&s("teacher.json"), &s("teacher"), &[]);
    assert!(ok, "teacher: {err}");
    assert!(d.join("teacher/src.subwords.json").exists());
    let manifest = std::fs::read_to_string(d.join("teacher/manifest.json")).unwrap();
    assert!(
        manifest.contains(r#""src": "ja""#) && manifest.contains(r#""tgt": "en""#),
        "the language pair is recorded: {manifest}"
    );

    // The teacher reads raw Japanese: half-width katakana, emoji, Latin words and numbers are
    // read, not refused; an empty line gives an empty line; a 2,000-character line is cut to
    // --max-source-tokens with a warning that names it; line i of the output is line i's.
    let long = "猫が寝る。".repeat(400);
    std::fs::write(
        d.join("in.ja"),
        format!("猫が寝る。\n\nｶﾀｶﾅ😀\nTomは2026年に3匹の猫を見た。\n{long}\n"),
    )
    .unwrap();
    let (ok, out, err) = cli(&[
        "translate",
        "--model",
        &s("teacher"),
        "--input",
        &s("in.ja"),
    ]);
    assert!(ok, "translate: {err}");
    assert_eq!(out.lines().count(), 5, "{out}");
    assert!(out.lines().nth(1).unwrap().is_empty());
    assert!(err.contains("Transformer"), "{err}");
    assert!(
        err.contains("warning: line 5 has") && err.contains("translating its first 250"),
        "{err}"
    );
    // Line by line, each output line is the one the line alone gives.
    for (i, line) in [(0, "猫が寝る。"), (3, "Tomは2026年に3匹の猫を見た。")] {
        std::fs::write(d.join("one.ja"), format!("{line}\n")).unwrap();
        let (ok, one, err) = cli(&[
            "translate",
            "--model",
            &s("teacher"),
            "--input",
            &s("one.ja"),
        ]);
        assert!(ok, "{err}");
        assert_eq!(one.trim_end(), out.lines().nth(i).unwrap(), "{line}");
    }
    let (ok, _, err) = cli(&[
        "translate",
        "--model",
        &s("teacher"),
        "--vmap",
        &s("x"),
        "--input",
        &s("in.ja"),
    ]);
    assert!(!ok && err.contains("Transformer"), "{err}");

    // quickstart's ja → en demo on this corpus; a model of another pair under its name is
    // refused by name.
    std::fs::copy(d.join("valid.ja"), d.join("test.ja")).unwrap();
    std::fs::copy(d.join("valid.en"), d.join("test.en")).unwrap();
    std::fs::write(d.join("stats.json"), "{}").unwrap();
    let (ok, out, err) = cli(&[
        "quickstart",
        "--translate",
        "ja-en",
        "--translator",
        &teacher_dir,
        "--corpus",
        &s(""),
    ]);
    assert!(ok, "quickstart: {err}");
    assert!(
        out.contains("JA  猫が寝る。") && out.contains("BLEU") && out.contains("words/s"),
        "{out}"
    );
    let bible = d.join("bible");
    std::fs::create_dir_all(&bible).unwrap();
    for f in [
        "train.en", "train.de", "valid.en", "valid.de", "test.en", "test.de",
    ] {
        std::fs::write(bible.join(f), "the cat sleeps.\n").unwrap();
    }
    let (ok, _, err) = cli(&[
        "quickstart",
        "--translate",
        "--translator",
        &teacher_dir,
        "--corpus",
        bible.to_str().unwrap(),
    ]);
    assert!(
        !ok && err.contains("translates ja → en, not en → de"),
        "{err}"
    );

    // The teacher's pieces for a peer, and a vocabulary map keyed by them.
    let mut child = Command::new(env!("CARGO_BIN_EXE_fastsoftmax"))
        .args(["text", "tokenize", "--model", &s("teacher")])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), "猫が寝る。\n".as_bytes()).unwrap();
    let pieces = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap();
    assert!(
        pieces.trim().contains(' ') && pieces.trim().ends_with(" 。"),
        "{pieces:?}"
    );
    assert_eq!(pieces.replace(' ', "").trim(), "猫が寝る。");
    let mut args = vec![
        "build-vmap",
        "--model",
        &teacher_dir,
        "--out",
        &vmap,
        "--eval",
        "none",
    ];
    args.extend(data);
    let (ok, _, err) = cli(&args);
    assert!(ok, "build-vmap: {err}");
    let map = std::fs::read_to_string(&vmap).unwrap();
    assert!(
        map.lines().any(|l| l.starts_with("猫")),
        "keys are the teacher's pieces"
    );

    // Distil, then a student on the teacher's translations.
    let (teacher, distilled) = (s("teacher"), s("distilled"));
    let mut args = vec![
        "distill",
        "--teacher",
        &teacher,
        "--out",
        &distilled,
        "--quiet",
    ];
    args.extend(["--threads", "2"]);
    args.extend(data);
    let (ok, out, err) = cli(&args);
    assert!(ok, "distill: {err}");
    assert!(out.contains("96 sentences"), "{out}");
    let lines = std::fs::read_to_string(d.join("distilled/train.en")).unwrap();
    assert_eq!(lines.lines().count(), 96);
    let (ok, _, err) = train(
        &s("student.json"),
        &s("student"),
        &["--distilled", &distilled],
    );
    assert!(ok, "student: {err}");
    assert!(d.join("student/manifest.json").exists());
    // The student's map aligns the source with the teacher's translations, so that its target
    // words are the student's: quantize ships it inside the int8 student.
    let (student, student_map) = (s("student"), s("student.vmap"));
    let mut args = vec![
        "build-vmap",
        "--model",
        &student,
        "--distilled",
        &distilled,
        "--out",
        &student_map,
        "--json",
    ];
    args.extend(data);
    let (ok, out, err) = cli(&args);
    assert!(ok, "build-vmap --distilled: {err}");
    assert!(out.contains("\"coverage\""), "{out}");
    let (ok, _, err) = cli(&[
        "quantize",
        "--model",
        &student,
        "--vmap",
        &student_map,
        "--out",
        &s("student-int8"),
    ]);
    assert!(ok, "quantize --vmap: {err}");
    assert!(d.join("student-int8/vocab.map.gz").exists());

    // A distillation of another source is refused by name; so is a missing one.
    std::fs::write(d.join("train.ja"), "別の文。\n".repeat(96)).unwrap();
    let (ok, _, err) = train(
        &s("student.json"),
        &s("student2"),
        &["--distilled", &distilled],
    );
    assert!(!ok && err.contains("another training source"), "{err}");
    let (ok, _, err) = train(
        &s("student.json"),
        &s("student3"),
        &["--distilled", &s("nowhere")],
    );
    assert!(
        !ok && err.contains("distill.json") && err.contains("fastsoftmax distill"),
        "{err}"
    );
}
