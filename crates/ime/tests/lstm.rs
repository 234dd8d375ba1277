//! The LSTM scorer and the converter folder on a tiny seeded model (fixture weights: these tests
//! check the arithmetic and the plumbing, not the conversions' quality).

use fastsoftmax_ime::{Decoder, Lexicon, LstmScorer, Scorer, Spelling};
mod common;

use fastsoftmax_infer::model::artifact::LmWeights;
use fastsoftmax_infer::{LanguageModel, Vocab};

fn model() -> LanguageModel {
    LanguageModel::from_weights(weights()).unwrap()
}

fn weights() -> LmWeights {
    common::lstm_weights(common::WORDS.iter().map(|s| s.to_string()).collect(), 8)
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

/// Advancing states as one batch equals stepping each (the beam's batched LSTM step), and a
/// batch with a word outside the vocabulary or a missing state is refused.
#[test]
fn batched_steps_equal_single_steps() {
    let lm = model();
    let mut states = vec![lm.new_state(); 3];
    for (i, s) in states.iter_mut().enumerate() {
        for w in 0..=i as u32 {
            lm.step(w, s).unwrap();
        }
    }
    let words = [4u32, 0, 2];
    let mut batched = states.clone();
    lm.step_batch(&words, &mut batched).unwrap();
    for ((s, w), b) in states.iter_mut().zip(words).zip(&batched) {
        lm.step(w, s).unwrap();
        for (x, y) in s.context().iter().zip(b.context()) {
            assert!((x - y).abs() < 1e-5, "{x} against {y}");
        }
    }
    assert!(lm.step_batch(&[0, 99], &mut batched[..2]).is_err());
    assert!(lm.step_batch(&[0], &mut batched).is_err());
    lm.step_batch(&[], &mut []).unwrap();
}
