//! The shipped artifacts prove their integrity: every data file's SHA-256 is recorded in its
//! manifest, `fastsoftmax verify` says so, and a byte flipped inside the weights of any of them
//! is refused with an error that names the file.

use std::path::{Path, PathBuf};
use std::process::Command;

use fastsoftmax_infer::heads::{self, format};
use fastsoftmax_infer::model::artifact::WEIGHTS_FILE;
use fastsoftmax_infer::LanguageModel;

const MODELS: [&str; 3] = [
    "assets/models/ptb-small-lstm",
    "assets/models/ptb-small-gru",
    IME,
];

/// The Japanese converter: the LSTM (4-bit vocabulary rows) and its lexicon.
const IME: &str = "assets/models/ime-ja";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Copies a directory tree (the shipped model with its heads) into `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// The translators, both int8 with their vocabulary map inside: English → German (with its L2S
/// head) and Japanese → English, each with a sentence of its source language.
const TRANSLATORS: [(&str, &str); 2] = [
    (
        "assets/models/bible-en-de-tiny",
        "In the beginning was the Word.",
    ),
    ("assets/models/ja-en-tiny", "駅はどこですか？"),
];

#[test]
fn every_shipped_file_is_verified() {
    for model in MODELS.into_iter().chain(TRANSLATORS.map(|t| t.0)) {
        let out = Command::new(env!("CARGO_BIN_EXE_fastsoftmax"))
            .args(["verify", "--json", "--model"])
            .arg(root().join(model))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{model}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: Vec<serde_json::Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(!rows.is_empty());
        for r in rows {
            assert_eq!(r["status"], "verified", "{model}: {r}");
        }
    }
}

#[test]
fn a_byte_flipped_in_any_shipped_weights_file_is_refused() {
    for model in MODELS {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&root().join(model), dir.path());
        let m = dir.path();
        let lm = LanguageModel::load(m).unwrap();
        // (file, loader): the model's weights, then each head's data files.
        let mut cases: Vec<(PathBuf, Option<String>)> = vec![(m.join(WEIGHTS_FILE), None)];
        for (name, kind) in heads::trained(m) {
            for file in format::data_files(&kind) {
                cases.push((m.join("heads").join(&name).join(file), Some(name.clone())));
            }
        }
        for (path, head) in cases {
            let original = std::fs::read(&path).unwrap();
            let mut flipped = original.clone();
            flipped[original.len() / 2] ^= 0x10;
            std::fs::write(&path, &flipped).unwrap();
            let err = match &head {
                None => LanguageModel::load(m).map(|_| ()).unwrap_err(),
                Some(name) => heads::load(name, m, &lm).map(|_| ()).unwrap_err(),
            }
            .to_string();
            assert!(
                err.starts_with(&path.display().to_string()) && err.contains("SHA-256"),
                "{}: {err}",
                path.display()
            );
            std::fs::write(&path, &original).unwrap();
        }
        for (name, _) in heads::trained(m) {
            heads::load(&name, m, &lm).unwrap();
        }
    }
}

/// The shipped translators load with their digests checked and translate (with their maps by
/// default, the Japanese one from raw text; the English one with its L2S head too); a flipped
/// byte in the weights is refused with an error that names the file.
#[test]
fn shipped_translators_are_verified_and_serve() {
    use fastsoftmax_translate::artifact::Precision;
    use fastsoftmax_translate::{Profile, Screen, SearchOptions, Translator};
    for (model, sentence) in TRANSLATORS {
        let dir = root().join(model);
        let engine = Translator::load(&dir).unwrap();
        let out = engine
            .translate(
                &[sentence, ""],
                &SearchOptions::default(),
                &mut Profile::default(),
            )
            .unwrap();
        let text = &out[0][0].text;
        assert!(!text.is_empty() && out[1][0].text.is_empty(), "{model}");
        assert_eq!(engine.precision(), Precision::Int8, "{model}");
        assert!(engine.vocab_map().is_some(), "{model} serves its map");
        if model.contains("ja-en") {
            assert!(
                text.is_ascii() && text.contains("station"),
                "{model}: {sentence} → {text}"
            );
        } else {
            assert!(
                text.contains("Anfang") && text.contains("Wort"),
                "{sentence} → {text}"
            );
            // The L2S head `quantize` carried over serves in place of the map.
            let mut engine = engine;
            let screen = Screen::load(&engine, &dir, "l2s").unwrap();
            engine.set_vocab_map(None);
            engine.set_screen(Some(screen));
            let out = engine
                .translate(
                    &[sentence],
                    &SearchOptions::default(),
                    &mut Profile::default(),
                )
                .unwrap();
            let with_head = &out[0][0].text;
            assert!(
                with_head.contains("Anfang") && with_head.contains("Wort"),
                "{sentence} → {with_head} with its L2S head"
            );
        }
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&dir, tmp.path());
        let weights = tmp.path().join("model.safetensors");
        let mut bytes = std::fs::read(&weights).unwrap();
        let i = bytes.len() / 2;
        bytes[i] ^= 0x10;
        std::fs::write(&weights, bytes).unwrap();
        let err = Translator::load(tmp.path())
            .err()
            .expect("a changed byte is refused")
            .to_string();
        assert!(err.contains("model.safetensors"), "{err}");
        let out = Command::new(env!("CARGO_BIN_EXE_fastsoftmax"))
            .args(["verify", "--json", "--model"])
            .arg(tmp.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !out.status.success() && stdout.contains("\"differs\""),
            "{stdout}"
        );
    }
}

/// Latin names inside Japanese reach the shipped Japanese → English translator through a
/// stand-in it reads (the corpus holds almost no Latin text, so it cannot read them itself) and
/// come out as written; without it, `John` came out as `The flight` and `iPhone` made the
/// decoder loop to its length limit. Emoji, long numbers, years and months likewise.
#[test]
fn latin_names_emoji_and_numbers_in_japanese_come_through() {
    use fastsoftmax_translate::{Profile, SearchOptions, Translator};
    let engine = Translator::load(&root().join("assets/models/ja-en-tiny")).unwrap();
    let translate = |lines: &[&str]| -> Vec<String> {
        let out = engine
            .translate(lines, &SearchOptions::default(), &mut Profile::default())
            .unwrap();
        out.into_iter().map(|t| t[0].text.clone()).collect()
    };
    let lines = [
        "Johnは医者です。",
        "iPhoneを買いました。",
        "New Yorkに住んでいます。",
        "ＰＴＡの会議です。",
        "CDを買った。",
    ];
    let text = translate(&lines);
    for (want, got) in ["John", "iPhone", "New York", "PTA", "CD"]
        .iter()
        .zip(&text)
    {
        assert!(got.contains(want) && got.split(' ').count() < 8, "{text:?}");
    }
    assert!(!text.iter().any(|t| t.contains("Ken")), "{text:?}");
    // Emoji the tokenizer has no piece for: kept at the edges, through a stand-in inside.
    let text = translate(&["ありがとう😀", "😀", "これはΩです。"]);
    assert!(
        text[0].starts_with("Thank") && text[0].ends_with(" 😀"),
        "{text:?}"
    );
    assert_eq!(text[1], "😀");
    assert!(text[2].contains('Ω'), "{text:?}");
    // Numbers it would misread (1,500 → "500", 1952 → "1939", 11月 → "September", 17 →
    // "seven", 1400万 → "five thousand yen", whole dates, clock times) come through.
    let text = translate(&[
        "価格は1,500円です。",
        "国連のビルは1952年に建てられた。",
        "11月30日に会いましょう。",
        "2026年12月1日は月曜日です。",
        "11月に会いましょう。",
        "彼女は17歳だ。",
        "7時45分の電車に乗った。",
        "午後3時に来てください。",
        "東京の人口は約1400万人です。",
    ]);
    assert!(text[0].contains("1,500 yen"), "{text:?}");
    assert!(
        text[1].contains("1952") && !text[1].contains("1939"),
        "{text:?}"
    );
    assert!(text[2].contains("November 30"), "{text:?}");
    assert!(
        text[3].contains("December 1, 2026") && text[3].contains("Monday"),
        "{text:?}"
    );
    assert!(text[4].contains("November"), "{text:?}");
    assert!(text[5].contains("17 years"), "{text:?}");
    assert!(text[6].contains("7:45"), "{text:?}");
    // "3 p.m." ends the sentence with its own period.
    assert!(text[7].ends_with("3 p.m."), "{text:?}");
    assert!(text[8].contains("14 million"), "{text:?}");
    // A version belongs to its name; a sign it would drop stands in with its number; and a
    // number whose stand-in it drops (500 here: "five degrees") is tried with the next (200).
    let text = translate(&[
        "iPhone 15を買った。",
        "Windows 11を使っている。",
        "気温は-5度まで下がった。",
        "気温はマイナス5度まで下がった。",
        "気温は35度まで下がった。",
        "1時間半待った。",
        "2時間15分勉強した。",
    ]);
    assert!(text[0].contains("iPhone 15"), "{text:?}");
    assert!(text[1].contains("Windows 11"), "{text:?}");
    assert!(text[2].contains("-5 degrees"), "{text:?}");
    assert!(text[3].contains("-5 degrees"), "{text:?}");
    assert!(text[4].contains("35 degrees"), "{text:?}");
    // Durations it misread ("half an hour", "fifteen minutes").
    assert!(text[5].contains("1.5 hours"), "{text:?}");
    assert!(text[6].contains("2 hours and 15 minutes"), "{text:?}");
    // A line of a number or a name alone is written as it is, not made into a sentence
    // ("123 yen is 123.").
    let text = translate(&["123", "iPhone 15", "100", "11月30日。"]);
    assert_eq!(text, ["123", "iPhone 15", "100", "November 30."]);
    let src = engine.source(lines[1], 100);
    assert_eq!(src.masked.placeholders.len(), 1);
    assert_eq!(src.masked.placeholders[0].output, "iPhone");
    assert!(
        engine.source(lines[4], 100).masked.placeholders.is_empty(),
        "CD is a word it knows"
    );
}

/// The shipped converter loads, converts typed kana with the LSTM and the full softmax, and a
/// corrupted lexicon or unigram shift is refused.
#[test]
fn shipped_converter_converts_and_refuses_a_corrupt_lexicon() {
    use fastsoftmax_ime::model::LEXICON_FILE;
    use fastsoftmax_ime::{Decoder, ImeModel, Lattice, LstmScorer, Romaji};
    let dir = root().join(IME);
    let m = ImeModel::load(&dir).unwrap();
    let mut scorer = LstmScorer::new(&m.lm).unwrap();
    let lattice = Lattice::with_katakana(12);
    let mut dec = Decoder::with_lattice(&mut scorer, 10, m.spelling.clone(), lattice);
    for c in Romaji::convert("kyouhaiitenkidesu").chars() {
        dec.push(c, &m.lexicon, &mut scorer);
    }
    let best = dec.n_best(10, &m.lexicon, &mut scorer);
    assert_eq!(best[0].text, "今日はいい天気です", "{best:?}");

    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&dir, tmp.path());
    let lexicon = tmp.path().join(LEXICON_FILE);
    let mut bytes = std::fs::read(&lexicon).unwrap();
    let i = bytes.len() / 2;
    bytes[i] ^= 0x10;
    std::fs::write(&lexicon, bytes).unwrap();
    let err = ImeModel::load(tmp.path()).err().unwrap().to_string();
    assert!(err.contains(LEXICON_FILE), "{err}");

    // It carries its unigram adaptation toward contemporary frequencies; a corrupt shift file
    // is refused, not skipped.
    use fastsoftmax_ime::adapt::SHIFT_FILE;
    assert_eq!(m.shift.as_ref().map(|s| s.beta()), Some(0.6));
    copy_tree(&dir, tmp.path());
    let shift = tmp.path().join(SHIFT_FILE);
    let mut bytes = std::fs::read(&shift).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&shift, bytes).unwrap();
    let err = ImeModel::load(tmp.path()).err().unwrap().to_string();
    assert!(err.contains(SHIFT_FILE), "{err}");
}

/// An app gets what the CLI runs: `Converter::open` on the shipped folder (Mozc's dictionary,
/// incremental vocabulary selection with the tail estimate, the trigram model, the weights of
/// its `converter.json`) gives `ime convert`'s candidates, and a session types into it.
#[test]
fn the_library_converter_is_the_cli_converter() {
    let dir = root().join(IME);
    let conv = fastsoftmax_ime::Converter::open(&dir).unwrap();
    assert!(
        conv.config.mozc.is_some() && conv.config.tail && conv.trigram.is_some(),
        "{:?}",
        conv.config
    );
    for kana in [
        "きょうはいいてんきですね",
        "わたしはがくせいです",
        "ぐーぐるでけんさく",
    ] {
        let lib: Vec<String> = conv
            .convert(kana, 5)
            .unwrap()
            .into_iter()
            .map(|c| c.text)
            .collect();
        let out = Command::new(env!("CARGO_BIN_EXE_fastsoftmax"))
            .args(["ime", "convert", "-n", "5", "--model"])
            .arg(&dir)
            .arg(kana)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cli: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(1)
            .filter_map(|l| l.trim_start().split_once(". "))
            .filter_map(|(_, rest)| rest.split_once("  (").map(|(text, _)| text.to_string()))
            .collect();
        assert_eq!(lib, cli, "{kana}");
    }
    let mut session = conv.session(9).unwrap();
    for key in "kyouhaiitenkidesune".chars() {
        session.key(key);
    }
    assert_eq!(session.candidates()[0].text, "今日はいい天気ですね");
}
