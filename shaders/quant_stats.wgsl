// quant_stats.wgsl — one pass over a tensor: amax, non-finite count, and for each of the
// bank's K estimators the count above its estimate and the overflow count at its scale,
// plus the underflow count at the active scale. All counts exact (integer atomics).
// Also the quantization error at the active scale: Σx² and Σ(x − qdq(x))² over the finite
// elements whose fake-quantized value is finite (SQNR = 10·log10 of their ratio).
//
// Bindings: 0 params (uniform StatsParams), 1 x (read), 2 est (read, f32 [Q·K]),
//           3 scales (read, f32 [Q·K]), 4 stats (read_write, atomic u32 [Q·stride]),
//           5 partials (read_write, vec2<f32> [groups]: per-workgroup energies).
// Stats slot layout (u32): [amax bits, nonfinite, underflow, above[K], overflow[K],
// signal bits (f32), noise bits (f32)]; the slot must be zeroed before (the engine clears it).
// Dispatch: `main`, 1-D grid-stride over `groups` workgroups; per-workgroup counters, then
// one global atomic per counter; each workgroup's energies (its lanes' f32 sums in
// grid-stride order, then a fixed tree) go to partials[workgroup]. Then `finish`, one
// workgroup: sums partials in a fixed order and stores the two energies in the slot. The
// energies are therefore deterministic for a given `groups` (no float atomics); they match
// the CPU twin's f64 sums to f32 rounding.
// CPU twin: hif8lab_scaling::stats::tensor_stats (which uses the codec itself for underflow,
// so the threshold form here is checked against it). Needs common/quant.wgsl.

// Keep in sync with gpu::quant_stats::StatsParams (Rust).
struct StatsParams {
    n: u32,
    quantizer: u32,
    k: u32,
    active_index: u32,
    stride: u32,
    overflow_threshold: f32,
    underflow_max: f32,
    groups: u32,
    quant: QuantParams,
}

const MAX_K: u32 = 8u;
const COUNTERS: u32 = 19u; // 3 + 2·MAX_K

@group(0) @binding(0) var<uniform> params: StatsParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> est: array<f32>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read_write> stats: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> partials: array<vec2<f32>>;

override WG: u32 = 256u;
// Lanes of the energy tree: WG must not exceed it (the engine launches 256).
const LANES: u32 = 256u;

var<workgroup> wg_counts: array<atomic<u32>, COUNTERS>;
var<workgroup> wg_energy: array<vec2<f32>, LANES>;

// Sums wg_energy[0..LANES] into wg_energy[0] by a fixed tree (call from uniform control flow).
fn reduce_energy(lid: u32) {
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        if lid < s {
            wg_energy[lid] += wg_energy[lid + s];
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    if lid < COUNTERS {
        atomicStore(&wg_counts[lid], 0u);
    }
    workgroupBarrier();
    let base = params.quantizer * params.k;
    let active_scale = scales[base + params.active_index];
    let stride = groups.x * WG;
    var local_max = 0u;
    var nonfinite = 0u;
    var underflow = 0u;
    var above = array<u32, MAX_K>();
    var overflow = array<u32, MAX_K>();
    var energy = vec2<f32>(0.0, 0.0);
    var thresholds_est = array<f32, MAX_K>();
    var thresholds_scale = array<f32, MAX_K>();
    for (var k = 0u; k < MAX_K; k++) {
        if k < params.k {
            thresholds_est[k] = est[base + k];
            thresholds_scale[k] = scales[base + k];
        }
    }
    for (var i = gid.x; i < params.n; i += stride) {
        let v = x[i];
        let a_bits = bitcast<u32>(v) & 0x7fffffffu;
        if a_bits >= 0x7f800000u {
            nonfinite += 1u;
        }
        if a_bits <= 0x7f800000u {
            local_max = max(local_max, a_bits);
        }
        let a = abs(v);
        // Constant trip count: the compiler can unroll and keep the counters in registers
        // (a dynamically indexed private array would live in slow local memory).
        for (var k = 0u; k < MAX_K; k++) {
            if k < params.k {
                above[k] += select(0u, 1u, a > thresholds_est[k]);
                overflow[k] += select(0u, 1u, abs(v * thresholds_scale[k]) >= params.overflow_threshold);
            }
        }
        // Quantizes to zero exactly when |v·s| ≤ underflow_max (FormatFacts::underflow_max).
        if v != 0.0 && abs(v * active_scale) <= params.underflow_max {
            underflow += 1u;
        }
        if a_bits < 0x7f800000u {
            let q = fake_quant(v, active_scale, params.quant, i);
            if is_finite_f32(q) {
                let e = v - q;
                energy += vec2<f32>(v * v, e * e);
            }
        }
    }
    wg_energy[lid] = energy;
    atomicMax(&wg_counts[0], local_max);
    atomicAdd(&wg_counts[1], nonfinite);
    atomicAdd(&wg_counts[2], underflow);
    for (var k = 0u; k < MAX_K; k++) {
        if k < params.k {
            atomicAdd(&wg_counts[3u + k], above[k]);
            atomicAdd(&wg_counts[3u + params.k + k], overflow[k]);
        }
    }
    workgroupBarrier();
    let slot = params.quantizer * params.stride;
    if lid == 0u {
        atomicMax(&stats[slot], atomicLoad(&wg_counts[0]));
    } else if lid < 3u + 2u * params.k {
        atomicAdd(&stats[slot + lid], atomicLoad(&wg_counts[lid]));
    }
    reduce_energy(lid);
    if lid == 0u {
        partials[wid.x] = wg_energy[0];
    }
}

// One workgroup of LANES: the workgroups' energies summed in a fixed order into the slot.
@compute @workgroup_size(256)
fn finish(@builtin(local_invocation_index) lid: u32) {
    var e = vec2<f32>(0.0, 0.0);
    for (var g = lid; g < params.groups; g += LANES) {
        e += partials[g];
    }
    wg_energy[lid] = e;
    reduce_energy(lid);
    if lid == 0u {
        let at = params.quantizer * params.stride + 3u + 2u * params.k;
        atomicStore(&stats[at], bitcast<u32>(wg_energy[0].x));
        atomicStore(&stats[at + 1u], bitcast<u32>(wg_energy[0].y));
    }
}
