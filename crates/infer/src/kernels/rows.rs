//! Exact logits for rows picked per query (the candidates of the graph, tree, hashing and
//! preview heads), which no packed matrix holds: row-major rows, four at a time, with the
//! widest dot product the CPU has.

use std::ops::Range;

use super::{dot, PackedMatrix, Simd};
use crate::topk::TopK;

/// Rows of the output layer (in id order or any other), scored by the list.
///
/// Rows four at a time, with the widest dot product the CPU has (AVX-512 or AVX2+FMA, detected
/// once; [`crate::kernels::dot`] otherwise, which a generic build compiles to SSE2; set
/// `FASTSOFTMAX_PORTABLE=1` to force it), prefetching the rows of the candidates a few places
/// ahead, since listed rows lie scattered over the layer. Logits agree with the packed full
/// softmax up to the order of summation.
#[derive(Debug, Clone, PartialEq)]
pub struct ExactRows {
    d: usize,
    /// `[n, d]` row-major.
    weights: Vec<f32>,
    /// `[n]`
    bias: Vec<f32>,
    simd: Simd,
}

/// How many candidates ahead rows are prefetched.
const PREFETCH_AHEAD: usize = 4;

impl ExactRows {
    /// The rows of `m` (an output layer, [`crate::FullHead::matrix`]) in row order, or in
    /// `order` (`[n]` row indices).
    pub fn new(m: &PackedMatrix, order: Option<&[u32]>) -> Self {
        let ids: Vec<usize> = match order {
            Some(o) => o.iter().map(|&i| i as usize).collect(),
            None => (0..m.n_rows()).collect(),
        };
        ExactRows {
            d: m.dim(),
            weights: ids.iter().flat_map(|&i| m.row(i)).collect(),
            bias: ids.iter().map(|&i| m.bias(i)).collect(),
            simd: Simd::detect(),
        }
    }

    /// Row `r` (`[d]`) and its bias.
    pub fn row(&self, r: usize) -> (&[f32], f32) {
        (&self.weights[r * self.d..(r + 1) * self.d], self.bias[r])
    }

    pub fn dim(&self) -> usize {
        self.d
    }

    pub fn len(&self) -> usize {
        self.bias.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bias.is_empty()
    }

    /// Offers `out` the logit of every row `r` of `rows`, as word `r`.
    pub fn push_rows(&self, rows: &[u32], h: &[f32], out: &mut TopK) {
        match self.simd {
            // SAFETY: the variant was chosen after detecting the CPU features.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => unsafe { self.rows_avx512(rows, h, out) },
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => unsafe { self.rows_avx2(rows, h, out) },
            Simd::Portable => self.scan_rows(rows, h, out, |w, h| w.map(|w| dot(w, h)), dot),
        }
    }

    /// Offers `out` the logit of every row of `range`, row `r` as word `ids[r]`.
    pub fn push_range(&self, range: Range<usize>, ids: &[u32], h: &[f32], out: &mut TopK) {
        match self.simd {
            // SAFETY: the variant was chosen after detecting the CPU features.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => unsafe { self.range_avx512(range, ids, h, out) },
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => unsafe { self.range_avx2(range, ids, h, out) },
            Simd::Portable => self.scan_range(range, ids, h, out, |w, h| w.map(|w| dot(w, h)), dot),
        }
    }

    /// The loop of every path: rows four at a time through `dot4`, the rest through `dot`.
    #[inline(always)]
    fn scan_rows(
        &self,
        rows: &[u32],
        h: &[f32],
        out: &mut TopK,
        dot4: impl Fn([&[f32]; 4], &[f32]) -> [f32; 4],
        dot: impl Fn(&[f32], &[f32]) -> f32,
    ) {
        let d = self.d;
        let h = &h[..d];
        let row = |r: u32| &self.weights[r as usize * d..(r as usize + 1) * d];
        let mut quads = rows.chunks_exact(4);
        for (q, quad) in (&mut quads).enumerate() {
            for &next in rows.iter().skip(4 * q + PREFETCH_AHEAD).take(4) {
                prefetch(row(next));
            }
            let logits = dot4([row(quad[0]), row(quad[1]), row(quad[2]), row(quad[3])], h);
            for (&r, l) in quad.iter().zip(logits) {
                out.push(r, l + self.bias[r as usize]);
            }
        }
        for &r in quads.remainder() {
            out.push(r, dot(row(r), h) + self.bias[r as usize]);
        }
    }

    /// [`Self::scan_rows`] for the contiguous rows of `range`.
    #[inline(always)]
    fn scan_range(
        &self,
        range: Range<usize>,
        ids: &[u32],
        h: &[f32],
        out: &mut TopK,
        dot4: impl Fn([&[f32]; 4], &[f32]) -> [f32; 4],
        dot: impl Fn(&[f32], &[f32]) -> f32,
    ) {
        let d = self.d;
        let h = &h[..d];
        let mut rows = self.weights[range.start * d..range.end * d].chunks_exact(4 * d);
        let mut r = range.start;
        for quad in &mut rows {
            let (w0, rest) = quad.split_at(d);
            let (w1, rest) = rest.split_at(d);
            let (w2, w3) = rest.split_at(d);
            for (j, l) in dot4([w0, w1, w2, w3], h).into_iter().enumerate() {
                out.push(ids[r + j], l + self.bias[r + j]);
            }
            r += 4;
        }
        for w in rows.remainder().chunks_exact(d) {
            out.push(ids[r], dot(w, h) + self.bias[r]);
            r += 1;
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn rows_avx512(&self, rows: &[u32], h: &[f32], out: &mut TopK) {
        self.scan_rows(
            rows,
            h,
            out,
            |w, h| unsafe { dot4_avx512(w, h) },
            |a, b| unsafe { dot_avx512(a, b) },
        )
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows_avx2(&self, rows: &[u32], h: &[f32], out: &mut TopK) {
        let dot = |a: &[f32], b: &[f32]| unsafe { dot_avx2(a, b) };
        self.scan_rows(rows, h, out, |w, h| w.map(|w| dot(w, h)), dot)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn range_avx512(&self, range: Range<usize>, ids: &[u32], h: &[f32], out: &mut TopK) {
        self.scan_range(
            range,
            ids,
            h,
            out,
            |w, h| unsafe { dot4_avx512(w, h) },
            |a, b| unsafe { dot_avx512(a, b) },
        )
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn range_avx2(&self, range: Range<usize>, ids: &[u32], h: &[f32], out: &mut TopK) {
        let dot = |a: &[f32], b: &[f32]| unsafe { dot_avx2(a, b) };
        self.scan_range(range, ids, h, out, |w, h| w.map(|w| dot(w, h)), dot)
    }
}

/// Asks for the cache lines of `row` ahead of use (a hint; a no-op off x86-64).
#[inline(always)]
pub(crate) fn prefetch(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = row.as_ptr_range();
        let mut a = p.start as usize & !63;
        while a < p.end as usize {
            // SAFETY: a prefetch never faults; the address lies in `row`'s cache lines.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(a as *const i8) };
            a += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// `a · b` with two 16-lane FMA accumulators and a masked tail.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    debug_assert_eq!(a.len(), b.len());
    let (n, pa, pb) = (a.len(), a.as_ptr(), b.as_ptr());
    let (mut s0, mut s1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    let mut i = 0;
    while i + 32 <= n {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(pa.add(i)), _mm512_loadu_ps(pb.add(i)), s0);
        s1 = _mm512_fmadd_ps(
            _mm512_loadu_ps(pa.add(i + 16)),
            _mm512_loadu_ps(pb.add(i + 16)),
            s1,
        );
        i += 32;
    }
    if i + 16 <= n {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(pa.add(i)), _mm512_loadu_ps(pb.add(i)), s0);
        i += 16;
    }
    if i < n {
        let m: __mmask16 = (1u16 << (n - i)) - 1;
        s1 = _mm512_fmadd_ps(
            _mm512_maskz_loadu_ps(m, pa.add(i)),
            _mm512_maskz_loadu_ps(m, pb.add(i)),
            s1,
        );
    }
    _mm512_reduce_add_ps(_mm512_add_ps(s0, s1))
}

/// Four rows `w` against one `h` (all of `h`'s length): one 16-lane FMA accumulator per row,
/// `h` loaded once for the four, and four independent chains in flight.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn dot4_avx512(w: [&[f32]; 4], h: &[f32]) -> [f32; 4] {
    use std::arch::x86_64::*;
    let n = h.len();
    debug_assert!(w.iter().all(|w| w.len() == n));
    let (p, ph) = (w.map(|w| w.as_ptr()), h.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 16 <= n {
        let hv = _mm512_loadu_ps(ph.add(i));
        for (a, p) in acc.iter_mut().zip(p) {
            *a = _mm512_fmadd_ps(_mm512_loadu_ps(p.add(i)), hv, *a);
        }
        i += 16;
    }
    if i < n {
        let m: __mmask16 = (1u16 << (n - i)) - 1;
        let hv = _mm512_maskz_loadu_ps(m, ph.add(i));
        for (a, p) in acc.iter_mut().zip(p) {
            *a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p.add(i)), hv, *a);
        }
    }
    acc.map(|a| _mm512_reduce_add_ps(a))
}

/// `a · b` with two 8-lane FMA accumulators and a scalar tail.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    debug_assert_eq!(a.len(), b.len());
    let (n, pa, pb) = (a.len(), a.as_ptr(), b.as_ptr());
    let (mut s0, mut s1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 16 <= n {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), s0);
        s1 = _mm256_fmadd_ps(
            _mm256_loadu_ps(pa.add(i + 8)),
            _mm256_loadu_ps(pb.add(i + 8)),
            s1,
        );
        i += 16;
    }
    if i + 8 <= n {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), s0);
        i += 8;
    }
    let s = _mm256_add_ps(s0, s1);
    let s = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
    let mut sum = _mm_cvtss_f32(s);
    while i < n {
        sum += a[i] * b[i];
        i += 1;
    }
    sum
}

/// A set of ids `0..n` emptied in O(1), the "seen" set of the graph, greedy and hashing heads:
/// each query opens a new epoch, and an id is in the set while its stamp equals the epoch (the
/// stamps are zeroed only when the epoch wraps).
#[derive(Debug, Default)]
pub struct Stamps {
    stamps: Vec<u32>,
    epoch: u32,
}

impl Stamps {
    /// Empties the set, for ids below `n`.
    pub fn clear(&mut self, n: usize) {
        if self.stamps.len() < n {
            self.stamps.resize(n, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamps.fill(0);
            self.epoch = 1;
        }
    }

    /// Adds `i`; whether it was new.
    #[inline]
    pub fn insert(&mut self, i: usize) -> bool {
        let stamp = &mut self.stamps[i];
        let new = *stamp != self.epoch;
        *stamp = self.epoch;
        new
    }

    /// The stamps and the epoch, for loops that mark ids without branches.
    #[inline]
    pub fn raw(&mut self) -> (&mut [u32], u32) {
        (&mut self.stamps, self.epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    #[test]
    fn exact_rows_match_the_reference_dot_on_every_path() {
        for (v, d) in [(43, 1), (43, 7), (42, 16), (41, 33), (40, 200)] {
            let (w, b) = (values(v * d, 10), values(v, 11));
            let full = PackedMatrix::new(&w, &b, d, None);
            let h = values(d, 12);
            let order: Vec<u32> = (0..v as u32).rev().collect();
            let mut rows = ExactRows::new(&full, None);
            let mut backwards = ExactRows::new(&full, Some(&order));
            let mut want = vec![0.0; v];
            crate::kernels::scores_naive(&w, &b, &h, &mut want);
            let mut paths = vec![Simd::Portable];
            #[cfg(target_arch = "x86_64")]
            {
                if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                    paths.push(Simd::Avx2);
                }
                if is_x86_feature_detected!("avx512f") {
                    paths.push(Simd::Avx512);
                }
            }
            for simd in paths {
                (rows.simd, backwards.simd) = (simd, simd);
                let mut a = TopK::new(v);
                rows.push_rows(&order, &h, &mut a);
                let mut b = TopK::new(v);
                backwards.push_range(0..v, &order, &h, &mut b);
                for out in [a, b] {
                    assert_eq!(out.as_slice().len(), v);
                    for s in out.as_slice() {
                        let w = want[s.id as usize];
                        assert!(
                            (s.logit - w).abs() < 1e-4,
                            "{simd:?} d={d}: {} vs {w}",
                            s.logit
                        );
                    }
                }
            }
        }
    }
}
