// elementwise.wgsl — small elementwise kernels of the training step.
//
// Entry `add_inplace`: dst[i] += src[i]      (residual streams, gradient sums)
// Entry `scale_inplace`: dst[i] *= params.factor
// Entry `copy`:          dst[i] = src[i]      (the bandwidth reference of `hif8lab bench
//                        kernels`: the same grid-stride as qdq.wgsl, compared on equal terms)
// Bindings: 0 params (ElementwiseParams), 1 src (read), 2 dst (read_write).
// Dispatch: 1-D grid-stride over n.
// CPU twin: cpu::CpuBackend::add_inplace / scale_inplace; a slice copy.

// Keep in sync with gpu::elementwise::ElementwiseParams (Rust).
struct ElementwiseParams {
    n: u32,
    factor: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: ElementwiseParams;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn add_inplace(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += groups.x * WG) {
        dst[i] = dst[i] + src[i];
    }
}

@compute @workgroup_size(WG)
fn scale_inplace(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += groups.x * WG) {
        dst[i] = dst[i] * params.factor;
    }
}

@compute @workgroup_size(WG)
fn copy(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += groups.x * WG) {
        dst[i] = src[i];
    }
}
