//! The f32 kernels every head is built on, each beside the naive reference its tests compare
//! against:
//! - [`PackedMatrix`] (`panel`): a matrix repacked into panels of [`PANEL`] rows, scored against
//!   one context or a batch; what the full head and every screened candidate set stream.
//! - [`rows`]: exact logits for rows picked per query (graph, tree, hashing and preview heads).
//! - `vecmat`: vector × matrix with register-resident accumulators.
//! - [`exp_nonpositive`] / [`log_sum_exp`]: a vectorisable exp and the softmax normaliser.
//! - [`sigmoid`], [`tanh`], [`tanh_in_place`]: the recurrent cells' nonlinearities on that exp.
//! - [`attend`]: dot-product attention of one query over one sequence.
//!
//! Three code paths share each layout: AVX-512 intrinsics, the portable code compiled for
//! AVX2+FMA, and the portable code for any CPU; picked once when a matrix is built (set
//! `FASTSOFTMAX_PORTABLE=1` to force the portable path, e.g. to compare).
//! - [`Int8Matrix`] (`int8`): the same products on int8 rows with one scale per row (AVX-512
//!   VNNI, AVX2, or a portable path that sums the same integers); [`Int16Matrix`] (`int16`): int16
//!   with one scale per matrix (AVX-512 BW `vpmaddwd`, or AVX2's on 8 lanes).

mod activations;
mod attention;
mod exp;
mod int16;
mod int8;
mod panel;
pub mod rows;
mod vecmat;

pub use activations::{sigmoid, tanh, tanh_in_place};
pub use attention::attend;
pub use exp::{exp_nonpositive, log_sum_exp, log_sum_exp_top_k};
pub use int16::{int16_levels, quantize_matrix16, Int16Matrix};
pub use int8::{
    quantize_rows, quantize_rows_int4, widen_rows, widen_rows_int4, Int8Matrix, Quantized,
};
pub use panel::PackedMatrix;
pub(crate) use vecmat::vecmat;
pub use vecmat::vecmat_naive;

/// Rows per panel.
pub const PANEL: usize = 16;

/// The code path each kernel family takes on this CPU, after `FASTSOFTMAX_PORTABLE`: what a
/// timing ran on, for its record (`translate --stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct KernelPaths {
    /// f32 panels, recurrent cells, attention, exp: `avx512`, `avx2+fma` or `portable`.
    pub f32: &'static str,
    /// [`Int8Matrix`]: `avx512-vnni`, `avx2` or `portable`.
    pub int8: &'static str,
    /// [`Int16Matrix`]: `avx512-vnni`, `avx512bw`, `avx2` or `portable`.
    pub int16: &'static str,
}

/// The paths a matrix built now would take (each family detects its own when built).
pub fn kernel_paths() -> KernelPaths {
    KernelPaths {
        f32: Simd::detect().name(),
        int8: int8::path_name(),
        int16: int16::path_name(),
    }
}

/// Stores the first `lanes` (1..=8) of `v` at `dst`: the AVX2 epilogue of a panel's last rows.
///
/// # Safety
/// AVX2 must be available and `dst` valid for `lanes` writes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn store_lanes_avx2(dst: *mut f32, v: std::arch::x86_64::__m256, lanes: usize) {
    use std::arch::x86_64::*;
    if lanes == 8 {
        _mm256_storeu_ps(dst, v);
    } else {
        let index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes as i32), index);
        _mm256_maskstore_ps(dst, mask, v);
    }
}

/// Seeded pseudo-random values in [-1, 1): the fixtures of tests and benches.
pub fn seeded_values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Plain dot product, the reference for every optimized kernel.
/// `a · b` with 16 independent partial sums, so the loop vectorises (for single rows picked at
/// random, where packing into panels does not pay). Always inlined, so that it takes the
/// vector width of the kernel that calls it.
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..16 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

pub fn dot_naive(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Reference scores: `out[i] = W[i] · h + bias[i]` for row-major `w` `[n, d]`.
pub fn scores_naive(w: &[f32], bias: &[f32], h: &[f32], out: &mut [f32]) {
    let d = h.len();
    for (i, o) in out.iter_mut().enumerate() {
        *o = dot_naive(&w[i * d..(i + 1) * d], h) + bias[i];
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Simd {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Portable,
}

impl Simd {
    /// [`Simd::detect`], once per process.
    pub(crate) fn get() -> Self {
        static PICKED: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
        *PICKED.get_or_init(Simd::detect)
    }

    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::env::var_os("FASTSOFTMAX_PORTABLE").is_none() {
                if is_x86_feature_detected!("avx512f") {
                    return Simd::Avx512;
                }
                if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                    return Simd::Avx2;
                }
            }
        }
        Simd::Portable
    }

    fn name(self) -> &'static str {
        match self {
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => "avx512",
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => "avx2+fma",
            Simd::Portable => "portable",
        }
    }
}
