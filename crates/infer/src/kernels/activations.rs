//! The recurrent cells' nonlinearities without libm: `sigmoid` and `tanh` from
//! [`exp_nonpositive`], branch-free, so the loops of a cell update vectorise. libm's `tanhf`
//! (through `expm1f`) took a fifth of a translator's decode time, one lane at a time.
//!
//! Both read `e = exp(−|x|)` (or `exp(−2|x|)`), never overflow, and are within 1.5e-7 of libm
//! absolutely; relative accuracy near 0 is that of `1 − e` (tanh of 1e-4 to ~1e-3 relative),
//! far below what a recurrent state carries. The exponent is clamped where the result no longer
//! changes (tanh) or is below any use (sigmoid < 4e-18), so that no subnormal is ever made:
//! arithmetic on one costs ~100 cycles.

use super::exp::exp_nonpositive;
use super::Simd;

/// `1 / (1 + e^−x)`.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let e = exp_nonpositive(-x.abs().min(40.0));
    let s = 1.0 / (1.0 + e);
    if x >= 0.0 {
        s
    } else {
        e * s
    }
}

/// `tanh x = sign(x) · (1 − e) / (1 + e)` with `e = e^−2|x|` (1 in f32 from |x| = 9 on).
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let e = exp_nonpositive(-(2.0 * x.abs()).min(20.0));
    ((1.0 - e) / (1.0 + e)).copysign(x)
}

/// `x ← tanh x` for every element.
pub fn tanh_in_place(xs: &mut [f32]) {
    match Simd::get() {
        // SAFETY: the CPU has the features the wrapper was compiled for.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512 => unsafe { tanh_avx512(xs) },
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => unsafe { tanh_avx2(xs) },
        Simd::Portable => tanh_body(xs),
    }
}

#[inline(always)]
fn tanh_body(xs: &mut [f32]) {
    for x in xs {
        *x = tanh(*x);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tanh_avx512(xs: &mut [f32]) {
    tanh_body(xs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tanh_avx2(xs: &mut [f32]) {
    tanh_body(xs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigmoid_and_tanh_match_libm() {
        let (mut worst_s, mut worst_t) = (0.0f64, 0.0f64);
        for i in -200_000..=200_000 {
            let x = i as f32 * 1e-4;
            let s = 1.0 / (1.0 + (-(x as f64)).exp());
            worst_s = worst_s.max((sigmoid(x) as f64 - s).abs());
            worst_t = worst_t.max((tanh(x) as f64 - (x as f64).tanh()).abs());
        }
        assert!(worst_s < 1.5e-7 && worst_t < 1.5e-7, "{worst_s} {worst_t}");
        for (x, s, t) in [
            (1e30f32, 1.0, 1.0),
            (-1e30, 0.0, -1.0),
            (0.0, 0.5, 0.0),
            (f32::INFINITY, 1.0, 1.0),
            (f32::NEG_INFINITY, 0.0, -1.0),
        ] {
            assert!((sigmoid(x) - s).abs() < 1e-17 && tanh(x) == t, "x = {x}");
        }
        let mut xs: Vec<f32> = (0..37).map(|i| (i as f32 - 18.0) * 0.37).collect();
        let want: Vec<f32> = xs.iter().map(|&x| tanh(x)).collect();
        tanh_in_place(&mut xs);
        assert_eq!(xs, want, "the dispatched loop computes the same values");
    }
}
