//! Differentiated softmax (Chen et al. 2016), the baseline of the DS-Softmax paper's Table 1:
//! words sorted by frequency are cut into buckets with embedding widths that shrink for rarer
//! words (the paper's PTB split: 2,500 / 2,500 / 5,000 words at 200 / 100 / 50), all in one
//! softmax. Trained on top of the frozen LM by `fastsoftmax train-head dsoftmax`.
//!
//! Every word still gets a logit, so top-k is exact for this model; the saving is the narrower
//! rows: cost = Σ_i (d_i + n_i·d_i/d) length-`d` dot products (projection + rows).

use std::cell::RefCell;
use std::path::Path;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::bucketed::{self, Bucket, PackedBucket};
use crate::heads::format::{HeadManifest, Tensors};
use crate::heads::full::FullHead;
use crate::topk::TopK;

#[derive(Debug, Clone)]
pub struct DsoftmaxHead {
    name: String,
    d: usize,
    vocab: usize,
    buckets: Vec<PackedBucket>,
}

thread_local! {
    /// The projected context `[d_i]` of the bucket being scanned.
    static VIEW: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

impl DsoftmaxHead {
    /// A head over contexts of width `d`; the buckets must partition `0..vocab`.
    pub fn new(name: &str, d: usize, vocab: usize, buckets: &[Bucket]) -> Result<Self> {
        bucketed::check_partition(buckets, vocab, "dsoftmax")?;
        let buckets = buckets
            .iter()
            .enumerate()
            .map(|(i, b)| PackedBucket::new(b, d, 0, vocab, &format!("dsoftmax bucket {i}")))
            .collect::<Result<_>>()?;
        Ok(DsoftmaxHead {
            name: name.into(),
            d,
            vocab,
            buckets,
        })
    }

    pub fn buckets(&self) -> Vec<Bucket> {
        self.buckets.iter().map(PackedBucket::unpack).collect()
    }

    /// Bucket widths `d_i`.
    pub fn widths(&self) -> Vec<usize> {
        self.buckets.iter().map(PackedBucket::width).collect()
    }

    /// Writes the head to `dir` (atomically) with `training` in its manifest and `extra` files.
    pub fn save(
        &self,
        dir: &Path,
        output: &impl AsRef<FullHead>,
        training: serde_json::Value,
        extra: &[(&str, &[u8])],
    ) -> Result<()> {
        bucketed::save("dsoftmax", &self.buckets(), dir, output, training, extra)
    }

    /// Builds the head from a head directory's contents, already checked against the output layer.
    pub fn from_files(name: &str, m: &HeadManifest, t: &Tensors, _full: &FullHead) -> Result<Self> {
        let buckets = bucketed::get_buckets(t, &m.params["dims"], m.d, 0)?;
        Self::new(name, m.d, m.vocab_size, &buckets)
            .map_err(|e| Error::format(t.origin(), e.to_string()))
    }
}

impl SoftmaxHead for DsoftmaxHead {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.d
    }
    fn vocab_size(&self) -> usize {
        self.vocab
    }

    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        out.reset(k);
        VIEW.with(|q| {
            let q = &mut *q.borrow_mut();
            q.resize(self.d, 0.0);
            for b in &self.buckets {
                b.rows.scan_into(b.view(h, q), out);
            }
        });
    }

    fn cost(&self, _h: &[f32]) -> usize {
        let c: f64 = self.buckets.iter().map(|b| b.cost(self.d)).sum();
        c.round() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heads::full::FullHead;
    use crate::kernels::seeded_values as values;

    /// Three buckets over `v` words (ids interleaved, as a frequency order would be).
    fn fixture(v: usize, d: usize) -> Vec<Bucket> {
        let dims = [d, d / 2, d / 4];
        let mut ids: Vec<Vec<u32>> = vec![vec![], vec![], vec![]];
        for w in 0..v as u32 {
            ids[(w as usize * 7) % 3].push(w);
        }
        ids.into_iter()
            .zip(dims)
            .enumerate()
            .map(|(i, (ids, di))| Bucket {
                proj: (di < d).then(|| values(di * d, 10 + i as u64)),
                weights: values(ids.len() * di, 20 + i as u64),
                bias: values(ids.len(), 30 + i as u64),
                ids,
            })
            .collect()
    }

    #[test]
    fn it_scores_every_word_through_its_bucket() {
        let (v, d) = (120, 16);
        let buckets = fixture(v, d);
        let head = DsoftmaxHead::new("dsoftmax", d, v, &buckets).unwrap();
        assert_eq!(head.widths(), vec![16, 8, 4]);
        assert_eq!(head.buckets(), buckets);
        // The reference: every word's logit written out by hand, then the full head's top-k.
        let mut w = vec![0.0f32; v * d];
        let mut b = vec![0.0f32; v];
        for bucket in &buckets {
            let di = bucket.width(d);
            for (r, &id) in bucket.ids.iter().enumerate() {
                let row = &bucket.weights[r * di..(r + 1) * di];
                // logit = row · (P h) = (Pᵀ row) · h
                for j in 0..d {
                    w[id as usize * d + j] = match &bucket.proj {
                        None => row[j],
                        Some(p) => (0..di).map(|c| row[c] * p[c * d + j]).sum(),
                    };
                }
                b[id as usize] = bucket.bias[r];
            }
        }
        let full = FullHead::new(&w, &b, d).unwrap();
        for h in values(30 * d, 40).chunks(d) {
            let got = head.top_k(h, 5).unwrap();
            let want = full.top_k(h, 5).unwrap();
            for (g, e) in got.iter().zip(&want) {
                assert_eq!(g.id, e.id);
                assert!((g.logit - e.logit).abs() < 1e-4);
            }
        }
        let n = [0usize, 1, 2].map(|i| buckets[i].ids.len() as f64);
        let want = n[0] + (8.0 + n[1] * 0.5) + (4.0 + n[2] * 0.25);
        assert_eq!(head.cost(&[]), want.round() as usize);
    }

    #[test]
    fn broken_buckets_are_refused() {
        let (v, d) = (60, 8);
        let mut b = fixture(v, d);
        b[1].ids[0] = b[0].ids[0];
        let e = DsoftmaxHead::new("x", d, v, &b).unwrap_err().to_string();
        assert!(e.contains("two buckets"), "{e}");
        let mut b = fixture(v, d);
        b[2].ids.pop();
        b[2].bias.pop();
        let n = b[2].ids.len() * 2;
        b[2].weights.truncate(n);
        assert!(DsoftmaxHead::new("x", d, v, &b)
            .unwrap_err()
            .to_string()
            .contains("in no bucket"));
        let mut b = fixture(v, d);
        b[1].weights[0] = f32::NAN;
        assert!(DsoftmaxHead::new("x", d, v, &b)
            .unwrap_err()
            .to_string()
            .contains("NaN"));
        let mut b = fixture(v, d);
        b[1].bias.pop();
        assert!(DsoftmaxHead::new("x", d, v, &b).is_err());
    }
}
