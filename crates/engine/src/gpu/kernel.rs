//! Shared machinery of the GPU kernels: shader source assembly, pipeline creation and
//! recording one dispatch with its uniform parameters.

use wgpu::util::DeviceExt;

/// `shaders/common/quant.wgsl`: format functions shared by several kernels.
pub(crate) const COMMON_QUANT: &str = include_str!("../../../../shaders/common/quant.wgsl");

/// A kernel's full WGSL: the common snippets it needs, then its own file.
pub fn source(kernel: &str, needs_common: bool) -> String {
    if needs_common {
        format!("{COMMON_QUANT}\n{kernel}")
    } else {
        kernel.to_owned()
    }
}

/// Builds a compute pipeline (entry point `main`, layout derived from the shader).
pub(crate) fn pipeline(device: &wgpu::Device, name: &str, wgsl: &str) -> wgpu::ComputePipeline {
    pipelines(device, name, wgsl, &["main"]).remove(0)
}

/// Builds one pipeline per entry point of a shader module (layouts derived per entry, so
/// each binds only what it uses).
pub(crate) fn pipelines(
    device: &wgpu::Device,
    name: &str,
    wgsl: &str,
    entries: &[&str],
) -> Vec<wgpu::ComputePipeline> {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(name),
        source: wgpu::ShaderSource::Wgsl(wgsl.into()),
    });
    entries
        .iter()
        .map(|entry| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&format!("{name}::{entry}")),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        })
        .collect()
}

/// Records one dispatch of `pipeline` with `params` as binding 0 and `buffers` as bindings
/// 1.. in order.
pub(crate) fn dispatch<P: bytemuck::Pod>(
    device: &wgpu::Device,
    encoder: &mut wgpu::CommandEncoder,
    pipeline: &wgpu::ComputePipeline,
    name: &str,
    params: &P,
    buffers: &[wgpu::BindingResource<'_>],
    groups: (u32, u32, u32),
) {
    let numbered: Vec<(u32, wgpu::BindingResource<'_>)> = buffers
        .iter()
        .enumerate()
        .map(|(i, r)| (i as u32 + 1, r.clone()))
        .collect();
    dispatch_numbered(device, encoder, pipeline, name, params, &numbered, groups);
}

/// Records one dispatch with `params` as binding 0 and explicitly numbered buffers (for
/// entry points that use a subset of a module's bindings).
pub(crate) fn dispatch_numbered<P: bytemuck::Pod>(
    device: &wgpu::Device,
    encoder: &mut wgpu::CommandEncoder,
    pipeline: &wgpu::ComputePipeline,
    name: &str,
    params: &P,
    buffers: &[(u32, wgpu::BindingResource<'_>)],
    groups: (u32, u32, u32),
) {
    let uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some(name),
        contents: bytemuck::bytes_of(params),
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let mut entries = vec![wgpu::BindGroupEntry {
        binding: 0,
        resource: uniform.as_entire_binding(),
    }];
    for (binding, resource) in buffers {
        entries.push(wgpu::BindGroupEntry {
            binding: *binding,
            resource: resource.clone(),
        });
    }
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some(name),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    });
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some(name),
        timestamp_writes: None,
    });
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, &bind_group, &[]);
    pass.dispatch_workgroups(groups.0, groups.1, groups.2);
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
