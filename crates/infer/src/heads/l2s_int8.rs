//! `NAME+int8`: a trained L2S head served with int8 rows. The cluster is chosen on int8 cluster
//! vectors, the cluster's candidates are scanned on int8 rows (one scale per row, AVX-512
//! VNNI), and their best `max(2k, 10)` (at most [`RESCORED`]) re-scored in f32, so the answer
//! is the f32 head's unless quantization moved a context to another cluster or a word of its
//! top-k fell below the int8 scan's best.

use std::cell::RefCell;

use crate::error::Result;
use crate::head::SoftmaxHead;
use crate::heads::full::FullHead;
use crate::heads::l2s::L2sHead;
use crate::kernels::rows::ExactRows;
use crate::kernels::{Int8Matrix, Quantized};
use crate::topk::{TopK, K_MAX};

/// Candidates of the int8 scan re-scored in f32 for a top-[`K_MAX`] query: `max(2k, 10)`.
pub const RESCORED: usize = 2 * K_MAX;

fn rescored(k: usize) -> usize {
    (2 * k).max(10)
}

/// Index of the first largest score.
fn first_max(scores: &[f32]) -> usize {
    (0..scores.len()).fold(0, |b, t| if scores[t] > scores[b] { t } else { b })
}

#[derive(Debug, Clone)]
pub struct L2sInt8Head {
    name: String,
    l2s: L2sHead,
    /// `[r, d]` the cluster vectors in int8.
    routes: Int8Matrix,
    /// Per cluster: its candidate rows in int8, ids = word ids.
    sets: Vec<Int8Matrix>,
    /// The output layer's rows in f32, for re-scoring.
    exact: ExactRows,
}

/// Buffers reused across queries.
#[derive(Default)]
struct Scratch {
    /// The batch's contexts, quantized once for the cluster vectors and the candidate rows.
    all: Quantized,
    /// The contexts of one cluster.
    run: Quantized,
    /// The int8 scan's candidates per context, and their ids.
    cands: Vec<TopK>,
    ids: Vec<u32>,
    /// Cluster scores `[n, r]`.
    scores: Vec<f32>,
    /// `(cluster, context)` pairs, sorted by cluster.
    order: Vec<(usize, usize)>,
    idx: Vec<usize>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

impl L2sInt8Head {
    /// `l2s`'s candidate sets as int8 rows of `full`'s output layer.
    pub fn new(l2s: L2sHead, full: &FullHead) -> Result<Self> {
        let m = full.matrix();
        let d = m.dim();
        let sets = (0..l2s.n_clusters())
            .map(|t| {
                let ids = l2s.candidates(t);
                let rows: Vec<f32> = ids.iter().flat_map(|&i| m.row(i as usize)).collect();
                let bias: Vec<f32> = ids.iter().map(|&i| m.bias(i as usize)).collect();
                Int8Matrix::new(&rows, &bias, d, Some(ids))
            })
            .collect();
        let r = l2s.n_clusters();
        Ok(L2sInt8Head {
            name: format!("{}+int8", l2s.name()),
            routes: Int8Matrix::new(&l2s.cluster_vectors(), &vec![0.0; r], d, None),
            exact: ExactRows::new(m, None),
            l2s,
            sets,
        })
    }

    /// `l2s+int8` → `l2s`: the trained head the name serves in int8.
    pub fn parse_name(name: &str) -> Option<&str> {
        name.strip_suffix("+int8").filter(|base| !base.is_empty())
    }

    /// Quantizes `hs` `[n, d]` into `s.all` and routes each context to its cluster by the int8
    /// cluster vectors: `s.order` = `(cluster, context)` pairs sorted by cluster.
    fn route(&self, hs: &[f32], s: &mut Scratch) {
        let r = self.routes.n_rows();
        self.routes.quantize(hs, &mut s.all);
        s.scores.resize(s.all.len() * r, 0.0);
        self.routes.logits_quantized(&s.all, &mut s.scores);
        s.order.clear();
        s.order.extend(
            s.scores
                .chunks_exact(r)
                .enumerate()
                .map(|(i, row)| (first_max(row), i)),
        );
        s.order.sort_unstable();
    }

    /// The contexts `s.idx` of `hs` (quantized in `q`), all routed to cluster `t`: int8 scan,
    /// then f32 re-scoring.
    fn answer(
        &self,
        t: usize,
        hs: &[f32],
        q: &Quantized,
        s: &mut Scratch,
        k: usize,
        out: &mut [TopK],
    ) {
        let d = self.dim();
        let set = &self.sets[t];
        let Scratch {
            cands, ids, idx, ..
        } = s;
        if set.n_rows() < k {
            // Fewer candidates than asked: the exact head answers, as the f32 head does.
            for &i in idx.iter() {
                self.l2s.top_k_into(&hs[i * d..(i + 1) * d], k, &mut out[i]);
            }
            return;
        }
        let m = rescored(k);
        cands.resize_with(idx.len(), || TopK::new(m));
        for c in cands.iter_mut().take(idx.len()) {
            c.reset(m);
        }
        set.scan_quantized(q, &mut cands[..idx.len()]);
        for (&i, c) in idx.iter().zip(cands.iter()) {
            ids.clear();
            ids.extend(c.ids());
            out[i].reset(k);
            self.exact
                .push_rows(ids, &hs[i * d..(i + 1) * d], &mut out[i]);
        }
    }
}

impl SoftmaxHead for L2sInt8Head {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.l2s.dim()
    }
    fn vocab_size(&self) -> usize {
        self.l2s.vocab_size()
    }

    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            self.route(h, s);
            let t = s.order[0].0;
            s.idx.clear();
            s.idx.push(0);
            let all = std::mem::take(&mut s.all);
            self.answer(t, h, &all, s, k, std::slice::from_mut(out));
            s.all = all;
        });
    }

    /// Groups the batch by cluster so each cluster's int8 rows stream once for its queries;
    /// the contexts are quantized once for the routing and every cluster.
    fn top_k_batch(&self, hs: &[f32], k: usize, out: &mut [TopK]) {
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            self.route(hs, s);
            let (order, mut run) = (std::mem::take(&mut s.order), std::mem::take(&mut s.run));
            for group in order.chunk_by(|a, b| a.0 == b.0) {
                s.idx.clear();
                s.idx.extend(group.iter().map(|&(_, i)| i));
                run.select(&s.all, &s.idx);
                self.answer(group[0].0, hs, &run, s, k, out);
            }
            (s.order, s.run) = (order, run);
        });
    }

    /// The L2S head's dot products plus the re-scored rows.
    fn cost(&self, h: &[f32]) -> usize {
        self.l2s.cost(h) + RESCORED
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    #[test]
    fn int8_rows_answer_like_the_f32_head() {
        let (v, d, r) = (400, 24, 5);
        let full = FullHead::new(&values(v * d, 1), &values(v, 2), d).unwrap();
        // Five clusters of 120 candidates each (overlapping), one of 3 (below k: falls back).
        let mut candidates: Vec<Vec<u32>> = (0..r as u32 - 1)
            .map(|t| (0..120).map(|j| (t * 70 + j * 3) % v as u32).collect())
            .collect();
        candidates.push(vec![1, 2, 3]);
        let l2s = L2sHead::new("l2s", &full, &values(r * d, 3), &candidates).unwrap();
        let head = L2sInt8Head::new(l2s.clone(), &full).unwrap();
        assert_eq!(head.name(), "l2s+int8");
        assert_eq!(L2sInt8Head::parse_name("l2s-b200+int8"), Some("l2s-b200"));
        assert_eq!(L2sInt8Head::parse_name("+int8"), None);
        let hs = values(60 * d, 4);
        let mut batch = vec![TopK::new(5); 60];
        head.top_k_batch(&hs, 5, &mut batch);
        let mut agree = 0;
        for (h, b) in hs.chunks(d).zip(&batch) {
            let want: Vec<u32> = l2s.top_k(h, 5).unwrap().iter().map(|s| s.id).collect();
            let got: Vec<u32> = head.top_k(h, 5).unwrap().iter().map(|s| s.id).collect();
            let batched: Vec<u32> = b.as_slice().iter().map(|s| s.id).collect();
            assert_eq!(got, batched, "batched and single answers agree");
            agree += (got == want) as usize;
        }
        assert!(
            agree >= 55,
            "top-5 as the f32 head on {agree} of 60 contexts"
        );
    }
}
