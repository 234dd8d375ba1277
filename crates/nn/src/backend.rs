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
            Backend::Wgpu => Ok(Device::wgpu(burn::tensor::DeviceKind::default())),
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
}
