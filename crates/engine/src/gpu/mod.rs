//! The wgpu backend: one module per WGSL kernel (`copy`, `qdq`, `amax`, `quant_stats`,
//! `scale_update`, `matmul`), the device context, pooled buffers and asynchronous readback.
//!
//! Work is recorded into one command encoder and submitted on [`Backend::flush`] (or when a
//! readback needs it), so a training step can be one submission. The backend either creates
//! its own device (honouring `WGPU_BACKEND` and `WGPU_ADAPTER_NAME`) or adopts a device and
//! queue handed in (eframe's, required in the browser).

// wgpu objects are Send + Sync natively but not in the browser, where there are no threads.
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod adamw;
pub mod amax;
pub mod attention;
pub mod copy;
pub mod cross_entropy;
pub mod elementwise;
pub mod embedding;
pub mod histogram;
pub mod kernel;
pub mod matmul;
pub mod qdq;
pub mod quant_stats;
pub mod rmsnorm;
pub mod rope;
pub mod scale_update;
pub mod ste_mask;
pub mod sum_squares;
pub mod swiglu;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytemuck::{Pod, Zeroable};
use hif8lab_format::{FakeQuant, Format, Overflow, Rounding};
use wgpu::util::DeviceExt;

use crate::bank::{BankConfig, BankSnapshot, QuantizerSnapshot, StatsSnapshot};
use crate::{
    AdamHyper, AttentionShape, Backend, BackendInfo, Counters, EngineError, MatmulSpec, Readback,
    RopeShape, StepReadback, at_least, check_matmul, rows_of, same_len,
};

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

    fn binding(&self) -> wgpu::BindingResource<'_> {
        wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: self.buffer(),
            offset: 0,
            size: wgpu::BufferSize::new(self.bytes()),
        })
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
}

impl GpuBank {
    /// Index of a quantizer's active scale in the scale array.
    fn active_scale_index(&self, quantizer: usize) -> u32 {
        (quantizer * self.k + self.active) as u32
    }
}

struct Pipelines {
    copy: wgpu::ComputePipeline,
    qdq: wgpu::ComputePipeline,
    amax: wgpu::ComputePipeline,
    quant_stats: wgpu::ComputePipeline,
    histogram: wgpu::ComputePipeline,
    scale_update: wgpu::ComputePipeline,
    matmul: wgpu::ComputePipeline,
    embedding: [wgpu::ComputePipeline; 2],
    rmsnorm: [wgpu::ComputePipeline; 3],
    rope: wgpu::ComputePipeline,
    attention: [wgpu::ComputePipeline; 3],
    swiglu: [wgpu::ComputePipeline; 2],
    cross_entropy: wgpu::ComputePipeline,
    elementwise: [wgpu::ComputePipeline; 2],
    sum_squares: wgpu::ComputePipeline,
    adamw: wgpu::ComputePipeline,
    ste_mask: wgpu::ComputePipeline,
}

fn array<const N: usize>(v: Vec<wgpu::ComputePipeline>) -> [wgpu::ComputePipeline; N] {
    v.try_into()
        .unwrap_or_else(|_| unreachable!("one pipeline per listed entry point"))
}

impl Pipelines {
    fn new(device: &wgpu::Device) -> Self {
        use kernel::{pipeline, pipelines, source};
        Pipelines {
            copy: pipeline(device, "copy", &source(copy::WGSL, false)),
            qdq: pipeline(device, "qdq", &source(qdq::WGSL, true)),
            amax: pipeline(device, "amax", &source(amax::WGSL, false)),
            quant_stats: pipeline(device, "quant_stats", &source(quant_stats::WGSL, true)),
            histogram: pipeline(device, "histogram", histogram::WGSL),
            scale_update: pipeline(device, "scale_update", &source(scale_update::WGSL, true)),
            matmul: pipeline(device, "matmul", &source(matmul::WGSL, true)),
            embedding: array(pipelines(
                device,
                "embedding",
                embedding::WGSL,
                &["main", "backward"],
            )),
            rmsnorm: array(pipelines(
                device,
                "rmsnorm",
                rmsnorm::WGSL,
                &["main", "backward_x", "backward_w"],
            )),
            rope: pipeline(device, "rope", rope::WGSL),
            attention: array(pipelines(
                device,
                "attention",
                attention::WGSL,
                &["main", "backward_q", "backward_kv"],
            )),
            swiglu: array(pipelines(
                device,
                "swiglu",
                swiglu::WGSL,
                &["main", "backward"],
            )),
            cross_entropy: pipeline(device, "cross_entropy", cross_entropy::WGSL),
            elementwise: array(pipelines(
                device,
                "elementwise",
                elementwise::WGSL,
                &["add_inplace", "scale_inplace"],
            )),
            sum_squares: pipeline(device, "sum_squares", sum_squares::WGSL),
            adamw: pipeline(device, "adamw", adamw::WGSL),
            ste_mask: pipeline(device, "ste_mask", ste_mask::WGSL),
        }
    }
}

/// The wgpu backend.
pub struct GpuBackend {
    device: wgpu::Device,
    queue: wgpu::Queue,
    adapter: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    pipelines: Pipelines,
    encoder: Mutex<Option<wgpu::CommandEncoder>>,
    pool: Arc<Pool>,
    submits: AtomicU64,
    blocking_syncs: Arc<AtomicU64>,
    one_scale: wgpu::Buffer,
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
    pub fn check_limits(limits: &wgpu::Limits) -> Result<(), String> {
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
            Some((name, have, need)) => Err(format!(
                "the device allows {name} = {have}, the engine needs {need}"
            )),
            None => Ok(()),
        }
    }

    /// Adopts a device and queue created elsewhere (eframe's `wgpu_render_state`).
    pub fn from_device(
        device: wgpu::Device,
        queue: wgpu::Queue,
        adapter: wgpu::AdapterInfo,
    ) -> Self {
        let limits = device.limits();
        let pipelines = Pipelines::new(&device);
        let one_scale = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("unit scale"),
            contents: bytemuck::cast_slice(&[1.0f32; 4]),
            usage: wgpu::BufferUsages::STORAGE,
        });
        GpuBackend {
            device,
            queue,
            adapter,
            limits,
            pipelines,
            encoder: Mutex::new(None),
            pool: Arc::new(Mutex::new(HashMap::new())),
            submits: AtomicU64::new(0),
            blocking_syncs: Arc::new(AtomicU64::new(0)),
            one_scale,
        }
    }

    /// The device limits in force.
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// The adapter description.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.adapter
    }

    fn with_encoder<R>(&self, f: impl FnOnce(&wgpu::Device, &mut wgpu::CommandEncoder) -> R) -> R {
        let mut guard = lock(&self.encoder);
        let encoder = guard.get_or_insert_with(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("hif8lab step"),
                })
        });
        f(&self.device, encoder)
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
        self.with_encoder(|_, encoder| {
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
        same_len("copy_kernel", src.len, dst.len)?;
        let params = copy::CopyParams {
            n: src.len as u32,
            _pad: [0; 3],
        };
        self.with_encoder(|device, encoder| {
            kernel::dispatch(
                device,
                encoder,
                &self.pipelines.copy,
                "copy",
                &params,
                &[src.binding(), dst.binding()],
                (
                    kernel::grid_stride_groups(src.len, copy::WG, kernel::ELEMENTWISE_GROUPS),
                    1,
                    1,
                ),
            );
        });
        Ok(())
    }

    /// Blocks until all submitted work is done (benchmarks; counts as a blocking sync).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait_idle(&self) {
        self.flush();
        self.blocking_syncs.fetch_add(1, Ordering::Relaxed);
        let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
    }

    fn bank_binding(buffer: &wgpu::Buffer) -> wgpu::BindingResource<'_> {
        buffer.as_entire_binding()
    }
}

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

impl Backend for GpuBackend {
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

    fn upload(&self, data: &[f32]) -> Result<GpuTensor, EngineError> {
        let t = self.tensor(data.len())?;
        self.write(&t, data)?;
        Ok(t)
    }

    fn zeros(&self, len: usize) -> Result<GpuTensor, EngineError> {
        let t = self.tensor(len)?;
        if len > 0 {
            self.with_encoder(|_, encoder| encoder.clear_buffer(t.buffer(), 0, Some(t.bytes())));
        }
        Ok(t)
    }

    fn len(&self, t: &GpuTensor) -> usize {
        t.len
    }

    fn write(&self, t: &GpuTensor, data: &[f32]) -> Result<(), EngineError> {
        same_len("write", t.len, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.write_ordered(t.buffer(), 0, bytemuck::cast_slice(data));
        Ok(())
    }

    fn read(&self, t: &GpuTensor) -> Readback<Vec<f32>> {
        self.readback(&[(t.buffer(), 0, t.bytes())], |bytes| {
            bytemuck::cast_slice::<u8, f32>(bytes).to_vec()
        })
    }

    fn copy(&self, src: &GpuTensor, dst: &GpuTensor) -> Result<(), EngineError> {
        same_len("copy", src.len, dst.len)?;
        if src.len > 0 {
            self.with_encoder(|_, encoder| {
                encoder.copy_buffer_to_buffer(src.buffer(), 0, dst.buffer(), 0, src.bytes());
            });
        }
        Ok(())
    }

    fn new_bank(&self, config: &BankConfig) -> Result<GpuBank, EngineError> {
        config.validate()?;
        let specs = config.scaling.estimators();
        let k = specs.len();
        let q = config.quantizers;
        let cap = config.scaling.history_len();
        let descs: Vec<scale_update::EstimatorDesc> = specs
            .iter()
            .map(|s| scale_update::EstimatorDesc::from_spec(s, config.scaling.window))
            .collect();
        let rule = config.scaling.rule();
        let init = |label: &str, contents: &[u8]| -> Result<wgpu::Buffer, EngineError> {
            let limit = self.limits.max_storage_buffer_binding_size;
            if contents.len() as u64 > limit {
                return Err(EngineError::TooLarge {
                    what: format!("bank {label}"),
                    bytes: contents.len() as u64,
                    limit,
                });
            }
            Ok(self
                .device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some(label),
                    contents,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                }))
        };
        let zero_words = |n: usize| vec![0u32; n.max(4)];
        let bank = GpuBank {
            quant: config.quant().into(),
            k,
            cap,
            active: config.scaling.active_index(),
            estimators: init("bank estimators", bytemuck::cast_slice(&descs))?,
            history: init("bank history", bytemuck::cast_slice(&zero_words(q * cap)))?,
            meta: init("bank meta", bytemuck::cast_slice(&zero_words(q * 2)))?,
            amax_bits: init("bank amax", bytemuck::cast_slice(&zero_words(q)))?,
            est: init(
                "bank est",
                bytemuck::cast_slice(&vec![rule.implied_est(1.0); q * k]),
            )?,
            scales: init("bank scales", bytemuck::cast_slice(&vec![1.0f32; q * k]))?,
            stats: init(
                "bank stats",
                bytemuck::cast_slice(&zero_words(q * quant_stats::slot_words(k))),
            )?,
            hist: init(
                "bank histogram",
                bytemuck::cast_slice(&zero_words(histogram::WORDS)),
            )?,
            config: config.clone(),
        };
        Ok(bank)
    }

    fn set_scales(&self, bank: &GpuBank, scales: &[f32]) -> Result<(), EngineError> {
        same_len("set_scales", scales.len(), bank.config.quantizers * bank.k)?;
        let rule = bank.config.scaling.rule();
        let est: Vec<f32> = scales.iter().map(|s| rule.implied_est(*s)).collect();
        self.write_ordered(&bank.scales, 0, bytemuck::cast_slice(scales));
        self.write_ordered(&bank.est, 0, bytemuck::cast_slice(&est));
        Ok(())
    }

    fn qdq(
        &self,
        x: &GpuTensor,
        out: &GpuTensor,
        bank: &GpuBank,
        quantizer: usize,
    ) -> Result<(), EngineError> {
        bank.config.check_index(quantizer)?;
        same_len("qdq", x.len, out.len)?;
        let params = qdq::QdqParams {
            n: x.len as u32,
            scale_index: bank.active_scale_index(quantizer),
            _pad: [0; 2],
            quant: bank.quant,
        };
        self.with_encoder(|device, encoder| {
            kernel::dispatch(
                device,
                encoder,
                &self.pipelines.qdq,
                "qdq",
                &params,
                &[x.binding(), out.binding(), Self::bank_binding(&bank.scales)],
                (
                    kernel::grid_stride_groups(x.len, qdq::WG, kernel::ELEMENTWISE_GROUPS),
                    1,
                    1,
                ),
            );
        });
        Ok(())
    }

    fn amax(&self, x: &GpuTensor, bank: &GpuBank, quantizer: usize) -> Result<(), EngineError> {
        bank.config.check_index(quantizer)?;
        let params = amax::AmaxParams {
            n: x.len as u32,
            slot: quantizer as u32,
            _pad: [0; 2],
        };
        self.with_encoder(|device, encoder| {
            encoder.clear_buffer(&bank.amax_bits, quantizer as u64 * 4, Some(4));
            kernel::dispatch(
                device,
                encoder,
                &self.pipelines.amax,
                "amax",
                &params,
                &[x.binding(), Self::bank_binding(&bank.amax_bits)],
                (
                    kernel::grid_stride_groups(x.len, amax::WG, kernel::REDUCTION_GROUPS),
                    1,
                    1,
                ),
            );
        });
        Ok(())
    }

    fn scale_update(&self, bank: &GpuBank, first: usize, count: usize) -> Result<(), EngineError> {
        if count == 0 {
            return Ok(());
        }
        bank.config.check_index(first + count - 1)?;
        self.record_scale_update(bank, first, count, 0);
        Ok(())
    }

    fn reset(&self, bank: &GpuBank) -> Result<(), EngineError> {
        self.record_scale_update(bank, 0, bank.config.quantizers, 1);
        Ok(())
    }

    fn quant_stats(
        &self,
        x: &GpuTensor,
        bank: &GpuBank,
        quantizer: usize,
    ) -> Result<(), EngineError> {
        bank.config.check_index(quantizer)?;
        let stride = quant_stats::slot_words(bank.k);
        let params = quant_stats::StatsParams {
            n: x.len as u32,
            quantizer: quantizer as u32,
            k: bank.k as u32,
            active: bank.active as u32,
            stride: stride as u32,
            overflow_threshold: bank.config.scaling.format.facts().overflow_threshold,
            underflow_max: bank.config.scaling.format.facts().underflow_max,
            _pad: 0,
            quant: bank.quant,
        };
        self.with_encoder(|device, encoder| {
            encoder.clear_buffer(
                &bank.stats,
                (quantizer * stride * 4) as u64,
                Some((stride * 4) as u64),
            );
            kernel::dispatch(
                device,
                encoder,
                &self.pipelines.quant_stats,
                "quant_stats",
                &params,
                &[
                    x.binding(),
                    Self::bank_binding(&bank.est),
                    Self::bank_binding(&bank.scales),
                    Self::bank_binding(&bank.stats),
                ],
                (
                    kernel::grid_stride_groups(x.len, quant_stats::WG, kernel::REDUCTION_GROUPS),
                    1,
                    1,
                ),
            );
        });
        Ok(())
    }

    fn histogram(
        &self,
        x: &GpuTensor,
        bank: &GpuBank,
        quantizer: usize,
    ) -> Result<(), EngineError> {
        bank.config.check_index(quantizer)?;
        let [a, b, c] = hif8lab_scaling::stats::quarter_thresholds();
        let params = histogram::HistParams {
            n: x.len as u32,
            scale_index: bank.active_scale_index(quantizer),
            quantizer: quantizer as u32,
            _pad: 0,
            quarter: [a, b, c, 0],
        };
        self.with_encoder(|device, encoder| {
            encoder.clear_buffer(&bank.hist, 0, None);
            kernel::dispatch(
                device,
                encoder,
                &self.pipelines.histogram,
                "histogram",
                &params,
                &[
                    x.binding(),
                    Self::bank_binding(&bank.scales),
                    Self::bank_binding(&bank.hist),
                ],
                (
                    kernel::grid_stride_groups(x.len, histogram::WG, kernel::REDUCTION_GROUPS),
                    1,
                    1,
                ),
            );
        });
        Ok(())
    }

    fn read_bank(&self, bank: &GpuBank) -> Readback<BankSnapshot> {
        let layout = BankLayout::of(bank);
        self.readback(&layout.ranges(bank), move |bytes| {
            layout.decode(&words(bytes))
        })
    }

    fn read_step(&self, tensors: &[&GpuTensor], bank: Option<&GpuBank>) -> Readback<StepReadback> {
        let mut ranges: Vec<(&wgpu::Buffer, u64, u64)> =
            tensors.iter().map(|t| (t.buffer(), 0, t.bytes())).collect();
        let lens: Vec<usize> = tensors.iter().map(|t| t.len).collect();
        let layout = bank.map(BankLayout::of);
        if let (Some(layout), Some(bank)) = (&layout, bank) {
            ranges.extend(layout.ranges(bank));
        }
        self.readback(&ranges, move |bytes| {
            let all = words(bytes);
            let mut at = 0;
            let tensors = lens
                .iter()
                .map(|n| {
                    let v = all[at..at + n].iter().map(|w| f32::from_bits(*w)).collect();
                    at += n;
                    v
                })
                .collect();
            StepReadback {
                tensors,
                bank: layout.map(|l| l.decode(&all[at..])),
            }
        })
    }

    fn restore_bank(&self, bank: &GpuBank, snapshot: &BankSnapshot) -> Result<(), EngineError> {
        let q = bank.config.quantizers;
        let (k, cap) = (bank.k, bank.cap);
        same_len("restore_bank quantizers", snapshot.quantizers.len(), q)?;
        let mut history = vec![0.0f32; q * cap];
        let mut meta = vec![0u32; q * 2];
        let mut est = Vec::with_capacity(q * k);
        let mut scales = Vec::with_capacity(q * k);
        for (i, s) in snapshot.quantizers.iter().enumerate() {
            same_len("restore_bank scales", s.scales.len(), k)?;
            same_len("restore_bank est", s.est.len(), k)?;
            let kept = &s.history[s.history.len().saturating_sub(cap)..];
            history[i * cap..i * cap + kept.len()].copy_from_slice(kept);
            meta[2 * i] = kept.len() as u32;
            meta[2 * i + 1] = (kept.len() % cap) as u32;
            est.extend_from_slice(&s.est);
            scales.extend_from_slice(&s.scales);
        }
        self.write_ordered(&bank.history, 0, bytemuck::cast_slice(&history));
        self.write_ordered(&bank.meta, 0, bytemuck::cast_slice(&meta));
        self.write_ordered(&bank.est, 0, bytemuck::cast_slice(&est));
        self.write_ordered(&bank.scales, 0, bytemuck::cast_slice(&scales));
        self.write_ordered(
            &bank.hist,
            0,
            bytemuck::cast_slice(&vec![0u32; histogram::WORDS]),
        );
        Ok(())
    }

    fn matmul(
        &self,
        a: &GpuTensor,
        b: &GpuTensor,
        c: &GpuTensor,
        spec: &MatmulSpec,
        bank: Option<&GpuBank>,
    ) -> Result<(), EngineError> {
        check_matmul(spec, a.len, b.len, c.len)?;
        let max_groups = self.limits.max_compute_workgroups_per_dimension as usize;
        if spec.batch > max_groups {
            return Err(EngineError::Shape(format!(
                "matmul batch {} exceeds {max_groups} workgroups per dimension",
                spec.batch
            )));
        }
        if spec.batch == 0 || spec.m == 0 || spec.n == 0 {
            return Ok(());
        }
        let need_bank = spec.fuse_a.is_some() || spec.fuse_b.is_some();
        let bank = match (bank, need_bank) {
            (Some(bank), _) => Some(bank),
            (None, false) => None,
            (None, true) => {
                return Err(EngineError::Shape(
                    "matmul: fused quantization needs a bank".into(),
                ));
            }
        };
        let scale_index = |fuse: Option<usize>| -> Result<u32, EngineError> {
            match (fuse, bank) {
                (Some(q), Some(bank)) => {
                    bank.config.check_index(q)?;
                    Ok(bank.active_scale_index(q))
                }
                _ => Ok(0),
            }
        };
        let (sa, sb, sc) = spec.sizes();
        let params = matmul::MatmulParams {
            m: spec.m as u32,
            n: spec.n as u32,
            k: spec.k as u32,
            layout: spec.layout.id(),
            batch_stride_a: sa as u32,
            batch_stride_b: sb as u32,
            batch_stride_c: sc as u32,
            accumulate: u32::from(spec.accumulate),
            fuse_a: u32::from(spec.fuse_a.is_some()),
            fuse_b: u32::from(spec.fuse_b.is_some()),
            scale_index_a: scale_index(spec.fuse_a)?,
            scale_index_b: scale_index(spec.fuse_b)?,
            round_bf16: u32::from(spec.round_bf16),
            _pad: [0; 3],
            quant: bank.map(|b| b.quant).unwrap_or_default(),
        };
        let scales = bank.map(|b| &b.scales).unwrap_or(&self.one_scale);
        let groups = (
            (spec.n as u32).div_ceil(matmul::TILE.1),
            (spec.m as u32).div_ceil(matmul::TILE.0),
            spec.batch as u32,
        );
        self.with_encoder(|device, encoder| {
            kernel::dispatch(
                device,
                encoder,
                &self.pipelines.matmul,
                "matmul",
                &params,
                &[
                    a.binding(),
                    b.binding(),
                    c.binding(),
                    Self::bank_binding(scales),
                ],
                groups,
            );
        });
        Ok(())
    }

    fn ste_mask(
        &self,
        x: &GpuTensor,
        grad: &GpuTensor,
        bank: &GpuBank,
        quantizer: usize,
    ) -> Result<(), EngineError> {
        bank.config.check_index(quantizer)?;
        same_len("ste_mask", x.len, grad.len)?;
        let params = ste_mask::SteParams {
            n: x.len as u32,
            est_index: bank.active_scale_index(quantizer),
            _pad: [0; 2],
        };
        let groups = kernel::grid_stride_groups(x.len, 256, kernel::ELEMENTWISE_GROUPS);
        self.run(
            &self.pipelines.ste_mask,
            "ste_mask",
            &params,
            &[x.binding(), grad.binding(), Self::bank_binding(&bank.est)],
            groups,
        );
        Ok(())
    }

    fn fill_zero(&self, t: &GpuTensor) -> Result<(), EngineError> {
        if t.len > 0 {
            self.with_encoder(|_, encoder| encoder.clear_buffer(t.buffer(), 0, Some(t.bytes())));
        }
        Ok(())
    }

    fn add_inplace(&self, dst: &GpuTensor, src: &GpuTensor) -> Result<(), EngineError> {
        same_len("add_inplace", dst.len, src.len)?;
        self.elementwise(0, dst, Some(src), 1.0)
    }

    fn scale_inplace(&self, dst: &GpuTensor, factor: f32) -> Result<(), EngineError> {
        self.elementwise(1, dst, None, factor)
    }

    fn embedding(
        &self,
        tokens: &GpuTensor,
        table: &GpuTensor,
        out: &GpuTensor,
        channels: usize,
    ) -> Result<(), EngineError> {
        let vocab = rows_of("embedding table", table.len, channels)?;
        at_least("embedding out", out.len, tokens.len * channels)?;
        let params = embedding::EmbeddingParams {
            tokens: tokens.len as u32,
            channels: channels as u32,
            vocab: vocab as u32,
            _pad: 0,
        };
        let groups =
            kernel::grid_stride_groups(tokens.len * channels, 256, kernel::ELEMENTWISE_GROUPS);
        self.run(
            &self.pipelines.embedding[0],
            "embedding",
            &params,
            &[tokens.binding(), table.binding(), out.binding()],
            groups,
        );
        Ok(())
    }

    fn embedding_backward(
        &self,
        tokens: &GpuTensor,
        dout: &GpuTensor,
        dtable: &GpuTensor,
        channels: usize,
    ) -> Result<(), EngineError> {
        let vocab = rows_of("embedding dtable", dtable.len, channels)?;
        at_least("embedding dout", dout.len, tokens.len * channels)?;
        let params = embedding::EmbeddingParams {
            tokens: tokens.len as u32,
            channels: channels as u32,
            vocab: vocab as u32,
            _pad: 0,
        };
        let groups = kernel::grid_stride_groups(dtable.len, 256, kernel::ELEMENTWISE_GROUPS);
        self.run(
            &self.pipelines.embedding[1],
            "embedding_backward",
            &params,
            &[tokens.binding(), dout.binding(), dtable.binding()],
            groups,
        );
        Ok(())
    }

    fn rmsnorm(
        &self,
        x: &GpuTensor,
        weight: &GpuTensor,
        out: &GpuTensor,
        rstd: &GpuTensor,
        eps: f32,
    ) -> Result<(), EngineError> {
        let rows = rows_of("rmsnorm x", x.len, weight.len)?;
        same_len("rmsnorm out", out.len, x.len)?;
        same_len("rmsnorm rstd", rstd.len, rows)?;
        let params = rmsnorm::NormParams {
            rows: rows as u32,
            channels: weight.len as u32,
            eps,
            _pad: 0,
        };
        self.run_numbered(
            &self.pipelines.rmsnorm[0],
            "rmsnorm",
            &params,
            &[
                (1, x.binding()),
                (2, weight.binding()),
                (3, rstd.binding()),
                (5, out.binding()),
            ],
            (rows as u32).div_ceil(64),
        );
        Ok(())
    }

    fn rmsnorm_backward(
        &self,
        x: &GpuTensor,
        weight: &GpuTensor,
        rstd: &GpuTensor,
        dy: &GpuTensor,
        dx: &GpuTensor,
        dweight: &GpuTensor,
    ) -> Result<(), EngineError> {
        let rows = rows_of("rmsnorm_backward x", x.len, weight.len)?;
        same_len("rmsnorm_backward rstd", rstd.len, rows)?;
        same_len("rmsnorm_backward dy", dy.len, x.len)?;
        same_len("rmsnorm_backward dx", dx.len, x.len)?;
        same_len("rmsnorm_backward dweight", dweight.len, weight.len)?;
        let params = rmsnorm::NormParams {
            rows: rows as u32,
            channels: weight.len as u32,
            eps: 0.0,
            _pad: 0,
        };
        self.run_numbered(
            &self.pipelines.rmsnorm[1],
            "rmsnorm_backward_x",
            &params,
            &[
                (1, x.binding()),
                (2, weight.binding()),
                (3, rstd.binding()),
                (4, dy.binding()),
                (5, dx.binding()),
            ],
            (rows as u32).div_ceil(64),
        );
        self.run_numbered(
            &self.pipelines.rmsnorm[2],
            "rmsnorm_backward_w",
            &params,
            &[
                (1, x.binding()),
                (3, rstd.binding()),
                (4, dy.binding()),
                (5, dweight.binding()),
            ],
            (weight.len as u32).div_ceil(64),
        );
        Ok(())
    }

    fn rope(
        &self,
        x: &GpuTensor,
        table: &GpuTensor,
        out: &GpuTensor,
        shape: RopeShape,
        inverse: bool,
    ) -> Result<(), EngineError> {
        let n = shape.rows * shape.heads * shape.head_dim;
        at_least("rope x", x.len, n)?;
        at_least("rope out", out.len, n)?;
        at_least("rope table", table.len, shape.seq * shape.head_dim)?;
        let params = rope::RopeParams {
            rows: shape.rows as u32,
            heads: shape.heads as u32,
            head_dim: shape.head_dim as u32,
            seq_len: shape.seq as u32,
            inverse: u32::from(inverse),
            _pad: [0; 3],
        };
        let groups = kernel::grid_stride_groups(n / 2, 256, kernel::ELEMENTWISE_GROUPS);
        self.run(
            &self.pipelines.rope,
            "rope",
            &params,
            &[x.binding(), table.binding(), out.binding()],
            groups,
        );
        Ok(())
    }

    fn attention(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        out: &GpuTensor,
        probs: &GpuTensor,
        shape: AttentionShape,
    ) -> Result<(), EngineError> {
        crate::cpu::check_attention(&shape)?;
        at_least("attention q", q.len, shape.q_len())?;
        at_least("attention k", k.len, shape.kv_len())?;
        at_least("attention v", v.len, shape.kv_len())?;
        at_least("attention out", out.len, shape.q_len())?;
        at_least("attention probs", probs.len, shape.probs_len())?;
        let params = attention_params(&shape);
        let rows = (shape.batch * shape.heads * shape.seq) as u32;
        self.run_numbered(
            &self.pipelines.attention[0],
            "attention",
            &params,
            &[
                (1, q.binding()),
                (2, k.binding()),
                (3, v.binding()),
                (4, probs.binding()),
                (7, out.binding()),
            ],
            rows.div_ceil(64),
        );
        Ok(())
    }

    fn attention_backward(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        probs: &GpuTensor,
        dout: &GpuTensor,
        dscores: &GpuTensor,
        dq: &GpuTensor,
        dk: &GpuTensor,
        dv: &GpuTensor,
        shape: AttentionShape,
    ) -> Result<(), EngineError> {
        crate::cpu::check_attention(&shape)?;
        at_least("attention_backward dscores", dscores.len, shape.probs_len())?;
        at_least("attention_backward dq", dq.len, shape.q_len())?;
        at_least("attention_backward dk", dk.len, shape.kv_len())?;
        at_least("attention_backward dv", dv.len, shape.kv_len())?;
        at_least("attention_backward dout", dout.len, shape.q_len())?;
        let params = attention_params(&shape);
        let q_rows = (shape.batch * shape.heads * shape.seq) as u32;
        let kv_rows = (shape.batch * shape.kv_heads * shape.seq) as u32;
        self.run_numbered(
            &self.pipelines.attention[1],
            "attention_backward_q",
            &params,
            &[
                (2, k.binding()),
                (3, v.binding()),
                (4, probs.binding()),
                (5, dout.binding()),
                (6, dscores.binding()),
                (7, dq.binding()),
            ],
            q_rows.div_ceil(64),
        );
        self.run_numbered(
            &self.pipelines.attention[2],
            "attention_backward_kv",
            &params,
            &[
                (1, q.binding()),
                (4, probs.binding()),
                (5, dout.binding()),
                (6, dscores.binding()),
                (7, dk.binding()),
                (8, dv.binding()),
            ],
            kv_rows.div_ceil(64),
        );
        Ok(())
    }

    fn swiglu(&self, g: &GpuTensor, u: &GpuTensor, out: &GpuTensor) -> Result<(), EngineError> {
        same_len("swiglu u", u.len, g.len)?;
        same_len("swiglu out", out.len, g.len)?;
        let params = swiglu::SwigluParams {
            n: g.len as u32,
            _pad: [0; 3],
        };
        let groups = kernel::grid_stride_groups(g.len, 256, kernel::ELEMENTWISE_GROUPS);
        self.run_numbered(
            &self.pipelines.swiglu[0],
            "swiglu",
            &params,
            &[(1, g.binding()), (2, u.binding()), (4, out.binding())],
            groups,
        );
        Ok(())
    }

    fn swiglu_backward(
        &self,
        g: &GpuTensor,
        u: &GpuTensor,
        dy: &GpuTensor,
        dg: &GpuTensor,
        du: &GpuTensor,
    ) -> Result<(), EngineError> {
        for (what, len) in [("u", u.len), ("dy", dy.len), ("dg", dg.len), ("du", du.len)] {
            same_len(&format!("swiglu_backward {what}"), len, g.len)?;
        }
        let params = swiglu::SwigluParams {
            n: g.len as u32,
            _pad: [0; 3],
        };
        let groups = kernel::grid_stride_groups(g.len, 256, kernel::ELEMENTWISE_GROUPS);
        self.run(
            &self.pipelines.swiglu[1],
            "swiglu_backward",
            &params,
            &[
                g.binding(),
                u.binding(),
                dy.binding(),
                dg.binding(),
                du.binding(),
            ],
            groups,
        );
        Ok(())
    }

    fn cross_entropy(
        &self,
        logits: &GpuTensor,
        targets: &GpuTensor,
        losses: &GpuTensor,
        dlogits: &GpuTensor,
        grad_scale: f32,
    ) -> Result<(), EngineError> {
        same_len("cross_entropy losses", losses.len, targets.len)?;
        same_len("cross_entropy dlogits", dlogits.len, logits.len)?;
        if targets.len == 0 || !logits.len.is_multiple_of(targets.len) {
            return Err(EngineError::Shape(
                "cross_entropy: logits are not rows of targets".into(),
            ));
        }
        let params = cross_entropy::CeParams {
            rows: targets.len as u32,
            vocab: (logits.len / targets.len) as u32,
            grad_scale,
            _pad: 0,
        };
        self.run(
            &self.pipelines.cross_entropy,
            "cross_entropy",
            &params,
            &[
                logits.binding(),
                targets.binding(),
                losses.binding(),
                dlogits.binding(),
            ],
            (targets.len as u32).div_ceil(64),
        );
        Ok(())
    }

    fn sum_squares(&self, x: &GpuTensor, out: &GpuTensor, slot: usize) -> Result<(), EngineError> {
        at_least("sum_squares out", out.len, slot + 1)?;
        let params = sum_squares::SumSquaresParams {
            n: x.len as u32,
            slot: slot as u32,
            _pad: [0; 2],
        };
        self.run(
            &self.pipelines.sum_squares,
            "sum_squares",
            &params,
            &[x.binding(), out.binding()],
            1,
        );
        Ok(())
    }

    fn adamw(
        &self,
        param: &GpuTensor,
        grad: &GpuTensor,
        m: &GpuTensor,
        v: &GpuTensor,
        norms: &GpuTensor,
        n_norms: usize,
        hyper: &AdamHyper,
    ) -> Result<(), EngineError> {
        for (what, len) in [("grad", grad.len), ("m", m.len), ("v", v.len)] {
            same_len(&format!("adamw {what}"), len, param.len)?;
        }
        at_least("adamw norms", norms.len, n_norms)?;
        let (bc1, bc2) = hyper.bias_corrections();
        let params = adamw::AdamParams {
            n: param.len as u32,
            n_norms: n_norms as u32,
            lr: hyper.lr,
            beta1: hyper.beta1,
            beta2: hyper.beta2,
            eps: hyper.eps,
            weight_decay: hyper.weight_decay,
            bias_correction1: bc1,
            bias_correction2: bc2,
            max_norm: hyper.max_norm,
            _pad: [0; 2],
        };
        let groups = kernel::grid_stride_groups(param.len, 256, kernel::ELEMENTWISE_GROUPS);
        self.run(
            &self.pipelines.adamw,
            "adamw",
            &params,
            &[
                param.binding(),
                grad.binding(),
                m.binding(),
                v.binding(),
                norms.binding(),
            ],
            groups,
        );
        Ok(())
    }

    fn flush(&self) {
        let mut guard = lock(&self.encoder);
        self.submit_locked(&mut guard);
    }

    fn counters(&self) -> Counters {
        Counters {
            submits: self.submits.load(Ordering::Relaxed),
            blocking_syncs: self.blocking_syncs.load(Ordering::Relaxed),
        }
    }
}

fn attention_params(shape: &AttentionShape) -> attention::AttentionParams {
    attention::AttentionParams {
        batch: shape.batch as u32,
        seq: shape.seq as u32,
        heads: shape.heads as u32,
        kv_heads: shape.kv_heads as u32,
        head_dim: shape.head_dim as u32,
        scale: shape.scale(),
        _pad: [0; 2],
    }
}

/// Where a bank's buffers sit in a readback, and how to decode them.
#[derive(Clone, Copy, Debug)]
struct BankLayout {
    q: usize,
    k: usize,
    cap: usize,
    active: usize,
}

impl BankLayout {
    fn of(bank: &GpuBank) -> Self {
        BankLayout {
            q: bank.config.quantizers,
            k: bank.k,
            cap: bank.cap,
            active: bank.active,
        }
    }

    /// u32 words of history, meta, measured amax, est, scales, stats, histogram.
    fn sizes(&self) -> [usize; 7] {
        let (q, k) = (self.q, self.k);
        [
            q * self.cap,
            q * 2,
            q,
            q * k,
            q * k,
            q * quant_stats::slot_words(k),
            histogram::WORDS,
        ]
    }

    fn ranges<'a>(&self, bank: &'a GpuBank) -> Vec<(&'a wgpu::Buffer, u64, u64)> {
        let buffers = [
            &bank.history,
            &bank.meta,
            &bank.amax_bits,
            &bank.est,
            &bank.scales,
            &bank.stats,
            &bank.hist,
        ];
        buffers
            .into_iter()
            .zip(self.sizes())
            .map(|(b, n)| (b, 0, n as u64 * 4))
            .collect()
    }

    fn decode(&self, all: &[u32]) -> BankSnapshot {
        let (q, k, cap) = (self.q, self.k, self.cap);
        let stride = quant_stats::slot_words(k);
        let mut parts = Vec::new();
        let mut at = 0;
        for n in self.sizes() {
            parts.push(&all[at..at + n]);
            at += n;
        }
        let f = |w: u32| f32::from_bits(w);
        let (history, meta, amax, est, scales, stats) =
            (parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]);
        let quantizers = (0..q)
            .map(|i| {
                let len = meta[2 * i] as usize;
                let next = meta[2 * i + 1] as usize;
                let oldest = (next + cap - len.min(cap)) % cap.max(1);
                let s = &stats[i * stride..(i + 1) * stride];
                QuantizerSnapshot {
                    measured_amax: f(amax[i]),
                    est: est[i * k..(i + 1) * k].iter().map(|w| f(*w)).collect(),
                    scales: scales[i * k..(i + 1) * k].iter().map(|w| f(*w)).collect(),
                    history: (0..len)
                        .map(|j| f(history[i * cap + (oldest + j) % cap]))
                        .collect(),
                    stats: StatsSnapshot {
                        amax: f(s[0]),
                        nonfinite: u64::from(s[1]),
                        underflow: u64::from(s[2]),
                        above_est: s[3..3 + k].iter().map(|v| u64::from(*v)).collect(),
                        overflow: s[3 + k..3 + 2 * k].iter().map(|v| u64::from(*v)).collect(),
                    },
                }
            })
            .collect();
        let h = parts[6];
        let histogram = (h[0] > 0).then(|| crate::BankHistogram {
            quantizer: h[0] as usize - 1,
            hist: hif8lab_scaling::stats::Log2Histogram {
                zeros: u64::from(h[1]),
                below: u64::from(h[2]),
                above: u64::from(h[3]),
                nonfinite: u64::from(h[4]),
                bins: h[histogram::HEAD..].iter().map(|v| u64::from(*v)).collect(),
            },
        });
        BankSnapshot {
            active: self.active,
            quantizers,
            histogram,
        }
    }
}

impl GpuBackend {
    /// Records a 1-D dispatch with bindings 1.. in order.
    fn run<P: Pod>(
        &self,
        pipeline: &wgpu::ComputePipeline,
        name: &str,
        params: &P,
        buffers: &[wgpu::BindingResource<'_>],
        groups: u32,
    ) {
        self.with_encoder(|device, encoder| {
            kernel::dispatch(
                device,
                encoder,
                pipeline,
                name,
                params,
                buffers,
                (groups.max(1), 1, 1),
            );
        });
    }

    /// Records a 1-D dispatch with explicitly numbered bindings.
    fn run_numbered<P: Pod>(
        &self,
        pipeline: &wgpu::ComputePipeline,
        name: &str,
        params: &P,
        buffers: &[(u32, wgpu::BindingResource<'_>)],
        groups: u32,
    ) {
        self.with_encoder(|device, encoder| {
            kernel::dispatch_numbered(
                device,
                encoder,
                pipeline,
                name,
                params,
                buffers,
                (groups.max(1), 1, 1),
            );
        });
    }

    fn elementwise(
        &self,
        entry: usize,
        dst: &GpuTensor,
        src: Option<&GpuTensor>,
        factor: f32,
    ) -> Result<(), EngineError> {
        let params = elementwise::ElementwiseParams {
            n: dst.len as u32,
            factor,
            _pad: [0; 2],
        };
        let groups = kernel::grid_stride_groups(dst.len, 256, kernel::ELEMENTWISE_GROUPS);
        let mut bindings = vec![(2, dst.binding())];
        if let Some(src) = src {
            bindings.insert(0, (1, src.binding()));
        }
        self.run_numbered(
            &self.pipelines.elementwise[entry],
            "elementwise",
            &params,
            &bindings,
            groups,
        );
        Ok(())
    }

    /// Submits the recorded encoder. Called with the encoder lock held, so no queue write
    /// of another thread can slip between taking the commands and submitting them (queue
    /// writes land before the next submission: a write issued in that gap would overtake
    /// commands recorded before it).
    fn submit_locked(&self, encoder: &mut Option<wgpu::CommandEncoder>) {
        if let Some(encoder) = encoder.take() {
            self.queue.submit([encoder.finish()]);
            self.submits.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Writes `bytes` into `buffer` at `offset`, ordered after every command recorded so far.
    fn write_ordered(&self, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
        let mut guard = lock(&self.encoder);
        self.submit_locked(&mut guard);
        self.queue.write_buffer(buffer, offset, bytes);
    }

    fn record_scale_update(&self, bank: &GpuBank, first: usize, count: usize, mode: u32) {
        let rule = bank.config.scaling.rule();
        let params = scale_update::UpdateParams {
            first: first as u32,
            count: count as u32,
            k: bank.k as u32,
            cap: bank.cap as u32,
            target: rule.target,
            margin_scale: hif8lab_scaling::state::pow2(rule.margin),
            cold_start: match bank.config.scaling.cold_start {
                hif8lab_scaling::ColdStart::Jit => 0,
                hif8lab_scaling::ColdStart::Te => 1,
            },
            mode,
        };
        self.with_encoder(|device, encoder| {
            kernel::dispatch(
                device,
                encoder,
                &self.pipelines.scale_update,
                "scale_update",
                &params,
                &[
                    Self::bank_binding(&bank.estimators),
                    Self::bank_binding(&bank.history),
                    Self::bank_binding(&bank.meta),
                    Self::bank_binding(&bank.amax_bits),
                    Self::bank_binding(&bank.est),
                    Self::bank_binding(&bank.scales),
                ],
                ((count as u32).div_ceil(scale_update::WG), 1, 1),
            );
        });
    }
}
