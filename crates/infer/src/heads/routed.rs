//! Route, then scan: the serving core that L2S and DS-Softmax share.
//!
//! A context `h` goes to the route (an L2S cluster, a DS expert) whose vector scores it
//! highest, and only that route's rows — one contiguous [`PackedMatrix`], ids ascending so ties
//! break as in the full head — are scanned. When `k` exceeds a route's row count the exact
//! output layer answers instead, so a head never returns fewer than `k` words.

use std::sync::Arc;

use crate::kernels::PackedMatrix;
use crate::topk::TopK;

#[derive(Debug, Clone)]
pub(crate) struct Routed {
    /// `[r, d]` route vectors (with biases): the route of `h` is `argmax_t v_t·h + b_t`.
    pub routes: PackedMatrix,
    /// `[r]` rows scanned for each route, ids = word ids, ascending.
    pub sets: Vec<PackedMatrix>,
    /// The exact output layer, used when `k` exceeds a route's row count.
    pub full: Arc<PackedMatrix>,
}

impl Routed {
    pub fn n_routes(&self) -> usize {
        self.sets.len()
    }

    pub fn route_of(&self, h: &[f32]) -> usize {
        self.routes.argmax(h).0
    }

    /// The route of `h` and its softmax weight `exp(s_t) / Σ_t' exp(s_t')`, in one pass
    /// (running maximum and rescaled sum), without a buffer.
    pub fn route_and_weight(&self, h: &[f32]) -> (usize, f32) {
        let (mut best, mut max, mut sum) = (0usize, f32::NEG_INFINITY, 0.0f32);
        self.routes.for_each_logit(h, |t, s| {
            if s > max {
                sum = sum * (max - s).exp() + 1.0;
                (best, max) = (t, s);
            } else {
                sum += (s - max).exp();
            }
        });
        (best, 1.0 / sum)
    }

    /// Best `k` of route `t`'s rows for `h` (or of all words, when `k` exceeds them).
    pub fn scan_route(&self, t: usize, h: &[f32], k: usize, out: &mut TopK) {
        out.reset(k);
        let set = &self.sets[t];
        if set.n_rows() >= k {
            set.scan_into(h, out);
        } else {
            self.full.scan_into(h, out);
        }
    }

    /// Groups the batch by route so each route's rows stream once for all its queries.
    /// `routed[i]` is the route of context `i` (`hs` is `[n, d]`, `out` is `[n]`).
    pub fn scan_batch(&self, hs: &[f32], routed: &[u32], k: usize, out: &mut [TopK]) {
        let d = self.routes.dim();
        let n = out.len();
        let mut order: Vec<(u32, u32)> = routed
            .iter()
            .enumerate()
            .map(|(i, &t)| (t, i as u32))
            .collect();
        order.sort_unstable();
        let mut gathered = Vec::with_capacity(n * d);
        let mut group: Vec<TopK> = Vec::with_capacity(n);
        for run in order.chunk_by(|a, b| a.0 == b.0) {
            let set = &self.sets[run[0].0 as usize];
            let matrix = if set.n_rows() >= k { set } else { &*self.full };
            if run.len() == 1 {
                let i = run[0].1 as usize;
                out[i].reset(k);
                matrix.scan_into(&hs[i * d..(i + 1) * d], &mut out[i]);
                continue;
            }
            gathered.clear();
            group.clear();
            for &(_, i) in run {
                let i = i as usize;
                gathered.extend_from_slice(&hs[i * d..(i + 1) * d]);
                let mut t = std::mem::take(&mut out[i]);
                t.reset(k);
                group.push(t);
            }
            matrix.scan_batch(&gathered, &mut group);
            for (&(_, i), t) in run.iter().zip(group.drain(..)) {
                out[i as usize] = t;
            }
        }
    }

    /// Dot products spent on `h`: every route vector, then the route's rows.
    pub fn cost(&self, h: &[f32]) -> usize {
        self.n_routes() + self.sets[self.route_of(h)].n_rows()
    }

    /// Word ids of route `t`'s rows, ascending.
    pub fn ids(&self, t: usize) -> Vec<u32> {
        let set = &self.sets[t];
        (0..set.n_rows()).map(|i| set.id(i)).collect()
    }
}
