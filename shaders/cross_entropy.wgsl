// cross_entropy.wgsl — softmax cross-entropy over the vocabulary, forward and backward fused.
//
// Per row n (one invocation): m = max logits, lse = m + log Σ exp(l − m),
//   losses[n] = lse − logits[n, target[n]],
//   dlogits[n, v] = (softmax(v) − [v = target]) · grad_scale
// (grad_scale = 1 / (rows · accumulation steps): the mean loss's gradient).
// Targets are stored as f32 (exact below 2^24).
// Bindings: 0 params (CeParams), 1 logits, 2 targets, 3 losses (read_write),
//           4 dlogits (read_write).
// Dispatch: ceil(rows / WG) workgroups.
// CPU twin: cpu::CpuBackend::cross_entropy.

// Keep in sync with gpu::cross_entropy::CeParams (Rust).
struct CeParams {
    rows: u32,
    vocab: u32,
    grad_scale: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: CeParams;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<f32>;
@group(0) @binding(3) var<storage, read_write> losses: array<f32>;
@group(0) @binding(4) var<storage, read_write> dlogits: array<f32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = gid.x;
    if n >= params.rows {
        return;
    }
    let base = n * params.vocab;
    var m = logits[base];
    for (var v = 1u; v < params.vocab; v++) {
        m = max(m, logits[base + v]);
    }
    var sum = 0.0;
    for (var v = 0u; v < params.vocab; v++) {
        sum = sum + exp(logits[base + v] - m);
    }
    let lse = m + log(sum);
    let t = min(u32(targets[n]), params.vocab - 1u);
    losses[n] = lse - logits[base + t];
    for (var v = 0u; v < params.vocab; v++) {
        let p = exp(logits[base + v] - lse);
        dlogits[base + v] = (p - select(0.0, 1.0, v == t)) * params.grad_scale;
    }
}
