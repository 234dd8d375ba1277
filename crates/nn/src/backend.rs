//! Run-time choice of the burn backend. `flex` is always built; `ndarray` and `wgpu` exist when
//! the crate is compiled with the cargo feature of the same name.

use burn::tensor::Device;

/// A burn backend selectable with `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// burn's pure-Rust CPU backend (default).
    #[default]
    Flex,
    /// burn-ndarray (cargo feature `ndarray`).
    Ndarray,
    /// burn-wgpu (cargo feature `wgpu`); on machines without a GPU it runs through Mesa's
    /// software Vulkan driver.
    Wgpu,
}

impl std::str::FromStr for Backend {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "flex" => Ok(Backend::Flex),
            "ndarray" => Ok(Backend::Ndarray),
            "wgpu" => Ok(Backend::Wgpu),
            other => Err(crate::Error::Invalid(format!(
                "unknown backend {other:?}; choose flex, ndarray or wgpu"
            ))),
        }
    }
}

impl Backend {
    /// The name used by `--backend` and by the cargo feature.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Flex => "flex",
            Backend::Ndarray => "ndarray",
            Backend::Wgpu => "wgpu",
        }
    }

    /// The plain (inference) device of this backend, or an error naming the cargo feature to enable.
    pub fn device(self) -> crate::Result<Device> {
        match self {
            Backend::Flex => Ok(Device::flex()),
            #[cfg(feature = "ndarray")]
            #[allow(deprecated)]
            Backend::Ndarray => Ok(Device::ndarray()),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu => {
                let device = Device::wgpu(burn::tensor::DeviceKind::default());
                probe(&device)?;
                Ok(device)
            }
            #[allow(unreachable_patterns)]
            other => Err(crate::Error::Invalid(format!(
                "backend {name} is not compiled in; rebuild with `cargo build --release --features {name}`",
                name = other.name()
            ))),
        }
    }

    /// The same device with automatic differentiation, for training.
    pub fn autodiff_device(self) -> crate::Result<Device> {
        Ok(self.device()?.autodiff())
    }

    /// `n` devices with automatic differentiation for data-parallel training (`--devices`,
    /// [`crate::data_parallel`]): on wgpu the first `n` discrete GPUs (one: the default
    /// adapter); on the CPU backends `n` replicas on the one CPU device, each window's share
    /// in its own thread.
    pub fn autodiff_devices(self, n: usize) -> crate::Result<Vec<Device>> {
        match (self, n) {
            (_, 0) => Err(crate::Error::Invalid("--devices must be 1 or more".into())),
            #[cfg(feature = "wgpu")]
            (Backend::Wgpu, n) if n > 1 => (0..n)
                .map(|i| {
                    let device = Device::wgpu(burn::tensor::DeviceKind::DiscreteGpu(i));
                    if let Some(cause) = probe_cause(&device) {
                        let fix = match i {
                            0 => "pass --devices 1 to train on the default adapter".to_string(),
                            _ => format!("pass --devices {i} or fewer, one per GPU it has"),
                        };
                        return Err(crate::Error::Invalid(format!(
                            "--devices {n}: this machine has no usable discrete GPU {i} ({cause}); {fix}"
                        )));
                    }
                    Ok(device.autodiff())
                })
                .collect(),
            (_, n) => Ok(vec![self.autodiff_device()?; n]),
        }
    }
}

/// The wgpu device for a test, or `None` on a machine with no usable adapter: the test says why
/// and passes, so the workspace's tests run where no Vulkan driver is installed. `.ci/run`
/// installs Mesa's lavapipe and sets `FASTSOFTMAX_NO_SKIP=1`, which turns the skip into
/// a failure there.
#[cfg(feature = "wgpu")]
#[doc(hidden)]
pub fn wgpu_test_device() -> Option<Device> {
    let device = Device::wgpu(burn::tensor::DeviceKind::default());
    let Some(cause) = probe_cause(&device) else {
        return Some(device);
    };
    if std::env::var_os("FASTSOFTMAX_NO_SKIP").is_some_and(|v| v != "0") {
        panic!("FASTSOFTMAX_NO_SKIP is set but wgpu has no usable adapter: {cause}");
    }
    eprintln!(
        "skipped: wgpu has no usable adapter ({cause}); install mesa-vulkan-drivers to run it"
    );
    None
}

/// Runs a product and a sum on `device` and reads them back: a machine with no usable adapter
/// (no GPU driver, no Vulkan loader, an adapter that lacks what training needs) fails here with
/// a message, not mid-epoch with a panic.
#[cfg(feature = "wgpu")]
fn probe(device: &Device) -> crate::Result<()> {
    probe_cause(device).map_or(Ok(()), |cause| {
        Err(crate::Error::Invalid(format!(
            "--backend wgpu: no usable GPU adapter ({cause}); install the GPU's Vulkan driver \
             (Mesa's mesa-vulkan-drivers runs it on the CPU) or train on --backend flex"
        )))
    })
}

/// Why `device` cannot train, in one line, or `None` when it can ([`probe`]). The driver's own
/// panic text is kept out of the way.
#[cfg(feature = "wgpu")]
fn probe_cause(device: &Device) -> Option<String> {
    use burn::tensor::Tensor;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(|| {
        // Large enough for the reductions training runs (some adapters lack their f32 atomics).
        let x = Tensor::<2>::ones([256, 256], device);
        x.clone().matmul(x).sum().try_into_data()
    });
    std::panic::set_hook(hook);
    let cause = match result {
        Ok(Ok(data)) if data.as_slice::<f32>() == Ok(&[16_777_216.0][..]) => return None,
        Ok(Ok(data)) => format!("a test product gave {data}"),
        Ok(Err(e)) => e.to_string(),
        Err(panic) => panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "it panicked".into()),
    };
    Some(cause.lines().next().unwrap_or_default().trim().to_string())
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;

    /// The tests' device is there exactly where the adapter works: a `None` for a working one
    /// lets every `wgpu_*` test pass without running, as it did from 11d52d2 to ddc45a5.
    #[test]
    fn wgpu_test_device_is_there_where_the_adapter_works() {
        let works = probe_cause(&Device::wgpu(burn::tensor::DeviceKind::default())).is_none();
        assert_eq!(wgpu_test_device().is_some(), works);
    }
}
