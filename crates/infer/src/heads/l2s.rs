//! L2S, learning to screen (Chen et al., ICLR 2019): a context goes to the cluster whose vector
//! `v_t` scores it highest, and only that cluster's candidate words get exact logits.
//!
//! Cost per query: `r` dot products to pick the cluster, then `|c_t|` for its candidates,
//! against `vocab` for the full softmax. Each cluster's candidate rows are one contiguous
//! [`PackedMatrix`] (ids ascending, so ties break as in the full head), small enough to stay in
//! cache. Training lives in `fastsoftmax-nn` (`l2s` module); this is the serving side.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::format::{self, HeadManifest, Tensors};
use crate::heads::full::FullHead;
use crate::heads::lowrank::LowRank;
use crate::heads::routed::Routed;
use crate::kernels::PackedMatrix;
use crate::topk::TopK;

/// The screening head: cluster vectors `v_t` (`[r, d]`, zero bias) as routes, and each
/// cluster's candidate rows of the exact output layer.
#[derive(Debug, Clone)]
pub struct L2sHead {
    name: String,
    routed: Routed,
}

impl L2sHead {
    /// Builds the head from cluster vectors `clusters` (`[r, d]` row-major) and each cluster's
    /// candidate word ids, taking the candidate rows from `full`. Ids are sorted and
    /// deduplicated; out-of-range ids, non-finite vectors and shape mismatches are errors.
    pub fn new(
        name: &str,
        full: &FullHead,
        clusters: &[f32],
        candidates: &[Vec<u32>],
    ) -> Result<Self> {
        let d = full.dim();
        let r = candidates.len();
        if r == 0 || clusters.len() != r * d {
            return Err(Error::Invalid(format!(
                "l2s head: {} cluster values for {r} candidate sets of width {d}; need [r, d] with r ≥ 1",
                clusters.len()
            )));
        }
        if let Some(i) = clusters.iter().position(|x| !x.is_finite()) {
            return Err(Error::Invalid(format!(
                "l2s head: cluster vector value {i} is {}; retrain the head",
                clusters[i]
            )));
        }
        let vocab = full.vocab_size() as u32;
        let sets = candidates
            .iter()
            .enumerate()
            .map(|(t, ids)| {
                let mut ids = ids.clone();
                ids.sort_unstable();
                ids.dedup();
                if let Some(&bad) = ids.iter().find(|&&id| id >= vocab) {
                    return Err(Error::Invalid(format!(
                        "l2s head: cluster {t} lists word id {bad}, but the vocabulary has {vocab} words; the head belongs to another model"
                    )));
                }
                Ok(full.matrix().gather(&ids))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(L2sHead {
            name: name.to_string(),
            routed: Routed {
                routes: PackedMatrix::new(clusters, &vec![0.0; r], d, None),
                sets,
                full: Arc::clone(full.matrix()),
            },
        })
    }

    /// Number of clusters `r`.
    pub fn n_clusters(&self) -> usize {
        self.routed.n_routes()
    }

    /// The cluster context `h` is screened into.
    pub fn cluster_of(&self, h: &[f32]) -> usize {
        self.routed.route_of(h)
    }

    /// Candidate count of each cluster.
    pub fn set_sizes(&self) -> Vec<usize> {
        self.routed.sets.iter().map(|s| s.n_rows()).collect()
    }

    /// Word ids of cluster `t`'s candidates, ascending.
    pub fn candidates(&self, t: usize) -> Vec<u32> {
        self.routed.ids(t)
    }

    /// Cluster vectors `[r, d]` row-major.
    pub fn cluster_vectors(&self) -> Vec<f32> {
        (0..self.n_clusters())
            .flat_map(|t| self.routed.routes.row(t))
            .collect()
    }

    /// Writes the head to `dir` (atomically), recording `training` in its manifest and
    /// writing `extra` files (config, command, log) beside it.
    pub fn save(
        &self,
        dir: &Path,
        output: &impl AsRef<FullHead>,
        training: serde_json::Value,
        extra: &[(&str, &[u8])],
    ) -> Result<()> {
        let r = self.n_clusters();
        let mut manifest = HeadManifest::new("l2s", output, serde_json::json!({ "clusters": r }));
        manifest.training = training;
        let mut t = Tensors::default();
        t.put_f32("clusters", &[r, self.dim()], &self.cluster_vectors());
        let mut offsets = vec![0u32];
        let mut ids = Vec::new();
        for c in 0..r {
            ids.extend(self.candidates(c));
            offsets.push(ids.len() as u32);
        }
        t.put_u32("candidates", &ids);
        t.put_u32("offsets", &offsets);
        format::save_head(dir, &manifest, &t, extra)
    }

    /// Loads the head in `dir` for the output layer `output` (a model or its full head); its name is the directory's name.
    pub fn load(dir: &Path, output: &impl AsRef<FullHead>) -> Result<Self> {
        let (m, t) = format::read_head(dir, output)?;
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("l2s");
        Self::from_files(name, &m, &t, output.as_ref())
    }

    /// Builds the head from a head directory's contents, already checked against the output layer by
    /// [`format::read_head`].
    pub fn from_files(name: &str, m: &HeadManifest, t: &Tensors, full: &FullHead) -> Result<Self> {
        let r = m.params["clusters"].as_u64().unwrap_or(0) as usize;
        let clusters = t.f32("clusters", &[r, m.d])?;
        let ids = t.u32("candidates")?;
        let sets: Vec<Vec<u32>> = t
            .groups(ids.len(), r, "candidate ids", "clusters")?
            .into_iter()
            .map(|g| ids[g].to_vec())
            .collect();
        Self::new(name, full, &clusters, &sets)
            .map_err(|e| Error::format(t.origin(), e.to_string()))
    }

    /// Every word's logit for `h` (`out` is `[vocab]`): exact inside the screened cluster's
    /// candidates, from the low-rank `fallback` elsewhere (the paper's Table 6 setting).
    /// Returns the number of exact candidates. `q` is scratch of length `fallback.rank()`.
    pub fn logits_with_fallback(
        &self,
        h: &[f32],
        fallback: &LowRank,
        q: &mut [f32],
        out: &mut [f32],
    ) -> usize {
        fallback.logits_into(h, q, out);
        let set = &self.routed.sets[self.cluster_of(h)];
        set.for_each_logit(h, |row, logit| out[set.id(row) as usize] = logit);
        set.n_rows()
    }
}

impl SoftmaxHead for L2sHead {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.routed.routes.dim()
    }
    fn vocab_size(&self) -> usize {
        self.routed.full.n_rows()
    }

    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        self.routed.scan_route(self.cluster_of(h), h, k, out);
    }

    /// Groups the batch by cluster so each cluster's candidates stream once for all its queries.
    fn top_k_batch(&self, hs: &[f32], k: usize, out: &mut [TopK]) {
        let routed: Vec<u32> = hs
            .chunks_exact(self.dim())
            .map(|h| self.cluster_of(h) as u32)
            .collect();
        self.routed.scan_batch(hs, &routed, k, out);
    }

    fn cost(&self, h: &[f32]) -> usize {
        self.routed.cost(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heads::full::NaiveFullHead;
    use crate::kernels::seeded_values as values;

    #[test]
    fn every_word_in_every_cluster_is_the_full_softmax() {
        let (v, d, r) = (300, 24, 7);
        let w = values(v * d, 1);
        let b = values(v, 2);
        let full = FullHead::new(&w, &b, d).unwrap();
        let naive = NaiveFullHead::new(&w, &b, d);
        let all: Vec<u32> = (0..v as u32).rev().collect();
        let head = L2sHead::new("l2s", &full, &values(r * d, 3), &vec![all; r]).unwrap();
        let hs = values(50 * d, 4);
        let mut batch = vec![TopK::new(10); 50];
        head.top_k_batch(&hs, 10, &mut batch);
        for (q, h) in hs.chunks(d).enumerate() {
            let want: Vec<u32> = naive.top_k(h, 10).unwrap().iter().map(|s| s.id).collect();
            let got: Vec<u32> = head.top_k(h, 10).unwrap().iter().map(|s| s.id).collect();
            assert_eq!(got, want);
            assert_eq!(batch[q].ids().collect::<Vec<_>>(), want);
        }
    }

    #[test]
    fn a_small_set_screens_and_k_beyond_it_falls_back() {
        let (v, d) = (100, 8);
        let w = values(v * d, 5);
        let b = vec![0.0; v];
        let full = FullHead::new(&w, &b, d).unwrap();
        // Two clusters along ±e0; each keeps 3 words.
        let mut c = vec![0.0; 2 * d];
        c[0] = 1.0;
        c[d] = -1.0;
        let head = L2sHead::new("x", &full, &c, &[vec![5, 1, 9], vec![2, 3, 4]]).unwrap();
        let mut h = vec![0.0; d];
        h[0] = 1.0;
        assert_eq!(head.cluster_of(&h), 0);
        assert_eq!(head.candidates(0), vec![1, 5, 9]);
        let got = head.top_k(&h, 3).unwrap();
        let mut ids: Vec<u32> = got.iter().map(|s| s.id).collect();
        ids.sort();
        assert_eq!(ids, vec![1, 5, 9]);
        assert_eq!(head.cost(&h), 2 + 3);
        // k = 4 > 3 candidates: the exact answer, from the full layer.
        let want = full.top_k(&h, 4).unwrap();
        assert_eq!(head.top_k(&h, 4).unwrap(), want);
        // The grouped batch path agrees with one query at a time, screened or falling back.
        let hs = values(9 * d, 6);
        for k in [2, 3, 4] {
            let mut batch = vec![TopK::new(k); 9];
            head.top_k_batch(&hs, k, &mut batch);
            for (h, got) in hs.chunks(d).zip(&batch) {
                assert_eq!(got.as_slice(), head.top_k(h, k).unwrap().as_slice());
            }
        }
    }

    #[test]
    fn bad_inputs_are_errors() {
        let full = FullHead::new(&values(40, 1), &[0.0; 10], 4).unwrap();
        assert!(L2sHead::new("x", &full, &values(4, 2), &[vec![10]])
            .unwrap_err()
            .to_string()
            .contains("word id 10"));
        assert!(L2sHead::new("x", &full, &values(3, 2), &[vec![1]]).is_err());
        assert!(L2sHead::new("x", &full, &[f32::NAN; 4], &[vec![1]]).is_err());
        assert!(L2sHead::new("x", &full, &[], &[]).is_err());
    }
}
