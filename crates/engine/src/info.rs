//! What a backend reports about itself: its name and memory, the counters, a step's readback.

use super::*;

/// What [`crate::QuantOps::read_step`] returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepReadback {
    /// The tensors, in the order asked.
    pub tensors: Vec<Vec<f32>>,
    /// The bank, when asked.
    pub bank: Option<BankSnapshot>,
}

/// Who computes: shown in reports and benchmarks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendInfo {
    /// `cpu` or `gpu`.
    pub kind: &'static str,
    /// Adapter or CPU name.
    pub adapter: String,
    /// Graphics API (`Vulkan`, `Metal`, `Dx12`, `BrowserWebGpu`) or `native` for the CPU.
    pub api: String,
    /// Device type (`DiscreteGpu`, `IntegratedGpu`, `Cpu`, …).
    pub device_type: String,
    /// What the backend can hold, for refusing runs that cannot fit before allocating.
    pub memory: MemoryLimits,
}

/// Memory a backend can use, as far as it can be known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Bytes of host memory available now (`MemAvailable`, bounded by the cgroup limit), or
    /// the wasm32 address space; `None` where it cannot be read.
    pub host_bytes: Option<u64>,
    /// Memory of a separate device in bytes; `None` when there is none or the API does not
    /// say (wgpu does not report video memory).
    pub device_bytes: Option<u64>,
    /// Whether tensors live in host memory: the CPU backend, and adapters that run on the
    /// CPU (lavapipe, SwiftShader).
    pub device_in_host: bool,
    /// Largest single tensor in bytes (GPU: the smaller of `max_storage_buffer_binding_size`
    /// and `max_buffer_size`); `None` on the CPU.
    pub max_tensor_bytes: Option<u64>,
}

impl MemoryLimits {
    /// Where tensors live in host memory (the CPU backend): what the host has available.
    pub fn host() -> Self {
        MemoryLimits {
            host_bytes: host_memory_available(),
            device_bytes: None,
            device_in_host: true,
            max_tensor_bytes: None,
        }
    }
}

/// Host memory available to this process now, in bytes: `MemAvailable` of /proc/meminfo,
/// bounded by a cgroup v2 limit (`memory.max` − `memory.current`) where one is set; the 4 GiB
/// address space of wasm32; `None` elsewhere.
pub fn host_memory_available() -> Option<u64> {
    #[cfg(target_arch = "wasm32")]
    {
        Some(4 << 30)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
        let available = meminfo.lines().find_map(|l| {
            let kb = l.strip_prefix("MemAvailable:")?.trim().strip_suffix("kB")?;
            kb.trim().parse::<u64>().ok().map(|kb| kb * 1024)
        })?;
        let read = |name: &str| -> Option<u64> {
            std::fs::read_to_string(format!("/sys/fs/cgroup/{name}"))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        let cgroup =
            read("memory.max").map(|max| max.saturating_sub(read("memory.current").unwrap_or(0)));
        Some(cgroup.map_or(available, |c| c.min(available)))
    }
}

/// Counters of host/device interaction, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Command submissions.
    pub submits: u64,
    /// Times the host blocked waiting for the device.
    pub blocking_syncs: u64,
    /// Kernel launches (GPU dispatches; CPU operations that stand for one).
    pub dispatches: u64,
    /// Bind groups created (GPU; 0 on the CPU).
    pub bind_groups_created: u64,
}
