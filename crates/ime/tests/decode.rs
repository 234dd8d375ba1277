//! The decoder on a small fixture: a lexicon with homophones, a trigram Kneser–Ney model from a
//! handful of sentences, and inputs typed one kana at a time.

use fastsoftmax_ime::{Decoder, KnScorer, KneserNey, Lexicon, Romaji, Spelling, Word};

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
