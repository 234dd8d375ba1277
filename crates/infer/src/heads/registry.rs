//! Finding heads by name: `full`, the heads built from the output layer alone (named by their
//! knobs: `svd-r20-n200`, `hnsw-ef80`, …) and the trained heads in `MODEL_DIR/heads/NAME/`,
//! whose directory name is the head's name, so several heads of one kind (a budget sweep, say)
//! can sit side by side.

use std::cell::{OnceCell, RefCell};
use std::path::Path;
use std::sync::Arc;

use super::format::{read_head, HeadManifest, HEAD_MANIFEST};
use super::{
    AdaptiveHead, CandidatesHead, DsHead, DsSvdHead, DsoftmaxHead, FullHead, FullInt8Head,
    GreedyHead, GreedyIndex, HnswHead, HnswIndex, L2sHead, L2sInt8Head, LshHead, LshIndex, PcaHead,
    PcaIndex, SvdHead, TrigramHead,
};
use crate::error::{Error, Result};
use crate::head::Predictor;
use crate::heads::hnsw::{self, Space};

/// Head kinds this engine can load (besides `full`).
pub const KINDS: &[&str] = &["l2s", "ds", "adaptive", "dsoftmax", "candidates", "trigram"];
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
    "full-int8-mM, svd-rR-nN, hnsw-efE, hnsw-ip-efE, greedy-bB, pca-dD, lsh-bB-tT (built from the output layer), L2S+int8 (a trained l2s head on int8 rows), DS+svd-rR-pP (SVD-softmax in a trained ds head's experts: rank R, P % exact)";

/// Loads head `name` for the model in `model_dir`, whose output layer is `output` (the loaded
/// [`crate::LanguageModel`] or its [`FullHead`]).
pub fn load<'a>(
    name: &str,
    model_dir: &'a Path,
    output: &'a impl AsRef<FullHead>,
) -> Result<Box<dyn Predictor + 'a>> {
    HeadLoader::new(model_dir, output).load(name)
}

/// Loads heads for one model. The index a built-in head searches (graph, sorted lists, tree,
/// hash tables) is built once per loader and shared by every knob setting, so a sweep pays
/// for it once.
pub struct HeadLoader<'a> {
    model_dir: &'a Path,
    full: &'a FullHead,
    hnsw: [OnceCell<Arc<HnswIndex>>; 2],
    greedy: OnceCell<Arc<GreedyIndex>>,
    pca: OnceCell<Arc<PcaIndex>>,
    lsh: RefCell<Option<Arc<LshIndex>>>,
}

impl<'a> HeadLoader<'a> {
    /// A loader for the heads of the model in `model_dir`, whose output layer is `output`.
    pub fn new(model_dir: &'a Path, output: &'a impl AsRef<FullHead>) -> Self {
        HeadLoader {
            model_dir,
            full: output.as_ref(),
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
        let ix = Arc::new(LshIndex::new(self.full, bits.max(b0), tables.max(t0))?);
        *cached = Some(ix.clone());
        Ok(ix)
    }

    /// The graph over the output layer in `space`, built on first use.
    pub(crate) fn hnsw_index(&self, space: Space) -> Result<Arc<HnswIndex>> {
        let cell = &self.hnsw[(space == Space::InnerProduct) as usize];
        if let Some(ix) = cell.get() {
            return Ok(ix.clone());
        }
        let ix = HnswIndex::build_in(
            self.full,
            space,
            hnsw::DEFAULT_M,
            hnsw::DEFAULT_EF_CONSTRUCTION,
            hnsw::DEFAULT_SEED,
        )?;
        Ok(cell.get_or_init(|| ix).clone())
    }

    /// The trained head `base` that head `name` serves another way (`what`), if it exists; an
    /// error if it is not of `kind`.
    fn base_head(
        &self,
        name: &str,
        base: &str,
        kind: &str,
        what: &str,
    ) -> Result<Option<(HeadManifest, super::Tensors)>> {
        let dir = self.model_dir.join("heads").join(base);
        if !dir.join(HEAD_MANIFEST).exists() {
            return Ok(None);
        }
        let (m, t) = read_head(&dir, self.full)?;
        if m.kind != kind {
            return Err(Error::Invalid(format!(
                "{name}: {what}, and {base} is a {} head",
                m.kind
            )));
        }
        Ok(Some((m, t)))
    }

    /// Head `name`: `full`, a built-in head, or a trained head in `MODEL/heads/NAME`.
    pub fn load(&self, name: &str) -> Result<Box<dyn Predictor + 'a>> {
        let full = self.full;
        if name == "full" {
            return Ok(Box::new(full.clone()));
        }
        if let Some(m) = FullInt8Head::parse_name(name) {
            return Ok(Box::new(FullInt8Head::new(full, m)?));
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
        if let Some((base, rank, percent)) = DsSvdHead::parse_name(name) {
            let what = "`+svd` serves a ds head's experts through SVD-softmax";
            if let Some((m, t)) = self.base_head(name, base, "ds", what)? {
                let ds = DsHead::from_files(base, &m, &t, full)?;
                return Ok(Box::new(DsSvdHead::new(ds, rank, percent)?));
            }
        }
        if let Some(base) = L2sInt8Head::parse_name(name) {
            let what = "`+int8` serves an l2s head with int8 candidate rows";
            if let Some((m, t)) = self.base_head(name, base, "l2s", what)? {
                let l2s = L2sHead::from_files(base, &m, &t, full)?;
                return Ok(Box::new(L2sInt8Head::new(l2s, full)?));
            }
        }
        let dir = self.model_dir.join("heads").join(name);
        if dir.join(HEAD_MANIFEST).exists() {
            let (m, t) = read_head(&dir, full)?;
            return match m.kind.as_str() {
                "l2s" => Ok(Box::new(L2sHead::from_files(name, &m, &t, full)?)),
                "ds" => Ok(Box::new(DsHead::from_files(name, &m, &t, full)?)),
                "adaptive" => Ok(Box::new(AdaptiveHead::from_files(name, &m, &t, full)?)),
                "dsoftmax" => Ok(Box::new(DsoftmaxHead::from_files(name, &m, &t, full)?)),
                "candidates" => Ok(Box::new(CandidatesHead::from_files(
                    name, &dir, &m, &t, full,
                )?)),
                "trigram" => Ok(Box::new(TrigramHead::from_files(name, &dir, &m, &t)?)),
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
