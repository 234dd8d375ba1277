//! Incremental vocabulary selection on a small seeded LSTM (fixture weights: these tests check
//! the arithmetic against the full softmax, not the conversions' quality).

use fastsoftmax_ime::{
    Candidate, Decoder, IvsScorer, Lexicon, LstmScorer, Options, Repair, Sample, Scorer, Session,
    Spelling,
};
mod common;

use fastsoftmax_infer::LanguageModel;

const INPUT: &str = "きょうはいいてんきです";

/// 60 words: real ones, then readings cut from the input with made-up displays, so the lattice
/// holds many words at every kana and the selection grows key by key.
fn model() -> LanguageModel {
    let mut words: Vec<String> = common::WORDS
        .iter()
        .chain(&["天気/てんき", "です/です"])
        .map(|s| s.to_string())
        .collect();
    let kana: Vec<char> = INPUT.chars().collect();
    let mut i = 0;
    while words.len() < 60 {
        let (start, len) = (i * 7 % kana.len(), 1 + i % 3);
        if start + len <= kana.len() {
            let reading: String = kana[start..start + len].iter().collect();
            words.push(format!("w{i}/{reading}"));
        }
        i += 1;
    }
    LanguageModel::from_weights(common::lstm_weights(words, 16)).unwrap()
}

fn lexicon(lm: &LanguageModel) -> (Lexicon, Spelling) {
    let spelling = Spelling::estimate(lm.vocab().get("<unk>").unwrap(), [("猫", 3u64)]);
    let lex = Lexicon::build(lm.vocab().words(), [("ねこ", "猫", 3)], &spelling);
    (lex, spelling)
}

fn convert<S: Scorer>(
    s: &mut S,
    lex: &Lexicon,
    spelling: &Spelling,
    input: &str,
) -> Vec<Candidate> {
    let mut dec = Decoder::new(s, 10, spelling.clone());
    for c in input.chars() {
        dec.push(c, lex, s);
    }
    dec.n_best(10, lex, s)
}

fn assert_same(a: &[Candidate], b: &[Candidate], tol: f32) {
    assert_eq!(a.len(), b.len(), "{a:?}\n{b:?}");
    for (x, y) in a.iter().zip(b) {
        assert_eq!((&x.text, &x.words), (&y.text, &y.words));
        assert!(
            (x.score - y.score).abs() < tol,
            "{} against {}",
            x.score,
            y.score
        );
    }
}

/// With the whole vocabulary selected up front, the selection is the full softmax.
#[test]
fn selecting_every_word_is_the_full_softmax() {
    let lm = model();
    let (lex, spelling) = lexicon(&lm);
    let full = convert(&mut LstmScorer::new(&lm).unwrap(), &lex, &spelling, INPUT);
    let mut ivs = IvsScorer::new(&lm, Sample::Top(lm.vocab().len()), Repair::Incremental).unwrap();
    let all = convert(&mut ivs, &lex, &spelling, INPUT);
    assert_eq!(ivs.selected(), lm.vocab().len());
    assert_same(&full, &all, 1e-4);
}

/// The incremental repair gives the normalisers that recomputing them at every key gives, for
/// fewer rows; each live context's probabilities over the selection sum to one.
#[test]
fn incremental_repair_equals_recomputing_and_normalises_the_selection() {
    let lm = model();
    let (lex, spelling) = lexicon(&lm);
    let mut inc = IvsScorer::new(&lm, Sample::Top(3), Repair::Incremental).unwrap();
    let mut scratch = IvsScorer::new(&lm, Sample::Top(3), Repair::FromScratch).unwrap();
    // Half the input: its lattice holds part of the vocabulary.
    let input = "きょうはい";
    let a = convert(&mut inc, &lex, &spelling, input);
    let b = convert(&mut scratch, &lex, &spelling, input);
    assert_same(&a, &b, 1e-4);
    assert!(
        inc.normaliser_rows < scratch.normaliser_rows,
        "{} against {}",
        inc.normaliser_rows,
        scratch.normaliser_rows
    );
    // Fewer words than the vocabulary, so the normalisers are not the full ones.
    assert!(inc.selected() < lm.vocab().len());
    let full = convert(&mut LstmScorer::new(&lm).unwrap(), &lex, &spelling, input);
    assert!(a
        .iter()
        .zip(&full)
        .any(|(x, y)| (x.score - y.score).abs() > 1e-3));

    // Σ p over the selection ({<eos>, <unk>} and the words selected) is 1, after the start
    // state's normaliser is repaired for a key's words.
    let mut s = IvsScorer::new(&lm, Sample::None, Repair::Incremental).unwrap();
    let start = s.initial();
    let words = [0u32, 3, 7, 20, 3];
    assert!(s.select(1, &words, &[&start]));
    assert_eq!(s.selected(), 2 + 4);
    let mut selection = vec![lm.vocab().eos(), lm.vocab().unk(), 0, 3, 7, 20];
    let mut lp = vec![0.0; selection.len()];
    s.log_probs(&start, &selection, &mut lp);
    let total: f32 = lp.iter().map(|x| x.exp()).sum();
    assert!((total - 1.0).abs() < 1e-5, "{total}");
    // A second key: the repaired normaliser covers its words too.
    assert!(s.select(2, &[41], &[&start]));
    selection.push(41);
    lp.push(0.0);
    s.log_probs(&start, &selection, &mut lp);
    let total: f32 = lp.iter().map(|x| x.exp()).sum();
    assert!((total - 1.0).abs() < 1e-5, "{total}");
}

/// Backspace rolls the selection and the normalisers back: the n-best equal typing the shorter
/// input from the start.
#[test]
fn backspace_rolls_the_selection_back() {
    let lm = model();
    let (lex, spelling) = lexicon(&lm);
    for repair in [Repair::Incremental, Repair::FromScratch] {
        let mut s = IvsScorer::new(&lm, Sample::Uniform { n: 5, seed: 3 }, repair).unwrap();
        let mut dec = Decoder::new(&mut s, 10, spelling.clone());
        for c in INPUT.chars() {
            dec.push(c, &lex, &mut s);
        }
        for _ in 0..3 {
            dec.pop(&lex, &mut s);
        }
        let after = dec.n_best(10, &lex, &mut s);
        // Then type a different ending, which selects other words for the same key numbers.
        for c in "ねこ".chars() {
            dec.push(c, &lex, &mut s);
        }
        let other = dec.n_best(10, &lex, &mut s);
        let mut fresh = IvsScorer::new(&lm, Sample::Uniform { n: 5, seed: 3 }, repair).unwrap();
        let short: String = INPUT.chars().take(INPUT.chars().count() - 3).collect();
        assert_same(&after, &convert(&mut fresh, &lex, &spelling, &short), 1e-4);
        let mut fresh = IvsScorer::new(&lm, Sample::Uniform { n: 5, seed: 3 }, repair).unwrap();
        let typed = format!("{short}ねこ");
        assert_same(&other, &convert(&mut fresh, &lex, &spelling, &typed), 1e-4);
    }
}

/// A 500-kana input converts in full, and the normaliser work per key stays bounded: only the
/// last frames are repaired, so the last 100 keys cost no more rows than keys 100–200.
#[test]
fn a_long_input_keeps_the_work_per_key_bounded() {
    let lm = model();
    let (lex, spelling) = lexicon(&lm);
    let kana: String = INPUT.chars().cycle().take(500).collect();
    let mut s = IvsScorer::new(&lm, Sample::Top(4), Repair::Incremental).unwrap();
    let mut dec = Decoder::new(&mut s, 10, spelling.clone());
    let mut rows = Vec::new();
    for c in kana.chars() {
        let before = s.normaliser_rows;
        dec.push(c, &lex, &mut s);
        rows.push(s.normaliser_rows - before);
    }
    let best = dec.n_best(10, &lex, &mut s);
    let read: String = best[0].words.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(read, kana);
    let block = |a: usize| rows[a..a + 100].iter().sum::<u64>();
    assert!(
        block(400) <= block(100),
        "{} against {}",
        block(400),
        block(100)
    );
}

/// Typing `first`, committing its best conversion, then typing `then`: the candidates.
fn after_commit<S: Scorer>(
    s: S,
    lex: &Lexicon,
    spelling: &Spelling,
    first: &str,
    then: &str,
) -> Vec<Candidate> {
    let mut session = Session::new(
        s,
        lex,
        spelling.clone(),
        Options {
            n_best: 10,
            katakana: 0,
            ..Default::default()
        },
    );
    for c in first.chars() {
        session.key(c);
    }
    assert!(session.commit(0).is_some());
    for c in then.chars() {
        session.key(c);
    }
    session.candidates().to_vec()
}

/// The committed text's state starts the next input; its normaliser covers the old selection,
/// which the next key drops: it must be repaired over the new one.
#[test]
fn a_committed_context_is_renormalised_over_the_next_selection() {
    let lm = model();
    let (lex, spelling) = lexicon(&lm);
    let (first, then) = ("きょうは", "いいてんきです");
    let full = after_commit(LstmScorer::new(&lm).unwrap(), &lex, &spelling, first, then);
    let all = IvsScorer::new(&lm, Sample::Top(lm.vocab().len()), Repair::Incremental).unwrap();
    assert_same(
        &full,
        &after_commit(all, &lex, &spelling, first, then),
        1e-3,
    );
    let inc = IvsScorer::new(&lm, Sample::Top(3), Repair::Incremental).unwrap();
    let scratch = IvsScorer::new(&lm, Sample::Top(3), Repair::FromScratch).unwrap();
    assert_same(
        &after_commit(inc, &lex, &spelling, first, then),
        &after_commit(scratch, &lex, &spelling, first, then),
        1e-3,
    );
}

/// With nothing typed, the next word comes from the fixed sample's logits the state holds
/// already: the sample's best words by the full softmax's order, `<eos>` and `<unk>` left out;
/// taking one carries the context as typing and committing it would.
#[test]
fn the_next_word_is_predicted_from_the_fixed_sample() {
    let lm = model();
    let (lex, spelling) = lexicon(&lm);
    let top = 12;
    let ivs = IvsScorer::new(&lm, Sample::Top(top), Repair::Incremental).unwrap();
    let mut session = Session::new(ivs, &lex, spelling.clone(), Options::default());
    session.commit_words(&[
        ("今日".to_string(), "きょう".to_string()),
        ("は".to_string(), "は".to_string()),
    ]);
    let offered = session.suggestions(3);
    assert_eq!(offered.len(), 3);
    // The full softmax after the same text, over the sample's words.
    let mut full = LstmScorer::new(&lm).unwrap();
    let mut state = full.initial();
    for w in ["今日/きょう", "は/は"] {
        let id = lm.vocab().get(w).unwrap();
        state = full.advance(&[(&state, id)]).remove(0);
    }
    let (eos, unk) = (full.end(), lm.vocab().get("<unk>").unwrap());
    let sample: Vec<u32> = (0..top as u32).filter(|&w| w != eos && w != unk).collect();
    let mut lp = vec![0.0; sample.len()];
    full.log_probs(&state, &sample, &mut lp);
    let mut best: Vec<(f32, u32)> = lp.into_iter().zip(sample).collect();
    best.sort_by(|a, b| b.0.total_cmp(&a.0));
    let expected: Vec<String> = best[..3]
        .iter()
        .map(|&(_, w)| lm.vocab().word(w).split('/').next().unwrap().to_string())
        .collect();
    let got: Vec<String> = offered.iter().map(|s| s.text.clone()).collect();
    assert_eq!(got, expected);
    // Typed: completions of the kana, the language model's words only.
    // Typed: completions of the kana among the language model's words, by its scores.
    session.key('て');
    let offered = session.suggestions(3);
    let mut words: Vec<(f32, &str)> = lm
        .vocab()
        .words()
        .iter()
        .enumerate()
        .filter(|(_, w)| w.split_once('/').is_some_and(|(_, r)| r.starts_with('て')))
        .map(|(id, w)| {
            let mut lp = [0.0];
            full.log_probs(&state, &[id as u32], &mut lp);
            (lp[0], w.split('/').next().unwrap())
        })
        .collect();
    words.sort_by(|a, b| b.0.total_cmp(&a.0));
    let expected: Vec<&str> = words[..3].iter().map(|w| w.1).collect();
    let got: Vec<&str> = offered.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(got, expected);
    let taken = offered[0].clone();
    assert_eq!(session.accept(&taken), taken.text);
    assert_eq!(session.committed(), format!("今日は{}", taken.text));
    assert_eq!(session.input(), "");
}
