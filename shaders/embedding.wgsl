// embedding.wgsl — token embedding gather and its backward scatter-add.
//
// Forward (entry `main`):     out[n, c] = table[tokens[n], c]
// Backward (entry `backward`): dtable[v, c] += Σ_{n: tokens[n] = v} dout[n, c], summed in
// increasing n (deterministic, no float atomics).
// Token ids are stored as f32 (exact below 2^24).
// Bindings: 0 params (EmbeddingParams), 1 tokens (read), 2 src (read: table | dout),
//           3 dst (read_write: out | dtable).
// Dispatch: 1-D grid-stride, one invocation per output element (forward) or per (token
// position, channel) (backward).
// CPU twin: cpu::CpuBackend::embedding / embedding_backward.

// Keep in sync with gpu::embedding::EmbeddingParams (Rust).
struct EmbeddingParams {
    tokens: u32,
    channels: u32,
    vocab: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: EmbeddingParams;
@group(0) @binding(1) var<storage, read> tokens: array<f32>;
@group(0) @binding(2) var<storage, read> src: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let total = params.tokens * params.channels;
    for (var i = gid.x; i < total; i += groups.x * WG) {
        let n = i / params.channels;
        let c = i % params.channels;
        let v = min(u32(tokens[n]), params.vocab - 1u);
        dst[i] = src[v * params.channels + c];
    }
}

// One invocation per (token position n, channel c); only the first position holding its
// token writes: the row's old value plus every position's gradient for that token in
// increasing n. Rows no token names are left as they are. tokens·channels invocations of
// O(tokens) each, where one per table element (vocab·channels, each scanning every token)
// was 49,152·576·256 ≈ 7·10⁹ iterations at SmolLM2's vocabulary.
@compute @workgroup_size(WG)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let total = params.tokens * params.channels;
    for (var i = gid.x; i < total; i += groups.x * WG) {
        let n = i / params.channels;
        let c = i % params.channels;
        let v = min(u32(tokens[n]), params.vocab - 1u);
        var first = true;
        for (var m = 0u; m < n; m++) {
            if min(u32(tokens[m]), params.vocab - 1u) == v {
                first = false;
                break;
            }
        }
        if !first {
            continue;
        }
        let at = v * params.channels + c;
        var acc = dst[at];
        for (var m = n; m < params.tokens; m++) {
            if min(u32(tokens[m]), params.vocab - 1u) == v {
                acc = acc + src[m * params.channels + c];
            }
        }
        dst[at] = acc;
    }
}
