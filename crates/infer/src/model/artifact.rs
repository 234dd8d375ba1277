//! The model artifact: `manifest.json` (format version, dimensions, vocabulary) beside
//! `model.safetensors` (f32 weights, row-major). Written by `train-lm`, loaded by the engine
//! with full validation, so a corrupt or mismatched file is an error, never a wrong answer.
//!
//! `manifest.json` records the SHA-256 of `model.safetensors` (`sha256`), checked on every load
//! ([`crate::files`]).
//!
//! Tensors (PyTorch layouts; `G` = 4 gates for LSTM in order i,f,g,o, 3 for GRU in order r,z,n):
//! - `embedding` `[vocab, d_embed]`
//! - `layers.{l}.w_ih` `[G*d_hidden, d_in]`, `layers.{l}.w_hh` `[G*d_hidden, d_hidden]`,
//!   `layers.{l}.b_ih`, `layers.{l}.b_hh` `[G*d_hidden]` (`d_in` = `d_embed` for layer 0)
//! - `output.weight` `[vocab, d_hidden]` (absent when tied to `embedding`), `output.bias` `[vocab]`
//!
//! [`LmWeights::save_int8`] stores the vocabulary-sized matrices (`embedding`, `output.weight`)
//! as I8 rows with an F32 `name.scale` `[vocab]` (one scale per row, as the translator's int8
//! artifacts): a quarter of the size where they dominate, for shipping. The engine widens them
//! back to f32 on load (format v2; f32 artifacts stay v1, so older engines keep reading them).
//! [`RowStorage::Int4`] stores them as 4-bit rows, `name` U8 `[vocab, ⌈d/2⌉]` (two values a
//! byte, [`crate::kernels::quantize_rows_int4`]) with the same `name.scale`: an eighth of f32
//! (format v3).

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::files::{self, write_atomic, Digests};
use crate::model::vocab::Vocab;

pub const MANIFEST_FILE: &str = "manifest.json";
pub const WEIGHTS_FILE: &str = "model.safetensors";
pub const FORMAT: &str = "fastsoftmax-lm";
pub const FORMAT_VERSION: u32 = 3;
/// The version of an artifact whose vocabulary matrices are int8 rows ([`LmWeights::save_int8`]);
/// an f32 one is version 1.
pub const INT8_FORMAT_VERSION: u32 = 2;
/// The version of an artifact whose vocabulary matrices are 4-bit rows.
pub const INT4_FORMAT_VERSION: u32 = 3;
/// Matrices stored as int8 or 4-bit rows (a version-2 or -3 artifact).
const INT8_MATRICES: [&str; 2] = ["embedding", "output.weight"];

/// How an artifact stores its vocabulary matrices (`embedding`, `output.weight`); every other
/// tensor is f32. Loading widens rows to f32, so the model's answers shift by the rounding only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowStorage {
    F32,
    /// One byte a value, one f32 scale a row: a quarter of f32.
    Int8,
    /// Half a byte a value, one f32 scale a row: an eighth of f32.
    Int4,
}

impl RowStorage {
    /// The manifest's format version for this storage: the oldest engine that reads it.
    fn format_version(self) -> u32 {
        match self {
            RowStorage::F32 => 1,
            RowStorage::Int8 => INT8_FORMAT_VERSION,
            RowStorage::Int4 => INT4_FORMAT_VERSION,
        }
    }
}

/// Recurrent cell type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cell {
    Lstm,
    Gru,
}

impl Cell {
    /// Number of gate blocks stacked in `w_ih` / `w_hh`.
    pub fn gates(self) -> usize {
        match self {
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }
}

/// Dimensions of a language model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LmSpec {
    pub cell: Cell,
    pub vocab_size: usize,
    pub d_embed: usize,
    pub d_hidden: usize,
    pub n_layers: usize,
    /// Output weights shared with the embedding (needs `d_embed == d_hidden`).
    pub tied: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: String,
    format_version: u32,
    #[serde(flatten)]
    spec: LmSpec,
    vocab: Vec<String>,
    /// SHA-256 of the weights file (absent in artifacts written before digests existed).
    #[serde(default, skip_serializing_if = "Digests::is_empty")]
    sha256: Digests,
}

/// Weights of one recurrent layer.
#[derive(Debug, Clone, PartialEq)]
pub struct RecurrentWeights {
    /// [G*d_hidden, d_in]
    pub w_ih: Vec<f32>,
    /// [G*d_hidden, d_hidden]
    pub w_hh: Vec<f32>,
    /// `[G*d_hidden]`
    pub b_ih: Vec<f32>,
    /// `[G*d_hidden]`
    pub b_hh: Vec<f32>,
}

/// Everything an app needs to run the model: dimensions, vocabulary and weights.
#[derive(Debug, Clone, PartialEq)]
pub struct LmWeights {
    pub spec: LmSpec,
    pub vocab: Vocab,
    /// [vocab, d_embed]
    pub embedding: Vec<f32>,
    pub layers: Vec<RecurrentWeights>,
    /// [vocab, d_hidden]; `None` when tied to the embedding.
    pub output_weight: Option<Vec<f32>>,
    /// `[vocab]`
    pub output_bias: Vec<f32>,
}

impl LmWeights {
    /// Expected `(name, shape)` of every tensor for `spec`.
    fn expected_shapes(spec: &LmSpec) -> Vec<(String, Vec<usize>)> {
        let g = spec.cell.gates() * spec.d_hidden;
        let mut v = vec![("embedding".to_string(), vec![spec.vocab_size, spec.d_embed])];
        for l in 0..spec.n_layers {
            let d_in = if l == 0 { spec.d_embed } else { spec.d_hidden };
            v.push((format!("layers.{l}.w_ih"), vec![g, d_in]));
            v.push((format!("layers.{l}.w_hh"), vec![g, spec.d_hidden]));
            v.push((format!("layers.{l}.b_ih"), vec![g]));
            v.push((format!("layers.{l}.b_hh"), vec![g]));
        }
        if !spec.tied {
            v.push(("output.weight".into(), vec![spec.vocab_size, spec.d_hidden]));
        }
        v.push(("output.bias".into(), vec![spec.vocab_size]));
        v
    }

    fn tensors(&self) -> Vec<(String, &[f32])> {
        let mut v: Vec<(String, &[f32])> = vec![("embedding".into(), &self.embedding)];
        for (l, w) in self.layers.iter().enumerate() {
            v.push((format!("layers.{l}.w_ih"), &w.w_ih));
            v.push((format!("layers.{l}.w_hh"), &w.w_hh));
            v.push((format!("layers.{l}.b_ih"), &w.b_ih));
            v.push((format!("layers.{l}.b_hh"), &w.b_hh));
        }
        if let Some(w) = &self.output_weight {
            v.push(("output.weight".into(), w));
        }
        v.push(("output.bias".into(), &self.output_bias));
        v
    }

    /// Checks dimensions, vocabulary size and finiteness; `origin` names the source in errors.
    pub fn validate(&self, origin: &Path) -> Result<()> {
        let s = &self.spec;
        let bad = |m: String| Err(Error::format(origin, m));
        if s.vocab_size == 0 || s.d_embed == 0 || s.d_hidden == 0 || s.n_layers == 0 {
            return bad(format!("dimensions must be positive, got {s:?}"));
        }
        if s.tied && s.d_embed != s.d_hidden {
            return bad(format!(
                "tied weights need d_embed == d_hidden, got {} and {}",
                s.d_embed, s.d_hidden
            ));
        }
        if self.vocab.len() != s.vocab_size {
            return bad(format!(
                "vocab_size is {} but the vocabulary lists {} words; the manifest was edited or belongs to another model",
                s.vocab_size,
                self.vocab.len()
            ));
        }
        if self.layers.len() != s.n_layers || self.output_weight.is_some() == s.tied {
            return bad(format!(
                "the weights hold {} layers and {} output matrix, the manifest says n_layers = {} and tied = {}",
                self.layers.len(),
                if self.output_weight.is_some() { "an" } else { "no" },
                s.n_layers,
                s.tied
            ));
        }
        let shapes: HashMap<String, Vec<usize>> = Self::expected_shapes(s).into_iter().collect();
        for (name, data) in self.tensors() {
            let want = shapes[&name]
                .iter()
                .try_fold(1usize, |a, &b| a.checked_mul(b))
                .unwrap_or(usize::MAX);
            if data.len() != want {
                return bad(format!(
                    "tensor `{name}` has {} values, the manifest's dimensions need {want} ({:?})",
                    data.len(),
                    shapes[&name]
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

    /// Writes `manifest.json` and `model.safetensors` into `dir`, each atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        self.save_as(dir, RowStorage::F32)
    }

    /// As [`LmWeights::save`], with `embedding` and `output.weight` stored as int8 rows (one
    /// f32 scale per row): about a quarter of the size of a large-vocabulary model. Loading
    /// widens them to f32, so the model's answers shift by the rounding only.
    pub fn save_int8(&self, dir: &Path) -> Result<()> {
        self.save_as(dir, RowStorage::Int8)
    }

    /// As [`LmWeights::save`], with `embedding` and `output.weight` stored as `rows` says.
    pub fn save_as(&self, dir: &Path, rows: RowStorage) -> Result<()> {
        use safetensors::{tensor::TensorView, Dtype};
        self.validate(dir)?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let shapes: HashMap<String, Vec<usize>> =
            Self::expected_shapes(&self.spec).into_iter().collect();
        let le = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let mut owned: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
        for (name, data) in self.tensors() {
            let shape = shapes[&name].clone();
            // Only the vocabulary matrices are quantized, so `shape` is `[n, d]` in those arms.
            let (n, d) = (shape[0], shape.get(1).copied().unwrap_or(1));
            let (dtype, shape, bytes, scale) = match rows {
                _ if !INT8_MATRICES.contains(&name.as_str()) => (Dtype::F32, shape, le(data), None),
                RowStorage::F32 => (Dtype::F32, shape, le(data), None),
                RowStorage::Int8 => {
                    let (q, scale) = crate::kernels::quantize_rows(data, d);
                    let q = q.iter().map(|&x| x as u8).collect();
                    (Dtype::I8, shape, q, Some(scale))
                }
                RowStorage::Int4 => {
                    let (q, scale) = crate::kernels::quantize_rows_int4(data, d);
                    (Dtype::U8, vec![n, d.div_ceil(2)], q, Some(scale))
                }
            };
            let scale_name = format!("{name}.scale");
            owned.push((name, dtype, shape, bytes));
            if let Some(scale) = scale {
                owned.push((scale_name, Dtype::F32, vec![n], le(&scale)));
            }
        }
        let views = owned
            .iter()
            .map(|(name, dtype, shape, bytes)| {
                TensorView::new(*dtype, shape.clone(), bytes)
                    .map(|v| (name.clone(), v))
                    .map_err(|e| {
                        Error::format(dir.join(WEIGHTS_FILE), format!("tensor `{name}`: {e}"))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let bytes = safetensors::serialize(views, &None)
            .map_err(|e| Error::format(dir.join(WEIGHTS_FILE), e.to_string()))?;
        write_atomic(&dir.join(WEIGHTS_FILE), &bytes)?;
        let manifest = Manifest {
            format: FORMAT.into(),
            format_version: rows.format_version(),
            spec: self.spec,
            vocab: self.vocab.words().to_vec(),
            sha256: [(WEIGHTS_FILE.to_string(), files::sha256_hex(&bytes))].into(),
        };
        let json = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
        write_atomic(&dir.join(MANIFEST_FILE), &json)
    }

    /// Loads and validates a model directory.
    pub fn load(dir: &Path) -> Result<Self> {
        let manifest_path = dir.join(MANIFEST_FILE);
        let weights_path = dir.join(WEIGHTS_FILE);
        if !manifest_path.exists() {
            return Err(Error::format(
                &manifest_path,
                "missing: a model directory holds manifest.json and model.safetensors, written by `fastsoftmax train-lm`",
            ));
        }
        let value = files::read_manifest(&manifest_path, FORMAT)?;
        let manifest: Manifest = serde_json::from_value(value)
            .map_err(|e| Error::format(&manifest_path, format!("not a valid manifest: {e}")))?;
        if manifest.format != FORMAT || !(1..=FORMAT_VERSION).contains(&manifest.format_version) {
            return Err(Error::format(
                &manifest_path,
                format!(
                    "format {} v{} is not supported (this engine reads {FORMAT} v1 to v{FORMAT_VERSION}); re-export the model with this version",
                    manifest.format, manifest.format_version
                ),
            ));
        }
        let vocab = Vocab::from_words(manifest.vocab.clone())
            .map_err(|e| Error::format(&manifest_path, format!("field `vocab`: {e}")))?;
        if vocab.len() != manifest.vocab.len() {
            return Err(Error::format(
                &manifest_path,
                "field `vocab` lacks <unk> or <eos>; the manifest was edited or written by another tool — re-export the model",
            ));
        }
        let bytes = std::fs::read(&weights_path).map_err(|e| Error::io(&weights_path, e))?;
        files::verify(
            &weights_path,
            &bytes,
            &manifest.sha256,
            &manifest_path,
            dir,
            "re-export the model with `fastsoftmax train-lm`",
        )?;
        let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| {
            Error::format(
                &weights_path,
                format!("not a readable safetensors file ({e}); it is truncated or corrupt — re-export the model"),
            )
        })?;
        let spec = manifest.spec;
        // Bound the manifest's dimensions by the file before sizing anything by them.
        let most = bytes.len() / 4;
        if [spec.vocab_size, spec.d_embed, spec.d_hidden]
            .iter()
            .any(|&x| x > most)
        {
            return Err(Error::format(
                &manifest_path,
                format!(
                    "the dimensions {spec:?} do not fit in model.safetensors ({} bytes); the two files belong to different models — re-export the model",
                    bytes.len()
                ),
            ));
        }
        let needed = spec
            .n_layers
            .checked_mul(4)
            .and_then(|n| n.checked_add(2 + !spec.tied as usize));
        let scales = st.names().iter().filter(|n| n.ends_with(".scale")).count();
        if spec.n_layers == 0 || needed != Some(st.len() - scales) {
            return Err(Error::format(
                &manifest_path,
                format!(
                    "n_layers = {} and tied = {} need {} tensors, model.safetensors holds {}; the two files belong to different models — re-export the model",
                    spec.n_layers,
                    spec.tied,
                    needed.map_or("more".into(), |n| n.to_string()),
                    st.len() - scales
                ),
            ));
        }
        let bad = |m: String| Error::format(&weights_path, m);
        let get = |name: &str, shape: &[usize]| -> Result<Vec<f32>> {
            let t = st.tensor(name).map_err(|_| {
                Error::format(
                    &weights_path,
                    format!("tensor `{name}` is missing; manifest.json and model.safetensors belong to different models"),
                )
            })?;
            let rows = INT8_MATRICES.contains(&name);
            let v = manifest.format_version;
            let int8 = t.dtype() == safetensors::Dtype::I8 && rows && v >= INT8_FORMAT_VERSION;
            let int4 = t.dtype() == safetensors::Dtype::U8 && rows && v >= INT4_FORMAT_VERSION;
            let stored = if int4 {
                vec![shape[0], shape[1].div_ceil(2)]
            } else {
                shape.to_vec()
            };
            if (t.dtype() != safetensors::Dtype::F32 && !int8 && !int4) || t.shape() != stored {
                return Err(bad(format!(
                    "tensor `{name}` is {:?} {:?}, the manifest's dimensions need F32 {shape:?}; the files belong to different models",
                    t.dtype(),
                    t.shape()
                )));
            }
            if !int8 && !int4 {
                return Ok(files::f32_values(t.data()));
            }
            // int8 or 4-bit rows: each widened by its row's scale.
            let scale = st
                .tensor(&format!("{name}.scale"))
                .ok()
                .filter(|s| s.dtype() == safetensors::Dtype::F32 && s.shape() == [shape[0]])
                .map(|s| files::f32_values(s.data()))
                .ok_or_else(|| {
                    bad(format!(
                        "int8 or 4-bit tensor `{name}` needs an F32 `{name}.scale` of {} values; the file is corrupt — re-export the model",
                        shape[0]
                    ))
                })?;
            Ok(if int4 {
                crate::kernels::widen_rows_int4(t.data(), &scale, shape[1])
            } else {
                crate::kernels::widen_rows(t.data(), &scale, shape[1])
            })
        };
        let shapes = Self::expected_shapes(&spec);
        let mut it = shapes.iter().map(|(n, s)| get(n, s));
        let embedding = it.next().unwrap()?;
        let mut layers = Vec::with_capacity(spec.n_layers);
        for _ in 0..spec.n_layers {
            layers.push(RecurrentWeights {
                w_ih: it.next().unwrap()?,
                w_hh: it.next().unwrap()?,
                b_ih: it.next().unwrap()?,
                b_hh: it.next().unwrap()?,
            });
        }
        let output_weight = if spec.tied {
            None
        } else {
            Some(it.next().unwrap()?)
        };
        let output_bias = it.next().unwrap()?;
        let w = LmWeights {
            spec,
            vocab,
            embedding,
            layers,
            output_weight,
            output_bias,
        };
        w.validate(&weights_path)?;
        Ok(w)
    }

    /// Records the SHA-256 of `model.safetensors` in a `manifest.json` written before digests
    /// existed (atomically; nothing else changes); returns whether it wrote. Only for weights
    /// known to be intact: the digest vouches for them from then on. A recorded digest is never
    /// replaced.
    pub fn record_digest(dir: &Path) -> Result<bool> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let mut manifest: Manifest = serde_json::from_slice(&text)
            .map_err(|e| Error::format(&path, format!("not a valid manifest: {e}")))?;
        let missing = files::missing_digests(dir, &path, &manifest.sha256, &[WEIGHTS_FILE])?;
        if missing.is_empty() {
            return Ok(false);
        }
        manifest.sha256.extend(missing);
        let json = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
        write_atomic(&path, &json)?;
        Ok(true)
    }

    /// The output matrix `[vocab, d_hidden]` (the embedding when tied).
    pub fn output_matrix(&self) -> &[f32] {
        self.output_weight.as_deref().unwrap_or(&self.embedding)
    }
}
