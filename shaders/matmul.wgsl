// matmul.wgsl — tiled, register-blocked f32 GEMM, batched, three layouts, optional fused
// fake quantization of either operand (scale read from the quantizer bank).
//
//   layout 0 (NN): C[b] = A[b]·B[b]      A: M×K, B: K×N (row-major)
//   layout 1 (NT): C[b] = A[b]·B[b]ᵀ     A: M×K, B: N×K
//   layout 2 (TN): C[b] = A[b]ᵀ·B[b]     A: K×M, B: K×N
//   C: M×N row-major; accumulate = 1 adds to C instead of overwriting.
// Fused qdq: operand element e (its linear index in the operand buffer) becomes
// fake_quant(e, scales[slot], quant, index), exactly what qdq.wgsl would have written, so
// W8A8 costs no extra pass. round_bf16 = 1 rounds every operand that is not fake-quantized
// to bf16 (RNE) on load: the emulated-bf16 baseline.
//
// Bindings: 0 params (uniform MatmulParams), 1 a (read), 2 b (read), 3 c (read_write),
//           4 scales (read).
// Dispatch: (ceil(N/64), ceil(M/64), batch); workgroup 16×16, each invocation computes a
// 4×4 block of C (rows ty+16i, columns tx+16j); K is walked in TILE_K slices staged in
// workgroup memory. Every load is bounds-checked (zero outside), so any shape is safe.
// Each output sums k = 0..K-1 in order (deterministic).
// CPU twin: cpu::CpuBackend::matmul (the gemm crate, within named tolerances).
// Needs common/quant.wgsl.

// Keep in sync with gpu::matmul::MatmulParams (Rust).
struct MatmulParams {
    m: u32,
    n: u32,
    k: u32,
    operand_layout: u32,
    batch_stride_a: u32,
    batch_stride_b: u32,
    batch_stride_c: u32,
    accumulate: u32,
    fuse_a: u32,
    fuse_b: u32,
    scale_index_a: u32,
    scale_index_b: u32,
    round_bf16: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
    quant: QuantParams,
}

const TILE_M: u32 = 64u;
const TILE_N: u32 = 64u;
override TILE_K: u32 = 16u;

@group(0) @binding(0) var<uniform> params: MatmulParams;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@group(0) @binding(4) var<storage, read> scales: array<f32>;

var<workgroup> tile_a: array<f32, TILE_K * TILE_M>;
var<workgroup> tile_b: array<f32, TILE_K * TILE_N>;

fn load_a(batch: u32, row: u32, kk: u32, scale: f32) -> f32 {
    if row >= params.m || kk >= params.k {
        return 0.0;
    }
    var idx: u32;
    if params.operand_layout == 2u {
        idx = batch * params.batch_stride_a + kk * params.m + row;
    } else {
        idx = batch * params.batch_stride_a + row * params.k + kk;
    }
    let v = a[idx];
    if params.fuse_a == 1u {
        return fake_quant(v, scale, params.quant, idx);
    }
    if params.round_bf16 == 1u {
        return bf16_rne(v);
    }
    return v;
}

fn load_b(batch: u32, kk: u32, col: u32, scale: f32) -> f32 {
    if col >= params.n || kk >= params.k {
        return 0.0;
    }
    var idx: u32;
    if params.operand_layout == 1u {
        idx = batch * params.batch_stride_b + col * params.k + kk;
    } else {
        idx = batch * params.batch_stride_b + kk * params.n + col;
    }
    let v = b[idx];
    if params.fuse_b == 1u {
        return fake_quant(v, scale, params.quant, idx);
    }
    if params.round_bf16 == 1u {
        return bf16_rne(v);
    }
    return v;
}

@compute @workgroup_size(16, 16)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) flat: u32,
) {
    let batch = wid.z;
    let row0 = wid.y * TILE_M;
    let col0 = wid.x * TILE_N;
    let scale_a = scales[params.scale_index_a];
    let scale_b = scales[params.scale_index_b];
    var acc: array<f32, 16>;
    let a_transposed = params.operand_layout == 2u;
    let b_transposed = params.operand_layout == 1u;
    for (var k0 = 0u; k0 < params.k; k0 += TILE_K) {
        // Stage A and B tiles; consecutive invocations read consecutive addresses.
        for (var e = flat; e < TILE_K * TILE_M; e += 256u) {
            var m: u32;
            var kk: u32;
            if a_transposed {
                kk = e / TILE_M;
                m = e % TILE_M;
            } else {
                m = e / TILE_K;
                kk = e % TILE_K;
            }
            tile_a[kk * TILE_M + m] = load_a(batch, row0 + m, k0 + kk, scale_a);
        }
        for (var e = flat; e < TILE_K * TILE_N; e += 256u) {
            var n: u32;
            var kk: u32;
            if b_transposed {
                n = e / TILE_K;
                kk = e % TILE_K;
            } else {
                kk = e / TILE_N;
                n = e % TILE_N;
            }
            tile_b[kk * TILE_N + n] = load_b(batch, k0 + kk, col0 + n, scale_b);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TILE_K; kk++) {
            var ra: array<f32, 4>;
            var rb: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                ra[i] = tile_a[kk * TILE_M + lid.y + 16u * i];
                rb[i] = tile_b[kk * TILE_N + lid.x + 16u * i];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i * 4u + j] = acc[i * 4u + j] + ra[i] * rb[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let row = row0 + lid.y + 16u * i;
        for (var j = 0u; j < 4u; j++) {
            let col = col0 + lid.x + 16u * j;
            if row < params.m && col < params.n {
                let idx = batch * params.batch_stride_c + row * params.n + col;
                var v = acc[i * 4u + j];
                if params.accumulate == 1u {
                    v = v + c[idx];
                }
                c[idx] = v;
            }
        }
    }
}
