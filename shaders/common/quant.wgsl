// common/quant.wgsl — fake quantization of one f32 (functions only, no bindings).
//
// Bit-exact twin of crates/format (hif8.rs, ocp.rs, lib.rs FakeQuant): every rounding is done
// on the integer bits of the f32 (WGSL round() is ties-to-even; HiF8 needs ties-away).
// Format ids: 0 = HiF8, 1 = OCP E4M3 (fn), 2 = OCP E5M2. Overflow: 0 = non-finite, 1 = saturate.
// Rounding: 0 = nearest (ties-away for HiF8, ties-even for OCP), 1 = hybrid (HiF8 only).
// Keep in sync with gpu::QuantParams (Rust).

const FORMAT_HIF8: u32 = 0u;
const FORMAT_E4M3: u32 = 1u;
const FORMAT_E5M2: u32 = 2u;
const F32_INF_BITS: u32 = 0x7f800000u;
const F32_QNAN_BITS: u32 = 0x7fc00000u;

// The quantizer configuration shared by qdq, quant_stats and the fused matmul.
struct QuantParams {
    format: u32,
    overflow: u32,
    rounding: u32,
    seed: u32,
}

fn is_finite_f32(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

// Browsers' WGSL compilers (Tint) reject a NaN or an infinity produced by a constant
// expression, so these bit patterns come through private variables, which are not constant
// expressions. (Native naga accepts both; `shader_sources_avoid_const_nan_inf` guards this.)
var<private> qnan_bits: u32 = F32_QNAN_BITS;
var<private> neg_inf_bits: u32 = 0xff800000u;

fn nan_f32() -> f32 {
    return bitcast<f32>(qnan_bits);
}

fn neg_inf_f32() -> f32 {
    return bitcast<f32>(neg_inf_bits);
}

// lowbias32 integer hash; twin of hif8lab_format::hash_u32.
fn lowbias32(v: u32) -> u32 {
    var x = v;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
}

fn hash_u32(seed: u32, index: u32) -> u32 {
    return lowbias32(lowbias32(index ^ (seed * 0x9E3779B9u)) + seed);
}

fn hif8_mantissa_bits(e: i32) -> u32 {
    let m = abs(e);
    if m <= 3 {
        return 3u;
    }
    if m <= 7 {
        return 2u;
    }
    if m <= 15 {
        return 1u;
    }
    return 0u;
}

// HiF8 ties-away qdq (SPEC.md §2), or hybrid (stochastic above |E| = 3) when `stochastic`.
fn hif8_qdq(x: f32, saturate: bool, stochastic: bool, random: u32) -> f32 {
    let b = bitcast<u32>(x);
    let s = b & 0x80000000u;
    let a = b & 0x7fffffffu;
    if a > F32_INF_BITS {
        return x;
    }
    let overflow_bits = select(F32_INF_BITS, 0x47000000u, saturate);
    if a >= 0x47200000u {
        return bitcast<f32>(s | overflow_bits);
    }
    if a < 0x34000000u {
        return 0.0;
    }
    let e = i32(a >> 23u) - 127;
    let use_stochastic = stochastic && abs(e) > 3;
    if e == -23 {
        if use_stochastic {
            let significand = (a & 0x7fffffu) | 0x800000u;
            if random < (significand << 8u) {
                return bitcast<f32>(s | 0x34800000u);
            }
            return 0.0;
        }
        return bitcast<f32>(s | 0x34800000u);
    }
    let shift = 23u - hif8_mantissa_bits(e);
    let mask = (1u << shift) - 1u;
    if use_stochastic {
        let r = (a + (random & mask)) & ~mask;
        if r >= 0x47400000u {
            return bitcast<f32>(s | overflow_bits);
        }
        return bitcast<f32>(s | r);
    }
    let r = (a + (1u << (shift - 1u))) & ~mask;
    return bitcast<f32>(s | r);
}

// OCP FP8 round-to-nearest-even qdq; E4M3 is the fn variant (overflow -> NaN unless saturating).
fn ocp_qdq(x: f32, format: u32, saturate: bool) -> f32 {
    let is_e4m3 = format == FORMAT_E4M3;
    let mb = select(2u, 3u, is_e4m3);
    let emin = select(-14, -6, is_e4m3);
    let max_bits = select(0x47600000u, 0x43e00000u, is_e4m3);
    let min_sub_bits = select(0x37800000u, 0x3b000000u, is_e4m3);
    let non_finite = select(F32_INF_BITS, F32_QNAN_BITS, is_e4m3);
    let overflow_bits = select(non_finite, max_bits, saturate);
    let b = bitcast<u32>(x);
    let s = b & 0x80000000u;
    let a = b & 0x7fffffffu;
    if a > F32_INF_BITS {
        return x;
    }
    if a == F32_INF_BITS {
        return bitcast<f32>(s | overflow_bits);
    }
    let e = i32(a >> 23u) - 127;
    let extra = u32(max(emin - e, 0));
    let shift = 23u - mb + extra;
    var r = 0u;
    if shift == 24u {
        r = select(min_sub_bits, 0u, (a & 0x7fffffu) == 0u);
    } else if shift < 24u {
        let significand = (a & 0x7fffffu) | 0x800000u;
        let lsb = (significand >> shift) & 1u;
        r = (a + (1u << (shift - 1u)) - 1u + lsb) & ~((1u << shift) - 1u);
    }
    if r > max_bits {
        return bitcast<f32>(s | overflow_bits);
    }
    return bitcast<f32>(s | r);
}

// Round an f32 to the nearest bf16 (ties to even) and back; NaN stays NaN.
// Twin of hif8lab_format::bf16_rne.
fn bf16_rne(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if (b & 0x7fffffffu) > F32_INF_BITS {
        return x;
    }
    let rounded = b + 0x7fffu + ((b >> 16u) & 1u);
    return bitcast<f32>(rounded & 0xffff0000u);
}

// Quantize-dequantize without scaling, nearest rounding (used for underflow counts).
fn qdq_nearest(y: f32, q: QuantParams) -> f32 {
    if q.format == FORMAT_HIF8 {
        return hif8_qdq(y, q.overflow == 1u, false, 0u);
    }
    return ocp_qdq(y, q.format, q.overflow == 1u);
}

// qdq(x·scale)/scale: twin of FakeQuant::qdq_at(x, scale, index).
fn fake_quant(x: f32, scale: f32, q: QuantParams, index: u32) -> f32 {
    let y = x * scale;
    var r: f32;
    if q.format == FORMAT_HIF8 {
        let hybrid = q.rounding == 1u;
        r = hif8_qdq(y, q.overflow == 1u, hybrid, select(0u, hash_u32(q.seed, index), hybrid));
    } else {
        r = ocp_qdq(y, q.format, q.overflow == 1u);
    }
    return r / scale;
}
