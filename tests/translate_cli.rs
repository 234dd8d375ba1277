//! End-to-end: `train-nmt` trains a tiny translator on a fixture parallel text, `translate`
//! serves it line for line, `bleu` scores it; bad input gets errors that say what to do.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn cli(args: &[&str], stdin: Option<&[u8]>) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fastsoftmax"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the fastsoftmax binary");
    let mut input = child.stdin.take().unwrap();
    // A command that fails before it reads its input closes the pipe: not an error here.
    match input.write_all(stdin.unwrap_or_default()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
        _ => drop(input),
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const PAIRS: [(&str, &str); 4] = [
    ("the cat sleeps.", "die Katze schläft."),
    ("the dog runs.", "der Hund läuft."),
    ("a cat runs.", "eine Katze läuft."),
    ("the dog sleeps.", "der Hund schläft."),
];

fn write_fixture(dir: &Path) {
    for (part, n) in [("train", 200), ("valid", 8)] {
        let (mut en, mut de) = (String::new(), String::new());
        for i in 0..n {
            let (e, d) = PAIRS[i % PAIRS.len()];
            en.push_str(&format!("{e}\n"));
            de.push_str(&format!("{d}\n"));
        }
        std::fs::write(dir.join(format!("{part}.en")), en).unwrap();
        std::fs::write(dir.join(format!("{part}.de")), de).unwrap();
    }
    std::fs::write(
        dir.join("config.json"),
        r#"{"model": {"cell": "gru", "d_embed": 16, "d_hidden": 24, "enc_layers": 1, "dec_layers": 1, "tied": true, "init_range": 0.2},
            "train": {"lr": 0.02, "lr_decay": 0.5, "decay_from_epoch": 20, "epochs": 12, "batch_size": 8,
                      "clip_norm": 5.0, "seed": 1, "average_last": 3}}"#,
    )
    .unwrap();
}

#[test]
fn train_translate_bleu_and_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write_fixture(d);
    let s = |p: &str| d.join(p).to_str().unwrap().to_string();
    let (ok, out, err) = cli(
        &[
            "train-nmt",
            "--config",
            &s("config.json"),
            "--data",
            &s(""),
            "--out",
            &s("m"),
            "--quiet",
            "--threads",
            "1",
        ],
        None,
    );
    assert!(ok, "train-nmt failed: {err}");
    assert!(out.contains("valid BLEU"), "{out}");
    for f in [
        "manifest.json",
        "model.safetensors",
        "train.log",
        "metrics.json",
        "best.bpk",
        "epoch-10.bpk",
        "epoch-12.bpk",
    ] {
        assert!(d.join("m").join(f).exists(), "{f} missing");
    }
    // Checkpoint averaging keeps the last three epochs only and validates their mean.
    assert!(!d.join("m/epoch-9.bpk").exists());
    let log = std::fs::read_to_string(d.join("m/train.log")).unwrap();
    assert!(log.contains("average of epochs 10-12 | valid ppl"), "{log}");
    let metrics = std::fs::read_to_string(d.join("m/metrics.json")).unwrap();
    assert!(
        metrics.contains("\"average\"") && metrics.contains("\"exported\""),
        "{metrics}"
    );
    // Learned: the training sentences come back (a fixture this small is memorised).
    let input = "the cat sleeps.\n\nthe dog runs.\n";
    let (ok, out, err) = cli(
        &["translate", "--model", &s("m"), "--beam", "3"],
        Some(input.as_bytes()),
    );
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        ["die Katze schläft.", "", "der Hund läuft."],
        "{err}"
    );
    assert!(err.contains("words/s"), "{err}");
    // BLEU of that output against the references: 100.
    std::fs::write(d.join("hyp"), &out).unwrap();
    std::fs::write(d.join("ref"), "die Katze schläft.\n\nder Hund läuft.\n").unwrap();
    let (ok, out, _) = cli(&["bleu", "--ref", &s("ref"), "--hyp", &s("hyp")], None);
    assert!(ok && out.starts_with("BLEU = 100.00"), "{out}");
    std::fs::write(d.join("short"), "die Katze schläft.\n").unwrap();
    let (ok, _, err) = cli(&["bleu", "--ref", &s("ref"), "--hyp", &s("short")], None);
    assert!(
        !ok && err.contains("one hypothesis per reference line"),
        "{err}"
    );

    // Bad input: each a clear error or a documented behaviour, never a panic.
    let (ok, _, err) = cli(
        &["translate", "--model", &s("m"), "--beam", "0"],
        Some(b"the cat\n"),
    );
    assert!(!ok && err.contains("beam size 0"), "{err}");
    let (ok, out, err) = cli(
        &["translate", "--model", &s("m")],
        Some(b"the cat sleeps.\n\xff\xfe\n"),
    );
    assert!(
        !ok && err.contains("line 2") && err.contains("UTF-8"),
        "{err}"
    );
    assert_eq!(
        out.lines().count(),
        1,
        "the line before the bad one is translated"
    );
    let (ok, _, err) = cli(&["translate", "--model", &s("")], Some(b"x\n"));
    assert!(!ok && err.contains("manifest.json"), "{err}");
    let lm = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/models/ptb-small-gru");
    let (ok, _, err) = cli(&["translate", "--model", lm], Some(b"x\n"));
    assert!(
        !ok && err.contains("holds a language model") && err.contains("`predict`"),
        "{err}"
    );
    let (ok, out, err) = cli(
        &["translate", "--model", &s("m"), "--max-source-tokens", "2"],
        Some("zebra quagga the cat sleeps ünknown ☃\n".as_bytes()),
    );
    assert!(ok && err.contains("warning: line 1 has 7 tokens"), "{err}");
    assert_eq!(out.lines().count(), 1);
    let (ok, out, _) = cli(
        &[
            "translate",
            "--model",
            &s("m"),
            "--json",
            "--n-best",
            "2",
            "--beam",
            "2",
        ],
        Some(b"a cat runs.\n"),
    );
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["translations"].as_array().unwrap().len(), 2);
    // The vocabulary map: aligned from the fixture, served by translate, bad maps refused.
    let (ok, out, err) = cli(
        &[
            "build-vmap",
            "--data",
            &s(""),
            "--out",
            &s("map.vmap"),
            "--eval",
            "valid",
            "--min-freq",
            "1",
            "--json",
        ],
        None,
    );
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(report["coverage"].as_f64().unwrap() > 0.9, "{out}");
    let map = std::fs::read_to_string(d.join("map.vmap")).unwrap();
    assert!(
        map.lines()
            .any(|l| l.starts_with("cat\t") && l.contains("Katze")),
        "{map}"
    );
    let (ok, out, err) = cli(
        &[
            "translate",
            "--model",
            &s("m"),
            "--beam",
            "3",
            "--vmap",
            &s("map.vmap"),
        ],
        Some(input.as_bytes()),
    );
    assert!(ok, "{err}");
    assert_eq!(out.lines().collect::<Vec<_>>(), lines, "{err}");
    let bad = |name: &str, text: &str| {
        std::fs::write(d.join(name), text).unwrap();
        cli(
            &["translate", "--model", &s("m"), "--vmap", &s(name)],
            Some(b"the cat sleeps.\n"),
        )
    };
    let (ok, _, err) = bad("notab.vmap", "cat\tKatze\ndog Hund\n");
    assert!(
        !ok && err.contains("notab.vmap") && err.contains("line 2"),
        "{err}"
    );
    let (ok, _, err) = bad("french.vmap", "cat\tchat\ndog\tchien\n");
    assert!(!ok && err.contains("another vocabulary"), "{err}");
    let (ok, out, err) = bad("unknown.vmap", "\t.\ncat\tKatze Mieze\nsleeps\tschläft\n");
    assert!(ok && err.contains("1 of the 4 target words"), "{err}");
    // "die" is in no shortlist of this map, so it cannot be written.
    assert!(out.contains("Katze") && !out.contains("die"), "{out}");

    // A map shipped in the quantized folder is served by default, exactly as --vmap serves
    // it; --no-vmap scores the whole vocabulary; verify checks it; damage is named; a map of
    // another vocabulary is refused when shipping, not when an app loads the folder.
    let m = s("m");
    let quantize = |out: &str, vmap: Option<&str>| {
        let (q, v) = (s(out), vmap.map(&s));
        let mut args = vec!["quantize", "--model", &m, "--out", q.as_str()];
        if let Some(v) = &v {
            args.extend(["--vmap", v.as_str()]);
        }
        cli(&args, None)
    };
    let (ok, _, err) = quantize("q8map", Some("unknown.vmap"));
    assert!(ok, "{err}");
    let (ok, _, err) = quantize("q8", None);
    assert!(ok, "{err}");
    let sentence = Some(b"the cat sleeps.\n".as_slice());
    let run = |model: &str, extra: &[&str]| {
        let (q, stats) = (s(model), s("stats.json"));
        let mut args = vec![
            "translate",
            "--model",
            q.as_str(),
            "--stats",
            stats.as_str(),
        ];
        args.extend(extra);
        let (ok, out, err) = cli(&args, sentence);
        assert!(ok, "{args:?}: {err}");
        let stats: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("stats.json")).unwrap()).unwrap();
        (out, stats["vmap"].as_str().map(str::to_string))
    };
    let unknown = s("unknown.vmap");
    let (shipped, used) = run("q8map", &[]);
    // The stats name the code path the timing ran on: this CPU's int8 kernels.
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats["precision"], "int8");
    let int8 = fastsoftmax_infer::kernels::kernel_paths().int8;
    assert_eq!(stats["kernels"]["int8"], int8);
    // `--output` naming a device, pipe or link (`/dev/null`) writes into it: renaming a finished
    // file onto it would replace the device.
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let fifo = d.join("out.fifo");
        let made = Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        let (q, f) = (s("q8map"), fifo.to_str().unwrap().to_string());
        let (ok, _, err) = cli(&["translate", "--model", &q, "--output", &f], sentence);
        assert!(ok, "{err}");
        // Checked before the join: had the pipe been replaced, the reader would wait forever.
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(reader.join().unwrap(), shipped);
        assert!(!d.join("out.partial").exists());
    }
    assert_eq!(
        (shipped.clone(), used.is_some()),
        (run("q8", &["--vmap", &unknown]).0, true)
    );
    assert!(used.unwrap().ends_with("vocab.map.gz"));
    assert!(!shipped.contains("die"), "{shipped}");
    assert_eq!(run("q8map", &["--no-vmap"]), run("q8", &[]));
    let (ok, out, err) = cli(&["verify", "--model", &s("q8map")], None);
    assert!(
        ok && out.contains("vocab.map.gz") && out.contains("verified"),
        "{out}{err}"
    );
    // A v3 folder (before maps were compressed) ships its map as plain `vocab.map`: still read,
    // and served the same.
    let v3 = d.join("q8map-v3");
    std::fs::create_dir_all(&v3).unwrap();
    for f in std::fs::read_dir(d.join("q8map")).unwrap() {
        let f = f.unwrap().path();
        if f.is_file() {
            std::fs::copy(&f, v3.join(f.file_name().unwrap())).unwrap();
        }
    }
    let w = fastsoftmax_translate::artifact::NmtWeights::load(&d.join("q8map")).unwrap();
    let text = w.vmap.as_ref().unwrap().to_text();
    std::fs::remove_file(v3.join("vocab.map.gz")).unwrap();
    std::fs::write(v3.join("vocab.map"), &text).unwrap();
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(v3.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["format_version"], 4);
    manifest["format_version"] = 3.into();
    let digests = manifest["sha256"].as_object_mut().unwrap();
    digests.remove("vocab.map.gz").unwrap();
    digests.insert(
        "vocab.map".into(),
        fastsoftmax_infer::files::sha256_hex(text.as_bytes()).into(),
    );
    std::fs::write(v3.join("manifest.json"), manifest.to_string()).unwrap();
    let (v3_out, v3_map) = run("q8map-v3", &[]);
    assert_eq!(v3_out, shipped);
    assert!(v3_map.unwrap().ends_with("vocab.map"));
    let mut damaged = std::fs::read(d.join("q8map/vocab.map.gz")).unwrap();
    damaged.extend_from_slice(b"dog\tHund\n");
    std::fs::write(d.join("q8map/vocab.map.gz"), damaged).unwrap();
    let (ok, _, err) = cli(&["translate", "--model", &s("q8map")], sentence);
    assert!(
        !ok && err.contains("vocab.map.gz") && err.contains("restore it"),
        "{err}"
    );
    let (ok, _, err) = quantize("q8fr", Some("french.vmap"));
    assert!(!ok && err.contains("another vocabulary"), "{err}");

    // Screening heads trained on the translator's decoder contexts, served inside the beam.
    let (ok, out, err) = cli(
        &[
            "train-head",
            "l2s",
            "--model",
            &s("m"),
            "--data",
            &s(""),
            "--clusters",
            "2",
            "--budget",
            "6",
            "--rounds",
            "1",
            "--quiet",
        ],
        None,
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("saved") && err.contains("train.en → "),
        "{out}{err}"
    );
    let (ok, _, err) = cli(
        &[
            "train-head",
            "ds",
            "--model",
            &s("m"),
            "--data",
            &s(""),
            "--experts",
            "2",
            "--start-experts",
            "2",
            "--quiet",
        ],
        None,
    );
    assert!(ok, "{err}");
    for head in ["l2s", "ds"] {
        let (ok, out, err) = cli(
            &[
                "translate",
                "--model",
                &s("m"),
                "--beam",
                "3",
                "--head",
                head,
            ],
            Some(input.as_bytes()),
        );
        assert!(ok, "{head}: {err}");
        assert!(
            err.contains(&format!("screening with {head} head")),
            "{err}"
        );
        assert_eq!(out.lines().count(), 3, "{head}: {out}");
    }
    // An int8 artifact carries the heads over, bound to its quantized output layer.
    let (ok, out, err) = cli(&["quantize", "--model", &s("m"), "--out", &s("q8")], None);
    assert!(
        ok && out.contains("carried the screening heads ds, l2s over"),
        "{out}{err}"
    );
    let (ok, out, err) = cli(
        &[
            "translate",
            "--model",
            &s("q8"),
            "--beam",
            "3",
            "--head",
            "l2s",
        ],
        Some(input.as_bytes()),
    );
    assert!(ok && out.lines().count() == 3, "{out}{err}");
    let (ok, out, _) = cli(
        &[
            "quantize",
            "--model",
            &s("m"),
            "--to",
            "int16",
            "--out",
            &s("q16"),
        ],
        None,
    );
    assert!(ok && !out.contains("carried"), "{out}");
    let (ok, _, err) = cli(
        &["translate", "--model", &s("q16"), "--head", "l2s"],
        Some(b"the cat sleeps.\n"),
    );
    assert!(!ok && err.contains("no head"), "{err}");
    let (ok, _, err) = cli(
        &["translate", "--model", &s("m"), "--head", "nope"],
        Some(b"the cat sleeps.\n"),
    );
    assert!(!ok && err.contains("train-head l2s"), "{err}");
    let (ok, _, err) = cli(
        &[
            "translate",
            "--model",
            &s("m"),
            "--head",
            "l2s",
            "--vmap",
            &s("map.vmap"),
        ],
        Some(b"the cat sleeps.\n"),
    );
    assert!(!ok && err.contains("cannot be used with"), "{err}");
    let (ok, _, err) = cli(
        &[
            "train-head",
            "l2s",
            "--model",
            &s("m"),
            "--data",
            &s("nowhere"),
            "--budget",
            "6",
            "--quiet",
        ],
        None,
    );
    assert!(
        !ok && err.contains("nowhere") && err.contains("data fetch bible"),
        "{err}"
    );

    // Resuming a finished run exports again and trains nothing more.
    let (ok, _, err) = cli(
        &[
            "train-nmt",
            "--config",
            &s("config.json"),
            "--data",
            &s(""),
            "--out",
            &s("m"),
            "--quiet",
            "--resume",
        ],
        None,
    );
    assert!(ok, "{err}");
    let (ok, _, err) = cli(
        &[
            "train-nmt",
            "--config",
            &s("config.json"),
            "--data",
            &s(""),
            "--out",
            &s("m"),
            "--quiet",
        ],
        None,
    );
    assert!(!ok && err.contains("--resume"), "{err}");
}
