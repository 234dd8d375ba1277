//! The on-disk format every trained head shares.
//!
//! `full` is the model's own output layer. Every other head lives in `MODEL_DIR/heads/NAME/`
//! (written by `fastsoftmax train-head`) as:
//! - `head.json`: format, version, `kind` (which code reads it), the dimensions, the fingerprint
//!   of the output layer it was trained for, kind-specific `params`, the SHA-256 of every data
//!   file, and a free-form `training` record (config, command, metrics);
//! - `head.safetensors`: its tensors;
//! - kind-specific data files (the candidate predictor's `trigram.bin`).
//!
//! A head trained for another output layer, or whose data files differ from the digests it
//! recorded, is refused, never served.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::files::{self, Digests};
use crate::head::SoftmaxHead;
use crate::heads::full::FullHead;

pub const HEAD_MANIFEST: &str = "head.json";
pub const HEAD_TENSORS: &str = "head.safetensors";
pub const HEAD_FORMAT: &str = "fastsoftmax-head";
pub const HEAD_FORMAT_VERSION: u32 = 1;
/// The trigram candidate table of the `trigram` and `candidates` kinds.
pub const TRIGRAM_TABLE: &str = "trigram.bin";

/// The data files a head of `kind` is read from besides `head.json`: what its digests cover.
/// (Other files in the directory, such as the training log, are records for people.)
pub fn data_files(kind: &str) -> &'static [&'static str] {
    match kind {
        "trigram" | "candidates" => &[HEAD_TENSORS, TRIGRAM_TABLE],
        _ => &[HEAD_TENSORS],
    }
}

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
    /// SHA-256 of each of the kind's [`data_files`], filled in by [`save_head`] and checked by
    /// [`read_head`] (absent in heads written before digests existed).
    #[serde(default, skip_serializing_if = "Digests::is_empty")]
    pub sha256: Digests,
}

impl HeadManifest {
    /// A manifest for a head of `kind` serving `output` (a [`FullHead`], or a model through
    /// `AsRef`).
    pub fn new(kind: &str, output: &impl AsRef<FullHead>, params: serde_json::Value) -> Self {
        let full = output.as_ref();
        HeadManifest {
            format: HEAD_FORMAT.into(),
            format_version: HEAD_FORMAT_VERSION,
            kind: kind.into(),
            d: full.dim(),
            vocab_size: full.vocab_size(),
            model_fingerprint: fingerprint(full),
            params,
            training: serde_json::Value::Null,
            sha256: Digests::new(),
        }
    }

    /// How an L2S head's clusters were made, from its training report: learned by the
    /// Gumbel rounds, or spherical k-means + the knapsack when training kept round 0 (none of
    /// its learned rounds raised validation P@k). `None` for other kinds and for heads saved
    /// without a report.
    pub fn trained_as(&self) -> Option<String> {
        if self.kind != "l2s" {
            return None;
        }
        let report = self.training.get("report")?;
        let best = report.get("best_round")?.as_u64()?;
        let learned = report.get("rounds")?.as_array()?.len().saturating_sub(1);
        Some(match (best, learned) {
            (0, 0) => "clusters from spherical k-means + the knapsack (no learned rounds)".into(),
            (0, n) => format!(
                "clusters from spherical k-means + the knapsack: none of its {n} learned rounds raised validation P@k, so training kept round 0"
            ),
            (b, n) => format!("clusters learned by the Gumbel step (round {b} of {n})"),
        })
    }
}

/// The fewest rows a head's matrix has for [`Tensors::store_rows_int8`] to store it as int8:
/// word-row tables (DS experts' rows, the adaptive and D-softmax buckets, the candidate
/// predictor's word factors) have thousands. The small matrices (gates, projections, cluster
/// vectors) stay f32: rounding them would change every context's route and save little.
pub const INT8_MIN_ROWS: usize = 1024;

/// Hex fingerprint of an output layer.
pub fn fingerprint(full: &FullHead) -> String {
    format!("{:016x}", full.matrix().fingerprint())
}

/// A head's tensors, by name: f32 or u32 data with a shape.
#[derive(Debug, Clone, Default)]
pub struct Tensors {
    map: BTreeMap<String, (safetensors::Dtype, Vec<usize>, Vec<u8>)>,
    /// The kind's other data files (the trigram table), by name, as read and verified by
    /// [`read_head`].
    files: BTreeMap<String, Vec<u8>>,
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

    /// The f32 tensor `name`, which must have shape `shape`: stored as F32, or as int8 rows
    /// (see [`Tensors::store_rows_int8`]) widened here.
    pub fn f32(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let int8 = matches!(self.map.get(name), Some((safetensors::Dtype::I8, _, _)));
        let dtype = if int8 {
            safetensors::Dtype::I8
        } else {
            safetensors::Dtype::F32
        };
        let (s, bytes) = self.raw(name, dtype)?;
        if s != shape {
            return Err(Error::format(
                &self.origin,
                format!("tensor `{name}` has shape {s:?}, head.json says {shape:?}; the two files do not belong together — retrain the head"),
            ));
        }
        let v: Vec<f32> = if int8 {
            crate::kernels::widen_rows(bytes, &self.row_scales(name, shape)?, shape[1])
        } else {
            files::f32_values(bytes)
        };
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

    /// The scales `name.scale` `[rows]` of the int8 matrix `name` of `shape` `[rows, d]`.
    fn row_scales(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let scale_name = format!("{name}.scale");
        match (shape, self.raw(&scale_name, safetensors::Dtype::F32)) {
            ([rows, _], Ok((s, bytes))) if s == [*rows] => Ok(files::f32_values(bytes)),
            _ => Err(Error::format(
                &self.origin,
                format!("int8 tensor `{name}` {shape:?} needs an F32 `{scale_name}` of one scale per row; the file is corrupt — store the head again with `fastsoftmax quantize`"),
            )),
        }
    }

    /// Stores every word-row table (a 2-d f32 tensor of at least [`INT8_MIN_ROWS`] rows) as
    /// int8 rows with one f32 scale per row, as `name` I8 `[n, d]` and `name.scale` F32 `[n]`
    /// (what [`crate::kernels::quantize_rows`] makes): about a quarter of their bytes.
    /// [`Tensors::f32`] widens them on load, so every kind reads them unchanged. Returns the
    /// names of every table now held as int8 rows (those stored here, and any that already were).
    pub fn store_rows_int8(&mut self) -> Vec<String> {
        let tables: Vec<String> = self
            .map
            .iter()
            .filter(|(_, (t, shape, _))| {
                *t == safetensors::Dtype::F32 && shape.len() == 2 && shape[0] >= INT8_MIN_ROWS
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in &tables {
            let (_, shape, bytes) = self.map.remove(name).expect("listed above");
            let (q, scale) = crate::kernels::quantize_rows(&files::f32_values(&bytes), shape[1]);
            let q = q.iter().map(|&x| x as u8).collect();
            self.map
                .insert(name.clone(), (safetensors::Dtype::I8, shape.clone(), q));
            self.put_f32(&format!("{name}.scale"), &[shape[0]], &scale);
        }
        self.map
            .iter()
            .filter(|(_, (t, _, _))| *t == safetensors::Dtype::I8)
            .map(|(name, _)| name.clone())
            .collect()
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

    /// The bytes of the kind's data file `name` (see [`data_files`]), verified against its
    /// digest when read.
    pub fn file(&self, name: &str) -> Result<&[u8]> {
        self.files.get(name).map(Vec::as_slice).ok_or_else(|| {
            Error::format(
                &self.origin,
                format!("the head's data file {name} was not read; its kind does not list it"),
            )
        })
    }

    pub fn origin(&self) -> &Path {
        &self.origin
    }
}

/// Writes a head directory atomically: `head.json`, `head.safetensors` and the `extra` files (the
/// kind's other data files, and records such as the training log) go to `DIR.tmp/`, which then
/// replaces `DIR`. An interrupted write leaves the old head (or none), never half of one.
/// `head.json` records the SHA-256 of every data file of the kind.
pub fn save_head(
    dir: &Path,
    manifest: &HeadManifest,
    tensors: &Tensors,
    extra: &[(&str, &[u8])],
) -> Result<()> {
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
    let mut manifest = manifest.clone();
    manifest.sha256 = std::iter::once((HEAD_TENSORS, &bytes[..]))
        .chain(extra.iter().copied())
        .filter(|(name, _)| data_files(&manifest.kind).contains(name))
        .map(|(name, bytes)| (name.to_string(), files::sha256_hex(bytes)))
        .collect();
    if let Some(missing) = data_files(&manifest.kind)
        .iter()
        .find(|name| !manifest.sha256.contains_key(**name))
    {
        return Err(Error::Invalid(format!(
            "a {} head needs the data file {missing}, which was not given to save_head",
            manifest.kind
        )));
    }
    let tmp = sibling(dir, "tmp");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    std::fs::write(tmp.join(HEAD_TENSORS), bytes).map_err(|e| Error::io(&tmp, e))?;
    let json = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
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

/// Reads and checks a head directory against the model it will serve: the manifest, the
/// output layer's fingerprint, and the digest of every data file.
pub fn read_head(dir: &Path, output: &impl AsRef<FullHead>) -> Result<(HeadManifest, Tensors)> {
    let full = output.as_ref();
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
    if m.d != full.dim() || m.vocab_size != full.vocab_size() {
        return Err(Error::format(
            &mpath,
            format!(
                "the head is for contexts of {} and {} words, the model has {} and {}; train a head for this model",
                m.d,
                m.vocab_size,
                full.dim(),
                full.vocab_size()
            ),
        ));
    }
    if m.model_fingerprint != fingerprint(full) {
        return Err(Error::format(
            &mpath,
            format!(
                "the head was trained for another model (output-layer fingerprint {} ≠ {}); retrain it for this model with `fastsoftmax train-head`",
                m.model_fingerprint,
                fingerprint(full)
            ),
        ));
    }
    let fix = "retrain the head with `fastsoftmax train-head`";
    // MODEL_DIR/heads/NAME
    let model_dir = dir
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."));
    let mut data = BTreeMap::new();
    for name in data_files(&m.kind) {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        files::verify(&path, &bytes, &m.sha256, &mpath, model_dir, fix)?;
        data.insert(name.to_string(), bytes);
    }
    let tpath = dir.join(HEAD_TENSORS);
    let bytes = data.remove(HEAD_TENSORS).unwrap_or_default();
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| {
        Error::format(
            &tpath,
            format!("not a readable safetensors file ({e}); it is truncated or corrupt — retrain the head"),
        )
    })?;
    let mut tensors = Tensors {
        files: data,
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

/// Records the SHA-256 of the data files of the head in `dir` that its `head.json` (written
/// before digests existed) lacks, atomically, changing nothing else; returns the files added.
/// Only for files known to be intact: the digest vouches for them from then on. A recorded
/// digest is never replaced.
pub fn record_digests(dir: &Path) -> Result<Vec<String>> {
    let path = dir.join(HEAD_MANIFEST);
    let text = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let mut m: HeadManifest = serde_json::from_slice(&text).map_err(|e| {
        Error::format(
            &path,
            format!("not a valid head manifest ({e}); retrain the head"),
        )
    })?;
    let missing = files::missing_digests(dir, &path, &m.sha256, data_files(&m.kind))?;
    if !missing.is_empty() {
        m.sha256.extend(missing.clone());
        let json = serde_json::to_vec_pretty(&m).expect("manifest serializes");
        files::write_atomic(&path, &json)?;
    }
    Ok(missing.into_keys().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seeded `[n, d]` table of values in (−1, 1).
    fn table(n: usize, d: usize) -> Vec<f32> {
        let mut x = 0x2545_f491u32;
        (0..n * d)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as f32 / u32::MAX as f32 * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn word_row_tables_are_stored_as_int8_and_widened_on_read() {
        let (rows, small) = (table(INT8_MIN_ROWS + 3, 7), table(10, 7));
        let mut t = Tensors::default();
        t.put_f32("rows", &[INT8_MIN_ROWS + 3, 7], &rows);
        t.put_f32("gate", &[10, 7], &small);
        t.put_u32("ids", &[1, 2, 3]);
        assert_eq!(t.store_rows_int8(), vec!["rows".to_string()]);
        // Stored again, the table stays as it is and is still named.
        let once = t.map["rows"].clone();
        assert_eq!(t.store_rows_int8(), vec!["rows".to_string()]);
        assert_eq!(t.map["rows"], once);
        assert_eq!(t.map["rows"].0, safetensors::Dtype::I8);
        assert_eq!(t.map["gate"].0, safetensors::Dtype::F32);
        let widened = t.f32("rows", &[INT8_MIN_ROWS + 3, 7]).unwrap();
        for (row, back) in rows.chunks(7).zip(widened.chunks(7)) {
            // Half a step of the row's scale (max |x| / 127) apart at most.
            let step = row.iter().fold(0.0f32, |m, x| m.max(x.abs())) / 127.0;
            for (a, b) in row.iter().zip(back) {
                assert!((a - b).abs() <= step * 0.5 + 1e-7, "{a} vs {b}");
            }
        }
        assert_eq!(t.f32("gate", &[10, 7]).unwrap(), small);
        let err = t
            .f32("rows", &[7, INT8_MIN_ROWS + 3])
            .unwrap_err()
            .to_string();
        assert!(err.contains("has shape"), "{err}");
        t.map.remove("rows.scale");
        let err = t
            .f32("rows", &[INT8_MIN_ROWS + 3, 7])
            .unwrap_err()
            .to_string();
        assert!(err.contains("rows.scale"), "{err}");
    }
}
