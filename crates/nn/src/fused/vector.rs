//! The element-wise and reduction loops the fused ops share: exponentials of a row, sums of
//! columns, scaled rows, sums of squares. Each vectorises (16 independent lanes where a sum
//! would otherwise chain) and the hot ones are compiled for the CPU's widest vector unit
//! ([`multiversion!`](super::simd::multiversion)).

use fastsoftmax_infer::exp_nonpositive;
use rayon::prelude::*;

use super::gemm::MatRef;
use super::simd::multiversion;

multiversion! {
    /// Replaces `row` by `exp(row − max)` and returns `(max, Σ)`; `(NaN, NaN)` when a value is
    /// NaN or the max is not finite.
    pub fn exp_in_place(row: &mut [f32]) -> (f32, f64) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        // exp_nonpositive reads NaN as a large negative number: look for it explicitly.
        let nan = row.iter().fold(false, |acc, x| acc | x.is_nan());
        if nan || !max.is_finite() {
            return (f32::NAN, f64::NAN);
        }
        // 16 lanes summed separately so the loop vectorises; the lanes are added in f64.
        let mut lanes = [0.0f32; 16];
        let mut chunks = row.chunks_exact_mut(16);
        for c in &mut chunks {
            for (a, x) in lanes.iter_mut().zip(c.iter_mut()) {
                *x = exp_nonpositive(*x - max);
                *a += *x;
            }
        }
        let mut sum: f64 = lanes.iter().map(|&a| a as f64).sum();
        for x in chunks.into_remainder() {
            *x = exp_nonpositive(*x - max);
            sum += *x as f64;
        }
        (max, sum)
    }
}

multiversion! {
    /// `Σ x²` over 16 f32 lanes (vectorised; a chunk of a gradient is short enough for f32), the
    /// lanes added in f64.
    pub fn sum_of_squares_f32(x: &[f32]) -> f64 {
        let mut lanes = [0.0f32; 16];
        let mut chunks = x.chunks_exact(16);
        for c in &mut chunks {
            for (a, &v) in lanes.iter_mut().zip(c) {
                *a += v * v;
            }
        }
        let tail: f64 = chunks.remainder().iter().map(|&v| (v * v) as f64).sum();
        lanes.iter().map(|&a| a as f64).sum::<f64>() + tail
    }
}

/// `diag(s)·h` as a contiguous `[N, H]` matrix.
pub fn rows_scaled(h: MatRef, s: &[f32]) -> Vec<f32> {
    let d = h.cols;
    let mut out = vec![0.0f32; h.rows * d];
    for (r, row) in out.chunks_exact_mut(d).enumerate() {
        for (i, x) in row.iter_mut().enumerate() {
            *x = h.data[h.offset + r * h.rs + i * h.cs] * s[r];
        }
    }
    out
}

/// `Σ_r weights[r] · m[r, :]` of a row-major matrix with `cols` columns, split over threads by
/// columns.
pub fn weighted_column_sums(m: &[f32], cols: usize, weights: &[f32]) -> Vec<f32> {
    let mut sums = vec![0.0; cols];
    let block = cols.div_ceil(rayon::current_num_threads().max(1)).max(1);
    sums.par_chunks_mut(block).enumerate().for_each(|(i, out)| {
        for (row, &wgt) in m.chunks_exact(cols).zip(weights) {
            for (a, &x) in out.iter_mut().zip(&row[i * block..]) {
                *a += wgt * x;
            }
        }
    });
    sums
}

/// Sums of the columns of a row-major matrix with `cols` columns.
pub fn column_sums(m: &[f32], cols: usize) -> Vec<f32> {
    weighted_column_sums(m, cols, &vec![1.0; m.len() / cols.max(1)])
}

/// `buf` refilled with `rows` copies of `row`, in one pass (its allocation is reused).
pub fn repeated_rows(mut buf: Vec<f32>, rows: usize, row: &[f32]) -> Vec<f32> {
    buf.clear();
    buf.reserve(rows * row.len());
    for _ in 0..rows {
        buf.extend_from_slice(row);
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_sums_add_every_row() {
        let m: Vec<f32> = (0..15).map(|x| x as f32).collect();
        assert_eq!(column_sums(&m, 5), vec![15.0, 18.0, 21.0, 24.0, 27.0]);
        assert_eq!(
            weighted_column_sums(&m, 5, &[1.0, 0.0, 2.0]),
            vec![20.0, 23.0, 26.0, 29.0, 32.0]
        );
    }

    #[test]
    fn exponentials_and_squares_match_libm() {
        let mut row: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin() * 5.0).collect();
        let want: Vec<f64> = row.iter().map(|&x| x as f64).collect();
        let max = want.iter().cloned().fold(f64::MIN, f64::max);
        assert!((sum_of_squares_f32(&row) - want.iter().map(|x| x * x).sum::<f64>()).abs() < 1e-3);
        let (m, sum) = exp_in_place(&mut row);
        assert_eq!(m as f64, max);
        assert!((sum - want.iter().map(|x| (x - max).exp()).sum::<f64>()).abs() < 1e-5);
        for (e, x) in row.iter().zip(&want) {
            assert!((*e as f64 - (x - max).exp()).abs() < 1e-6);
        }
        row[3] = f32::NAN;
        assert!(exp_in_place(&mut row).1.is_nan());
    }
}
