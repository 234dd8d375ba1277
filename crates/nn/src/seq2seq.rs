//! Attention sequence-to-sequence translator on burn (Luong et al. 2015, as OpenNMT builds it):
//! a bidirectional LSTM/GRU encoder, a decoder with Luong's *general* attention score and input
//! feeding, and an output layer over the target vocabulary.
//!
//! Shapes (`B` sentences, `S` source and `T` target tokens, `E` embedding, `H` hidden, `A` the
//! attentional vector):
//! - encoder: each layer runs a forward and a backward RNN of width `H/2` over `[B, S, ·]` and
//!   concatenates them → `enc [B, S, H]`; the decoder's layer `l` starts from the final states
//!   of encoder layer `enc_layers − dec_layers + l` (`[fwd_S; bwd_1]`, width `H`).
//! - decoder step `t`: input `[emb(y_{t−1}); h̃_{t−1}]` (`E + A`, input feeding; `h̃_0 = 0`), the
//!   stacked cells, then `score_s = h_t · keys_s` with `keys = enc·W_a` (`[B, S, H]`, computed
//!   once per batch), `α = softmax(score)`, `c_t = Σ α_s enc_s`, `h̃_t = tanh(W_c [c_t; h_t])`
//!   (`[B, A]`), and logits `h̃_t · W_out + b` over the target vocabulary.
//! - `tied`: the output matrix is the target embedding's transpose (`A = E`), which halves the
//!   largest matrices of a small model.
//!
//! Batches hold sentences of one source length (see [`crate::train_nmt`]), so the encoder sees no
//! padding and the backward direction is a plain flip of the time axis. Targets are padded; the
//! loss reads only the real positions.

use burn::module::{Module, Param};
use burn::nn::{
    Dropout, DropoutConfig, Embedding, EmbeddingConfig, Initializer, Linear, LinearConfig,
};
use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::{Device, Int, Tensor, TensorData};
use fastsoftmax_infer::model::artifact::Cell;
use serde::{Deserialize, Serialize};

use crate::lm::{weight_and_bias, Ops, RecurrentLayer};

/// Shape of a translator. The vocabulary sizes come from the training text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NmtConfig {
    /// Recurrent cell of encoder and decoder: `lstm` or `gru`.
    pub cell: Cell,
    /// Width of the source and target word embeddings.
    pub d_embed: usize,
    /// Width of the decoder's state and of the encoder's output (each direction `d_hidden/2`).
    pub d_hidden: usize,
    /// Bidirectional encoder layers.
    pub enc_layers: usize,
    /// Decoder layers (at most `enc_layers`: each starts from an encoder layer's final state).
    pub dec_layers: usize,
    /// Dropout on embeddings, between layers and on the attentional vector (0 = none).
    #[serde(default)]
    pub dropout: f64,
    /// Output matrix = target embedding (the attentional vector then has width `d_embed`).
    #[serde(default)]
    pub tied: bool,
    /// Parameters start uniform in `[-init_range, init_range]`.
    #[serde(default = "default_init_range")]
    pub init_range: f64,
}

fn default_init_range() -> f64 {
    0.1
}

impl NmtConfig {
    /// Width of the attentional vector `h̃` (the output layer's input).
    pub fn d_attn(&self) -> usize {
        if self.tied {
            self.d_embed
        } else {
            self.d_hidden
        }
    }

    /// Why this shape cannot be built, if it cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.d_embed == 0 || self.d_hidden == 0 || self.enc_layers == 0 || self.dec_layers == 0 {
            return Err(
                "model.d_embed, d_hidden, enc_layers and dec_layers must be at least 1".into(),
            );
        }
        if !self.d_hidden.is_multiple_of(2) {
            return Err(format!(
                "model.d_hidden ({}) must be even: each encoder direction gets half",
                self.d_hidden
            ));
        }
        if self.dec_layers > self.enc_layers {
            return Err(format!(
                "model.dec_layers ({}) must not exceed enc_layers ({}): each decoder layer starts from an encoder layer's final state",
                self.dec_layers, self.enc_layers
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

    /// A freshly initialised translator for the given vocabulary sizes.
    pub fn init(&self, src_vocab: usize, tgt_vocab: usize, device: &Device) -> Translator {
        let r = self.init_range;
        let init = Initializer::Uniform { min: -r, max: r };
        let half = self.d_hidden / 2;
        let encoder = (0..self.enc_layers)
            .map(|l| {
                let d_in = if l == 0 { self.d_embed } else { self.d_hidden };
                BiLayer {
                    fwd: RecurrentLayer::new(self.cell, d_in, half, &init, device),
                    bwd: RecurrentLayer::new(self.cell, d_in, half, &init, device),
                }
            })
            .collect();
        let a = self.d_attn();
        let decoder = (0..self.dec_layers)
            .map(|l| {
                let d_in = if l == 0 {
                    self.d_embed + a
                } else {
                    self.d_hidden
                };
                RecurrentLayer::new(self.cell, d_in, self.d_hidden, &init, device)
            })
            .collect();
        let linear = |d_in, d_out, bias| {
            LinearConfig::new(d_in, d_out)
                .with_bias(bias)
                .with_initializer(init.clone())
                .init(device)
        };
        let embedding = |v| {
            EmbeddingConfig::new(v, self.d_embed)
                .with_initializer(init.clone())
                .init(device)
        };
        let (output, tied_bias) = if self.tied {
            let b = Tensor::<1>::zeros([tgt_vocab], device);
            (None, Some(Param::from_tensor(b)))
        } else {
            (Some(linear(a, tgt_vocab, true)), None)
        };
        Translator {
            src_embedding: embedding(src_vocab),
            tgt_embedding: embedding(tgt_vocab),
            encoder,
            decoder,
            attn_score: linear(self.d_hidden, self.d_hidden, false),
            attn_out: linear(2 * self.d_hidden, a, false),
            output,
            tied_bias,
            dropout: DropoutConfig::new(self.dropout).init(),
            cell: self.cell,
            d_hidden: self.d_hidden,
            d_embed: self.d_embed,
        }
    }
}

/// One bidirectional encoder layer.
#[derive(Module, Debug)]
pub struct BiLayer {
    pub fwd: RecurrentLayer,
    pub bwd: RecurrentLayer,
}

/// The translator (see the module docs for the computation).
#[derive(Module, Debug)]
pub struct Translator {
    /// weight [src_vocab, E]
    pub src_embedding: Embedding,
    /// weight [tgt_vocab, E]
    pub tgt_embedding: Embedding,
    pub encoder: Vec<BiLayer>,
    pub decoder: Vec<RecurrentLayer>,
    /// `W_a`, weight [H, H], no bias: `keys = enc · W_a`.
    pub attn_score: Linear,
    /// `W_c`, weight [2H, A], no bias: `h̃ = tanh([c; h] · W_c)`.
    pub attn_out: Linear,
    /// weight [A, tgt_vocab]; `None` when tied to the target embedding.
    pub output: Option<Linear>,
    /// [tgt_vocab]; used only when tied.
    pub tied_bias: Option<Param<Tensor<1>>>,
    pub dropout: Dropout,
    #[module(skip)]
    pub cell: Cell,
    pub d_hidden: usize,
    pub d_embed: usize,
}

/// What the decoder attends to, computed once per batch.
#[derive(Debug, Clone)]
pub struct Encoded {
    /// [B, S, H]
    pub enc: Tensor<3>,
    /// `enc · W_a`, [B, S, H]
    pub keys: Tensor<3>,
}

/// The decoder's recurrent state: per layer `h` (and `c` for LSTM) `[B, H]`, and the last
/// attentional vector `h̃ [B, A]` (input feeding).
#[derive(Debug, Clone)]
pub struct DecoderState {
    pub h: Vec<Tensor<2>>,
    pub c: Vec<Tensor<2>>,
    pub feed: Tensor<2>,
}

impl Translator {
    pub fn src_vocab_size(&self) -> usize {
        self.src_embedding.weight.dims()[0]
    }

    pub fn tgt_vocab_size(&self) -> usize {
        self.tgt_embedding.weight.dims()[0]
    }

    /// Width of the attentional vector.
    pub fn d_attn(&self) -> usize {
        self.attn_out.weight.dims()[1]
    }

    /// The output layer: weight [A, tgt_vocab] (the target embedding's transpose when tied),
    /// bias [tgt_vocab].
    pub fn output_layer(&self) -> (Tensor<2>, Tensor<1>) {
        match (&self.output, &self.tied_bias) {
            (Some(out), _) => weight_and_bias(out),
            (None, Some(b)) => (self.tgt_embedding.weight.val().transpose(), b.val()),
            (None, None) => unreachable!("a translator has an output layer or a tied bias"),
        }
    }

    /// `src [B, S]` (one length per batch, no padding) → what the decoder attends to and its
    /// initial state.
    pub fn encode(&self, src: Tensor<2, Int>, ops: Ops) -> (Encoded, DecoderState) {
        let [batch, _] = src.dims();
        let device = src.device();
        let half = self.d_hidden / 2;
        let mut x = self
            .dropout
            .forward(crate::fused::embed(&self.src_embedding, src));
        let mut finals = Vec::with_capacity(self.encoder.len());
        for (l, layer) in self.encoder.iter().enumerate() {
            let zero = || Tensor::<2>::zeros([batch, half], &device);
            let (mut hf, mut cf, mut hb, mut cb) = (zero(), zero(), zero(), zero());
            let fwd = layer.fwd.forward(x.clone(), &mut hf, &mut cf, ops);
            let bwd = layer
                .bwd
                .forward(x.flip([1]), &mut hb, &mut cb, ops)
                .flip([1]);
            x = Tensor::cat(vec![fwd, bwd], 2);
            if l + 1 < self.encoder.len() {
                x = self.dropout.forward(x);
            }
            finals.push((Tensor::cat(vec![hf, hb], 1), Tensor::cat(vec![cf, cb], 1)));
        }
        let [b, s, h] = x.dims();
        let keys = self
            .attn_score
            .forward(x.clone().reshape([b * s, h]))
            .reshape([b, s, h]);
        let skip = self.encoder.len() - self.decoder.len();
        let (hs, cs) = finals.into_iter().skip(skip).unzip();
        let state = DecoderState {
            h: hs,
            c: cs,
            feed: Tensor::zeros([batch, self.d_attn()], &device),
        };
        (Encoded { enc: x, keys }, state)
    }

    /// One decoder step: `emb [B, E]` (the previous target words' embeddings) → `h̃ [B, A]`,
    /// which is also the state's new `feed`.
    fn step(&self, emb: Tensor<2>, state: &mut DecoderState, encoded: &Encoded) -> Tensor<2> {
        // Layer 0 reads [embedding; h̃_{t−1}] in one product. (Precomputing the embedding half
        // for the whole window costs more: each step's slice of it gets a window-sized zero
        // gradient in burn's autodiff.)
        let mut x = Tensor::cat(vec![emb, state.feed.clone()], 1);
        for (l, layer) in self.decoder.iter().enumerate() {
            if l > 0 {
                x = self.dropout.forward(state.h[l - 1].clone());
            }
            let xp = layer.w_ih.forward(x.clone());
            layer.step(xp, &mut state.h[l], &mut state.c[l]);
        }
        let top = state.h[self.decoder.len() - 1].clone();
        let [b, s, h] = encoded.enc.dims();
        let scores = encoded
            .keys
            .clone()
            .matmul(top.clone().reshape([b, h, 1]))
            .reshape([b, s]);
        let alpha = softmax(scores, 1).reshape([b, 1, s]);
        let context = alpha.matmul(encoded.enc.clone()).reshape([b, h]);
        let attn = self
            .attn_out
            .forward(Tensor::cat(vec![context, top], 1))
            .tanh();
        state.feed = self.dropout.forward(attn);
        state.feed.clone()
    }

    /// Teacher forcing: `tgt_in [B, T]` (`<eos>` then the target, padded) → `h̃ [B, T, A]`.
    pub fn decode(
        &self,
        tgt_in: Tensor<2, Int>,
        encoded: &Encoded,
        mut state: DecoderState,
    ) -> Tensor<3> {
        let [b, t] = tgt_in.dims();
        let emb = self
            .dropout
            .forward(crate::fused::embed(&self.tgt_embedding, tgt_in));
        let e = self.d_embed;
        let outs = (0..t)
            .map(|i| {
                let et = emb.clone().slice([0..b, i..i + 1, 0..e]).reshape([b, e]);
                self.step(et, &mut state, encoded)
            })
            .collect();
        Tensor::stack(outs, 1)
    }

    /// Logits of one decoder step's `h̃ [n, A]` → `[n, tgt_vocab]`.
    pub fn logits(&self, attn: Tensor<2>) -> Tensor<2> {
        let (w, b) = self.output_layer();
        attn.matmul(w) + b.unsqueeze_dim(0)
    }

    /// Mean negative log-likelihood of the real target positions of a batch: `src [B, S]`,
    /// `tgt_in`/`tgt_out [B, T]`, `rows` the flat indices `b·T + t` of the positions that are
    /// not padding. `negatives`: the sampled softmax of [`crate::fused::sampled`] in place of the
    /// full one (training only, flex only).
    pub fn loss(
        &self,
        batch: &NmtBatch,
        ops: Ops,
        negatives: Option<&crate::fused::Negatives>,
    ) -> Tensor<1> {
        self.smoothed_loss(batch, ops, negatives, 0.0).0
    }

    /// [`Self::loss`] with label smoothing `ε`: `(objective, nll)` (see [`smoothed_nll`]).
    pub fn smoothed_loss(
        &self,
        batch: &NmtBatch,
        ops: Ops,
        negatives: Option<&crate::fused::Negatives>,
        label_smoothing: f64,
    ) -> (Tensor<1>, Tensor<1>) {
        let device = self.src_embedding.weight.device();
        let (src, tgt_in, targets, rows) = batch.tensors(&device);
        let (encoded, state) = self.encode(src, ops);
        let attn = self.decode(tgt_in, &encoded, state);
        let [b, t, a] = attn.dims();
        let h = crate::fused::select(attn.reshape([b * t, a]), 0, rows);
        let (w, bias) = self.output_layer();
        smoothed_nll(h, w, bias, targets, ops, negatives, label_smoothing)
    }

    /// Greedy decoding of a batch of one source length: `src [B, S]` → target ids per sentence
    /// (without the final `<eos>`), at most `max_len` each.
    pub fn greedy(&self, src: Tensor<2, Int>, eos: u32, max_len: usize) -> Vec<Vec<u32>> {
        let device = src.device();
        let [b, _] = src.dims();
        let (encoded, mut state) = self.encode(src, Ops::for_device(&device));
        let mut prev = vec![eos; b];
        let mut out = vec![Vec::new(); b];
        let mut done = vec![false; b];
        for _ in 0..max_len {
            let ids = Tensor::<2, Int>::from_data(
                TensorData::new(prev.iter().map(|&i| i as i64).collect(), [b, 1]),
                &device,
            );
            let emb = self.tgt_embedding.forward(ids).reshape([b, self.d_embed]);
            let attn = self.step(emb, &mut state, &encoded);
            let best = self.logits(attn).argmax(1).into_data();
            let best: Vec<i64> = best
                .convert::<i64>()
                .try_into_vec::<i64>()
                .expect("int ids");
            for (i, &y) in best.iter().enumerate() {
                prev[i] = y as u32;
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

/// A training batch: sentences of one source length, targets padded to the longest.
#[derive(Debug, Clone, PartialEq)]
pub struct NmtBatch {
    /// `[B, S]` row-major (each source ends with `<eos>`).
    pub src: Vec<u32>,
    /// `[B, T]`: the target's `<eos>` then the target (the decoder's inputs).
    pub tgt_in: Vec<u32>,
    /// The target ids at the real positions, in `rows` order.
    pub targets: Vec<u32>,
    /// Flat indices `b·T + t` of the real positions.
    pub rows: Vec<u32>,
    pub batch: usize,
    pub src_len: usize,
    pub tgt_len: usize,
}

impl NmtBatch {
    /// Builds a batch from `(source ids, target ids)` pairs whose sources have one length (each
    /// source and target already ending with `<eos>`). `tgt_eos`, the target vocabulary's
    /// `<eos>`, is the decoder's first input (as in decoding) and fills the short targets'
    /// inputs. (The source's `<eos>` is another id whenever the vocabularies differ in size.)
    pub fn new(pairs: &[(&[u32], &[u32])], tgt_eos: u32) -> NmtBatch {
        let batch = pairs.len();
        let src_len = pairs[0].0.len();
        let tgt_len = pairs.iter().map(|p| p.1.len()).max().unwrap_or(0);
        let mut b = NmtBatch {
            src: Vec::with_capacity(batch * src_len),
            tgt_in: Vec::with_capacity(batch * tgt_len),
            targets: Vec::new(),
            rows: Vec::new(),
            batch,
            src_len,
            tgt_len,
        };
        for (i, (src, tgt)) in pairs.iter().enumerate() {
            assert_eq!(src.len(), src_len, "a batch holds one source length");
            b.src.extend_from_slice(src);
            for t in 0..tgt_len {
                let input = match t {
                    0 => tgt_eos,
                    _ => tgt.get(t - 1).copied().unwrap_or(tgt_eos),
                };
                b.tgt_in.push(input);
                if let Some(&y) = tgt.get(t) {
                    b.targets.push(y);
                    b.rows.push((i * tgt_len + t) as u32);
                }
            }
        }
        b
    }

    /// Target tokens (the loss's rows).
    pub fn num_targets(&self) -> usize {
        self.targets.len()
    }

    /// (src, tgt_in, targets, rows) as tensors on `device`.
    pub fn tensors(
        &self,
        device: &Device,
    ) -> (
        Tensor<2, Int>,
        Tensor<2, Int>,
        Tensor<1, Int>,
        Tensor<1, Int>,
    ) {
        let ids2 = |v: &[u32], r, c| {
            let data: Vec<i64> = v.iter().map(|&i| i as i64).collect();
            Tensor::<2, Int>::from_data(TensorData::new(data, [r, c]), device)
        };
        let ids1 = |v: &[u32]| {
            let data: Vec<i64> = v.iter().map(|&i| i as i64).collect();
            Tensor::<1, Int>::from_data(TensorData::new(data, [v.len()]), device)
        };
        (
            ids2(&self.src, self.batch, self.src_len),
            ids2(&self.tgt_in, self.batch, self.tgt_len),
            ids1(&self.targets),
            ids1(&self.rows),
        )
    }
}

/// `(objective, nll)` of the output layer `w [A, V]`, `bias [V]` on the rows `h [n, A]` with
/// targets `[n]`: the mean negative log-likelihood and, with label smoothing `ε`, the
/// cross-entropy against `(1 − ε)·onehot + ε·uniform`. Because `−log p_v = lse − z_v`, that is
/// `nll + ε·mean_rows(z_target − mean_v z_v)`: the smoothing needs the target's logit and the
/// mean logit only (`[n, A]` work), never a second pass over the vocabulary. `negatives`: the
/// sampled softmax of [`crate::fused::sampled`] in place of the full one (training only).
pub fn smoothed_nll(
    h: Tensor<2>,
    w: Tensor<2>,
    bias: Tensor<1>,
    targets: Tensor<1, Int>,
    ops: Ops,
    negatives: Option<&crate::fused::Negatives>,
    label_smoothing: f64,
) -> (Tensor<1>, Tensor<1>) {
    let nll = match (ops, negatives) {
        (_, Some(neg)) => crate::lm::sampled_cross_entropy(
            h.clone(),
            w.clone(),
            bias.clone(),
            targets.clone(),
            neg,
        ),
        (Ops::Fused, None) => {
            crate::fused::softmax_cross_entropy(h.clone(), w.clone(), bias.clone(), targets.clone())
        }
        (Ops::Composed, None) => {
            let n = targets.dims()[0];
            let logits = h.clone().matmul(w.clone()) + bias.clone().unsqueeze_dim(0);
            let logp = log_softmax(logits, 1);
            logp.gather(1, targets.clone().reshape([n, 1])).mean().neg()
        }
    };
    if label_smoothing == 0.0 {
        return (nll.clone(), nll);
    }
    // z_target [n] and the mean logit [n] of each row.
    let w_target = crate::fused::select(w.clone().transpose(), 0, targets.clone());
    let z_target = (h.clone() * w_target).sum_dim(1).squeeze_dim::<1>(1)
        + crate::fused::select(bias.clone(), 0, targets);
    let z_mean = h.matmul(w.mean_dim(1)).squeeze_dim::<1>(1) + bias.mean();
    let objective = nll.clone() + (z_target - z_mean).mean() * label_smoothing;
    (objective, nll)
}
