//! Frequency buckets, the layout D-softmax and adaptive softmax share: the vocabulary, sorted
//! by training frequency, is cut into buckets, and bucket `i` scores its words from a narrower
//! view of the context, `q_i = P_i h` (`[d_i]`), so a word of a rare bucket costs `d_i / d` of a
//! dot product. The first bucket usually sees `h` itself (no projection).
//!
//! On disk (inside a head's safetensors file) bucket `i` is `ids.i` `[n_i]`, `weights.i`
//! `[rows_i, d_i]`, `bias.i` `[rows_i]` and, when `d_i < d`, `proj.i` `[d_i, d]`; the manifest's
//! `params.dims` lists the `d_i`. `rows_i = n_i` except where a head adds rows of its own
//! (adaptive softmax's cluster rows after the head words).

use std::path::Path;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::format::{self, HeadManifest, Tensors};
use crate::heads::full::FullHead;
use crate::kernels::PackedMatrix;

/// One bucket's parameters, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    /// Word ids of the bucket's rows `[n]` (extra rows, if any, follow and have no word).
    pub ids: Vec<u32>,
    /// `[d_i, d]`, or `None` when the bucket sees `h` itself (`d_i = d`).
    pub proj: Option<Vec<f32>>,
    /// `[rows, d_i]`
    pub weights: Vec<f32>,
    /// `[rows]`
    pub bias: Vec<f32>,
}

impl Bucket {
    /// Width `d_i` of the context this bucket sees.
    pub fn width(&self, d: usize) -> usize {
        match &self.proj {
            Some(p) => p.len() / d,
            None => d,
        }
    }
}

/// A bucket packed for serving.
#[derive(Debug, Clone)]
pub(crate) struct PackedBucket {
    /// `[d_i, d]`, zero bias.
    proj: Option<PackedMatrix>,
    /// `[rows, d_i]` with the bucket's bias; rows past the words carry ids `vocab + j`.
    pub rows: PackedMatrix,
    pub words: usize,
}

impl PackedBucket {
    /// Checks `b` against context width `d` and `extra` non-word rows, and packs it.
    pub fn new(b: &Bucket, d: usize, extra: usize, vocab: usize, what: &str) -> Result<Self> {
        let di = b.width(d);
        let rows = b.ids.len() + extra;
        let bad = |msg: String| Err(Error::Invalid(format!("{what}: {msg}")));
        if b.ids.is_empty() {
            return bad("has no words; every bucket needs at least one".into());
        }
        if di == 0 || di > d || b.proj.as_ref().is_some_and(|p| p.len() != di * d) {
            return bad(format!("projection is not [d_i, {d}] with 1 ≤ d_i ≤ {d}"));
        }
        if b.weights.len() != rows * di || b.bias.len() != rows {
            return bad(format!(
                "weights have {} values and bias {}, expected [{rows}, {di}] and [{rows}]",
                b.weights.len(),
                b.bias.len()
            ));
        }
        let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
        if !finite(&b.weights) || !finite(&b.bias) || !b.proj.as_deref().is_none_or(finite) {
            return bad("parameters contain NaN or infinity; retrain the head".into());
        }
        let ids = b
            .ids
            .iter()
            .copied()
            .chain((0..extra as u32).map(|j| vocab as u32 + j))
            .collect();
        Ok(PackedBucket {
            proj: b
                .proj
                .as_ref()
                .map(|p| PackedMatrix::new(p, &vec![0.0; di], d, None)),
            rows: PackedMatrix::new(&b.weights, &b.bias, di, Some(ids)),
            words: b.ids.len(),
        })
    }

    pub fn width(&self) -> usize {
        self.rows.dim()
    }

    /// The context this bucket sees: `h`, or `P_i h` written into `q` (`[≥ d_i]`).
    #[inline]
    pub fn view<'a>(&self, h: &'a [f32], q: &'a mut [f32]) -> &'a [f32] {
        match &self.proj {
            None => h,
            Some(p) => {
                let q = &mut q[..p.n_rows()];
                p.logits_into(h, q);
                q
            }
        }
    }

    /// Dot products of length `d` one scan of this bucket costs (projection included).
    pub fn cost(&self, d: usize) -> f64 {
        let di = self.width() as f64;
        let proj = if self.proj.is_some() { di } else { 0.0 };
        proj + self.rows.n_rows() as f64 * di / d as f64
    }

    /// Back to plain parameters.
    pub fn unpack(&self) -> Bucket {
        let m = &self.rows;
        Bucket {
            ids: (0..self.words).map(|r| m.id(r)).collect(),
            proj: self
                .proj
                .as_ref()
                .map(|p| (0..p.n_rows()).flat_map(|r| p.row(r)).collect()),
            weights: (0..m.n_rows()).flat_map(|r| m.row(r)).collect(),
            bias: (0..m.n_rows()).map(|r| m.bias(r)).collect(),
        }
    }
}

/// Every word of `0..vocab` must sit in exactly one bucket.
pub(crate) fn check_partition(buckets: &[Bucket], vocab: usize, what: &str) -> Result<()> {
    let mut seen = vec![false; vocab];
    for id in buckets.iter().flat_map(|b| &b.ids) {
        match seen.get_mut(*id as usize) {
            Some(s) if !*s => *s = true,
            Some(_) => {
                return Err(Error::Invalid(format!(
                    "{what}: word {id} sits in two buckets; retrain the head"
                )))
            }
            None => {
                return Err(Error::Invalid(format!(
                    "{what}: word id {id} is outside the vocabulary of {vocab}; retrain the head"
                )))
            }
        }
    }
    if let Some(id) = seen.iter().position(|s| !s) {
        return Err(Error::Invalid(format!(
            "{what}: word {id} is in no bucket; retrain the head"
        )));
    }
    Ok(())
}

/// Adds the buckets' tensors to `t`; returns `params.dims`.
pub(crate) fn put_buckets(t: &mut Tensors, buckets: &[Bucket], d: usize) -> Vec<usize> {
    for (i, b) in buckets.iter().enumerate() {
        let di = b.width(d);
        t.put_u32(&format!("ids.{i}"), &b.ids);
        if let Some(p) = &b.proj {
            t.put_f32(&format!("proj.{i}"), &[di, d], p);
        }
        t.put_f32(&format!("weights.{i}"), &[b.bias.len(), di], &b.weights);
        t.put_f32(&format!("bias.{i}"), &[b.bias.len()], &b.bias);
    }
    buckets.iter().map(|b| b.width(d)).collect()
}

/// Reads the buckets of `dims` (`params.dims`) from `t`; bucket 0 has `extra0` extra rows.
pub(crate) fn get_buckets(
    t: &Tensors,
    dims: &serde_json::Value,
    d: usize,
    extra0: usize,
) -> Result<Vec<Bucket>> {
    let dims: Vec<usize> = dims
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_u64())
                .map(|x| x as usize)
                .collect()
        })
        .unwrap_or_default();
    if dims.is_empty() || dims.iter().any(|&di| di == 0 || di > d) {
        return Err(Error::format(
            t.origin(),
            format!("head.json `params.dims` must list bucket widths in 1..={d}; retrain the head"),
        ));
    }
    dims.iter()
        .enumerate()
        .map(|(i, &di)| {
            let ids = t.u32(&format!("ids.{i}"))?;
            let rows = ids.len() + if i == 0 { extra0 } else { 0 };
            Ok(Bucket {
                proj: if di < d {
                    Some(t.f32(&format!("proj.{i}"), &[di, d])?)
                } else {
                    None
                },
                weights: t.f32(&format!("weights.{i}"), &[rows, di])?,
                bias: t.f32(&format!("bias.{i}"), &[rows])?,
                ids,
            })
        })
        .collect()
}

/// Writes a bucketed head of `kind` to `dir` (atomically) with `training` in its manifest and
/// `extra` files beside it.
pub(crate) fn save(
    kind: &str,
    buckets: &[Bucket],
    dir: &Path,
    output: &impl AsRef<FullHead>,
    training: serde_json::Value,
    extra: &[(&str, &[u8])],
) -> Result<()> {
    let mut t = Tensors::default();
    let dims = put_buckets(&mut t, buckets, SoftmaxHead::dim(output.as_ref()));
    let mut m = HeadManifest::new(kind, output, serde_json::json!({ "dims": dims }));
    m.training = training;
    format::save_head(dir, &m, &t, extra)
}
