//! Fast exponentials: [`exp_nonpositive`] and the softmax normaliser [`log_sum_exp`] built on it.

/// Log-softmax normaliser `log Σ exp(logits)`, computed stably: `m + log Σ exp(x − m)`.
/// The exponentials use [`exp_nonpositive`] over 16 independent f32 lanes (which the compiler
/// vectorises), so the normaliser of 10k logits costs a few µs, not the ~50 µs of libm's exp;
/// the lanes are summed in f64.
pub fn log_sum_exp(logits: &[f32]) -> f64 {
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !m.is_finite() {
        return m as f64;
    }
    let mut lanes = [0.0f32; 16];
    let mut chunks = logits.chunks_exact(16);
    for c in &mut chunks {
        for (a, &x) in lanes.iter_mut().zip(c) {
            *a += exp_nonpositive(x - m);
        }
    }
    let tail: f64 = chunks
        .remainder()
        .iter()
        .map(|&x| exp_nonpositive(x - m) as f64)
        .sum();
    let s: f64 = lanes.iter().map(|&a| a as f64).sum::<f64>() + tail;
    m as f64 + s.ln()
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
        let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let exact = m + logits
            .iter()
            .map(|&x| (x as f64 - m).exp())
            .sum::<f64>()
            .ln();
        assert!((super::log_sum_exp(&logits) - exact).abs() < 1e-6);
        assert_eq!(
            super::log_sum_exp(&[f32::NEG_INFINITY; 3]),
            f64::NEG_INFINITY
        );
    }
}
