//! The vocabulary map inside beam search, on the shipped translator: the bug classes peers
//! shipped (ids not mapped back through the beam and the n-best list, `<eos>` missing from the
//! shortlist, output that changes when the map covers everything) and how batching matters.

mod common;

use fastsoftmax_translate::{Profile, SearchOptions, Translation, Translator, VmapScope, VocabMap};

const VERSES: [&str; 6] = [
    "In the beginning was the Word, and the Word was with God, and the Word was God.",
    "Jesus wept.",
    "",
    "For God so loved the world, that he gave his one and only Son.",
    "Peter answered him, Lord, to whom would we go?",
    "The light shines in the darkness, and the darkness hasn't overcome it.",
];

/// The shipped translator as the f32 engine over every word, so that each test chooses the map.
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

/// Translates `VERSES` in batches of `batch`.
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

/// A map whose 0-gram list is the whole target vocabulary (specials aside).
fn covering_map(engine: &Translator) -> VocabMap {
    let v = engine.tgt_vocab();
    let words: Vec<String> = (0..v.len() as u32)
        .filter(|&i| i != v.eos() && i != v.unk())
        .map(|i| v.word(i).to_string())
        .collect();
    VocabMap {
        entries: [(String::new(), words)].into(),
    }
}

#[test]
fn a_map_that_covers_everything_changes_nothing() {
    let mut engine = engine();
    let full = translate(&engine, 4);
    for scope in [VmapScope::Sentence, VmapScope::Batch] {
        let map = covering_map(&engine).for_vocab(engine.tgt_vocab()).unwrap();
        assert_eq!(map.unknown, 0);
        engine.set_vocab_map(Some((map, scope)));
        let mapped = translate(&engine, 4);
        // Same hypotheses, same ids, same scores (up to float summation order).
        assert_eq!(full.len(), mapped.len());
        for (a, b) in full.iter().zip(&mapped) {
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(b) {
                assert_eq!((&x.text, &x.ids), (&y.text, &y.ids), "{scope:?}");
                assert!(
                    (x.score - y.score).abs() < 1e-4,
                    "{} vs {}",
                    x.score,
                    y.score
                );
            }
        }
        engine.set_vocab_map(None);
    }
}

#[test]
fn ids_come_back_in_the_full_vocabulary_through_beam_and_n_best() {
    let mut engine = engine();
    let vocab = engine.tgt_vocab().clone();
    // A small map: a handful of n-grams and a short 0-gram list. Every id the search returns
    // must be one of the shortlist's words, named by the full vocabulary (a shortlist row index
    // leaking out would name some unrelated word).
    let text = "\t. , und der die das\nGod\tGott\nWord\tWort\nbeginning\tAnfang\nJesus\tJesus\n\
                wept\tweinte vergoss Tränen\nworld\tWelt\nloved\tliebte\nSon\tSohn\nLord\tHerr\n\
                light\tLicht\ndarkness\tFinsternis\nwas\twar\nIn\tIm\n";
    let map = VocabMap::parse(text).unwrap();
    let shortlister = map.for_vocab(&vocab).unwrap();
    engine.set_vocab_map(Some((shortlister.clone(), VmapScope::Sentence)));
    let out = translate(&engine, 3);
    for (line, nbest) in VERSES.iter().zip(&out) {
        assert_eq!(nbest.len(), if line.is_empty() { 1 } else { 3 });
        let src = engine.source(line, 250);
        let allowed = shortlister.shortlist(&[src.tokens.as_slice()]);
        for t in nbest {
            for &id in &t.ids {
                assert!(
                    allowed.binary_search(&id).is_ok(),
                    "{} outside the shortlist",
                    vocab.word(id)
                );
            }
            // Tokens are the vocabulary's words for the ids (`<unk>` replaced by a source word).
            for (tok, &id) in t.tokens.iter().zip(&t.ids) {
                assert!(id == vocab.unk() || tok == vocab.word(id));
            }
            assert!(t.score.is_finite() && (line.is_empty() || t.log_prob < 0.0));
        }
    }
    // "Jesus wept." can only be made of its shortlist, which holds these words.
    assert!(out[1][0].text.contains("Jesus"), "{}", out[1][0].text);
}

#[test]
fn sentence_shortlists_do_not_depend_on_batching_and_batch_shortlists_are_their_union() {
    let mut engine = engine();
    let map = VocabMap::parse(
        "\t. , und der die das er sie es ist\nGod\tGott Gottes\nWord\tWort\nworld\tWelt\n\
         light\tLicht\ndarkness\tFinsternis\nLord\tHerr\nwept\tweinte\n",
    )
    .unwrap()
    .for_vocab(engine.tgt_vocab())
    .unwrap();
    engine.set_vocab_map(Some((map.clone(), VmapScope::Sentence)));
    let one = translate(&engine, 1);
    assert_eq!(one, translate(&engine, 6));
    // A batch of one sentence has the same shortlist under either scope.
    engine.set_vocab_map(Some((map, VmapScope::Batch)));
    assert_eq!(one, translate(&engine, 1));
    // In larger batches a sentence may use its neighbours' words: documented, not an error;
    // every id still comes from the batch's union.
    let batched = translate(&engine, 6);
    assert_eq!(batched.len(), VERSES.len());
}
