//! A tiny seeded model shared by the integration tests.

use fastsoftmax_infer::model::artifact::{Cell, LmSpec, LmWeights, RecurrentWeights};
use fastsoftmax_infer::Vocab;

pub fn fixture() -> LmWeights {
    let (v, e, h) = (6usize, 3usize, 4usize);
    let vals = |n: usize, s: f32| {
        (0..n)
            .map(|i| ((i as f32 * 0.37 + s).sin()) * 0.5)
            .collect::<Vec<_>>()
    };
    let words = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
    LmWeights {
        spec: LmSpec {
            cell: Cell::Lstm,
            vocab_size: v,
            d_embed: e,
            d_hidden: h,
            n_layers: 1,
            tied: false,
        },
        vocab: Vocab::from_words(words).unwrap(),
        embedding: vals(v * e, 0.1),
        layers: vec![RecurrentWeights {
            w_ih: vals(4 * h * e, 0.2),
            w_hh: vals(4 * h * h, 0.3),
            b_ih: vals(4 * h, 0.4),
            b_hh: vals(4 * h, 0.5),
        }],
        output_weight: Some(vals(v * h, 0.6)),
        output_bias: vals(v, 0.7),
    }
}
