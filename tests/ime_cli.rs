//! End-to-end: `ime convert` and `ime eval` on a small `data fetch ja`-shaped folder (a handful
//! of sentences; the real data is 1.2M), and the errors bad input gets.

mod common;

use std::path::Path;

use common::cli;

/// `ime ACTION --data DATA --min-count 1 [--lm kn3] ARGS…` (the fixture's words are seen once
/// or twice; the n-gram model unless ARGS name one).
fn ime(action: &str, data: &str, args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["ime", action, "--data", data, "--min-count", "1"];
    if !args.contains(&"--lm") {
        all.extend(["--lm", "kn3"]);
    }
    all.extend_from_slice(args);
    cli(&all)
}

const TRAIN: &[&str] = &[
    "今日/きょう は/は いい/いい 天気/てんき です/です ね/ね",
    "今日/きょう は/は いい/いい 天気/てんき です/です",
    "明日/あした は/は いい/いい 天気/てんき",
    "京/きょう に/に 行く/いく",
    "転機/てんき が/が 来た/きた",
];

fn write_fixture(dir: &Path) {
    let train = TRAIN.join("\n") + "\n";
    let mut counts: Vec<(String, usize)> = Vec::new();
    for w in train.split_whitespace() {
        match counts.iter_mut().find(|(x, _)| x == w) {
            Some((_, c)) => *c += 1,
            None => counts.push((w.to_string(), 1)),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    let words: String = counts.iter().map(|(w, c)| format!("{w}\t{c}\n")).collect();
    std::fs::write(dir.join("train.txt"), train).unwrap();
    std::fs::write(dir.join("words.tsv"), words).unwrap();
    std::fs::write(dir.join("ipadic.tsv"), "きょう\t強\nねこ\t猫\n").unwrap();
    std::fs::write(
        dir.join("eval.tsv"),
        "きょうはいいてんきですね\t今日はいい天気ですね\nきょうにいく\t京に行く\nねこ\t猫\n",
    )
    .unwrap();
}

/// A tiny LSTM trained on the fixture's train.txt (one epoch, seeded): its `train-lm` folder.
fn train_tiny_lstm(dir: &Path) -> std::path::PathBuf {
    let config = dir.join("tiny.json");
    std::fs::write(
        &config,
        r#"{"model": {"cell": "lstm", "d_embed": 8, "d_hidden": 8, "n_layers": 1,
            "dropout": 0.0, "tied": true, "init_range": 0.1},
            "train": {"lr": 1.0, "lr_decay": 0.5, "decay_from_epoch": 9, "epochs": 1,
            "batch_size": 2, "bptt": 4, "clip_norm": 0.25, "seed": 1, "min_count": 1,
            "softmax": {"kind": "full"}}}"#,
    )
    .unwrap();
    let (train, run) = (dir.join("train.txt"), dir.join("run"));
    let t = train.to_str().unwrap();
    let args = [
        "train-lm",
        "--config",
        config.to_str().unwrap(),
        "--train",
        t,
        "--valid",
        t,
    ];
    let (ok, _, err) = cli(&[
        &args[..],
        &["--test", t, "--out", run.to_str().unwrap(), "--quiet"],
    ]
    .concat());
    assert!(ok, "{err}");
    run
}

#[test]
fn converts_and_evaluates_with_kneser_ney() {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let data = dir.path().to_str().unwrap();
    let (ok, out, err) = ime("convert", data, &["--romaji", "kyouhaiitenkidesune"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "きょうはいいてんきですね");
    assert!(lines[1].contains("今日はいい天気ですね"), "{out}");
    // The same conversions as JSON: the text, its score and words, in the table's order.
    let (ok, json, err) = ime(
        "convert",
        data,
        &["--romaji", "--json", "kyouhaiitenkidesune"],
    );
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["kana"], "きょうはいいてんきですね");
    let first = &v["candidates"][0];
    assert!(lines[1].contains(first["text"].as_str().unwrap()), "{json}");
    let spelled: String = first["words"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["display"].as_str().unwrap())
        .collect();
    assert_eq!(spelled, first["text"].as_str().unwrap());
    assert_eq!(
        v["candidates"].as_array().unwrap().len(),
        lines.len() - 1,
        "{out}"
    );

    let (ok, out, err) = ime("eval", data, &["--lm", "kn2", "--json"]);
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["sentences"], 3);
    assert_eq!(report["keystrokes"], 12 + 6 + 2);
    let top1 = report["top1"].as_f64().unwrap();
    assert!(top1 >= 2.0 / 3.0 - 1e-9, "{out}");
    assert!(report["top10"].as_f64().unwrap() >= top1);
}

/// Domain adaptation: a second model on the in-domain text, its weight fitted on valid.txt.
#[test]
fn interpolates_an_in_domain_model() {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let data = dir.path().to_str().unwrap();
    std::fs::write(dir.path().join("local.txt"), "京/きょう に/に 行く/いく\n").unwrap();
    std::fs::write(dir.path().join("valid.txt"), "京/きょう に/に 行く/いく\n").unwrap();
    let local = dir.path().join("local.txt");
    let args = ["--in-domain", local.to_str().unwrap(), "きょうにいく"];
    let (ok, out, err) = ime("convert", data, &args);
    assert!(ok, "{err}");
    assert!(
        err.contains("interpolated") && err.contains("valid.txt"),
        "{err}"
    );
    assert!(out.lines().nth(1).unwrap().contains("京に行く"), "{out}");
}

/// The unigram adaptation of an n-gram model: with frequencies where 転機 is common and 天気
/// rare (the reverse of the training text), てんき converts to 転機; the report records β.
#[test]
fn adapts_the_ngram_model_to_word_frequencies() {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let data = dir.path().to_str().unwrap();
    let freq = dir.path().join("wordfreq.tsv");
    std::fs::write(&freq, "は\t150\n転機\t300\n今日\t350\n天気\t700\n").unwrap();
    let adapt = ["--adapt", freq.to_str().unwrap(), "--adapt-beta", "2"];
    let first = |extra: &[&str]| {
        let (ok, out, err) = ime("convert", data, &[extra, &["てんき"]].concat());
        assert!(ok, "{err}");
        out.lines().nth(1).unwrap_or_default().to_string()
    };
    assert!(first(&[]).contains("天気"), "{}", first(&[]));
    assert!(first(&adapt).contains("転機"), "{}", first(&adapt));
    let (ok, out, err) = ime("eval", data, &[&adapt[..], &["--json"]].concat());
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["adapt_beta"], 2.0);
}

/// `ime pack` makes a converter folder that converts without DATA; the packed lexicon refuses
/// to sit beside another model.
#[test]
fn packs_a_trained_lstm_into_a_converter_folder() {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let data = dir.path().to_str().unwrap();
    let train = dir.path().join("train.txt");
    let run = train_tiny_lstm(dir.path());
    let packed = dir.path().join("packed");
    let (p, t, r) = (
        packed.to_str().unwrap(),
        train.to_str().unwrap(),
        run.to_str().unwrap(),
    );
    let (ok, out, err) = cli(&["ime", "pack", "--model", r, "--data", data, "--out", p]);
    assert!(ok, "{err}");
    assert!(out.contains("4-bit rows"), "{out}");
    for f in [
        "manifest.json",
        "model.safetensors",
        "lexicon.tsv.gz",
        "command.txt",
    ] {
        assert!(packed.join(f).exists(), "{f}");
    }
    // No DATA needed: the lexicon travels with the model (ねこ → 猫 comes from ipadic.tsv).
    let (ok, out, err) = cli(&[
        "ime",
        "convert",
        "--data",
        "/nonexistent",
        "--lm",
        "lstm",
        "--model",
        p,
        "ねこ",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("猫"), "{out}");

    // Vocabulary selection: the tail estimate is fitted into the folder, then every softmax
    // converts the evaluation set; the selection with every word matches the full softmax.
    let report = |model: &str, extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["ime", "eval", "--data", data, "--model", model, "--json"];
        args.extend_from_slice(extra);
        let (ok, out, err) = cli(&args);
        assert!(ok, "{extra:?}: {err}");
        serde_json::from_str(&out).unwrap()
    };
    let eval = |extra: &[&str]| {
        let r = report(p, extra);
        (r["top1"].as_f64().unwrap(), r["top10"].as_f64().unwrap(), r)
    };
    let fit_tail = |model: &str| {
        let (ok, out, err) = cli(&[
            "ime",
            "fit-tail",
            "--model",
            model,
            "--text",
            t,
            "--samples",
            "3",
        ]);
        assert!(ok && out.contains("tail-3.json"), "{out}{err}");
    };
    fit_tail(p);
    let full = eval(&["--softmax", "full"]);
    let all = eval(&["--softmax", "ivs", "--samples", "1000"]);
    assert_eq!((full.0, full.1), (all.0, all.1));
    for extra in [
        &["--softmax", "ivs", "--samples", "3", "--tail"][..],
        &["--softmax", "vs", "--sample", "uniform", "--samples", "2"],
        &["--softmax", "ivs", "--sample", "none"],
        &["--softmax", "self-norm"],
    ] {
        let (_, _, r) = eval(extra);
        assert_eq!(r["sentences"], 3, "{r}");
        let rows = |r: &serde_json::Value| r["softmax_rows_per_key"].as_f64().unwrap();
        // The non-incremental selection recomputes the window's normalisers at every key: on
        // a vocabulary this small that is more rows than the full softmax.
        if extra[1] != "vs" {
            assert!(rows(&r) < rows(&full.2), "{extra:?}: {r}");
        }
    }
    // A tail estimate that was not fitted, or one with another sample size: named, with the fix.
    let refused = |extra: &[&str]| {
        let mut args = vec!["ime", "eval", "--data", data, "--model", p];
        args.extend_from_slice(extra);
        let (ok, _, err) = cli(&args);
        assert!(!ok, "{extra:?} ran");
        err
    };
    let err = refused(&["--softmax", "ivs", "--samples", "4", "--tail"]);
    assert!(
        err.contains("tail-4.json") && err.contains("fit-tail"),
        "{err}"
    );
    let err = refused(&["--softmax", "full", "--tail"]);
    assert!(err.contains("--softmax ivs|vs"), "{err}");
    let err = refused(&["--softmax", "ivs", "--with-kn3"]);
    assert!(err.contains("without --with-kn3"), "{err}");

    // The unigram adaptation: packed with word frequencies where 転機 is common and 天気 rare
    // (the reverse of the training text), てんき converts to 転機; --no-adapt scores as trained.
    let freq = dir.path().join("wordfreq.tsv");
    std::fs::write(&freq, "は\t150\n転機\t300\n今日\t350\n天気\t700\n").unwrap();
    let (f, adapted) = (freq.to_str().unwrap(), dir.path().join("adapted"));
    let a = adapted.to_str().unwrap();
    let args = [
        "ime", "pack", "--model", r, "--data", data, "--out", a, "--adapt", f,
    ];
    let (ok, out, err) = cli(&[&args[..], &["--adapt-beta", "3"]].concat());
    assert!(ok, "{err}");
    assert!(
        out.contains("unigram adaptation (β 3) over 4 displays"),
        "{out}"
    );
    assert!(adapted.join("unigram-shift.tsv.gz").exists());
    let first = |model: &str| {
        let (ok, out, err) = cli(&["ime", "convert", "--lm", "lstm", "--model", model, "てんき"]);
        assert!(ok, "{err}");
        out.lines().nth(1).unwrap_or_default().to_string()
    };
    assert!(first(a).contains("転機"), "{}", first(a));
    assert!(first(p).contains("天気"), "{}", first(p));
    let beta = |extra: &[&str]| report(a, extra)["adapt_beta"].clone();
    assert_eq!(beta(&[]), 3.0);
    assert!(beta(&["--no-adapt"]).is_null());
    // A tail estimate fitted on the adapted layer does not fit the LSTM as trained: named.
    fit_tail(a);
    let tail = ["--softmax", "ivs", "--samples", "3", "--tail"];
    assert_eq!(beta(&tail), 3.0);
    let no_adapt = ["ime", "eval", "--data", data, "--model", a, "--no-adapt"];
    let (ok, _, err) = cli(&[&no_adapt[..], &tail].concat());
    assert!(!ok && err.contains("drop --no-adapt"), "{err}");
    assert_eq!(beta(&["--adapt", f, "--adapt-beta", "0.5"]), 0.5);
    // Mixed with the trigram model, the n-gram model of the training text moves too.
    std::fs::write(dir.path().join("valid.txt"), TRAIN[4]).unwrap();
    let kn3 = [
        "ime",
        "convert",
        "--data",
        data,
        "--min-count",
        "1",
        "--lm",
        "lstm",
    ];
    let with_kn3 = [&kn3[..], &["--model", a, "--with-kn3", "てんき"]].concat();
    let (ok, out, err) = cli(&with_kn3);
    assert!(ok, "{err}");
    assert!(
        err.contains("model of the training text moved by the unigram adaptation (β 3)"),
        "{err}"
    );
    assert!(
        out.lines().nth(1).unwrap_or_default().contains("転機"),
        "{out}"
    );
    let (ok, _, err) = cli(&[&with_kn3[..], &["--no-adapt"]].concat());
    assert!(ok && !err.contains("model moved by"), "{err}");
    // The mixture's weight given instead of fitted; out of range, or without the mixture: named.
    let weight = |w: &str| report(a, &["--min-count", "1", "--with-kn3", "--lstm-weight", w]);
    let mixed = weight("0.75")["with_kn3"].as_f64().unwrap();
    assert!((mixed - 0.75).abs() < 1e-6, "{mixed}");
    for bad in [
        &["--with-kn3", "--lstm-weight", "1.5"][..],
        &["--lstm-weight", "0.5"],
    ] {
        let (ok, _, err) = cli(&[&kn3[..], &["--model", a], bad, &["てんき"]].concat());
        assert!(!ok && err.contains("--"), "{bad:?}: {err}");
        assert!(
            err.contains("from 0 to 1") || err.contains("--with-kn3"),
            "{err}"
        );
    }
    // Frequencies that are not a word list, or share no word with the training text.
    let (ok, _, err) = cli(&[&args[..], &["--adapt-beta", "NaN"]].concat());
    assert!(!ok && err.contains("--adapt-beta"), "{err}");
    std::fs::write(&freq, "猫 300\n").unwrap();
    let (ok, _, err) = cli(&args);
    assert!(
        !ok && err.contains("line 1") && err.contains("centibels"),
        "{err}"
    );
    std::fs::write(&freq, "猫\t300\n").unwrap();
    let (ok, _, err) = cli(&args);
    assert!(!ok && err.contains("no word in common"), "{err}");

    // The packed lexicon beside another model (here the f32 original).
    for f in ["manifest.json", "model.safetensors"] {
        std::fs::copy(run.join(f), packed.join(f)).unwrap();
    }
    let (ok, _, err) = cli(&["ime", "convert", "--lm", "lstm", "--model", p, "ねこ"]);
    assert!(!ok && err.contains("another language model"), "{err}");
}

#[test]
fn bad_input_gets_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    // Nothing prepared yet.
    let (ok, _, err) = ime("eval", data, &[]);
    assert!(
        !ok && err.contains("eval.tsv") && err.contains("data fetch ja"),
        "{err}"
    );
    write_fixture(dir.path());
    // The LSTM needs its model, and an IME one.
    let (ok, _, err) = ime("eval", data, &["--lm", "lstm", "--model", "/nonexistent"]);
    assert!(!ok && err.contains("manifest.json"), "{err}");
    let ptb = ["--lm", "lstm", "--model", "assets/models/ptb-small-lstm"];
    let (ok, _, err) = ime("eval", data, &ptb);
    assert!(!ok && err.contains("display/reading"), "{err}");
    // Options that do not go together.
    let (ok, _, err) = ime("eval", data, &["--with-kn3"]);
    assert!(!ok && err.contains("--lm lstm"), "{err}");
    let args = ["--lm", "lstm", "--no-trigram", "--in-domain", "x.txt"];
    let (ok, _, err) = ime("eval", data, &args);
    assert!(!ok && err.contains("--with-kn3"), "{err}");
    let (ok, _, err) = ime("eval", data, &["--adapt", "x.tsv"]);
    assert!(
        !ok && err.contains("x.tsv") && err.contains("data fetch ja"),
        "{err}"
    );
    let args = ["--lm", "lstm", "--adapt", "x.tsv", "--no-adapt"];
    let (ok, _, err) = ime("eval", data, &args);
    assert!(!ok && err.contains("--no-adapt"), "{err}");
    // Empty input.
    let (ok, _, err) = ime("convert", data, &[""]);
    assert!(!ok && err.contains("nothing to convert"), "{err}");
    // A malformed evaluation line.
    let bad = dir.path().join("bad.tsv");
    std::fs::write(&bad, "no tab here\n").unwrap();
    let (ok, _, err) = ime("eval", data, &["--eval", bad.to_str().unwrap()]);
    assert!(!ok && err.contains("bad.tsv:1"), "{err}");
    // Input outside the lexicon passes through.
    let (ok, out, err) = ime("convert", data, &["ぬabc"]);
    assert!(ok, "{err}");
    assert!(out.lines().nth(1).unwrap().contains("ぬabc"), "{out}");
}

/// `ime pack --mozc` ships Mozc's dictionary (read from MeCab's binary files) and its weights
/// in `converter.json`: its words convert with no option, `--no-mozc` leaves them out, and a
/// damaged dictionary is refused with the file named.
#[test]
fn packs_mozc_dictionary_into_the_converter() {
    use fastsoftmax_ime::mozc::fixture::{matrix, mecab_dictionary};
    use fastsoftmax_ime::mozc::Class;
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let data = dir.path().to_str().unwrap();
    let run = train_tiny_lstm(dir.path());
    let (packed, mozc) = (dir.path().join("packed"), dir.path().join("mozc"));
    let (r, p, m) = (
        run.to_str().unwrap(),
        packed.to_str().unwrap(),
        mozc.to_str().unwrap(),
    );
    // Mozc knows 犬 (いぬ), which neither the text nor ipadic.tsv holds.
    let noun = Class {
        lid: 1,
        rid: 1,
        cost: 100,
    };
    std::fs::create_dir_all(&mozc).unwrap();
    let keys: &[(&str, &[(&str, Class)])] = &[("いぬ", &[("犬", noun)]), ("ねこ", &[("猫", noun)])];
    std::fs::write(mozc.join("sys.dic"), mecab_dictionary(keys, 3)).unwrap();
    std::fs::write(mozc.join("matrix.bin"), matrix(3)).unwrap();
    let pack = ["ime", "pack", "--model", r, "--data", data, "--out", p];
    let (ok, out, err) = cli(&[&pack[..], &["--mozc", m, "--mozc-weight", "0.002"]].concat());
    assert!(ok, "{err}");
    assert!(out.contains("2 of its 2 entries"), "{out}");
    let shipped: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(packed.join("converter.json")).unwrap())
            .unwrap();
    assert_eq!(shipped["mozc"]["weight"], 0.002);
    assert!((shipped["mozc"]["spelling_share"].as_f64().unwrap() - 0.1).abs() < 1e-6);
    let first = |extra: &[&str]| {
        let args = ["ime", "convert", "--data", "/nonexistent", "--model", p];
        let (ok, out, err) = cli(&[&args[..], extra, &["いぬ"]].concat());
        assert!(ok, "{err}");
        out.lines().nth(1).unwrap_or_default().to_string()
    };
    assert!(first(&[]).contains("犬"), "{}", first(&[]));
    assert!(
        !first(&["--no-mozc"]).contains("犬"),
        "{}",
        first(&["--no-mozc"])
    );
    // The library opens the folder as the CLI does.
    let converter = fastsoftmax_ime::Converter::open(&packed).unwrap();
    assert_eq!(converter.convert("いぬ", 1).unwrap()[0].text, "犬");

    // A share outside [0, 1] in converter.json: refused, the file and the value named.
    let config = packed.join("converter.json");
    let good = std::fs::read_to_string(&config).unwrap();
    let mut bad = shipped.clone();
    bad["mozc"]["spelling_share"] = serde_json::json!(1.5);
    std::fs::write(&config, bad.to_string()).unwrap();
    let convert = [
        "ime",
        "convert",
        "--data",
        "/nonexistent",
        "--model",
        p,
        "いぬ",
    ];
    let (ok, _, err) = cli(&convert);
    assert!(
        !ok && err.contains("converter.json") && err.contains("spelling share 1.5"),
        "{err}"
    );
    std::fs::write(&config, good).unwrap();

    // A damaged copy: the file is named.
    let entries = packed.join("mozc.dic.gz");
    let bytes = std::fs::read(&entries).unwrap();
    std::fs::write(&entries, &bytes[..bytes.len() / 2]).unwrap();
    let (ok, _, err) = cli(&convert);
    assert!(!ok && err.contains("mozc.dic.gz"), "{err}");
    // A dictionary whose POS ids do not fit its matrix.
    std::fs::write(mozc.join("matrix.bin"), matrix(2)).unwrap();
    let (ok, _, err) = cli(&[&pack[..], &["--mozc", m]].concat());
    assert!(
        !ok && err.contains("sys.dic") && err.contains("different"),
        "{err}"
    );
}

/// `ime pack --trigram` ships a trigram model beside the LSTM: `converter.json` names its weight,
/// `ime convert` and `Converter::open` score with it (the same best candidate and score),
/// `--no-trigram` leaves it out, a damaged file is refused with its name, and a pack without
/// it removes the old one.
#[test]
fn packs_a_trigram_model_beside_the_lstm() {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let data = dir.path().to_str().unwrap();
    let run = train_tiny_lstm(dir.path());
    let packed = dir.path().join("packed");
    let train = dir.path().join("train.txt");
    let (r, p, t) = (
        run.to_str().unwrap(),
        packed.to_str().unwrap(),
        train.to_str().unwrap(),
    );
    let pack = ["ime", "pack", "--model", r, "--data", data, "--out", p];
    let with = ["--trigram", t, "--trigram-weight", "0.5"];
    let (ok, out, err) = cli(&[&pack[..], &with[..]].concat());
    assert!(ok, "{err}");
    assert!(out.contains("trigram.bin.gz"), "{out}");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(packed.join("converter.json")).unwrap())
            .unwrap();
    assert_eq!(config["trigram"], 0.5);

    let reading = "きょうはいいてんきですね";
    let best = |extra: &[&str]| {
        let args = ["ime", "convert", "--data", "/nonexistent", "--model", p];
        let (ok, out, err) = cli(&[&args[..], extra, &[reading]].concat());
        assert!(ok, "{err}");
        out.lines().nth(1).unwrap_or_default().to_string()
    };
    let converter = fastsoftmax_ime::Converter::open(&packed).unwrap();
    assert!(converter.trigram.is_some());
    let first = converter.convert(reading, 1).unwrap().remove(0);
    let shown = best(&[]);
    assert!(
        shown.contains(&first.text) && shown.contains(&format!("({:.2})", first.score)),
        "{shown} vs {first:?}"
    );
    // Without the trigram model the same path scores differently.
    let without = best(&["--no-trigram"]);
    assert_ne!(without, shown);

    // A damaged model: the file is named.
    std::fs::write(packed.join("trigram.bin.gz"), b"junk").unwrap();
    let args = [
        "ime",
        "convert",
        "--data",
        "/nonexistent",
        "--model",
        p,
        reading,
    ];
    let (ok, _, err) = cli(&args);
    assert!(!ok && err.contains("trigram.bin.gz"), "{err}");
    assert!(fastsoftmax_ime::Converter::open(&packed).is_err());

    // Packed again without it: no trigram model is left to pair with the new LSTM.
    let (ok, _, err) = cli(&pack);
    assert!(ok, "{err}");
    assert!(!packed.join("trigram.bin.gz").exists());
    let config = std::fs::read_to_string(packed.join("converter.json")).unwrap();
    assert!(!config.contains("trigram"), "{config}");
}
