// qdq.wgsl — fake-quantize a tensor: out[i] = qdq(x[i]·s)/s with s = scales[params.scale_index].
//
// Bindings: 0 params (uniform QdqParams), 1 x (read), 2 out (read_write), 3 scales (read).
// Dispatch: 1-D grid-stride; any number of workgroups of WG invocations covers any n.
// The scale is read from a GPU buffer (the quantizer bank), so no host round trip is needed.
// CPU twin: cpu::CpuBackend::qdq (hif8lab_format::FakeQuant::qdq_at). Needs common/quant.wgsl.

// Keep in sync with gpu::qdq::QdqParams (Rust).
struct QdqParams {
    n: u32,
    scale_index: u32,
    _pad0: u32,
    _pad1: u32,
    quant: QuantParams,
}

@group(0) @binding(0) var<uniform> params: QdqParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let scale = scales[params.scale_index];
    let stride = groups.x * WG;
    for (var i = gid.x; i < params.n; i += stride) {
        out[i] = fake_quant(x[i], scale, params.quant, i);
    }
}
