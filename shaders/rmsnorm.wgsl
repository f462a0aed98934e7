// rmsnorm.wgsl — RMSNorm y = x · rstd · w with rstd = 1/sqrt(mean(x²) + eps), and its backward.
//
// Forward (entry `main`, one invocation per row n): writes out[n, :] and rstd[n].
// Backward input grad (entry `backward_x`, one invocation per row):
//   dx[n, c] = rstd·(w[c]·dy[n, c] − x[n, c]·rstd²·mean_c(w·dy·x))        (overwrites dx)
// Backward weight grad (entry `backward_w`, one invocation per channel c):
//   dw[c] += Σ_n dy[n, c]·x[n, c]·rstd[n]                                   (n increasing)
// Bindings: 0 params (NormParams), 1 x, 2 w, 3 rstd (read_write), 4 a (read: dy | unused),
//           5 out (read_write: y | dx | dw).
// Dispatch: 1-D, ceil(rows / WG) or ceil(channels / WG) workgroups.
// CPU twin: cpu::CpuBackend::rmsnorm / rmsnorm_backward (same summation order).

// Keep in sync with gpu::rmsnorm::NormParams (Rust).
struct NormParams {
    rows: u32,
    channels: u32,
    eps: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: NormParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = gid.x;
    if n >= params.rows {
        return;
    }
    let base = n * params.channels;
    var ss = 0.0;
    for (var c = 0u; c < params.channels; c++) {
        ss = ss + x[base + c] * x[base + c];
    }
    let r = 1.0 / sqrt(ss / f32(params.channels) + params.eps);
    rstd[n] = r;
    for (var c = 0u; c < params.channels; c++) {
        out[base + c] = x[base + c] * r * w[c];
    }
}

@compute @workgroup_size(WG)
fn backward_x(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = gid.x;
    if n >= params.rows {
        return;
    }
    let base = n * params.channels;
    let r = rstd[n];
    var dot = 0.0;
    for (var c = 0u; c < params.channels; c++) {
        dot = dot + w[c] * dy[base + c] * x[base + c];
    }
    let mean_dot = dot / f32(params.channels);
    for (var c = 0u; c < params.channels; c++) {
        out[base + c] = r * (w[c] * dy[base + c] - x[base + c] * r * r * mean_dot);
    }
}

@compute @workgroup_size(WG)
fn backward_w(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if c >= params.channels {
        return;
    }
    var acc = out[c];
    for (var n = 0u; n < params.rows; n++) {
        acc = acc + dy[n * params.channels + c] * x[n * params.channels + c] * rstd[n];
    }
    out[c] = acc;
}
