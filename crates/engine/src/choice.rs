//! The run-time choice of a backend, in one type: what a user asks for (`--backend
//! auto|cpu|gpu|gpu:ADAPTER`), and the one place that turns it into a backend ([`AnyBackend`]),
//! so that "auto" means the same in every command: the GPU when a hardware adapter is there,
//! else the CPU backend, with a note saying so. An adapter wgpu reports as a CPU device
//! (lavapipe, SwiftShader, WARP: a rasterizer in software) is never what `auto` picks: it runs
//! the same kernels far slower than the CPU backend (on lavapipe a probe that takes the CPU
//! backend 34 s ran over 45 min). `gpu` still takes it, with a note.

use std::fmt;
use std::str::FromStr;

use crate::cpu::CpuBackend;
use crate::gpu::GpuBackend;

/// Whether a wgpu adapter is a software rasterizer running on the CPU.
pub fn is_software(device_type: &str) -> bool {
    device_type == "Cpu"
}

/// Which backend to run on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// The GPU when a hardware adapter is there, else the CPU backend (with a note).
    #[default]
    Auto,
    /// The CPU backend.
    Cpu,
    /// A GPU: the adapter whose name contains `adapter`, or the default one.
    Gpu {
        /// Part of the adapter's name (`gpu:llvmpipe`), or none for the default adapter.
        adapter: Option<String>,
    },
}

impl BackendChoice {
    /// The GPU's default adapter.
    pub const GPU: BackendChoice = BackendChoice::Gpu { adapter: None };
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendChoice::Auto => f.write_str("auto"),
            BackendChoice::Cpu => f.write_str("cpu"),
            BackendChoice::Gpu { adapter: None } => f.write_str("gpu"),
            BackendChoice::Gpu {
                adapter: Some(name),
            } => write!(f, "gpu:{name}"),
        }
    }
}

/// Why a backend name is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a backend: auto, cpu, gpu or gpu:ADAPTER")]
pub struct NotABackend(pub String);

impl FromStr for BackendChoice {
    type Err = NotABackend;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "gpu" => Ok(BackendChoice::GPU),
            _ => match s.strip_prefix("gpu:").filter(|n| !n.trim().is_empty()) {
                Some(name) => Ok(BackendChoice::Gpu {
                    adapter: Some(name.to_owned()),
                }),
                None => Err(NotABackend(s.to_owned())),
            },
        }
    }
}

/// The GPU on the adapter whose name contains `adapter`, or on the default adapter
/// (`WGPU_ADAPTER_NAME` honoured) when none is named.
#[cfg(not(target_arch = "wasm32"))]
pub fn open_gpu(adapter: Option<&str>) -> Result<GpuBackend, crate::EngineError> {
    match adapter {
        None => GpuBackend::new_blocking(),
        Some(name) => GpuBackend::on_adapter_blocking(Some(name)),
    }
}

/// One of the two backends, chosen at run time.
pub enum AnyBackend {
    /// The CPU backend.
    Cpu(CpuBackend),
    /// The GPU backend.
    Gpu(Box<GpuBackend>),
}

impl AnyBackend {
    /// The backend `choice` asks for (native: GPUs are opened blocking). `Auto` without an
    /// adapter gives the CPU backend and tells `note` why; an explicit GPU that cannot be
    /// had is an error.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(
        choice: &BackendChoice,
        note: &mut dyn FnMut(&str),
    ) -> Result<Self, crate::EngineError> {
        match choice {
            BackendChoice::Cpu => Ok(AnyBackend::Cpu(CpuBackend::new())),
            BackendChoice::Gpu { adapter } => {
                let gpu = open_gpu(adapter.as_deref())?;
                note_software(&gpu, note);
                Ok(AnyBackend::Gpu(Box::new(gpu)))
            }
            BackendChoice::Auto => match auto_gpu(note) {
                Some(g) => Ok(AnyBackend::Gpu(Box::new(g))),
                None => Ok(AnyBackend::Cpu(CpuBackend::new())),
            },
        }
    }
}

impl BackendChoice {
    /// `Cpu` or `Gpu` for code that makes backends again and again (a grid's runs): `Auto`
    /// becomes the GPU when its default adapter opens, else the CPU backend (told to `note`).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn resolve(&self, note: &mut dyn FnMut(&str)) -> BackendChoice {
        match self {
            BackendChoice::Auto => match auto_gpu(note) {
                Some(_) => BackendChoice::GPU,
                None => BackendChoice::Cpu,
            },
            BackendChoice::Gpu { adapter } => {
                if let Ok(gpu) = open_gpu(adapter.as_deref()) {
                    note_software(&gpu, note);
                }
                self.clone()
            }
            other => other.clone(),
        }
    }
}

/// The default adapter's GPU for `auto`: none when there is no adapter or when it is a
/// software rasterizer (each told to `note`).
#[cfg(not(target_arch = "wasm32"))]
fn auto_gpu(note: &mut dyn FnMut(&str)) -> Option<GpuBackend> {
    use crate::Device;
    match GpuBackend::new_blocking() {
        Ok(g) if is_software(&g.info().device_type) => {
            note(&format!(
                "the only GPU adapter, {}, is a software rasterizer on the CPU (slower than the \
                 CPU backend); using the CPU backend (--backend gpu takes it anyway)",
                g.info().adapter
            ));
            None
        }
        Ok(g) => Some(g),
        Err(e) => {
            note(&format!("no GPU adapter ({e}); using the CPU backend"));
            None
        }
    }
}

/// Tells `note` when an explicitly asked-for GPU is a software rasterizer.
#[cfg(not(target_arch = "wasm32"))]
fn note_software(gpu: &GpuBackend, note: &mut dyn FnMut(&str)) {
    use crate::Device;
    let info = gpu.info();
    if is_software(&info.device_type) {
        note(&format!(
            "adapter {} is a software rasterizer on the CPU: correct, but slower than --backend cpu",
            info.adapter
        ));
    }
}

/// Evaluates `$body` with `$make` bound to a maker of the backend a resolved choice names
/// ([`BackendChoice::resolve`]): `&|| Result<backend, E>` for any `E: From<EngineError>`,
/// once per backend type (for code that opens a fresh backend per run).
#[macro_export]
macro_rules! with_backend_maker {
    ($resolved:expr, $make:ident => $body:expr) => {
        match $resolved {
            $crate::BackendChoice::Gpu { adapter } => {
                let $make = &|| $crate::open_gpu(adapter.as_deref()).map_err(Into::into);
                $body
            }
            _ => {
                let $make = &|| Ok($crate::cpu::CpuBackend::new());
                $body
            }
        }
    };
}

/// Evaluates `$body` with `$b` bound to the backend inside an [`AnyBackend`] (by value: the
/// GPU unboxed), once per backend type: the one dispatch from a run-time choice to the
/// generic code.
#[macro_export]
macro_rules! with_backend {
    ($any:expr, $b:ident => $body:expr) => {
        match $any {
            $crate::AnyBackend::Cpu($b) => $body,
            $crate::AnyBackend::Gpu(boxed) => {
                let $b = *boxed;
                $body
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        for s in ["auto", "cpu", "gpu", "gpu:llvmpipe"] {
            let c: BackendChoice = s.parse().unwrap();
            assert_eq!(c.to_string(), s);
        }
        assert_eq!("gpu".parse::<BackendChoice>().unwrap(), BackendChoice::GPU);
        for bad in ["", "GPU", "gpu:", "tpu", "gpu: "] {
            let e = bad.parse::<BackendChoice>().unwrap_err();
            assert!(e.to_string().contains("auto, cpu, gpu"), "{e}");
        }
    }
}
