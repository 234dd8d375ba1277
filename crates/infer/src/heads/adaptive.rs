//! Adaptive softmax (Grave et al. 2017) used for prediction, the L2S paper's baseline: the `H`
//! most frequent words and one row per tail cluster form the head level (width `d`); each tail
//! cluster `c` of rarer words is its own softmax over a projected context `P_c h` (`[d_c]`, the
//! width shrinking 4× per cluster). Trained on top of the frozen LM by
//! `fastsoftmax train-head adaptive`.
//!
//! `log p(w) = log p_head(w)` for a head word and `log p_head(c) + log p_c(w)` for a word of
//! cluster `c`, so no word of `c` can beat `log p_head(c)`: a query scores the head level, then
//! only the clusters whose own probability beats the `k`-th best word found so far, most
//! probable first. The top-k is exact for this model (scores are log-probabilities); the cost
//! is `H + C` dot products plus the clusters opened.

use std::cell::RefCell;
use std::path::Path;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::bucketed::{self, Bucket, PackedBucket};
use crate::heads::format::{HeadManifest, Tensors};
use crate::heads::full::FullHead;
use crate::topk::TopK;

#[derive(Debug, Clone)]
pub struct AdaptiveHead {
    name: String,
    d: usize,
    vocab: usize,
    /// `[H + C, d]`: the head words, then one row per cluster.
    head: PackedBucket,
    clusters: Vec<PackedBucket>,
    /// `[vocab]`: each word's level (0 the head, `c + 1` tail cluster `c`) and row in it.
    place: Vec<(u32, u32)>,
}

/// Per-thread scratch, so queries do not allocate once warm.
#[derive(Default)]
struct Scratch {
    /// The projected context `[d_c]`.
    view: Vec<f32>,
    /// The logits of one level.
    logits: Vec<f32>,
    /// `(log p(cluster), cluster)`, most probable first.
    order: Vec<(f32, usize)>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// `k` used by [`SoftmaxHead::cost`], which has no `k`: the benchmark's.
const COST_K: usize = crate::topk::K_MAX;

impl AdaptiveHead {
    /// `buckets[0]` holds the head words followed by one extra row per tail cluster
    /// (`buckets[1..]`); together the buckets must partition `0..vocab`.
    pub fn new(name: &str, d: usize, vocab: usize, buckets: &[Bucket]) -> Result<Self> {
        if buckets.len() < 2 {
            return Err(Error::Invalid(
                "adaptive softmax needs a head and at least one tail cluster".into(),
            ));
        }
        if buckets[0].proj.is_some() {
            return Err(Error::Invalid(
                "adaptive softmax: the head level sees the full context; it has no projection"
                    .into(),
            ));
        }
        bucketed::check_partition(buckets, vocab, "adaptive")?;
        let n_clusters = buckets.len() - 1;
        let head = PackedBucket::new(&buckets[0], d, n_clusters, vocab, "adaptive head")?;
        let clusters = buckets[1..]
            .iter()
            .enumerate()
            .map(|(c, b)| PackedBucket::new(b, d, 0, vocab, &format!("adaptive cluster {c}")))
            .collect::<Result<_>>()?;
        let mut place = vec![(0, 0); vocab];
        for (level, b) in buckets.iter().enumerate() {
            for (row, &id) in b.ids.iter().enumerate() {
                place[id as usize] = (level as u32, row as u32);
            }
        }
        Ok(AdaptiveHead {
            name: name.into(),
            d,
            vocab,
            head,
            clusters,
            place,
        })
    }

    pub fn buckets(&self) -> Vec<Bucket> {
        std::iter::once(&self.head)
            .chain(&self.clusters)
            .map(PackedBucket::unpack)
            .collect()
    }

    /// Words in the head level.
    pub fn head_size(&self) -> usize {
        self.head.words
    }

    /// Writes the head to `dir` (atomically) with `training` in its manifest and `extra` files.
    pub fn save(
        &self,
        dir: &Path,
        output: &impl AsRef<FullHead>,
        training: serde_json::Value,
        extra: &[(&str, &[u8])],
    ) -> Result<()> {
        bucketed::save("adaptive", &self.buckets(), dir, output, training, extra)
    }

    /// Builds the head from a head directory's contents, already checked against the output layer.
    pub fn from_files(name: &str, m: &HeadManifest, t: &Tensors, _full: &FullHead) -> Result<Self> {
        let n_clusters = m.params["dims"]
            .as_array()
            .map_or(0, |a| a.len().saturating_sub(1));
        let buckets = bucketed::get_buckets(t, &m.params["dims"], m.d, n_clusters)?;
        Self::new(name, m.d, m.vocab_size, &buckets)
            .map_err(|e| Error::format(t.origin(), e.to_string()))
    }

    /// `log p(word | h)` under this model, and its cost in length-`d` dot products: the head
    /// level, then for a tail word its own cluster only (what perplexity needs, L2S's Table 6).
    pub fn log_prob(&self, h: &[f32], word: u32) -> (f64, f64) {
        let (level, row) = self.place[word as usize];
        SCRATCH.with(|s| {
            let Scratch {
                view: q, logits, ..
            } = &mut *s.borrow_mut();
            q.resize(self.d, 0.0);
            let n = self.head.rows.n_rows();
            logits.resize(n.max(logits.len()), 0.0);
            self.head.rows.logits_into(h, &mut logits[..n]);
            let lse = crate::kernels::log_sum_exp(&logits[..n]);
            let cost = self.head.cost(self.d);
            if level == 0 {
                return (logits[row as usize] as f64 - lse, cost);
            }
            let c = level as usize - 1;
            let log_p_cluster = logits[self.head.words + c] as f64 - lse;
            let cluster = &self.clusters[c];
            let m = cluster.rows.n_rows();
            logits.resize(m.max(logits.len()), 0.0);
            cluster
                .rows
                .logits_into(cluster.view(h, q), &mut logits[..m]);
            let log_p = logits[row as usize] as f64 - crate::kernels::log_sum_exp(&logits[..m]);
            (log_p_cluster + log_p, cost + cluster.cost(self.d))
        })
    }

    /// The query; returns its cost in length-`d` dot products.
    fn search(&self, h: &[f32], k: usize, out: &mut TopK) -> f64 {
        out.reset(k);
        let (words, n_clusters) = (self.head.words, self.clusters.len());
        SCRATCH.with(|s| {
            let Scratch {
                view: q,
                logits,
                order,
            } = &mut *s.borrow_mut();
            q.resize(self.d, 0.0);
            let level = self.head.rows.n_rows();
            logits.resize(level.max(logits.len()), 0.0);
            self.head.rows.logits_into(h, &mut logits[..level]);
            let lse = crate::kernels::log_sum_exp(&logits[..level]) as f32;
            for (r, &l) in logits[..words].iter().enumerate() {
                out.push(self.head.rows.id(r), l - lse);
            }
            order.clear();
            order.extend((0..n_clusters).map(|c| (logits[words + c] - lse, c)));
            order.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
            let mut cost = self.head.cost(self.d);
            for &(log_p_cluster, c) in order.iter() {
                if log_p_cluster <= out.threshold() {
                    break; // neither this cluster nor a less probable one can enter
                }
                let cluster = &self.clusters[c];
                let n = cluster.rows.n_rows();
                logits.resize(n.max(logits.len()), 0.0);
                cluster
                    .rows
                    .logits_into(cluster.view(h, q), &mut logits[..n]);
                let shift = log_p_cluster - crate::kernels::log_sum_exp(&logits[..n]) as f32;
                for (r, &l) in logits[..n].iter().enumerate() {
                    out.push(cluster.rows.id(r), l + shift);
                }
                cost += cluster.cost(self.d);
            }
            cost
        })
    }
}

impl SoftmaxHead for AdaptiveHead {
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
        self.search(h, k, out);
    }

    /// Measured at the benchmark's `k` (the clusters opened depend on `k`).
    fn cost(&self, h: &[f32]) -> usize {
        let mut out = TopK::new(COST_K);
        self.search(h, COST_K.min(self.vocab), &mut out).round() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    /// Head of 20 words + 2 clusters of 40 and 60 words at widths d/2 and d/4.
    fn fixture(d: usize) -> Vec<Bucket> {
        let sizes = [20usize, 40, 60];
        let dims = [d, d / 2, d / 4];
        let mut next = 0u32;
        (0..3)
            .map(|i| {
                let ids: Vec<u32> = (next..next + sizes[i] as u32).collect();
                next += sizes[i] as u32;
                let rows = sizes[i] + if i == 0 { 2 } else { 0 };
                Bucket {
                    proj: (i > 0).then(|| values(dims[i] * d, 50 + i as u64)),
                    weights: values(rows * dims[i], 60 + i as u64)
                        .iter()
                        .map(|x| 3.0 * x)
                        .collect(),
                    bias: values(rows, 70 + i as u64),
                    ids,
                }
            })
            .collect()
    }

    /// Every word's log-probability, computed the slow way.
    fn log_probs(b: &[Bucket], d: usize, h: &[f32]) -> Vec<(u32, f32)> {
        let logits = |bk: &Bucket| -> Vec<f64> {
            let di = bk.width(d);
            let q: Vec<f64> = match &bk.proj {
                None => h.iter().map(|&x| x as f64).collect(),
                Some(p) => (0..di)
                    .map(|c| (0..d).map(|j| p[c * d + j] as f64 * h[j] as f64).sum())
                    .collect(),
            };
            (0..bk.bias.len())
                .map(|r| {
                    (0..di)
                        .map(|j| bk.weights[r * di + j] as f64 * q[j])
                        .sum::<f64>()
                        + bk.bias[r] as f64
                })
                .collect()
        };
        let lse = |v: &[f64]| v.iter().map(|x| x.exp()).sum::<f64>().ln();
        let head = logits(&b[0]);
        let z = lse(&head);
        let mut out: Vec<(u32, f32)> = b[0]
            .ids
            .iter()
            .zip(&head)
            .map(|(&id, &l)| (id, (l - z) as f32))
            .collect();
        for (c, bk) in b[1..].iter().enumerate() {
            let l = logits(bk);
            let zc = lse(&l);
            let lp_c = head[b[0].ids.len() + c] - z;
            out.extend(
                bk.ids
                    .iter()
                    .zip(&l)
                    .map(|(&id, &x)| (id, (lp_c + x - zc) as f32)),
            );
        }
        out
    }

    #[test]
    fn the_pruned_search_returns_the_models_exact_top_k() {
        let d = 16;
        let b = fixture(d);
        let head = AdaptiveHead::new("adaptive", d, 120, &b).unwrap();
        assert_eq!(head.buckets(), b);
        assert_eq!(head.head_size(), 20);
        let (mut skipped, mut opened) = (0, 0);
        for h in values(60 * d, 80).chunks(d) {
            let mut want = log_probs(&b, d, h);
            let total: f64 = want.iter().map(|w| (w.1 as f64).exp()).sum();
            assert!((total - 1.0).abs() < 1e-4, "probabilities sum to {total}");
            want.sort_by(|x, y| y.1.total_cmp(&x.1));
            for k in [1, 5, 120] {
                let got = head.top_k(h, k).unwrap();
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(g.id, w.0, "k = {k}");
                    assert!((g.logit - w.1).abs() < 1e-4);
                }
            }
            // One word's log-probability, as perplexity asks for it.
            for (id, lp) in log_probs(&b, d, h) {
                let (got, cost) = head.log_prob(h, id);
                assert!((got - lp as f64).abs() < 1e-4, "word {id}: {got} vs {lp}");
                assert!(cost >= 22.0 && (id < 20) == (cost == 22.0));
            }
            let cost = head.cost(h);
            if cost == 22 {
                skipped += 1;
            } else {
                opened += 1;
            }
        }
        // The fixture has contexts that stop in the head and contexts that open a cluster.
        assert!(skipped > 0 && opened > 0, "{skipped} {opened}");
    }

    #[test]
    fn malformed_heads_are_refused() {
        let d = 16;
        let b = fixture(d);
        assert!(AdaptiveHead::new("x", d, 120, &b[..1]).is_err());
        let mut bad = b.clone();
        bad[0].bias.pop();
        let n = bad[0].weights.len() - d;
        bad[0].weights.truncate(n);
        // One cluster row short: the head level no longer has a row per cluster.
        assert!(AdaptiveHead::new("x", d, 120, &bad).is_err());
        assert!(AdaptiveHead::new("x", d, 121, &b).is_err());
    }
}
