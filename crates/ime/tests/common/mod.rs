//! The seeded fixture LSTM of the scorer tests.

use fastsoftmax_infer::model::artifact::{Cell, LmSpec, LmWeights, RecurrentWeights};
use fastsoftmax_infer::Vocab;

/// Words of the fixtures: homophones the context must tell apart.
pub const WORDS: &[&str] = &[
    "今日/きょう",
    "京/きょう",
    "は/は",
    "葉/は",
    "いい/いい",
    "良い/いい",
];

/// A one-layer tied LSTM of width `d` over `words` (plus `<unk>` and `<eos>`), with seeded
/// sinusoidal weights: the arithmetic is checked, not the conversions' quality.
pub fn lstm_weights(words: Vec<String>, d: usize) -> LmWeights {
    let vocab = Vocab::from_words(words).unwrap();
    let v = vocab.len();
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
