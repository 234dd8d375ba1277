//! Finding heads by name, and the on-disk format every trained head shares.
//!
//! `full` is the model's own output layer. Every other head lives in `MODEL_DIR/heads/NAME/`
//! (written by `fastsoftmax train-head`) as two files:
//! - `head.json`: format, version, `kind` (which code reads it), the dimensions, the fingerprint
//!   of the output layer it was trained for, kind-specific `params`, and a free-form `training`
//!   record (config, command, metrics);
//! - `head.safetensors`: its tensors.
//!
//! The directory name is the head's name, so several heads of one kind (a budget sweep, say)
//! can sit side by side. A head trained for another model is refused, never served.

use std::cell::{OnceCell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::adaptive::AdaptiveHead;
use crate::candidates::CandidatesHead;
use crate::ds::DsHead;
use crate::dsoftmax::DsoftmaxHead;
use crate::error::{Error, Result};
use crate::greedy::{GreedyHead, GreedyIndex};
use crate::head::Predictor;
use crate::hnsw::{self, HnswHead, HnswIndex, Space};
use crate::l2s::L2sHead;
use crate::lm::LanguageModel;
use crate::lsh::{LshHead, LshIndex};
use crate::pca::{PcaHead, PcaIndex};
use crate::svd::SvdHead;
use crate::trigram::TrigramHead;

/// Head kinds this engine can load (besides `full`).
pub const KINDS: &[&str] = &["l2s", "ds", "adaptive", "dsoftmax", "candidates", "trigram"];
pub const HEAD_MANIFEST: &str = "head.json";
pub const HEAD_TENSORS: &str = "head.safetensors";
pub const HEAD_FORMAT: &str = "fastsoftmax-head";
pub const HEAD_FORMAT_VERSION: u32 = 1;

/// `head.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeadManifest {
    pub format: String,
    pub format_version: u32,
    pub kind: String,
    pub d: usize,
    pub vocab_size: usize,
    /// [`crate::kernels::PackedMatrix::fingerprint`] of the model's output layer, in hex.
    pub model_fingerprint: String,
    /// What the kind needs to read its tensors (e.g. the number of clusters).
    #[serde(default)]
    pub params: serde_json::Value,
    /// How the head was made: config, command, metrics. Not read by the engine.
    #[serde(default)]
    pub training: serde_json::Value,
}

impl HeadManifest {
    pub fn new(kind: &str, lm: &LanguageModel, params: serde_json::Value) -> Self {
        HeadManifest {
            format: HEAD_FORMAT.into(),
            format_version: HEAD_FORMAT_VERSION,
            kind: kind.into(),
            d: lm.spec().d_hidden,
            vocab_size: lm.spec().vocab_size,
            model_fingerprint: fingerprint(lm),
            params,
            training: serde_json::Value::Null,
        }
    }
}

/// Hex fingerprint of `lm`'s output layer.
pub fn fingerprint(lm: &LanguageModel) -> String {
    format!("{:016x}", lm.full_head().matrix().fingerprint())
}

/// A head's tensors, by name: f32 or u32 data with a shape.
#[derive(Debug, Clone, Default)]
pub struct Tensors {
    map: BTreeMap<String, (safetensors::Dtype, Vec<usize>, Vec<u8>)>,
    /// Where they were read from, for error messages.
    origin: PathBuf,
}

impl Tensors {
    pub fn put_f32(&mut self, name: &str, shape: &[usize], data: &[f32]) {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        let bytes = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.map.insert(
            name.into(),
            (safetensors::Dtype::F32, shape.to_vec(), bytes),
        );
    }

    pub fn put_u32(&mut self, name: &str, data: &[u32]) {
        let bytes = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.map.insert(
            name.into(),
            (safetensors::Dtype::U32, vec![data.len()], bytes),
        );
    }

    fn raw(&self, name: &str, dtype: safetensors::Dtype) -> Result<(&[usize], &[u8])> {
        match self.map.get(name) {
            Some((t, shape, bytes)) if *t == dtype => Ok((shape, bytes)),
            Some((t, _, _)) => Err(Error::format(
                &self.origin,
                format!("tensor `{name}` is {t:?}, expected {dtype:?}; the file is corrupt or from another tool — retrain the head"),
            )),
            None => Err(Error::format(
                &self.origin,
                format!("tensor `{name}` is missing; the file is truncated or from another kind of head — retrain it"),
            )),
        }
    }

    /// The f32 tensor `name`, which must have shape `shape`.
    pub fn f32(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let (s, bytes) = self.raw(name, safetensors::Dtype::F32)?;
        if s != shape {
            return Err(Error::format(
                &self.origin,
                format!("tensor `{name}` has shape {s:?}, head.json says {shape:?}; the two files do not belong together — retrain the head"),
            ));
        }
        let v: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(Error::format(
                &self.origin,
                format!(
                    "tensor `{name}` holds {} at index {i}; retrain the head",
                    v[i]
                ),
            ));
        }
        Ok(v)
    }

    /// The 1-d u32 tensor `name`.
    pub fn u32(&self, name: &str) -> Result<Vec<u32>> {
        let (_, bytes) = self.raw(name, safetensors::Dtype::U32)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// The `[groups + 1]` tensor `offsets`, which must split `total` rows into `groups`
    /// contiguous runs, as index ranges. `rows`/`what` name them in the error ("candidate ids",
    /// "clusters").
    pub fn groups(
        &self,
        total: usize,
        groups: usize,
        rows: &str,
        what: &str,
    ) -> Result<Vec<std::ops::Range<usize>>> {
        let offsets = self.u32("offsets")?;
        let ok = offsets.len() == groups + 1
            && offsets[0] == 0
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && offsets[groups] as usize == total;
        if !ok {
            return Err(Error::format(
                &self.origin,
                format!("`offsets` does not split {total} {rows} into {groups} {what}; the file is corrupt — retrain the head"),
            ));
        }
        Ok(offsets
            .windows(2)
            .map(|w| w[0] as usize..w[1] as usize)
            .collect())
    }

    pub fn origin(&self) -> &Path {
        &self.origin
    }
}

/// Writes a head directory atomically: both files (and `extra` files such as the training log)
/// go to `DIR.tmp/`, which then replaces `DIR`. An interrupted write leaves the old head (or
/// none), never half of one.
pub fn save_head(
    dir: &Path,
    manifest: &HeadManifest,
    tensors: &Tensors,
    extra: &[(&str, &[u8])],
) -> Result<()> {
    let tmp = sibling(dir, "tmp");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .map
        .iter()
        .map(|(n, (t, shape, bytes))| {
            let view = safetensors::tensor::TensorView::new(*t, shape.clone(), bytes)
                .expect("shape and byte length agree by construction");
            (n.clone(), view)
        })
        .collect();
    let bytes = safetensors::serialize(views, &None)
        .map_err(|e| Error::format(dir.join(HEAD_TENSORS), e.to_string()))?;
    std::fs::write(tmp.join(HEAD_TENSORS), bytes).map_err(|e| Error::io(&tmp, e))?;
    let json = serde_json::to_vec_pretty(manifest).expect("manifest serializes");
    std::fs::write(tmp.join(HEAD_MANIFEST), json).map_err(|e| Error::io(&tmp, e))?;
    for (name, bytes) in extra {
        std::fs::write(tmp.join(name), bytes).map_err(|e| Error::io(tmp.join(name), e))?;
    }
    let old = sibling(dir, "old");
    if dir.exists() {
        if old.exists() {
            std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
        }
        std::fs::rename(dir, &old).map_err(|e| Error::io(dir, e))?;
    }
    std::fs::rename(&tmp, dir).map_err(|e| Error::io(dir, e))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
    }
    Ok(())
}

fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut p = dir.to_path_buf();
    p.as_mut_os_string().push(format!(".{suffix}"));
    p
}

/// Reads and checks a head directory against the model it will serve.
pub fn read_head(dir: &Path, lm: &LanguageModel) -> Result<(HeadManifest, Tensors)> {
    let mpath = dir.join(HEAD_MANIFEST);
    let text = std::fs::read(&mpath).map_err(|e| Error::io(&mpath, e))?;
    let m: HeadManifest = serde_json::from_slice(&text).map_err(|e| {
        Error::format(
            &mpath,
            format!("not a valid head manifest ({e}); retrain the head"),
        )
    })?;
    if m.format != HEAD_FORMAT || m.format_version != HEAD_FORMAT_VERSION {
        return Err(Error::format(
            &mpath,
            format!(
                "format {} v{} is not supported (this engine reads {HEAD_FORMAT} v{HEAD_FORMAT_VERSION}); retrain the head with this version",
                m.format, m.format_version
            ),
        ));
    }
    if m.d != lm.spec().d_hidden || m.vocab_size != lm.spec().vocab_size {
        return Err(Error::format(
            &mpath,
            format!(
                "the head is for contexts of {} and {} words, the model has {} and {}; train a head for this model",
                m.d,
                m.vocab_size,
                lm.spec().d_hidden,
                lm.spec().vocab_size
            ),
        ));
    }
    if m.model_fingerprint != fingerprint(lm) {
        return Err(Error::format(
            &mpath,
            format!(
                "the head was trained for another model (output-layer fingerprint {} ≠ {}); retrain it for this model with `fastsoftmax train-head`",
                m.model_fingerprint,
                fingerprint(lm)
            ),
        ));
    }
    let tpath = dir.join(HEAD_TENSORS);
    let bytes = std::fs::read(&tpath).map_err(|e| Error::io(&tpath, e))?;
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| {
        Error::format(
            &tpath,
            format!("not a readable safetensors file ({e}); it is truncated or corrupt — retrain the head"),
        )
    })?;
    let mut tensors = Tensors {
        origin: tpath.clone(),
        ..Tensors::default()
    };
    for (name, view) in st.tensors() {
        tensors.map.insert(
            name,
            (view.dtype(), view.shape().to_vec(), view.data().to_vec()),
        );
    }
    Ok((m, tensors))
}

/// The kind recorded in `dir/head.json`, if it is a readable head directory.
fn kind_of(dir: &Path) -> Option<String> {
    let text = std::fs::read(dir.join(HEAD_MANIFEST)).ok()?;
    let m: HeadManifest = serde_json::from_slice(&text).ok()?;
    Some(m.kind)
}

/// `(name, kind)` of every trained head of a known kind in `model_dir/heads`, by name.
pub fn trained(model_dir: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(model_dir.join("heads"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().into_string().ok()?, kind_of(&e.path())?)))
        .filter(|(_, kind)| KINDS.contains(&kind.as_str()))
        .collect();
    out.sort();
    out
}

/// Names of the heads available for the model in `model_dir`: `full`, then trained ones by name.
pub fn available(model_dir: &Path) -> Vec<String> {
    std::iter::once("full".to_string())
        .chain(trained(model_dir).into_iter().map(|(name, _)| name))
        .collect()
}

/// What `--heads` accepts besides `full` and trained heads: the heads built from the output
/// layer alone, named by their knobs.
pub const BUILT_IN: &str =
    "svd-rR-nN, hnsw-efE, hnsw-ip-efE, greedy-bB, pca-dD, lsh-bB-tT (built from the output layer)";

/// Loads head `name` for `lm` (whose artifact lives in `model_dir`).
pub fn load<'a>(
    name: &str,
    model_dir: &'a Path,
    lm: &'a LanguageModel,
) -> Result<Box<dyn Predictor + 'a>> {
    HeadLoader::new(model_dir, lm).load(name)
}

/// Loads heads for one model. The index a built-in head searches (graph, sorted lists, tree,
/// hash tables) is built once per loader and shared by every knob setting, so a sweep pays
/// for it once.
pub struct HeadLoader<'a> {
    model_dir: &'a Path,
    lm: &'a LanguageModel,
    hnsw: [OnceCell<Arc<HnswIndex>>; 2],
    greedy: OnceCell<Arc<GreedyIndex>>,
    pca: OnceCell<Arc<PcaIndex>>,
    lsh: RefCell<Option<Arc<LshIndex>>>,
}

impl<'a> HeadLoader<'a> {
    pub fn new(model_dir: &'a Path, lm: &'a LanguageModel) -> Self {
        HeadLoader {
            model_dir,
            lm,
            hnsw: Default::default(),
            greedy: OnceCell::new(),
            pca: OnceCell::new(),
            lsh: RefCell::new(None),
        }
    }

    /// Sizes the shared hash tables for every `lsh-bB-tT` among `names` at once (otherwise a
    /// setting beyond the tables built so far rebuilds them).
    pub fn reserve(&self, names: &[String]) -> Result<()> {
        let (bits, tables) = names
            .iter()
            .filter_map(|n| LshHead::parse_name(n))
            .fold((0, 0), |(b, t), (nb, nt)| (b.max(nb), t.max(nt)));
        if tables > 0 {
            self.lsh_index(bits, tables)?;
        }
        Ok(())
    }

    fn lsh_index(&self, bits: usize, tables: usize) -> Result<Arc<LshIndex>> {
        let mut cached = self.lsh.borrow_mut();
        if let Some(ix) = cached.as_ref() {
            if ix.max_bits() >= bits && ix.max_tables() >= tables {
                return Ok(ix.clone());
            }
        }
        let (b0, t0) = cached
            .as_ref()
            .map_or((0, 0), |ix| (ix.max_bits(), ix.max_tables()));
        let ix = Arc::new(LshIndex::new(
            self.lm.full_head(),
            bits.max(b0),
            tables.max(t0),
        )?);
        *cached = Some(ix.clone());
        Ok(ix)
    }

    fn hnsw_index(&self, space: Space) -> Result<Arc<HnswIndex>> {
        let cell = &self.hnsw[(space == Space::InnerProduct) as usize];
        if let Some(ix) = cell.get() {
            return Ok(ix.clone());
        }
        let ix = HnswIndex::build_in(
            self.lm.full_head(),
            space,
            hnsw::DEFAULT_M,
            hnsw::DEFAULT_EF_CONSTRUCTION,
            hnsw::DEFAULT_SEED,
        )?;
        Ok(cell.get_or_init(|| ix).clone())
    }

    /// Head `name`: `full`, a built-in head, or a trained head in `MODEL/heads/NAME`.
    pub fn load(&self, name: &str) -> Result<Box<dyn Predictor + 'a>> {
        let (lm, full) = (self.lm, self.lm.full_head());
        if name == "full" {
            return Ok(Box::new(full.clone()));
        }
        if let Some((rank, n)) = SvdHead::parse_name(name) {
            return Ok(Box::new(SvdHead::new(full, rank, n)?));
        }
        if let Some(ef) = HnswHead::parse_name(name) {
            return Ok(Box::new(HnswHead::new(
                self.hnsw_index(Space::Sphere)?,
                ef,
            )?));
        }
        if let Some(ef) = HnswHead::parse_ip_name(name) {
            let index = self.hnsw_index(Space::InnerProduct)?;
            return Ok(Box::new(HnswHead::new(index, ef)?));
        }
        if let Some(budget) = GreedyHead::parse_name(name) {
            let index = self
                .greedy
                .get_or_init(|| Arc::new(GreedyIndex::new(full)))
                .clone();
            return Ok(Box::new(GreedyHead::new(index, budget)?));
        }
        if let Some(depth) = PcaHead::parse_name(name) {
            let index = self
                .pca
                .get_or_init(|| Arc::new(PcaIndex::new(full)))
                .clone();
            return Ok(Box::new(PcaHead::new(index, depth)?));
        }
        if let Some((bits, tables)) = LshHead::parse_name(name) {
            let index = self.lsh_index(bits, tables)?;
            return Ok(Box::new(LshHead::new(index, bits, tables)?));
        }
        let dir = self.model_dir.join("heads").join(name);
        if dir.join(HEAD_MANIFEST).exists() {
            let (m, t) = read_head(&dir, lm)?;
            return match m.kind.as_str() {
                "l2s" => Ok(Box::new(L2sHead::from_files(name, &m, &t, lm)?)),
                "ds" => Ok(Box::new(DsHead::from_files(name, &m, &t, lm)?)),
                "adaptive" => Ok(Box::new(AdaptiveHead::from_files(name, &m, &t, lm)?)),
                "dsoftmax" => Ok(Box::new(DsoftmaxHead::from_files(name, &m, &t, lm)?)),
                "candidates" => Ok(Box::new(CandidatesHead::from_files(
                    name, &dir, &m, &t, lm,
                )?)),
                "trigram" => Ok(Box::new(TrigramHead::from_files(name, &dir, &m)?)),
                kind => Err(Error::format(
                    dir.join(HEAD_MANIFEST),
                    format!(
                        "head kind {kind:?} is not one this engine knows ({}); update fastsoftmax",
                        KINDS.join(", ")
                    ),
                )),
            };
        }
        Err(Error::Invalid(format!(
            "no head named {name:?} for this model: {} {}; available: {}, and {BUILT_IN}",
            dir.display(),
            if dir.exists() {
                "has no head.json"
            } else {
                "does not exist (train it with `fastsoftmax train-head`)"
            },
            available(self.model_dir).join(", ")
        )))
    }
}
