//! Kernel launches of a training window on burn's GPU backends (cargo feature `wgpu`).
//!
//! On a GPU a small LSTM's training window is bound by launches, not arithmetic: the composed
//! path issues a dozen kernels per layer and time step. This counts what a window really issues,
//! through CubeCL's launch observer (called on the issuing thread before each submit), so a test
//! can hold the count (`tests/launches.rs`, which prints it with `--nocapture`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::Device;
use cubecl::logging::{LaunchObservation, LaunchObserver};

use crate::lm::{ids_tensor, Ops};
use crate::LmConfig;

/// Launches by kernel name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Launches(pub BTreeMap<&'static str, usize>);

impl Launches {
    pub fn total(&self) -> usize {
        self.0.values().sum()
    }
}

#[derive(Default)]
struct Counter(Mutex<BTreeMap<&'static str, usize>>);

impl LaunchObserver for Counter {
    fn launched(&self, kernel: &'static str) {
        *self
            .0
            .lock()
            .expect("counter lock")
            .entry(kernel)
            .or_default() += 1;
    }
}

/// Runs `f` and counts the kernels launched meanwhile (on any thread: the observer is global,
/// so nothing else may run kernels at the same time).
pub fn count<R>(f: impl FnOnce() -> R) -> (R, Launches) {
    let counter = Arc::new(Counter::default());
    let watching = LaunchObservation::new(counter.clone());
    let out = f();
    drop(watching);
    let counts = std::mem::take(&mut *counter.0.lock().expect("counter lock"));
    (out, Launches(counts))
}

/// The loss a counted window trains with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowLoss {
    /// The full softmax, fused or composed.
    Full(Ops),
    /// The sampled softmax of `samples` words (the recurrent layers fused), its loss fused
    /// ([`crate::lm::sampled_cross_entropy`]) or composed of burn ops
    /// ([`crate::lm::sampled_cross_entropy_composed`]).
    Sampled { samples: usize, composed: bool },
}

/// What one truncated-BPTT training window issues with `loss` on `device`: forward, backward,
/// the clipping norm kept on the device, the SGD step, and one read of the loss. The window is
/// run three times and the third counted, so compilation and autotuning are not.
pub fn training_window(
    config: &LmConfig,
    loss: WindowLoss,
    vocab: usize,
    batch: usize,
    bptt: usize,
    device: &Device,
) -> Launches {
    device.seed(1);
    let mut model = config.init(vocab, device);
    let mut optim = SgdConfig::new().init();
    let ids: Vec<u32> = (0..batch * (bptt + 1))
        .map(|i| ((i * 7919 + 13) % vocab) as u32)
        .collect();
    let x = ids_tensor(&ids[..batch * bptt], batch, bptt, device);
    let y = ids_tensor(&ids[batch..batch * (bptt + 1)], batch, bptt, device);
    let counts: Vec<u64> = (0..vocab as u64).map(|w| 1 + vocab as u64 - w).collect();
    let sampler = Arc::new(crate::fused::Sampler::new(&counts, 0.75));
    let mut window = |model: crate::LanguageModel, seed: u64| {
        let state = model.initial_state(batch, device);
        let loss = match loss {
            WindowLoss::Full(ops) => model.loss_with(x.clone(), y.clone(), state, ops).0,
            WindowLoss::Sampled { samples, composed } => {
                let negatives = sampler.draw(samples, seed);
                if composed {
                    let (h, _) = model.hidden_with(x.clone(), state, Ops::for_device(device));
                    let (w, b) = model.output_layer();
                    crate::lm::sampled_cross_entropy_composed(
                        h.reshape([batch * bptt, config.d_hidden]),
                        w,
                        b,
                        y.clone().reshape([batch * bptt]),
                        &negatives,
                    )
                } else {
                    model
                        .loss_sampled(x.clone(), y.clone(), state, &negatives)
                        .0
                }
            }
        };
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let scale = crate::train::clip_scale(&model, &grads, 0.25, false);
        let model = crate::train::sgd_step(model, &mut optim, grads, 1.0, scale);
        let _ = loss.into_scalar::<f32>();
        model
    };
    for seed in 0..2 {
        model = window(model, seed);
    }
    let (_, launches) = count(|| window(model, 2));
    launches
}
