//! The language model step, burn-free: embedding lookup, LSTM/GRU layers and the output head,
//! with the packed kernels of [`crate::kernels`]. One [`LmState`] per stream; stepping never
//! allocates.

use std::path::Path;

use crate::error::{Error, Result};
use crate::heads::FullHead;
use crate::kernels::{sigmoid, tanh, PackedMatrix, Simd};
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

/// One LSTM/GRU cell update of `h` (and `c`) `[H]` from the input and recurrent
/// pre-activations `gx`, `gh` `[G·H]` (biases included; for GRU the recurrent bias sits in `gh`,
/// inside the reset gate). Shared by every engine's recurrent layers.
pub fn cell_update(cell: Cell, gx: &[f32], gh: &[f32], h: &mut [f32], c: &mut [f32]) {
    match Simd::get() {
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512 => unsafe { cell_avx512(cell, gx, gh, h, c) },
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => unsafe { cell_avx2(cell, gx, gh, h, c) },
        Simd::Portable => cell_body(cell, gx, gh, h, c),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn cell_avx512(cell: Cell, gx: &[f32], gh: &[f32], h: &mut [f32], c: &mut [f32]) {
    cell_body(cell, gx, gh, h, c)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn cell_avx2(cell: Cell, gx: &[f32], gh: &[f32], h: &mut [f32], c: &mut [f32]) {
    cell_body(cell, gx, gh, h, c)
}

/// Gate `g` of pre-activations `[G·d]`.
#[inline(always)]
fn gate(m: &[f32], g: usize, d: usize) -> &[f32] {
    &m[g * d..(g + 1) * d]
}

#[inline(always)]
fn cell_body(cell: Cell, gx: &[f32], gh: &[f32], h: &mut [f32], c: &mut [f32]) {
    let d = h.len();
    // Slices of one gate each, so the loops below index without bounds checks and vectorise.
    match cell {
        Cell::Lstm => {
            let c = &mut c[..d];
            let (xi, xf, xg, xo) = (
                gate(gx, 0, d),
                gate(gx, 1, d),
                gate(gx, 2, d),
                gate(gx, 3, d),
            );
            let (hi, hf, hg, ho) = (
                gate(gh, 0, d),
                gate(gh, 1, d),
                gate(gh, 2, d),
                gate(gh, 3, d),
            );
            for u in 0..d {
                let i = sigmoid(xi[u] + hi[u]);
                let f = sigmoid(xf[u] + hf[u]);
                let g = tanh(xg[u] + hg[u]);
                let o = sigmoid(xo[u] + ho[u]);
                c[u] = f * c[u] + i * g;
                h[u] = o * tanh(c[u]);
            }
        }
        Cell::Gru => {
            let (xr, xz, xn) = (gate(gx, 0, d), gate(gx, 1, d), gate(gx, 2, d));
            let (hr, hz, hn) = (gate(gh, 0, d), gate(gh, 1, d), gate(gh, 2, d));
            for u in 0..d {
                let r = sigmoid(xr[u] + hr[u]);
                let z = sigmoid(xz[u] + hz[u]);
                let n = tanh(xn[u] + r * hn[u]);
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

    /// Feeds `tokens[i]` to `states[i]` for every `i` at once: each layer's products run as one
    /// batched product over the states (the weights stream once, not once per state), the
    /// same arithmetic as [`Self::step`] up to the order of summation. What a beam search
    /// advancing its hypotheses needs.
    pub fn step_batch(&self, tokens: &[u32], states: &mut [LmState]) -> Result<()> {
        if tokens.len() != states.len() {
            return Err(Error::Invalid(format!(
                "{} tokens for {} states",
                tokens.len(),
                states.len()
            )));
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.spec.vocab_size) {
            return Err(Error::Invalid(format!(
                "token id {t} is outside the vocabulary of {} words; encode text with this model's vocabulary",
                self.spec.vocab_size
            )));
        }
        let n = tokens.len();
        if n == 0 {
            return Ok(());
        }
        let (d_e, d_h) = (self.spec.d_embed, self.spec.d_hidden);
        let g = self.spec.cell.gates() * d_h;
        let mut x: Vec<f32> = Vec::with_capacity(n * d_e.max(d_h));
        for &t in tokens {
            let t = t as usize;
            x.extend_from_slice(&self.embedding[t * d_e..(t + 1) * d_e]);
        }
        let mut hs: Vec<f32> = Vec::with_capacity(n * d_h);
        let (mut gx, mut gh) = (vec![0.0f32; n * g], vec![0.0f32; n * g]);
        for (l, layer) in self.layers.iter().enumerate() {
            hs.clear();
            for s in states.iter() {
                hs.extend_from_slice(&s.h[l]);
            }
            layer.w_ih.logits_batch(&x, &mut gx);
            layer.w_hh.logits_batch(&hs, &mut gh);
            x.clear();
            for (i, s) in states.iter_mut().enumerate() {
                let (h, c) = (&mut s.h[l], &mut s.c[l]);
                let gates = i * g..(i + 1) * g;
                cell_update(self.spec.cell, &gx[gates.clone()], &gh[gates], h, c);
                x.extend_from_slice(h);
            }
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

#[cfg(test)]
mod cell_tests {
    use super::*;
    use crate::kernels::seeded_values;

    /// The vectorised cell against the same update written with libm, both cells.
    #[test]
    fn cell_update_matches_libm() {
        let libm_sigmoid = |x: f32| 1.0 / (1.0 + (-x).exp());
        for (cell, gates) in [(Cell::Lstm, 4), (Cell::Gru, 3)] {
            let d = 37;
            let gx: Vec<f32> = seeded_values(gates * d, 1)
                .iter()
                .map(|x| x * 6.0)
                .collect();
            let gh: Vec<f32> = seeded_values(gates * d, 2)
                .iter()
                .map(|x| x * 6.0)
                .collect();
            let h0 = seeded_values(d, 3);
            let c0 = seeded_values(d, 4);
            let (mut h, mut c) = (h0.clone(), c0.clone());
            cell_update(cell, &gx, &gh, &mut h, &mut c);
            for u in 0..d {
                let a = |g: usize| gx[g * d + u] + gh[g * d + u];
                let (want_h, want_c) = match cell {
                    Cell::Lstm => {
                        let cu = libm_sigmoid(a(1)) * c0[u] + libm_sigmoid(a(0)) * a(2).tanh();
                        (libm_sigmoid(a(3)) * cu.tanh(), cu)
                    }
                    Cell::Gru => {
                        let r = libm_sigmoid(a(0));
                        let z = libm_sigmoid(a(1));
                        let n = (gx[2 * d + u] + r * gh[2 * d + u]).tanh();
                        (n + z * (h0[u] - n), c0[u])
                    }
                };
                assert!((h[u] - want_h).abs() < 1e-6, "{cell:?} h[{u}]");
                assert!((c[u] - want_c).abs() < 1e-6, "{cell:?} c[{u}]");
            }
        }
    }
}
