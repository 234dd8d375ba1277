//! The candidate attention predictor (Nguyen et al., COLING 2020, "Fast Word Predictor for
//! On-Device Application"): a trigram table proposes `k` candidate words for the next position,
//! and a small network scores only those, from the previous `n` words — no language-model step
//! and no full softmax. Trained by `fastsoftmax train-head candidates`.
//!
//! The network (the paper's Eq. 1–5):
//! ```text
//! e(w)  = u_w · M                 u: [vocab, r], M: [r, D]   (factorised embedding, Eq. 1)
//! e_c   = tanh(F [e(w_1) … e(w_n)] + f)     F: [D, n·D]      (sentence embedding, Eq. 2)
//! a_i   = e_c · e(c_i) / √D                                  (attention scores, Eq. 4)
//! p     = softmax(O a + o)            O: [k+1, k]            (Eq. 5; slot k = "not in the list")
//! ```
//! Served in folded form: `F_j Mᵀ` (`[D, r]` per context position `j`) is precomputed, so
//! encoding the context is one vector × matrix product of the `n·r` factors of the context words
//! with a `[n·r, D]` matrix (`n·D·r` multiply-adds, accumulated in registers), and
//! `e_c · e(c_i) = (M e_c) · u_{c_i}`, so each candidate costs `r`. With the paper's n = 15,
//! D = 100, r = 10, k = 10 that is about 16,000 multiply-adds per prediction, against 2,000,000
//! for PTB's full softmax alone (and no LM step).

use std::cell::RefCell;
use std::path::Path;

use crate::error::{Error, Result};
use crate::head::{Context, Predictor};
use crate::heads::format::{self, HeadManifest, Tensors, TRIGRAM_TABLE};
use crate::heads::full::FullHead;
use crate::heads::trigram::CandidateTable;
use crate::kernels::{self, dot, Simd};
use crate::topk::TopK;

/// The network's shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shape {
    /// Previous words read, `n`.
    pub context: usize,
    /// Candidate slots, `k` (the output has `k + 1`).
    pub slots: usize,
    /// Embedding width `D`.
    pub width: usize,
    /// Factorisation rank `r` (`r = D` with `M = I` is the unfactorised model).
    pub rank: usize,
    pub vocab: usize,
}

/// The trained parameters, row-major, as burn produced them.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateParams {
    pub shape: Shape,
    /// `[vocab, r]`
    pub u: Vec<f32>,
    /// `[r, D]`
    pub m: Vec<f32>,
    /// `[D, n·D]`
    pub f: Vec<f32>,
    /// `[D]`
    pub f_bias: Vec<f32>,
    /// `[k + 1, k]`
    pub o: Vec<f32>,
    /// `[k + 1]`
    pub o_bias: Vec<f32>,
}

impl CandidateParams {
    fn check(&self) -> Result<()> {
        let s = self.shape;
        let (n, k, d, r, v) = (s.context, s.slots, s.width, s.rank, s.vocab);
        // Checked: a corrupt shape must be an error, not an overflow.
        let product = |dims: &[usize]| dims.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
        let want = [
            ("u", self.u.len(), product(&[v, r])),
            ("m", self.m.len(), product(&[r, d])),
            ("f", self.f.len(), product(&[d, n, d])),
            ("f_bias", self.f_bias.len(), Some(d)),
            (
                "o",
                self.o.len(),
                k.checked_add(1).and_then(|k1| product(&[k1, k])),
            ),
            ("o_bias", self.o_bias.len(), k.checked_add(1)),
        ];
        if n == 0 || k == 0 || d == 0 || r == 0 || v == 0 {
            return Err(Error::Invalid(format!(
                "candidates: shape {s:?} has a zero dimension"
            )));
        }
        for (name, got, want) in want {
            if Some(got) != want {
                let want = want.map_or("more than a usize holds".into(), |w| w.to_string());
                return Err(Error::Invalid(format!(
                    "candidates: `{name}` has {got} values, the shape {s:?} needs {want}; retrain the head"
                )));
            }
        }
        let all = [
            &self.u,
            &self.m,
            &self.f,
            &self.f_bias,
            &self.o,
            &self.o_bias,
        ];
        if all.iter().any(|t| t.iter().any(|x| !x.is_finite())) {
            return Err(Error::Invalid(
                "candidates: parameters contain NaN or infinity; retrain the head".into(),
            ));
        }
        Ok(())
    }
}

/// The predictor: table + folded network.
#[derive(Debug, Clone)]
pub struct CandidatesHead {
    name: String,
    params: CandidateParams,
    table: CandidateTable,
    /// `D` rounded up to a multiple of 16 (the padding columns are zero throughout).
    stride: usize,
    /// `[n·r, stride]`: row `j·r + b` is `(F_j Mᵀ)ᵀ[b]`, what context position `j`'s factor `b`
    /// adds to the sentence embedding; one [`kernels::vecmat`] encodes the context.
    folded: Vec<f32>,
    /// `[stride]`: `f`, padded.
    f_bias: Vec<f32>,
    /// `[D, r↑16]`: `(M / √D)ᵀ`, padded, so the attention query `q = (M/√D) e_c` is one
    /// [`kernels::vecmat`] with `e_c` as the coefficients.
    query: Vec<f32>,
    /// `[r↑16]` zeros: the query's bias.
    query_bias: Vec<f32>,
    /// Id read for positions before the start of the text (`<eos>`, as in training).
    pad: u32,
    /// Width of the language model's output rows: [`Predictor::cost`]'s unit.
    lm_width: usize,
    simd: Simd,
}

/// Per-thread scratch, so predictions do not allocate once warm.
#[derive(Default)]
struct Scratch {
    candidates: Vec<u32>,
    /// `[n·r]`: the context words' factors, in `folded`'s row order.
    coefs: Vec<f32>,
    /// `[stride]`
    e_c: Vec<f32>,
    /// `[r↑16]`
    q: Vec<f32>,
    /// `[k + 1]`
    logits: Vec<f32>,
    /// `[k]`
    a: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl CandidatesHead {
    /// The predictor from trained parameters and its table; `pad` fills the context before the
    /// start of a text (the `<eos>` id, as in training); `lm_width` is the width of the
    /// language model's output rows, the unit its cost is reported in.
    pub fn new(
        name: &str,
        params: CandidateParams,
        table: CandidateTable,
        pad: u32,
        lm_width: usize,
    ) -> Result<Self> {
        params.check()?;
        let s = params.shape;
        if table.vocab_size() != s.vocab || pad as usize >= s.vocab {
            return Err(Error::Invalid(format!(
                "candidates: the table is for {} words and the network for {}; rebuild them together",
                table.vocab_size(),
                s.vocab
            )));
        }
        let (n, d, r) = (s.context, s.width, s.rank);
        let stride = d.next_multiple_of(kernels::PANEL);
        // folded[j·r + b][a] = Σ_c F[a][j·D + c] · M[b][c]
        let mut folded = vec![0.0f32; n * r * stride];
        for j in 0..n {
            for a in 0..d {
                let f_row = &params.f[a * n * d + j * d..a * n * d + (j + 1) * d];
                for b in 0..r {
                    folded[(j * r + b) * stride + a] = dot(f_row, &params.m[b * d..(b + 1) * d]);
                }
            }
        }
        let mut f_bias = params.f_bias.clone();
        f_bias.resize(stride, 0.0);
        let r_pad = r.next_multiple_of(kernels::PANEL);
        let mut query = vec![0.0f32; d * r_pad];
        let scale = 1.0 / (d as f32).sqrt();
        for b in 0..r {
            for a in 0..d {
                query[a * r_pad + b] = params.m[b * d + a] * scale;
            }
        }
        Ok(CandidatesHead {
            name: name.into(),
            f_bias,
            query,
            query_bias: vec![0.0; r_pad],
            params,
            table,
            stride,
            folded,
            pad,
            lm_width: lm_width.max(1),
            simd: Simd::detect(),
        })
    }

    pub fn shape(&self) -> Shape {
        self.params.shape
    }

    pub fn params(&self) -> &CandidateParams {
        &self.params
    }

    pub fn table(&self) -> &CandidateTable {
        &self.table
    }

    /// The id read before the start of a text.
    pub fn pad(&self) -> u32 {
        self.pad
    }

    /// The candidate words for the position after `history` (`[k]`, no duplicates).
    pub fn candidates_into(&self, history: &[u32], out: &mut Vec<u32>) {
        let (prev2, prev1) = self.last_two(history);
        self.table
            .candidates_into(prev2, prev1, self.params.shape.slots, out);
    }

    fn last_two(&self, history: &[u32]) -> (u32, u32) {
        let at = |back: usize| {
            history
                .len()
                .checked_sub(back)
                .map_or(self.pad, |i| history[i])
        };
        (at(2), at(1))
    }

    /// Log-probabilities `[k + 1]` of the slots for `candidates` after `history` (slot `k`:
    /// "not in the list"); `candidates` may be shorter than `k` (missing slots get −∞).
    pub fn slot_log_probs(&self, history: &[u32], candidates: &[u32], out: &mut Vec<f32>) {
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            self.score(history, candidates, s);
            out.clear();
            out.extend_from_slice(&s.logits);
        })
    }

    /// Fills `s.logits` with the log-probabilities of the `k + 1` slots.
    fn score(&self, history: &[u32], candidates: &[u32], s: &mut Scratch) {
        let p = &self.params;
        let Shape {
            context: n,
            slots: k,
            width: d,
            rank: r,
            ..
        } = p.shape;
        // Context position j holds the j-th of the last n words (padded at the start).
        s.coefs.clear();
        for j in 0..n {
            let w = history
                .len()
                .checked_sub(n - j)
                .map_or(self.pad, |i| history[i]) as usize;
            s.coefs.extend_from_slice(&p.u[w * r..(w + 1) * r]);
        }
        s.e_c.resize(self.stride, 0.0);
        kernels::vecmat(self.simd, &s.coefs, &self.folded, &self.f_bias, &mut s.e_c);
        for e in &mut s.e_c {
            *e = tanh(*e);
        }
        s.q.resize(self.query_bias.len(), 0.0);
        kernels::vecmat(
            self.simd,
            &s.e_c[..d],
            &self.query,
            &self.query_bias,
            &mut s.q,
        );
        let q = &s.q[..r];
        s.a.clear();
        s.a.extend((0..k).map(|i| match candidates.get(i) {
            Some(&c) => dot(q, &p.u[c as usize * r..(c as usize + 1) * r]),
            None => 0.0,
        }));
        s.logits.clear();
        s.logits.extend(
            p.o.chunks_exact(k)
                .zip(&p.o_bias)
                .map(|(row, b)| dot(row, &s.a) + b),
        );
        for i in candidates.len()..k {
            s.logits[i] = f32::NEG_INFINITY;
        }
        let lse = crate::kernels::log_sum_exp(&s.logits) as f32;
        for l in &mut s.logits {
            *l -= lse;
        }
    }

    /// Writes the head to `dir` (atomically): network in `head.safetensors`, table beside it.
    pub fn save(
        &self,
        dir: &Path,
        output: &impl AsRef<FullHead>,
        training: serde_json::Value,
        extra: &[(&str, &[u8])],
    ) -> Result<()> {
        let p = &self.params;
        let s = p.shape;
        let mut t = Tensors::default();
        t.put_f32("u", &[s.vocab, s.rank], &p.u);
        t.put_f32("m", &[s.rank, s.width], &p.m);
        t.put_f32("f", &[s.width, s.context * s.width], &p.f);
        t.put_f32("f_bias", &[s.width], &p.f_bias);
        t.put_f32("o", &[s.slots + 1, s.slots], &p.o);
        t.put_f32("o_bias", &[s.slots + 1], &p.o_bias);
        let mut m = HeadManifest::new(
            "candidates",
            output,
            serde_json::json!({ "shape": s, "pad": self.pad }),
        );
        m.training = training;
        let table = self.table.to_bytes();
        let mut files: Vec<(&str, &[u8])> = vec![(TRIGRAM_TABLE, &table)];
        files.extend_from_slice(extra);
        format::save_head(dir, &m, &t, &files)
    }

    /// Builds the head from a head directory's contents (already checked against the output layer).
    pub fn from_files(
        name: &str,
        dir: &Path,
        m: &HeadManifest,
        t: &Tensors,
        _full: &FullHead,
    ) -> Result<Self> {
        let bad = |what: String| Error::format(dir.join(format::HEAD_MANIFEST), what);
        let shape: Shape = serde_json::from_value(m.params["shape"].clone()).map_err(|e| {
            bad(format!(
                "`params.shape` is not readable ({e}); retrain the head"
            ))
        })?;
        let pad = m.params["pad"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(|| {
                bad("`params.pad` is missing or not a word id; retrain the head".into())
            })?;
        let s = shape;
        let (Some(context_width), Some(outputs)) =
            (s.context.checked_mul(s.width), s.slots.checked_add(1))
        else {
            return Err(bad(format!(
                "`params.shape` {s:?} is impossibly large; the manifest is corrupt — retrain the head"
            )));
        };
        let params = CandidateParams {
            shape,
            u: t.f32("u", &[s.vocab, s.rank])?,
            m: t.f32("m", &[s.rank, s.width])?,
            f: t.f32("f", &[s.width, context_width])?,
            f_bias: t.f32("f_bias", &[s.width])?,
            o: t.f32("o", &[outputs, s.slots])?,
            o_bias: t.f32("o_bias", &[outputs])?,
        };
        let table = CandidateTable::from_head(dir, t)?;
        Self::new(name, params, table, pad, m.d)
            .map_err(|e| Error::format(t.origin(), e.to_string()))
    }

    /// Bytes of the network as served (folded) and of the table.
    pub fn size_bytes(&self) -> (usize, usize) {
        let p = &self.params;
        let floats = p.u.len()
            + self.folded.len()
            + self.f_bias.len()
            + self.query.len()
            + p.o.len()
            + p.o_bias.len();
        (floats * 4, self.table.size_bytes())
    }
}

impl Predictor for CandidatesHead {
    fn name(&self) -> &str {
        &self.name
    }
    fn vocab_size(&self) -> usize {
        self.params.shape.vocab
    }
    fn context_width(&self) -> usize {
        0
    }
    fn history_len(&self) -> usize {
        self.params.shape.context
    }

    /// The `k` slots ranked by probability (their log-probabilities as scores); asked for more
    /// words than slots, it appends further frequent words, unscored (`f32::MIN`).
    fn predict_into(&self, ctx: Context<'_>, k: usize, out: &mut TopK) {
        out.reset(k);
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            let mut cands = std::mem::take(&mut s.candidates);
            self.candidates_into(ctx.history, &mut cands);
            self.score(ctx.history, &cands, s);
            for (&c, &lp) in cands.iter().zip(&s.logits) {
                out.push(c, lp);
            }
            if k > cands.len() {
                for &w in self.table.frequent() {
                    if out.as_slice().len() >= k {
                        break;
                    }
                    if !cands.contains(&w) {
                        out.push(w, f32::MIN);
                    }
                }
            }
            s.candidates = cands;
        });
    }

    /// [`Self::multiply_adds`] in units of one LM output row (the table look-up is not counted).
    fn cost(&self, _ctx: Context<'_>) -> usize {
        self.multiply_adds().div_ceil(self.lm_width)
    }
}

/// `tanh` through the engine's vectorisable exponential (libm's `tanh` would cost more than
/// the whole network): `sign(x) (1 − e^{−2|x|}) / (1 + e^{−2|x|})`, relative error ~1e-7.
#[inline]
fn tanh(x: f32) -> f32 {
    let e = crate::kernels::exp_nonpositive(-2.0 * x.abs());
    ((1.0 - e) / (1.0 + e)).copysign(x)
}

impl CandidatesHead {
    /// Multiply-adds of one prediction: context `n·D·r`, query `r·D`, candidates `k·r`, output
    /// `(k+1)·k`.
    pub fn multiply_adds(&self) -> usize {
        let s = self.params.shape;
        s.context * s.width * s.rank + s.rank * s.width + s.slots * s.rank + (s.slots + 1) * s.slots
    }
}
