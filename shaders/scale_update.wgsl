// scale_update.wgsl — delayed scaling on the GPU: for each quantizer in a range, every
// estimator's estimate from the ring-buffer amax history, the scale
// target / (est + 1e-12) / 2^margin (keeping the previous one when est is 0, negative, NaN
// or Inf), then the push of this call's amax. Mode 1 resets the range instead.
//
// Bindings: 0 params (uniform UpdateParams), 1 estimators (read, EstimatorDesc [K]),
//           2 history (read_write, f32 [Q·cap]), 3 meta (read_write, u32 [Q·2]: len, next),
//           4 amax_bits (read, u32 [Q]), 5 est (read_write, f32 [Q·K]),
//           6 scales (read_write, f32 [Q·K]).
// Dispatch: one invocation per quantizer, ceil(count / WG) workgroups.
// CPU twin: hif8lab_scaling::QuantizerState::call / reset (bit-exact: same f32 operations in
// the same order).

// Keep in sync with gpu::scale_update::UpdateParams (Rust).
struct UpdateParams {
    first: u32,
    count: u32,
    k: u32,
    cap: u32,
    scale_target: f32,
    margin_scale: f32,
    cold_start: u32,
    update_mode: u32,
}

// Keep in sync with gpu::scale_update::EstimatorDesc (Rust).
struct EstimatorDesc {
    kind: u32,
    n: u32,
    alpha: f32,
    beta: f32,
    damping: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const KIND_MOST_RECENT: u32 = 0u;
const KIND_MAX_WINDOW: u32 = 1u;
const KIND_MEAN_WINDOW: u32 = 2u;
const KIND_EMA: u32 = 3u;
const KIND_HOLT: u32 = 4u;
const KIND_CURRENT: u32 = 5u;
const COLD_JIT: u32 = 0u;
const MODE_RESET: u32 = 1u;

@group(0) @binding(0) var<uniform> params: UpdateParams;
@group(0) @binding(1) var<storage, read> estimators: array<EstimatorDesc>;
@group(0) @binding(2) var<storage, read_write> history: array<f32>;
@group(0) @binding(3) var<storage, read_write> ring_meta: array<u32>;
@group(0) @binding(4) var<storage, read> amax_bits: array<u32>;
@group(0) @binding(5) var<storage, read_write> est: array<f32>;
@group(0) @binding(6) var<storage, read_write> scales: array<f32>;

override WG: u32 = 64u;

fn is_nan_f32(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// v pulled into [lo, hi]; NaN passes through. CPU twin: hif8lab_scaling::estimator::clamp_between
// (a mean or convex combination can round just outside its inputs: a flat window must give
// exactly its value).
fn clamp_between(v: f32, lo: f32, hi: f32) -> f32 {
    if is_nan_f32(v) {
        return v;
    }
    if v < lo {
        return lo;
    }
    if v > hi {
        return hi;
    }
    return v;
}

// i-th stored entry (0 = oldest) of quantizer q.
fn entry(q: u32, oldest: u32, i: u32) -> f32 {
    return history[q * params.cap + (oldest + i) % params.cap];
}

fn estimate(d: EstimatorDesc, q: u32, oldest: u32, len: u32) -> f32 {
    switch d.kind {
        case KIND_MOST_RECENT: {
            return entry(q, oldest, len - 1u);
        }
        case KIND_MAX_WINDOW: {
            let start = len - min(max(d.n, 1u), len);
            var m = neg_inf_f32();
            for (var i = start; i < len; i++) {
                let a = entry(q, oldest, i);
                if is_nan_f32(a) || a > m {
                    m = a;
                }
            }
            return m;
        }
        case KIND_MEAN_WINDOW: {
            let start = len - min(max(d.n, 1u), len);
            var sum = 0.0;
            var lo = entry(q, oldest, start);
            var hi = lo;
            for (var i = start; i < len; i++) {
                let a = entry(q, oldest, i);
                sum = sum + a;
                if a < lo {
                    lo = a;
                }
                if a > hi {
                    hi = a;
                }
            }
            return clamp_between(sum / f32(len - start), lo, hi);
        }
        case KIND_EMA: {
            let keep = 1.0 - d.alpha;
            var e = entry(q, oldest, 0u);
            for (var i = 1u; i < len; i++) {
                let a = entry(q, oldest, i);
                e = clamp_between(d.alpha * a + keep * e, min(a, e), max(a, e));
            }
            return e;
        }
        case KIND_HOLT: {
            var level = entry(q, oldest, 0u);
            var trend = 0.0;
            for (var i = 1u; i < len; i++) {
                let previous = level;
                let a = entry(q, oldest, i);
                let forecast = level + d.damping * trend;
                level = clamp_between(d.alpha * a + (1.0 - d.alpha) * forecast, min(a, forecast), max(a, forecast));
                trend = d.beta * (level - previous) + (1.0 - d.beta) * d.damping * trend;
            }
            return level + d.damping * trend;
        }
        default: {
            return nan_f32();
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x >= params.count {
        return;
    }
    let q = params.first + gid.x;
    if params.update_mode == MODE_RESET {
        ring_meta[q * 2u] = 0u;
        ring_meta[q * 2u + 1u] = 0u;
        for (var k = 0u; k < params.k; k++) {
            scales[q * params.k + k] = 1.0;
            est[q * params.k + k] = params.scale_target / (1.0 * params.margin_scale);
        }
        return;
    }
    let amax = bitcast<f32>(amax_bits[q]);
    let len = ring_meta[q * 2u];
    let next = ring_meta[q * 2u + 1u];
    let oldest = (next + params.cap - len) % params.cap;
    for (var k = 0u; k < params.k; k++) {
        let d = estimators[k];
        var raw: f32;
        if d.kind == KIND_CURRENT {
            raw = amax;
        } else if len == 0u {
            raw = select(nan_f32(), amax, params.cold_start == COLD_JIT);
        } else {
            raw = estimate(d, q, oldest, len);
        }
        let slot = q * params.k + k;
        let previous = scales[slot];
        var usable = is_finite_f32(raw) && raw > 0.0;
        var scale = 0.0;
        if usable {
            scale = params.scale_target / (raw + 1e-12) / params.margin_scale;
            usable = is_finite_f32(scale) && scale > 0.0;
        }
        if usable {
            scales[slot] = scale;
            est[slot] = raw;
        } else {
            est[slot] = params.scale_target / (previous * params.margin_scale);
        }
    }
    history[q * params.cap + next] = amax;
    ring_meta[q * 2u + 1u] = (next + 1u) % params.cap;
    ring_meta[q * 2u] = min(len + 1u, params.cap);
}
