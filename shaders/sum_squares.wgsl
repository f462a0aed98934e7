// sum_squares.wgsl — out[slot] = Σ x² in a fixed order (deterministic, no float atomics).
//
// `main`, `groups` workgroups of WG invocations: invocation (g, l) sums x[i]² for
// i = g·WG + l, then i += groups·WG (grid stride), in order; each workgroup's WG sums go
// through a fixed tree into partials[g]. `finish`, one workgroup: invocation l sums
// partials[l], partials[l + WG], … in order, then the same tree into out[slot]. Used for the
// gradient norm: one slot per parameter tensor, summed by adamw. One workgroup could not
// keep a GPU busy on a 28 M-element embedding gradient.
// Bindings: 0 params (SumSquaresParams), 1 x (read), 2 out (read_write),
//           3 partials (read_write, f32 [groups]).
// Dispatch: `main` over `groups` workgroups (cpu::sum_squares_groups), then `finish` over one.
// CPU twin: cpu::optimizer::sum_squares (the same groups, lanes, order and trees).

// Keep in sync with gpu::sum_squares::SumSquaresParams (Rust).
struct SumSquaresParams {
    n: u32,
    slot: u32,
    groups: u32,
    _pad0: u32,
}

const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> params: SumSquaresParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> partials: array<f32>;

var<workgroup> partial: array<f32, WG>;

// partial[0] = the fixed tree over partial[0..WG].
fn tree(lid: u32) {
    workgroupBarrier();
    for (var width = WG / 2u; width > 0u; width = width / 2u) {
        if lid < width {
            partial[lid] = partial[lid] + partial[lid + width];
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    var acc = 0.0;
    for (var i = wid.x * WG + lid; i < params.n; i += params.groups * WG) {
        acc = acc + x[i] * x[i];
    }
    partial[lid] = acc;
    tree(lid);
    if lid == 0u {
        partials[wid.x] = partial[0];
    }
}

@compute @workgroup_size(WG)
fn finish(@builtin(local_invocation_index) lid: u32) {
    var acc = 0.0;
    for (var g = lid; g < params.groups; g += WG) {
        acc = acc + partials[g];
    }
    partial[lid] = acc;
    tree(lid);
    if lid == 0u {
        out[params.slot] = partial[0];
    }
}
