// swiglu.wgsl — SwiGLU gate: out = silu(g)·u with silu(g) = g / (1 + exp(−g)), and backward.
//
// Forward (entry `main`):      out[i] = silu(g[i])·u[i]
// Backward (entry `backward`): dg[i] = dy[i]·u[i]·σ(g)·(1 + g·(1 − σ(g))), du[i] = dy[i]·silu(g[i])
// Bindings: 0 params (SwigluParams), 1 g, 2 u, 3 dy (read; unused forward),
//           4 out (read_write: out | dg), 5 du (read_write; unused forward).
// Dispatch: 1-D grid-stride over n.
// CPU twin: cpu::CpuBackend::swiglu / swiglu_backward.

// Keep in sync with gpu::swiglu::SwigluParams (Rust).
struct SwigluParams {
    n: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: SwigluParams;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> u: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> du: array<f32>;

override WG: u32 = 256u;

fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += groups.x * WG) {
        out[i] = g[i] * sigmoid(g[i]) * u[i];
    }
}

@compute @workgroup_size(WG)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += groups.x * WG) {
        let s = sigmoid(g[i]);
        out[i] = dy[i] * u[i] * s * (1.0 + g[i] * (1.0 - s));
        du[i] = dy[i] * g[i] * s;
    }
}
