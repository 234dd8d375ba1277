//! The Transformer translator without burn: the teacher of sequence-level distillation
//! decoded on the CPU (`fastsoftmax_nn::transformer` trains it; `export_nmt` writes this
//! artifact), with the same beam search semantics as the recurrent engine.
//!
//! The computation is burn's pre-norm Transformer exactly (`crates/nn/tests/nmt.rs` holds the
//! two to 1e-4): per layer `x += Attn(LN(x))`, (decoder: `x += Cross(LN(x), memory)`),
//! `x += W₂·gelu(W₁·LN(x))`, then a final layer norm; embeddings × √d plus burn's interleaved
//! sinusoids (`[sin, cos]` per frequency). Every product is infer's packed tile kernel over a
//! batch of rows: a sentence's tokens in the encoder, every live hypothesis of every sentence
//! in a decoder step. The decoder keeps each hypothesis's self-attention keys and values (the
//! cache grows a row per step and is copied to the children when the beam reorders), and each
//! sentence's cross-attention keys and values are computed once from its encoding.
//!
//! The artifact: `manifest.json` (format [`FORMAT`]: the shape, the source tokens, both
//! vocabularies, SHA-256 of the data files), `model.safetensors` (f32, names and shapes in
//! [`TransformerWeights::expected_shapes`], weights as `[out, in]` rows) and, for a subword
//! source, [`SUBWORDS_FILE`].

use std::collections::BTreeMap;
use std::path::Path;

use fastsoftmax_infer::files::{self, write_atomic, Digests};
use fastsoftmax_infer::kernels::{dot, PackedMatrix};
use fastsoftmax_infer::{log_sum_exp_top_k, Error, Result, TopK, Vocab};
use serde::{Deserialize, Serialize};

use crate::artifact::Languages;
use crate::beam::{
    search_keeping_stand_ins, translation, Beams, Hyp, SearchOptions, Source, Translation,
};
use crate::placeholder::Placeholders;
use crate::tokenizer::{TokenKind, Tokenizer, SUBWORDS_FILE};

pub const FORMAT: &str = "fastsoftmax-nmt-transformer";
pub const FORMAT_VERSION: u32 = 1;
pub const MANIFEST_FILE: &str = "manifest.json";
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// Positions the sinusoid table covers (burn's training model uses the same table).
pub const MAX_POSITIONS: usize = 1024;
/// Layer norm's ε (burn's default).
const LN_EPS: f32 = 1e-5;

/// Dimensions of a Transformer translator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransformerSpec {
    pub src_vocab_size: usize,
    pub tgt_vocab_size: usize,
    pub d_model: usize,
    pub d_ff: usize,
    pub n_heads: usize,
    pub enc_layers: usize,
    pub dec_layers: usize,
    /// Output matrix = target embedding.
    pub tied: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: String,
    format_version: u32,
    #[serde(flatten)]
    spec: TransformerSpec,
    src_tokens: TokenKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    languages: Option<Languages>,
    src_vocab: Vec<String>,
    tgt_vocab: Vec<String>,
    sha256: Digests,
}

/// A Transformer translator's weights, vocabularies and source tokenizer.
#[derive(Debug, Clone)]
pub struct TransformerWeights {
    pub spec: TransformerSpec,
    pub src_tokenizer: Tokenizer,
    pub languages: Option<Languages>,
    pub src_vocab: Vocab,
    pub tgt_vocab: Vocab,
    /// name → values, shapes as in [`Self::expected_shapes`].
    pub tensors: BTreeMap<String, Vec<f32>>,
}

impl TransformerWeights {
    /// `(name, shape)` of every tensor (`D` model width, `F` feed-forward width):
    /// - `src_embedding [Vs, D]`, `tgt_embedding [Vt, D]`;
    /// - `encoder.{l}.`: `attn.{q,k,v,o}.{weight [D, D], bias [D]}`, `ff.inner.{weight [F, D],
    ///   bias [F]}`, `ff.outer.{weight [D, F], bias [D]}`, `norm_attn` / `norm_ff`
    ///   `.{gamma, beta} [D]`;
    /// - `decoder.{l}.`: the same with `self` and `cross` attentions and `norm_self`,
    ///   `norm_cross`, `norm_ff`;
    /// - `enc_norm` / `dec_norm` `.{gamma, beta}`; `output.weight [Vt, D]` unless tied,
    ///   `output.bias [Vt]`.
    pub fn expected_shapes(s: &TransformerSpec) -> Vec<(String, Vec<usize>)> {
        let (d, f) = (s.d_model, s.d_ff);
        let mut v = vec![
            ("src_embedding".to_string(), vec![s.src_vocab_size, d]),
            ("tgt_embedding".to_string(), vec![s.tgt_vocab_size, d]),
        ];
        let linear = |v: &mut Vec<(String, Vec<usize>)>, name: String, n_out, n_in| {
            v.push((format!("{name}.weight"), vec![n_out, n_in]));
            v.push((format!("{name}.bias"), vec![n_out]));
        };
        let norm = |v: &mut Vec<(String, Vec<usize>)>, name: String| {
            v.push((format!("{name}.gamma"), vec![d]));
            v.push((format!("{name}.beta"), vec![d]));
        };
        let attention = |v: &mut Vec<(String, Vec<usize>)>, name: String| {
            for p in ["q", "k", "v", "o"] {
                linear(v, format!("{name}.{p}"), d, d);
            }
        };
        let ff = |v: &mut Vec<(String, Vec<usize>)>, name: String| {
            linear(v, format!("{name}.inner"), f, d);
            linear(v, format!("{name}.outer"), d, f);
        };
        for l in 0..s.enc_layers {
            attention(&mut v, format!("encoder.{l}.attn"));
            norm(&mut v, format!("encoder.{l}.norm_attn"));
            ff(&mut v, format!("encoder.{l}.ff"));
            norm(&mut v, format!("encoder.{l}.norm_ff"));
        }
        for l in 0..s.dec_layers {
            attention(&mut v, format!("decoder.{l}.self"));
            norm(&mut v, format!("decoder.{l}.norm_self"));
            attention(&mut v, format!("decoder.{l}.cross"));
            norm(&mut v, format!("decoder.{l}.norm_cross"));
            ff(&mut v, format!("decoder.{l}.ff"));
            norm(&mut v, format!("decoder.{l}.norm_ff"));
        }
        norm(&mut v, "enc_norm".into());
        norm(&mut v, "dec_norm".into());
        if !s.tied {
            v.push(("output.weight".into(), vec![s.tgt_vocab_size, d]));
        }
        v.push(("output.bias".into(), vec![s.tgt_vocab_size]));
        v
    }

    /// Checks dimensions, vocabularies, every tensor's size and finiteness.
    pub fn validate(&self, origin: &Path) -> Result<()> {
        let s = &self.spec;
        let bad = |m: String| Err(Error::format(origin, m));
        if [
            s.src_vocab_size,
            s.tgt_vocab_size,
            s.d_model,
            s.d_ff,
            s.n_heads,
        ]
        .contains(&0)
            || s.enc_layers == 0
            || s.dec_layers == 0
            || !s.d_model.is_multiple_of(s.n_heads)
            || !s.d_model.is_multiple_of(2)
        {
            return bad(format!(
                "inconsistent shape {s:?}: every size must be positive and d_model an even multiple of n_heads"
            ));
        }
        if self.src_vocab.len() != s.src_vocab_size || self.tgt_vocab.len() != s.tgt_vocab_size {
            return bad(format!(
                "the vocabularies list {} and {} words, the manifest says {} and {}; the manifest was edited or belongs to another model",
                self.src_vocab.len(),
                self.tgt_vocab.len(),
                s.src_vocab_size,
                s.tgt_vocab_size
            ));
        }
        crate::artifact::check_tensors(
            &Self::expected_shapes(s),
            &self.tensors,
            origin,
            &format!("{s:?}"),
        )?;
        Ok(())
    }

    /// Writes the manifest, the weights and the source tokenizer into `dir`, each atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        self.validate(dir)?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let shapes: BTreeMap<String, Vec<usize>> =
            Self::expected_shapes(&self.spec).into_iter().collect();
        let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = self
            .tensors
            .iter()
            .map(|(name, data)| {
                let le = data.iter().flat_map(|x| x.to_le_bytes()).collect();
                (name.clone(), shapes[name].clone(), le)
            })
            .collect();
        let views = bytes
            .iter()
            .map(|(name, shape, b)| {
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), b)
                    .map(|v| (name.clone(), v))
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::format(dir.join(WEIGHTS_FILE), e.to_string()))?;
        let weights = safetensors::serialize(views, &None)
            .map_err(|e| Error::format(dir.join(WEIGHTS_FILE), e.to_string()))?;
        write_atomic(&dir.join(WEIGHTS_FILE), &weights)?;
        let mut sha256: Digests = [(WEIGHTS_FILE.to_string(), files::sha256_hex(&weights))].into();
        if let Some(json) = self.src_tokenizer.to_json() {
            write_atomic(&dir.join(SUBWORDS_FILE), json.as_bytes())?;
            sha256.insert(SUBWORDS_FILE.into(), files::sha256_hex(json.as_bytes()));
        }
        let manifest = Manifest {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            spec: self.spec,
            src_tokens: self.src_tokenizer.kind(),
            languages: self.languages.clone(),
            src_vocab: self.src_vocab.words().to_vec(),
            tgt_vocab: self.tgt_vocab.words().to_vec(),
            sha256,
        };
        let json = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
        write_atomic(&dir.join(MANIFEST_FILE), &json)
    }

    /// Loads and validates a Transformer translator directory.
    pub fn load(dir: &Path) -> Result<Self> {
        let manifest_path = dir.join(MANIFEST_FILE);
        let value = files::read_manifest(&manifest_path, FORMAT)?;
        let m: Manifest = serde_json::from_value(value)
            .map_err(|e| Error::format(&manifest_path, format!("not a valid manifest: {e}")))?;
        if m.format_version != FORMAT_VERSION {
            return Err(Error::format(
                &manifest_path,
                format!(
                    "format version {} is not the v{FORMAT_VERSION} this engine reads; update fastsoftmax",
                    m.format_version
                ),
            ));
        }
        let vocab =
            |words: &[String], field| crate::artifact::vocab_field(words, field, &manifest_path);
        let src_vocab = vocab(&m.src_vocab, "src_vocab")?;
        let tgt_vocab = vocab(&m.tgt_vocab, "tgt_vocab")?;
        let read_verified = |name: &str| -> Result<Vec<u8>> {
            let path = dir.join(name);
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            files::verify(
                &path,
                &bytes,
                &m.sha256,
                &manifest_path,
                dir,
                "export the teacher again",
            )?;
            Ok(bytes)
        };
        let src_tokenizer = match m.src_tokens {
            TokenKind::Words => Tokenizer::Words,
            TokenKind::Subwords { .. } => {
                let bytes = read_verified(SUBWORDS_FILE)?;
                Tokenizer::from_json(&String::from_utf8_lossy(&bytes)).map_err(|e| {
                    Error::format(
                        dir.join(SUBWORDS_FILE),
                        format!("not a subword tokenizer ({e})"),
                    )
                })?
            }
        };
        let weights_path = dir.join(WEIGHTS_FILE);
        let bytes = read_verified(WEIGHTS_FILE)?;
        let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| {
            Error::format(
                &weights_path,
                format!("not a readable safetensors file ({e}); it is truncated or corrupt"),
            )
        })?;
        let shapes: BTreeMap<String, Vec<usize>> =
            Self::expected_shapes(&m.spec).into_iter().collect();
        let mut tensors = BTreeMap::new();
        for (name, view) in st.tensors() {
            match shapes.get(&name) {
                Some(shape)
                    if view.dtype() == safetensors::Dtype::F32
                        && view.shape() == shape.as_slice() =>
                {
                    tensors.insert(name, files::f32_values(view.data()));
                }
                _ => {
                    return Err(Error::format(
                        &weights_path,
                        format!(
                            "tensor `{name}` ({:?} {:?}) is not one the manifest's shape has; the files belong to different models",
                            view.dtype(),
                            view.shape()
                        ),
                    ))
                }
            }
        }
        let w = TransformerWeights {
            spec: m.spec,
            src_tokenizer,
            languages: m.languages,
            src_vocab,
            tgt_vocab,
            tensors,
        };
        w.validate(&weights_path)?;
        Ok(w)
    }
}

/// `y = W·x + b` over a batch of rows.
struct Linear {
    w: PackedMatrix,
    d_in: usize,
}

impl Linear {
    fn new(w: &TransformerWeights, name: &str, d_in: usize) -> Linear {
        let (m, b) = (
            &w.tensors[&format!("{name}.weight")],
            &w.tensors[&format!("{name}.bias")],
        );
        Linear {
            w: PackedMatrix::new(m, b, d_in, None),
            d_in,
        }
    }

    /// `x [n, d_in]` → `[n, d_out]`.
    fn apply(&self, x: &[f32], out: &mut Vec<f32>) {
        let n = x.len() / self.d_in;
        out.resize(n * self.w.n_rows(), 0.0);
        self.w.logits_batch(x, out);
    }
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

impl Norm {
    fn new(w: &TransformerWeights, name: &str) -> Norm {
        Norm {
            gamma: w.tensors[&format!("{name}.gamma")].clone(),
            beta: w.tensors[&format!("{name}.beta")].clone(),
        }
    }

    /// Layer norm of each row of `x [n, D]` into `out`.
    fn apply(&self, x: &[f32], out: &mut Vec<f32>) {
        let d = self.gamma.len();
        out.resize(x.len(), 0.0);
        for (row, o) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            let mean = row.iter().sum::<f32>() / d as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
            let inv = 1.0 / (var + LN_EPS).sqrt();
            for i in 0..d {
                o[i] = (row[i] - mean) * inv * self.gamma[i] + self.beta[i];
            }
        }
    }
}

struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
}

impl Attention {
    fn new(w: &TransformerWeights, name: &str, d: usize) -> Attention {
        let l = |p: &str| Linear::new(w, &format!("{name}.{p}"), d);
        Attention {
            q: l("q"),
            k: l("k"),
            v: l("v"),
            o: l("o"),
        }
    }
}

struct FeedForward {
    inner: Linear,
    outer: Linear,
}

struct EncoderLayer {
    norm_attn: Norm,
    attn: Attention,
    norm_ff: Norm,
    ff: FeedForward,
}

struct DecoderLayer {
    norm_self: Norm,
    self_attn: Attention,
    norm_cross: Norm,
    cross: Attention,
    norm_ff: Norm,
    ff: FeedForward,
}

/// The error function, |error| < 1.2e-7 (Numerical Recipes' `erfcc`, Chebyshev fit).
fn erf(x: f32) -> f32 {
    let z = (x as f64).abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let e = 1.0 - t * poly.exp();
    (if x >= 0.0 { e } else { -e }) as f32
}

/// GELU as burn computes it (the exact one, with erf).
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// burn's sinusoids: position `i`, pair `k`: `[sin(i·ω_k), cos(i·ω_k)]`, `ω_k = 10000^(−2k/D)`.
fn sinusoids(length: usize, d: usize) -> Vec<f32> {
    let step = -(10_000f32).ln() / d as f32;
    let mut out = Vec::with_capacity(length * d);
    for i in 0..length {
        for k in (0..d).step_by(2) {
            let w = (k as f32 * step).exp();
            out.push((w * i as f32).sin());
            out.push((w * i as f32).cos());
        }
    }
    out
}

/// Scaled dot-product attention of one query row over `n` keys/values (`[n, D]`, head `h`
/// at columns `h·dk..(h+1)·dk`), summed into `out [D]`; adds each key's weight, averaged over
/// heads, into `weights [n]` when given.
fn attend(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    heads: usize,
    out: &mut [f32],
    scores: &mut Vec<f32>,
    mut weights: Option<&mut [f32]>,
) {
    let d = q.len();
    let dk = d / heads;
    let n = keys.len() / d;
    let scale = 1.0 / (dk as f32).sqrt();
    out.fill(0.0);
    scores.resize(n, 0.0);
    for h in 0..heads {
        let cols = h * dk..(h + 1) * dk;
        let qh = &q[cols.clone()];
        let mut max = f32::NEG_INFINITY;
        for (j, s) in scores.iter_mut().enumerate() {
            *s = dot(qh, &keys[j * d + cols.start..j * d + cols.end]) * scale;
            max = max.max(*s);
        }
        let mut sum = 0.0;
        for s in scores.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        let o = &mut out[cols.clone()];
        for (j, s) in scores.iter().enumerate() {
            let a = s / sum;
            if let Some(w) = weights.as_deref_mut() {
                w[j] += a / heads as f32;
            }
            let v = &values[j * d + cols.start..j * d + cols.end];
            for (oi, vi) in o.iter_mut().zip(v) {
                *oi += a * vi;
            }
        }
    }
}

/// A sentence encoded: each decoder layer's cross-attention keys and values `[S, D]`.
struct Memory {
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
    len: usize,
}

/// The Transformer engine (see the module docs).
pub struct TransformerTranslator {
    spec: TransformerSpec,
    src_tokenizer: Tokenizer,
    languages: Option<Languages>,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    src_embedding: Vec<f32>,
    tgt_embedding: Vec<f32>,
    positions: Vec<f32>,
    encoder: Vec<EncoderLayer>,
    enc_norm: Norm,
    decoder: Vec<DecoderLayer>,
    dec_norm: Norm,
    output: PackedMatrix,
}

impl TransformerTranslator {
    pub fn new(w: TransformerWeights) -> TransformerTranslator {
        let (d, f) = (w.spec.d_model, w.spec.d_ff);
        let ff = |name: String| FeedForward {
            inner: Linear::new(&w, &format!("{name}.inner"), d),
            outer: Linear::new(&w, &format!("{name}.outer"), f),
        };
        let encoder = (0..w.spec.enc_layers)
            .map(|l| EncoderLayer {
                norm_attn: Norm::new(&w, &format!("encoder.{l}.norm_attn")),
                attn: Attention::new(&w, &format!("encoder.{l}.attn"), d),
                norm_ff: Norm::new(&w, &format!("encoder.{l}.norm_ff")),
                ff: ff(format!("encoder.{l}.ff")),
            })
            .collect();
        let decoder = (0..w.spec.dec_layers)
            .map(|l| DecoderLayer {
                norm_self: Norm::new(&w, &format!("decoder.{l}.norm_self")),
                self_attn: Attention::new(&w, &format!("decoder.{l}.self"), d),
                norm_cross: Norm::new(&w, &format!("decoder.{l}.norm_cross")),
                cross: Attention::new(&w, &format!("decoder.{l}.cross"), d),
                norm_ff: Norm::new(&w, &format!("decoder.{l}.norm_ff")),
                ff: ff(format!("decoder.{l}.ff")),
            })
            .collect();
        let out_rows = if w.spec.tied {
            &w.tensors["tgt_embedding"]
        } else {
            &w.tensors["output.weight"]
        };
        let output = PackedMatrix::new(out_rows, &w.tensors["output.bias"], d, None);
        TransformerTranslator {
            spec: w.spec,
            positions: sinusoids(MAX_POSITIONS, d),
            encoder,
            enc_norm: Norm::new(&w, "enc_norm"),
            decoder,
            dec_norm: Norm::new(&w, "dec_norm"),
            output,
            src_embedding: w.tensors["src_embedding"].clone(),
            tgt_embedding: w.tensors["tgt_embedding"].clone(),
            src_tokenizer: w.src_tokenizer,
            languages: w.languages,
            src_vocab: w.src_vocab,
            tgt_vocab: w.tgt_vocab,
        }
    }

    pub fn load(dir: &Path) -> Result<TransformerTranslator> {
        Ok(Self::new(TransformerWeights::load(dir)?))
    }

    pub fn spec(&self) -> &TransformerSpec {
        &self.spec
    }

    pub fn src_vocab(&self) -> &Vocab {
        &self.src_vocab
    }

    pub fn tgt_vocab(&self) -> &Vocab {
        &self.tgt_vocab
    }

    pub fn src_tokenizer(&self) -> &Tokenizer {
        &self.src_tokenizer
    }

    /// The language pair it was trained for, when its artifact records one.
    pub fn languages(&self) -> Option<&Languages> {
        self.languages.as_ref()
    }

    /// `x [n, D]` += `ff(norm(x))`.
    fn feed_forward(&self, norm: &Norm, ff: &FeedForward, x: &mut [f32], s: &mut Scratch) {
        norm.apply(x, &mut s.h);
        ff.inner.apply(&s.h, &mut s.inner);
        s.inner.iter_mut().for_each(|v| *v = gelu(*v));
        ff.outer.apply(&s.inner, &mut s.proj);
        x.iter_mut().zip(&s.proj).for_each(|(a, b)| *a += b);
    }

    /// `ids [n]` at positions `first..first + n` → embeddings × √D + sinusoids `[n, D]`.
    fn embed(
        &self,
        table: &[f32],
        ids: &[u32],
        positions: impl Iterator<Item = usize>,
    ) -> Vec<f32> {
        let d = self.spec.d_model;
        let scale = (d as f32).sqrt();
        let mut x = Vec::with_capacity(ids.len() * d);
        for (&id, p) in ids.iter().zip(positions) {
            let e = &table[id as usize * d..(id as usize + 1) * d];
            let pos = &self.positions[p * d..(p + 1) * d];
            x.extend(e.iter().zip(pos).map(|(e, p)| e * scale + p));
        }
        x
    }

    /// A sentence's ids (ending with `<eos>`) → its cross-attention keys and values per
    /// decoder layer.
    fn encode(&self, ids: &[u32], s: &mut Scratch) -> Memory {
        let (d, heads) = (self.spec.d_model, self.spec.n_heads);
        let n = ids.len();
        let mut x = self.embed(&self.src_embedding, ids, 0..n);
        let mut ctx = vec![0.0; n * d];
        for layer in &self.encoder {
            layer.norm_attn.apply(&x, &mut s.h);
            layer.attn.q.apply(&s.h, &mut s.q);
            layer.attn.k.apply(&s.h, &mut s.k);
            layer.attn.v.apply(&s.h, &mut s.v);
            for i in 0..n {
                let q = &s.q[i * d..(i + 1) * d];
                attend(
                    q,
                    &s.k,
                    &s.v,
                    heads,
                    &mut ctx[i * d..(i + 1) * d],
                    &mut s.scores,
                    None,
                );
            }
            layer.attn.o.apply(&ctx, &mut s.proj);
            x.iter_mut().zip(&s.proj).for_each(|(a, b)| *a += b);
            self.feed_forward(&layer.norm_ff, &layer.ff, &mut x, s);
        }
        let mut memory = Vec::new();
        self.enc_norm.apply(&x, &mut memory);
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        for layer in &self.decoder {
            let (mut k, mut v) = (Vec::new(), Vec::new());
            layer.cross.k.apply(&memory, &mut k);
            layer.cross.v.apply(&memory, &mut v);
            keys.push(k);
            values.push(v);
        }
        Memory {
            keys,
            values,
            len: n,
        }
    }

    /// One decoder step for every row: `prev [R]` the rows' last words at position `t`,
    /// `sentence [R]` each row's sentence, `cache[l][r]` its self-attention keys and values
    /// (grown here) → the rows' logits `[R, Vt]` in `s.logits` and, per row, the source
    /// position the last layer's cross-attention weighs most.
    fn step(
        &self,
        prev: &[u32],
        t: usize,
        sentence: &[usize],
        memory: &[Memory],
        cache: &mut [Vec<(Vec<f32>, Vec<f32>)>],
        s: &mut Scratch,
    ) -> Vec<u32> {
        let (d, heads) = (self.spec.d_model, self.spec.n_heads);
        let rows = prev.len();
        let mut x = self.embed(&self.tgt_embedding, prev, std::iter::repeat(t));
        let mut ctx = vec![0.0; rows * d];
        let mut attended = vec![0u32; rows];
        for (l, layer) in self.decoder.iter().enumerate() {
            layer.norm_self.apply(&x, &mut s.h);
            layer.self_attn.q.apply(&s.h, &mut s.q);
            layer.self_attn.k.apply(&s.h, &mut s.k);
            layer.self_attn.v.apply(&s.h, &mut s.v);
            for r in 0..rows {
                let (keys, values) = &mut cache[l][r];
                keys.extend_from_slice(&s.k[r * d..(r + 1) * d]);
                values.extend_from_slice(&s.v[r * d..(r + 1) * d]);
                let q = &s.q[r * d..(r + 1) * d];
                attend(
                    q,
                    keys,
                    values,
                    heads,
                    &mut ctx[r * d..(r + 1) * d],
                    &mut s.scores,
                    None,
                );
            }
            layer.self_attn.o.apply(&ctx, &mut s.proj);
            x.iter_mut().zip(&s.proj).for_each(|(a, b)| *a += b);

            layer.norm_cross.apply(&x, &mut s.h);
            layer.cross.q.apply(&s.h, &mut s.q);
            let last = l + 1 == self.decoder.len();
            for r in 0..rows {
                let m = &memory[sentence[r]];
                let q = &s.q[r * d..(r + 1) * d];
                let out = &mut ctx[r * d..(r + 1) * d];
                if last {
                    s.weights.clear();
                    s.weights.resize(m.len, 0.0);
                    attend(
                        q,
                        &m.keys[l],
                        &m.values[l],
                        heads,
                        out,
                        &mut s.scores,
                        Some(&mut s.weights),
                    );
                    attended[r] = s
                        .weights
                        .iter()
                        .enumerate()
                        .max_by(|a, b| a.1.total_cmp(b.1))
                        .map_or(0, |(j, _)| j as u32);
                } else {
                    attend(q, &m.keys[l], &m.values[l], heads, out, &mut s.scores, None);
                }
            }
            layer.cross.o.apply(&ctx, &mut s.proj);
            x.iter_mut().zip(&s.proj).for_each(|(a, b)| *a += b);
            self.feed_forward(&layer.norm_ff, &layer.ff, &mut x, s);
        }
        self.dec_norm.apply(&x, &mut s.h);
        s.logits.resize(rows * self.spec.tgt_vocab_size, 0.0);
        self.output.logits_batch(&s.h, &mut s.logits);
        attended
    }

    /// Teacher forcing: the logits `[T, Vt]` of each target position of `tgt` (`<eos>`, then
    /// the words) given the source ids (ending with `<eos>`). For parity tests.
    pub fn forced_logits(&self, src: &[u32], tgt_in: &[u32]) -> Vec<f32> {
        let mut s = Scratch::default();
        let memory = [self.encode(src, &mut s)];
        let mut cache = vec![vec![(Vec::new(), Vec::new())]; self.decoder.len()];
        let mut out = Vec::new();
        for (t, &y) in tgt_in.iter().enumerate() {
            self.step(&[y], t, &[0], &memory, &mut cache, &mut s);
            out.extend_from_slice(&s.logits);
        }
        out
    }

    /// Tokenizes a source line, maps unknown tokens to `<unk>`, cuts it to
    /// `max_source_tokens` and appends `<eos>`.
    pub fn source(&self, line: &str, max_source_tokens: usize) -> Source {
        Source::new(
            line,
            &self.src_tokenizer,
            &self.src_vocab,
            max_source_tokens,
            Placeholders::for_languages(self.languages.as_ref()),
        )
    }

    /// Translates lines (one sentence each) as one batch; per line its `n_best` translations.
    /// Line `i` of the result is the translation of line `i`.
    pub fn translate(&self, lines: &[&str], opts: &SearchOptions) -> Result<Vec<Vec<Translation>>> {
        let sources: Vec<Source> = lines
            .iter()
            .map(|l| self.source(l, opts.max_source_tokens.min(MAX_POSITIONS / 2 - 10)))
            .collect();
        self.search(&sources, opts)
    }

    /// Beam search over a batch of prepared sources, as [`crate::engine::Translator::search`]:
    /// per-sentence beams that shrink as hypotheses finish, `log p / len^α`, at most
    /// `2·S + 10` tokens, `<unk>` replaced by the most attended source token; a line whose
    /// translation dropped a stand-in is tried once more with others.
    pub fn search(
        &self,
        sources: &[Source],
        opts: &SearchOptions,
    ) -> Result<Vec<Vec<Translation>>> {
        search_keeping_stand_ins(
            sources,
            &self.tgt_vocab,
            |s| s.with_next_stand_ins(&self.src_tokenizer, &self.src_vocab),
            |s| self.search_once(s, opts),
        )
    }

    /// [`TransformerTranslator::search`] without the retry.
    fn search_once(
        &self,
        sources: &[Source],
        opts: &SearchOptions,
    ) -> Result<Vec<Vec<Translation>>> {
        opts.check()?;
        let mut results: Vec<Vec<Translation>> = vec![Vec::new(); sources.len()];
        let active: Vec<usize> = (0..sources.len())
            .filter(|&i| !sources[i].tokens.is_empty())
            .collect();
        for (i, src) in sources.iter().enumerate() {
            if src.tokens.is_empty() {
                results[i].push(translation(&self.tgt_vocab, Hyp::empty(), 0.0, src, false));
            }
            if src.ids.len() > MAX_POSITIONS / 2 {
                return Err(Error::Invalid(format!(
                    "a source of {} tokens is longer than the Transformer's {} positions allow; cut it (max_source_tokens)",
                    src.ids.len(),
                    MAX_POSITIONS / 2 - 10
                )));
            }
        }
        if active.is_empty() {
            return Ok(results);
        }
        let mut s = Scratch::default();
        let memory: Vec<Memory> = active
            .iter()
            .map(|&i| self.encode(&sources[i].ids, &mut s))
            .collect();
        let k = opts.top_k();
        let max_len = memory.iter().map(|m| 2 * m.len + 10).collect();
        let mut beams = Beams::new(max_len, opts, self.tgt_vocab.eos());
        let mut cache: Vec<Vec<(Vec<f32>, Vec<f32>)>> =
            vec![vec![(Vec::new(), Vec::new()); memory.len()]; self.decoder.len()];
        let vt = self.spec.tgt_vocab_size;
        let mut tops: Vec<TopK> = Vec::new();
        let mut step = 0;
        while !beams.is_done() {
            let attended = self.step(
                &beams.prev,
                step,
                &beams.sentence,
                &memory,
                &mut cache,
                &mut s,
            );
            let n = beams.prev.len();
            tops.resize_with(n, || TopK::new(k));
            let mut log_z = vec![0.0; n];
            for r in 0..n {
                tops[r].reset(k);
                log_z[r] = log_sum_exp_top_k(&s.logits[r * vt..(r + 1) * vt], Some(&mut tops[r]));
            }
            let parents = beams.advance(&tops[..n], &log_z, |_, id| id, |row| attended[row]);
            for layer in cache.iter_mut() {
                *layer = parents.iter().map(|&p| layer[p].clone()).collect();
            }
            step += 1;
        }
        for (fin, &i) in beams.finished().into_iter().zip(&active) {
            results[i] = fin
                .into_iter()
                .take(opts.n_best)
                .map(|(score, h)| {
                    translation(&self.tgt_vocab, h, score, &sources[i], opts.replace_unk)
                })
                .collect();
        }
        Ok(results)
    }
}

/// Buffers reused across layers and steps.
#[derive(Default)]
struct Scratch {
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    proj: Vec<f32>,
    inner: Vec<f32>,
    scores: Vec<f32>,
    weights: Vec<f32>,
    logits: Vec<f32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_and_gelu_match_known_values() {
        for (x, want) in [
            (0.0f32, 0.0f32),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-2.0, -0.995_322_3),
        ] {
            assert!((erf(x) - want).abs() < 1e-6, "erf({x}) = {}", erf(x));
        }
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-6);
        assert_eq!(gelu(0.0), 0.0);
    }

    #[test]
    fn sinusoids_interleave_sine_and_cosine() {
        let p = sinusoids(3, 4);
        assert_eq!(&p[..4], &[0.0, 1.0, 0.0, 1.0]);
        assert!((p[4] - 1f32.sin()).abs() < 1e-6 && (p[5] - 1f32.cos()).abs() < 1e-6);
        assert!((p[6] - 0.01f32.sin()).abs() < 1e-6, "ω_1 = 10000^(-2/4)");
    }
}
