//! Transformer translator on burn (Vaswani et al. 2017): the teacher of sequence-level
//! distillation (Kim & Rush 2016), as in the OpenNMT WNMT-2018 system.
//!
//! Built from burn's own encoder and decoder stacks, pre-norm (layer norm before each
//! sub-layer, one more after the last layer), which trains without the post-norm's fragile
//! warm-up. Embeddings are scaled by `√d` and summed with sinusoidal positions; the output
//! layer is the target embedding's transpose when `tied`. The forward walks burn's layers here
//! ([`encoder_layer`], [`decoder_layer`]: the same ops in the same order as burn's `forward`)
//! so that every dropout is [`crate::fused::dropout`], whose masks are cheap on the CPU.
//!
//! Shapes (`B` sentences, `S` source and `T` target tokens, `D = d_model`):
//! - encoder: `src [B, S]` → `memory [B, S, D]` (batches hold one source length, so there is
//!   no padding to mask: see [`crate::train_nmt`]);
//! - decoder: `tgt_in [B, T]` (`<eos>`, then the target) and `memory` → `h [B, T, D]` under a
//!   causal mask, so a padded target position never reaches a real one;
//! - output: `h · W + b` with `W [D, V]`.

use burn::module::{Module, Param};
use burn::nn::attention::{generate_autoregressive_mask, MultiHeadAttention};
use burn::nn::transformer::{
    PositionWiseFeedForward, TransformerDecoder, TransformerDecoderConfig, TransformerDecoderLayer,
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderLayer,
};
use burn::nn::{
    Dropout, DropoutConfig, Embedding, EmbeddingConfig, Initializer, LayerNorm, LayerNormConfig,
    Linear, LinearConfig, PositionalEncoding, PositionalEncodingConfig,
};
use burn::tensor::activation::{quiet_softmax, softmax};
use burn::tensor::{Bool, Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use crate::lm::{weight_and_bias, Ops};
use crate::seq2seq::NmtBatch;

/// Shape of a Transformer translator. The vocabulary sizes come from the training text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformerConfig {
    /// Width of embeddings and of every layer's input and output.
    pub d_model: usize,
    /// Width of the feed-forward sub-layers.
    pub d_ff: usize,
    /// Attention heads (`d_model` must be a multiple).
    pub n_heads: usize,
    pub enc_layers: usize,
    pub dec_layers: usize,
    /// Dropout on embeddings, attention weights and every residual branch (0 = none).
    #[serde(default)]
    pub dropout: f64,
    /// Output matrix = target embedding.
    #[serde(default)]
    pub tied: bool,
}

/// Longest sequence the positional table covers: training pairs are cut at `train.max_len`
/// and decoding stops at `2·S + 10`, both far below.
pub const MAX_POSITIONS: usize = 1024;

impl TransformerConfig {
    /// Why this shape cannot be built, if it cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.d_model == 0
            || self.d_ff == 0
            || self.n_heads == 0
            || self.enc_layers == 0
            || self.dec_layers == 0
        {
            return Err(
                "model.d_model, d_ff, n_heads, enc_layers and dec_layers must be at least 1".into(),
            );
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            return Err(format!(
                "model.d_model ({}) must be a multiple of n_heads ({})",
                self.d_model, self.n_heads
            ));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(format!(
                "model.dropout ({}) must be in [0, 1)",
                self.dropout
            ));
        }
        Ok(())
    }

    /// A freshly initialised translator for the given vocabulary sizes: Xavier-uniform
    /// projections, embeddings `N(0, 1/d)` (scaled by `√d` on use, so they start at unit
    /// variance).
    pub fn init(&self, src_vocab: usize, tgt_vocab: usize, device: &Device) -> TransformerNmt {
        let d = self.d_model;
        let xavier = Initializer::XavierUniform { gain: 1.0 };
        let embedding = |v| {
            EmbeddingConfig::new(v, d)
                .with_initializer(Initializer::Normal {
                    mean: 0.0,
                    std: (d as f64).powf(-0.5),
                })
                .init(device)
        };
        let encoder = TransformerEncoderConfig::new(d, self.d_ff, self.n_heads, self.enc_layers)
            .with_dropout(self.dropout)
            .with_norm_first(true)
            .with_initializer(xavier.clone())
            .init(device);
        let decoder = TransformerDecoderConfig::new(d, self.d_ff, self.n_heads, self.dec_layers)
            .with_dropout(self.dropout)
            .with_norm_first(true)
            .with_initializer(xavier.clone())
            .init(device);
        let output = (!self.tied).then(|| {
            LinearConfig::new(d, tgt_vocab)
                .with_bias(false)
                .with_initializer(xavier)
                .init(device)
        });
        TransformerNmt {
            src_embedding: embedding(src_vocab),
            tgt_embedding: embedding(tgt_vocab),
            positions: PositionalEncodingConfig::new(d)
                .with_max_sequence_size(MAX_POSITIONS)
                .init(device),
            encoder,
            decoder,
            enc_norm: LayerNormConfig::new(d).init(device),
            dec_norm: LayerNormConfig::new(d).init(device),
            output,
            output_bias: Param::from_tensor(Tensor::<1>::zeros([tgt_vocab], device)),
            dropout: DropoutConfig::new(self.dropout).init(),
            d_model: d,
        }
    }
}

/// The network (see the module docs).
#[derive(Module, Debug)]
pub struct TransformerNmt {
    pub src_embedding: Embedding,
    pub tgt_embedding: Embedding,
    pub positions: PositionalEncoding,
    pub encoder: TransformerEncoder,
    pub decoder: TransformerDecoder,
    /// The pre-norm stacks' final layer norms.
    pub enc_norm: LayerNorm,
    pub dec_norm: LayerNorm,
    /// `None` when tied to the target embedding.
    pub output: Option<Linear>,
    pub output_bias: Param<Tensor<1>>,
    pub dropout: Dropout,
    pub d_model: usize,
}

impl TransformerNmt {
    /// `ids [B, L]` → `[B, L, D]`: embedding · √d + positions, then dropout.
    fn embed(&self, table: &Embedding, ids: Tensor<2, Int>) -> Tensor<3> {
        let x = crate::fused::embed(table, ids) * (self.d_model as f64).sqrt();
        crate::fused::dropout(&self.dropout, self.positions.forward(x))
    }

    /// `src [B, S]` → `memory [B, S, D]`.
    pub fn encode(&self, src: Tensor<2, Int>) -> Tensor<3> {
        let x = self.embed(&self.src_embedding, src);
        let x = self.encoder.layers.iter().fold(x, encoder_layer);
        self.enc_norm.forward(x)
    }

    /// `tgt_in [B, T]` and `memory [B, S, D]` → `h [B, T, D]`, each position seeing itself and
    /// the ones before.
    pub fn decode(&self, tgt_in: Tensor<2, Int>, memory: Tensor<3>) -> Tensor<3> {
        let [b, t] = tgt_in.dims();
        let mask = generate_autoregressive_mask(b, t, &tgt_in.device());
        let x = self.embed(&self.tgt_embedding, tgt_in);
        let x = self
            .decoder
            .layers
            .iter()
            .fold(x, |x, layer| decoder_layer(x, layer, &memory, &mask));
        self.dec_norm.forward(x)
    }

    /// The output layer: weight `[D, V]` (the target embedding's transpose when tied), bias `[V]`.
    pub fn output_layer(&self) -> (Tensor<2>, Tensor<1>) {
        let w = match &self.output {
            Some(out) => weight_and_bias(out).0,
            None => self.tgt_embedding.weight.val().transpose(),
        };
        (w, self.output_bias.val())
    }

    /// `(objective, nll)` of a batch: the mean negative log-likelihood of its real target
    /// positions and, with label smoothing `ε`, the cross-entropy against
    /// `(1 − ε)·onehot + ε·uniform` (see [`crate::seq2seq::smoothed_nll`]).
    pub fn smoothed_loss(
        &self,
        batch: &NmtBatch,
        ops: Ops,
        negatives: Option<&crate::fused::Negatives>,
        label_smoothing: f64,
    ) -> (Tensor<1>, Tensor<1>) {
        let device = self.src_embedding.weight.device();
        let (src, tgt_in, targets, rows) = batch.tensors(&device);
        let h = self.decode(tgt_in, self.encode(src));
        let [b, t, d] = h.dims();
        let h = crate::fused::select(h.reshape([b * t, d]), 0, rows);
        let (w, bias) = self.output_layer();
        crate::seq2seq::smoothed_nll(h, w, bias, targets, ops, negatives, label_smoothing)
    }

    /// Greedy decoding of a batch of one source length: `src [B, S]` → target ids per sentence
    /// (without the final `<eos>`), at most `max_len` each. Each step runs the decoder over the
    /// whole prefix (no cache): simple, and cheap at sentence lengths.
    pub fn greedy(&self, src: Tensor<2, Int>, eos: u32, max_len: usize) -> Vec<Vec<u32>> {
        let device = src.device();
        let [b, _] = src.dims();
        let memory = self.encode(src);
        let (w, bias) = self.output_layer();
        let mut prefix: Vec<Vec<u32>> = vec![vec![eos]; b];
        let mut out = vec![Vec::new(); b];
        let mut done = vec![false; b];
        for t in 1..=max_len.min(MAX_POSITIONS - 1) {
            let ids: Vec<i64> = prefix.iter().flatten().map(|&i| i as i64).collect();
            let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [b, t]), &device);
            let h = self.decode(ids, memory.clone());
            let last = h
                .slice([0..b, t - 1..t, 0..self.d_model])
                .reshape([b, self.d_model]);
            let logits = last.matmul(w.clone()) + bias.clone().unsqueeze_dim(0);
            let best: Vec<i64> = logits
                .argmax(1)
                .into_data()
                .convert::<i64>()
                .try_into_vec::<i64>()
                .expect("int ids");
            for (i, &y) in best.iter().enumerate() {
                prefix[i].push(y as u32);
                if !done[i] {
                    if y as u32 == eos {
                        done[i] = true;
                    } else {
                        out[i].push(y as u32);
                    }
                }
            }
            if done.iter().all(|&d| d) {
                break;
            }
        }
        out
    }
}

/// burn's pre-norm `TransformerEncoderLayer::forward`: `x [B, S, D]` → `[B, S, D]`.
pub fn encoder_layer(x: Tensor<3>, layer: &TransformerEncoderLayer) -> Tensor<3> {
    let drop = |t| crate::fused::dropout(&layer.dropout, t);
    let h = layer.norm_2.forward(x.clone());
    let x = x + drop(attention(&layer.mha, h.clone(), h, None));
    let h = feed_forward(&layer.pwff, layer.norm_1.forward(x.clone()));
    x + drop(h)
}

/// burn's pre-norm `TransformerDecoderLayer::forward`: `x [B, T, D]`, `memory [B, S, D]` and the
/// self-attention's `mask [B, T, T]` (true = hidden) → `[B, T, D]`.
pub fn decoder_layer(
    x: Tensor<3>,
    layer: &TransformerDecoderLayer,
    memory: &Tensor<3>,
    mask: &Tensor<3, Bool>,
) -> Tensor<3> {
    let drop = |t| crate::fused::dropout(&layer.dropout, t);
    let h = layer.norm_3.forward(x.clone());
    let x = x + drop(attention(
        &layer.self_attn,
        h.clone(),
        h,
        Some(mask.clone()),
    ));
    let h = layer.norm_1.forward(x.clone());
    let x = x + drop(attention(&layer.cross_attn, h, memory.clone(), None));
    let h = feed_forward(&layer.pwff, layer.norm_2.forward(x.clone()));
    x + drop(h)
}

/// burn's `MultiHeadAttention::forward`'s context: `query [B, T, D]` attends over
/// `keys [B, S, D]` (keys and values from the same rows), `mask [B, T, S]` hiding what is true.
fn attention(
    mha: &MultiHeadAttention,
    query: Tensor<3>,
    keys: Tensor<3>,
    mask: Option<Tensor<3, Bool>>,
) -> Tensor<3> {
    let [b, t, d] = query.dims();
    // [B, L, D] → [B, heads, L, d_k]
    let heads = |x: Tensor<3>, linear: &Linear| {
        let [b, l, _] = x.dims();
        linear
            .forward(x)
            .reshape([b, l, mha.n_heads, mha.d_k])
            .swap_dims(1, 2)
    };
    let q = heads(query, &mha.query);
    let k = heads(keys.clone(), &mha.key);
    let v = heads(keys, &mha.value);
    let mut scores = q.matmul(k.transpose()).div_scalar((mha.d_k as f32).sqrt());
    if let Some(mask) = mask {
        let [b, t, s] = mask.dims();
        scores = scores.mask_fill(mask.reshape([b, 1, t, s]), mha.min_float);
    }
    let weights = if mha.quiet_softmax {
        quiet_softmax(scores, 3)
    } else {
        softmax(scores, 3)
    };
    let weights = crate::fused::dropout(&mha.dropout, weights);
    let context = weights.matmul(v).swap_dims(1, 2).reshape([b, t, d]);
    mha.output.forward(context)
}

/// burn's `PositionWiseFeedForward::forward`: `x [B, L, D]` → `[B, L, D]`.
fn feed_forward(ff: &PositionWiseFeedForward, x: Tensor<3>) -> Tensor<3> {
    let h = ff.activation.forward(ff.linear_inner.forward(x));
    ff.linear_outer
        .forward(crate::fused::dropout(&ff.dropout, h))
}
