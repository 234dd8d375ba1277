//! Vector × matrix with the accumulators kept in registers: the candidate predictor's context
//! encoder and attention query, each one call.

use super::{Simd, PANEL};

/// Vector × matrix: `out = bias + Σ_i coefs[i] · rows[i]` for row-major `rows` `[m, d]`, `bias`
/// and `out` `[d]`, `d` a multiple of [`PANEL`]. The accumulators stay in registers while the
/// rows stream past (no read-modify-write of `out` per row); the candidate predictor's context
/// encoder is one of these.
pub(crate) fn vecmat(simd: Simd, coefs: &[f32], rows: &[f32], bias: &[f32], out: &mut [f32]) {
    let d = out.len();
    assert!(
        d.is_multiple_of(PANEL) && bias.len() == d && rows.len() == coefs.len() * d,
        "vecmat: rows [m, d], bias [d], out [d], d a multiple of {PANEL}"
    );
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::Avx512` is only chosen when the CPU has AVX-512F; lengths checked above.
        Simd::Avx512 => unsafe { avx512::vecmat(coefs, rows, bias, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::Avx2` is only chosen when the CPU has AVX2 and FMA.
        Simd::Avx2 => unsafe { vecmat_avx2(coefs, rows, bias, out) },
        Simd::Portable => vecmat_portable(coefs, rows, bias, out),
    }
}

/// Reference for `vecmat` (the crate's register-blocked kernel).
pub fn vecmat_naive(coefs: &[f32], rows: &[f32], bias: &[f32], out: &mut [f32]) {
    let d = out.len();
    out.copy_from_slice(bias);
    for (c, row) in coefs.iter().zip(rows.chunks_exact(d)) {
        for (o, x) in out.iter_mut().zip(row) {
            *o += c * x;
        }
    }
}

/// Portable [`vecmat`]: blocks of 4 × 16 columns, so the accumulators fit 8 AVX2 registers.
#[inline(always)]
fn vecmat_portable(coefs: &[f32], rows: &[f32], bias: &[f32], out: &mut [f32]) {
    const BLOCK: usize = 4 * PANEL;
    let d = out.len();
    let mut col = 0;
    while col < d {
        let w = BLOCK.min(d - col);
        let mut acc = [0.0f32; BLOCK];
        acc[..w].copy_from_slice(&bias[col..col + w]);
        for (i, &c) in coefs.iter().enumerate() {
            let row = &rows[i * d + col..i * d + col + w];
            for (a, x) in acc.iter_mut().zip(row) {
                *a += c * x;
            }
        }
        out[col..col + w].copy_from_slice(&acc[..w]);
        col += w;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn vecmat_avx2(coefs: &[f32], rows: &[f32], bias: &[f32], out: &mut [f32]) {
    vecmat_portable(coefs, rows, bias, out)
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::PANEL;
    use std::arch::x86_64::*;

    /// [`super::vecmat`]: up to 8 vectors of columns per pass, one accumulator each.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn vecmat(coefs: &[f32], rows: &[f32], bias: &[f32], out: &mut [f32]) {
        let d = out.len();
        let mut col = 0;
        while col < d {
            let vectors = ((d - col) / PANEL).min(8);
            match vectors {
                8 => vecmat_block::<8>(coefs, rows, bias, out, col),
                7 => vecmat_block::<7>(coefs, rows, bias, out, col),
                6 => vecmat_block::<6>(coefs, rows, bias, out, col),
                5 => vecmat_block::<5>(coefs, rows, bias, out, col),
                4 => vecmat_block::<4>(coefs, rows, bias, out, col),
                3 => vecmat_block::<3>(coefs, rows, bias, out, col),
                2 => vecmat_block::<2>(coefs, rows, bias, out, col),
                _ => vecmat_block::<1>(coefs, rows, bias, out, col),
            }
            col += vectors * PANEL;
        }
    }

    #[inline(always)]
    unsafe fn vecmat_block<const V: usize>(
        coefs: &[f32],
        rows: &[f32],
        bias: &[f32],
        out: &mut [f32],
        col: usize,
    ) {
        let d = out.len();
        debug_assert!(col + V * PANEL <= d && rows.len() == coefs.len() * d);
        let mut acc = [_mm512_setzero_ps(); V];
        for (v, a) in acc.iter_mut().enumerate() {
            *a = _mm512_loadu_ps(bias.as_ptr().add(col + v * PANEL));
        }
        let mut rp = rows.as_ptr().add(col);
        for &c in coefs {
            let c = _mm512_set1_ps(c);
            for (v, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(_mm512_loadu_ps(rp.add(v * PANEL)), c, *a);
            }
            rp = rp.add(d);
        }
        for (v, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.as_mut_ptr().add(col + v * PANEL), *a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    #[test]
    fn vecmat_matches_the_naive_reference() {
        let mut simds = vec![Simd::Portable, Simd::detect()];
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            simds.push(Simd::Avx2);
        }
        for (m, d) in [(1, 16), (3, 112), (150, 112), (40, 144), (7, 256)] {
            let (coefs, rows, bias) = (values(m, 4), values(m * d, 5), values(d, 6));
            let mut want = vec![0.0; d];
            vecmat_naive(&coefs, &rows, &bias, &mut want);
            for &simd in &simds {
                let mut got = vec![f32::NAN; d];
                vecmat(simd, &coefs, &rows, &bias, &mut got);
                for (a, b) in want.iter().zip(&got) {
                    assert!((a - b).abs() < 1e-4, "{simd:?} m {m} d {d}: {a} vs {b}");
                }
            }
        }
    }
}
