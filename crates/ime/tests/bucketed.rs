//! The bucketed-softmax scorer on a small seeded LSTM: one full-width bucket is the full
//! softmax; narrower levels still give a distribution over every word.

use fastsoftmax_ime::{BucketKind, BucketScorer, LstmScorer, Scorer};
use fastsoftmax_infer::heads::bucketed::Bucket;
use fastsoftmax_infer::kernels::seeded_values;
use fastsoftmax_infer::LanguageModel;
mod common;

fn model() -> LanguageModel {
    let words = common::WORDS.iter().map(|s| s.to_string()).collect();
    LanguageModel::from_weights(common::lstm_weights(words, 16)).unwrap()
}

/// `ln p(w)` of every word after the sentence start and one more word.
fn all_log_probs<S: Scorer>(s: &mut S, v: usize) -> Vec<f32> {
    let start = s.initial();
    let next = s.advance(&[(&start, 3)]).remove(0);
    let words: Vec<u32> = (0..v as u32).collect();
    let mut out = vec![0.0; v];
    s.log_probs(&next, &words, &mut out);
    out
}

fn lse(x: &[f32]) -> f64 {
    x.iter().map(|&l| (l as f64).exp()).sum::<f64>().ln()
}

#[test]
fn one_full_width_bucket_is_the_full_softmax() {
    let lm = model();
    let (v, d) = (lm.vocab().len(), 16);
    let m = lm.full_head().matrix();
    let bucket = Bucket {
        ids: (0..v as u32).collect(),
        proj: None,
        weights: (0..v).flat_map(|r| m.row(r)).collect(),
        bias: (0..v).map(|r| m.bias(r)).collect(),
    };
    assert_eq!(bucket.width(d), d);
    let mut full = LstmScorer::new(&lm).unwrap();
    let mut one = BucketScorer::new(&lm, BucketKind::Dsoftmax, &[bucket]).unwrap();
    let (a, b) = (all_log_probs(&mut full, v), all_log_probs(&mut one, v));
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() < 1e-4, "{x} vs {y}");
    }
}

/// Three buckets of the vocabulary at d, d/2 and d/4, with seeded parameters; the
/// adaptive head level also holds one row per tail cluster.
fn buckets(v: usize, d: usize, adaptive: bool) -> Vec<Bucket> {
    let cuts = [0, v / 4, v / 2, v];
    (0..3)
        .map(|i| {
            let di = d >> i;
            let n = cuts[i + 1] - cuts[i] + if adaptive && i == 0 { 2 } else { 0 };
            Bucket {
                ids: (cuts[i] as u32..cuts[i + 1] as u32).collect(),
                proj: (i > 0).then(|| seeded_values(di * d, 5 + i as u64)),
                weights: seeded_values(n * di, 9 + i as u64),
                bias: seeded_values(n, 13 + i as u64),
            }
        })
        .collect()
}

#[test]
fn narrower_levels_still_normalise_over_every_word() {
    let lm = model();
    let (v, d) = (lm.vocab().len(), 16);
    for (kind, adaptive) in [(BucketKind::Dsoftmax, false), (BucketKind::Adaptive, true)] {
        let mut s = BucketScorer::new(&lm, kind, &buckets(v, d, adaptive)).unwrap();
        let lp = all_log_probs(&mut s, v);
        assert!(lse(&lp).abs() < 1e-4, "{kind:?}: ln Σ p = {}", lse(&lp));
        // Adaptive: the words of a cluster share its probability; D-softmax: one softmax.
        assert!(lp.iter().all(|x| x.is_finite() && *x < 0.0));
    }
}

#[test]
fn buckets_that_miss_a_word_are_refused() {
    let lm = model();
    let (v, d) = (lm.vocab().len(), 16);
    let mut b = buckets(v, d, false);
    b[2].ids.pop();
    let n = b[2].ids.len();
    b[2].weights.truncate(n * 4);
    b[2].bias.pop();
    let err = BucketScorer::new(&lm, BucketKind::Dsoftmax, &b)
        .err()
        .unwrap();
    assert!(err.to_string().contains("do not cover"), "{err}");
}
