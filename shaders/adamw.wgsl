// adamw.wgsl — AdamW update of one parameter tensor with global-norm gradient clipping.
//
// norm = sqrt(Σ_k norms[k]) (the per-tensor sums of squares, added in order);
// clip = min(1, max_norm / (norm + 1e-6)) when max_norm > 0, else 1; g = grad·clip;
// m = β1·m + (1−β1)·g ; v = β2·v + (1−β2)·g² ;
// p −= lr·( (m / bc1) / (sqrt(v / bc2) + eps) + weight_decay·p )
// with bc1 = 1 − β1^t, bc2 = 1 − β2^t computed on the host. No host round trip: the norm
// is read from the GPU buffer the sum_squares kernel filled.
// Bindings: 0 params (AdamParams), 1 param (rw), 2 grad, 3 m (rw), 4 v (rw), 5 norms.
// Dispatch: 1-D grid-stride over n.
// CPU twin: cpu::CpuBackend::adamw.

// Keep in sync with gpu::adamw::AdamParams (Rust).
struct AdamParams {
    n: u32,
    n_norms: u32,
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    bias_correction1: f32,
    bias_correction2: f32,
    max_norm: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: AdamParams;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
@group(0) @binding(5) var<storage, read> norms: array<f32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    var total = 0.0;
    for (var k = 0u; k < params.n_norms; k++) {
        total = total + norms[k];
    }
    let norm = sqrt(total);
    var clip = 1.0;
    if params.max_norm > 0.0 {
        clip = min(1.0, params.max_norm / (norm + 1e-6));
    }
    for (var i = gid.x; i < params.n; i += groups.x * WG) {
        let g = grad[i] * clip;
        let mi = params.beta1 * m[i] + (1.0 - params.beta1) * g;
        let vi = params.beta2 * v[i] + (1.0 - params.beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        let update = (mi / params.bias_correction1) / (sqrt(vi / params.bias_correction2) + params.eps);
        param[i] = param[i] - params.lr * (update + params.weight_decay * param[i]);
    }
}
