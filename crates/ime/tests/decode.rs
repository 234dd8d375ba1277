//! The decoder on a small fixture: a lexicon with homophones, a trigram Kneser–Ney model from a
//! handful of sentences, and inputs typed one kana at a time.

use fastsoftmax_ime::{
    Decoder, Key, KnScorer, KneserNey, Lexicon, Reply, Romaji, Scorer, Session, Spelling, Word,
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

/// A session with Mozc's keys pressed (`press`), from romaji typed.
fn pressed<'l>(
    lm: &'l KneserNey,
    lex: &'l Lexicon,
    spelling: &Spelling,
    keys: &str,
) -> Session<'l, KnScorer<'l>> {
    let mut s = typed(lm, lex, spelling, "");
    for k in keys.chars() {
        assert!(s.press(Key::Char(k)).consumed);
    }
    s
}

fn texts(s: &Session<KnScorer>) -> Vec<String> {
    s.segments().iter().map(|x| x.text().to_string()).collect()
}

fn readings(s: &Session<KnScorer>) -> String {
    let kana: Vec<char> = s.kana().chars().collect();
    s.segments()
        .iter()
        .map(|x| kana[x.start..x.end].iter().collect::<String>())
        .collect()
}

#[test]
fn space_converts_in_segments_each_with_its_own_alternatives() {
    let (lm, lex, spelling) = setup(3);
    let mut s = pressed(&lm, &lex, &spelling, "kyouhaiitenkidesu");
    assert_eq!(
        s.press(Key::Space),
        Reply {
            consumed: true,
            committed: None
        }
    );
    assert_eq!(texts(&s), ["今日は", "いい", "天気です"]);
    assert_eq!(readings(&s), s.kana());
    // The first segment's alternatives: decoded over its kana only, the rest fixed.
    let alternatives = s.alternatives();
    assert_eq!(alternatives[0], "今日は");
    assert!(
        alternatives.contains(&"京は".to_string()),
        "{alternatives:?}"
    );
    assert!(
        alternatives.contains(&"キョウハ".to_string()),
        "{alternatives:?}"
    );
    // → → to 天気です; Space opens its window on the next alternative and chooses it.
    s.press(Key::Right);
    s.press(Key::Right);
    s.press(Key::Space);
    let view = s.view();
    assert_eq!((view.focus, view.highlighted), (Some(2), Some(1)));
    assert_eq!(view.candidates[..2], ["天気です", "転機です"]);
    assert_eq!(texts(&s), ["今日は", "いい", "転機です"]);
    // With the window open a digit picks; 1 = the first of the page.
    s.press(Key::Char('1'));
    assert_eq!(texts(&s), ["今日は", "いい", "天気です"]);
    assert_eq!(
        s.view().candidates,
        Vec::<String>::new(),
        "a pick closes the window"
    );
    let reply = s.press(Key::Enter);
    assert_eq!(reply.committed.as_deref(), Some("今日はいい天気です"));
    assert_eq!(s.committed(), "今日はいい天気です");
    // The context carries over exactly as a whole-input commit of the same text does.
    let mut whole = typed(&lm, &lex, &spelling, "kyouhaiitenkidesu");
    whole.commit(0);
    for k in "ne".chars() {
        s.key(k);
        whole.key(k);
    }
    assert_eq!(s.candidates(), whole.candidates());
}

#[test]
fn resizing_redecodes_the_focused_segment_and_the_next() {
    let (lm, lex, spelling) = setup(3);
    let mut s = pressed(&lm, &lex, &spelling, "kyouhaiitenki");
    s.press(Key::Space);
    assert_eq!(texts(&s), ["今日は", "いい", "天気"]);
    // Shift+←: は leaves the first segment and becomes one of its own.
    s.press(Key::ShiftLeft);
    assert_eq!(texts(&s)[1..], ["は", "いい", "天気"]);
    assert!(s.alternatives().contains(&"今日".to_string()));
    assert_eq!(readings(&s), s.kana());
    // Shift+→ twice: the first segment takes は back, then い from いい.
    s.press(Key::ShiftRight);
    assert_eq!(texts(&s), ["今日は", "いい", "天気"]);
    s.press(Key::ShiftRight);
    assert_eq!(s.segments()[0].end, 5);
    assert_eq!(readings(&s), s.kana());
    assert_eq!(texts(&s).last().unwrap(), "天気");
    // A segment keeps one kana at least; the last cannot grow.
    s.press(Key::Right);
    s.press(Key::Right);
    let before = texts(&s);
    assert!(!s.resize(1));
    assert_eq!(texts(&s), before);
    // Escape: back to the kana as typed, nothing lost.
    s.press(Key::Escape);
    assert!(!s.converting());
    assert_eq!(s.input(), "きょうはいいてんき");
}

#[test]
fn function_keys_transliterate_the_focused_segment() {
    let (lm, lex, spelling) = setup(3);
    let mut s = pressed(&lm, &lex, &spelling, "kyouhaiitenki");
    s.press(Key::Space);
    s.press(Key::Function(7));
    assert_eq!(texts(&s), ["キョウハ", "いい", "天気"]);
    s.press(Key::Function(10));
    assert_eq!(texts(&s)[0], "kyouha");
    s.press(Key::Function(9));
    assert_eq!(texts(&s)[0], "ｋｙｏｕｈａ");
    s.press(Key::Function(6));
    assert_eq!(texts(&s)[0], "きょうは");
    assert_eq!(
        s.press(Key::Enter).committed.as_deref(),
        Some("きょうはいい天気")
    );
    // While composing, F7 converts the whole input.
    let mut s = pressed(&lm, &lex, &spelling, "tenki");
    s.press(Key::Function(7));
    assert_eq!(texts(&s), ["テンキ"]);
}

#[test]
fn digits_pick_only_while_the_window_is_open() {
    let (lm, lex, spelling) = setup(3);
    // Typing 12ji: the digits are input.
    let s = pressed(&lm, &lex, &spelling, "12niiku");
    assert_eq!(s.input(), "12にいく");
    // Converting without a window, a digit commits and starts the next input.
    let mut s = pressed(&lm, &lex, &spelling, "kyouha");
    s.press(Key::Space);
    let reply = s.press(Key::Char('3'));
    assert_eq!(reply.committed.as_deref(), Some("今日は"));
    assert_eq!(s.input(), "3");
    // Keys with nothing typed go to the application.
    let mut s = pressed(&lm, &lex, &spelling, "");
    for key in [
        Key::Space,
        Key::Enter,
        Key::Backspace,
        Key::Left,
        Key::Function(7),
    ] {
        assert!(!s.press(key).consumed, "{key:?}");
    }
}

#[test]
fn a_capital_starts_direct_input_until_a_space() {
    let (lm, lex, spelling) = setup(3);
    let mut s = pressed(&lm, &lex, &spelling, "USBni");
    assert_eq!(s.input(), "USBni");
    let mut s2 = pressed(&lm, &lex, &spelling, "USB");
    s2.press(Key::Space);
    s2.press(Key::Char('n'));
    s2.press(Key::Char('i'));
    assert_eq!(s2.input(), "USBに");
    s2.press(Key::Space);
    assert_eq!(s2.press(Key::Enter).committed.as_deref(), Some("USBに"));
    s.press(Key::Space);
    assert_eq!(
        s.input(),
        "USBni",
        "a space ends direct input and adds nothing"
    );
}

/// Random key streams never panic, and the session's invariants hold after every key: the
/// preedit is the input typed (while composing) or its segments cover the kana exactly
/// (while converting); what the replies commit is what the session committed; Escape in a
/// conversion restores the input as it was.
#[test]
fn random_key_streams_keep_the_invariants() {
    let (lm, lex, spelling) = setup(3);
    let keys = [
        Key::Char('k'),
        Key::Char('y'),
        Key::Char('o'),
        Key::Char('u'),
        Key::Char('h'),
        Key::Char('a'),
        Key::Char('i'),
        Key::Char('t'),
        Key::Char('e'),
        Key::Char('n'),
        Key::Char('1'),
        Key::Char('2'),
        Key::Char('U'),
        Key::Char('/'),
        Key::Char('.'),
        Key::Char('z'),
        Key::Char('['),
        Key::Space,
        Key::Space,
        Key::Enter,
        Key::Backspace,
        Key::Escape,
        Key::Left,
        Key::Right,
        Key::ShiftLeft,
        Key::ShiftRight,
        Key::Up,
        Key::Down,
        Key::PageUp,
        Key::PageDown,
        Key::Function(6),
        Key::Function(7),
        Key::Function(8),
        Key::Function(9),
        Key::Function(10),
        Key::Tab,
    ];
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for _stream in 0..60 {
        let mut s = pressed(&lm, &lex, &spelling, "");
        let mut committed = String::new();
        for _ in 0..80 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let key = keys[(rng % keys.len() as u64) as usize];
            let converting = s.converting();
            let input = s.input();
            let reply = s.press(key);
            if let Some(text) = &reply.committed {
                committed.push_str(text);
            }
            assert_eq!(s.committed(), committed, "after {key:?}");
            if converting && key == Key::Escape {
                assert!(!s.converting());
                assert_eq!(s.input(), input, "Escape restores the input");
            }
            let view = s.view();
            if s.converting() {
                assert_eq!(readings(&s), s.kana(), "after {key:?}");
                assert_eq!(view.segments.concat(), texts(&s).concat());
                assert!(view.focus.is_some_and(|f| f < view.segments.len()));
            } else {
                let typed: Vec<String> = Some(s.input())
                    .filter(|i| !i.is_empty())
                    .into_iter()
                    .collect();
                assert_eq!(view.segments, typed, "after {key:?}");
            }
        }
    }
}

/// A segment the user committed otherwise comes back as they wrote it; a short reading only
/// after the same text.
#[test]
fn a_conversion_shows_segments_as_the_user_committed_them() {
    let (lm, lex, spelling) = setup(3);
    let mut s = pressed(&lm, &lex, &spelling, "kyouhaiitenkidesu");
    s.press(Key::Space);
    assert_eq!(texts(&s), ["今日は", "いい", "天気です"]);
    // The user takes 転機です for the last segment and commits.
    s.press(Key::Right);
    s.press(Key::Right);
    s.press(Key::Space);
    assert_eq!(texts(&s)[2], "転機です");
    s.press(Key::Enter);
    assert_eq!(
        s.history().best("てんきです").map(|b| b.0),
        Some("転機です")
    );
    assert!(s.history().follows("いい", "転機です"));
    // Typed again (a new paragraph: no context), てんきです (5 kana) comes back as 転機です.
    s.new_paragraph();
    for k in "kyouhaiitenkidesu".chars() {
        s.press(Key::Char(k));
    }
    // The whole-input candidates are the language model's; the conversion applies the history.
    assert_eq!(s.candidates()[0].text, "今日はいい天気です");
    s.press(Key::Space);
    assert_eq!(texts(&s), ["今日は", "いい", "転機です"]);
    // A short reading is not replaced after other text: いい committed as 良い after 今日は
    // comes back after 今日は, not after 明日は.
    s.press(Key::Escape);
    s.clear();
    let mut fresh = pressed(&lm, &lex, &spelling, "");
    fresh.learn(&[
        ("明日".to_string(), "あした".to_string()),
        ("は".to_string(), "は".to_string()),
        ("北".to_string(), "きた".to_string()),
    ]);
    for k in "kyouhakita".chars() {
        fresh.press(Key::Char(k));
    }
    fresh.press(Key::Space);
    assert_eq!(
        texts(&fresh)[1],
        "来た",
        "きた after 今日は: not learned there"
    );
    fresh.press(Key::Escape);
    fresh.clear();
    for k in "ashitahakita".chars() {
        fresh.press(Key::Char(k));
    }
    fresh.press(Key::Space);
    assert_eq!(texts(&fresh), ["明日は", "北"], "after 明日は it was");
    let mut unlearned = pressed(&lm, &lex, &spelling, "ashitahakita");
    unlearned.press(Key::Space);
    assert_eq!(texts(&unlearned), ["明日は", "来た"], "the model alone");
}

/// A user word outranks the lexicon's words of its reading by the bonus (unless the model
/// prefers one by more); a 抑制単語 entry hides a lexicon word.
#[test]
fn user_words_join_the_lattice_and_suppressed_words_leave_it() {
    use fastsoftmax_ime::{Pos, UserDictionary, UserWord};
    let (lm, lex, spelling) = setup(3);
    let mut s = pressed(&lm, &lex, &spelling, "tenkigakita");
    assert_eq!(s.candidates()[0].text, "転機が来た");
    let mut dictionary = UserDictionary::new();
    // A word the lexicon lacks, and one it has.
    dictionary
        .add(UserWord::new("てんき", "点火", Pos::Noun, ""))
        .unwrap();
    s.set_user_dictionary(&dictionary, 0.0);
    assert_eq!(s.input(), "てんきがきた", "the input stays");
    assert!(s.candidates().iter().any(|c| c.text == "点火が来た"));
    assert_eq!(
        s.candidates()[0].text,
        "転機が来た",
        "no bonus: the model decides"
    );
    s.set_user_dictionary(&dictionary, 40.0);
    assert_eq!(s.candidates()[0].text, "点火が来た");
    // Segments decode with the user's words too.
    s.press(Key::Space);
    assert!(s.alternatives().contains(&"転機が".to_string()));
    assert_eq!(texts(&s)[0], "点火が");
    s.press(Key::Escape);
    // Suppressed: 転機 is never offered for てんき.
    let mut dictionary = UserDictionary::new();
    dictionary
        .add(UserWord::new("てんき", "転機", Pos::SuppressionWord, ""))
        .unwrap();
    s.set_user_dictionary(&dictionary, 2.0);
    assert!(s.candidates().iter().all(|c| !c.text.contains("転機")));
    assert_eq!(s.candidates()[0].text, "天気が来た");
}

/// With one page of alternatives the page keys keep the highlight (they wrapped by the list's
/// length before, moving it by one).
#[test]
fn page_keys_move_by_pages() {
    let (lm, lex, spelling) = setup(3);
    let mut s = pressed(&lm, &lex, &spelling, "kyouhaiitenkidesu");
    s.press(Key::Space);
    s.press(Key::Space);
    assert_eq!(s.alternatives().len(), 9, "one page");
    let at = s.view().highlighted.unwrap() + s.view().page_start;
    assert_eq!(at, 1);
    s.press(Key::PageDown);
    let after = s.view().highlighted.unwrap() + s.view().page_start;
    assert_eq!(after, 1, "one page: the highlight stays");
}

/// Tab takes the first suggestion while typing (a completion of the kana); with nothing typed
/// and no suggestion it is the application's.
#[test]
fn tab_takes_the_first_suggestion() {
    let (lm, lex, spelling) = setup(3);
    let mut s = pressed(&lm, &lex, &spelling, "");
    // A Kneser–Ney scorer has no cheap next-word prediction: nothing to take.
    assert!(s.view().suggestions.is_empty());
    assert!(!s.press(Key::Tab).consumed);
    for k in "tenk".chars() {
        s.press(Key::Char(k));
    }
    assert!(
        s.view().suggestions.is_empty(),
        "a pending letter: nothing yet"
    );
    s.press(Key::Char('i'));
    let offered = s.view().suggestions;
    assert_eq!(offered.len(), 2);
    assert!(offered.contains(&"天気".to_string()) && offered.contains(&"転機".to_string()));
    let reply = s.press(Key::Tab);
    assert_eq!(reply.committed.as_deref(), Some(offered[0].as_str()));
    assert_eq!(s.committed(), offered[0]);
    assert_eq!(s.input(), "");
}

/// What the user committed before comes first among the completions of its reading.
#[test]
fn the_history_completes_first() {
    let (lm, lex, spelling) = setup(3);
    let mut s = pressed(&lm, &lex, &spelling, "");
    s.commit_words(&[("テンキー".to_string(), "てんきー".to_string())]);
    s.new_paragraph();
    for k in "tenki".chars() {
        s.press(Key::Char(k));
    }
    let offered = s.suggestions(3);
    let texts: Vec<&str> = offered.iter().map(|x| x.text.as_str()).collect();
    assert_eq!(texts[0], "テンキー", "{texts:?}");
    assert_eq!(offered[0].score, None);
    assert!(texts[1..].contains(&"天気") && texts[1..].contains(&"転機"));
    assert_eq!(s.accept(&offered[0]), "テンキー");
    assert!(s.committed().ends_with("\nテンキー"));
}
