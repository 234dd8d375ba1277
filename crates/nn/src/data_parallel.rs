//! Data-parallel training: each window's batch split over several devices, their gradients
//! summed on the first, where the clip and the optimizer step run.
//!
//! This is burn-train's `MultiDevice` strategy with the optimizer on the main device
//! (`MultiDeviceOptim::OptimMainDevice`), on burn's own pieces: every other device trains a
//! [`Module::fork`] of the model (the same parameter ids, its own autodiff graph), its
//! [`GradientsParams`] move to the main device (`to_device`) and a [`GradientsAccumulator`]
//! adds them. burn-train's `Learner` itself does not fit truncated BPTT (each device carries
//! its streams' recurrent state from window to window), and burn 0.22's all-reduce
//! (burn-collective) runs on CUDA only.
//!
//! Each device's loss is the mean over its own share of the batch, scaled by that share's
//! fraction of the batch's targets before its backward (`1/N` for a language model's equal
//! rows), so the sum is the gradient of the whole batch's mean: the same step as one device
//! taking the whole batch (within float rounding: the rows' sums run in another order).
//!
//! On the CPU the forwards run one after another in device order, since burn's random
//! generator is global (dropout draws its masks in a repeatable order, and a seeded run
//! repeats), and the backwards, most of a window's work, in parallel. Distinct GPUs each run
//! forward and backward on their own thread; replicas sharing a GPU run one after another.

use burn::module::Module;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::{Device, Tensor};

use crate::{Error, Result};

/// Devices that share a batch: `rows` streams each, the first holding the model.
pub struct DataParallel {
    devices: Vec<Device>,
    rows: usize,
}

impl DataParallel {
    /// `devices` (at least one) for batches of `batch` rows, which must split evenly.
    pub fn new(devices: &[Device], batch: usize) -> Result<Self> {
        let n = devices.len();
        if n == 0 {
            return Err(Error::Invalid(
                "no training device given; pass --devices 1 or more".into(),
            ));
        }
        if !batch.is_multiple_of(n) {
            return Err(Error::Invalid(format!(
                "batch_size {batch} does not split over {n} devices; make it a multiple of {n} or change --devices"
            )));
        }
        Ok(DataParallel {
            devices: devices.to_vec(),
            rows: batch / n,
        })
    }

    /// The device holding the model, the optimizer and the summed gradients.
    pub fn main(&self) -> &Device {
        &self.devices[0]
    }

    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Rows (streams) per device.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Device `d`'s rows of a `[batch, time]` row-major window: `[rows, time]`.
    pub fn slice<'a, T>(&self, d: usize, window: &'a [T], time: usize) -> &'a [T] {
        &window[d * self.rows * time..(d + 1) * self.rows * time]
    }

    /// One step's gradient, summed on the main device. `forward(d, replica, carried)` runs
    /// device `d`'s share of the batch on `replica` (a fork of `model` on that device; `model`
    /// itself when there is one device), starting from what device `d` carried out of the last
    /// step (a language model's recurrent state), and returns its mean loss `[1]`, that share's
    /// weight in the batch's mean (its fraction of the batch's targets) and what to carry on.
    /// The first `carried.len()` devices take part (a batch may have fewer sentences than
    /// there are devices).
    pub fn gradients<M, S, T, F>(&self, model: &M, carried: Vec<S>, forward: F) -> Window<T>
    where
        M: Module + Send + Sync,
        S: Send,
        T: Send,
        F: Fn(usize, &M, S) -> (Tensor<1>, f64, T) + Sync,
    {
        let n = carried.len();
        assert!(
            (1..=self.devices.len()).contains(&n),
            "1 to {} carried values, got {n}",
            self.devices.len()
        );
        let started = std::time::Instant::now();
        if n == 1 {
            let (loss, _, next) = forward(0, model, carried.into_iter().next().unwrap());
            let forward_s = started.elapsed().as_secs_f64();
            let grads = GradientsParams::from_grads(loss.backward(), model);
            return Window {
                grads,
                losses: vec![loss.detach()],
                carried: vec![next],
                forward_s,
            };
        }
        let main = self.main();
        // The backward of one device's loss, its gradient and loss moved to the main device.
        let backward = |replica: &M, loss: Tensor<1>, share: f64| {
            let grads = loss.clone().mul_scalar(share).backward();
            let grads = GradientsParams::from_grads(grads, replica).to_device(main, replica);
            (grads, loss.detach().to_device(main))
        };
        let fork = |d: usize| model.clone().fork(&self.devices[d]);
        let devices = &self.devices[..n];
        let on_cpu = devices.iter().all(crate::fused::on_cpu);
        let mut carried = carried.into_iter();
        // The main device computes on `model` itself, first, on this thread: burn initialises
        // parameters on first use, and a forward touches them in the order one device's run
        // does (a fork would touch them in the module's order and draw other initial weights).
        let (loss, share, first) = forward(0, model, carried.next().expect("n ≥ 1"));
        let mut forward_s = 0.0;
        let parts: Vec<(GradientsParams, Tensor<1>, T)> = if on_cpu {
            // The CPU: forwards in device order on this thread (burn's generator is global, so
            // dropout's masks come in a repeatable order), backwards in parallel.
            let forwarded: Vec<_> = carried
                .enumerate()
                .map(|(i, c)| {
                    let replica = fork(i + 1);
                    let (loss, share, next) = forward(i + 1, &replica, c);
                    (replica, loss, share, next)
                })
                .collect();
            forward_s = started.elapsed().as_secs_f64();
            let jobs = forwarded.into_iter().map(|(replica, loss, share, next)| {
                let backward = &backward;
                move || {
                    let (grads, loss) = backward(&replica, loss, share);
                    (grads, loss, next)
                }
            });
            beside(jobs, || {
                let (grads, loss) = backward(model, loss, share);
                (grads, loss, first)
            })
        } else if distinct(devices) {
            // Distinct GPUs: each other device forks and runs forward and backward on its own
            // thread, as burn-train's workers do (burn's fusion keeps a stream per thread).
            let jobs = carried.enumerate().map(|(i, c)| {
                let (backward, forward, fork) = (&backward, &forward, &fork);
                move || {
                    let replica = fork(i + 1);
                    let (loss, share, next) = forward(i + 1, &replica, c);
                    let (grads, loss) = backward(&replica, loss, share);
                    (grads, loss, next)
                }
            });
            beside(jobs, || {
                let (grads, loss) = backward(model, loss, share);
                (grads, loss, first)
            })
        } else {
            // Replicas sharing a GPU (a check of the machinery, not a speed-up: they share its
            // queue) run one after another: two threads driving one wgpu device gave wrong
            // gradients (weights off by 0.06 after 6 windows on lavapipe).
            let (grads, loss) = backward(model, loss, share);
            std::iter::once((grads, loss, first))
                .chain(carried.enumerate().map(|(i, c)| {
                    let replica = fork(i + 1);
                    let (loss, share, next) = forward(i + 1, &replica, c);
                    let (grads, loss) = backward(&replica, loss, share);
                    (grads, loss, next)
                }))
                .collect()
        };
        let mut sum = GradientsAccumulator::<M>::new();
        let (mut losses, mut next) = (Vec::new(), Vec::new());
        for (grads, loss, carried) in parts {
            sum.accumulate(model, grads);
            losses.push(loss);
            next.push(carried);
        }
        Window {
            grads: sum.grads(),
            losses,
            carried: next,
            forward_s,
        }
    }
}

/// What [`DataParallel::gradients`] returns for one step.
pub struct Window<T> {
    /// The gradient of the whole batch's mean loss, on the main device.
    pub grads: GradientsParams,
    /// Each device's mean loss `[1]` over its own rows, on the main device.
    pub losses: Vec<Tensor<1>>,
    /// What each device's `forward` returned besides its loss (what it carries to the next step).
    pub carried: Vec<T>,
    /// Host seconds until the last forward was queued (0 where a device's forward and backward
    /// run together on its thread).
    pub forward_s: f64,
}

/// True when no device appears twice.
fn distinct(devices: &[Device]) -> bool {
    devices
        .iter()
        .enumerate()
        .all(|(i, d)| !devices[..i].contains(d))
}

/// Runs each job on its own thread and `here` on this one: `[here's result, the jobs' in
/// order]`, a job's panic carried on.
fn beside<R: Send, J: FnOnce() -> R + Send>(
    jobs: impl Iterator<Item = J>,
    here: impl FnOnce() -> R,
) -> Vec<R> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs.map(|job| scope.spawn(job)).collect();
        std::iter::once(here())
            .chain(
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))),
            )
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_that_does_not_split_is_refused() {
        let cpu = Device::flex();
        let err = DataParallel::new(&[cpu.clone(), cpu.clone(), cpu.clone()], 20)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("batch_size 20") && err.contains("3 devices"),
            "{err}"
        );
        assert!(DataParallel::new(&[], 20).is_err());
        let dp = DataParallel::new(&[cpu.clone(), cpu], 4).unwrap();
        let window: Vec<u32> = (0..12).collect(); // [4, 3]
        assert_eq!(dp.slice(1, &window, 3), &[6, 7, 8, 9, 10, 11]);
    }
}
