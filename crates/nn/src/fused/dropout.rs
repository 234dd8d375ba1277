//! Dropout whose mask is drawn on the CPU from a counter-based hash.
//!
//! burn's `Dropout` draws a Bernoulli tensor from flex's ChaCha generator, one value at a time
//! on one thread, then multiplies twice (by the mask, by `1/(1 − p)`). On the Bible teacher
//! (dropout 0.3 on embeddings, attention weights and every residual branch) drawing took 22 %
//! of training time on 2 cores (`perf`, 2026-11-28). Here value `i` of a call's mask is kept
//! when 32 bits of SplitMix64 at `(key, i / 2)` fall below `(1 − p)·2³²`: one hash per pair
//! of values, the kept values already scaled, drawn in parallel chunks, so the op is one
//! product. The key mixes the seed ([`seed_dropout`]) and the call's number, so a seeded run
//! draws the same masks in the same order whatever the thread count. The Bible teacher trains
//! 1.35× faster with it (ARCHITECTURE.md, "Distillation").
//!
//! GPU devices keep burn's `Dropout`: their generator runs on the device.

use std::sync::Mutex;

use burn::nn::Dropout;
use burn::tensor::{Tensor, TensorData};
use rayon::prelude::*;

/// The stream of masks: its seed, and how many masks were drawn since.
static STREAM: Mutex<(u64, u64)> = Mutex::new((0, 0));

/// Values per parallel chunk (even, so a chunk starts on a pair).
const CHUNK: usize = 1 << 16;

/// Restarts the stream of masks: after the same seed, the same calls get the same masks.
/// `train-nmt` seeds it beside burn's generator (at the start and at every epoch).
pub fn seed_dropout(seed: u64) {
    *STREAM.lock().unwrap_or_else(|e| e.into_inner()) = (seed, 0);
}

/// `module`'s dropout of `x`, as burn defines it: `x` itself outside training, on a device
/// without autodiff, or at `p = 0`; otherwise each value kept with probability `1 − p` and
/// scaled by `1/(1 − p)`, the mask from the stream above on the CPU, burn's own on a GPU.
pub fn dropout<const D: usize>(module: &Dropout, x: Tensor<D>) -> Tensor<D> {
    let device = x.device();
    if !module.training.is_enabled() || !device.is_autodiff() || module.prob == 0.0 {
        return x;
    }
    if !super::on_cpu(&device) {
        return module.forward(x);
    }
    let shape = x.shape();
    let mask = mask(shape.num_elements(), module.prob);
    x * Tensor::from_data(TensorData::new(mask, shape), &device)
}

/// The next mask of `n` values for drop probability `prob`.
fn mask(n: usize, prob: f64) -> Vec<f32> {
    let key = {
        let mut stream = STREAM.lock().unwrap_or_else(|e| e.into_inner());
        stream.1 += 1;
        key(stream.0, stream.1)
    };
    fill(key, n, prob)
}

/// The key of the `call`-th mask after seed `seed`.
fn key(seed: u64, call: u64) -> u64 {
    splitmix64(seed ^ splitmix64(call))
}

/// The mask of `key`: `n` values, each `1/(1 − prob)` or 0.
fn fill(key: u64, n: usize, prob: f64) -> Vec<f32> {
    let keep = 1.0 - prob;
    // P(u < threshold) = keep for u uniform over the 2³² values of 32 bits.
    let threshold = (keep * 4_294_967_296.0) as u64;
    let scale = (1.0 / keep) as f32;
    let mut out = vec![0f32; n];
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(chunk, values)| {
            let first_pair = (chunk * CHUNK / 2) as u64;
            for (j, pair) in values.chunks_mut(2).enumerate() {
                let bits = splitmix64(key.wrapping_add(first_pair + j as u64));
                for (half, v) in pair.iter_mut().enumerate() {
                    let u = (bits >> (32 * half)) as u32 as u64;
                    *v = if u < threshold { scale } else { 0.0 };
                }
            }
        });
    out
}

/// SplitMix64's output function at position `x` of its sequence (Steele et al. 2014): every
/// input bit reaches every output bit, so consecutive counters give independent-looking words.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_keep_the_asked_share_scaled_and_differ_by_call_and_seed() {
        // (The stream itself is shared by every test of this binary: these use its keys.)
        let a = fill(key(7, 1), 200_001, 0.3);
        assert_eq!(a, fill(key(7, 1), 200_001, 0.3), "a key gives one mask");
        assert_ne!(
            a,
            fill(key(7, 2), 200_001, 0.3),
            "each call draws a new mask"
        );
        assert_ne!(
            a,
            fill(key(8, 1), 200_001, 0.3),
            "each seed draws new masks"
        );
        let scale = (1.0 / 0.7f64) as f32;
        assert!(a.iter().all(|&v| v == 0.0 || v == scale));
        let kept = a.iter().filter(|&&v| v != 0.0).count() as f64 / a.len() as f64;
        // 200k Bernoulli(0.7) draws: the share's standard deviation is about 0.001.
        assert!((kept - 0.7).abs() < 0.005, "kept share {kept}");
        // Neighbours (the two halves of one hash, and consecutive hashes) are not correlated.
        let both = a.windows(2).filter(|w| w[0] != 0.0 && w[1] != 0.0).count() as f64
            / (a.len() - 1) as f64;
        assert!((both - 0.49).abs() < 0.006, "both kept {both}");
    }
}
