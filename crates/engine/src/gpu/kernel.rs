//! The kernel registry and the one way a kernel is dispatched.
//!
//! Each `gpu/X.rs` declares its kernel once as a [`Kernel`] (name, WGSL, whether it needs the
//! common snippets, entry points, storage bindings by name, and the layout of its
//! params struct) next to its launcher. [`super::KERNELS`] lists them; pipelines are built by
//! iterating that list, and `tests/shaders.rs` checks every declaration against naga's view of
//! the WGSL (bindings by name and number, every params member's offset).
//!
//! A dispatch writes its params into a slot of a uniform ring (uploaded once per submission)
//! and binds through a cache keyed by pipeline, slot and buffers, so a training step that
//! repeats the same dispatches reuses the same bind groups.

use std::collections::HashMap;

/// A `shaders/common/` snippet a kernel's WGSL is assembled with (functions and the
/// workgroup scratch they use; no bindings, no entry points).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Snippet {
    /// `common/quant.wgsl`: the formats' codecs and fake quantization.
    Quant,
    /// `common/reduce.wgsl`: maximum and sum across a workgroup's lanes.
    Reduce,
}

impl Snippet {
    /// The snippet's WGSL.
    pub fn wgsl(self) -> &'static str {
        match self {
            Snippet::Quant => include_str!("../../../../shaders/common/quant.wgsl"),
            Snippet::Reduce => include_str!("../../../../shaders/common/reduce.wgsl"),
        }
    }
}

/// The layout of a kernel's uniform params struct as Rust sees it.
#[derive(Clone, Copy, Debug)]
pub struct ParamsLayout {
    /// Name of the struct in WGSL.
    pub wgsl_struct: &'static str,
    /// `size_of` the Rust struct.
    pub size: usize,
    /// Every member but padding: (name, byte offset), names as in WGSL.
    pub members: &'static [(&'static str, usize)],
}

/// Declares a params layout: `params_layout!(QdqParams { n, scale_index, quant })`; the Rust
/// field names are the WGSL member names.
#[macro_export]
#[doc(hidden)]
macro_rules! params_layout {
    ($ty:ident { $($field:ident),* $(,)? }) => {
        $crate::gpu::kernel::ParamsLayout {
            wgsl_struct: stringify!($ty),
            size: ::std::mem::size_of::<$ty>(),
            members: &[$((stringify!($field), ::std::mem::offset_of!($ty, $field))),*],
        }
    };
}

/// One WGSL kernel as the engine knows it.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    /// Name (also the file name under `shaders/`).
    pub name: &'static str,
    /// The kernel's own WGSL.
    pub wgsl: &'static str,
    /// The `shaders/common/` snippets prepended to it.
    pub common: &'static [Snippet],
    /// Entry points, one pipeline each.
    pub entries: &'static [&'static str],
    /// Storage bindings of group 0 (binding 0 is always the params uniform).
    pub bindings: &'static [(u32, &'static str)],
    /// The params struct.
    pub params: ParamsLayout,
}

impl Kernel {
    /// The full WGSL: the common snippets it needs, then its own file.
    pub fn source(&self) -> String {
        source(self.wgsl, self.common)
    }

    fn binding(&self, name: &str) -> u32 {
        self.bindings
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(b, _)| *b)
            .unwrap_or_else(|| panic!("kernel {} declares no binding '{name}'", self.name))
    }
}

/// A kernel's full WGSL: the common snippets it needs, then its own file.
pub fn source(kernel: &str, snippets: &[Snippet]) -> String {
    let mut out = String::new();
    for s in snippets {
        out.push_str(s.wgsl());
        out.push('\n');
    }
    out.push_str(kernel);
    out
}

/// Every pipeline of every registered kernel, by kernel name and entry point.
pub(crate) struct Pipelines {
    by_kernel: HashMap<&'static str, Vec<(&'static str, wgpu::ComputePipeline)>>,
}

impl Pipelines {
    /// Builds one pipeline per entry point of every kernel in `kernels` (layouts derived per
    /// entry, so each binds only what it uses).
    pub(crate) fn new(device: &wgpu::Device, kernels: &[&Kernel]) -> Self {
        let mut p = Pipelines::empty();
        for k in kernels {
            p.add(device, k);
        }
        p
    }

    /// No pipelines yet (see [`Pipelines::add`]).
    pub(crate) fn empty() -> Self {
        Pipelines {
            by_kernel: HashMap::new(),
        }
    }

    /// Builds the pipelines of one kernel (each entry point).
    pub(crate) fn add(&mut self, device: &wgpu::Device, k: &Kernel) {
        let built = [k].into_iter().map(|k| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(k.name),
                source: wgpu::ShaderSource::Wgsl(k.source().into()),
            });
            let pipelines = k
                .entries
                .iter()
                .map(|entry| {
                    let p = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(&format!("{}::{entry}", k.name)),
                        layout: None,
                        module: &module,
                        entry_point: Some(entry),
                        compilation_options: Default::default(),
                        cache: None,
                    });
                    (*entry, p)
                })
                .collect();
            (k.name, pipelines)
        });
        self.by_kernel.extend(built);
    }

    fn get(&self, kernel: &Kernel, entry: &str) -> &wgpu::ComputePipeline {
        self.by_kernel
            .get(kernel.name)
            .and_then(|v| v.iter().find(|(e, _)| *e == entry))
            .map(|(_, p)| p)
            .unwrap_or_else(|| panic!("kernel {}::{entry} is not registered", kernel.name))
    }
}

/// A buffer range to bind.
#[derive(Clone, Copy)]
pub(crate) struct Bind<'a> {
    pub(crate) buffer: &'a wgpu::Buffer,
    pub(crate) size: Option<wgpu::BufferSize>,
}

impl<'a> Bind<'a> {
    /// The whole buffer.
    pub(crate) fn all(buffer: &'a wgpu::Buffer) -> Self {
        Bind { buffer, size: None }
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct BindKey {
    pipeline: wgpu::ComputePipeline,
    slot: u32,
    params_size: u64,
    buffers: Vec<(u32, wgpu::Buffer, Option<wgpu::BufferSize>)>,
}

/// Bytes between uniform ring slots (≥ every device's `min_uniform_buffer_offset_alignment`
/// and every params struct).
const SLOT_BYTES: u64 = 256;
/// Slots in the ring; a submission with more dispatches is split.
const RING_SLOTS: u32 = 4096;
/// Cached bind groups before the cache is cleared (buffers it holds stay alive until then).
const CACHE_LIMIT: usize = 16_384;

/// The command encoder of the submission being recorded, its uniform ring and the bind
/// group cache. Lives behind the backend's one recording lock.
pub(crate) struct Recorder {
    encoder: Option<wgpu::CommandEncoder>,
    ring: wgpu::Buffer,
    staged: Vec<u8>,
    slot: u32,
    groups: HashMap<BindKey, wgpu::BindGroup>,
    /// Dispatches recorded so far.
    pub(crate) dispatches: u64,
    /// Bind groups created so far.
    pub(crate) bind_groups_created: u64,
    /// Submissions so far.
    pub(crate) submits: u64,
}

impl Recorder {
    pub(crate) fn new(device: &wgpu::Device) -> Self {
        Recorder {
            encoder: None,
            ring: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("params ring"),
                size: SLOT_BYTES * u64::from(RING_SLOTS),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            staged: Vec::new(),
            slot: 0,
            groups: HashMap::new(),
            dispatches: 0,
            bind_groups_created: 0,
            submits: 0,
        }
    }

    /// The encoder of the current submission.
    pub(crate) fn encoder(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        self.encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("hif8lab step"),
            })
        })
    }

    /// Uploads the params of the recorded dispatches and submits them.
    pub(crate) fn submit(&mut self, queue: &wgpu::Queue) {
        if let Some(encoder) = self.encoder.take() {
            if !self.staged.is_empty() {
                // Queue writes land before the next submission: exactly this one.
                queue.write_buffer(&self.ring, 0, &self.staged);
            }
            queue.submit([encoder.finish()]);
            self.submits += 1;
        }
        self.staged.clear();
        self.slot = 0;
    }

    /// Records one dispatch of `kernel`'s `entry` with `params` in binding 0 and `buffers`
    /// bound by their declared names.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dispatch<P: bytemuck::Pod>(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        pipelines: &Pipelines,
        kernel: &Kernel,
        entry: &str,
        params: &P,
        buffers: &[(&str, Bind<'_>)],
        groups: (u32, u32, u32),
    ) {
        if self.slot == RING_SLOTS {
            self.submit(queue);
        }
        let slot = self.slot;
        self.slot += 1;
        let bytes = bytemuck::bytes_of(params);
        debug_assert!(bytes.len() as u64 <= SLOT_BYTES);
        self.staged
            .resize((u64::from(slot) * SLOT_BYTES) as usize, 0);
        self.staged.extend_from_slice(bytes);
        let pipeline = pipelines.get(kernel, entry);
        let key = BindKey {
            pipeline: pipeline.clone(),
            slot,
            params_size: bytes.len() as u64,
            buffers: buffers
                .iter()
                .map(|(name, b)| (kernel.binding(name), b.buffer.clone(), b.size))
                .collect(),
        };
        if self.groups.len() >= CACHE_LIMIT && !self.groups.contains_key(&key) {
            self.groups.clear();
        }
        if !self.groups.contains_key(&key) {
            let mut entries = vec![wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &self.ring,
                    offset: u64::from(slot) * SLOT_BYTES,
                    size: wgpu::BufferSize::new(bytes.len() as u64),
                }),
            }];
            for (binding, buffer, size) in &key.buffers {
                entries.push(wgpu::BindGroupEntry {
                    binding: *binding,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer,
                        offset: 0,
                        size: *size,
                    }),
                });
            }
            let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(kernel.name),
                layout: &pipeline.get_bind_group_layout(0),
                entries: &entries,
            });
            self.bind_groups_created += 1;
            self.groups.insert(key.clone(), group);
        }
        let group = self.groups[&key].clone();
        let mut pass = self
            .encoder(device)
            .begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(kernel.name),
                timestamp_writes: None,
            });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch_workgroups(groups.0.max(1), groups.1.max(1), groups.2.max(1));
        drop(pass);
        self.dispatches += 1;
    }
}

/// Workgroups for a grid-stride kernel over `n` elements with `wg` invocations each:
/// enough to cover `n` once, capped at `max_groups` so the loop strides (and 1-D dispatch
/// limits hold). Reductions use a lower cap than elementwise kernels: each invocation then
/// folds more elements before its share of the per-workgroup atomics.
pub(crate) fn grid_stride_groups(n: usize, wg: u32, max_groups: usize) -> u32 {
    n.div_ceil(wg as usize).clamp(1, max_groups) as u32
}

/// Workgroup cap of elementwise kernels (copy, qdq).
pub(crate) const ELEMENTWISE_GROUPS: usize = 4096;
/// Workgroup cap of reductions (amax, quant_stats): 512 × 256 invocations fill a large GPU.
pub(crate) const REDUCTION_GROUPS: usize = 512;
