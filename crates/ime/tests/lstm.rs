//! The LSTM scorer and the converter folder on a tiny seeded model (fixture weights: these tests
//! check the arithmetic and the plumbing, not the conversions' quality).

use fastsoftmax_ime::{Decoder, Lexicon, LstmScorer, Scorer, Spelling};
use fastsoftmax_infer::model::artifact::{Cell, LmSpec, LmWeights, RecurrentWeights};
use fastsoftmax_infer::{LanguageModel, Vocab};

const WORDS: &[&str] = &[
    "今日/きょう",
    "京/きょう",
    "は/は",
    "葉/は",
    "いい/いい",
    "良い/いい",
];

fn model() -> LanguageModel {
    LanguageModel::from_weights(weights()).unwrap()
}

fn weights() -> LmWeights {
    let words: Vec<String> = WORDS.iter().map(|s| s.to_string()).collect();
    let vocab = Vocab::from_words(words).unwrap();
    let (v, d) = (vocab.len(), 8usize);
    let vals = |n: usize, s: f32| {
        (0..n)
            .map(|i| ((i as f32 * 0.37 + s).sin()) * 0.5)
            .collect::<Vec<_>>()
    };
    LmWeights {
        spec: LmSpec {
            cell: Cell::Lstm,
            vocab_size: v,
            d_embed: d,
            d_hidden: d,
            n_layers: 1,
            tied: true,
        },
        vocab,
        embedding: vals(v * d, 0.1),
        layers: vec![RecurrentWeights {
            w_ih: vals(4 * d * d, 0.2),
            w_hh: vals(4 * d * d, 0.3),
            b_ih: vals(4 * d, 0.4),
            b_hh: vals(4 * d, 0.5),
        }],
        output_weight: None,
        output_bias: vals(v, 0.7),
    }
}

/// `log_softmax` of the full head's logits at `state`, computed directly.
fn reference(lm: &LanguageModel, h: &[f32]) -> Vec<f32> {
    let mut logits = vec![0.0; lm.vocab().len()];
    lm.full_head().logits_into(h, &mut logits);
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    let z = max + logits.iter().map(|x| (x - max).exp()).sum::<f32>().ln();
    logits.iter().map(|x| x - z).collect()
}

#[test]
fn log_probs_are_the_full_log_softmax() {
    let lm = model();
    let mut s = LstmScorer::new(&lm).unwrap();
    let all: Vec<u32> = (0..lm.vocab().len() as u32).collect();
    let mut got = vec![0.0; all.len()];
    let start = s.initial();
    s.log_probs(&start, &all, &mut got);
    let total: f32 = got.iter().map(|x| x.exp()).sum();
    assert!((total - 1.0).abs() < 1e-4, "{total}");
    // The same state by hand: zeros, then `<eos>`.
    let mut by_hand = lm.new_state();
    lm.step(lm.vocab().get("<eos>").unwrap(), &mut by_hand)
        .unwrap();
    for (g, r) in got.iter().zip(reference(&lm, by_hand.context())) {
        assert!((g - r).abs() < 1e-4, "{g} against {r}");
    }
    // Advancing two states at once equals stepping each.
    let next = s.advance(&[(&start, 2), (&start, 4)]);
    for (n, w) in next.iter().zip([2u32, 4]) {
        let mut h = by_hand.clone();
        lm.step(w, &mut h).unwrap();
        s.log_probs(n, &all, &mut got);
        for (g, r) in got.iter().zip(reference(&lm, h.context())) {
            assert!((g - r).abs() < 1e-4);
        }
    }
    assert!(s.timers.softmax > std::time::Duration::ZERO);
}

#[test]
fn decodes_every_kana_with_the_lstm() {
    let lm = model();
    let spelling = Spelling::estimate(lm.vocab().get("<unk>").unwrap(), [("猫", 3u64)]);
    let lex = Lexicon::build(lm.vocab().words(), [("ねこ", "猫", 3)], &spelling);
    let mut s = LstmScorer::new(&lm).unwrap();
    let mut dec = Decoder::new(&mut s, 10, spelling);
    for c in "きょうはねこ".chars() {
        dec.push(c, &lex, &mut s);
    }
    let best = dec.n_best(10, &lex, &mut s);
    assert!(!best.is_empty());
    for c in &best {
        let read: String = c.words.iter().map(|(_, r)| r.as_str()).collect();
        assert_eq!(read, "きょうはねこ");
    }
    assert!(best.iter().any(|c| c.text == "今日は猫"), "{best:?}");
}

/// A converter folder round-trips its lexicon, converts like the parts it was built from, and
/// refuses a lexicon beside other weights, a corrupt lexicon, and a model that is not an IME's.
#[test]
fn converter_folder_round_trips_and_refuses_mismatches() {
    use fastsoftmax_ime::model::{read_lexicon, write_lexicon, LEXICON_FILE};
    use fastsoftmax_ime::ImeModel;
    let dir = tempfile::tempdir().unwrap();
    weights().save_int8(dir.path()).unwrap();
    let extra = vec![
        ("ねこ".to_string(), "猫".to_string(), 3),
        ("ねこ".to_string(), "ネコ".to_string(), 0),
    ];
    write_lexicon(dir.path(), &extra).unwrap();
    assert_eq!(read_lexicon(dir.path()).unwrap(), extra);
    let m = ImeModel::load(dir.path()).unwrap();
    assert_eq!(m.lexicon.lookup("ねこ").count(), 2);
    assert!(m.lexicon.lookup("きょう").count() == 2);
    // The seen word outranks the dictionary-only one of the same reading.
    let score = |d: &str| {
        m.lexicon
            .lookup("ねこ")
            .find(|(_, w)| w.display == d)
            .unwrap()
            .1
            .extra
    };
    assert!(score("猫") > score("ネコ"));
    let mut s = LstmScorer::new(&m.lm).unwrap();
    let mut dec = Decoder::new(&mut s, 10, m.spelling.clone());
    for c in "きょうはねこ".chars() {
        dec.push(c, &m.lexicon, &mut s);
    }
    assert!(dec
        .n_best(10, &m.lexicon, &mut s)
        .iter()
        .any(|c| c.text == "今日は猫"));

    // Other weights under the same lexicon: refused, naming the fix.
    let mut other = weights();
    other.output_bias[0] += 1.0;
    other.save_int8(dir.path()).unwrap();
    let err = ImeModel::load(dir.path()).err().unwrap().to_string();
    assert!(
        err.contains("another language model") && err.contains("ime pack"),
        "{err}"
    );

    // A corrupt lexicon line, and a file that is not gzip.
    write_lexicon(dir.path(), &extra).unwrap();
    let gz = std::fs::read(dir.path().join(LEXICON_FILE)).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut text).unwrap();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, format!("{text}ねこ\t猫\tmany\n").as_bytes()).unwrap();
    std::fs::write(dir.path().join(LEXICON_FILE), enc.finish().unwrap()).unwrap();
    let err = ImeModel::load(dir.path()).err().unwrap().to_string();
    assert!(
        err.contains("line 4") && err.contains("reading<TAB>display<TAB>count"),
        "{err}"
    );
    std::fs::write(dir.path().join(LEXICON_FILE), "plain text").unwrap();
    assert!(ImeModel::load(dir.path()).is_err());

    // A language model whose words are not `display/reading`.
    let mut plain = weights();
    plain.vocab = Vocab::from_words((0..6).map(|i| format!("w{i}")).collect()).unwrap();
    let err = ImeModel::new(LanguageModel::from_weights(plain).unwrap(), &extra)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not an IME language model"), "{err}");
}
