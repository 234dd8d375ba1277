//! Fast exponentials: [`exp_nonpositive`] and the softmax normaliser [`log_sum_exp`] built on it.

use super::Simd;
use crate::TopK;

/// Log-softmax normaliser `log Σ exp(logits)`, computed stably: `m + log Σ exp(x − m)`.
/// The exponentials use [`exp_nonpositive`] over 16 independent f32 lanes (which the compiler
/// vectorises for the widest units the CPU has), so the normaliser of 10k logits costs a few
/// µs, not the ~50 µs of libm's exp; the lanes are summed in f64.
pub fn log_sum_exp(logits: &[f32]) -> f64 {
    log_sum_exp_top_k(logits, None)
}

/// [`log_sum_exp`] and, when `top` is given, the row's best logits offered to it in id order
/// (ties keep the lower id), in the same pass over the row: what a beam step needs per
/// hypothesis. Chunks of 16 logits are tested against the top-k threshold at once, so the
/// scalar pushes are as rare as the threshold is high.
pub fn log_sum_exp_top_k(logits: &[f32], top: Option<&mut TopK>) -> f64 {
    match Simd::get() {
        // SAFETY: the CPU has the features the wrapper was compiled for.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512 => unsafe { lse_avx512(logits, top) },
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => unsafe { lse_avx2(logits, top) },
        Simd::Portable => lse_portable(logits, top),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn lse_avx512(logits: &[f32], top: Option<&mut TopK>) -> f64 {
    lse_portable(logits, top)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn lse_avx2(logits: &[f32], top: Option<&mut TopK>) -> f64 {
    lse_portable(logits, top)
}

/// The shared body: a max pass, then one pass that sums exponentials and screens for the top-k.
#[inline(always)]
fn lse_portable(logits: &[f32], mut top: Option<&mut TopK>) -> f64 {
    let mut maxima = [f32::NEG_INFINITY; 16];
    let mut chunks = logits.chunks_exact(16);
    for c in &mut chunks {
        for (a, &x) in maxima.iter_mut().zip(c) {
            *a = a.max(x);
        }
    }
    let m = chunks
        .remainder()
        .iter()
        .chain(&maxima)
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    if !m.is_finite() {
        // All −∞ (or +∞ present): no finite normaliser; the ranking is still offered.
        if let Some(top) = top {
            push_from(top, 0, logits);
        }
        return m as f64;
    }
    let mut lanes = [0.0f32; 16];
    let mut chunks = logits.chunks_exact(16);
    let mut thr = top.as_ref().map_or(f32::INFINITY, |t| t.threshold());
    for (i, c) in (&mut chunks).enumerate() {
        let mut over = 0u32;
        for ((a, &x), bit) in lanes.iter_mut().zip(c).zip(0..16) {
            *a += exp_nonpositive(x - m);
            over |= ((x > thr) as u32) << bit;
        }
        if over != 0 {
            if let Some(top) = top.as_deref_mut() {
                thr = push_from(top, i * 16, c);
            }
        }
    }
    let rest = chunks.remainder();
    if let Some(top) = top {
        push_from(top, logits.len() - rest.len(), rest);
    }
    let tail: f64 = rest.iter().map(|&x| exp_nonpositive(x - m) as f64).sum();
    let s: f64 = lanes.iter().map(|&a| a as f64).sum::<f64>() + tail;
    m as f64 + s.ln()
}

/// Offers `logits` (ids from `first`) to `top`; returns the new threshold.
#[inline(never)]
fn push_from(top: &mut TopK, first: usize, logits: &[f32]) -> f32 {
    let mut thr = top.threshold();
    for (i, &l) in logits.iter().enumerate() {
        if l > thr {
            top.push((first + i) as u32, l);
            thr = top.threshold();
        }
    }
    thr
}

/// `exp(x)` for `x ≤ 0`, relative error below 2e-7 down to −80 (results under 2⁻¹²⁶ lose
/// precision as subnormals; inputs below −87 are read as −87): `x = n·ln2 + r`,
/// `2ⁿ` built in the exponent bits, `eʳ` from a degree-7 Taylor polynomial on |r| ≤ ln2/2.
/// Branch-free and without libm calls, so loops over it vectorise.
#[inline(always)]
pub fn exp_nonpositive(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding 1.5·2²³ rounds to the nearest integer in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r / 5040.0))))));
    let k = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    p * f32::from_bits(((k + 127) << 23) as u32)
}

#[cfg(test)]
mod tests {
    /// The normaliser in f64 with libm's exp: the reference.
    fn exact_log_sum_exp(logits: &[f32]) -> f64 {
        let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        m + logits
            .iter()
            .map(|&x| (x as f64 - m).exp())
            .sum::<f64>()
            .ln()
    }

    #[test]
    fn fast_exp_and_log_sum_exp_match_libm() {
        let mut worst = 0.0f64;
        for i in 0..=80_000 {
            let x = -(i as f32) * 0.001;
            let want = (x as f64).exp();
            let got = super::exp_nonpositive(x) as f64;
            worst = worst.max((got - want).abs() / want);
        }
        assert!(worst < 2e-7, "relative error {worst}");
        assert!((0.0..1e-37).contains(&super::exp_nonpositive(-1000.0)));
        let logits: Vec<f32> = super::super::seeded_values(10_007, 9)
            .iter()
            .map(|x| x * 12.0)
            .collect();
        let exact = exact_log_sum_exp(&logits);
        assert!((super::log_sum_exp(&logits) - exact).abs() < 1e-6);
        assert_eq!(
            super::log_sum_exp(&[f32::NEG_INFINITY; 3]),
            f64::NEG_INFINITY
        );
    }

    #[test]
    fn normaliser_and_top_k_in_one_pass_match_the_reference() {
        use crate::TopK;
        // Rounded logits make ties; lengths cover whole chunks, chunks and a tail, a tail only and
        // k > length. The f32 lane sums of 20k terms are good to ~1e-6 relative.
        for (n, k, seed) in [
            (20_000, 5, 1),
            (37, 10, 2),
            (16, 3, 3),
            (5, 8, 4),
            (1, 1, 5),
        ] {
            let logits: Vec<f32> = super::super::seeded_values(n, seed)
                .iter()
                .map(|x| (x * 40.0).round() / 4.0)
                .collect();
            let mut want = TopK::new(k);
            for (i, &l) in logits.iter().enumerate() {
                want.push(i as u32, l);
            }
            let mut got = TopK::new(k);
            let lse = super::log_sum_exp_top_k(&logits, Some(&mut got));
            assert_eq!(got.as_slice(), want.as_slice(), "n {n} k {k}");
            assert_eq!(lse, super::log_sum_exp(&logits));
            let exact = exact_log_sum_exp(&logits);
            assert!((lse - exact).abs() < 1e-5, "n {n}: {lse} vs {exact}");
        }
        let mut top = TopK::new(2);
        let lse =
            super::log_sum_exp_top_k(&[f32::NEG_INFINITY, 1.0, f32::INFINITY], Some(&mut top));
        assert_eq!(lse, f64::INFINITY);
        assert_eq!(top.as_slice()[0].id, 2);
    }
}
