//! The packed matrix: a row-major matrix `[n_rows, d]` repacked into panels of [`PANEL`] rows,
//! scored against one context (batch 1, memory-bound: the matrix streams once) or a batch of
//! contexts (compute-bound: a 32-row tile stays in L1 while every context is scored against it).
//!
//! Panel layout: `panels[p][j][r]` = `W[16p + r][j]`, so one 16-lane vector holds one input
//! dimension of 16 rows and a dot product needs no horizontal sums. Rows past the end are zero
//! with bias −∞, so they never enter a top-k.

use super::{Simd, PANEL};
use crate::topk::TopK;

/// Panels scored together at batch 1 (64 rows in flight).
const GROUP: usize = 4;
/// Contexts per tile at batch > 1.
/// 2 panels × 12 contexts = 24 of the 32 AVX-512 registers, and the 32-row tile of W (32 KB at
/// d = 256) stays in L1. Measured on the translator (issue 16): 2–4% more words/s than 2 × 8;
/// 4 panels × 6 was 4% faster at beam 5 but 2% slower at beam 1, its tile spilling to L2.
const QTILE: usize = 12;
/// Panels per tile at batch > 1.
const TILE_PANELS: usize = 2;

/// A matrix `[n_rows, d]` with a bias `[n_rows]` and optional row → word-id map, packed for
/// scoring. Heads that screen (L2S, DS experts) keep one of these per candidate set.
#[derive(Debug, Clone)]
pub struct PackedMatrix {
    d: usize,
    n_rows: usize,
    /// [n_panels, d, PANEL]
    panels: Vec<f32>,
    /// [n_panels * PANEL]; −∞ on padding rows
    bias: Vec<f32>,
    /// [n_rows]; `None` = row i is word i
    ids: Option<Vec<u32>>,
    simd: Simd,
}

impl PackedMatrix {
    /// Packs row-major `rows` `[n, d]` with `bias` `[n]`. `ids` maps row → word id.
    /// Lengths are the caller's contract (checked by the head that builds it).
    pub fn new(rows: &[f32], bias: &[f32], d: usize, ids: Option<Vec<u32>>) -> Self {
        assert!(d > 0 && rows.len().is_multiple_of(d), "rows must be [n, d]");
        let n_rows = rows.len() / d;
        assert_eq!(bias.len(), n_rows, "bias must be [n]");
        if let Some(ids) = &ids {
            assert_eq!(ids.len(), n_rows, "ids must be [n]");
        }
        let n_panels = n_rows.div_ceil(PANEL);
        let mut panels = vec![0.0f32; n_panels * d * PANEL];
        let mut padded_bias = vec![f32::NEG_INFINITY; n_panels * PANEL];
        for i in 0..n_rows {
            let (p, r) = (i / PANEL, i % PANEL);
            for j in 0..d {
                panels[(p * d + j) * PANEL + r] = rows[i * d + j];
            }
            padded_bias[i] = bias[i];
        }
        PackedMatrix {
            d,
            n_rows,
            panels,
            bias: padded_bias,
            ids,
            simd: Simd::detect(),
        }
    }

    pub fn dim(&self) -> usize {
        self.d
    }

    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    fn n_panels(&self) -> usize {
        self.n_rows.div_ceil(PANEL)
    }

    /// Bytes of weights streamed by one batch-1 query.
    pub fn bytes(&self) -> usize {
        self.panels.len() * 4
    }

    /// Word id of row `row`.
    #[inline]
    pub fn id(&self, row: usize) -> u32 {
        match &self.ids {
            Some(ids) => ids[row],
            None => row as u32,
        }
    }

    /// Row `i` of the original matrix `[d]` (unpacked).
    pub fn row(&self, i: usize) -> Vec<f32> {
        let (p, r) = (i / PANEL, i % PANEL);
        (0..self.d)
            .map(|j| self.panels[(p * self.d + j) * PANEL + r])
            .collect()
    }

    /// Bias of row `i`.
    pub fn bias(&self, i: usize) -> f32 {
        self.bias[i]
    }

    /// A new packed matrix of the rows `rows` (in that order), each mapped to its word id.
    pub fn gather(&self, rows: &[u32]) -> PackedMatrix {
        let mut w = Vec::with_capacity(rows.len() * self.d);
        let mut b = Vec::with_capacity(rows.len());
        for &r in rows {
            w.extend(self.row(r as usize));
            b.push(self.bias[r as usize]);
        }
        let ids = rows.iter().map(|&r| self.id(r as usize)).collect();
        PackedMatrix::new(&w, &b, self.d, Some(ids))
    }

    /// The highest-scoring row `W[i]·h + b[i]` and its logit (the first on ties).
    pub fn argmax(&self, h: &[f32]) -> (usize, f32) {
        let mut best = (0, f32::NEG_INFINITY);
        self.for_each_group(h, |base, logits| {
            for (r, &l) in logits.iter().enumerate() {
                if l > best.1 {
                    best = (base + r, l);
                }
            }
        });
        best
    }

    /// A cheap content hash (FNV-1a over the packed weights and bias): heads record the hash of
    /// the output layer they were trained for, so a head is never served with another model.
    pub fn fingerprint(&self) -> u64 {
        let mut h: u64 = 0xcbf29ce484222325;
        for x in self.panels.iter().chain(&self.bias[..self.n_rows]) {
            h ^= x.to_bits() as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        h ^ (self.n_rows as u64) << 32 ^ self.d as u64
    }

    /// Scores of panels `first..first+count` (count ≤ GROUP) against `h`, without bias, into `out`.
    #[inline]
    fn group_scores(&self, h: &[f32], first: usize, count: usize, out: &mut [f32; GROUP * PANEL]) {
        let p = &self.panels[first * self.d * PANEL..(first + count) * self.d * PANEL];
        match self.simd {
            // SAFETY: the variant was chosen after detecting the CPU feature.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => unsafe { avx512::group_scores(p, self.d, h, count, out) },
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => unsafe { group_scores_avx2(p, self.d, h, count, out) },
            Simd::Portable => group_scores_portable(p, self.d, h, count, out),
        }
    }

    /// Scores `h` against every row, 64 rows at a time: `f(first_row, logits)` with the bias
    /// added (padding rows come out as −∞).
    #[inline(always)]
    fn for_each_group(&self, h: &[f32], mut f: impl FnMut(usize, &[f32])) {
        debug_assert_eq!(h.len(), self.d);
        let mut buf = [0.0f32; GROUP * PANEL];
        let n_panels = self.n_panels();
        let mut first = 0;
        while first < n_panels {
            let count = GROUP.min(n_panels - first);
            self.group_scores(h, first, count, &mut buf);
            let base = first * PANEL;
            let scores = &mut buf[..count * PANEL];
            for (s, b) in scores.iter_mut().zip(&self.bias[base..]) {
                *s += b;
            }
            f(base, scores);
            first += count;
        }
    }

    /// Offers every row's logit `W[i]·h + b[i]` to `out` (which the caller has reset).
    pub fn scan_into(&self, h: &[f32], out: &mut TopK) {
        self.for_each_group(h, |base, logits| {
            let thr = out.threshold();
            for (r, &logit) in logits.iter().enumerate() {
                if logit > thr {
                    out.push(self.id(base + r), logit);
                }
            }
        });
    }

    /// `f(row, logit)` for every real row (padding skipped).
    pub fn for_each_logit(&self, h: &[f32], mut f: impl FnMut(usize, f32)) {
        let n = self.n_rows;
        self.for_each_group(h, |base, logits| {
            for (r, &l) in logits.iter().enumerate().take(n.saturating_sub(base)) {
                f(base + r, l);
            }
        });
    }

    /// All logits in row order: `out[i] = W[i]·h + b[i]`, `out` is `[n_rows]`.
    pub fn logits_into(&self, h: &[f32], out: &mut [f32]) {
        debug_assert_eq!(out.len(), self.n_rows);
        self.for_each_group(h, |base, logits| {
            let end = (base + logits.len()).min(self.n_rows);
            out[base..end].copy_from_slice(&logits[..end - base]);
        });
    }

    /// Batched product: `out[q][i] = W[i]·hs[q] + b[i]` for `hs` `[n, d]` row-major and `out`
    /// `[n, n_rows]` row-major — the matrix product of the engines' layers (a 32-row tile of
    /// `W` stays in L1 while every context is scored against it).
    pub fn logits_batch(&self, hs: &[f32], out: &mut [f32]) {
        let (d, rows) = (self.d, self.n_rows);
        let n = hs.len() / d;
        debug_assert_eq!(hs.len(), n * d);
        debug_assert_eq!(out.len(), n * rows);
        self.for_each_tile(hs, |q, base, scores| {
            let end = (base + scores.len()).min(rows);
            let dst = &mut out[q * rows + base..q * rows + end];
            for ((o, s), b) in dst.iter_mut().zip(scores).zip(&self.bias[base..]) {
                *o = s + b;
            }
        });
    }

    /// [`Self::logits_batch`] over rows `first..n_rows` only: `out` is `[n, n_rows − first]`.
    /// Scoring starts at `first`'s panel, so the rows before it cost at most one panel.
    pub fn logits_batch_from(&self, first: usize, hs: &[f32], out: &mut [f32]) {
        let (d, rows) = (self.d, self.n_rows);
        let width = rows.saturating_sub(first);
        let n = hs.len() / d;
        debug_assert_eq!(out.len(), n * width);
        self.for_each_tile_from(first / PANEL, hs, |q, base, scores| {
            for (r, (s, b)) in scores.iter().zip(&self.bias[base..]).enumerate() {
                let row = base + r;
                if row >= first && row < rows {
                    out[q * width + row - first] = s + b;
                }
            }
        });
    }

    /// Appends one row `[d]` with its bias, as word `id`.
    pub fn push_row(&mut self, row: &[f32], bias: f32, id: u32) {
        assert_eq!(row.len(), self.d, "a row must be [d]");
        let (p, r) = (self.n_rows / PANEL, self.n_rows % PANEL);
        if r == 0 {
            self.panels.resize((p + 1) * self.d * PANEL, 0.0);
            self.bias.resize((p + 1) * PANEL, f32::NEG_INFINITY);
        }
        for (j, &x) in row.iter().enumerate() {
            self.panels[(p * self.d + j) * PANEL + r] = x;
        }
        self.bias[self.n_rows] = bias;
        if self.ids.is_none() && id as usize != self.n_rows {
            self.ids = Some((0..self.n_rows as u32).collect());
        }
        if let Some(ids) = &mut self.ids {
            ids.push(id);
        }
        self.n_rows += 1;
    }

    /// Keeps the first `n` rows (padding rows are zero with bias −∞ again).
    pub fn truncate(&mut self, n: usize) {
        if n >= self.n_rows {
            return;
        }
        for i in n..self.n_rows {
            let (p, r) = (i / PANEL, i % PANEL);
            for j in 0..self.d {
                self.panels[(p * self.d + j) * PANEL + r] = 0.0;
            }
            self.bias[i] = f32::NEG_INFINITY;
        }
        self.n_rows = n;
        let n_panels = self.n_panels();
        self.panels.truncate(n_panels * self.d * PANEL);
        self.bias.truncate(n_panels * PANEL);
        if let Some(ids) = &mut self.ids {
            ids.truncate(n);
        }
    }

    /// `f(query, first row, scores without bias)` for every tile of 1–2 panels × ≤ 8 queries.
    fn for_each_tile(&self, hs: &[f32], f: impl FnMut(usize, usize, &[f32])) {
        self.for_each_tile_from(0, hs, f)
    }

    /// [`Self::for_each_tile`] from panel `first` on.
    fn for_each_tile_from(
        &self,
        first: usize,
        hs: &[f32],
        mut f: impl FnMut(usize, usize, &[f32]),
    ) {
        let d = self.d;
        let n = hs.len() / d;
        let mut tile = [[0.0f32; TILE_PANELS * PANEL]; QTILE];
        let n_panels = self.n_panels();
        let mut p = first;
        while p < n_panels {
            let np = TILE_PANELS.min(n_panels - p);
            let w = &self.panels[p * d * PANEL..(p + np) * d * PANEL];
            let mut q = 0;
            while q < n {
                let nq = QTILE.min(n - q);
                let h = &hs[q * d..(q + nq) * d];
                match self.simd {
                    // SAFETY: the variant was chosen after detecting the CPU feature.
                    #[cfg(target_arch = "x86_64")]
                    Simd::Avx512 => unsafe { avx512::tile_scores(w, d, np, h, nq, &mut tile) },
                    #[cfg(target_arch = "x86_64")]
                    Simd::Avx2 => unsafe { tile_scores_avx2(w, d, np, h, nq, &mut tile) },
                    Simd::Portable => tile_scores_portable(w, d, np, h, nq, &mut tile),
                }
                for (qi, scores) in tile[..nq].iter().enumerate() {
                    f(q + qi, p * PANEL, &scores[..np * PANEL]);
                }
                q += nq;
            }
            p += np;
        }
    }

    /// Batched scan: `hs` is `[n, d]` row-major, `outs[q]` receives query q's candidates.
    pub fn scan_batch(&self, hs: &[f32], outs: &mut [TopK]) {
        debug_assert_eq!(hs.len(), outs.len() * self.d);
        self.for_each_tile(hs, |q, base, scores| {
            let out = &mut outs[q];
            let thr = out.threshold();
            for (r, s) in scores.iter().enumerate() {
                let logit = s + self.bias[base + r];
                if logit > thr {
                    out.push(self.id(base + r), logit);
                }
            }
        });
    }
}

/// One panel `[d, PANEL]` against one context `[d]`: 16 scores, no horizontal sums.
#[inline(always)]
fn panel_scores(panel: &[f32], h: &[f32]) -> [f32; PANEL] {
    let mut acc = [0.0f32; PANEL];
    for (col, &hj) in panel.chunks_exact(PANEL).zip(h) {
        for (a, w) in acc.iter_mut().zip(col) {
            *a += w * hj;
        }
    }
    acc
}

/// Portable batch-1 group kernel (auto-vectorised for whatever the target allows).
#[inline(always)]
fn group_scores_portable(
    p: &[f32],
    d: usize,
    h: &[f32],
    count: usize,
    out: &mut [f32; GROUP * PANEL],
) {
    for (g, panel) in p.chunks_exact(d * PANEL).take(count).enumerate() {
        out[g * PANEL..(g + 1) * PANEL].copy_from_slice(&panel_scores(panel, h));
    }
}

/// Portable batch tile kernel: `np` panels (≤ `TILE_PANELS`) × `nq` queries (≤ `QTILE`).
#[inline(always)]
fn tile_scores_portable(
    w: &[f32],
    d: usize,
    np: usize,
    hs: &[f32],
    nq: usize,
    tile: &mut [[f32; TILE_PANELS * PANEL]; QTILE],
) {
    for (h, row) in hs.chunks_exact(d).zip(tile.iter_mut()).take(nq) {
        for (g, panel) in w.chunks_exact(d * PANEL).take(np).enumerate() {
            row[g * PANEL..(g + 1) * PANEL].copy_from_slice(&panel_scores(panel, h));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn group_scores_avx2(
    p: &[f32],
    d: usize,
    h: &[f32],
    count: usize,
    out: &mut [f32; GROUP * PANEL],
) {
    group_scores_portable(p, d, h, count, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_scores_avx2(
    w: &[f32],
    d: usize,
    np: usize,
    hs: &[f32],
    nq: usize,
    tile: &mut [[f32; TILE_PANELS * PANEL]; QTILE],
) {
    tile_scores_portable(w, d, np, hs, nq, tile)
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{GROUP, PANEL, QTILE, TILE_PANELS};
    use std::arch::x86_64::*;

    /// Batch 1: `count` panels at once, one accumulator each, `h[j]` broadcast.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn group_scores(
        p: &[f32],
        d: usize,
        h: &[f32],
        count: usize,
        out: &mut [f32; GROUP * PANEL],
    ) {
        match count {
            4 => group::<4>(p, d, h, out),
            3 => group::<3>(p, d, h, out),
            2 => group::<2>(p, d, h, out),
            _ => group::<1>(p, d, h, out),
        }
    }

    #[inline(always)]
    unsafe fn group<const G: usize>(
        p: &[f32],
        d: usize,
        h: &[f32],
        out: &mut [f32; GROUP * PANEL],
    ) {
        debug_assert!(p.len() >= G * d * PANEL && h.len() >= d);
        let pp = p.as_ptr();
        let mut acc = [_mm512_setzero_ps(); G];
        for j in 0..d {
            let hj = _mm512_set1_ps(*h.get_unchecked(j));
            for (g, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(_mm512_loadu_ps(pp.add((g * d + j) * PANEL)), hj, *a);
            }
        }
        for (g, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.as_mut_ptr().add(g * PANEL), *a);
        }
    }

    /// Batch: `np` (≤ `TILE_PANELS`) panels × `nq` (≤ `QTILE`) contexts, up to 24 accumulators.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn tile_scores(
        w: &[f32],
        d: usize,
        np: usize,
        hs: &[f32],
        nq: usize,
        tile: &mut [[f32; TILE_PANELS * PANEL]; QTILE],
    ) {
        macro_rules! dispatch {
            ($($q:literal)*) => {
                match (np, nq) {
                    $((2, $q) => tile_kernel::<$q, 2>(w, d, hs, tile),
                      (_, $q) => tile_kernel::<$q, 1>(w, d, hs, tile),)*
                    _ => unreachable!("nq is in 1..=QTILE"),
                }
            };
        }
        dispatch!(1 2 3 4 5 6 7 8 9 10 11 12)
    }

    #[inline(always)]
    unsafe fn tile_kernel<const Q: usize, const P: usize>(
        w: &[f32],
        d: usize,
        hs: &[f32],
        tile: &mut [[f32; TILE_PANELS * PANEL]; QTILE],
    ) {
        debug_assert!(w.len() >= P * d * PANEL && hs.len() >= Q * d);
        let wp = w.as_ptr();
        let hp = hs.as_ptr();
        let mut acc = [[_mm512_setzero_ps(); P]; Q];
        for j in 0..d {
            let mut wv = [_mm512_setzero_ps(); P];
            for (g, v) in wv.iter_mut().enumerate() {
                *v = _mm512_loadu_ps(wp.add((g * d + j) * PANEL));
            }
            for (q, row) in acc.iter_mut().enumerate() {
                let b = _mm512_set1_ps(*hp.add(q * d + j));
                for (g, a) in row.iter_mut().enumerate() {
                    *a = _mm512_fmadd_ps(wv[g], b, *a);
                }
            }
        }
        for (q, row) in acc.iter().enumerate() {
            for (g, a) in row.iter().enumerate() {
                _mm512_storeu_ps(tile[q].as_mut_ptr().add(g * PANEL), *a);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{scores_naive, seeded_values as values};

    fn check(n: usize, d: usize, simd: Option<Simd>) {
        let w = values(n * d, 1);
        let b = values(n, 2);
        let mut m = PackedMatrix::new(&w, &b, d, None);
        if let Some(s) = simd {
            m.simd = s;
        }
        let hs = values(11 * d, 3);
        let mut want = vec![0.0; n];
        let mut got = vec![0.0; n];
        for h in hs.chunks(d) {
            scores_naive(&w, &b, h, &mut want);
            m.logits_into(h, &mut got);
            for (a, b) in want.iter().zip(&got) {
                assert!((a - b).abs() < 1e-4, "{a} vs {b}");
            }
        }
        // top-k: batch 1 and batched agree with a sort of the naive scores.
        let k = 5.min(n);
        let mut b1 = vec![TopK::new(k); 11];
        for (h, t) in hs.chunks(d).zip(b1.iter_mut()) {
            m.scan_into(h, t);
        }
        let mut bn = vec![TopK::new(k); 11];
        m.scan_batch(&hs, &mut bn);
        let mut batch = vec![0.0; 11 * n];
        m.logits_batch(&hs, &mut batch);
        for (h, row) in hs.chunks(d).zip(batch.chunks(n)) {
            scores_naive(&w, &b, h, &mut want);
            for (a, b) in want.iter().zip(row) {
                assert!((a - b).abs() < 1e-4, "batched {a} vs {b}");
            }
        }
        for (q, h) in hs.chunks(d).enumerate() {
            scores_naive(&w, &b, h, &mut want);
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.sort_by(|&x, &y| want[y as usize].total_cmp(&want[x as usize]));
            let ids1: Vec<u32> = b1[q].ids().collect();
            let idsn: Vec<u32> = bn[q].ids().collect();
            assert_eq!(ids1, &order[..k]);
            assert_eq!(idsn, &order[..k]);
        }
    }

    #[test]
    fn optimized_kernels_match_the_naive_reference() {
        // Odd and even panel counts (tiles of 1 and 2 panels); 11 contexts, a partial tile.
        for (n, d) in [(1, 1), (15, 7), (16, 16), (100, 33), (257, 200)] {
            check(n, d, None);
            check(n, d, Some(Simd::Portable));
            #[cfg(target_arch = "x86_64")]
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                check(n, d, Some(Simd::Avx2));
            }
        }
    }

    #[test]
    fn ids_map_rows_to_words() {
        let w = vec![1.0, 0.0, 0.0, 1.0, 0.5, 0.5];
        let m = PackedMatrix::new(&w, &[0.0; 3], 2, Some(vec![7, 3, 9]));
        let mut t = TopK::new(2);
        m.scan_into(&[0.0, 2.0], &mut t);
        assert_eq!(t.ids().collect::<Vec<_>>(), vec![3, 9]);
    }

    /// A matrix grown row by row (and cut back) scores as one packed from the same rows, and
    /// `logits_batch_from` gives the tail of `logits_batch`.
    #[test]
    fn grows_row_by_row_and_scores_a_tail() {
        let (n, d) = (37, 9);
        let w = values(n * d, 4);
        let b = values(n, 5);
        let ids: Vec<u32> = (0..n as u32).map(|i| 100 + i).collect();
        let mut grown = PackedMatrix::new(&[], &[], d, Some(Vec::new()));
        for i in 0..n + 5 {
            let r = i % n;
            grown.push_row(&w[r * d..(r + 1) * d], b[r], ids[r]);
        }
        grown.truncate(n);
        let whole = PackedMatrix::new(&w, &b, d, Some(ids.clone()));
        assert_eq!(grown.n_rows(), n);
        assert_eq!(grown.fingerprint(), whole.fingerprint());
        assert_eq!((grown.id(5), grown.bytes()), (105, whole.bytes()));
        let hs = values(13 * d, 6);
        let mut all = vec![0.0; 13 * n];
        whole.logits_batch(&hs, &mut all);
        for first in [0, 1, 16, 20, 36, 37] {
            let width = n - first;
            let mut tail = vec![0.0; 13 * width];
            grown.logits_batch_from(first, &hs, &mut tail);
            for q in 0..13 {
                assert_eq!(
                    &tail[q * width..(q + 1) * width],
                    &all[q * n + first..(q + 1) * n]
                );
            }
        }
        // Rows pushed in id order keep the identity map.
        let mut plain = PackedMatrix::new(&[], &[], d, None);
        plain.push_row(&w[..d], b[0], 0);
        assert!(plain.ids.is_none());
        plain.push_row(&w[..d], b[0], 7);
        assert_eq!((plain.id(0), plain.id(1)), (0, 7));
    }
}
