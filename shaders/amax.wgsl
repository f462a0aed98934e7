// amax.wgsl — max |x| over non-NaN elements (Inf counts), into amax_bits[params.slot].
//
// Bindings: 0 params (uniform AmaxParams), 1 x (read), 2 amax_bits (read_write, atomic u32).
// Dispatch: 1-D grid-stride. The slot must be zeroed before (the engine clears it).
// |x| of a non-NaN f32 orders like its bits as u32, so atomicMax on bits is exact.
// Runs before scale_update when an estimator needs this call's amax (JIT cold start, current).
// CPU twin: hif8lab_scaling::stats::amax_and_nonfinite.

// Keep in sync with gpu::amax::AmaxParams (Rust).
struct AmaxParams {
    n: u32,
    slot: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: AmaxParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> amax_bits: array<atomic<u32>>;

override WG: u32 = 256u;

var<workgroup> wg_max: atomic<u32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    if lid == 0u {
        atomicStore(&wg_max, 0u);
    }
    workgroupBarrier();
    let stride = groups.x * WG;
    var local_max = 0u;
    for (var i = gid.x; i < params.n; i += stride) {
        let a = bitcast<u32>(x[i]) & 0x7fffffffu;
        if a <= 0x7f800000u {
            local_max = max(local_max, a);
        }
    }
    atomicMax(&wg_max, local_max);
    workgroupBarrier();
    if lid == 0u {
        atomicMax(&amax_bits[params.slot], atomicLoad(&wg_max));
    }
}
