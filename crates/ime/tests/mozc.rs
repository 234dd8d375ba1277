//! Mozc's costs in the decoder: its words join the lattice, and its connection costs choose
//! between words the language model cannot tell apart.

use fastsoftmax_ime::mozc::{Class, Connection, MozcDictionary, MozcEntry, MozcWeights, Skipped};
use fastsoftmax_ime::{Decoder, KnScorer, KneserNey, Lexicon, Spelling, Word};

/// POS ids: 0 the sentence boundary, 1 a noun, 2 a particle, 3 a verb.
const IDS: usize = 4;

/// Connection costs: a particle after a noun is cheap, a particle at the start or after a
/// particle dear, a verb after a particle cheap.
fn connection() -> Connection {
    let mut costs = vec![1000i16; IDS * IDS];
    let mut set = |rid: usize, lid: usize, c: i16| costs[rid + IDS * lid] = c;
    set(0, 1, 100); // BOS → noun
    set(0, 2, 3000); // BOS → particle
    set(1, 2, 0); // noun → particle
    set(2, 2, 3000); // particle → particle
    set(2, 3, 0); // particle → verb
    set(3, 0, 0); // verb → EOS
    Connection::new(IDS, IDS, costs).unwrap()
}

fn entry(reading: &str, surface: &str, pos: u16, cost: i16) -> MozcEntry {
    MozcEntry {
        reading: reading.into(),
        surface: surface.into(),
        class: Class {
            lid: pos,
            rid: pos,
            cost,
        },
    }
}

fn dictionary() -> MozcDictionary {
    MozcDictionary {
        entries: vec![
            entry("は", "歯", 1, 500),
            entry("は", "は", 2, 0),
            // The same display as a noun too: a path takes the class that connects best.
            entry("は", "は", 1, 4000),
            entry("みる", "見る", 3, 100),
            entry("みる", "ミル", 1, 200),
            // Not in the LM's lexicon: joins through <unk>.
            entry("はみる", "刃見る", 1, 100),
        ],
        connection: connection(),
        version: "fixture".into(),
        skipped: Skipped::default(),
    }
}

/// The LM: a unigram model over `<s>`, `<unk>`, は, 歯, ミル, 見る (every word once, so the LM
/// gives homophones the same score, and a tie keeps the word listed first).
fn setup() -> (KneserNey, Lexicon, Spelling) {
    let words = [
        ("は", "は"),
        ("歯", "は"),
        ("ミル", "みる"),
        ("見る", "みる"),
    ];
    let corpus: Vec<Vec<u32>> = (0..words.len() as u32).map(|i| vec![i + 2]).collect();
    let lm = KneserNey::estimate(&corpus, 1, words.len() + 2, 0, 0).unwrap();
    let mut lex = Lexicon::new();
    for (i, (display, reading)) in words.iter().enumerate() {
        let word = Word {
            display: display.to_string(),
            lm_id: i as u32 + 2,
            extra: 0.0,
        };
        lex.insert(reading, word);
    }
    (lm, lex, Spelling::uniform(1, -8.0, -1.0))
}

fn convert(kana: &str, lex: &Lexicon, lm: &KneserNey, spelling: &Spelling) -> Vec<String> {
    let mut scorer = KnScorer::new(lm);
    let mut dec = Decoder::new(&mut scorer, 10, spelling.clone());
    for c in kana.chars() {
        dec.push(c, lex, &mut scorer);
    }
    dec.n_best(5, lex, &mut scorer)
        .into_iter()
        .map(|c| c.text)
        .collect()
}

#[test]
fn connection_costs_choose_between_homophones() {
    let (lm, mut lex, spelling) = setup();
    let weights = MozcWeights {
        weight: 0.01,
        unknown_cost: 6000,
        spelling_share: 1.0,
    };
    let added = lex.add_mozc(&dictionary(), &spelling, weights);
    assert_eq!(added, 1, "刃見る joins; the others give their classes");
    assert_eq!(lex.lookup("はみる").count(), 1);
    // は has two classes (particle, noun): both kept.
    let ha = lex.lookup("は").find(|(_, w)| w.display == "は").unwrap().0;
    assert_eq!(lex.classes(ha).len(), 2);
    // Alone, a noun starts a sentence more cheaply than a particle: 歯.
    assert_eq!(convert("は", &lex, &lm, &spelling)[0], "歯");
    // A noun, then the particle (its particle class), then a verb.
    assert_eq!(convert("ははみる", &lex, &lm, &spelling)[0], "歯は見る");
}

#[test]
fn without_mozc_the_language_model_alone_decides() {
    let (lm, lex, spelling) = setup();
    // Equal LM scores: ties keep the words listed first.
    assert_eq!(convert("は", &lex, &lm, &spelling)[0], "は");
    let best = convert("ははみる", &lex, &lm, &spelling);
    assert_eq!(best[0], "ははミル");
    let mut with = lex.clone();
    let weights = MozcWeights {
        weight: 0.0,
        unknown_cost: 6000,
        spelling_share: 1.0,
    };
    with.add_mozc(&dictionary(), &spelling, weights);
    // Weight 0: Mozc's words join, its costs change no score of the words both have.
    let zero = convert("ははみる", &with, &lm, &spelling);
    assert_eq!(zero[0], best[0]);
}

/// Mozc's words outside the LM's vocabulary: with the spelling model alone a short display
/// wins by its spelling (the character model charges each character); with an even share of
/// `<unk>`'s mass, Mozc's costs rank them. Either way `p(· | <unk>)` stays a distribution.
#[test]
fn an_even_share_of_unknown_mass_lets_mozc_rank_its_own_words() {
    let (lm, lex, spelling) = setup();
    let mut dict = dictionary();
    dict.entries.push(entry("みるく", "乳", 1, 5000));
    dict.entries.push(entry("みるく", "ミルク", 1, 100));
    let with = |share: f32| {
        let mut lex = lex.clone();
        let weights = MozcWeights {
            weight: 0.001,
            unknown_cost: 6000,
            spelling_share: share,
        };
        assert_eq!(lex.add_mozc(&dict, &spelling, weights), 3);
        lex
    };
    let alone = with(1.0);
    assert_eq!(convert("みるく", &alone, &lm, &spelling)[0], "乳");
    let even = with(0.1);
    assert_eq!(convert("みるく", &even, &lm, &spelling)[0], "ミルク");

    // p(w | <unk>) = share · p_spelling(w) + (1 − share) / 3 over the three that joined.
    let extra = |lex: &Lexicon, reading: &str, display: &str| {
        lex.lookup(reading)
            .find(|(_, w)| w.display == display)
            .unwrap()
            .1
            .extra
    };
    let mut mass = 0.0f64;
    for (reading, display) in [("みるく", "乳"), ("みるく", "ミルク"), ("はみる", "刃見る")]
    {
        let spelled = spelling.log_prob_word(display, 0);
        assert_eq!(extra(&alone, reading, display), spelled);
        let p = (extra(&even, reading, display) as f64).exp();
        let want = 0.1 * (spelled as f64).exp() + 0.9 / 3.0;
        assert!((p - want).abs() < 1e-6, "{display}: {p} vs {want}");
        mass += p;
    }
    assert!(mass < 1.0, "{mass}");
    // A word of the LM's vocabulary keeps its score.
    assert_eq!(extra(&even, "は", "歯"), 0.0);
}
