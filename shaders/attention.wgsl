// attention.wgsl — causal grouped-query attention, forward and backward (naive: one
// invocation per query row; correctness first, sized for the lab's short contexts).
//
// q: [B, T, H, D], k, v: [B, T, Hkv, D] (head h reads kv head h / (H / Hkv)),
// probs, dscores: [B, H, T, T] (row i holds j ≤ i; zeros above), out/dout/dq: like q.
// Forward (entry `main`, per (b, h, i)):
//   s_j = (q_i · k_j)·scale for j ≤ i; p = softmax(s); out_i = Σ_j p_j v_j; probs row = p
// Backward (entry `backward_q`, per (b, h, i)):
//   dp_j = dout_i · v_j; ds_j = p_j (dp_j − Σ_l p_l dp_l); dscores row = ds; dq_i = scale Σ_j ds_j k_j
// Backward (entry `backward_kv`, per (b, kvh, j)), summing heads of the group in order:
//   dk_j = scale Σ_h Σ_{i ≥ j} ds_ij q_i ;  dv_j = Σ_h Σ_{i ≥ j} p_ij dout_i
// Bindings (each entry uses a subset): 0 params, 1 q, 2 k, 3 v, 4 probs, 5 dout,
//   6 dscores, 7 out_a (out | dq | dk), 8 out_b (dv).
// Dispatch: 1-D, ceil(rows / WG) workgroups.
// CPU twin: cpu::CpuBackend::attention / attention_backward (same loop order).

// Keep in sync with gpu::attention::AttentionParams (Rust).
struct AttentionParams {
    batch: u32,
    seq: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    scale: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: AttentionParams;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> probs: array<f32>;
@group(0) @binding(5) var<storage, read> dout: array<f32>;
@group(0) @binding(6) var<storage, read_write> dscores: array<f32>;
@group(0) @binding(7) var<storage, read_write> out_a: array<f32>;
@group(0) @binding(8) var<storage, read_write> out_b: array<f32>;

// -inf for the running max; a private variable, since browsers reject an infinity made by a
// constant expression.
var<private> neg_inf_bits: u32 = 0xff800000u;

override WG: u32 = 64u;

fn q_index(b: u32, t: u32, h: u32) -> u32 {
    return ((b * params.seq + t) * params.heads + h) * params.head_dim;
}

fn kv_index(b: u32, t: u32, h: u32) -> u32 {
    return ((b * params.seq + t) * params.kv_heads + h) * params.head_dim;
}

fn p_index(b: u32, h: u32, i: u32) -> u32 {
    return ((b * params.heads + h) * params.seq + i) * params.seq;
}

// The query row of invocation `idx` of `main` and `backward_q`: batch b, head h, position i,
// the kv head it reads, where its q row and its probability row start.
struct QueryRow {
    b: u32,
    i: u32,
    kvh: u32,
    qi: u32,
    prow: u32,
}

fn query_row(idx: u32) -> QueryRow {
    let i = idx % params.seq;
    let h = (idx / params.seq) % params.heads;
    let b = idx / (params.seq * params.heads);
    let kvh = h / (params.heads / params.kv_heads);
    return QueryRow(b, i, kvh, q_index(b, i, h), p_index(b, h, i));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x >= params.batch * params.heads * params.seq {
        return;
    }
    let r = query_row(gid.x);
    var m = bitcast<f32>(neg_inf_bits);
    for (var j = 0u; j <= r.i; j++) {
        let kj = kv_index(r.b, j, r.kvh);
        var s = 0.0;
        for (var d = 0u; d < params.head_dim; d++) {
            s = s + q[r.qi + d] * k[kj + d];
        }
        s = s * params.scale;
        probs[r.prow + j] = s;
        m = max(m, s);
    }
    var sum = 0.0;
    for (var j = 0u; j <= r.i; j++) {
        let e = exp(probs[r.prow + j] - m);
        probs[r.prow + j] = e;
        sum = sum + e;
    }
    for (var j = 0u; j < params.seq; j++) {
        probs[r.prow + j] = select(0.0, probs[r.prow + j] / sum, j <= r.i);
    }
    for (var d = 0u; d < params.head_dim; d++) {
        var acc = 0.0;
        for (var j = 0u; j <= r.i; j++) {
            acc = acc + probs[r.prow + j] * v[kv_index(r.b, j, r.kvh) + d];
        }
        out_a[r.qi + d] = acc;
    }
}

@compute @workgroup_size(WG)
fn backward_q(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x >= params.batch * params.heads * params.seq {
        return;
    }
    let r = query_row(gid.x);
    var rowsum = 0.0;
    for (var j = 0u; j <= r.i; j++) {
        let vj = kv_index(r.b, j, r.kvh);
        var dp = 0.0;
        for (var d = 0u; d < params.head_dim; d++) {
            dp = dp + dout[r.qi + d] * v[vj + d];
        }
        dscores[r.prow + j] = dp;
        rowsum = rowsum + probs[r.prow + j] * dp;
    }
    for (var j = 0u; j < params.seq; j++) {
        dscores[r.prow + j] = select(0.0, probs[r.prow + j] * (dscores[r.prow + j] - rowsum), j <= r.i);
    }
    for (var d = 0u; d < params.head_dim; d++) {
        var acc = 0.0;
        for (var j = 0u; j <= r.i; j++) {
            acc = acc + dscores[r.prow + j] * k[kv_index(r.b, j, r.kvh) + d];
        }
        out_a[r.qi + d] = acc * params.scale;
    }
}

@compute @workgroup_size(WG)
fn backward_kv(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    if idx >= params.batch * params.kv_heads * params.seq {
        return;
    }
    let j = idx % params.seq;
    let kvh = (idx / params.seq) % params.kv_heads;
    let b = idx / (params.seq * params.kv_heads);
    let group = params.heads / params.kv_heads;
    let kj = kv_index(b, j, kvh);
    for (var d = 0u; d < params.head_dim; d++) {
        var dk = 0.0;
        var dv = 0.0;
        for (var g = 0u; g < group; g++) {
            let h = kvh * group + g;
            for (var i = j; i < params.seq; i++) {
                let pi = p_index(b, h, i) + j;
                let qi = q_index(b, i, h);
                dk = dk + dscores[pi] * q[qi + d];
                dv = dv + probs[pi] * dout[qi + d];
            }
        }
        out_a[kj + d] = dk * params.scale;
        out_b[kj + d] = dv;
    }
}
