//! The translator artifact on disk: `manifest.json` (format `fastsoftmax-nmt` v1: the shape,
//! both vocabularies, the SHA-256 of the weights) and `model.safetensors` (f32, row-major,
//! PyTorch layouts; see [`NmtWeights::expected_shapes`] for every name and shape).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use fastsoftmax_infer::files::{self, write_atomic, Digests};
use fastsoftmax_infer::model::artifact::Cell;
use fastsoftmax_infer::{Error, Result, Vocab};
use serde::{Deserialize, Serialize};

pub const MANIFEST_FILE: &str = "manifest.json";
pub const WEIGHTS_FILE: &str = "model.safetensors";
pub const FORMAT: &str = "fastsoftmax-nmt";
pub const FORMAT_VERSION: u32 = 1;

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
    #[serde(flatten)]
    spec: NmtSpec,
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
    /// name → values, shapes as in [`NmtWeights::expected_shapes`].
    pub tensors: BTreeMap<String, Vec<f32>>,
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
        let expected = Self::expected_shapes(s);
        if expected.len() != self.tensors.len() {
            return bad(format!(
                "{} tensors, the shape {s:?} needs {}; the files belong to different models",
                self.tensors.len(),
                expected.len()
            ));
        }
        for (name, shape) in expected {
            let Some(data) = self.tensors.get(&name) else {
                return bad(format!(
                    "tensor `{name}` is missing; the files belong to different models"
                ));
            };
            let want: usize = shape.iter().product();
            if data.len() != want {
                return bad(format!(
                    "tensor `{name}` has {} values, the manifest's dimensions need {want} ({shape:?})",
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

    /// Writes `manifest.json` and `model.safetensors` into `dir`, each atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        self.validate(dir)?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let shapes: HashMap<String, Vec<usize>> =
            Self::expected_shapes(&self.spec).into_iter().collect();
        let tensors: Vec<(String, Vec<usize>, &[f32])> = self
            .tensors
            .iter()
            .map(|(n, d)| (n.clone(), shapes[n].clone(), d.as_slice()))
            .collect();
        let bytes = files::f32_safetensors(&tensors)
            .map_err(|e| Error::format(dir.join(WEIGHTS_FILE), e))?;
        write_atomic(&dir.join(WEIGHTS_FILE), &bytes)?;
        let manifest = Manifest {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            spec: self.spec,
            src_vocab: self.src_vocab.words().to_vec(),
            tgt_vocab: self.tgt_vocab.words().to_vec(),
            sha256: [(WEIGHTS_FILE.to_string(), files::sha256_hex(&bytes))].into(),
        };
        let json = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
        write_atomic(&dir.join(MANIFEST_FILE), &json)
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
        let text = std::fs::read(&manifest_path).map_err(|e| Error::io(&manifest_path, e))?;
        let value: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|e| Error::format(&manifest_path, format!("not a valid manifest: {e}")))?;
        let format = value.get("format").and_then(|f| f.as_str()).unwrap_or("?");
        if format != FORMAT {
            return Err(Error::format(
                &manifest_path,
                format!(
                    "this is a `{format}` artifact, not a translator ({FORMAT}); pass a model written by `fastsoftmax train-nmt`"
                ),
            ));
        }
        let manifest: Manifest = serde_json::from_value(value).map_err(|e| {
            Error::format(
                &manifest_path,
                format!("not a valid translator manifest: {e}"),
            )
        })?;
        if manifest.format_version != FORMAT_VERSION {
            return Err(Error::format(
                &manifest_path,
                format!(
                    "format version {} is not supported (this engine reads v{FORMAT_VERSION}); re-export the model",
                    manifest.format_version
                ),
            ));
        }
        let vocab = |words: &Vec<String>, field: &str| {
            let v = Vocab::from_words(words.clone())
                .map_err(|e| Error::format(&manifest_path, format!("field `{field}`: {e}")))?;
            if v.len() != words.len() {
                return Err(Error::format(
                    &manifest_path,
                    format!("field `{field}` lacks <unk> or <eos>; re-export the model"),
                ));
            }
            Ok(v)
        };
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
        let mut tensors = BTreeMap::new();
        for (name, view) in st.tensors() {
            let Some(shape) = shapes.get(&name) else {
                return Err(Error::format(
                    &weights_path,
                    format!("unexpected tensor `{name}`; the files belong to different models"),
                ));
            };
            if view.dtype() != safetensors::Dtype::F32 || view.shape() != shape.as_slice() {
                return Err(Error::format(
                    &weights_path,
                    format!(
                        "tensor `{name}` is {:?} {:?}, the manifest needs F32 {shape:?}; the files belong to different models",
                        view.dtype(),
                        view.shape()
                    ),
                ));
            }
            tensors.insert(name, files::f32_values(view.data()));
        }
        let w = NmtWeights {
            spec: manifest.spec,
            src_vocab,
            tgt_vocab,
            tensors,
        };
        w.validate(&weights_path)?;
        Ok(w)
    }
}
