// copy.wgsl — plain copy out[i] = x[i]; the bandwidth reference of `hif8lab bench kernels`.
//
// Bindings: 0 params (uniform CopyParams), 1 x (read), 2 out (read_write).
// Dispatch: 1-D grid-stride like qdq.wgsl, so the two are compared on equal terms.
// CPU twin: slice copy.

// Keep in sync with gpu::copy::CopyParams (Rust).
struct CopyParams {
    n: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: CopyParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let stride = groups.x * WG;
    for (var i = gid.x; i < params.n; i += stride) {
        out[i] = x[i];
    }
}
