// cross_entropy.wgsl — softmax cross-entropy over the vocabulary, forward and backward fused.
//
// Per row n (one workgroup of 64: maximum and sum strided over the row, then combined by tree
// reductions in workgroup memory; long rows such as a 49,152-token vocabulary stay exact to f32
// rounding): m = max logits, lse = m + log Σ exp(l − m),
//   losses[n] = lse − logits[n, target[n]],
//   dlogits[n, v] = (softmax(v) − [v = target]) · grad_scale (only when params.gradient = 1;
//   0 computes the losses only: evaluation)
// (grad_scale = 1 / (rows · accumulation steps): the mean loss's gradient).
// Targets are stored as f32 (exact below 2^24).
// Bindings: 0 params (CeParams), 1 logits, 2 targets, 3 losses (read_write),
//           4 dlogits (read_write).
// Dispatch: (min(rows, 65535), ceil(rows / 65535), 1) workgroups.
// CPU twin: cpu::CpuBackend::cross_entropy.

// Keep in sync with gpu::cross_entropy::CeParams (Rust).
struct CeParams {
    rows: u32,
    vocab: u32,
    grad_scale: f32,
    gradient: u32,
}

@group(0) @binding(0) var<uniform> params: CeParams;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<f32>;
@group(0) @binding(3) var<storage, read_write> losses: array<f32>;
@group(0) @binding(4) var<storage, read_write> dlogits: array<f32>;

// The reductions' lanes (common/reduce.wgsl's `red` has this many).
const WG: u32 = 64u;

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let n = wid.x + wid.y * groups.x;
    if n >= params.rows {
        return;
    }
    let base = n * params.vocab;
    var m = -3.0e38;
    for (var v = lid; v < params.vocab; v += WG) {
        m = max(m, logits[base + v]);
    }
    let mx = workgroup_max(lid, m);
    var sum = 0.0;
    for (var v = lid; v < params.vocab; v += WG) {
        sum = sum + exp(logits[base + v] - mx);
    }
    let lse = mx + log(workgroup_sum(lid, sum));
    let t = min(u32(targets[n]), params.vocab - 1u);
    if lid == 0u {
        losses[n] = lse - logits[base + t];
    }
    if params.gradient == 0u {
        return;
    }
    for (var v = lid; v < params.vocab; v += WG) {
        let p = exp(logits[base + v] - lse);
        dlogits[base + v] = (p - select(0.0, 1.0, v == t)) * params.grad_scale;
    }
}
