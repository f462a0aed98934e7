// sum_squares.wgsl — out[slot] = Σ x² in a fixed order (one workgroup; deterministic).
//
// Each of the WG invocations sums a strided share, then a tree reduction in workgroup
// memory. Used for the gradient norm: one slot per parameter tensor, summed by adamw.
// Bindings: 0 params (SumSquaresParams), 1 x (read), 2 out (read_write).
// Dispatch: exactly one workgroup.
// CPU twin: cpu::CpuBackend::sum_squares (same order: strided partials, then the tree).

// Keep in sync with gpu::sum_squares::SumSquaresParams (Rust).
struct SumSquaresParams {
    n: u32,
    slot: u32,
    _pad0: u32,
    _pad1: u32,
}

const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> params: SumSquaresParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    var acc = 0.0;
    for (var i = lid; i < params.n; i += WG) {
        acc = acc + x[i] * x[i];
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var width = WG / 2u; width > 0u; width = width / 2u) {
        if lid < width {
            partial[lid] = partial[lid] + partial[lid + width];
        }
        workgroupBarrier();
    }
    if lid == 0u {
        out[params.slot] = partial[0];
    }
}
