//! burn [`LanguageModel`] → the engine's artifact ([`fastsoftmax_infer::model::artifact::LmWeights`]).

use std::path::Path;

use burn::nn::Linear;
use burn::tensor::Tensor;
use fastsoftmax_infer::model::artifact::{LmSpec, LmWeights, RecurrentWeights};
use fastsoftmax_infer::Vocab;

use crate::lm::LanguageModel;
use crate::Result;

pub(crate) fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .expect("f32 data after convert")
}

/// burn stores a linear weight as `[d_in, d_out]`; the engine wants row-major `[d_out, d_in]`.
pub(crate) fn weight_rows(l: &Linear) -> Vec<f32> {
    values(l.weight.val().transpose())
}

/// A linear layer's bias (zeros when it has none).
pub(crate) fn bias(l: &Linear) -> Vec<f32> {
    let n = l.weight.dims()[1];
    l.bias
        .as_ref()
        .map(|b| values(b.val()))
        .unwrap_or_else(|| vec![0.0; n])
}

/// Copies the weights of `model` out of burn.
pub fn to_weights(model: &LanguageModel, vocab: &Vocab) -> LmWeights {
    let embedding = model.embedding_matrix();
    let [vocab_size, d_embed] = embedding.dims();
    let layers = model
        .layers
        .iter()
        .map(|l| RecurrentWeights {
            w_ih: weight_rows(&l.w_ih),
            w_hh: weight_rows(&l.w_hh),
            b_ih: bias(&l.w_ih),
            b_hh: bias(&l.w_hh),
        })
        .collect();
    let (output_weight, output_bias) = match (&model.output, &model.tied_bias) {
        (Some(out), _) => (Some(weight_rows(out)), bias(out)),
        (None, Some(b)) => (None, values(b.val())),
        (None, None) => unreachable!("a model has an output layer or a tied bias"),
    };
    LmWeights {
        spec: LmSpec {
            cell: model.cell,
            vocab_size,
            d_embed,
            d_hidden: model.d_hidden,
            n_layers: model.layers.len(),
            tied: model.output.is_none(),
        },
        vocab: vocab.clone(),
        embedding: values(embedding),
        layers,
        output_weight,
        output_bias,
    }
}

/// Writes the engine artifact of `model` into `dir` (atomically, validated).
pub fn export(model: &LanguageModel, vocab: &Vocab, dir: &Path) -> Result<()> {
    to_weights(model, vocab).save(dir)?;
    Ok(())
}
