//! End-to-end: the CLI trains a tiny model on a fixture text, then eval, bench and predict run
//! on it; bad input gets errors that say what to do.

mod common;

use std::path::Path;

use common::cli;

fn write_fixture(dir: &Path) {
    let sentences = [
        "the cat sat on the mat",
        "a dog ran in the park",
        "the bird sang a song",
    ];
    let text: String = (0..300)
        .map(|i| format!("{}\n", sentences[i % 3]))
        .collect();
    std::fs::write(dir.join("ptb.train.txt"), &text).unwrap();
    let valid: String = (0..30).map(|i| format!("{}\n", sentences[i % 3])).collect();
    std::fs::write(dir.join("ptb.valid.txt"), valid).unwrap();
    std::fs::write(
        dir.join("ptb.test.txt"),
        "the cat sat on the mat\nthe zebra sang a song\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("config.json"),
        r#"{"model": {"cell": "gru", "d_embed": 16, "d_hidden": 16, "n_layers": 1, "init_range": 0.3},
            "train": {"lr": 5.0, "lr_decay": 0.5, "decay_from_epoch": 10, "epochs": 8,
                      "batch_size": 4, "bptt": 8, "clip_norm": 5.0, "seed": 1}}"#,
    )
    .unwrap();
}

#[test]
fn train_eval_bench_predict() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write_fixture(d);
    let s = |p: &str| d.join(p).to_str().unwrap().to_string();
    let (ok, out, err) = cli(&[
        "train-lm",
        "--config",
        &s("config.json"),
        "--data",
        &s(""),
        "--out",
        &s("m"),
        "--quiet",
        "--threads",
        "2",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("test ppl"), "{out}");

    let (ok, out, err) = cli(&[
        "eval",
        "--model",
        &s("m"),
        "--text",
        &s("ptb.test.txt"),
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["tokens"], 12); // 13 tokens, the first only read
    assert!(v["perplexity"].as_f64().unwrap().is_finite(), "{v}");
    assert!(v["unk_rate"].as_f64().unwrap() > 0.0); // "zebra" is not in the vocabulary
    let (ok, out, err) = cli(&[
        "eval",
        "--model",
        &s("m"),
        "--text",
        &s("ptb.valid.txt"),
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        v["perplexity"].as_f64().unwrap() < 6.0,
        "far below the 17-word uniform: {v}"
    );

    let (ok, out, err) = cli(&[
        "bench",
        "--model",
        &s("m"),
        "--text",
        &s("ptb.train.txt"),
        "--heads",
        "full",
        "--repeats",
        "1",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    for field in [
        "head",
        "p_at_1",
        "p_at_5",
        "acc_at_1",
        "acc_at_5",
        "acc_at_10",
        "us_per_query_b1",
        "us_per_query_b64",
        "speedup_b1",
        "speedup_b64",
        "flop_speedup",
    ] {
        assert!(v.get(field).is_some(), "missing {field} in {v}");
    }
    assert_eq!(v["p_at_1"], 1.0);
    assert_eq!(v["p_at_5"], 1.0);
    assert!(v["acc_at_1"].as_f64().unwrap() > 0.5, "{v}");

    let (ok, out, err) = cli(&[
        "predict",
        "--model",
        &s("m"),
        "-k",
        "2",
        "--json",
        "the cat sat on the",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v[0]["word"], "mat", "{v}");

    // A screening head: train it, bench it beside the full head, score perplexity with it, plot.
    let train_head = |extra: &[&str]| {
        let (model, train, valid) = (s("m"), s("ptb.train.txt"), s("ptb.valid.txt"));
        let mut args = vec!["train-head", "l2s", "--model", &model, "--train", &train];
        args.extend(["--valid", valid.as_str()]);
        args.extend_from_slice(extra);
        cli(&args)
    };
    let (ok, out, err) = train_head(&[
        "--clusters",
        "2",
        "--budget",
        "8",
        "--rounds",
        "1",
        "--quiet",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("heads/l2s"), "{out}");
    for f in [
        "head.json",
        "head.safetensors",
        "config.json",
        "command.txt",
        "train.log",
    ] {
        assert!(d.join("m/heads/l2s").join(f).exists(), "missing {f}");
    }
    let (ok, out, err) = cli(&[
        "bench",
        "--model",
        &s("m"),
        "--text",
        &s("ptb.train.txt"),
        "--repeats",
        "1",
        "--json",
    ]);
    assert!(ok, "{err}");
    std::fs::write(d.join("bench.jsonl"), &out).unwrap();
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "full and l2s are found by default: {out}");
    assert_eq!(rows[1]["head"], "l2s");
    assert!(rows[1]["p_at_1"].as_f64().unwrap() > 0.9, "{out}");
    // The int8 servings: the full softmax on int8 rows, and the trained l2s head on int8 rows.
    let (ok, out, err) = cli(&[
        "bench",
        "--model",
        &s("m"),
        "--text",
        &s("ptb.train.txt"),
        "--heads",
        "full-int8-m10,l2s+int8",
        "--repeats",
        "1",
        "--json",
    ]);
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let p_at_1 = |head: &str| {
        let row = rows.iter().find(|r| r["head"] == head);
        row.unwrap_or_else(|| panic!("{head} missing: {out}"))["p_at_1"]
            .as_f64()
            .unwrap()
    };
    assert!(p_at_1("full-int8-m10") > 0.99, "{out}");
    assert!(p_at_1("l2s+int8") > 0.9, "{out}");
    let (ok, _, err) = cli(&[
        "bench",
        "--model",
        &s("m"),
        "--text",
        &s("ptb.train.txt"),
        "--heads",
        "ds+int8",
    ]);
    assert!(!ok && err.contains("no head named"), "{err}");
    let eval_l2s = |rank: &str| {
        let (model, text) = (s("m"), s("ptb.valid.txt"));
        cli(&[
            "eval",
            "--model",
            &model,
            "--text",
            &text,
            "--head",
            "l2s",
            "--fallback-rank",
            rank,
            "--repeats",
            "1",
            "--json",
        ])
    };
    let (ok, out, err) = eval_l2s("4");
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let (exact, screened) = (
        v["ppl_full"].as_f64().unwrap(),
        v["ppl_head"].as_f64().unwrap(),
    );
    assert!(screened.is_finite() && screened >= exact * 0.99, "{v}");
    let (ok, _, err) = eval_l2s("99");
    assert!(!ok && err.contains("1 ≤ rank ≤ 16"), "{err}");
    // Table 6's other methods: a full-rank SVD preview is exact whatever N; FGD's graph finds
    // some words exactly; a head that leaves words without probability is refused.
    let eval_head = |head: &str| {
        let (model, text) = (s("m"), s("ptb.valid.txt"));
        let args = ["eval", "--model", &model, "--text", &text, "--head", head];
        cli(&[
            &args[..],
            &["--fallback-rank", "4", "--repeats", "1", "--json"],
        ]
        .concat())
    };
    let ppl = |out: &str| {
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        (
            v["ppl_full"].as_f64().unwrap(),
            v["ppl_head"].as_f64().unwrap(),
        )
    };
    let (ok, out, err) = eval_head("svd-r16-n1");
    assert!(ok, "{err}");
    let (exact, svd) = ppl(&out);
    assert!((svd / exact - 1.0).abs() < 1e-4, "{out}");
    let (ok, out, err) = eval_head("svd-r2-n1");
    assert!(ok && ppl(&out).1 > exact * 1.001, "{out}{err}");
    let (ok, out, err) = eval_head("hnsw-ef8");
    assert!(ok && ppl(&out).1.is_finite(), "{out}{err}");
    let (ok, _, err) = eval_head("hnsw-ef0");
    assert!(!ok && err.contains("ef"), "{err}");
    let (ok, _, err) = cli(&["plot", "--input", &s("bench.jsonl"), "--out", &s("fig")]);
    assert!(ok, "{err}");
    for f in [
        "fig-p_at_1.png",
        "fig-p_at_1.svg",
        "fig-p_at_5.png",
        "fig-p_at_5.svg",
    ] {
        assert!(
            std::fs::metadata(d.join(f)).unwrap().len() > 1000,
            "{f} is empty"
        );
    }
    // DS-Softmax: mitosis 2 → 4 experts with a stage snapshot; bench finds both; resume.
    let train_ds = |extra: &[&str]| {
        let (model, train, valid) = (s("m"), s("ptb.train.txt"), s("ptb.valid.txt"));
        let mut args = vec!["train-head", "ds", "--model", &model, "--train", &train];
        args.extend(["--valid", valid.as_str(), "--quiet"]);
        args.extend_from_slice(extra);
        cli(&args)
    };
    std::fs::write(
        d.join("ds.json"),
        r#"{"experts": 4, "epochs_per_stage": 2, "batch_size": 16, "prune_every": 2, "lambda_lasso": 0.01, "lr": 0.01}"#,
    )
    .unwrap();
    let (ok, out, err) = train_ds(&["--config", &s("ds.json"), "--save-stages"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("heads/ds") && out.contains("peak training memory"),
        "{out}"
    );
    assert!(err.contains("DS-2") && err.contains("DS-4"), "{err}");
    for f in ["ds/head.json", "ds/train.log", "ds-2/head.json"] {
        assert!(d.join("m/heads").join(f).exists(), "missing {f}");
    }
    let (ok, out, err) = cli(&[
        "bench",
        "--model",
        &s("m"),
        "--text",
        &s("ptb.train.txt"),
        "--heads",
        "ds,ds-2",
        "--repeats",
        "1",
        "--json",
    ]);
    assert!(ok, "{err}");
    let names: Vec<String> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["head"].to_string())
        .collect();
    assert_eq!(names, ["\"ds\"", "\"ds-2\""], "{out}");
    // SVD-softmax inside the experts (Table 3 of the DS paper), built at load from a ds head
    // and refused for another kind.
    let (ok, out, err) = cli(&[
        "bench",
        "--model",
        &s("m"),
        "--text",
        &s("ptb.train.txt"),
        "--heads",
        "ds+svd-r4-p50",
        "--repeats",
        "1",
        "--json",
    ]);
    assert!(ok && out.contains("\"ds+svd-r4-p50\""), "{err}");
    let (ok, _, err) = cli(&[
        "predict",
        "--model",
        &s("m"),
        "--head",
        "l2s+svd-r4-p50",
        "the",
    ]);
    assert!(!ok && err.contains("l2s head"), "{err}");
    let (ok, _, err) = train_ds(&[
        "--config",
        &s("ds.json"),
        "--resume-from",
        "ds-2",
        "--name",
        "ds-resumed",
    ]);
    assert!(
        ok && err.contains("DS-4") && !err.contains("DS-2:"),
        "{err}"
    );
    let (ok, _, err) = train_ds(&["--experts", "6"]);
    assert!(!ok && err.contains("power of two"), "{err}");
    let (ok, _, err) = train_ds(&["--resume-from", "l2s"]);
    assert!(!ok && err.contains("DS head"), "{err}");

    let (ok, _, err) = train_head(&["--budget", "100000"]);
    assert!(!ok && err.contains("budget"), "{err}");
    let (ok, _, err) = train_head(&["--name", "full"]);
    assert!(!ok && err.contains("exact head"), "{err}");
    let (ok, _, err) = cli(&[
        "train-head",
        "l2s",
        "--model",
        &s("m"),
        "--train",
        &s("none.txt"),
        "--budget",
        "8",
    ]);
    assert!(!ok && err.contains("data fetch ptb"), "{err}");

    // Bad input: k out of range, unknown head, empty text, missing model.
    let (ok, _, err) = cli(&["predict", "--model", &s("m"), "-k", "0", "the"]);
    assert!(!ok && err.contains("k = 0"), "{err}");
    let (ok, _, err) = cli(&["predict", "--model", &s("m"), "-k", "100000", "the"]);
    assert!(!ok && err.contains("1 ≤ k ≤"), "{err}");
    let (ok, _, err) = cli(&["predict", "--model", &s("m"), "--head", "nope", "the"]);
    assert!(
        !ok && err.contains("train-head") && err.contains("available: full, ds"),
        "{err}"
    );
    std::fs::write(d.join("empty.txt"), "\n \n").unwrap();
    let (ok, _, err) = cli(&["eval", "--model", &s("m"), "--text", &s("empty.txt")]);
    assert!(!ok && err.contains("no words"), "{err}");
    let (ok, _, err) = cli(&["eval", "--model", &s("nope"), "--text", &s("ptb.test.txt")]);
    assert!(!ok && err.contains("manifest.json"), "{err}");
    let (ok, _, err) = cli(&[
        "train-lm",
        "--config",
        &s("config.json"),
        "--data",
        &s("missing"),
        "--out",
        &s("m2"),
    ]);
    assert!(!ok && err.contains("data fetch ptb"), "{err}");
    let (ok, _, err) = cli(&[
        "train-lm",
        "--config",
        &s("config.json"),
        "--data",
        &s(""),
        "--out",
        &s("m2"),
        "--backend",
        "cuda",
    ]);
    assert!(!ok && err.contains("unknown backend"), "{err}");
    // --devices: a batch of 4 does not split over 3; none is no device.
    for (n, says) in [("3", "multiple of 3"), ("0", "1 or more")] {
        let (ok, _, err) = cli(&[
            "train-lm",
            "--config",
            &s("config.json"),
            "--data",
            &s(""),
            "--out",
            &s("m4"),
            "--quiet",
            "--devices",
            n,
        ]);
        assert!(!ok && err.contains(says), "--devices {n}: {err}");
    }
    assert!(
        !d.join("m4").exists(),
        "nothing written for a refused --devices"
    );
    #[cfg(not(feature = "ndarray"))]
    {
        let (ok, _, err) = cli(&[
            "train-lm",
            "--config",
            &s("config.json"),
            "--data",
            &s(""),
            "--out",
            &s("m3"),
            "--backend",
            "ndarray",
        ]);
        assert!(!ok && err.contains("--features ndarray"), "{err}");
    }
    // Frequency-bucketed heads on the frozen LM, then `compare` over them and SVD.
    let train_bucketed = |kind: &str, extra: &[&str]| {
        let (model, train, valid) = (s("m"), s("ptb.train.txt"), s("ptb.valid.txt"));
        let mut args = vec!["train-head", kind, "--model", &model, "--train", &train];
        args.extend(["--valid", valid.as_str(), "--quiet", "--max-contexts", "0"]);
        args.extend_from_slice(extra);
        cli(&args)
    };
    for kind in ["dsoftmax", "adaptive"] {
        let (ok, out, err) = train_bucketed(kind, &["--cutoffs", "4,8", "--epochs", "2"]);
        assert!(ok, "{err}");
        assert!(
            out.contains(&format!("heads/{kind}")) && out.contains("P@1"),
            "{out}"
        );
        assert!(
            err.contains("init from the output layer") && err.contains("epoch 2"),
            "{err}"
        );
        let again = format!("{kind}-again");
        let (ok, _, err) = train_bucketed(
            kind,
            &["--resume-from", kind, "--epochs", "1", "--name", &again],
        );
        assert!(ok && err.contains("epoch 1"), "{err}");
    }
    // Adaptive softmax's perplexity is its own distribution's: finite, no fallback.
    let (ok, out, err) = eval_head("adaptive");
    assert!(
        ok && ppl(&out).1.is_finite() && out.contains("\"rank\":0"),
        "{out}{err}"
    );
    let (ok, _, err) = eval_head("ds");
    assert!(
        !ok && err.contains("ds head") && err.contains("adaptive"),
        "{err}"
    );
    let (ok, _, err) = train_bucketed("adaptive", &["--cutoffs", "8,4"]);
    assert!(!ok && err.contains("cutoffs"), "{err}");
    let (ok, _, err) = train_bucketed("adaptive", &["--resume-from", "dsoftmax"]);
    assert!(!ok && err.contains("not adaptive"), "{err}");
    let (ok, _, err) = train_bucketed("dsoftmax", &["--target", "words"]);
    assert!(!ok && err.contains("teacher or data"), "{err}");
    let (ok, out, err) = cli(&[
        "compare",
        "--model",
        &s("m"),
        "--text",
        &s("ptb.train.txt"),
        "--heads",
        "svd,hnsw,hnsw-ip,greedy,pca,lsh,dsoftmax,adaptive,hnsw-ef3",
        "--max-contexts",
        "200",
        "--repeats",
        "1",
        "--out",
        &s("cmp/table2"),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("SVD-softmax") && out.contains("D-softmax"),
        "{out}"
    );
    let rows = std::fs::read_to_string(d.join("cmp/table2.jsonl")).unwrap();
    let methods: Vec<String> = rows
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["method"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for m in ["svd", "hnsw", "hnsw-ip", "greedy", "pca", "lsh", "adaptive"] {
        assert!(
            methods.iter().any(|x| x == m),
            "{m} missing from {methods:?}"
        );
    }
    // hnsw-ef3 was asked for by name and joins its method's curve.
    assert!(rows.contains("\"hnsw-ef3\"") && methods.iter().filter(|m| *m == "hnsw").count() == 7);
    // `dsoftmax-again` is a second D-softmax head: the kind has two rows.
    assert_eq!(
        methods.iter().filter(|m| *m == "dsoftmax").count(),
        2,
        "{methods:?}"
    );
    let md = std::fs::read_to_string(d.join("cmp/table2.md")).unwrap();
    assert!(
        md.contains("git revision") && md.contains("## Every setting"),
        "{md}"
    );
    for f in ["cmp/table2-p_at_1.png", "cmp/table2-p_at_5.svg"] {
        assert!(d.join(f).exists(), "missing {f}");
    }
    // The candidate attention predictor: trained from the vocabulary alone, benchmarked and
    // used through the same commands as every head.
    std::fs::write(
        d.join("cand.json"),
        r#"{"context": 3, "slots": 4, "width": 8, "rank": 2, "frequent_pool": 6, "epochs": 2, "batch_size": 32, "lr": 0.01}"#,
    )
    .unwrap();
    let train_candidates = |extra: &[&str]| {
        let (model, config, train, valid) = (
            s("m"),
            s("cand.json"),
            s("ptb.train.txt"),
            s("ptb.valid.txt"),
        );
        let mut args = vec![
            "train-head",
            "candidates",
            "--model",
            &model,
            "--config",
            &config,
        ];
        args.extend(["--train", &train, "--valid", &valid]);
        args.extend(extra);
        cli(&args)
    };
    let (ok, out, err) = train_candidates(&[]);
    assert!(ok, "{err}");
    assert!(
        out.contains("heads/candidates") && out.contains("WPR"),
        "{out}"
    );
    assert!(
        err.contains("trigram table") && err.contains("epoch 2"),
        "{err}"
    );
    assert!(d.join("m/heads/candidates/trigram.bin").exists());
    let (ok, out, err) = cli(&[
        "bench",
        "--model",
        &s("m"),
        "--text",
        &s("ptb.train.txt"),
        "--heads",
        "full,candidates,candidates-trigram",
        "--repeats",
        "1",
        "--json",
    ]);
    assert!(ok, "{err}");
    let row: serde_json::Value = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
    assert_eq!(row["head"], "candidates");
    // The fixture repeats three sentences: the trigram candidates and the network learn them.
    assert!(row["acc_at_1"].as_f64().unwrap() > 0.5, "{row}");
    let tri: serde_json::Value = serde_json::from_str(out.lines().nth(2).unwrap()).unwrap();
    assert_eq!(tri["head"], "candidates-trigram");
    assert!(tri["acc_at_1"].as_f64().unwrap() > 0.5, "{tri}");
    // End to end, the predictor skips the LM step that the full softmax pays for.
    let full: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let us = |r: &serde_json::Value, f: &str| r[f].as_f64().unwrap();
    assert_eq!(
        us(&row, "us_per_word_end_to_end"),
        us(&row, "us_per_query_b1")
    );
    assert!(us(&full, "us_per_word_end_to_end") > us(&full, "us_per_query_b1"));
    assert_eq!(us(&full, "speedup_end_to_end"), 1.0);
    // The teacher assistant: a predictor taught by the one just trained, not by the LSTM.
    let ta = |teacher: &str| {
        train_candidates(&[
            "--teacher",
            teacher,
            "--distill",
            "0.5",
            "--name",
            "cand-student",
        ])
    };
    let (ok, _, err) = ta("candidates");
    assert!(ok, "{err}");
    assert!(
        err.contains("teacher: the candidate predictor candidates"),
        "{err}"
    );
    let (ok, _, err) = ta("candidates-trigram");
    assert!(!ok && err.contains("holds a trigram head"), "{err}");
    let (ok, _, err) = train_candidates(&["--teacher", "candidates"]);
    assert!(
        !ok && err.contains("give the student another --name"),
        "{err}"
    );
    let (ok, _, err) = train_candidates(&["--fill", "sideways"]);
    assert!(!ok && err.contains("use top, frequent or random"), "{err}");
    let (ok, out, err) = cli(&[
        "predict",
        "--model",
        &s("m"),
        "--head",
        "candidates",
        "-k",
        "3",
        "--json",
        "the cat sat on the",
    ]);
    assert!(ok, "{err}");
    // The predictor's own probabilities (it never ran the LSTM), best first.
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v[0]["word"], "mat", "{v}");
    let own: Vec<f64> = (0..3)
        .map(|i| v[i]["head_prob"].as_f64().unwrap())
        .collect();
    assert!(
        own.windows(2).all(|p| p[0] >= p[1]) && own.iter().sum::<f64>() <= 1.0,
        "{v}"
    );
}

/// Every command given a model folder of another kind says what the folder holds and which
/// commands take it, before anything else goes wrong.
#[test]
fn a_model_of_another_kind_is_named_with_the_commands_that_take_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let text = d.join("text.txt");
    std::fs::write(&text, "the cat sat on the mat\n").unwrap();
    let (text, out) = (text.to_str().unwrap(), d.join("out"));
    let out = out.to_str().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let translator = format!("{root}/assets/models/bible-en-de-tiny");
    let lm = format!("{root}/assets/models/ptb-small-gru");
    let t = translator.as_str();
    for args in [
        vec!["predict", "--model", t, "the"],
        vec!["eval", "--model", t, "--text", text],
        vec!["bench", "--model", t, "--text", text],
        vec!["compare", "--model", t, "--text", text],
        vec!["export-npy", "--model", t, "--text", text, "--out", out],
        vec!["ds-figures", "--model", t, "--out", out],
        vec!["train-head", "dsoftmax", "--model", t],
        vec!["ime", "convert", "--model", t, "きょう"],
    ] {
        let (ok, _, err) = cli(&args);
        assert!(
            !ok && err.contains("holds a recurrent translator") && err.contains("`translate`"),
            "{args:?}: {err}"
        );
    }
    let l = lm.as_str();
    for args in [
        vec!["build-vmap", "--model", l, "--out", out, "--eval", "none"],
        vec!["text", "tokenize", "--model", l],
        vec![
            "distill",
            "--teacher",
            l,
            "--data",
            d.to_str().unwrap(),
            "--src",
            "en",
            "--tgt",
            "de",
            "--out",
            out,
        ],
    ] {
        let (ok, _, err) = cli(&args);
        assert!(
            !ok && err.contains("holds a language model") && err.contains("`predict`"),
            "{args:?}: {err}"
        );
    }
    assert!(
        !Path::new(out).exists(),
        "nothing is written for a wrong model"
    );
}
