//! Transformer translator on burn (Vaswani et al. 2017): the teacher of sequence-level
//! distillation (Kim & Rush 2016), as in the OpenNMT WNMT-2018 system.
//!
//! Built from burn's own encoder and decoder stacks, pre-norm (layer norm before each
//! sub-layer, one more after the last layer), which trains without the post-norm's fragile
//! warm-up. Embeddings are scaled by `√d` and summed with sinusoidal positions; the output
//! layer is the target embedding's transpose when `tied`.
//!
//! Shapes (`B` sentences, `S` source and `T` target tokens, `D = d_model`):
//! - encoder: `src [B, S]` → `memory [B, S, D]` (batches hold one source length, so there is
//!   no padding to mask: see [`crate::train_nmt`]);
//! - decoder: `tgt_in [B, T]` (`<eos>`, then the target) and `memory` → `h [B, T, D]` under a
//!   causal mask, so a padded target position never reaches a real one;
//! - output: `h · W + b` with `W [D, V]`.

use burn::module::{Module, Param};
use burn::nn::attention::generate_autoregressive_mask;
use burn::nn::transformer::{
    TransformerDecoder, TransformerDecoderConfig, TransformerDecoderInput, TransformerEncoder,
    TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{
    Dropout, DropoutConfig, Embedding, EmbeddingConfig, Initializer, LayerNorm, LayerNormConfig,
    Linear, LinearConfig, PositionalEncoding, PositionalEncodingConfig,
};
use burn::tensor::{Device, Int, Tensor, TensorData};
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
        self.dropout.forward(self.positions.forward(x))
    }

    /// `src [B, S]` → `memory [B, S, D]`.
    pub fn encode(&self, src: Tensor<2, Int>) -> Tensor<3> {
        let x = self.embed(&self.src_embedding, src);
        self.enc_norm
            .forward(self.encoder.forward(TransformerEncoderInput::new(x)))
    }

    /// `tgt_in [B, T]` and `memory [B, S, D]` → `h [B, T, D]`, each position seeing itself and
    /// the ones before.
    pub fn decode(&self, tgt_in: Tensor<2, Int>, memory: Tensor<3>) -> Tensor<3> {
        let [b, t] = tgt_in.dims();
        let mask = generate_autoregressive_mask(b, t, &tgt_in.device());
        let x = self.embed(&self.tgt_embedding, tgt_in);
        let input = TransformerDecoderInput::new(x, memory).target_mask_attn(mask);
        self.dec_norm.forward(self.decoder.forward(input))
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
