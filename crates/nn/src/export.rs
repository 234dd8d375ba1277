//! burn [`LanguageModel`] ↔ the engine's artifact ([`fastsoftmax_infer::model::artifact::LmWeights`]):
//! [`export`] writes a trained model, [`from_weights`] reads one back into burn to train on
//! (`train-lm --init` from a folder without burn's checkpoint, such as a shipped model).

use std::path::Path;

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::{Device, Tensor, TensorData};
use fastsoftmax_infer::model::artifact::{LmSpec, LmWeights, RecurrentWeights};
use fastsoftmax_infer::Vocab;

use crate::lm::LanguageModel;
use crate::{Error, Result};

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

/// A row-major `[rows, cols]` matrix as burn's linear weight `[cols, rows]`.
fn linear_weight(rows: &[f32], n_rows: usize, device: &Device) -> Param<Tensor<2>> {
    let cols = rows.len() / n_rows.max(1);
    let t = Tensor::<2>::from_data(TensorData::new(rows.to_vec(), [n_rows, cols]), device);
    Param::from_tensor(t.transpose())
}

fn vector(v: &[f32], device: &Device) -> Param<Tensor<1>> {
    Param::from_tensor(Tensor::from_data(
        TensorData::new(v.to_vec(), [v.len()]),
        device,
    ))
}

/// `model` (freshly initialised from the config) with the weights of `w`, the inverse of
/// [`to_weights`]. The config's model section must describe `w`: a mismatch is an error that
/// names both shapes.
pub fn from_weights(
    mut model: LanguageModel,
    w: &LmWeights,
    device: &Device,
) -> Result<LanguageModel> {
    let s = w.spec;
    let [vocab, d_rows] = model.embedding.weight.dims();
    let have = (
        model.cell,
        vocab,
        d_rows,
        model.d_hidden,
        model.layers.len(),
        model.output.is_none(),
    );
    let want = (
        s.cell,
        s.vocab_size,
        s.d_embed,
        s.d_hidden,
        s.n_layers,
        s.tied,
    );
    if have != want || model.embedding_factor.is_some() {
        return Err(Error::Invalid(format!(
            "the config builds (cell, vocab, d_embed, d_hidden, layers, tied) = {have:?}{}, the \
             weights are {want:?}: make the config's model section match the model",
            if model.embedding_factor.is_some() {
                " factorised"
            } else {
                ""
            }
        )));
    }
    model.embedding.weight = Param::from_tensor(Tensor::from_data(
        TensorData::new(w.embedding.clone(), [vocab, d_rows]),
        device,
    ));
    let gates = s.cell.gates() * s.d_hidden;
    for (layer, lw) in model.layers.iter_mut().zip(&w.layers) {
        layer.w_ih.weight = linear_weight(&lw.w_ih, gates, device);
        layer.w_ih.bias = Some(vector(&lw.b_ih, device));
        layer.w_hh.weight = linear_weight(&lw.w_hh, gates, device);
        layer.w_hh.bias = Some(vector(&lw.b_hh, device));
    }
    match (&mut model.output, &w.output_weight) {
        (Some(out), Some(ow)) => {
            out.weight = linear_weight(ow, vocab, device);
            out.bias = Some(vector(&w.output_bias, device));
        }
        _ => model.tied_bias = Some(vector(&w.output_bias, device)),
    }
    Ok(model)
}
