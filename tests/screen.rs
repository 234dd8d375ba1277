//! Screening heads inside beam search, on the shipped translator: a head that screens nothing
//! changes nothing, ids come back in the full vocabulary through routes, beam and n-best,
//! translations do not depend on batching, and heads that cannot serve are refused clearly.

mod common;

use fastsoftmax_infer::heads::ds::Expert;
use fastsoftmax_infer::kernels::seeded_values;
use fastsoftmax_infer::{DsHead, FullHead, L2sHead, SoftmaxHead};
use fastsoftmax_translate::{
    Profile, Screen, SearchOptions, Translation, Translator, VmapScope, VocabMap,
};

const VERSES: [&str; 5] = [
    "In the beginning was the Word, and the Word was with God, and the Word was God.",
    "Jesus wept.",
    "",
    "For God so loved the world, that he gave his one and only Son.",
    "The light shines in the darkness, and the darkness hasn't overcome it.",
];

/// The shipped translator as the f32 engine over every word (the values it serves, widened),
/// so that a head holding every word must give the same scores.
fn engine() -> Translator {
    Translator::from_weights(common::shipped_bible_f32()).unwrap()
}

fn opts() -> SearchOptions {
    SearchOptions {
        beam: 5,
        n_best: 3,
        ..SearchOptions::default()
    }
}

fn translate(engine: &Translator, batch: usize) -> Vec<Vec<Translation>> {
    VERSES
        .chunks(batch)
        .flat_map(|lines| {
            engine
                .translate(lines, &opts(), &mut Profile::default())
                .unwrap()
        })
        .collect()
}

fn assert_same(a: &[Vec<Translation>], b: &[Vec<Translation>], what: &str) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.len(), y.len(), "{what}");
        for (p, q) in x.iter().zip(y) {
            assert_eq!((&p.text, &p.ids), (&q.text, &q.ids), "{what}");
            assert!(
                (p.score - q.score).abs() < 1e-4,
                "{what}: {} vs {}",
                p.score,
                q.score
            );
        }
    }
}

#[test]
fn routes_that_hold_every_word_change_nothing() {
    let mut engine = engine();
    let full = engine.output_head().unwrap();
    let (v, a) = (full.vocab_size(), full.dim());
    let reference = translate(&engine, 4);
    // L2S: random cluster vectors, every cluster every word.
    let all: Vec<u32> = (0..v as u32).collect();
    let l2s = L2sHead::new(
        "all",
        &full,
        &seeded_values(3 * a, 1),
        &vec![all.clone(); 3],
    )
    .unwrap();
    engine.set_screen(Some(Screen::from_l2s(&engine, &l2s).unwrap()));
    assert_same(&reference, &translate(&engine, 4), "l2s");
    // DS: one expert holding the output layer itself (its gate weight is 1).
    let expert = Expert {
        ids: all.clone(),
        weights: all
            .iter()
            .flat_map(|&i| full.matrix().row(i as usize))
            .collect(),
        bias: all
            .iter()
            .map(|&i| full.matrix().bias(i as usize))
            .collect(),
    };
    let ds = DsHead::new("one", &full, &seeded_values(a, 2), &[0.5], &[expert]).unwrap();
    engine.set_screen(Some(Screen::from_ds(&engine, &ds).unwrap()));
    assert_same(&reference, &translate(&engine, 4), "ds");
}

/// Two clusters of a few words each, split by the sign of the first coordinate of `h̃`.
fn small_head(engine: &Translator, full: &FullHead) -> (L2sHead, Vec<Vec<u32>>) {
    let v = engine.tgt_vocab();
    let words = |ws: &str| -> Vec<u32> { ws.split(' ').map(|w| v.get(w).unwrap()).collect() };
    let sets = vec![
        words("Im Anfang war das Wort , und bei Gott . Jesus weinte"),
        words("Denn so hat Gott die Welt geliebt Licht scheint in der Finsternis ."),
    ];
    let mut clusters = vec![0.0f32; 2 * full.dim()];
    clusters[0] = 1.0;
    clusters[full.dim()] = -1.0;
    (L2sHead::new("small", full, &clusters, &sets).unwrap(), sets)
}

#[test]
fn ids_come_back_through_routes_beam_and_n_best_whatever_the_batch() {
    let mut engine = engine();
    let full = engine.output_head().unwrap();
    let (head, sets) = small_head(&engine, &full);
    let screen = Screen::from_l2s(&engine, &head).unwrap();
    let eos = engine.tgt_vocab().eos();
    // `<eos>` joins every cluster, so every hypothesis can end.
    assert_eq!(screen.n_routes(), sets.len());
    for (t, set) in sets.iter().enumerate() {
        let ids: Vec<u32> = screen.set(t).ids().collect();
        assert!(ids.contains(&eos) && ids.len() == set.len() + 1);
    }
    engine.set_screen(Some(screen));
    let out = translate(&engine, 2);
    let allowed: Vec<u32> = sets.concat();
    let vocab = engine.tgt_vocab();
    for (line, nbest) in VERSES.iter().zip(&out) {
        assert_eq!(nbest.len(), if line.is_empty() { 1 } else { 3 });
        for t in nbest {
            assert!(t.ids.iter().all(|id| allowed.contains(id)), "{}", t.text);
            for (tok, &id) in t.tokens.iter().zip(&t.ids) {
                assert_eq!(tok, vocab.word(id));
            }
            assert!(t.score.is_finite());
        }
    }
    // A row's route depends on its context only: batching changes nothing.
    assert_same(&out, &translate(&engine, 1), "batch 1 vs 2");
    assert_same(&out, &translate(&engine, 5), "batch 5 vs 2");
}

#[test]
fn heads_that_cannot_serve_are_refused() {
    let mut engine = engine();
    let full = engine.output_head().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // No such head.
    let err = Screen::load(&engine, tmp.path(), "l2s")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("train-head l2s"), "{err}");
    // A head trained for another output layer of the same shape.
    let other = FullHead::new(
        &seeded_values(full.vocab_size() * full.dim(), 9),
        &vec![0.0; full.vocab_size()],
        full.dim(),
    )
    .unwrap();
    let (head, _) = small_head(&engine, &other);
    head.save(
        &tmp.path().join("heads/foreign"),
        &other,
        serde_json::Value::Null,
        &[],
    )
    .unwrap();
    let err = Screen::load(&engine, tmp.path(), "foreign")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("another model"), "{err}");
    // The right output layer loads.
    let (head, _) = small_head(&engine, &full);
    head.save(
        &tmp.path().join("heads/mine"),
        &full,
        serde_json::Value::Null,
        &[],
    )
    .unwrap();
    let screen = Screen::load(&engine, tmp.path(), "mine").unwrap();
    assert_eq!((screen.kind(), screen.n_routes()), ("l2s", 2));
    assert_eq!(screen.trained_as(), None, "a head saved without a report");
    // Which clusters are served, as the training report says: k-means kept, or learned.
    for (best, says) in [
        (0, "none of its 2 learned rounds raised validation P@k"),
        (2, "learned by the Gumbel step (round 2 of 2)"),
    ] {
        let report = serde_json::json!({"report": {"best_round": best, "rounds": [{}, {}, {}]}});
        head.save(&tmp.path().join("heads/mine"), &full, report, &[])
            .unwrap();
        let screen = Screen::load(&engine, tmp.path(), "mine").unwrap();
        let how = screen.trained_as().unwrap_or_default();
        assert!(how.contains(says), "{how}");
    }
    let screen = Screen::load(&engine, tmp.path(), "mine").unwrap();
    // A head and a vocabulary map at once: an error, not a silent choice.
    engine.set_screen(Some(screen));
    let map = VocabMap::parse("\t.\n")
        .unwrap()
        .for_vocab(engine.tgt_vocab())
        .unwrap();
    engine.set_vocab_map(Some((map, VmapScope::Sentence)));
    let err = engine
        .translate(&["Jesus wept."], &opts(), &mut Profile::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("one of them"), "{err}");
}
