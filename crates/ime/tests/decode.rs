//! The decoder on a small fixture: a lexicon with homophones, a trigram Kneser–Ney model from a
//! handful of sentences, and inputs typed one kana at a time.

use fastsoftmax_ime::{
    Decoder, KnScorer, KneserNey, Lexicon, Romaji, Scorer, Session, Spelling, Word,
};

/// `(display, reading)` words; id = position + 2 (0 = `<s>`/`</s>`, 1 = `<unk>`).
const WORDS: &[(&str, &str)] = &[
    ("今日", "きょう"),
    ("京", "きょう"),
    ("強", "きょう"),
    ("は", "は"),
    ("葉", "は"),
    ("いい", "いい"),
    ("良い", "よい"),
    ("天気", "てんき"),
    ("転機", "てんき"),
    ("です", "です"),
    ("ね", "ね"),
    ("が", "が"),
    ("来た", "きた"),
    ("北", "きた"),
    ("に", "に"),
    ("行く", "いく"),
    ("明日", "あした"),
];

fn id(display: &str) -> u32 {
    WORDS.iter().position(|w| w.0 == display).unwrap() as u32 + 2
}

fn corpus() -> Vec<Vec<u32>> {
    [
        "今日 は いい 天気 です ね",
        "今日 は いい 天気 です",
        "明日 は いい 天気",
        "京 に 行く",
        "今日 は 京 に 行く",
        "転機 が 来た",
        "北 に 行く",
        "葉 が いい",
    ]
    .iter()
    .map(|s| s.split(' ').map(id).collect())
    .collect()
}

fn setup(order: usize) -> (KneserNey, Lexicon, Spelling) {
    let vocab = WORDS.len() + 2;
    let lm = KneserNey::estimate(&corpus(), order, vocab, 0, 0).unwrap();
    let mut lex = Lexicon::new();
    for (i, &(display, reading)) in WORDS.iter().enumerate() {
        let w = Word {
            display: display.into(),
            lm_id: i as u32 + 2,
            extra: 0.0,
        };
        lex.insert(reading, w);
    }
    let spelling = Spelling::uniform(1, -8.0, -1.0);
    (lm, lex, spelling)
}

fn convert(kana: &str, order: usize) -> Vec<String> {
    let (lm, lex, spelling) = setup(order);
    let mut scorer = KnScorer::new(&lm);
    let mut dec = Decoder::new(&mut scorer, 10, spelling);
    for c in kana.chars() {
        dec.push(c, &lex, &mut scorer);
    }
    dec.n_best(10, &lex, &mut scorer)
        .into_iter()
        .map(|c| c.text)
        .collect()
}

#[test]
fn converts_with_the_context_of_the_model() {
    assert_eq!(
        convert("きょうはいいてんきですね", 3)[0],
        "今日はいい天気ですね"
    );
    assert_eq!(convert("きょうにいく", 3)[0], "京に行く");
    assert_eq!(convert("てんきがきた", 3)[0], "転機が来た");
    assert_eq!(convert("きたにいく", 3)[0], "北に行く");
}

#[test]
fn n_best_is_distinct_and_ordered() {
    let (lm, lex, spelling) = setup(3);
    let mut scorer = KnScorer::new(&lm);
    let mut dec = Decoder::new(&mut scorer, 10, spelling);
    for c in "きょうは".chars() {
        dec.push(c, &lex, &mut scorer);
    }
    let best = dec.n_best(10, &lex, &mut scorer);
    assert!(best.len() >= 4, "{best:?}");
    assert!(best.windows(2).all(|w| w[0].score >= w[1].score));
    let mut texts: Vec<&str> = best.iter().map(|c| c.text.as_str()).collect();
    texts.sort_unstable();
    texts.dedup();
    assert_eq!(texts.len(), best.len(), "distinct displays");
    assert_eq!(
        best[0].words,
        [
            ("今日".to_string(), "きょう".to_string()),
            ("は".into(), "は".into())
        ]
    );
}

#[test]
fn backspace_equals_typing_the_shorter_input() {
    let (lm, lex, spelling) = setup(3);
    let mut scorer = KnScorer::new(&lm);
    let mut dec = Decoder::new(&mut scorer, 10, spelling.clone());
    for c in "きょうはいいてんきです".chars() {
        dec.push(c, &lex, &mut scorer);
    }
    for _ in 0..3 {
        dec.pop(&lex, &mut scorer);
    }
    let after: Vec<_> = dec.n_best(10, &lex, &mut scorer);
    let mut fresh = Decoder::new(&mut scorer, 10, spelling);
    for c in "きょうはいいてん".chars() {
        fresh.push(c, &lex, &mut scorer);
    }
    assert_eq!(after, fresh.n_best(10, &lex, &mut scorer));
}

#[test]
fn input_outside_the_lexicon_passes_through() {
    // ぬ and ゑ are in no word; digits are not kana: all shown as typed.
    assert_eq!(convert("ぬきょうゑ", 3)[0], "ぬ今日ゑ");
    assert_eq!(convert("12", 2)[0], "12");
    assert!(convert("", 3).is_empty());
}

#[test]
fn typed_romaji_converts() {
    let kana = Romaji::convert("kyouhaiitenkidesune");
    assert_eq!(convert(&kana, 3)[0], "今日はいい天気ですね");
}

#[test]
fn long_input_stays_bounded() {
    // 500 kana: every key looks back at most the longest reading.
    let (lm, lex, spelling) = setup(2);
    let mut scorer = KnScorer::new(&lm);
    let mut dec = Decoder::new(&mut scorer, 10, spelling);
    let text: String = "きょうはいいてんき".chars().cycle().take(500).collect();
    for c in text.chars() {
        dec.push(c, &lex, &mut scorer);
        assert!(dec.lattice().ending_at(dec.lattice().len()).len() <= 4);
    }
    let best = &dec.n_best(1, &lex, &mut scorer)[0];
    let read: String = best.words.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(read, text, "the best path reads the whole input");
}

/// A 500-kana input (sentences typed without a break, with kana the lexicon lacks) converts in
/// full; `ime latency` times the same on the real model.
#[test]
fn a_500_kana_input_converts_in_full() {
    let unit = "きょうはいいてんきですねぬ";
    let kana: String = unit.chars().cycle().take(500).collect();
    let (lm, lex, spelling) = setup(3);
    let mut scorer = KnScorer::new(&lm);
    let mut dec = Decoder::new(&mut scorer, 10, spelling);
    for c in kana.chars() {
        dec.push(c, &lex, &mut scorer);
    }
    let best = dec.n_best(10, &lex, &mut scorer);
    let read: String = best[0].words.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(read, kana);
    assert!(
        best[0].text.starts_with("今日はいい天気ですねぬ今日"),
        "{}",
        best[0].text
    );
    assert_eq!(
        best[0].text.chars().filter(|&c| c == 'ぬ').count(),
        500 / 13
    );
}

#[test]
fn commit_refuses_a_text_no_hypothesis_spells() {
    let (lm, lex, spelling) = setup(3);
    let mut scorer = KnScorer::new(&lm);
    let mut dec = Decoder::new(&mut scorer, 10, spelling);
    assert!(!dec.commit("今日", false, &lex, &mut scorer), "empty input");
    for c in "きょう".chars() {
        dec.push(c, &lex, &mut scorer);
    }
    assert!(!dec.commit("明日", false, &lex, &mut scorer));
    assert_eq!(dec.lattice().len(), 3, "nothing changed");
    assert!(dec.commit("京", false, &lex, &mut scorer));
    assert!(dec.lattice().is_empty());
}

/// A session fed `keys`, one `key` call each.
fn typed<'l>(
    lm: &'l KneserNey,
    lex: &'l Lexicon,
    spelling: &Spelling,
    keys: &str,
) -> Session<'l, KnScorer<'l>> {
    let mut s = Session::new(
        KnScorer::new(lm),
        lex,
        spelling.clone(),
        fastsoftmax_ime::Options {
            n_best: 10,
            katakana: 0,
            ..Default::default()
        },
    );
    for k in keys.chars() {
        s.key(k);
    }
    s
}

#[test]
fn a_session_converts_romaji_as_it_is_typed() {
    let (lm, lex, spelling) = setup(3);
    let mut s = typed(&lm, &lex, &spelling, "kyouhaiitenkidesun");
    assert_eq!(s.kana(), "きょうはいいてんきです");
    assert_eq!(
        (s.pending(), s.input().as_str()),
        ("n", "きょうはいいてんきですn")
    );
    assert_eq!(s.candidates()[0].text, "今日はいい天気です");
    s.key('e');
    assert_eq!(s.candidates()[0].text, "今日はいい天気ですね");
    assert!(s.candidates().len() > 1);
}

#[test]
fn committing_carries_the_context_over() {
    let (lm, lex, spelling) = setup(3);
    // From the sentence start, きょう is 今日 (three training sentences start so).
    assert_eq!(
        typed(&lm, &lex, &spelling, "kyou").candidates()[0].text,
        "今日"
    );
    let mut s = typed(&lm, &lex, &spelling, "kyouha");
    assert_eq!(s.commit(0), Some("今日は"));
    assert_eq!((s.input().as_str(), s.candidates().len()), ("", 0));
    for k in "kyou".chars() {
        s.key(k);
    }
    // After 今日 は, the trigram 今日 は 京 was seen.
    let best = &s.candidates()[0];
    assert_eq!(best.text, "京");
    // Its score is the path's, read by the scorer from the committed words on.
    let mut kn = KnScorer::new(&lm);
    let mut state = kn.initial();
    let mut lp = [0.0f32];
    let mut expected = 0.0;
    for w in ["今日", "は", "京"].map(id) {
        kn.log_probs(&state, &[w], &mut lp);
        if w == id("京") {
            expected += lp[0];
        }
        state = kn.advance(&[(&state, w)]).remove(0);
    }
    kn.log_probs(&state, &[kn.end()], &mut lp);
    expected += lp[0];
    assert!(
        (best.score - expected).abs() < 1e-4,
        "{} vs {expected}",
        best.score
    );
    assert_eq!(s.commit(0), Some("京"));
    assert_eq!(s.committed(), "今日は京");
}

#[test]
fn a_session_backspace_equals_typing_the_shorter_input() {
    let (lm, lex, spelling) = setup(3);
    let mut s = typed(&lm, &lex, &spelling, "kyouhaiitenkides");
    for expected in [
        "きょうはいいてんきで",
        "きょうはいいてんき",
        "きょうはいいてん",
    ] {
        assert!(s.backspace());
        assert_eq!(s.input(), expected);
        // Kana typed directly pass through the romaji as they are.
        let fresh = typed(&lm, &lex, &spelling, expected);
        assert_eq!(s.candidates(), fresh.candidates());
    }
    while s.backspace() {}
    assert!(s.candidates().is_empty());
    assert!(!s.backspace(), "nothing left to delete");
}

#[test]
fn pending_letters_survive_a_pick_and_enter_flushes_them() {
    let (lm, lex, spelling) = setup(3);
    let mut s = typed(&lm, &lex, &spelling, "kyouhan");
    // The pending n stays as the start of the next input.
    assert_eq!(s.commit(0), Some("今日は"));
    assert_eq!(s.input(), "n");
    s.key('i');
    assert_eq!(s.candidates()[0].text, "に");
    assert_eq!(s.commit(7), None, "no eighth candidate");
    // Enter: a trailing n becomes ん before the commit.
    s.key('n');
    assert_eq!(s.commit_all(), Some("にん"));
    assert_eq!(s.commit_all(), None, "nothing typed");
    s.new_paragraph();
    assert_eq!(s.committed(), "今日はにん\n");
}

#[test]
fn clear_drops_the_input_and_keeps_the_context() {
    let (lm, lex, spelling) = setup(3);
    let mut s = typed(&lm, &lex, &spelling, "kyouha");
    s.commit(0);
    for k in "kyou".chars() {
        s.key(k);
    }
    let before = s.candidates().to_vec();
    s.clear();
    assert_eq!((s.input().as_str(), s.candidates().len()), ("", 0));
    for k in "kyou".chars() {
        s.key(k);
    }
    assert_eq!(s.candidates(), before.as_slice());
    // A new paragraph forgets it: きょう is 今日 again.
    s.new_paragraph();
    for k in "kyou".chars() {
        s.key(k);
    }
    assert_eq!(s.candidates()[0].text, "今日");
}

#[test]
fn keys_that_are_not_romaji_pass_through() {
    let (lm, lex, spelling) = setup(3);
    let s = typed(&lm, &lex, &spelling, "kyou@#1x");
    assert_eq!(s.input(), "きょう@#1x");
    assert_eq!(s.candidates()[0].text, "今日@#1");
}
