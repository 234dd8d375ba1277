//! int16 matrix products with one scale per matrix (Devlin 2017, as the OpenNMT WNMT-2018
//! engine uses them): half the bytes of f32 and, with AVX-512 BW's `vpmaddwd`, 32
//! multiply-adds per instruction against an f32 FMA's 16, at more precision than int8.
//!
//! Layout: panels of [`PANEL`] rows, 2 consecutive input dimensions of a row in one 32-bit lane:
//! `panels[p][j / 2][r][j % 2] = W16[16p + r][j]` (`d` padded to even with a zero).
//!
//! Scales: the matrix is stored as `W16 = round(W · L / max|W|)` and each context as
//! `round(h · L / max|h|)` (per call and context), with `L = 2^b − 1` and `b` chosen from `d` so
//! that no int32 sum can overflow: `d · L² < 2³¹` (11 bits up to d = 256, 10 up to 1024).
//! `logit_r = sum_r · (max|W| / L) · (max|h| / L) + b_r`.
//!
//! Every path sums the same integers (`vpmaddwd` is exact on these values), so the AVX-512 and
//! AVX2 kernels equal the portable one exactly.

use super::PANEL;

/// Contexts per tile (2 panels × 12 contexts = 24 of the 32 AVX-512 registers).
const QTILE: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// `vpdpwssd`: the pairs' products added into the sums in one instruction.
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
    /// `vpmaddwd` then `vpaddd`.
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// The same on 8 lanes (AVX2 alone: Zen 1–3, Intel's client cores).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Portable,
}

impl Path {
    fn detect() -> Path {
        #[cfg(target_arch = "x86_64")]
        if std::env::var_os("FASTSOFTMAX_PORTABLE").is_none() {
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                if is_x86_feature_detected!("avx512vnni") {
                    return Path::Avx512Vnni;
                }
                return Path::Avx512;
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Path::Avx2;
            }
        }
        Path::Portable
    }
}

/// The path [`Int16Matrix`] takes on this CPU.
pub(super) fn path_name() -> &'static str {
    match Path::detect() {
        #[cfg(target_arch = "x86_64")]
        Path::Avx512Vnni => "avx512-vnni",
        #[cfg(target_arch = "x86_64")]
        Path::Avx512 => "avx512bw",
        #[cfg(target_arch = "x86_64")]
        Path::Avx2 => "avx2",
        Path::Portable => "portable",
    }
}

/// A matrix `[n_rows, d]` with a bias `[n_rows]` and an optional row → word-id map, quantized
/// to int16 with one scale and packed for [`Int16Matrix::logits_batch`].
#[derive(Debug, Clone)]
pub struct Int16Matrix {
    d: usize,
    /// `d` rounded up to even.
    d2: usize,
    n_rows: usize,
    /// [n_panels, d2 / 2, PANEL, 2]
    panels: Vec<i16>,
    /// `max|W| / L`.
    inv_scale: f32,
    /// [n_panels · PANEL]; −∞ on padding rows.
    bias: Vec<f32>,
    ids: Option<Vec<u32>>,
    path: Path,
}

/// The largest magnitude `L` of a quantized value for width `d`: `d · L² < 2³¹`.
pub fn int16_levels(d: usize) -> i32 {
    let bits = (30 - (d.max(2) as f64).log2().ceil() as i32) / 2;
    (1 << bits.clamp(1, 15)) - 1
}

/// Row-major `rows` `[n, d]` quantized with one scale: the int16 values and `max|W| / L`.
pub fn quantize_matrix16(rows: &[f32], d: usize) -> (Vec<i16>, f32) {
    let levels = int16_levels(d) as f32;
    let max = rows.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let s = if max > 0.0 { levels / max } else { 1.0 };
    let q = rows
        .iter()
        .map(|&x| (x * s).round_ties_even().clamp(-levels, levels) as i16)
        .collect();
    (q, if max > 0.0 { max / levels } else { 0.0 })
}

impl Int16Matrix {
    /// Quantizes row-major `rows` `[n, d]` with `bias` `[n]`; `ids` maps row → word id.
    pub fn new(rows: &[f32], bias: &[f32], d: usize, ids: Option<Vec<u32>>) -> Self {
        assert!(d > 0 && rows.len().is_multiple_of(d), "rows must be [n, d]");
        let (q, inv) = quantize_matrix16(rows, d);
        Self::from_quantized(&q, inv, bias, d, ids)
    }

    /// Packs values quantized by [`quantize_matrix16`] (`q [n, d]`, `max|W| / L`).
    pub fn from_quantized(
        q: &[i16],
        inv_scale: f32,
        bias: &[f32],
        d: usize,
        ids: Option<Vec<u32>>,
    ) -> Self {
        let n_rows = bias.len();
        assert!(d > 0 && q.len() == n_rows * d, "q must be [n, d]");
        if let Some(ids) = &ids {
            assert_eq!(ids.len(), n_rows, "ids must be [n]");
        }
        let d2 = d.div_ceil(2) * 2;
        let n_panels = n_rows.div_ceil(PANEL);
        let mut panels = vec![0i16; n_panels * d2 * PANEL];
        for r in 0..n_rows {
            let (p, lane) = (r / PANEL, r % PANEL);
            for (j, &x) in q[r * d..(r + 1) * d].iter().enumerate() {
                panels[((p * d2 / 2 + j / 2) * PANEL + lane) * 2 + j % 2] = x;
            }
        }
        let mut padded_bias = vec![f32::NEG_INFINITY; n_panels * PANEL];
        padded_bias[..n_rows].copy_from_slice(bias);
        Int16Matrix {
            d,
            d2,
            n_rows,
            panels,
            inv_scale,
            bias: padded_bias,
            ids,
            path: Path::detect(),
        }
    }

    pub fn dim(&self) -> usize {
        self.d
    }

    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Word id of row `row`.
    #[inline]
    pub fn id(&self, row: usize) -> u32 {
        match &self.ids {
            Some(ids) => ids[row],
            None => row as u32,
        }
    }

    /// A new matrix of the rows `rows` (in that order), each mapped to its word id; the values
    /// are copied, the scale kept.
    pub fn gather(&self, rows: &[u32]) -> Int16Matrix {
        let n_panels = rows.len().div_ceil(PANEL);
        let groups = self.d2 / 2;
        let mut panels = vec![0i16; n_panels * self.d2 * PANEL];
        let mut bias = vec![f32::NEG_INFINITY; n_panels * PANEL];
        for (i, &r) in rows.iter().enumerate() {
            let r = r as usize;
            let (sp, sl, dp, dl) = (r / PANEL, r % PANEL, i / PANEL, i % PANEL);
            for g in 0..groups {
                let src = ((sp * groups + g) * PANEL + sl) * 2;
                let dst = ((dp * groups + g) * PANEL + dl) * 2;
                panels[dst..dst + 2].copy_from_slice(&self.panels[src..src + 2]);
            }
            bias[i] = self.bias[r];
        }
        Int16Matrix {
            d: self.d,
            d2: self.d2,
            n_rows: rows.len(),
            panels,
            inv_scale: self.inv_scale,
            bias,
            ids: Some(rows.iter().map(|&r| self.id(r as usize)).collect()),
            path: self.path,
        }
    }

    /// Contexts `hs [n, d]` as int16 padded to `d2`, and each one's `max|h| / L`.
    #[inline(always)]
    fn quantize_contexts(&self, hs: &[f32], hq: &mut Vec<i16>, inv_h: &mut Vec<f32>) {
        let levels = int16_levels(self.d) as f32;
        hq.clear();
        inv_h.clear();
        for h in hs.chunks_exact(self.d) {
            let max = h.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            let s = if max > 0.0 { levels / max } else { 1.0 };
            hq.extend(
                h.iter()
                    .map(|&x| (x * s).round_ties_even().clamp(-levels, levels) as i16),
            );
            hq.resize(hq.len() + self.d2 - self.d, 0);
            inv_h.push(if max > 0.0 { max / levels } else { 0.0 });
        }
    }

    /// Batched product: `out[q][i] ≈ W[i]·hs[q] + b[i]` for `hs [n, d]`, `out [n, n_rows]`.
    pub fn logits_batch(&self, hs: &[f32], out: &mut [f32]) {
        debug_assert_eq!(out.len() * self.d, hs.len() * self.n_rows);
        match self.path {
            // SAFETY: the paths were chosen after detecting their CPU features.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512Vnni => unsafe { avx512::logits_batch_vnni(self, hs, out) },
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { avx512::logits_batch(self, hs, out) },
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { avx2::logits_batch(self, hs, out) },
            Path::Portable => {
                let (mut hq, mut inv_h) = (Vec::new(), Vec::new());
                self.quantize_contexts(hs, &mut hq, &mut inv_h);
                self.logits_portable(&hq, &inv_h, out);
            }
        }
    }

    /// The reference: the same integer sums, one row and context at a time.
    fn logits_portable(&self, hq: &[i16], inv_h: &[f32], out: &mut [f32]) {
        let groups = self.d2 / 2;
        for (q, h) in hq.chunks_exact(self.d2).enumerate() {
            for r in 0..self.n_rows {
                let (p, lane) = (r / PANEL, r % PANEL);
                let mut acc = 0i32;
                for g in 0..groups {
                    let w = &self.panels[((p * groups + g) * PANEL + lane) * 2..][..2];
                    acc += h[2 * g] as i32 * w[0] as i32 + h[2 * g + 1] as i32 * w[1] as i32;
                }
                out[q * self.n_rows + r] = acc as f32 * (self.inv_scale * inv_h[q]) + self.bias[r];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{Int16Matrix, PANEL, QTILE};

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn logits_batch_vnni(m: &Int16Matrix, hs: &[f32], out: &mut [f32]) {
        body::<true>(m, hs, out)
    }

    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn logits_batch(m: &Int16Matrix, hs: &[f32], out: &mut [f32]) {
        body::<false>(m, hs, out)
    }

    #[inline(always)]
    unsafe fn body<const VNNI: bool>(m: &Int16Matrix, hs: &[f32], out: &mut [f32]) {
        let (mut hq, mut inv_h) = (Vec::new(), Vec::new());
        m.quantize_contexts(hs, &mut hq, &mut inv_h);
        let n = inv_h.len();
        let n_panels = m.n_rows.div_ceil(PANEL);
        let mut p = 0;
        while p < n_panels {
            let np = 2.min(n_panels - p);
            let mut q = 0;
            while q < n {
                let nq = QTILE.min(n - q);
                macro_rules! dispatch {
                    ($($q:literal)*) => {
                        match (np, nq) {
                            $((2, $q) => tile::<$q, 2, VNNI>(m, p, &hq, &inv_h, q, out),
                              (_, $q) => tile::<$q, 1, VNNI>(m, p, &hq, &inv_h, q, out),)*
                            _ => unreachable!("nq is in 1..=QTILE"),
                        }
                    };
                }
                dispatch!(1 2 3 4 5 6 7 8 9 10 11 12);
                q += nq;
            }
            p += np;
        }
    }

    /// `P` panels from panel `p` × `Q` contexts from `q0`: `vpmaddwd` sums in registers, then
    /// scaled, biased and stored 16 logits at a time (the last panel masked to the rows).
    #[inline(always)]
    unsafe fn tile<const Q: usize, const P: usize, const VNNI: bool>(
        m: &Int16Matrix,
        p: usize,
        hq: &[i16],
        inv_h: &[f32],
        q0: usize,
        out: &mut [f32],
    ) {
        let groups = m.d2 / 2;
        let wp = m.panels.as_ptr();
        let hp = hq.as_ptr().add(q0 * m.d2);
        let mut acc = [[_mm512_setzero_si512(); P]; Q];
        for g in 0..groups {
            let mut w = [_mm512_setzero_si512(); P];
            for (k, v) in w.iter_mut().enumerate() {
                *v = _mm512_loadu_si512(wp.add(((p + k) * groups + g) * PANEL * 2) as *const _);
            }
            for (qi, a) in acc.iter_mut().enumerate() {
                let x2 = std::ptr::read_unaligned(hp.add(qi * m.d2 + 2 * g) as *const i32);
                let x = _mm512_set1_epi32(x2);
                for k in 0..P {
                    a[k] = if VNNI {
                        _mm512_dpwssd_epi32(a[k], x, w[k])
                    } else {
                        _mm512_add_epi32(a[k], _mm512_madd_epi16(x, w[k]))
                    };
                }
            }
        }
        for k in 0..P {
            let first = (p + k) * PANEL;
            let bias = _mm512_loadu_ps(m.bias.as_ptr().add(first));
            let live = (m.n_rows - first).min(PANEL);
            let mask: __mmask16 = if live == PANEL {
                0xFFFF
            } else {
                (1u16 << live) - 1
            };
            for (qi, a) in acc.iter().enumerate() {
                let s = _mm512_set1_ps(m.inv_scale * inv_h[q0 + qi]);
                let logits = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[k]), s, bias);
                let dst = out.as_mut_ptr().add((q0 + qi) * m.n_rows + first);
                _mm512_mask_storeu_ps(dst, mask, logits);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{Int16Matrix, PANEL};
    use crate::kernels::store_lanes_avx2;

    /// Contexts per tile: a panel's 16 rows take 2 accumulators per context, its weights 2
    /// registers and the context one, so 6 contexts use 15 of the 16 registers.
    const QTILE: usize = 6;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn logits_batch(m: &Int16Matrix, hs: &[f32], out: &mut [f32]) {
        let (mut hq, mut inv_h) = (Vec::new(), Vec::new());
        m.quantize_contexts(hs, &mut hq, &mut inv_h);
        let n = inv_h.len();
        // Panel by panel: its weights (d2 · 32 bytes) stay in L1 while every context passes.
        for p in 0..m.n_rows.div_ceil(PANEL) {
            let mut q = 0;
            while q < n {
                let nq = QTILE.min(n - q);
                match nq {
                    6 => tile::<6>(m, p, &hq, &inv_h, q, out),
                    5 => tile::<5>(m, p, &hq, &inv_h, q, out),
                    4 => tile::<4>(m, p, &hq, &inv_h, q, out),
                    3 => tile::<3>(m, p, &hq, &inv_h, q, out),
                    2 => tile::<2>(m, p, &hq, &inv_h, q, out),
                    _ => tile::<1>(m, p, &hq, &inv_h, q, out),
                }
                q += nq;
            }
        }
    }

    /// Panel `p` × `Q` contexts from `q0`. A group's 64 bytes (2 dimensions of 16 rows) are two
    /// registers of 8 rows; `vpmaddwd` against the context's pair (repeated) leaves each row's
    /// sum of the pair in its int32 lane.
    #[inline(always)]
    unsafe fn tile<const Q: usize>(
        m: &Int16Matrix,
        p: usize,
        hq: &[i16],
        inv_h: &[f32],
        q0: usize,
        out: &mut [f32],
    ) {
        let groups = m.d2 / 2;
        let wp = m.panels.as_ptr().add(p * groups * PANEL * 2);
        let hp = hq.as_ptr().add(q0 * m.d2);
        let mut acc = [[_mm256_setzero_si256(); 2]; Q];
        for g in 0..groups {
            let base = wp.add(g * PANEL * 2);
            let w0 = _mm256_loadu_si256(base as *const __m256i);
            let w1 = _mm256_loadu_si256(base.add(16) as *const __m256i);
            for (qi, a) in acc.iter_mut().enumerate() {
                let x2 = std::ptr::read_unaligned(hp.add(qi * m.d2 + 2 * g) as *const i32);
                let x = _mm256_set1_epi32(x2);
                a[0] = _mm256_add_epi32(a[0], _mm256_madd_epi16(x, w0));
                a[1] = _mm256_add_epi32(a[1], _mm256_madd_epi16(x, w1));
            }
        }
        let first = p * PANEL;
        let live = (m.n_rows - first).min(PANEL);
        for (qi, a) in acc.iter().enumerate() {
            let s = _mm256_set1_ps(m.inv_scale * inv_h[q0 + qi]);
            for (half, sums) in a.iter().enumerate() {
                let rows = live.saturating_sub(8 * half).min(8);
                if rows == 0 {
                    break;
                }
                let r = first + 8 * half;
                let bias = _mm256_loadu_ps(m.bias.as_ptr().add(r));
                let logits = _mm256_fmadd_ps(_mm256_cvtepi32_ps(*sums), s, bias);
                store_lanes_avx2(out.as_mut_ptr().add((q0 + qi) * m.n_rows + r), logits, rows);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    #[test]
    fn int16_logits_are_close_to_f32_and_every_path_sums_the_same_integers() {
        assert_eq!(int16_levels(256), 2047);
        assert_eq!(int16_levels(1024), 1023);
        for (n, d) in [(1, 1), (17, 7), (100, 256), (33, 131)] {
            let w = values(n * d, 1);
            let b = values(n, 2);
            let mut m = Int16Matrix::new(&w, &b, d, None);
            let hs = values(13 * d, 3);
            let mut fast = vec![0.0; 13 * n];
            m.logits_batch(&hs, &mut fast);
            // Every other path this CPU runs sums the same integers.
            #[cfg(target_arch = "x86_64")]
            for path in [Path::Avx512, Path::Avx2] {
                let runs = match path {
                    Path::Avx512 => m.path == Path::Avx512Vnni,
                    _ => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
                };
                if runs && path != m.path {
                    let picked = std::mem::replace(&mut m.path, path);
                    let mut other = vec![0.0; 13 * n];
                    m.logits_batch(&hs, &mut other);
                    assert_eq!(other, fast, "{path:?}");
                    m.path = picked;
                }
            }
            m.path = Path::Portable;
            let mut portable = vec![0.0; 13 * n];
            m.logits_batch(&hs, &mut portable);
            let levels = int16_levels(d) as f32;
            for (q, h) in hs.chunks(d).enumerate() {
                for r in 0..n {
                    let (a, p) = (fast[q * n + r], portable[q * n + r]);
                    assert!((a - p).abs() <= 1e-6 * p.abs().max(1.0), "{a} vs {p}");
                    let exact: f32 = w[r * d..(r + 1) * d]
                        .iter()
                        .zip(h)
                        .map(|(x, y)| x * y)
                        .sum::<f32>()
                        + b[r];
                    // Two roundings of at most half a step each, over d products.
                    let bound = (d as f32).sqrt() * 2.0 / levels + 1e-5;
                    assert!((p - exact).abs() <= bound, "n {n} d {d}: {p} vs {exact}");
                }
            }
        }
    }

    #[test]
    fn extremes_do_not_overflow_and_gathers_keep_values() {
        // Every weight and input at the largest magnitude: the sum d · L² stays in i32.
        let d = 1024;
        let m = Int16Matrix::new(&vec![-3.0; 2 * d], &[0.0, 1.0], d, None);
        let mut out = [0.0; 2];
        m.logits_batch(&vec![5.0; d], &mut out);
        let want = -15.0 * d as f32;
        assert!((out[0] - want).abs() < 1e-3 * want.abs(), "{}", out[0]);
        let (n, d) = (40, 24);
        let m = Int16Matrix::new(&values(n * d, 5), &values(n, 6), d, None);
        let g = m.gather(&[3, 17, 39]);
        let h = values(d, 7);
        let (mut all, mut some) = (vec![0.0; n], vec![0.0; 3]);
        m.logits_batch(&h, &mut all);
        g.logits_batch(&h, &mut some);
        assert_eq!(some, vec![all[3], all[17], all[39]]);
        assert_eq!((g.id(0), g.id(2)), (3, 39));
    }
}
