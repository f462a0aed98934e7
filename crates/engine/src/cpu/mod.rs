//! The CPU backend: plain, readable Rust. It is the **oracle** every GPU kernel is tested
//! against (formats from `hif8lab-format`, scaling and statistics from `hif8lab-scaling`,
//! GEMM from the `gemm` crate) and the fallback where WebGPU is missing.

//!
//! The op families mirror `gpu/`: `tensor.rs`, `quant.rs`, `model.rs`, `optimizer.rs`
//! implement [`crate::TensorOps`], [`crate::QuantOps`], [`crate::ModelOps`] and
//! [`crate::OptimizerOps`]; `matmul.rs` and `ops.rs` hold the plain loops they call.

mod attention;
pub mod bf16;
mod math;
mod matmul;
mod model;
mod ops;
mod optimizer;
pub use optimizer::{SUM_SQUARES_GROUPS, sum_squares_groups};
mod par;
mod quant;
mod simd;
mod tensor;

/// Deterministic inputs for the CPU backend's unit tests.
#[cfg(test)]
mod test_data {
    /// `n` values spread over (−span/2, span/2) from an LCG seeded with `seed`.
    pub(crate) fn values(n: usize, seed: u64, span: f32) -> Vec<f32> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * span
            })
            .collect()
    }

    /// The bit patterns of `v`, for bit-for-bit comparisons.
    pub(crate) fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }
}

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use hif8lab_format::FakeQuant;
use hif8lab_scaling::QuantizerState;

use crate::bank::{BankConfig, StatsSnapshot};
use crate::{BackendInfo, Counters, Device, EngineError};

/// A CPU tensor: a flat f32 vector behind a lock (outputs are written through `&`), and the
/// access stamp it was last taken with (see `CpuTensor::key`).
#[derive(Debug, Default)]
pub struct CpuTensor {
    data: Mutex<Vec<f32>>,
    stamp: AtomicU64,
}

/// Access stamps: unique across every tensor and every access.
static STAMPS: AtomicU64 = AtomicU64::new(1);

impl CpuTensor {
    fn new(data: Vec<f32>) -> Self {
        CpuTensor {
            data: Mutex::new(data),
            stamp: AtomicU64::new(STAMPS.fetch_add(1, Ordering::Relaxed)),
        }
    }

    /// Locks the contents for reading or writing; every such access takes a fresh stamp.
    fn get(&self) -> std::sync::MutexGuard<'_, Vec<f32>> {
        let guard = self
            .data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.stamp
            .store(STAMPS.fetch_add(1, Ordering::Relaxed), Ordering::Release);
        guard
    }

    /// Locks the contents for reading only: no new stamp, since nothing can change through
    /// it (the ops that only read a tensor this way keep the copies of it valid).
    fn read(&self) -> TensorRead<'_> {
        TensorRead(
            self.data
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// This tensor as it is now: its address and the stamp of its last access that could
    /// write (unchanged key, unchanged contents). What a fake-quantized copy and a measured
    /// amax are keyed by.
    fn key(&self) -> (usize, u64) {
        (
            std::ptr::from_ref(self) as usize,
            self.stamp.load(Ordering::Acquire),
        )
    }

    /// A copy of the contents.
    pub fn to_vec(&self) -> Vec<f32> {
        self.read().clone()
    }
}

/// Read-only access to a tensor's contents ([`CpuTensor::read`]).
struct TensorRead<'a>(std::sync::MutexGuard<'a, Vec<f32>>);

impl std::ops::Deref for TensorRead<'_> {
    type Target = Vec<f32>;
    fn deref(&self) -> &Vec<f32> {
        &self.0
    }
}

struct BankInner {
    states: Vec<QuantizerState>,
    measured: Vec<f32>,
    /// Per quantizer: the tensor its last amax was measured on ([`CpuTensor::key`]) and
    /// the non-finite count of that pass, for the statistics that follow on the same tensor
    /// (no second amax pass).
    measured_on: Vec<Option<((usize, u64), u64)>>,
    est: Vec<Vec<f32>>,
    stats: Vec<StatsSnapshot>,
    histogram: Option<crate::BankHistogram>,
    /// Per quantizer: the fake-quantized copy its last statistics pass wrote (the codec runs
    /// once per call; a fused matmul takes the copy while its input is untouched).
    quantized: Vec<Option<Quantized>>,
}

/// A fake-quantized copy of a tensor: of which tensor ([`CpuTensor::key`]), at which
/// scale.
struct Quantized {
    key: (usize, u64),
    scale_bits: u32,
    data: Vec<f32>,
}

impl BankInner {
    /// Takes quantizer `q`'s copy if it is of `t` as it is now, at `scale`.
    fn take_quantized(&mut self, q: usize, t: &CpuTensor, scale: f32) -> Option<Quantized> {
        let slot = self.quantized.get_mut(q)?;
        let fresh = slot
            .as_ref()
            .is_some_and(|c| c.key == t.key() && c.scale_bits == scale.to_bits());
        if fresh { slot.take() } else { None }
    }

    /// Quantizer `q`'s measured amax and non-finite count if they are of `t` as it is now.
    fn measured_of(&self, q: usize, t: &CpuTensor) -> Option<(f32, u64)> {
        match self.measured_on.get(q)? {
            Some((key, nonfinite)) if *key == t.key() => Some((self.measured[q], *nonfinite)),
            _ => None,
        }
    }
}

/// A CPU quantizer bank: one [`QuantizerState`] per quantizer.
pub struct CpuBank {
    config: BankConfig,
    quant: FakeQuant,
    k: usize,
    active: usize,
    inner: Mutex<BankInner>,
}

impl CpuBank {
    fn lock(&self) -> std::sync::MutexGuard<'_, BankInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn active_scale(&self, quantizer: usize) -> Result<f32, EngineError> {
        self.config.check_index(quantizer)?;
        Ok(self.lock().states[quantizer].scales()[self.active])
    }

    fn initial_est(&self) -> Vec<f32> {
        let rule = self.config.plan.rule();
        vec![rule.implied_est(1.0); self.k]
    }
}

/// The CPU backend.
#[derive(Debug, Default)]
pub struct CpuBackend {
    launched: AtomicU64,
    /// FLOPs (2·m·n·k per product) of the matmuls so far: on the f32 GEMM, on the bf16 kernel.
    gemm_flops: [AtomicU64; 2],
    /// Per-op time, when profiling ([`CpuBackend::set_profiling`]).
    profile: Mutex<Option<std::collections::BTreeMap<&'static str, OpTime>>>,
    /// The bf16 kernel its products may use, where not [`bf16::detect`]'s
    /// ([`CpuBackend::with_bf16_kernel`]).
    bf16: Option<Option<bf16::Bf16Kernel>>,
}

/// Calls and time of one op, summed ([`CpuBackend::profile`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OpTime {
    /// Calls.
    pub calls: u64,
    /// Seconds spent in them.
    pub seconds: f64,
}

/// Times one op while it lives (when profiling).
pub(crate) struct OpTimer<'a> {
    backend: &'a CpuBackend,
    op: &'static str,
    #[cfg(not(target_arch = "wasm32"))]
    start: Option<std::time::Instant>,
}

impl Drop for OpTimer<'_> {
    fn drop(&mut self) {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(start) = self.start {
            let dt = start.elapsed().as_secs_f64();
            let mut p = self
                .backend
                .profile
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(map) = p.as_mut() {
                let e = map.entry(self.op).or_default();
                e.calls += 1;
                e.seconds += dt;
            }
        }
        let _ = (self.backend, self.op);
    }
}

impl CpuBackend {
    /// A CPU backend.
    pub fn new() -> Self {
        CpuBackend::default()
    }

    /// This backend with its bf16 products on `kernel` (`None`: on the f32 path) instead of
    /// [`bf16::detect`]'s: to compare kernels in one process.
    pub fn with_bf16_kernel(mut self, kernel: Option<bf16::Bf16Kernel>) -> Self {
        self.bf16 = Some(kernel);
        self
    }

    /// The bf16 kernel its products run on where a product asks for one.
    pub fn bf16_kernel(&self) -> Option<bf16::Bf16Kernel> {
        self.bf16.unwrap_or_else(bf16::detect)
    }

    /// Counts one operation that stands for a GPU dispatch, and times it while profiling.
    fn launched(&self, op: &'static str) -> OpTimer<'_> {
        self.launched.fetch_add(1, Ordering::Relaxed);
        self.timed(op)
    }

    /// Times one operation while profiling (tensor creation, uploads, copies and reads,
    /// which are no dispatch on a GPU but take time here too).
    fn timed(&self, op: &'static str) -> OpTimer<'_> {
        #[cfg(not(target_arch = "wasm32"))]
        let start = self
            .profile
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
            .then(std::time::Instant::now);
        OpTimer {
            backend: self,
            op,
            #[cfg(not(target_arch = "wasm32"))]
            start,
        }
    }

    /// Starts (clearing earlier figures) or stops timing every op (natively; the browser has
    /// no clock fine enough and records nothing).
    pub fn set_profiling(&self, on: bool) {
        *self
            .profile
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            on.then(std::collections::BTreeMap::new);
    }

    /// FLOPs (2·m·n·k per product) of every matmul so far: `(f32 GEMM, bf16 kernel)`.
    pub fn gemm_flops(&self) -> (u64, u64) {
        (
            self.gemm_flops[0].load(Ordering::Relaxed),
            self.gemm_flops[1].load(Ordering::Relaxed),
        )
    }

    /// Counts a matmul's FLOPs on the path that ran it.
    fn count_gemm(&self, spec: &crate::MatmulSpec, bf16: bool) {
        let flops = 2 * spec.batch * spec.m * spec.n * spec.k;
        self.gemm_flops[usize::from(bf16)].fetch_add(flops as u64, Ordering::Relaxed);
    }

    /// Per op: calls and seconds since profiling started, slowest first.
    pub fn profile(&self) -> Vec<(&'static str, OpTime)> {
        let mut v: Vec<(&'static str, OpTime)> = self
            .profile
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|m| m.iter().map(|(k, v)| (*k, *v)).collect())
            .unwrap_or_default();
        v.sort_by(|a, b| b.1.seconds.total_cmp(&a.1.seconds));
        v
    }
}

impl Device for CpuBackend {
    type Tensor = CpuTensor;

    type Bank = CpuBank;

    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: "cpu",
            adapter: cpu_name(),
            // The browser's CPU fallback is WebAssembly, not native code.
            api: if cfg!(target_arch = "wasm32") {
                "wasm".into()
            } else {
                "native".into()
            },
            device_type: "Cpu".into(),
            memory: crate::MemoryLimits::host(),
        }
    }

    fn flush(&self) {}

    fn counters(&self) -> Counters {
        Counters {
            dispatches: self.launched.load(Ordering::Relaxed),
            ..Counters::default()
        }
    }
}

/// Sets the process's allocator up for a training run's tensors (natively with glibc; a no-op
/// elsewhere): requests up to 64 MiB come from the heap, which grows 64 MiB beyond each
/// request. With glibc's defaults every 4–32 MiB temporary is mapped and unmapped afresh
/// (page faults, and a TLB shootdown to the other cores at each unmap) until its dynamic
/// threshold has caught up, well into the first step (figures in docs/cpu-performance.md).
/// Call it once at startup, before the first allocations that matter.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes glibc's malloc parameters (both values are in range);
    // it is called before any thread of ours allocates tensors.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

/// Threads of the CPU backend's parallel loops and GEMM (rayon's global pool natively; 1 in
/// the browser, whose wasm has no threads).
pub fn threads() -> usize {
    #[cfg(not(target_arch = "wasm32"))]
    return rayon::current_num_threads();
    #[cfg(target_arch = "wasm32")]
    1
}

/// Sets the thread count (`--threads N`), before any CPU work. Results of an op never depend
/// on it: parallel loops split work into fixed pieces (rows, heads) each computed exactly as
/// the sequential loop would, and GEMM's blocking does not depend on the thread count.
#[cfg(not(target_arch = "wasm32"))]
pub fn set_threads(n: usize) -> Result<(), crate::EngineError> {
    build_pool(Some(n)).map_err(|e| crate::EngineError::Threads {
        threads: n,
        message: e.to_string(),
    })
}

/// Stack of each pool thread: the main thread's usual 8 MiB, since [`on_pool`] runs whole
/// commands (parsers included) on one of them.
#[cfg(not(target_arch = "wasm32"))]
const POOL_STACK: usize = 8 << 20;

#[cfg(not(target_arch = "wasm32"))]
fn build_pool(threads: Option<usize>) -> Result<(), rayon::ThreadPoolBuildError> {
    let mut b = rayon::ThreadPoolBuilder::new().stack_size(POOL_STACK);
    if let Some(n) = threads {
        b = b.num_threads(n);
    }
    b.build_global()
}

/// Runs `f` on a thread of the CPU backend's pool (building the pool with one thread per
/// core if [`set_threads`] did not), so the parallel loops `f` reaches split from a pool
/// thread: their pieces go to that thread's own queue, where the other threads take them,
/// instead of being handed in from outside, which wakes a thread and blocks the caller on
/// a latch for every op (about 10 µs each; a step of the `smoke` preset has 300 ops).
/// Results do not change: the pieces are the same.
#[cfg(not(target_arch = "wasm32"))]
pub fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    // Already built (set_threads, or an earlier call): that pool is used.
    let _ = build_pool(None);
    rayon::scope(|_| f())
}

/// The CPU model name where the OS tells it, else the architecture.
pub fn cpu_name() -> String {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(name) = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.trim().to_owned())
    }) {
        return name;
    }
    std::env::consts::ARCH.to_owned()
}
