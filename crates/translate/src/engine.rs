//! The translator, burn-free: encoder, decoder step with attention and input feeding, and the
//! output layer, every product on `fastsoftmax_infer`'s packed kernels.
//!
//! Shapes follow `fastsoftmax_nn::seq2seq` (which trains the same network): `S` source tokens,
//! `n` decoder rows (the live hypotheses of every sentence in a batch, one matrix product per
//! layer for all of them), `E` embedding, `H` hidden, `A` attentional vector, `V` target words.

use crate::artifact::Languages;
use crate::tokenizer::Tokenizer;
use std::path::Path;

use fastsoftmax_infer::kernels::{Int16Matrix, Int8Matrix, PackedMatrix};
use fastsoftmax_infer::model::artifact::Cell;
use fastsoftmax_infer::model::lm::cell_update;
use fastsoftmax_infer::{Error, Result, Vocab};

use crate::artifact::{NmtSpec, NmtWeights, Precision};
use crate::beam::VmapScope;
use crate::screen::Screen;
use crate::vmap::Shortlister;

/// A weight matrix of the engine `[n, d]` with its bias, as the artifact stores it: f32
/// panels, int8 rows with one scale per row, or int16 with one scale.
enum Matrix {
    F32(PackedMatrix),
    Int8(Int8Matrix),
    Int16(Int16Matrix),
}

impl Matrix {
    /// Tensor `name` `[n, d]` of `w` with `bias` `[n]`.
    fn new(w: &NmtWeights, name: &str, bias: &[f32], d: usize) -> Matrix {
        if let Some((q, scale)) = w.int8.get(name) {
            Matrix::Int8(Int8Matrix::from_quantized(q, scale, bias, d, None))
        } else if let Some((q, scale)) = w.int16.get(name) {
            Matrix::Int16(Int16Matrix::from_quantized(q, *scale, bias, d, None))
        } else {
            Matrix::F32(PackedMatrix::new(w.get(name), bias, d, None))
        }
    }

    /// `out[q][i] = W[i]·hs[q] + b[i]`, `hs [m, d]`, `out [m, n]`.
    #[inline]
    fn logits_batch(&self, hs: &[f32], out: &mut [f32]) {
        match self {
            Matrix::F32(m) => m.logits_batch(hs, out),
            Matrix::Int8(m) => m.logits_batch(hs, out),
            Matrix::Int16(m) => m.logits_batch(hs, out),
        }
    }

    fn n_rows(&self) -> usize {
        match self {
            Matrix::F32(m) => m.n_rows(),
            Matrix::Int8(m) => m.n_rows(),
            Matrix::Int16(m) => m.n_rows(),
        }
    }

    /// Word id of row `j` (for gathered matrices).
    #[inline]
    fn id(&self, j: usize) -> u32 {
        match self {
            Matrix::F32(m) => m.id(j),
            Matrix::Int8(m) => m.id(j),
            Matrix::Int16(m) => m.id(j),
        }
    }

    /// The rows `ids` (in that order), each mapped to its id.
    fn gather(&self, ids: &[u32]) -> Matrix {
        match self {
            Matrix::F32(m) => Matrix::F32(m.gather(ids)),
            Matrix::Int8(m) => Matrix::Int8(m.gather(ids)),
            Matrix::Int16(m) => Matrix::Int16(m.gather(ids)),
        }
    }
}

/// One recurrent layer (one direction) packed for the engine.
struct Rnn {
    cell: Cell,
    d_h: usize,
    /// `W_ih [G·d_h, d_in]` with `b_ih` (+ `b_hh` for LSTM, whose biases simply add).
    w_ih: Matrix,
    /// `W_hh [G·d_h, d_h]` with `b_hh` for GRU (it sits inside the reset gate), zero for LSTM.
    w_hh: Matrix,
}

impl Rnn {
    fn new(w: &NmtWeights, prefix: &str, cell: Cell, d_in: usize, d_h: usize) -> Rnn {
        let g = cell.gates() * d_h;
        let (b_ih, b_hh) = (
            w.get(&format!("{prefix}.b_ih")),
            w.get(&format!("{prefix}.b_hh")),
        );
        let (bx, bh) = match cell {
            Cell::Lstm => (
                b_ih.iter().zip(b_hh).map(|(a, b)| a + b).collect(),
                vec![0.0; g],
            ),
            Cell::Gru => (b_ih.to_vec(), b_hh.to_vec()),
        };
        Rnn {
            cell,
            d_h,
            w_ih: Matrix::new(w, &format!("{prefix}.w_ih"), &bx, d_in),
            w_hh: Matrix::new(w, &format!("{prefix}.w_hh"), &bh, d_h),
        }
    }

    /// One cell update from the input and recurrent pre-activations `gx`, `gh` `[G·d_h]`.
    #[inline]
    fn update(&self, gx: &[f32], gh: &[f32], h: &mut [f32], c: &mut [f32]) {
        debug_assert_eq!(h.len(), self.d_h);
        cell_update(self.cell, gx, gh, h, c);
    }
}

/// A loaded translator.
pub struct Translator {
    spec: NmtSpec,
    src_tokenizer: Tokenizer,
    languages: Option<Languages>,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    /// [Vs, E]
    src_embedding: Vec<f32>,
    /// [Vt, E]
    tgt_embedding: Vec<f32>,
    /// Per layer: forward and backward direction.
    encoder: Vec<[Rnn; 2]>,
    decoder: Vec<Rnn>,
    /// `W_a [H, H]`: `keys = enc · W_aᵀ`.
    attn_score: Matrix,
    /// `W_c [A, 2H]`: `h̃ = tanh(W_c [c; h])`.
    attn_out: Matrix,
    /// `W_out [V, A]` with its bias (the target embedding when tied).
    output: Matrix,
    precision: Precision,
    /// The vocabulary map beam search decodes with, if any.
    vmap: Option<(Shortlister, VmapScope)>,
    /// The screening head beam search decodes with, if any.
    screen: Option<Screen>,
}

/// What the decoder attends to for one sentence.
pub struct Encoded {
    /// Source length `S` (with its `<eos>`).
    pub len: usize,
    /// [S, H]
    pub enc: Vec<f32>,
    /// [S, H]
    pub keys: Vec<f32>,
    /// Initial decoder state per decoder layer: `h`, `c` `[H]`.
    pub init: Vec<(Vec<f32>, Vec<f32>)>,
}

/// The decoder's rows: one per live hypothesis, each attending to one sentence.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    /// Per decoder layer `[n, H]`.
    pub h: Vec<Vec<f32>>,
    pub c: Vec<Vec<f32>>,
    /// `h̃` of the last step `[n, A]` (input feeding).
    pub feed: Vec<f32>,
    /// The sentence (index into the batch's [`Encoded`]) of each row.
    pub sentence: Vec<usize>,
}

impl Rows {
    pub fn len(&self) -> usize {
        self.sentence.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sentence.is_empty()
    }

    /// The rows `parents` (in that order), e.g. the parents of the surviving hypotheses.
    pub fn gather(&self, parents: &[usize], d_h: usize, d_a: usize) -> Rows {
        let pick = |m: &[f32], d: usize| -> Vec<f32> {
            let mut out = Vec::with_capacity(parents.len() * d);
            for &p in parents {
                out.extend_from_slice(&m[p * d..(p + 1) * d]);
            }
            out
        };
        Rows {
            h: self.h.iter().map(|m| pick(m, d_h)).collect(),
            c: self.c.iter().map(|m| pick(m, d_h)).collect(),
            feed: pick(&self.feed, d_a),
            sentence: parents.iter().map(|&p| self.sentence[p]).collect(),
        }
    }
}

/// Scratch buffers of one decoder step, reused across steps.
#[derive(Default)]
pub struct Scratch {
    x: Vec<f32>,
    gx: Vec<f32>,
    gh: Vec<f32>,
    cat: Vec<f32>,
    scores: Vec<f32>,
    /// Every row's logits after [`Translator::step`], row `r` at `offsets[r]..offsets[r + 1]`
    /// (`V` each under [`Output::Full`], its shortlist's length under a vocabulary map).
    pub logits: Vec<f32>,
    /// `[n + 1]`
    pub offsets: Vec<usize>,
    /// Per row: the source position with the most attention this step.
    pub attended: Vec<u32>,
    /// Per row: the shortlist (vocabulary map) or route (screening head) its logits score;
    /// see [`Output::word`].
    pub list: Vec<u32>,
    /// Screening: per row its route scores `[n, r]` and gate weight, the rows in route order
    /// and their `h̃`.
    route_scores: Vec<f32>,
    gates: Vec<f32>,
    order: Vec<(u32, u32)>,
    gathered: Vec<f32>,
    group_logits: Vec<f32>,
}

impl Scratch {
    /// Row `r`'s logits after [`Translator::step`].
    pub fn row_logits(&self, r: usize) -> &[f32] {
        &self.logits[self.offsets[r]..self.offsets[r + 1]]
    }
}

/// The output rows of a vocabulary-map shortlist (or of a screening head's route): target ids
/// (sorted) and their weight rows and biases gathered into one packed matrix.
pub struct Shortlist {
    matrix: Matrix,
}

impl Shortlist {
    /// A shortlist with its own rows `[n, d]` and biases `[n]` for the target `ids` (sorted,
    /// distinct): a DS expert's retrained rows.
    pub(crate) fn from_rows(rows: &[f32], bias: &[f32], d: usize, ids: Vec<u32>) -> Shortlist {
        Shortlist {
            matrix: Matrix::F32(PackedMatrix::new(rows, bias, d, Some(ids))),
        }
    }

    /// Target ids, sorted and distinct, all below the vocabulary size.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.matrix.n_rows()).map(|r| self.matrix.id(r))
    }

    pub fn len(&self) -> usize {
        self.matrix.n_rows()
    }

    pub fn is_empty(&self) -> bool {
        self.matrix.n_rows() == 0
    }

    /// The target id of shortlist row `j`.
    #[inline]
    pub fn word(&self, j: usize) -> u32 {
        self.matrix.id(j)
    }
}

/// What the output layer scores in a decoder step.
#[derive(Clone, Copy)]
pub enum Output<'a> {
    /// Every target word.
    Full,
    /// Each sentence `s` of the batch scores `lists[of_sentence[s]]` only.
    Shortlists {
        lists: &'a [Shortlist],
        of_sentence: &'a [usize],
    },
    /// Each row scores the set of the route a screening head sends its `h̃` to.
    Screened(&'a Screen),
    /// Nothing: the step only moves the rows (teacher-forced contexts).
    Skip,
}

impl Output<'_> {
    /// The target id of logit `j` of a row whose [`Scratch::list`] entry is `list`.
    #[inline]
    pub fn word(&self, list: u32, j: usize) -> u32 {
        match self {
            Output::Full | Output::Skip => j as u32,
            Output::Shortlists { lists, .. } => lists[list as usize].word(j),
            Output::Screened(screen) => screen.set(list as usize).word(j),
        }
    }
}

/// Seconds of a translation spent per component (the OpenNMT paper's Figure 2).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Profile {
    pub encoder: f64,
    /// Decoder recurrent layers (input products, recurrent products, cell updates).
    pub decoder_rnn: f64,
    /// Attention scores, softmax, context and the `h̃` product.
    pub attention: f64,
    /// The output layer and its softmax (normaliser and top-k).
    pub output: f64,
    /// Beam search: choosing, reordering and finishing hypotheses.
    pub beam: f64,
    /// Hypothesis rows the output layer scored.
    pub output_rows: u64,
    /// Logits the output layer computed (its work is `logits · d` multiply-adds; `rows · V`
    /// without a vocabulary map).
    pub output_logits: u64,
}

impl Profile {
    pub fn total(&self) -> f64 {
        self.encoder + self.decoder_rnn + self.attention + self.output + self.beam
    }

    pub fn add(&mut self, o: &Profile) {
        self.encoder += o.encoder;
        self.decoder_rnn += o.decoder_rnn;
        self.attention += o.attention;
        self.output += o.output;
        self.beam += o.beam;
        self.output_rows += o.output_rows;
        self.output_logits += o.output_logits;
    }
}

/// Seconds since `clock`, which moves to now.
pub(crate) fn lap(clock: &mut std::time::Instant) -> f64 {
    let now = std::time::Instant::now();
    let s = now.duration_since(*clock).as_secs_f64();
    *clock = now;
    s
}

impl Translator {
    /// Loads and validates the artifact in `dir` (see [`crate::artifact`]).
    pub fn load(dir: &Path) -> Result<Self> {
        Self::from_weights(NmtWeights::load(dir)?)
    }

    /// The translator of `w`, serving its shipped vocabulary map (per sentence) if it has one.
    pub fn from_weights(w: NmtWeights) -> Result<Self> {
        w.validate(Path::new("<weights>"))?;
        let vmap = match &w.vmap {
            Some(map) => Some((map.for_vocab(&w.tgt_vocab)?, VmapScope::Sentence)),
            None => None,
        };
        let s = w.spec;
        let half = s.d_hidden / 2;
        let encoder = (0..s.enc_layers)
            .map(|l| {
                let d_in = if l == 0 { s.d_embed } else { s.d_hidden };
                [
                    Rnn::new(&w, &format!("encoder.{l}.fwd"), s.cell, d_in, half),
                    Rnn::new(&w, &format!("encoder.{l}.bwd"), s.cell, d_in, half),
                ]
            })
            .collect();
        let decoder = (0..s.dec_layers)
            .map(|l| {
                let d_in = if l == 0 {
                    s.d_embed + s.d_attn
                } else {
                    s.d_hidden
                };
                Rnn::new(&w, &format!("decoder.{l}"), s.cell, d_in, s.d_hidden)
            })
            .collect();
        let no_bias = |n| vec![0.0; n];
        Ok(Translator {
            encoder,
            decoder,
            attn_score: Matrix::new(&w, "attn.score", &no_bias(s.d_hidden), s.d_hidden),
            attn_out: Matrix::new(&w, "attn.out", &no_bias(s.d_attn), 2 * s.d_hidden),
            output: Matrix::new(
                &w,
                if s.tied {
                    "tgt_embedding"
                } else {
                    "output.weight"
                },
                w.get("output.bias"),
                s.d_attn,
            ),
            precision: w.precision(),
            src_embedding: w.get("src_embedding").to_vec(),
            tgt_embedding: w.get("tgt_embedding").to_vec(),
            spec: s,
            src_tokenizer: w.src_tokenizer,
            languages: w.languages,
            src_vocab: w.src_vocab,
            tgt_vocab: w.tgt_vocab,
            vmap,
            screen: None,
        })
    }

    pub fn spec(&self) -> &NmtSpec {
        &self.spec
    }

    pub fn src_vocab(&self) -> &Vocab {
        &self.src_vocab
    }

    /// How source text is cut into the tokens of [`Self::src_vocab`].
    pub fn src_tokenizer(&self) -> &Tokenizer {
        &self.src_tokenizer
    }

    /// The language pair it was trained for, when its artifact records one.
    pub fn languages(&self) -> Option<&Languages> {
        self.languages.as_ref()
    }

    pub fn tgt_vocab(&self) -> &Vocab {
        &self.tgt_vocab
    }

    /// How the matrices are stored (and multiplied).
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Decode with a vocabulary map (`None`: score every target word).
    pub fn set_vocab_map(&mut self, map: Option<(Shortlister, VmapScope)>) {
        self.vmap = map;
    }

    /// Which sentences share the vocabulary map's shortlist, when a map is in use.
    pub fn set_vocab_map_scope(&mut self, scope: VmapScope) {
        if let Some((_, s)) = &mut self.vmap {
            *s = scope;
        }
    }

    /// The vocabulary map in use, if any.
    pub fn vocab_map(&self) -> Option<(&Shortlister, VmapScope)> {
        self.vmap.as_ref().map(|(m, s)| (m, *s))
    }

    /// Decode with a screening head (`None`: score every target word); see [`Screen`].
    pub fn set_screen(&mut self, screen: Option<Screen>) {
        self.screen = screen;
    }

    /// The screening head in use, if any.
    pub fn screen(&self) -> Option<&Screen> {
        self.screen.as_ref()
    }

    /// The output layer as the exact head `[V, A]` that softmax heads are trained for and
    /// fingerprinted against: the f32 rows, or an int8 translator's rows dequantized
    /// (`quantize` re-binds the f32 model's heads to them); `None` for int16.
    pub fn output_head(&self) -> Option<fastsoftmax_infer::FullHead> {
        let (rows, bias, d): (Vec<f32>, Vec<f32>, usize) = match &self.output {
            Matrix::F32(m) => (
                (0..m.n_rows()).flat_map(|i| m.row(i)).collect(),
                (0..m.n_rows()).map(|i| m.bias(i)).collect(),
                m.dim(),
            ),
            Matrix::Int8(m) => (
                (0..m.n_rows())
                    .flat_map(|i| {
                        let s = m.inv_scale(i);
                        m.row_q(i).into_iter().map(move |q| q as f32 * s)
                    })
                    .collect(),
                (0..m.n_rows()).map(|i| m.bias(i)).collect(),
                m.dim(),
            ),
            Matrix::Int16(_) => return None,
        };
        fastsoftmax_infer::FullHead::new(&rows, &bias, d).ok()
    }

    /// The output rows of the target ids `ids` (sorted, distinct, in the vocabulary).
    pub fn shortlist(&self, ids: &[u32]) -> Shortlist {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        debug_assert!(ids.iter().all(|&i| (i as usize) < self.spec.tgt_vocab_size));
        Shortlist {
            matrix: self.output.gather(ids),
        }
    }

    /// Encodes one source sentence: ids `[S]` (ending with `<eos>`, all in the vocabulary).
    pub fn encode(&self, src: &[u32]) -> Result<Encoded> {
        Ok(self
            .encode_batch(&[src])?
            .pop()
            .expect("one sentence in, one out"))
    }

    /// Encodes a batch of source sentences of any lengths. Each layer's input products for all
    /// tokens of all sentences are one batched product; the recurrence runs the sentences in
    /// lockstep, longest first, so each step's recurrent product is one batched product over
    /// the sentences still running (the backward direction starts every sentence at its own
    /// last token).
    pub fn encode_batch(&self, srcs: &[&[u32]]) -> Result<Vec<Encoded>> {
        let (e, h) = (self.spec.d_embed, self.spec.d_hidden);
        let half = h / 2;
        for src in srcs {
            if src.is_empty() {
                return Err(Error::Invalid(
                    "cannot encode an empty source: it holds at least <eos>".into(),
                ));
            }
            if let Some(&bad) = src
                .iter()
                .find(|&&i| i as usize >= self.spec.src_vocab_size)
            {
                return Err(Error::Invalid(format!(
                    "source id {bad} is outside the source vocabulary of {} words",
                    self.spec.src_vocab_size
                )));
            }
        }
        // Longest first: the sentences still running at step k are a prefix.
        let mut order: Vec<usize> = (0..srcs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(srcs[i].len()));
        let lens: Vec<usize> = order.iter().map(|&i| srcs[i].len()).collect();
        let offsets: Vec<usize> = lens
            .iter()
            .scan(0, |acc, &l| {
                let o = *acc;
                *acc += l;
                Some(o)
            })
            .collect();
        let total: usize = lens.iter().sum();
        let n = srcs.len();
        let mut x: Vec<f32> = order
            .iter()
            .flat_map(|&i| srcs[i].iter())
            .flat_map(|&w| {
                self.src_embedding[w as usize * e..(w as usize + 1) * e]
                    .iter()
                    .copied()
            })
            .collect();
        let mut finals = Vec::with_capacity(self.encoder.len());
        for layer in &self.encoder {
            let mut out = vec![0.0f32; total * h];
            let mut fin_h = vec![0.0f32; n * h];
            let mut fin_c = vec![0.0f32; n * h];
            for (dir, rnn) in layer.iter().enumerate() {
                let g = rnn.cell.gates() * half;
                let mut gx = vec![0.0f32; total * g];
                rnn.w_ih.logits_batch(&x, &mut gx);
                let mut gh = vec![0.0f32; n * g];
                let (mut hs, mut cs) = (vec![0.0f32; n * half], vec![0.0f32; n * half]);
                for k in 0..lens.first().copied().unwrap_or(0) {
                    let m = lens.partition_point(|&l| l > k);
                    rnn.w_hh.logits_batch(&hs[..m * half], &mut gh[..m * g]);
                    for r in 0..m {
                        let t = if dir == 0 { k } else { lens[r] - 1 - k };
                        let pos = offsets[r] + t;
                        let (hr, cr) = (
                            &mut hs[r * half..(r + 1) * half],
                            &mut cs[r * half..(r + 1) * half],
                        );
                        rnn.update(&gx[pos * g..(pos + 1) * g], &gh[r * g..(r + 1) * g], hr, cr);
                        out[pos * h + dir * half..pos * h + (dir + 1) * half].copy_from_slice(hr);
                    }
                }
                for r in 0..n {
                    fin_h[r * h + dir * half..r * h + (dir + 1) * half]
                        .copy_from_slice(&hs[r * half..(r + 1) * half]);
                    fin_c[r * h + dir * half..r * h + (dir + 1) * half]
                        .copy_from_slice(&cs[r * half..(r + 1) * half]);
                }
            }
            finals.push((fin_h, fin_c));
            x = out;
        }
        let mut keys = vec![0.0f32; total * h];
        self.attn_score.logits_batch(&x, &mut keys);
        let skip = self.encoder.len() - self.decoder.len();
        let mut encoded: Vec<Option<Encoded>> = (0..n).map(|_| None).collect();
        for (r, &i) in order.iter().enumerate() {
            let span = offsets[r] * h..(offsets[r] + lens[r]) * h;
            encoded[i] = Some(Encoded {
                len: lens[r],
                enc: x[span.clone()].to_vec(),
                keys: keys[span].to_vec(),
                init: finals[skip..]
                    .iter()
                    .map(|(fh, fc)| {
                        (
                            fh[r * h..(r + 1) * h].to_vec(),
                            fc[r * h..(r + 1) * h].to_vec(),
                        )
                    })
                    .collect(),
            });
        }
        Ok(encoded
            .into_iter()
            .map(|e| e.expect("every sentence encoded"))
            .collect())
    }

    /// One decoder row per sentence, in its initial state.
    pub fn initial_rows(&self, encoded: &[Encoded]) -> Rows {
        let n_layers = self.decoder.len();
        let mut rows = Rows {
            h: vec![Vec::new(); n_layers],
            c: vec![Vec::new(); n_layers],
            feed: vec![0.0; encoded.len() * self.spec.d_attn],
            sentence: (0..encoded.len()).collect(),
        };
        for enc in encoded {
            for (l, (h, c)) in enc.init.iter().enumerate() {
                rows.h[l].extend_from_slice(h);
                rows.c[l].extend_from_slice(c);
            }
        }
        rows
    }

    /// One decoder step for every row: feeds `prev [n]` (the previous target ids; `<eos>` at
    /// the start), updates the rows, and leaves the logits of `output` (see
    /// [`Scratch::row_logits`]) and the attended source positions in `scratch`. Rows must be
    /// grouped by sentence. Adds its time to `profile`.
    pub fn step(
        &self,
        prev: &[u32],
        rows: &mut Rows,
        encoded: &[Encoded],
        output: Output,
        scratch: &mut Scratch,
        profile: &mut Profile,
    ) {
        let mut clock = std::time::Instant::now();
        let NmtSpec {
            d_embed: e,
            d_hidden: h,
            d_attn: a,
            tgt_vocab_size: v,
            ..
        } = self.spec;
        let n = rows.len();
        debug_assert_eq!(prev.len(), n);
        // Layer 0's input: [embedding; fed h̃].
        scratch.x.clear();
        for (r, &y) in prev.iter().enumerate() {
            let y = y as usize;
            scratch
                .x
                .extend_from_slice(&self.tgt_embedding[y * e..(y + 1) * e]);
            scratch.x.extend_from_slice(&rows.feed[r * a..(r + 1) * a]);
        }
        for (l, rnn) in self.decoder.iter().enumerate() {
            let g = rnn.cell.gates() * h;
            scratch.gx.resize(n * g, 0.0);
            scratch.gh.resize(n * g, 0.0);
            if l == 0 {
                rnn.w_ih.logits_batch(&scratch.x, &mut scratch.gx);
            } else {
                rnn.w_ih.logits_batch(&rows.h[l - 1], &mut scratch.gx);
            }
            rnn.w_hh.logits_batch(&rows.h[l], &mut scratch.gh);
            for r in 0..n {
                rnn.update(
                    &scratch.gx[r * g..(r + 1) * g],
                    &scratch.gh[r * g..(r + 1) * g],
                    &mut rows.h[l][r * h..(r + 1) * h],
                    &mut rows.c[l][r * h..(r + 1) * h],
                );
            }
        }
        profile.decoder_rnn += lap(&mut clock);
        // Attention: scores over the row's sentence, softmax, context; then h̃ for all rows.
        let top = &rows.h[self.decoder.len() - 1];
        scratch.cat.resize(n * 2 * h, 0.0);
        scratch.attended.resize(n, 0);
        for r in 0..n {
            let enc = &encoded[rows.sentence[r]];
            let q = &top[r * h..(r + 1) * h];
            let (ctx, hid) = scratch.cat[r * 2 * h..(r + 1) * 2 * h].split_at_mut(h);
            let best = fastsoftmax_infer::kernels::attend(
                &enc.keys,
                &enc.enc,
                q,
                &mut scratch.scores,
                ctx,
            );
            scratch.attended[r] = best as u32;
            hid.copy_from_slice(q);
        }
        self.attn_out.logits_batch(&scratch.cat, &mut rows.feed);
        fastsoftmax_infer::kernels::tanh_in_place(&mut rows.feed);
        profile.attention += lap(&mut clock);
        scratch.offsets.clear();
        scratch.offsets.push(0);
        scratch.list.clear();
        scratch.list.resize(n, 0);
        match output {
            Output::Skip => {
                scratch.logits.clear();
                scratch.offsets.resize(n + 1, 0);
                return;
            }
            Output::Full => {
                scratch.logits.resize(n * v, 0.0);
                self.output.logits_batch(&rows.feed, &mut scratch.logits);
                scratch.offsets.extend((1..=n).map(|r| r * v));
            }
            Output::Shortlists { lists, of_sentence } => {
                let list_of = |r: usize| of_sentence[rows.sentence[r]];
                let total = (0..n).map(|r| lists[list_of(r)].len()).sum();
                scratch.logits.resize(total, 0.0);
                // One product per run of rows sharing a shortlist.
                let (mut r, mut off) = (0, 0);
                while r < n {
                    let list = &lists[list_of(r)];
                    let end = (r + 1..n).find(|&e| list_of(e) != list_of(r)).unwrap_or(n);
                    let c = list.len();
                    list.matrix.logits_batch(
                        &rows.feed[r * a..end * a],
                        &mut scratch.logits[off..off + (end - r) * c],
                    );
                    for row in r..end {
                        scratch.list[row] = list_of(r) as u32;
                        off += c;
                        scratch.offsets.push(off);
                    }
                    r = end;
                }
            }
            Output::Screened(screen) => {
                self.screened_logits(screen, &rows.feed, scratch);
                profile.output_logits += (n * screen.n_routes()) as u64;
            }
        }
        profile.output += lap(&mut clock);
        profile.output_rows += n as u64;
        profile.output_logits += scratch.logits.len() as u64;
    }

    /// Every row's logits over the set of its route (`feed` is `[n, A]`): the routes score
    /// all rows in one product; the rows are then grouped by route so each set's rows stream
    /// once for all the rows sent to it, and the logits are copied back in row order. A gated
    /// head (DS) scales each row's logits by its gate weight.
    fn screened_logits(&self, screen: &Screen, feed: &[f32], scratch: &mut Scratch) {
        let a = self.spec.d_attn;
        let n = feed.len() / a;
        let r = screen.n_routes();
        scratch.route_scores.resize(n * r, 0.0);
        screen
            .routes()
            .logits_batch(feed, &mut scratch.route_scores);
        scratch.gates.clear();
        for (row, scores) in scratch.route_scores.chunks_exact(r).enumerate() {
            let (route, gate) = crate::screen::route_and_gate(scores);
            scratch.list[row] = route as u32;
            scratch.gates.push(gate);
        }
        let mut off = 0;
        for row in 0..n {
            off += screen.set(scratch.list[row] as usize).len();
            scratch.offsets.push(off);
        }
        scratch.logits.resize(off, 0.0);
        scratch.order.clear();
        scratch
            .order
            .extend((0..n as u32).map(|row| (scratch.list[row as usize], row)));
        scratch.order.sort_unstable();
        for run in scratch.order.chunk_by(|x, y| x.0 == y.0) {
            let set = screen.set(run[0].0 as usize);
            let c = set.len();
            scratch.gathered.clear();
            for &(_, row) in run {
                let row = row as usize;
                scratch
                    .gathered
                    .extend_from_slice(&feed[row * a..(row + 1) * a]);
            }
            scratch.group_logits.resize(run.len() * c, 0.0);
            set.matrix
                .logits_batch(&scratch.gathered, &mut scratch.group_logits);
            for (i, &(_, row)) in run.iter().enumerate() {
                let row = row as usize;
                let dst = &mut scratch.logits[scratch.offsets[row]..scratch.offsets[row + 1]];
                dst.copy_from_slice(&scratch.group_logits[i * c..(i + 1) * c]);
                if screen.gated() {
                    dst.iter_mut().for_each(|x| *x *= scratch.gates[row]);
                }
            }
        }
    }

    /// Teacher forcing for one sentence (export parity checks): the logits `[T, V]` after each
    /// of `tgt_in` (which starts with `<eos>`).
    pub fn forced_logits(&self, src: &[u32], tgt_in: &[u32]) -> Result<Vec<Vec<f32>>> {
        let encoded = [self.encode(src)?];
        let mut rows = self.initial_rows(&encoded);
        let mut scratch = Scratch::default();
        let mut profile = Profile::default();
        let mut out = Vec::with_capacity(tgt_in.len());
        for &y in tgt_in {
            if y as usize >= self.spec.tgt_vocab_size {
                return Err(Error::Invalid(format!(
                    "target id {y} is outside the target vocabulary of {} words",
                    self.spec.tgt_vocab_size
                )));
            }
            self.step(
                &[y],
                &mut rows,
                &encoded,
                Output::Full,
                &mut scratch,
                &mut profile,
            );
            out.push(scratch.logits.clone());
        }
        Ok(out)
    }

    /// Teacher forcing over a batch of `(source, target)` id pairs (sources end with `<eos>`,
    /// targets with `<eos>`): each decoder context `h̃` `[N, A]` and the reference word it
    /// predicts `[N]`, step by step (the decoder reads `<eos>`, then the reference so far).
    /// These are the contexts a softmax head for the translator is trained on.
    pub fn forced_contexts(&self, pairs: &[(&[u32], &[u32])]) -> Result<(Vec<f32>, Vec<u32>)> {
        let (a, v) = (self.spec.d_attn, self.spec.tgt_vocab_size);
        if let Some(&bad) = pairs.iter().flat_map(|p| p.1).find(|&&y| y as usize >= v) {
            return Err(Error::Invalid(format!(
                "target id {bad} is outside the target vocabulary of {v} words"
            )));
        }
        // Longest target first: the sentences still running at step t are a prefix.
        let mut order: Vec<usize> = (0..pairs.len())
            .filter(|&i| !pairs[i].1.is_empty())
            .collect();
        order.sort_by_key(|&i| std::cmp::Reverse(pairs[i].1.len()));
        let srcs: Vec<&[u32]> = order.iter().map(|&i| pairs[i].0).collect();
        let tgts: Vec<&[u32]> = order.iter().map(|&i| pairs[i].1).collect();
        let encoded = self.encode_batch(&srcs)?;
        let mut rows = self.initial_rows(&encoded);
        let (mut scratch, mut profile) = (Scratch::default(), Profile::default());
        let (mut hs, mut next) = (Vec::new(), Vec::new());
        let eos = self.tgt_vocab.eos();
        for t in 0..tgts.first().map_or(0, |y| y.len()) {
            let m = tgts.partition_point(|y| y.len() > t);
            if m < rows.len() {
                let keep: Vec<usize> = (0..m).collect();
                rows = rows.gather(&keep, self.spec.d_hidden, a);
            }
            let prev: Vec<u32> = tgts[..m]
                .iter()
                .map(|y| if t == 0 { eos } else { y[t - 1] })
                .collect();
            self.step(
                &prev,
                &mut rows,
                &encoded,
                Output::Skip,
                &mut scratch,
                &mut profile,
            );
            hs.extend_from_slice(&rows.feed);
            next.extend(tgts[..m].iter().map(|y| y[t]));
        }
        Ok((hs, next))
    }
}
