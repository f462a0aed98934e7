// rope.wgsl — rotary position embedding, rotate-half convention, forward or inverse.
//
// x: [rows, heads, head_dim] with position p = row % seq_len; for i < head_dim/2 the pair
// (x[i], x[i + head_dim/2]) is rotated by angle θ(p, i): with c = table[(p·half + i)·2],
// s = table[(p·half + i)·2 + 1] (precomputed on the host, so both backends use the same
// values): out[i] = x[i]·c − x[i+half]·s ; out[i+half] = x[i+half]·c + x[i]·s.
// The inverse (the backward pass) rotates by −θ.
// Bindings: 0 params (RopeParams), 1 x (read), 2 table (read), 3 out (read_write).
// Dispatch: one invocation per (row, head, i < half), 1-D grid-stride.
// CPU twin: cpu::CpuBackend::rope.

// Keep in sync with gpu::rope::RopeParams (Rust).
struct RopeParams {
    rows: u32,
    heads: u32,
    head_dim: u32,
    seq_len: u32,
    inverse: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: RopeParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> table: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let half = params.head_dim / 2u;
    let total = params.rows * params.heads * half;
    for (var t = gid.x; t < total; t += groups.x * WG) {
        let i = t % half;
        let rh = t / half;
        let row = rh / params.heads;
        let p = row % params.seq_len;
        let base = rh * params.head_dim;
        let c = table[(p * half + i) * 2u];
        var s = table[(p * half + i) * 2u + 1u];
        if params.inverse == 1u {
            s = -s;
        }
        let a = x[base + i];
        let b = x[base + i + half];
        out[base + i] = a * c - b * s;
        out[base + i + half] = b * c + a * s;
    }
}
