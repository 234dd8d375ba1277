//! The translator artifact on disk: `manifest.json` (format `fastsoftmax-nmt`: the shape,
//! both vocabularies, the SHA-256 of the weights) and `model.safetensors` (row-major, PyTorch
//! layouts; see [`NmtWeights::expected_shapes`] for every name and shape).
//!
//! Format v1 holds f32 tensors. v2 (written by `fastsoftmax quantize`) adds a `precision`:
//! with `int8`, every matrix is stored as I8 rows `name` `[n, d]` with F32 `name.scale` `[n]`
//! (`W ≈ W8 · scale`, one scale per row); with `int16`, as I16 `name` `[n, d]` with one F32
//! `name.scale` `[1]` per matrix (Devlin 2017). Biases stay F32. An engine that reads v1 only
//! refuses v2 with a version error instead of misreading it. v3 reads the source as subwords;
//! v4 ships the vocabulary map gzip-compressed (`vocab.map.gz`; v2 and v3 ship `vocab.map`).

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::Path;

use fastsoftmax_infer::files::{self, write_atomic, Digests};
use fastsoftmax_infer::model::artifact::Cell;
use fastsoftmax_infer::{Error, Result, Vocab};
use flate2::{read::GzDecoder, write::GzEncoder, Compression};
use serde::{Deserialize, Serialize};

use crate::tokenizer::{TokenKind, Tokenizer, SUBWORDS_FILE};
use crate::vmap::VocabMap;

pub const MANIFEST_FILE: &str = "manifest.json";
pub const WEIGHTS_FILE: &str = "model.safetensors";
pub const FORMAT: &str = "fastsoftmax-nmt";
/// The vocabulary map a translator folder may ship (`quantize --vmap`), gzip-compressed text
/// (a third of its bytes), recorded with its digest in the manifest;
/// [`crate::Translator::load`] serves it.
pub const VMAP_FILE: &str = "vocab.map.gz";
/// The map as plain text, as v2 and v3 folders ship it: still read.
pub const VMAP_TEXT_FILE: &str = "vocab.map";
/// The newest format this engine reads (it reads every older one too). v3: the source is
/// read as subwords ([`crate::tokenizer`]), whose tokenizer is a file beside the weights. v4:
/// the shipped vocabulary map is compressed ([`VMAP_FILE`]); an older engine would not see it
/// and would decode without it, so it refuses v4 instead.
pub const FORMAT_VERSION: u32 = 4;

/// The language pair a translator was trained for (the data files' suffixes, e.g. `ja` →
/// `en`), recorded so that a model under another pair's name is caught; absent in artifacts
/// from before it was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Languages {
    pub src: String,
    pub tgt: String,
}

impl std::fmt::Display for Languages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} → {}", self.src, self.tgt)
    }
}

/// How the matrices are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    F32,
    /// int8 rows with one f32 scale per row.
    Int8,
    /// int16 with one f32 scale per matrix.
    Int16,
}

/// Dimensions of a translator (see `fastsoftmax_nn::seq2seq` for the computation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NmtSpec {
    pub cell: Cell,
    pub src_vocab_size: usize,
    pub tgt_vocab_size: usize,
    pub d_embed: usize,
    /// Decoder state and encoder output width (each encoder direction has half).
    pub d_hidden: usize,
    /// Width of the attentional vector `h̃` (the output layer's input).
    pub d_attn: usize,
    pub enc_layers: usize,
    pub dec_layers: usize,
    /// Output matrix = target embedding (needs `d_attn == d_embed`).
    pub tied: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: String,
    format_version: u32,
    #[serde(default)]
    precision: Precision,
    #[serde(flatten)]
    spec: NmtSpec,
    /// How the source is cut into tokens (absent before v3: words).
    #[serde(default)]
    src_tokens: TokenKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    languages: Option<Languages>,
    src_vocab: Vec<String>,
    tgt_vocab: Vec<String>,
    sha256: Digests,
}

/// Everything the engine needs: dimensions, vocabularies and named weights.
#[derive(Debug, Clone, PartialEq)]
pub struct NmtWeights {
    pub spec: NmtSpec,
    pub src_vocab: Vocab,
    pub tgt_vocab: Vocab,
    /// name → values, shapes as in [`NmtWeights::expected_shapes`] (for an int8 model the
    /// matrices' values dequantized, which the embedding lookups read).
    pub tensors: BTreeMap<String, Vec<f32>>,
    /// For an int8 model, every matrix as stored: name → (int8 rows, per-row scale).
    pub int8: BTreeMap<String, (Vec<i8>, Vec<f32>)>,
    /// For an int16 model, every matrix as stored: name → (int16 values, its one scale).
    pub int16: BTreeMap<String, (Vec<i16>, f32)>,
    /// How the source is cut into tokens.
    pub src_tokenizer: Tokenizer,
    pub languages: Option<Languages>,
    /// The vocabulary map shipped with the weights ([`VMAP_FILE`]), if any.
    pub vmap: Option<VocabMap>,
}

impl NmtWeights {
    /// `(name, shape)` of every tensor for `spec` (`G` gates: 4 LSTM i,f,g,o; 3 GRU r,z,n):
    /// - `src_embedding [Vs, E]`, `tgt_embedding [Vt, E]`;
    /// - `encoder.{l}.{fwd,bwd}.{w_ih [G·H/2, d_in], w_hh [G·H/2, H/2], b_ih, b_hh [G·H/2]}`
    ///   with `d_in` = E for layer 0, H above;
    /// - `decoder.{l}.{w_ih [G·H, d_in], w_hh [G·H, H], b_ih, b_hh}` with `d_in` = E + A for
    ///   layer 0 (embedding, then the fed `h̃`), H above;
    /// - `attn.score [H, H]` (`keys = enc · attn.scoreᵀ`), `attn.out [A, 2H]`
    ///   (`h̃ = tanh(attn.out · [c; h])`);
    /// - `output.weight [Vt, A]` unless tied, `output.bias [Vt]`.
    pub fn expected_shapes(s: &NmtSpec) -> Vec<(String, Vec<usize>)> {
        let (h, half) = (s.d_hidden, s.d_hidden / 2);
        let g = s.cell.gates();
        let mut v = vec![
            (
                "src_embedding".to_string(),
                vec![s.src_vocab_size, s.d_embed],
            ),
            (
                "tgt_embedding".to_string(),
                vec![s.tgt_vocab_size, s.d_embed],
            ),
        ];
        let mut layer = |prefix: String, d_in: usize, d_h: usize| {
            v.push((format!("{prefix}.w_ih"), vec![g * d_h, d_in]));
            v.push((format!("{prefix}.w_hh"), vec![g * d_h, d_h]));
            v.push((format!("{prefix}.b_ih"), vec![g * d_h]));
            v.push((format!("{prefix}.b_hh"), vec![g * d_h]));
        };
        for l in 0..s.enc_layers {
            let d_in = if l == 0 { s.d_embed } else { h };
            layer(format!("encoder.{l}.fwd"), d_in, half);
            layer(format!("encoder.{l}.bwd"), d_in, half);
        }
        for l in 0..s.dec_layers {
            let d_in = if l == 0 { s.d_embed + s.d_attn } else { h };
            layer(format!("decoder.{l}"), d_in, h);
        }
        v.push(("attn.score".into(), vec![h, h]));
        v.push(("attn.out".into(), vec![s.d_attn, 2 * h]));
        if !s.tied {
            v.push(("output.weight".into(), vec![s.tgt_vocab_size, s.d_attn]));
        }
        v.push(("output.bias".into(), vec![s.tgt_vocab_size]));
        v
    }

    /// The values of tensor `name` (validated weights hold every expected name).
    pub fn get(&self, name: &str) -> &[f32] {
        &self.tensors[name]
    }

    /// The output matrix `[Vt, A]` (the target embedding when tied).
    pub fn output_matrix(&self) -> &[f32] {
        if self.spec.tied {
            self.get("tgt_embedding")
        } else {
            self.get("output.weight")
        }
    }

    /// How the matrices are stored.
    pub fn precision(&self) -> Precision {
        if !self.int8.is_empty() {
            Precision::Int8
        } else if !self.int16.is_empty() {
            Precision::Int16
        } else {
            Precision::F32
        }
    }

    /// The same translator with every matrix quantized to int16 with one scale per matrix
    /// (biases stay f32): half the size.
    pub fn quantize_int16(&self) -> NmtWeights {
        let shapes = Self::expected_shapes(&self.spec);
        let mut out = self.clone();
        out.int8.clear();
        out.int16.clear();
        for (name, shape) in shapes.iter().filter(|(_, s)| s.len() == 2) {
            let (q, scale) =
                fastsoftmax_infer::kernels::quantize_matrix16(self.get(name), shape[1]);
            out.tensors
                .insert(name.clone(), q.iter().map(|&x| x as f32 * scale).collect());
            out.int16.insert(name.clone(), (q, scale));
        }
        out
    }

    /// The same translator with every matrix quantized to int8 rows with one scale per row
    /// (biases stay f32): a quarter of the size, and products on the int8 kernels.
    pub fn quantize_int8(&self) -> NmtWeights {
        let shapes = Self::expected_shapes(&self.spec);
        let mut out = self.clone();
        out.int8.clear();
        out.int16.clear();
        for (name, shape) in shapes.iter().filter(|(_, s)| s.len() == 2) {
            let d = shape[1];
            let (q, scale) = fastsoftmax_infer::kernels::quantize_rows(self.get(name), d);
            let back = q
                .chunks_exact(d)
                .zip(&scale)
                .flat_map(|(row, s)| row.iter().map(move |&x| x as f32 * s))
                .collect();
            out.tensors.insert(name.clone(), back);
            out.int8.insert(name.clone(), (q, scale));
        }
        out
    }

    /// The same translator with f32 matrices: a quantized model's values as it serves them
    /// (each int8 row or int16 matrix times its scale), for the f32 engine; an f32 model as is.
    pub fn to_f32(&self) -> NmtWeights {
        let mut out = self.clone();
        out.int8.clear();
        out.int16.clear();
        out
    }

    /// Checks dimensions, vocabularies, every tensor's size and finiteness.
    pub fn validate(&self, origin: &Path) -> Result<()> {
        let s = &self.spec;
        let bad = |m: String| Err(Error::format(origin, m));
        if [
            s.src_vocab_size,
            s.tgt_vocab_size,
            s.d_embed,
            s.d_hidden,
            s.d_attn,
        ]
        .contains(&0)
            || s.enc_layers == 0
            || s.dec_layers == 0
        {
            return bad(format!("dimensions must be positive, got {s:?}"));
        }
        if !s.d_hidden.is_multiple_of(2)
            || s.dec_layers > s.enc_layers
            || (s.tied && s.d_attn != s.d_embed)
        {
            return bad(format!(
                "inconsistent shape {s:?}: d_hidden must be even, dec_layers ≤ enc_layers, and tied needs d_attn == d_embed"
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
        check_tensors(
            &Self::expected_shapes(s),
            &self.tensors,
            origin,
            &format!("{s:?}"),
        )?;
        for (name, shape) in Self::expected_shapes(s) {
            let want: usize = shape.iter().product();
            if let Some((q, scale)) = self.int8.get(&name) {
                if shape.len() != 2 || q.len() != want || scale.len() != shape[0] {
                    return bad(format!(
                        "int8 tensor `{name}` has {} values and {} scales, the manifest's dimensions need {want} and {}",
                        q.len(),
                        scale.len(),
                        shape[0]
                    ));
                }
                if let Some(i) = scale.iter().position(|x| !x.is_finite() || *x < 0.0) {
                    return bad(format!(
                        "tensor `{name}.scale` holds an invalid scale ({}) at row {i}; re-quantize the model",
                        scale[i]
                    ));
                }
            }
            if let Some((q, scale)) = self.int16.get(&name) {
                if shape.len() != 2 || q.len() != want || !scale.is_finite() || *scale < 0.0 {
                    return bad(format!(
                        "int16 tensor `{name}` has {} values and scale {scale}, the manifest's dimensions need {want} and a finite scale ≥ 0",
                        q.len()
                    ));
                }
            }
        }
        if !self.int8.is_empty() && !self.int16.is_empty() {
            return bad("a model is int8 or int16, not both; re-quantize it".into());
        }
        let precision = self.precision();
        if precision != Precision::F32 {
            let matrices = Self::expected_shapes(s)
                .into_iter()
                .filter(|(_, shape)| shape.len() == 2);
            for (name, _) in matrices {
                if !self.int8.contains_key(&name) && !self.int16.contains_key(&name) {
                    return bad(format!(
                        "{precision:?} model without a quantized `{name}`; re-quantize it with `fastsoftmax quantize`"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Writes `manifest.json` and `model.safetensors` into `dir`, each atomically (format v1
    /// for f32, v2 for int8).
    pub fn save(&self, dir: &Path) -> Result<()> {
        self.validate(dir)?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let bytes = self
            .safetensors()
            .map_err(|e| Error::format(dir.join(WEIGHTS_FILE), e))?;
        write_atomic(&dir.join(WEIGHTS_FILE), &bytes)?;
        let mut sha256: Digests = [(WEIGHTS_FILE.to_string(), files::sha256_hex(&bytes))].into();
        if let Some(json) = self.src_tokenizer.to_json() {
            write_atomic(&dir.join(SUBWORDS_FILE), json.as_bytes())?;
            sha256.insert(
                SUBWORDS_FILE.to_string(),
                files::sha256_hex(json.as_bytes()),
            );
        }
        if let Some(map) = &self.vmap {
            let mut gz = GzEncoder::new(Vec::new(), Compression::best());
            gz.write_all(map.to_text().as_bytes())
                .and_then(|()| gz.flush())
                .map_err(|e| Error::io(dir.join(VMAP_FILE), e))?;
            let bytes = gz.finish().map_err(|e| Error::io(dir.join(VMAP_FILE), e))?;
            write_atomic(&dir.join(VMAP_FILE), &bytes)?;
            sha256.insert(VMAP_FILE.to_string(), files::sha256_hex(&bytes));
        }
        let precision = self.precision();
        let src_tokens = self.src_tokenizer.kind();
        let manifest = Manifest {
            format: FORMAT.into(),
            // The oldest version that holds the model, so that older engines keep reading
            // what they can: f32 words v1, quantized v2, subwords v3, a compressed map v4.
            format_version: if self.vmap.is_some() {
                4
            } else if src_tokens != TokenKind::Words {
                3
            } else if precision == Precision::F32 {
                1
            } else {
                2
            },
            precision,
            spec: self.spec,
            src_tokens,
            languages: self.languages.clone(),
            src_vocab: self.src_vocab.words().to_vec(),
            tgt_vocab: self.tgt_vocab.words().to_vec(),
            sha256,
        };
        let json = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
        write_atomic(&dir.join(MANIFEST_FILE), &json)
    }

    /// The weights file: f32 tensors, and for int8 matrices I8 rows with F32 `.scale`s.
    fn safetensors(&self) -> std::result::Result<Vec<u8>, String> {
        use safetensors::{tensor::TensorView, Dtype};
        let shapes: HashMap<String, Vec<usize>> =
            Self::expected_shapes(&self.spec).into_iter().collect();
        let mut owned: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
        let le = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        for (name, data) in &self.tensors {
            let shape = shapes[name].clone();
            if let Some((q, scale)) = self.int8.get(name) {
                let rows = shape[0];
                let bytes = q.iter().map(|&x| x as u8).collect();
                owned.push((name.clone(), Dtype::I8, shape, bytes));
                owned.push((format!("{name}.scale"), Dtype::F32, vec![rows], le(scale)));
            } else if let Some((q, scale)) = self.int16.get(name) {
                let bytes = q.iter().flat_map(|x| x.to_le_bytes()).collect();
                owned.push((name.clone(), Dtype::I16, shape, bytes));
                owned.push((format!("{name}.scale"), Dtype::F32, vec![1], le(&[*scale])));
            } else {
                owned.push((name.clone(), Dtype::F32, shape, le(data)));
            }
        }
        let views = owned
            .iter()
            .map(|(name, dtype, shape, bytes)| {
                TensorView::new(*dtype, shape.clone(), bytes)
                    .map(|v| (name.clone(), v))
                    .map_err(|e| format!("tensor `{name}`: {e}"))
            })
            .collect::<std::result::Result<Vec<_>, String>>()?;
        safetensors::serialize(views, &None).map_err(|e| e.to_string())
    }

    /// Loads and validates a translator directory.
    pub fn load(dir: &Path) -> Result<Self> {
        let manifest_path = dir.join(MANIFEST_FILE);
        let weights_path = dir.join(WEIGHTS_FILE);
        if !manifest_path.exists() {
            return Err(Error::format(
                &manifest_path,
                "missing: a translator directory holds manifest.json and model.safetensors, written by `fastsoftmax train-nmt`",
            ));
        }
        let value = files::read_manifest(&manifest_path, FORMAT)?;
        let manifest: Manifest = serde_json::from_value(value).map_err(|e| {
            Error::format(
                &manifest_path,
                format!("not a valid translator manifest: {e}"),
            )
        })?;
        if manifest.format_version > FORMAT_VERSION || manifest.format_version == 0 {
            return Err(Error::format(
                &manifest_path,
                format!(
                    "format version {} is newer than this engine, which reads v1 to v{FORMAT_VERSION}; update fastsoftmax, or use the model's f32 (v1) export",
                    manifest.format_version
                ),
            ));
        }
        if manifest.format_version == 1 && manifest.precision != Precision::F32 {
            return Err(Error::format(
                &manifest_path,
                "a v1 manifest holds f32 weights only; this one names another precision — re-quantize the model",
            ));
        }
        let vocab = |words: &[String], field| vocab_field(words, field, &manifest_path);
        let src_vocab = vocab(&manifest.src_vocab, "src_vocab")?;
        let tgt_vocab = vocab(&manifest.tgt_vocab, "tgt_vocab")?;
        let bytes = std::fs::read(&weights_path).map_err(|e| Error::io(&weights_path, e))?;
        files::verify(
            &weights_path,
            &bytes,
            &manifest.sha256,
            &manifest_path,
            dir,
            "re-export the model with `fastsoftmax train-nmt --resume`",
        )?;
        let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| {
            Error::format(
                &weights_path,
                format!("not a readable safetensors file ({e}); it is truncated or corrupt"),
            )
        })?;
        let shapes: HashMap<String, Vec<usize>> =
            Self::expected_shapes(&manifest.spec).into_iter().collect();
        let precision = manifest.precision;
        let quantized_matrices = precision != Precision::F32;
        let mut tensors = BTreeMap::new();
        let mut quantized: BTreeMap<String, Vec<i8>> = BTreeMap::new();
        let mut quantized16 = BTreeMap::new();
        let mut scales: HashMap<String, Vec<f32>> = HashMap::new();
        for (name, view) in st.tensors() {
            if let Some(matrix) = name.strip_suffix(".scale").filter(|_| quantized_matrices) {
                // int8: one scale per row; int16: one per matrix.
                let rows = shapes.get(matrix).filter(|s| s.len() == 2).map(|s| {
                    if precision == Precision::Int8 {
                        s[0]
                    } else {
                        1
                    }
                });
                if view.dtype() != safetensors::Dtype::F32
                    || Some(view.shape()) != rows.as_ref().map(std::slice::from_ref)
                {
                    return Err(Error::format(
                        &weights_path,
                        format!(
                            "tensor `{name}` is {:?} {:?}, the manifest needs F32 [{}]; the files belong to different models",
                            view.dtype(),
                            view.shape(),
                            rows.map_or("?".into(), |r| r.to_string())
                        ),
                    ));
                }
                scales.insert(matrix.to_string(), files::f32_values(view.data()));
                continue;
            }
            let Some(shape) = shapes.get(&name) else {
                return Err(Error::format(
                    &weights_path,
                    format!("unexpected tensor `{name}`; the files belong to different models"),
                ));
            };
            let dtype = match precision {
                Precision::Int8 if shape.len() == 2 => safetensors::Dtype::I8,
                Precision::Int16 if shape.len() == 2 => safetensors::Dtype::I16,
                _ => safetensors::Dtype::F32,
            };
            if view.dtype() != dtype || view.shape() != shape.as_slice() {
                return Err(Error::format(
                    &weights_path,
                    format!(
                        "tensor `{name}` is {:?} {:?}, the manifest needs {dtype:?} {shape:?}; the files belong to different models",
                        view.dtype(),
                        view.shape()
                    ),
                ));
            }
            match dtype {
                safetensors::Dtype::I8 => {
                    quantized.insert(name, view.data().iter().map(|&b| b as i8).collect());
                }
                safetensors::Dtype::I16 => {
                    let q = view
                        .data()
                        .chunks_exact(2)
                        .map(|c| i16::from_le_bytes([c[0], c[1]]));
                    quantized16.insert(name, q.collect::<Vec<i16>>());
                }
                _ => {
                    tensors.insert(name, files::f32_values(view.data()));
                }
            }
        }
        let mut int8_tensors = BTreeMap::new();
        for (name, q) in quantized {
            let Some(scale) = scales.remove(&name) else {
                return Err(Error::format(
                    &weights_path,
                    format!("int8 tensor `{name}` has no `{name}.scale`; re-quantize the model"),
                ));
            };
            let d = shapes[&name][1];
            let values = q
                .chunks_exact(d)
                .zip(&scale)
                .flat_map(|(row, s)| row.iter().map(move |&x| x as f32 * s))
                .collect();
            tensors.insert(name.clone(), values);
            int8_tensors.insert(name, (q, scale));
        }
        let mut int16_tensors = BTreeMap::new();
        for (name, q) in quantized16 {
            let Some(scale) = scales.remove(&name) else {
                return Err(Error::format(
                    &weights_path,
                    format!("int16 tensor `{name}` has no `{name}.scale`; re-quantize the model"),
                ));
            };
            tensors.insert(
                name.clone(),
                q.iter().map(|&x| x as f32 * scale[0]).collect(),
            );
            int16_tensors.insert(name, (q, scale[0]));
        }
        if let Some(name) = scales.keys().next() {
            return Err(Error::format(
                &weights_path,
                format!("unexpected tensor `{name}.scale`; the files belong to different models"),
            ));
        }
        // A file beside the weights that the manifest digests: `what` it is, for the error
        // when it is missing.
        let read_beside = |name: &str, what: &str| -> Result<Vec<u8>> {
            let path = dir.join(name);
            let fix = "restore it, or export the model again";
            let bytes = std::fs::read(&path).map_err(|e| {
                Error::format(&path, format!("{e}: the translator needs {what}; {fix}"))
            })?;
            files::verify(&path, &bytes, &manifest.sha256, &manifest_path, dir, fix)?;
            Ok(bytes)
        };
        let src_tokenizer = match manifest.src_tokens {
            TokenKind::Words => Tokenizer::Words,
            TokenKind::Subwords { .. } => {
                let bytes =
                    read_beside(SUBWORDS_FILE, "this subword tokenizer to read its source")?;
                Tokenizer::from_json(&String::from_utf8_lossy(&bytes)).map_err(|e| {
                    Error::format(
                        dir.join(SUBWORDS_FILE),
                        format!("not a subword tokenizer ({e})"),
                    )
                })?
            }
        };
        // A map ships only when the manifest records it: a stray file is not read.
        let vmap = match [VMAP_FILE, VMAP_TEXT_FILE]
            .into_iter()
            .find(|f| manifest.sha256.contains_key(*f))
        {
            None => None,
            Some(file) => {
                let path = dir.join(file);
                let mut bytes = read_beside(file, "the vocabulary map its manifest lists")?;
                if file == VMAP_FILE {
                    let mut text = Vec::new();
                    GzDecoder::new(&bytes[..])
                        .read_to_end(&mut text)
                        .map_err(|e| Error::format(&path, format!("not a gzip-compressed map ({e}); restore it, or quantize the model again")))?;
                    bytes = text;
                }
                let map = VocabMap::parse(&String::from_utf8_lossy(&bytes))
                    .map_err(|e| Error::format(&path, e))?;
                Some(map)
            }
        };
        let w = NmtWeights {
            spec: manifest.spec,
            src_vocab,
            tgt_vocab,
            tensors,
            int8: int8_tensors,
            int16: int16_tensors,
            src_tokenizer,
            languages: manifest.languages,
            vmap,
        };
        w.validate(&weights_path)?;
        Ok(w)
    }
}

/// Checks that `tensors` holds exactly the `expected` names, each with its shape's number of
/// values, all finite (`shape` names the model's dimensions in the errors).
pub(crate) fn check_tensors(
    expected: &[(String, Vec<usize>)],
    tensors: &BTreeMap<String, Vec<f32>>,
    origin: &Path,
    shape: &str,
) -> Result<()> {
    let bad = |m: String| Err(Error::format(origin, m));
    if expected.len() != tensors.len() {
        return bad(format!(
            "{} tensors, the shape {shape} needs {}; the files belong to different models",
            tensors.len(),
            expected.len()
        ));
    }
    for (name, dims) in expected {
        let Some(data) = tensors.get(name) else {
            return bad(format!(
                "tensor `{name}` is missing; the files belong to different models"
            ));
        };
        let want: usize = dims.iter().product();
        if data.len() != want {
            return bad(format!(
                "tensor `{name}` has {} values, the manifest's dimensions need {want} ({dims:?})",
                data.len()
            ));
        }
        if let Some(i) = data.iter().position(|x| !x.is_finite()) {
            return bad(format!(
                "tensor `{name}` holds a non-finite value ({}) at index {i}; the model diverged or the file is corrupt — retrain or re-export it",
                data[i]
            ));
        }
    }
    Ok(())
}

/// The vocabulary of a manifest's `field` (`words` in id order), which must hold `<unk>` and
/// `<eos>` already: a list the loader had to complete belongs to another model.
pub(crate) fn vocab_field(words: &[String], field: &str, manifest: &Path) -> Result<Vocab> {
    let v = Vocab::from_words(words.to_vec())
        .map_err(|e| Error::format(manifest, format!("field `{field}`: {e}")))?;
    if v.len() != words.len() {
        return Err(Error::format(
            manifest,
            format!("field `{field}` lacks <unk> or <eos>; re-export the model"),
        ));
    }
    Ok(v)
}
