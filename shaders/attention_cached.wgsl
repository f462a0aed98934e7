// attention_cached.wgsl — causal grouped-query attention of new query rows over a key/value
// cache (generation: a prompt's rows, then one row per token).
//
// q: [B, N, H, D] at positions past..past+N; k, v caches: [B, CAP, Hkv, D] holding positions
// 0..past+N (head h reads kv head h / (H / Hkv)); scores: [B, H, N, CAP] scratch; out like q.
// Per (b, h, i), with L = past + i + 1 keys:
//   s_j = (q_i · k_j)·scale for j < L; p = softmax(s) (maximum subtracted); out_i = Σ_j p_j v_j
// One workgroup of 64 per (b, h, i): scores strided over the workgroup, maximum and sum by
// tree reductions in workgroup memory, then each invocation sums its output dimensions over
// the keys in order.
// Bindings: 0 params, 1 q, 2 k, 3 v, 4 scores (read_write), 5 out (read_write).
// Dispatch: (min(rows, 65535), ceil(rows / 65535), 1) workgroups, rows = B·H·N.
// CPU twin: cpu::CpuBackend::attention_cached (same formulas; sums in another order).

// Keep in sync with gpu::attention_cached::CachedAttentionParams (Rust).
struct CachedAttentionParams {
    batch: u32,
    past: u32,
    new_rows: u32,
    capacity: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> params: CachedAttentionParams;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> scores: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// The reductions' lanes (common/reduce.wgsl's `red` has this many).
const WG: u32 = 64u;

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let n = params.new_rows;
    let hd = params.head_dim;
    let cap = params.capacity;
    let idx = wid.x + wid.y * groups.x;
    if idx >= params.batch * params.heads * n {
        return;
    }
    let i = idx % n;
    let h = (idx / n) % params.heads;
    let b = idx / (n * params.heads);
    let kvh = h / (params.heads / params.kv_heads);
    let len = params.past + i + 1u;
    let q_base = ((b * n + i) * params.heads + h) * hd;
    let s_base = ((b * params.heads + h) * n + i) * cap;

    var m = -3.0e38;
    for (var j = lid; j < len; j += WG) {
        let k_base = ((b * cap + j) * params.kv_heads + kvh) * hd;
        var dot = 0.0;
        for (var d = 0u; d < hd; d += 1u) {
            dot += q[q_base + d] * k[k_base + d];
        }
        let s = dot * params.scale;
        scores[s_base + j] = s;
        m = max(m, s);
    }
    let mx = workgroup_max(lid, m);

    var sum = 0.0;
    for (var j = lid; j < len; j += WG) {
        let e = exp(scores[s_base + j] - mx);
        scores[s_base + j] = e;
        sum += e;
    }
    let inv = 1.0 / workgroup_sum(lid, sum);
    storageBarrier();

    for (var d = lid; d < hd; d += WG) {
        var acc = 0.0;
        for (var j = 0u; j < len; j += 1u) {
            acc += scores[s_base + j] * v[((b * cap + j) * params.kv_heads + kvh) * hd + d];
        }
        out[q_base + d] = acc * inv;
    }
}
