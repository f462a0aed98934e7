//! The wgpu backend: the device context, pooled buffers, recording and asynchronous readback.
//!
//! One file per WGSL kernel (`qdq`, `amax`, `quant_stats`, `histogram`,
//! `scale_update`, `matmul`, `embedding`, `rmsnorm`, `rope`, `attention`, `swiglu`,
//! `cross_entropy`, `elementwise`, `sum_squares`, `adamw`, `ste_mask`) declares its kernel for
//! the registry ([`KERNELS`]) and holds its launcher; the backend traits' GPU side is
//! generated from their declarations (`op_family!` in the crate root), forwarding to those
//! launchers or to the buffer commands of `tensor.rs` and `quant.rs`. `kernel.rs` builds the pipelines and records dispatches
//! (uniform ring, cached bind groups).
//!
//! Work is recorded into one command encoder and submitted on [`Device::flush`] (or when a
//! readback needs it), so a training step can be one submission. The backend either creates
//! its own device (honouring `WGPU_BACKEND` and `WGPU_ADAPTER_NAME`) or adopts a device and
//! queue handed in (eframe's, required in the browser).

// wgpu objects are Send + Sync natively but not in the browser, where there are no threads.
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod adamw;
pub mod amax;
pub mod attention;
pub mod attention_cached;
mod bank_layout;
pub mod cross_entropy;
pub mod elementwise;
pub mod embedding;
pub mod histogram;
pub mod kernel;
pub mod matmul;
pub mod qdq;
pub(crate) mod quant;
pub use quant::bank_bytes;
pub mod quant_stats;
pub mod rmsnorm;
pub mod rope;
pub mod scale_update;
pub mod ste_mask;
pub mod sum_squares;
pub mod swiglu;
pub(crate) mod tensor;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytemuck::{Pod, Zeroable};
use hif8lab_format::{FakeQuant, Format, Overflow, Rounding};
use wgpu::util::DeviceExt;

use crate::bank::BankConfig;
use crate::{BackendInfo, Counters, Device, EngineError, Readback};
use kernel::{Bind, Kernel, Pipelines, Recorder};

/// Every kernel of the engine: pipelines are built from this list and `tests/shaders.rs`
/// checks each declaration against its WGSL.
pub const KERNELS: [&Kernel; 17] = [
    &qdq::KERNEL,
    &amax::KERNEL,
    &quant_stats::KERNEL,
    &histogram::KERNEL,
    &scale_update::KERNEL,
    &matmul::KERNEL,
    &embedding::KERNEL,
    &rmsnorm::KERNEL,
    &rope::KERNEL,
    &attention::KERNEL,
    &attention_cached::KERNEL,
    &swiglu::KERNEL,
    &cross_entropy::KERNEL,
    &elementwise::KERNEL,
    &sum_squares::KERNEL,
    &adamw::KERNEL,
    &ste_mask::KERNEL,
];

/// Quantizer configuration as the kernels see it; keep in sync with `QuantParams` in
/// `shaders/common/quant.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct QuantParams {
    /// 0 HiF8, 1 E4M3, 2 E5M2.
    pub format: u32,
    /// 0 non-finite, 1 saturate.
    pub overflow: u32,
    /// 0 nearest, 1 hybrid.
    pub rounding: u32,
    /// Seed of hybrid rounding.
    pub seed: u32,
}

/// The layout of [`QuantParams`], checked against `shaders/common/quant.wgsl`.
pub const QUANT_PARAMS: kernel::ParamsLayout = crate::params_layout!(QuantParams {
    format,
    overflow,
    rounding,
    seed
});

impl From<FakeQuant> for QuantParams {
    fn from(q: FakeQuant) -> Self {
        let (rounding, seed) = match q.rounding {
            Rounding::Nearest => (0, 0),
            Rounding::Hybrid { seed } => (1, seed),
        };
        QuantParams {
            format: match q.format {
                Format::HiF8 => 0,
                Format::E4M3 => 1,
                Format::E5M2 => 2,
            },
            overflow: match q.overflow {
                Overflow::Inf => 0,
                Overflow::Saturate => 1,
            },
            rounding,
            seed,
        }
    }
}

type Pool = Mutex<HashMap<u64, Vec<wgpu::Buffer>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A GPU tensor: a pooled storage buffer of at least `len` f32 (returned to the pool on drop).
pub struct GpuTensor {
    buffer: Option<wgpu::Buffer>,
    len: usize,
    pool: Arc<Pool>,
}

impl GpuTensor {
    fn buffer(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("buffer present until drop")
    }

    fn bytes(&self) -> u64 {
        self.len as u64 * 4
    }

    /// The tensor's elements (its buffer may be larger).
    fn bind(&self) -> Bind<'_> {
        Bind {
            buffer: self.buffer(),
            size: wgpu::BufferSize::new(self.bytes()),
        }
    }
}

impl Drop for GpuTensor {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            lock(&self.pool).entry(b.size()).or_default().push(b);
        }
    }
}

/// A GPU quantizer bank (layout in `shaders/scale_update.wgsl` and `quant_stats.wgsl`).
pub struct GpuBank {
    config: BankConfig,
    quant: QuantParams,
    k: usize,
    cap: usize,
    active: usize,
    estimators: wgpu::Buffer,
    history: wgpu::Buffer,
    meta: wgpu::Buffer,
    amax_bits: wgpu::Buffer,
    est: wgpu::Buffer,
    scales: wgpu::Buffer,
    stats: wgpu::Buffer,
    hist: wgpu::Buffer,
    /// Scratch of `quant_stats`: one (signal, noise) pair per workgroup of a call.
    partials: wgpu::Buffer,
}

impl GpuBank {
    /// Index of a quantizer's active scale in the scale array.
    fn active_scale_index(&self, quantizer: usize) -> u32 {
        (quantizer * self.k + self.active) as u32
    }
}

/// The wgpu backend.
pub struct GpuBackend {
    device: wgpu::Device,
    queue: wgpu::Queue,
    adapter: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    pipelines: Pipelines,
    recorder: Mutex<Recorder>,
    pool: Arc<Pool>,
    blocking_syncs: Arc<AtomicU64>,
    one_scale: wgpu::Buffer,
    /// `sum_squares`' per-workgroup sums (one call's, read by its `finish`).
    sum_partials: wgpu::Buffer,
}

impl crate::MemoryLimits {
    /// What a GPU device with `limits` can hold: one tensor at most the smaller of
    /// `max_storage_buffer_binding_size` and `max_buffer_size`; a CPU adapter (lavapipe,
    /// SwiftShader) keeps its buffers in host memory.
    pub fn of_gpu(limits: &wgpu::Limits, device_type: wgpu::DeviceType) -> Self {
        crate::MemoryLimits {
            host_bytes: crate::host_memory_available(),
            device_bytes: None,
            device_in_host: device_type == wgpu::DeviceType::Cpu,
            max_tensor_bytes: Some(
                limits
                    .max_storage_buffer_binding_size
                    .min(limits.max_buffer_size),
            ),
        }
    }
}

impl GpuBackend {
    /// Creates a device on the adapter named by `WGPU_ADAPTER_NAME` (substring, case
    /// insensitive) or the default one, on the backends allowed by `WGPU_BACKEND`.
    pub async fn new() -> Result<Self, EngineError> {
        let wanted = std::env::var("WGPU_ADAPTER_NAME")
            .ok()
            .filter(|s| !s.is_empty());
        Self::on_adapter(wanted.as_deref()).await
    }

    /// Creates a device on the adapter whose name contains `name` (case insensitive), or on
    /// the default adapter when `name` is `None`; on the backends allowed by `WGPU_BACKEND`.
    pub async fn on_adapter(name: Option<&str>) -> Result<Self, EngineError> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = match name {
            Some(name) => {
                let needle = name.to_lowercase();
                let adapters = instance.enumerate_adapters(wgpu::Backends::all()).await;
                let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
                adapters
                    .into_iter()
                    .find(|a| a.get_info().name.to_lowercase().contains(&needle))
                    .ok_or_else(|| {
                        EngineError::NoAdapter(format!(
                            "WGPU_ADAPTER_NAME={name} matches none of {names:?}"
                        ))
                    })?
            }
            None => instance
                .request_adapter(&wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::HighPerformance,
                    ..Default::default()
                })
                .await
                .map_err(|e| {
                    EngineError::NoAdapter(format!(
                        "{e} (on Linux without a GPU install lavapipe: apt-get install mesa-vulkan-drivers libvulkan1)"
                    ))
                })?,
        };
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("hif8lab-engine"),
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| EngineError::Device(e.to_string()))?;
        Ok(Self::from_device(device, queue, adapter.get_info()))
    }

    /// [`GpuBackend::new`], blocking (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new_blocking() -> Result<Self, EngineError> {
        pollster::block_on(Self::new())
    }

    /// [`GpuBackend::on_adapter`], blocking (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn on_adapter_blocking(name: Option<&str>) -> Result<Self, EngineError> {
        pollster::block_on(Self::on_adapter(name))
    }

    /// Whether a device with `limits` can run every kernel, or what it lacks. Devices created
    /// elsewhere (eframe's, a browser's WebGL fallback) may have less than the engine needs.
    pub fn check_limits(limits: &wgpu::Limits) -> Result<(), EngineError> {
        let needs = [
            (
                "max_storage_buffers_per_shader_stage",
                limits.max_storage_buffers_per_shader_stage,
                8,
            ),
            (
                "max_compute_invocations_per_workgroup",
                limits.max_compute_invocations_per_workgroup,
                256,
            ),
            (
                "max_compute_workgroup_size_x",
                limits.max_compute_workgroup_size_x,
                256,
            ),
            (
                "max_compute_workgroup_storage_size",
                limits.max_compute_workgroup_storage_size,
                8192,
            ),
        ];
        match needs.iter().find(|(_, have, need)| have < need) {
            Some((name, have, need)) => Err(EngineError::Limit {
                limit: name,
                have: *have,
                need: *need,
            }),
            None => Ok(()),
        }
    }

    /// Starts adopting a device and queue created elsewhere with its kernels compiled one
    /// at a time ([`Preparing::advance`]), so a UI that cannot block (the browser's frame
    /// loop) keeps drawing and can say how far it got.
    pub fn preparing(
        device: wgpu::Device,
        queue: wgpu::Queue,
        adapter: wgpu::AdapterInfo,
    ) -> Preparing {
        Preparing {
            device,
            queue,
            adapter,
            pipelines: Pipelines::empty(),
            next: 0,
            confirmed: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Adopts a device and queue created elsewhere (eframe's `wgpu_render_state`).
    pub fn from_device(
        device: wgpu::Device,
        queue: wgpu::Queue,
        adapter: wgpu::AdapterInfo,
    ) -> Self {
        let pipelines = Pipelines::new(&device, &KERNELS);
        Self::from_parts(device, queue, adapter, pipelines)
    }

    /// A backend on `device` with its `pipelines` built.
    fn from_parts(
        device: wgpu::Device,
        queue: wgpu::Queue,
        adapter: wgpu::AdapterInfo,
        pipelines: Pipelines,
    ) -> Self {
        let limits = device.limits();
        let recorder = Mutex::new(Recorder::new(&device));
        let one_scale = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("unit scale"),
            contents: bytemuck::cast_slice(&[1.0f32; 4]),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let sum_partials = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sum_squares partials"),
            size: (crate::cpu::SUM_SQUARES_GROUPS * 4) as u64,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        GpuBackend {
            device,
            queue,
            adapter,
            limits,
            pipelines,
            recorder,
            pool: Arc::new(Mutex::new(HashMap::new())),
            blocking_syncs: Arc::new(AtomicU64::new(0)),
            one_scale,
            sum_partials,
        }
    }

    /// Its device, queue and adapter description (shared handles), e.g. to prepare a second
    /// backend on the same device.
    pub fn device_parts(&self) -> (wgpu::Device, wgpu::Queue, wgpu::AdapterInfo) {
        (
            self.device.clone(),
            self.queue.clone(),
            self.adapter.clone(),
        )
    }

    /// The device limits in force.
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// The adapter description.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.adapter
    }

    /// Records into the current submission's encoder.
    fn with_encoder<R>(&self, f: impl FnOnce(&mut wgpu::CommandEncoder) -> R) -> R {
        f(lock(&self.recorder).encoder(&self.device))
    }

    /// Records one dispatch of `kernel`'s `entry`: `params` in binding 0, `buffers` bound by
    /// the names the kernel declares.
    fn dispatch<P: Pod>(
        &self,
        kernel: &Kernel,
        entry: &str,
        params: &P,
        buffers: &[(&str, Bind<'_>)],
        groups: (u32, u32, u32),
    ) {
        lock(&self.recorder).dispatch(
            &self.device,
            &self.queue,
            &self.pipelines,
            kernel,
            entry,
            params,
            buffers,
            groups,
        );
    }

    /// Records a grid-stride reduction of `x` into a bank slot that is zeroed first: `clear`
    /// is (buffer, byte offset, bytes or `None` for the rest); `x` binds as `x`, the rest as
    /// named in `out`.
    fn reduce<P: Pod>(
        &self,
        kernel: &Kernel,
        wg: u32,
        params: &P,
        x: &GpuTensor,
        out: &[(&str, Bind<'_>)],
        clear: (&wgpu::Buffer, u64, Option<u64>),
    ) {
        self.with_encoder(|e| e.clear_buffer(clear.0, clear.1, clear.2));
        let mut buffers = vec![("x", x.bind())];
        buffers.extend_from_slice(out);
        let groups = kernel::grid_stride_groups(x.len, wg, kernel::REDUCTION_GROUPS);
        self.dispatch(kernel, "main", params, &buffers, (groups, 1, 1));
    }

    fn tensor(&self, len: usize) -> Result<GpuTensor, EngineError> {
        let bytes = len as u64 * 4;
        let limit = self.limits.max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(EngineError::TooLarge {
                what: format!("tensor of {len} f32"),
                bytes,
                limit,
            });
        }
        // Size classes: powers of two, so buffers are reused across similar shapes.
        let class = bytes.max(256).next_power_of_two().min(limit.max(256));
        let class = class.max(bytes);
        let reused = lock(&self.pool).get_mut(&class).and_then(Vec::pop);
        let buffer = match reused {
            Some(b) => b,
            None => self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("tensor"),
                size: class,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        };
        Ok(GpuTensor {
            buffer: Some(buffer),
            len,
            pool: self.pool.clone(),
        })
    }

    /// Reads `ranges` of buffers (each `(buffer, offset, bytes)`) into one staging buffer and
    /// converts the bytes when they arrive.
    fn readback<T: Send + 'static>(
        &self,
        ranges: &[(&wgpu::Buffer, u64, u64)],
        convert: impl FnOnce(&[u8]) -> T + Send + 'static,
    ) -> Readback<T> {
        let total: u64 = ranges.iter().map(|r| r.2).sum::<u64>().max(4);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback staging"),
            size: total,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.with_encoder(|encoder| {
            let mut at = 0;
            for (buffer, offset, bytes) in ranges {
                if *bytes > 0 {
                    encoder.copy_buffer_to_buffer(buffer, *offset, &staging, at, *bytes);
                }
                at += bytes;
            }
        });
        self.flush();
        let (readback, slot) = Readback::pending(self.poller());
        let mapped = staging.clone();
        staging.map_async(wgpu::MapMode::Read, .., move |result| {
            let value = result
                .map_err(|e| EngineError::Readback(e.to_string()))
                .and_then(|()| {
                    let view = mapped
                        .get_mapped_range(..)
                        .map_err(|e| EngineError::Readback(e.to_string()))?;
                    let value = convert(&view);
                    drop(view);
                    Ok(value)
                });
            mapped.unmap();
            if let Ok(mut s) = slot.lock() {
                *s = Some(value);
            }
        });
        readback
    }

    /// The device poll of a readback: blocking counts as a sync. In the browser polling
    /// does nothing (the browser delivers completions), so there is none.
    #[cfg(not(target_arch = "wasm32"))]
    fn poller(&self) -> Option<crate::readback::Poller> {
        let device = self.device.clone();
        let syncs = self.blocking_syncs.clone();
        Some(Box::new(move |block: bool| {
            if block {
                syncs.fetch_add(1, Ordering::Relaxed);
                let _ = device.poll(wgpu::PollType::wait_indefinitely());
            } else {
                let _ = device.poll(wgpu::PollType::Poll);
            }
        }))
    }

    #[cfg(target_arch = "wasm32")]
    fn poller(&self) -> Option<crate::readback::Poller> {
        None
    }

    /// Polls the device without blocking so finished readbacks deliver (native; the browser
    /// does this by itself).
    pub fn poll(&self) {
        let _ = self.device.poll(wgpu::PollType::Poll);
    }

    /// Runs the plain copy kernel (the bandwidth reference of the benchmark).
    pub fn copy_kernel(&self, src: &GpuTensor, dst: &GpuTensor) -> Result<(), EngineError> {
        elementwise::launch_copy(self, src, dst)
    }

    /// Blocks until all submitted work is done (benchmarks; counts as a blocking sync).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait_idle(&self) {
        self.flush();
        self.blocking_syncs.fetch_add(1, Ordering::Relaxed);
        let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
    }
}

impl Device for GpuBackend {
    type Tensor = GpuTensor;

    type Bank = GpuBank;

    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: "gpu",
            adapter: self.adapter.name.clone(),
            api: format!("{:?}", self.adapter.backend),
            device_type: format!("{:?}", self.adapter.device_type),
            memory: crate::MemoryLimits::of_gpu(&self.limits, self.adapter.device_type),
        }
    }

    fn flush(&self) {
        let mut guard = lock(&self.recorder);
        self.submit_locked(&mut guard);
    }

    fn counters(&self) -> Counters {
        let recorder = lock(&self.recorder);
        Counters {
            submits: recorder.submits,
            blocking_syncs: self.blocking_syncs.load(Ordering::Relaxed),
            dispatches: recorder.dispatches,
            bind_groups_created: recorder.bind_groups_created,
        }
    }
}

impl GpuBackend {
    /// Submits the recorded encoder. Called with the recording lock held, so no queue write
    /// of another thread can slip between taking the commands and submitting them (queue
    /// writes land before the next submission: a write issued in that gap would overtake
    /// commands recorded before it).
    fn submit_locked(&self, recorder: &mut Recorder) {
        recorder.submit(&self.queue);
    }

    /// Writes `bytes` into `buffer` at `offset`, ordered after every command recorded so far.
    fn write_ordered(&self, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
        let mut guard = lock(&self.recorder);
        self.submit_locked(&mut guard);
        self.queue.write_buffer(buffer, offset, bytes);
    }
}

/// A [`GpuBackend`] being prepared kernel by kernel (from [`GpuBackend::preparing`]). Each
/// step builds one kernel's pipelines and asks the queue to call back once the device has
/// processed them (after an empty submission); nothing waits. Browsers compile pipelines in
/// their GPU process, so this is where the seconds before a first step go, and counting the
/// confirmed kernels tells the truth about progress.
pub struct Preparing {
    device: wgpu::Device,
    queue: wgpu::Queue,
    adapter: wgpu::AdapterInfo,
    pipelines: Pipelines,
    /// Kernels whose pipelines have been created.
    next: usize,
    /// Kernels the device has confirmed (set by the queue callbacks).
    confirmed: Arc<AtomicU64>,
}

impl Preparing {
    /// Kernels to compile in all.
    pub fn total(&self) -> usize {
        KERNELS.len()
    }

    /// Kernels compiled and confirmed by the device so far.
    pub fn compiled(&self) -> usize {
        (self.confirmed.load(Ordering::Acquire) as usize).min(self.next)
    }

    /// Kernels whose pipelines have been created (confirmed or not).
    pub fn created(&self) -> usize {
        self.next
    }

    /// Builds the next kernel, if any is left; returns whether every kernel is compiled and
    /// confirmed. Never blocks.
    pub fn advance(&mut self) -> bool {
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.device.poll(wgpu::PollType::Poll);
        let Some(kernel) = KERNELS.get(self.next) else {
            return self.compiled() == self.total();
        };
        self.pipelines.add(&self.device, kernel);
        self.next += 1;
        let done = self.confirmed.clone();
        let n = self.next as u64;
        self.queue.submit(std::iter::empty());
        self.queue.on_submitted_work_done(move || {
            done.fetch_max(n, Ordering::AcqRel);
        });
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.device.poll(wgpu::PollType::Poll);
        false
    }

    /// The backend, once [`Preparing::advance`] has returned true (earlier, the kernels not
    /// yet built are built here, blocking).
    pub fn finish(mut self) -> GpuBackend {
        for k in KERNELS.iter().skip(self.next) {
            self.pipelines.add(&self.device, k);
        }
        GpuBackend::from_parts(self.device, self.queue, self.adapter, self.pipelines)
    }
}
