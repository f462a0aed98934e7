// ste_mask.wgsl — clipped straight-through estimator: zero the gradient where the forward
// value lay above its quantizer's estimate (clipped by saturation in the forward pass).
//
// grad[i] = 0 where |x[i]| > est[est_index], unchanged elsewhere (NaN never masks).
// Bindings: 0 params (SteParams), 1 x (read), 2 grad (read_write), 3 est (read).
// Dispatch: 1-D grid-stride over n.
// CPU twin: cpu::CpuBackend::ste_mask.

// Keep in sync with gpu::ste_mask::SteParams (Rust).
struct SteParams {
    n: u32,
    est_index: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: SteParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> grad: array<f32>;
@group(0) @binding(3) var<storage, read> est: array<f32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let limit = est[params.est_index];
    for (var i = gid.x; i < params.n; i += groups.x * WG) {
        if abs(x[i]) > limit {
            grad[i] = 0.0;
        }
    }
}
