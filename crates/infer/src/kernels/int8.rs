//! int8 matrix products with one scale per weight row, beside the f32 panels: a quarter of the
//! bytes to stream and, with AVX-512 VNNI, 64 multiply-adds per instruction against an f32
//! FMA's 16.
//!
//! Layout: panels of [`PANEL`] rows, 4 consecutive input dimensions of a row in one 32-bit
//! lane: `panels[p][j / 4][r][j % 4] = W8[16p + r][j]` (`d` padded to a multiple of 4 with
//! zeros). One 64-byte load holds 4 dimensions of 16 rows, and `vpdpbusd` adds the 4 products
//! of each lane into its int32 sum.
//!
//! Scales: row `r` is stored as `W8[r] = round(W[r] · 127 / max|W[r]|)`; each context `h` as
//! `round(h · 127 / max|h|)`, per call and per context, so the logits need no calibration
//! data. `vpdpbusd` multiplies unsigned by signed bytes, so the context is shifted to u8
//! (`+128`); the shift adds `128 · Σ_j W8[r][j]` to row `r`'s sum, subtracted with the row sums
//! kept beside the panels. `logit_r = (sum_r − shift_r) · (1/s_r) · (1/s_h) + b_r`.
//!
//! Without VNNI (AVX2 alone: Zen 1–3, Intel's client cores), the same panels are widened to
//! int16 in registers and multiplied by `vpmaddwd` (16 multiply-adds an instruction, a pair of
//! products per int32 lane, exact). `vpmaddubsw` would take the bytes as they are, but its
//! int16 pair sums saturate (255 · 127 · 2 > 32,767), so it would change the answers.
//!
//! Every path sums the same integers, so the VNNI and AVX2 kernels equal the portable one
//! exactly.

use std::cell::RefCell;

use super::PANEL;
use crate::topk::TopK;

/// Contexts per tile (2 panels × 12 contexts = 24 of the 32 AVX-512 registers).
const QTILE: usize = 12;
/// Panels per tile.
const TILE_PANELS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    #[cfg(target_arch = "x86_64")]
    Vnni,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Portable,
}

impl Path {
    fn detect() -> Path {
        if std::env::var_os("FASTSOFTMAX_PORTABLE").is_some() {
            return Path::Portable;
        }
        Path::available()[0]
    }

    /// The paths this CPU runs, the fastest first; the portable one last.
    fn available() -> Vec<Path> {
        let mut paths = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni") {
                paths.push(Path::Vnni);
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                paths.push(Path::Avx2);
            }
        }
        paths.push(Path::Portable);
        paths
    }
}

/// The path [`Int8Matrix::new`] picks on this CPU.
pub(super) fn path_name() -> &'static str {
    match Path::detect() {
        #[cfg(target_arch = "x86_64")]
        Path::Vnni => "avx512-vnni",
        #[cfg(target_arch = "x86_64")]
        Path::Avx2 => "avx2",
        Path::Portable => "portable",
    }
}

/// A matrix `[n_rows, d]` with a bias `[n_rows]` and an optional row → word-id map, quantized
/// to int8 per row and packed for [`Int8Matrix::logits_batch`].
#[derive(Debug, Clone)]
pub struct Int8Matrix {
    d: usize,
    /// `d` rounded up to a multiple of 4.
    d4: usize,
    n_rows: usize,
    /// [n_panels, d4 / 4, PANEL, 4]
    panels: Vec<i8>,
    /// [n_panels · PANEL]: `max|W[r]| / 127` (0 on padding rows).
    inv_scale: Vec<f32>,
    /// [n_panels · PANEL]: `128 · Σ_j W8[r][j]`.
    shift: Vec<i32>,
    /// [n_panels · PANEL]; −∞ on padding rows.
    bias: Vec<f32>,
    /// [n_rows]; `None` = row i is word i.
    ids: Option<Vec<u32>>,
    path: Path,
}

/// `x` quantized with scale `s` to `[−127, 127]` (ties to even: one vector instruction, where
/// `round` is a libm call).
#[inline(always)]
fn q8(x: f32, s: f32) -> i8 {
    (x * s).round_ties_even().clamp(-127.0, 127.0) as i8
}

/// Row-major `rows` `[n, d]` quantized per row: the int8 rows and each row's `max|W[r]| / 127`.
pub fn quantize_rows(rows: &[f32], d: usize) -> (Vec<i8>, Vec<f32>) {
    let mut q = Vec::with_capacity(rows.len());
    let mut inv = Vec::with_capacity(rows.len() / d.max(1));
    for w in rows.chunks_exact(d) {
        let max = w.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let s = if max > 0.0 { 127.0 / max } else { 1.0 };
        q.extend(w.iter().map(|&x| q8(x, s)));
        inv.push(if max > 0.0 { max / 127.0 } else { 0.0 });
    }
    (q, inv)
}

/// The inverse of [`quantize_rows`] as a file stores it: int8 rows `q` `[n, d]` (raw bytes)
/// widened to f32, each row times its `inv_scale`.
pub fn widen_rows(q: &[u8], inv_scale: &[f32], d: usize) -> Vec<f32> {
    q.chunks_exact(d.max(1))
        .zip(inv_scale)
        .flat_map(|(row, &s)| row.iter().map(move |&x| x as i8 as f32 * s))
        .collect()
}

/// Row-major `rows` `[n, d]` quantized per row to 4 bits for storage: each row's values
/// `round(W[r] · 7 / max|W[r]|)` in `[−7, 7]`, two to a byte (the first in the low nibble, a
/// row of odd `d` padded with a zero nibble), and each row's `max|W[r]| / 7`. An eighth of f32's
/// bytes; [`widen_rows_int4`] reads them back.
pub fn quantize_rows_int4(rows: &[f32], d: usize) -> (Vec<u8>, Vec<f32>) {
    let d = d.max(1);
    let mut packed = Vec::with_capacity(rows.len().div_ceil(2));
    let mut inv = Vec::with_capacity(rows.len() / d);
    for w in rows.chunks_exact(d) {
        let max = w.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let s = if max > 0.0 { 7.0 / max } else { 1.0 };
        let q = |x: f32| ((x * s).round_ties_even().clamp(-7.0, 7.0) as i8 as u8) & 0x0f;
        packed.extend(
            w.chunks(2)
                .map(|p| q(p[0]) | p.get(1).map_or(0, |&x| q(x) << 4)),
        );
        inv.push(if max > 0.0 { max / 7.0 } else { 0.0 });
    }
    (packed, inv)
}

/// The inverse of [`quantize_rows_int4`]: rows of `d.div_ceil(2)` bytes widened to f32 `[n, d]`,
/// each value times its row's `inv_scale`.
pub fn widen_rows_int4(packed: &[u8], inv_scale: &[f32], d: usize) -> Vec<f32> {
    let nibble = |b: u8| ((b << 4) as i8 >> 4) as f32;
    packed
        .chunks_exact(d.div_ceil(2).max(1))
        .zip(inv_scale)
        .flat_map(|(row, &s)| {
            row.iter()
                .flat_map(move |&b| [nibble(b) * s, nibble(b >> 4) * s])
                .take(d)
        })
        .collect()
}

impl Int8Matrix {
    /// Quantizes row-major `rows` `[n, d]` with `bias` `[n]`; `ids` maps row → word id.
    pub fn new(rows: &[f32], bias: &[f32], d: usize, ids: Option<Vec<u32>>) -> Self {
        assert!(d > 0 && rows.len().is_multiple_of(d), "rows must be [n, d]");
        let (q, inv) = quantize_rows(rows, d);
        Self::from_quantized(&q, &inv, bias, d, ids)
    }

    /// Packs rows already quantized by [`quantize_rows`] (`q [n, d]`, `inv_scale [n]`), e.g. as
    /// read from a quantized artifact.
    pub fn from_quantized(
        q: &[i8],
        inv_scale: &[f32],
        bias: &[f32],
        d: usize,
        ids: Option<Vec<u32>>,
    ) -> Self {
        let n_rows = bias.len();
        assert!(d > 0 && q.len() == n_rows * d, "q must be [n, d]");
        assert_eq!(inv_scale.len(), n_rows, "one scale per row");
        if let Some(ids) = &ids {
            assert_eq!(ids.len(), n_rows, "ids must be [n]");
        }
        let d4 = d.div_ceil(4) * 4;
        let n_panels = n_rows.div_ceil(PANEL);
        let mut panels = vec![0i8; n_panels * d4 * PANEL];
        let mut inv = vec![0.0f32; n_panels * PANEL];
        let mut shift = vec![0i32; n_panels * PANEL];
        let mut padded_bias = vec![f32::NEG_INFINITY; n_panels * PANEL];
        padded_bias[..n_rows].copy_from_slice(bias);
        inv[..n_rows].copy_from_slice(inv_scale);
        for r in 0..n_rows {
            let (p, lane) = (r / PANEL, r % PANEL);
            let mut sum = 0i32;
            for (j, &x) in q[r * d..(r + 1) * d].iter().enumerate() {
                sum += x as i32;
                panels[((p * d4 / 4 + j / 4) * PANEL + lane) * 4 + j % 4] = x;
            }
            shift[r] = 128 * sum;
        }
        Int8Matrix {
            d,
            d4,
            n_rows,
            panels,
            inv_scale: inv,
            shift,
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

    /// Bytes of weights streamed by one query (panels, scales, shifts, bias).
    pub fn bytes(&self) -> usize {
        self.panels.len() + 4 * (self.inv_scale.len() + self.shift.len() + self.bias.len())
    }

    /// Word id of row `row`.
    #[inline]
    pub fn id(&self, row: usize) -> u32 {
        match &self.ids {
            Some(ids) => ids[row],
            None => row as u32,
        }
    }

    /// Row `r`'s int8 weights `[d]`.
    pub fn row_q(&self, r: usize) -> Vec<i8> {
        let (p, lane) = (r / PANEL, r % PANEL);
        (0..self.d)
            .map(|j| self.panels[((p * self.d4 / 4 + j / 4) * PANEL + lane) * 4 + j % 4])
            .collect()
    }

    /// Row `r`'s `max|W[r]| / 127`.
    pub fn inv_scale(&self, r: usize) -> f32 {
        self.inv_scale[r]
    }

    /// Row `r`'s bias.
    pub fn bias(&self, r: usize) -> f32 {
        self.bias[r]
    }

    /// A new matrix of the rows `rows` (in that order), each mapped to its word id; the int8
    /// values are copied lane by lane, not re-quantized.
    pub fn gather(&self, rows: &[u32]) -> Int8Matrix {
        let n_rows = rows.len();
        let n_panels = n_rows.div_ceil(PANEL);
        let groups = self.d4 / 4;
        let mut panels = vec![0i8; n_panels * self.d4 * PANEL];
        let mut inv = vec![0.0f32; n_panels * PANEL];
        let mut shift = vec![0i32; n_panels * PANEL];
        let mut bias = vec![f32::NEG_INFINITY; n_panels * PANEL];
        for (i, &r) in rows.iter().enumerate() {
            let r = r as usize;
            let (sp, sl) = (r / PANEL, r % PANEL);
            let (dp, dl) = (i / PANEL, i % PANEL);
            for g in 0..groups {
                let src = ((sp * groups + g) * PANEL + sl) * 4;
                let dst = ((dp * groups + g) * PANEL + dl) * 4;
                panels[dst..dst + 4].copy_from_slice(&self.panels[src..src + 4]);
            }
            inv[i] = self.inv_scale[r];
            shift[i] = self.shift[r];
            bias[i] = self.bias[r];
        }
        Int8Matrix {
            d: self.d,
            d4: self.d4,
            n_rows,
            panels,
            inv_scale: inv,
            shift,
            bias,
            ids: Some(rows.iter().map(|&r| self.id(r as usize)).collect()),
            path: self.path,
        }
    }

    /// Quantizes contexts `hs [n, d]` for the products of this matrix (and of every other of
    /// the same width), so several matrices can share one quantization.
    pub fn quantize(&self, hs: &[f32], q: &mut Quantized) {
        debug_assert_eq!(hs.len() % self.d, 0);
        q.d4 = self.d4;
        match self.path {
            // SAFETY: as in `logits_panels`.
            #[cfg(target_arch = "x86_64")]
            Path::Vnni => unsafe { vnni::quantize_contexts(self, hs, &mut q.hu, &mut q.inv_h) },
            // SAFETY: as in `logits_panels`.
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { avx2::quantize_contexts(self, hs, &mut q.hu, &mut q.inv_h) },
            Path::Portable => self.quantize_body(hs, &mut q.hu, &mut q.inv_h),
        }
    }

    #[inline(always)]
    fn quantize_body(&self, hs: &[f32], hu: &mut Vec<u8>, inv_h: &mut Vec<f32>) {
        hu.clear();
        inv_h.clear();
        for h in hs.chunks_exact(self.d) {
            let mut lanes = [0.0f32; 16];
            let chunks = h.chunks_exact(16);
            let tail = chunks
                .remainder()
                .iter()
                .fold(0.0f32, |m, x| m.max(x.abs()));
            for c in chunks {
                for (m, x) in lanes.iter_mut().zip(c) {
                    *m = m.max(x.abs());
                }
            }
            let max = lanes.iter().fold(tail, |m, &x| m.max(x));
            let s = if max > 0.0 { 127.0 / max } else { 1.0 };
            // `round(x·s) + 128` in [1, 255], written in place so that the loop vectorises
            // (the same value as `q8(x, s) + 128`).
            let start = hu.len();
            hu.resize(start + self.d4, 128);
            for (o, &x) in hu[start..start + self.d].iter_mut().zip(h) {
                // `max` first: it maps NaN to 1, so the value is always in [1, 255] (`clamp`
                // would pass NaN on to the unchecked cast below).
                #[allow(clippy::manual_clamp)]
                let v = ((x * s).round_ties_even() + 128.0).max(1.0).min(255.0);
                // SAFETY: `v` is finite and within i32 (the saturating `as` would not vectorise).
                *o = unsafe { v.to_int_unchecked::<i32>() } as u8;
            }
            inv_h.push(if max > 0.0 { max / 127.0 } else { 0.0 });
        }
    }

    /// Batched product: `out[q][i] ≈ W[i]·hs[q] + b[i]` for `hs [n, d]` and `out [n, n_rows]`,
    /// both row-major.
    pub fn logits_batch(&self, hs: &[f32], out: &mut [f32]) {
        CONTEXTS.with(|q| {
            let q = &mut *q.borrow_mut();
            self.quantize(hs, q);
            self.logits_quantized(q, out);
        });
    }

    /// [`Self::logits_batch`] for contexts already quantized by [`Self::quantize`].
    pub fn logits_quantized(&self, q: &Quantized, out: &mut [f32]) {
        assert_eq!(q.d4, self.d4, "contexts quantized for another width");
        debug_assert_eq!(out.len(), q.len() * self.n_rows);
        self.logits_panels(
            &q.hu,
            &q.inv_h,
            0..self.n_rows.div_ceil(PANEL),
            out,
            self.n_rows,
        );
    }

    /// Batched scan: offers every row's logit `W[i]·hs[q] + b[i]` (as [`Self::logits_batch`]
    /// computes it) to `outs[q]`, which the caller has reset. Works through `SCAN_PANELS`
    /// panels at a time, so the logits never need a `[n, n_rows]` buffer.
    pub fn scan_batch(&self, hs: &[f32], outs: &mut [TopK]) {
        debug_assert_eq!(hs.len(), outs.len() * self.d);
        CONTEXTS.with(|q| {
            let q = &mut *q.borrow_mut();
            self.quantize(hs, q);
            self.scan_quantized(q, outs);
        });
    }

    /// [`Self::scan_batch`] for contexts already quantized by [`Self::quantize`].
    pub fn scan_quantized(&self, q: &Quantized, outs: &mut [TopK]) {
        assert_eq!(q.d4, self.d4, "contexts quantized for another width");
        let n = outs.len();
        debug_assert_eq!(q.len(), n);
        TILE.with(|tile| {
            let tile = &mut *tile.borrow_mut();
            let n_panels = self.n_rows.div_ceil(PANEL);
            for p in (0..n_panels).step_by(SCAN_PANELS) {
                let panels = p..(p + SCAN_PANELS).min(n_panels);
                let first = p * PANEL;
                let rows = (self.n_rows - first).min(SCAN_PANELS * PANEL);
                tile.resize(n * rows, 0.0);
                self.logits_panels(&q.hu, &q.inv_h, panels, tile, rows);
                for (q, out) in outs.iter_mut().enumerate() {
                    let mut thr = out.threshold();
                    for (r, &l) in tile[q * rows..(q + 1) * rows].iter().enumerate() {
                        if l > thr {
                            out.push(self.id(first + r), l);
                            thr = out.threshold();
                        }
                    }
                }
            }
        });
    }

    /// Logits of the rows of `panels` for quantized contexts: row `first + r` of context `q`
    /// into `out[q · stride + r]`, `first` the range's first row.
    fn logits_panels(
        &self,
        hu: &[u8],
        inv_h: &[f32],
        panels: std::ops::Range<usize>,
        out: &mut [f32],
        stride: usize,
    ) {
        match self.path {
            // SAFETY: each path was chosen after detecting its instructions (`Path::available`).
            #[cfg(target_arch = "x86_64")]
            Path::Vnni => unsafe { vnni::logits_panels(self, hu, inv_h, panels, out, stride) },
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { avx2::logits_panels(self, hu, inv_h, panels, out, stride) },
            Path::Portable => self.logits_portable(hu, inv_h, panels, out, stride),
        }
    }

    /// The reference: the same integer sums, one row and context at a time.
    fn logits_portable(
        &self,
        hu: &[u8],
        inv_h: &[f32],
        panels: std::ops::Range<usize>,
        out: &mut [f32],
        stride: usize,
    ) {
        let groups = self.d4 / 4;
        let first = panels.start * PANEL;
        let last = (panels.end * PANEL).min(self.n_rows);
        for (q, h) in hu.chunks_exact(self.d4).enumerate() {
            for r in first..last {
                let (p, lane) = (r / PANEL, r % PANEL);
                let mut acc = 0i32;
                for g in 0..groups {
                    let w = &self.panels[((p * groups + g) * PANEL + lane) * 4..][..4];
                    for k in 0..4 {
                        acc += h[4 * g + k] as i32 * w[k] as i32;
                    }
                }
                out[q * stride + r - first] =
                    (acc - self.shift[r]) as f32 * (self.inv_scale[r] * inv_h[q]) + self.bias[r];
            }
        }
    }
}

/// Panels a scan scores per pass (512 rows: their logits for a batch of contexts stay in L1/L2).
const SCAN_PANELS: usize = 32;

/// Contexts `[n, d]` quantized for [`Int8Matrix`] products: u8 (`q + 128`), each padded to
/// `d4`, and each one's `1 / s_h`. Any matrix of the same width takes them.
#[derive(Debug, Clone, Default)]
pub struct Quantized {
    d4: usize,
    /// `[n, d4]`
    hu: Vec<u8>,
    /// `[n]`
    inv_h: Vec<f32>,
}

impl Quantized {
    /// Contexts held.
    pub fn len(&self) -> usize {
        self.inv_h.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inv_h.is_empty()
    }

    /// Replaces `self` with the contexts `idx` of `from`, in that order (a copy of bytes, not
    /// a new quantization).
    pub fn select(&mut self, from: &Quantized, idx: &[usize]) {
        self.d4 = from.d4;
        self.hu.clear();
        self.inv_h.clear();
        for &i in idx {
            self.hu
                .extend_from_slice(&from.hu[i * from.d4..(i + 1) * from.d4]);
            self.inv_h.push(from.inv_h[i]);
        }
    }
}

thread_local! {
    /// Quantized contexts and a scan's logits, reused across calls.
    static CONTEXTS: RefCell<Quantized> = RefCell::default();
    static TILE: RefCell<Vec<f32>> = RefCell::default();
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use std::arch::x86_64::*;

    use super::{Int8Matrix, PANEL, QTILE, TILE_PANELS};

    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) unsafe fn logits_panels(
        m: &Int8Matrix,
        hu: &[u8],
        inv_h: &[f32],
        panels: std::ops::Range<usize>,
        out: &mut [f32],
        stride: usize,
    ) {
        let n = inv_h.len();
        let row0 = panels.start * PANEL;
        let mut p = panels.start;
        while p < panels.end {
            let np = TILE_PANELS.min(panels.end - p);
            let mut q = 0;
            while q < n {
                let nq = QTILE.min(n - q);
                macro_rules! dispatch {
                    ($($q:literal)*) => {
                        match (np, nq) {
                            $((2, $q) => tile::<$q, 2>(m, p, hu, inv_h, q, out, stride, row0),
                              (_, $q) => tile::<$q, 1>(m, p, hu, inv_h, q, out, stride, row0),)*
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

    /// [`Int8Matrix::quantize`] compiled for AVX-512.
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) unsafe fn quantize_contexts(
        m: &Int8Matrix,
        hs: &[f32],
        hu: &mut Vec<u8>,
        inv_h: &mut Vec<f32>,
    ) {
        m.quantize_body(hs, hu, inv_h)
    }

    /// `P` panels from panel `p` × `Q` contexts from context `q0`: integer sums in registers,
    /// then scaled, biased and stored 16 logits at a time (the last panel masked to the rows).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn tile<const Q: usize, const P: usize>(
        m: &Int8Matrix,
        p: usize,
        hu: &[u8],
        inv_h: &[f32],
        q0: usize,
        out: &mut [f32],
        stride: usize,
        row0: usize,
    ) {
        let groups = m.d4 / 4;
        let wp = m.panels.as_ptr();
        let hp = hu.as_ptr().add(q0 * m.d4);
        let mut acc = [[_mm512_setzero_si512(); P]; Q];
        for g in 0..groups {
            let mut w = [_mm512_setzero_si512(); P];
            for (k, v) in w.iter_mut().enumerate() {
                *v = _mm512_loadu_si512(wp.add(((p + k) * groups + g) * PANEL * 4) as *const _);
            }
            for (qi, a) in acc.iter_mut().enumerate() {
                let x4 = std::ptr::read_unaligned(hp.add(qi * m.d4 + 4 * g) as *const i32);
                let x = _mm512_set1_epi32(x4);
                for k in 0..P {
                    a[k] = _mm512_dpbusd_epi32(a[k], x, w[k]);
                }
            }
        }
        for k in 0..P {
            let first = (p + k) * PANEL;
            let shift = _mm512_loadu_si512(m.shift.as_ptr().add(first) as *const _);
            let scale = _mm512_loadu_ps(m.inv_scale.as_ptr().add(first));
            let bias = _mm512_loadu_ps(m.bias.as_ptr().add(first));
            let live = (m.n_rows - first).min(PANEL);
            let mask: __mmask16 = if live == PANEL {
                0xFFFF
            } else {
                (1u16 << live) - 1
            };
            for (qi, a) in acc.iter().enumerate() {
                let sums = _mm512_cvtepi32_ps(_mm512_sub_epi32(a[k], shift));
                let s = _mm512_mul_ps(scale, _mm512_set1_ps(inv_h[q0 + qi]));
                let logits = _mm512_fmadd_ps(sums, s, bias);
                let dst = out.as_mut_ptr().add((q0 + qi) * stride + first - row0);
                _mm512_mask_storeu_ps(dst, mask, logits);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{Int8Matrix, PANEL};
    use crate::kernels::store_lanes_avx2;

    /// Contexts per tile: a panel's 16 rows take 4 accumulators per context, its widened
    /// weights 4 registers and the context one, so 2 contexts use 13 of the 16 registers.
    const QTILE: usize = 2;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn logits_panels(
        m: &Int8Matrix,
        hu: &[u8],
        inv_h: &[f32],
        panels: std::ops::Range<usize>,
        out: &mut [f32],
        stride: usize,
    ) {
        let n = inv_h.len();
        let row0 = panels.start * PANEL;
        // Panel by panel: its weights (d4 · 16 bytes) stay in L1 while every context passes.
        for p in panels {
            let mut q = 0;
            while q + QTILE <= n {
                tile::<QTILE>(m, p, hu, inv_h, q, out, stride, row0);
                q += QTILE;
            }
            if q < n {
                tile::<1>(m, p, hu, inv_h, q, out, stride, row0);
            }
        }
    }

    /// [`Int8Matrix::quantize`] compiled for AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn quantize_contexts(
        m: &Int8Matrix,
        hs: &[f32],
        hu: &mut Vec<u8>,
        inv_h: &mut Vec<f32>,
    ) {
        m.quantize_body(hs, hu, inv_h)
    }

    /// Panel `p` × `Q` contexts from context `q0`. A group's 64 bytes (4 dimensions of 16
    /// rows) are 4 loads of 4 rows, each widened to 16 int16; `vpmaddwd` against the context's
    /// 4 bytes (widened and repeated) leaves each row's two pair sums in adjacent int32 lanes,
    /// added across the groups and folded once at the end.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn tile<const Q: usize>(
        m: &Int8Matrix,
        p: usize,
        hu: &[u8],
        inv_h: &[f32],
        q0: usize,
        out: &mut [f32],
        stride: usize,
        row0: usize,
    ) {
        let groups = m.d4 / 4;
        let wp = m.panels.as_ptr().add(p * groups * PANEL * 4);
        let hp = hu.as_ptr().add(q0 * m.d4);
        let mut acc = [[_mm256_setzero_si256(); 4]; Q];
        for g in 0..groups {
            let base = wp.add(g * PANEL * 4);
            let w: [__m256i; 4] = std::array::from_fn(|c| {
                _mm256_cvtepi8_epi16(_mm_loadu_si128(base.add(16 * c) as *const __m128i))
            });
            for (qi, a) in acc.iter_mut().enumerate() {
                let x4 = std::ptr::read_unaligned(hp.add(qi * m.d4 + 4 * g) as *const i32);
                let x = _mm256_cvtepu8_epi16(_mm_set1_epi32(x4));
                for c in 0..4 {
                    a[c] = _mm256_add_epi32(a[c], _mm256_madd_epi16(x, w[c]));
                }
            }
        }
        let first = p * PANEL;
        let live = (m.n_rows - first).min(PANEL);
        // hadd of rows 0–3 and 4–7 gives [r0 r1 r4 r5 | r2 r3 r6 r7]; this puts them in order.
        let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
        for (qi, a) in acc.iter().enumerate() {
            let s = _mm256_set1_ps(inv_h[q0 + qi]);
            for half in 0..2 {
                let rows = live.saturating_sub(8 * half).min(8);
                if rows == 0 {
                    break;
                }
                let r = first + 8 * half;
                let sums = _mm256_hadd_epi32(a[2 * half], a[2 * half + 1]);
                let sums = _mm256_permutevar8x32_epi32(sums, order);
                let shift = _mm256_loadu_si256(m.shift.as_ptr().add(r) as *const __m256i);
                let sums = _mm256_cvtepi32_ps(_mm256_sub_epi32(sums, shift));
                let scale = _mm256_mul_ps(_mm256_loadu_ps(m.inv_scale.as_ptr().add(r)), s);
                let logits = _mm256_fmadd_ps(sums, scale, _mm256_loadu_ps(m.bias.as_ptr().add(r)));
                let dst = out.as_mut_ptr().add((q0 + qi) * stride + r - row0);
                store_lanes_avx2(dst, logits, rows);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    /// 4-bit rows read back within half a step of each row's scale, at even and odd widths; a
    /// zero row stays zero, and a row's largest value is exact.
    #[test]
    fn int4_rows_round_trip_within_half_a_step() {
        for (n, d) in [(1, 1), (5, 7), (9, 256)] {
            let mut w = values(n * d, 4);
            w[..d].fill(0.0);
            let (packed, inv) = quantize_rows_int4(&w, d);
            assert_eq!((packed.len(), inv.len()), (n * d.div_ceil(2), n));
            let back = widen_rows_int4(&packed, &inv, d);
            assert_eq!(back.len(), n * d);
            for (r, (row, got)) in w.chunks(d).zip(back.chunks(d)).enumerate() {
                let max = row.iter().fold(0.0f32, |m, x| m.max(x.abs()));
                assert!((inv[r] - max / 7.0).abs() <= f32::EPSILON * max);
                for (x, y) in row.iter().zip(got) {
                    assert!((x - y).abs() <= inv[r] / 2.0 + 1e-6, "{x} vs {y}");
                }
                let at = row.iter().position(|x| x.abs() == max).unwrap();
                assert!((got[at] - row[at]).abs() <= 1e-6 * max.max(1.0));
            }
            assert!(back[..d].iter().all(|&x| x == 0.0));
        }
    }

    #[test]
    fn int8_logits_are_close_to_f32_and_every_path_sums_the_same_integers() {
        // Last panels of 1, 4, 12 and 16 rows (AVX2 stores them in halves of 8).
        for (n, d) in [(1, 1), (17, 7), (100, 256), (33, 130), (28, 64), (32, 12)] {
            let w = values(n * d, 1);
            let b = values(n, 2);
            let mut m = Int8Matrix::new(&w, &b, d, None);
            // 13 contexts: a full tile and one more (of VNNI's 12, and of AVX2's 2).
            let hs = values(13 * d, 3);
            m.path = Path::Portable;
            let mut portable = vec![0.0; 13 * n];
            m.logits_batch(&hs, &mut portable);
            // Every path this CPU has (CI's and the developers' differ).
            for path in Path::available() {
                m.path = path;
                let mut fast = vec![f32::NAN; 13 * n];
                m.logits_batch(&hs, &mut fast);
                // `mul(scale, inv_h)` then one FMA on one side, the same in two roundings on
                // the other: equal to the last bit or within one rounding.
                for (a, b) in fast.iter().zip(&portable) {
                    assert!(
                        (a - b).abs() <= 1e-6 * b.abs().max(1.0),
                        "{path:?}: {a} vs {b}"
                    );
                }
            }
            for (q, h) in hs.chunks(d).enumerate() {
                for r in 0..n {
                    let exact: f32 = w[r * d..(r + 1) * d]
                        .iter()
                        .zip(h)
                        .map(|(a, b)| a * b)
                        .sum::<f32>()
                        + b[r];
                    // Two roundings of at most half a step each, over d products.
                    let bound = (d as f32).sqrt() * 2.0 / 127.0 + 1e-5;
                    let got = portable[q * n + r];
                    assert!(
                        (got - exact).abs() <= bound,
                        "n {n} d {d}: {got} vs {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn gathered_rows_keep_their_values_and_ids() {
        let (n, d) = (40, 24);
        let w = values(n * d, 5);
        let b = values(n, 6);
        let m = Int8Matrix::new(&w, &b, d, None);
        let pick = [3u32, 17, 18, 39];
        let g = m.gather(&pick);
        assert_eq!(g.n_rows(), 4);
        let h = values(d, 7);
        let (mut all, mut some) = (vec![0.0; n], vec![0.0; 4]);
        m.logits_batch(&h, &mut all);
        g.logits_batch(&h, &mut some);
        for (j, &r) in pick.iter().enumerate() {
            assert_eq!(g.id(j), r);
            assert_eq!(some[j], all[r as usize]);
        }
        // Round trip through the stored form.
        let (q, inv) = quantize_rows(&w, d);
        let back = Int8Matrix::from_quantized(&q, &inv, &b, d, None);
        let mut again = vec![0.0; n];
        back.logits_batch(&h, &mut again);
        assert_eq!(again, all);
        assert_eq!(m.row_q(5), q[5 * d..6 * d].to_vec());
    }

    #[test]
    fn the_scan_offers_the_logits_of_the_product() {
        // Over 2 scan passes (600 rows), 13 contexts.
        let (n, d) = (600, 40);
        let m = Int8Matrix::new(&values(n * d, 8), &values(n, 9), d, None);
        let hs = values(13 * d, 10);
        let mut logits = vec![0.0; 13 * n];
        m.logits_batch(&hs, &mut logits);
        let mut outs = vec![TopK::new(7); 13];
        m.scan_batch(&hs, &mut outs);
        for (q, out) in outs.iter().enumerate() {
            let mut want = TopK::new(7);
            for (i, &l) in logits[q * n..(q + 1) * n].iter().enumerate() {
                want.push(i as u32, l);
            }
            assert_eq!(out.as_slice(), want.as_slice());
        }
    }

    #[test]
    fn zero_rows_and_contexts_give_the_bias() {
        let m = Int8Matrix::new(&[0.0; 8], &[0.5, -1.0], 4, None);
        let mut out = [0.0; 2];
        m.logits_batch(&[1.0, -2.0, 3.0, 0.0], &mut out);
        assert_eq!(out, [0.5, -1.0]);
        let m = Int8Matrix::new(&[1.0; 8], &[0.5, -1.0], 4, None);
        m.logits_batch(&[0.0; 4], &mut out);
        assert_eq!(out, [0.5, -1.0]);
    }
}
