//! The language model step, burn-free: embedding lookup, LSTM/GRU layers and the output head,
//! with the packed kernels of [`crate::kernels`]. One [`LmState`] per stream; stepping never
//! allocates.

use std::path::Path;

use crate::error::{Error, Result};
use crate::heads::FullHead;
use crate::kernels::PackedMatrix;
use crate::model::artifact::{Cell, LmSpec, LmWeights};
use crate::model::vocab::Vocab;

struct Layer {
    /// W_ih `[G*H, d_in]`, bias b_ih (+ b_hh for LSTM, whose biases simply add)
    w_ih: PackedMatrix,
    /// W_hh `[G*H, H]`, bias b_hh for GRU (it sits inside the reset gate), zero for LSTM
    w_hh: PackedMatrix,
}

/// A loaded language model: everything an app needs to predict the next word.
pub struct LanguageModel {
    spec: LmSpec,
    vocab: Vocab,
    /// [vocab, d_embed]
    embedding: Vec<f32>,
    layers: Vec<Layer>,
    head: FullHead,
}

/// Recurrent state of one stream plus scratch space.
#[derive(Debug, Clone)]
pub struct LmState {
    /// [n_layers][d_hidden]
    h: Vec<Vec<f32>>,
    /// [n_layers][d_hidden] (LSTM only)
    c: Vec<Vec<f32>>,
    /// [G*d_hidden] input and recurrent pre-activations
    gx: Vec<f32>,
    gh: Vec<f32>,
    /// [max(d_embed, d_hidden)] current layer input
    x: Vec<f32>,
}

impl LmState {
    /// Back to the start-of-text state (all zeros).
    pub fn reset(&mut self) {
        for v in self.h.iter_mut().chain(self.c.iter_mut()) {
            v.fill(0.0);
        }
    }

    /// The last layer's hidden state `[d_hidden]`: the context vector the heads score.
    pub fn context(&self) -> &[f32] {
        self.h.last().expect("at least one layer")
    }
}

#[inline]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// One LSTM/GRU cell update of `h` (and `c`) `[H]` from the input and recurrent
/// pre-activations `gx`, `gh` `[G·H]` (biases included; for GRU the recurrent bias sits in `gh`,
/// inside the reset gate). Shared by every engine's recurrent layers.
#[inline]
pub fn cell_update(cell: Cell, gx: &[f32], gh: &[f32], h: &mut [f32], c: &mut [f32]) {
    let d_h = h.len();
    match cell {
        Cell::Lstm => {
            for u in 0..d_h {
                let i = sigmoid(gx[u] + gh[u]);
                let f = sigmoid(gx[d_h + u] + gh[d_h + u]);
                let g = (gx[2 * d_h + u] + gh[2 * d_h + u]).tanh();
                let o = sigmoid(gx[3 * d_h + u] + gh[3 * d_h + u]);
                c[u] = f * c[u] + i * g;
                h[u] = o * c[u].tanh();
            }
        }
        Cell::Gru => {
            for u in 0..d_h {
                let r = sigmoid(gx[u] + gh[u]);
                let z = sigmoid(gx[d_h + u] + gh[d_h + u]);
                let n = (gx[2 * d_h + u] + r * gh[2 * d_h + u]).tanh();
                h[u] = n + z * (h[u] - n);
            }
        }
    }
}

impl LanguageModel {
    /// Loads and validates the artifact in `dir` (see [`crate::model::artifact`]).
    pub fn load(dir: &Path) -> Result<Self> {
        Self::from_weights(LmWeights::load(dir)?)
    }

    pub fn from_weights(w: LmWeights) -> Result<Self> {
        w.validate(Path::new("<weights>"))?;
        let LmSpec {
            cell,
            d_embed,
            d_hidden,
            ..
        } = w.spec;
        let g = cell.gates() * d_hidden;
        let layers = w
            .layers
            .iter()
            .enumerate()
            .map(|(l, lw)| {
                let d_in = if l == 0 { d_embed } else { d_hidden };
                let (bx, bh) = match cell {
                    Cell::Lstm => (
                        lw.b_ih.iter().zip(&lw.b_hh).map(|(a, b)| a + b).collect(),
                        vec![0.0; g],
                    ),
                    Cell::Gru => (lw.b_ih.clone(), lw.b_hh.clone()),
                };
                Layer {
                    w_ih: PackedMatrix::new(&lw.w_ih, &bx, d_in, None),
                    w_hh: PackedMatrix::new(&lw.w_hh, &bh, d_hidden, None),
                }
            })
            .collect();
        let head = FullHead::new(w.output_matrix(), &w.output_bias, d_hidden)?;
        Ok(LanguageModel {
            spec: w.spec,
            vocab: w.vocab,
            embedding: w.embedding,
            layers,
            head,
        })
    }

    pub fn spec(&self) -> &LmSpec {
        &self.spec
    }

    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// The exact output layer as a head.
    pub fn full_head(&self) -> &FullHead {
        &self.head
    }

    /// A fresh zero state.
    pub fn new_state(&self) -> LmState {
        let s = &self.spec;
        let g = s.cell.gates() * s.d_hidden;
        LmState {
            h: vec![vec![0.0; s.d_hidden]; s.n_layers],
            c: vec![vec![0.0; s.d_hidden]; s.n_layers],
            gx: vec![0.0; g],
            gh: vec![0.0; g],
            x: vec![0.0; s.d_embed.max(s.d_hidden)],
        }
    }

    /// Feeds one token; afterwards `state.context()` predicts the next one.
    /// Errors when `token` is not an id of this vocabulary.
    pub fn step(&self, token: u32, state: &mut LmState) -> Result<()> {
        if token as usize >= self.spec.vocab_size {
            return Err(Error::Invalid(format!(
                "token id {token} is outside the vocabulary of {} words; encode text with this model's vocabulary",
                self.spec.vocab_size
            )));
        }
        let (d_e, d_h) = (self.spec.d_embed, self.spec.d_hidden);
        let t = token as usize;
        state.x[..d_e].copy_from_slice(&self.embedding[t * d_e..(t + 1) * d_e]);
        let mut d_in = d_e;
        for (l, layer) in self.layers.iter().enumerate() {
            layer.w_ih.logits_into(&state.x[..d_in], &mut state.gx);
            layer.w_hh.logits_into(&state.h[l], &mut state.gh);
            let (h, c) = (&mut state.h[l], &mut state.c[l]);
            cell_update(self.spec.cell, &state.gx, &state.gh, h, c);
            state.x[..d_h].copy_from_slice(h);
            d_in = d_h;
        }
        Ok(())
    }

    /// Encodes a line of text (unknown words → `<unk>`, no `<eos>`), for feeding a prompt.
    pub fn encode_words(&self, text: &str) -> Vec<u32> {
        text.split_whitespace()
            .map(|w| self.vocab.id_or_unk(w))
            .collect()
    }
}

/// A model serves wherever its output layer is asked for: heads are trained for, saved against
/// and loaded for an output layer ([`crate::heads::format`]).
impl AsRef<FullHead> for LanguageModel {
    fn as_ref(&self) -> &FullHead {
        self.full_head()
    }
}
