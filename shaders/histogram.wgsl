// histogram.wgsl — distribution of log2|x·s| in quarter binades (s: the quantizer's active
// scale) into the bank's histogram slot: what the Histogram panel draws over HiF8's tiers.
//
// Bindings: 0 params (uniform HistParams), 1 x (read), 2 scales (read, f32 [Q·K]),
//           3 hist (read_write, atomic u32 [HIST_WORDS]).
// Slot layout (u32): [quantizer + 1, zeros, below, above, nonfinite, bins[BINS]]; bin i holds
// 2^(LO + i/4) ≤ |x·s| < 2^(LO + (i+1)/4). The slot must be zeroed before (the engine clears it).
// Binning uses integer comparisons only (exponent field, then the mantissa field against the
// three quarter-binade thresholds passed in), so it matches the CPU twin exactly.
// Dispatch: 1-D grid-stride; per-workgroup counts, then one global atomic per non-zero bin.
// CPU twin: hif8lab_scaling::stats::Log2Histogram::of (constants HIST_LO, HIST_HI there).

// Keep in sync with gpu::histogram::HistParams (Rust).
struct HistParams {
    n: u32,
    scale_index: u32,
    quantizer: u32,
    _pad0: u32,
    quarter: vec4<u32>,
}

const LO: i32 = -24;
const HI: i32 = 18;
const BINS: u32 = 168u; // (HI - LO) · 4
const HEAD: u32 = 5u;
const WORDS: u32 = 173u; // HEAD + BINS

@group(0) @binding(0) var<uniform> params: HistParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read_write> hist: array<atomic<u32>>;

override WG: u32 = 256u;

var<workgroup> wg_counts: array<atomic<u32>, WORDS>;

fn slot_of(p: f32) -> u32 {
    let a = bitcast<u32>(p) & 0x7fffffffu;
    if a >= 0x7f800000u {
        return 4u;
    }
    if a == 0u {
        return 1u;
    }
    let e = i32(a >> 23u) - 127;
    if e < LO {
        return 2u;
    }
    if e >= HI {
        return 3u;
    }
    let m = a & 0x007fffffu;
    let quarter = select(0u, 1u, m >= params.quarter.x) + select(0u, 1u, m >= params.quarter.y)
        + select(0u, 1u, m >= params.quarter.z);
    return HEAD + u32(e - LO) * 4u + quarter;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    for (var i = lid; i < WORDS; i += WG) {
        atomicStore(&wg_counts[i], 0u);
    }
    workgroupBarrier();
    let s = scales[params.scale_index];
    let stride = groups.x * WG;
    for (var i = gid.x; i < params.n; i += stride) {
        atomicAdd(&wg_counts[slot_of(x[i] * s)], 1u);
    }
    workgroupBarrier();
    for (var i = lid + 1u; i < WORDS; i += WG) {
        let c = atomicLoad(&wg_counts[i]);
        if c != 0u {
            atomicAdd(&hist[i], c);
        }
    }
    if gid.x == 0u {
        atomicStore(&hist[0], params.quantizer + 1u);
    }
}
