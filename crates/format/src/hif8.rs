//! HiF8 (HiFloat8): decode, encode, fake quantization and tiers, exactly as SPEC.md §2.
//!
//! Layout of a code: `sign | dot (prefix code) | exponent (sign-magnitude) | mantissa`.
//! The dot field says how many exponent and mantissa bits follow, so precision tapers
//! with the magnitude of the exponent: 3 mantissa bits for |E| ≤ 3, 2 for |E| ≤ 7,
//! 1 for |E| ≤ 15, and seven power-of-two denormals below 2^-15.
//!
//! All rounding here works on the integer bits of the f32 (never on float `round()`),
//! so the GPU kernel in `shaders/` can be a line-for-line twin.
//! Other formats live in [`crate::ocp`]; the common entry point is [`crate::FakeQuant`].

use crate::Overflow;

/// The only NaN code.
pub const NAN_CODE: u8 = 0x80;
/// +Inf (the pattern that would otherwise be 1.5·2^15).
pub const POS_INF_CODE: u8 = 0x6F;
/// −Inf.
pub const NEG_INF_CODE: u8 = 0xEF;
/// Largest finite value, 2^15 (code 0x6E).
pub const MAX_FINITE: f32 = 32768.0;
/// Smallest normal value, 2^-15 (code 0x7E).
pub const MIN_NORMAL: f32 = 1.0 / 32768.0;
/// Smallest denormal value, 2^-22 (code 0x01).
pub const MIN_DENORMAL: f32 = 1.0 / 4_194_304.0;
/// |x| at or above this overflows under ties-away rounding (midpoint of 2^15 and 1.5·2^15).
pub const OVERFLOW_THRESHOLD: f32 = 40960.0;
/// Largest value with 3 mantissa bits (code 0x2F): 15.
pub const TOP_OF_3BIT_TIER: f32 = 15.0;
/// Largest value with 2 mantissa bits (code 0x4F): 224.
pub const TOP_OF_2BIT_TIER: f32 = 224.0;

const SIGN_BIT: u32 = 0x8000_0000;
const ABS_MASK: u32 = 0x7FFF_FFFF;
const F32_INF_BITS: u32 = 0x7F80_0000;
const OVERFLOW_BITS: u32 = 0x4720_0000; // 40960.0
const MAX_FINITE_BITS: u32 = 0x4700_0000; // 32768.0
const STOCHASTIC_OVERFLOW_BITS: u32 = 0x4740_0000; // 49152.0 = 1.5·2^15, the Inf pattern
const UNDERFLOW_BITS: u32 = 0x3400_0000; // 2^-23
const MIN_DENORMAL_BITS: u32 = 0x3480_0000; // 2^-22

/// Decodes one HiF8 code to its exact value.
pub fn decode(code: u8) -> f32 {
    let negative = code & 0x80 != 0;
    let body = code & 0x7F;
    let magnitude = match body {
        0x00 => {
            return if negative { f32::NAN } else { 0.0 };
        }
        0x6F => f32::INFINITY,
        0x01..=0x07 => exp2i(i32::from(body) - 23),
        0x08..=0x0F => normal(0, body & 0x07, 3),
        0x10..=0x1F => {
            let e = signed_exp(body >> 3 & 1, 1);
            normal(e, body & 0x07, 3)
        }
        0x20..=0x3F => {
            let e = signed_exp(body >> 4 & 1, 2 + i32::from(body >> 3 & 1));
            normal(e, body & 0x07, 3)
        }
        0x40..=0x5F => {
            let e = signed_exp(body >> 4 & 1, 4 + i32::from(body >> 2 & 0x3));
            normal(e, body & 0x03, 2)
        }
        _ => {
            // 0x60..=0x7F
            let e = signed_exp(body >> 4 & 1, 8 + i32::from(body >> 1 & 0x7));
            normal(e, body & 0x01, 1)
        }
    };
    if negative { -magnitude } else { magnitude }
}

fn signed_exp(sign: u8, magnitude: i32) -> i32 {
    if sign == 1 { -magnitude } else { magnitude }
}

fn normal(exponent: i32, mantissa: u8, mantissa_bits: u32) -> f32 {
    exp2i(exponent) * (1.0 + f32::from(mantissa) / (1u32 << mantissa_bits) as f32)
}

/// 2^e for e in the f32 normal range, built from bits (exact).
pub(crate) fn exp2i(e: i32) -> f32 {
    debug_assert!((-126..=127).contains(&e));
    f32::from_bits(((e + 127) as u32) << 23)
}

/// Mantissa bits HiF8 keeps in the binade 2^e (e is the unbiased f32 exponent).
///
/// 3 for |e| ≤ 3, 2 for |e| ≤ 7, 1 for |e| ≤ 15, 0 in the denormal binades below.
pub fn mantissa_bits_for_exponent(e: i32) -> u32 {
    match e.unsigned_abs() {
        0..=3 => 3,
        4..=7 => 2,
        8..=15 => 1,
        _ => 0,
    }
}

/// Exact HiF8 fake quantization of one f32 with ties-away rounding (SPEC.md §2 `qdq`).
pub fn qdq(x: f32, overflow: Overflow) -> f32 {
    let bits = x.to_bits();
    let sign = bits & SIGN_BIT;
    let a = bits & ABS_MASK;
    if a >= F32_INF_BITS {
        if a > F32_INF_BITS {
            return x; // NaN
        }
        return f32::from_bits(sign | overflow_bits(overflow));
    }
    if a >= OVERFLOW_BITS {
        return f32::from_bits(sign | overflow_bits(overflow));
    }
    if a < UNDERFLOW_BITS {
        return 0.0;
    }
    let e = (a >> 23) as i32 - 127;
    if e == -23 {
        return f32::from_bits(sign | MIN_DENORMAL_BITS);
    }
    let shift = 23 - mantissa_bits_for_exponent(e);
    let rounded = (a + (1 << (shift - 1))) & !((1u32 << shift) - 1);
    f32::from_bits(sign | rounded)
}

/// [`qdq`] without branches, for loops the compiler vectorizes (SIMD on x86 and in wasm):
/// the same result for every input (checked against [`qdq`] over a sweep of all bit
/// patterns in the tests). `overflow_bits` is the magnitude an overflow becomes: +Inf's bits
/// or the largest finite value's (see [`overflow_magnitude_bits`]).
#[inline(always)]
pub fn qdq_branchless(x: f32, overflow_bits: u32) -> f32 {
    let bits = x.to_bits();
    let sign = bits & SIGN_BIT;
    let a = bits & ABS_MASK;
    let e = (a >> 23) as i32 - 127;
    let ae = e.unsigned_abs();
    // Half a unit in the last kept place: 3, 2, 1, 0 mantissa bits by |e| (selects, not
    // per-lane shifts, which wasm SIMD lacks).
    let mut half = 1u32 << 19;
    if ae > 3 {
        half = 1 << 20;
    }
    if ae > 7 {
        half = 1 << 21;
    }
    if ae > 15 {
        half = 1 << 22;
    }
    let rounded = (a + half) & (half << 1).wrapping_neg();
    let mut r = sign | rounded;
    if e == -23 {
        r = sign | MIN_DENORMAL_BITS;
    }
    if a < UNDERFLOW_BITS {
        r = 0;
    }
    if a >= OVERFLOW_BITS {
        r = sign | overflow_bits;
    }
    if a > F32_INF_BITS {
        r = bits;
    }
    f32::from_bits(r)
}

/// `qdq_branchless(src[i]·scale, overflow_bits) / scale` into `dst[i]` for every `i` below
/// both lengths, 8 lanes at a time in AVX2 registers: the same IEEE product and quotient
/// and the same integer steps as the scalar function (the compiler's own vectorization of
/// it keeps its constants in memory and takes about twice as many instructions).
/// (Where the build has AVX-512 too, [`qdq_scaled_into_avx512`] runs instead and this one
/// is kept, and tested, for AVX2-only builds.)
#[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
#[cfg_attr(target_feature = "avx512f", allow(dead_code))]
#[allow(unsafe_code)]
pub(crate) fn qdq_scaled_into(src: &[f32], dst: &mut [f32], scale: f32, overflow_bits: u32) {
    use std::arch::x86_64::{
        _mm256_abs_epi32, _mm256_add_epi32, _mm256_and_si256, _mm256_andnot_si256,
        _mm256_blendv_epi8, _mm256_castps_si256, _mm256_castsi256_ps, _mm256_cmpeq_epi32,
        _mm256_cmpgt_epi32, _mm256_div_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_or_si256,
        _mm256_set1_epi32, _mm256_set1_ps, _mm256_setzero_si256, _mm256_slli_epi32,
        _mm256_sllv_epi32, _mm256_srli_epi32, _mm256_storeu_ps, _mm256_sub_epi32,
    };
    const L: usize = 8;
    let n = src.len().min(dst.len());
    let whole = n / L * L;
    // SAFETY: AVX2 is enabled for this build (the cfg above), which is all the register
    // intrinsics need; each load reads the 8 f32 of `s` and each store writes the 8 of `d`,
    // chunks that `chunks_exact` made 8 long.
    unsafe {
        let c = |v: u32| _mm256_set1_epi32(v as i32);
        let vs = _mm256_set1_ps(scale);
        let (sign_m, abs_m) = (c(SIGN_BIT), c(ABS_MASK));
        let (c127, c19, c3, c7, c15, cm23) = (c(127), c(19), c(3), c(7), c(15), c((-23i32) as u32));
        let (one, zero) = (c(1), _mm256_setzero_si256());
        let (denormal, under) = (c(MIN_DENORMAL_BITS), c(UNDERFLOW_BITS));
        let (over, inf, ob) = (c(OVERFLOW_BITS - 1), c(F32_INF_BITS), c(overflow_bits));
        for (s, d) in src[..whole]
            .chunks_exact(L)
            .zip(dst[..whole].chunks_exact_mut(L))
        {
            let bits = _mm256_castps_si256(_mm256_mul_ps(_mm256_loadu_ps(s.as_ptr()), vs));
            let sign = _mm256_and_si256(bits, sign_m);
            // Magnitudes are below 2^31, so signed compares order them.
            let a = _mm256_and_si256(bits, abs_m);
            let e = _mm256_sub_epi32(_mm256_srli_epi32::<23>(a), c127);
            let ae = _mm256_abs_epi32(e);
            // Half a unit in the last kept place: 2^19, one binade up per |e| tier passed
            // (each compare's mask is −1).
            let shift = _mm256_sub_epi32(
                _mm256_sub_epi32(
                    _mm256_sub_epi32(c19, _mm256_cmpgt_epi32(ae, c3)),
                    _mm256_cmpgt_epi32(ae, c7),
                ),
                _mm256_cmpgt_epi32(ae, c15),
            );
            let half = _mm256_sllv_epi32(one, shift);
            let keep = _mm256_sub_epi32(zero, _mm256_slli_epi32::<1>(half));
            let rounded = _mm256_and_si256(_mm256_add_epi32(a, half), keep);
            let mut r = _mm256_or_si256(sign, rounded);
            let to_denormal = _mm256_cmpeq_epi32(e, cm23);
            r = _mm256_blendv_epi8(r, _mm256_or_si256(sign, denormal), to_denormal);
            r = _mm256_andnot_si256(_mm256_cmpgt_epi32(under, a), r);
            r = _mm256_blendv_epi8(r, _mm256_or_si256(sign, ob), _mm256_cmpgt_epi32(a, over));
            r = _mm256_blendv_epi8(r, bits, _mm256_cmpgt_epi32(a, inf));
            _mm256_storeu_ps(d.as_mut_ptr(), _mm256_div_ps(_mm256_castsi256_ps(r), vs));
        }
    }
    for (o, x) in dst[whole..n].iter_mut().zip(&src[whole..n]) {
        *o = qdq_branchless(*x * scale, overflow_bits) / scale;
    }
}

/// [`qdq_branchless`]`(x·scale, overflow_bits) / scale` on 16 lanes in AVX-512 registers
/// (compares into mask registers, blends by mask): the same IEEE product and quotient and
/// the same integer steps as the scalar function, so the same bits as the AVX2 and scalar
/// paths. Public so that a statistics pass can quantize and count in one loop.
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
#[derive(Clone, Copy)]
pub struct Qdq16 {
    scale: std::arch::x86_64::__m512,
    k: [std::arch::x86_64::__m512i; 13],
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
#[allow(unsafe_code)]
impl Qdq16 {
    /// The codec at `scale` with overflows becoming `overflow_bits`
    /// ([`overflow_magnitude_bits`]).
    #[inline(always)]
    pub fn new(scale: f32, overflow_bits: u32) -> Qdq16 {
        use std::arch::x86_64::{_mm512_set1_epi32, _mm512_set1_ps};
        // SAFETY: AVX-512F is enabled for this build (the cfg above), which is all the
        // register intrinsics need.
        unsafe {
            let c = |v: u32| _mm512_set1_epi32(v as i32);
            Qdq16 {
                scale: _mm512_set1_ps(scale),
                k: [
                    c(SIGN_BIT),
                    c(ABS_MASK),
                    c(127),
                    c(19),
                    c(3),
                    c(7),
                    c(15),
                    c((-23i32) as u32),
                    c(1),
                    c(MIN_DENORMAL_BITS),
                    c(UNDERFLOW_BITS),
                    c(OVERFLOW_BITS - 1),
                    c(overflow_bits),
                ],
            }
        }
    }

    /// The 16 lanes of `x` fake-quantized.
    #[inline(always)]
    pub fn qdq(&self, x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::{
            _mm512_abs_epi32, _mm512_add_epi32, _mm512_and_si512, _mm512_castps_si512,
            _mm512_castsi512_ps, _mm512_cmpeq_epi32_mask, _mm512_cmpgt_epi32_mask,
            _mm512_cmple_epi32_mask, _mm512_div_ps, _mm512_mask_add_epi32, _mm512_mask_blend_epi32,
            _mm512_maskz_mov_epi32, _mm512_mul_ps, _mm512_or_si512, _mm512_set1_epi32,
            _mm512_setzero_si512, _mm512_slli_epi32, _mm512_sllv_epi32, _mm512_srli_epi32,
            _mm512_sub_epi32,
        };
        let [
            sign_m,
            abs_m,
            c127,
            c19,
            c3,
            c7,
            c15,
            cm23,
            one,
            denormal,
            under,
            over,
            ob,
        ] = self.k;
        // SAFETY: AVX-512F is enabled for this build (the cfg above), which is all the
        // register intrinsics need (no memory is touched).
        unsafe {
            let inf = _mm512_set1_epi32(F32_INF_BITS as i32);
            let bits = _mm512_castps_si512(_mm512_mul_ps(x, self.scale));
            let sign = _mm512_and_si512(bits, sign_m);
            // Magnitudes are below 2^31, so signed compares order them.
            let a = _mm512_and_si512(bits, abs_m);
            let e = _mm512_sub_epi32(_mm512_srli_epi32::<23>(a), c127);
            let ae = _mm512_abs_epi32(e);
            // Half a unit in the last kept place: 2^19, one binade up per |e| tier passed.
            let mut shift = c19;
            for tier in [c3, c7, c15] {
                shift = _mm512_mask_add_epi32(shift, _mm512_cmpgt_epi32_mask(ae, tier), shift, one);
            }
            let half = _mm512_sllv_epi32(one, shift);
            let keep = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32::<1>(half));
            let rounded = _mm512_and_si512(_mm512_add_epi32(a, half), keep);
            let mut r = _mm512_or_si512(sign, rounded);
            let to_denormal = _mm512_cmpeq_epi32_mask(e, cm23);
            r = _mm512_mask_blend_epi32(to_denormal, r, _mm512_or_si512(sign, denormal));
            // Zero below the underflow bound (kept where under ≤ a).
            r = _mm512_maskz_mov_epi32(_mm512_cmple_epi32_mask(under, a), r);
            r = _mm512_mask_blend_epi32(
                _mm512_cmpgt_epi32_mask(a, over),
                r,
                _mm512_or_si512(sign, ob),
            );
            r = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(a, inf), r, bits);
            _mm512_div_ps(_mm512_castsi512_ps(r), self.scale)
        }
    }
}

/// [`qdq_scaled_into`] 16 lanes at a time ([`Qdq16`]).
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
#[allow(unsafe_code)]
pub(crate) fn qdq_scaled_into_avx512(src: &[f32], dst: &mut [f32], scale: f32, overflow_bits: u32) {
    use std::arch::x86_64::{
        _MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch, _mm512_loadu_ps, _mm512_storeu_ps,
    };
    const L: usize = 16;
    const PREFETCH: usize = 512;
    let n = src.len().min(dst.len());
    let whole = n / L * L;
    let codec = Qdq16::new(scale, overflow_bits);
    for (s, d) in src[..whole]
        .chunks_exact(L)
        .zip(dst[..whole].chunks_exact_mut(L))
    {
        // SAFETY: AVX-512F is enabled for this build (the cfg above); the load reads the 16
        // f32 of `s` and the store writes the 16 of `d`, chunks that `chunks_exact` made 16
        // long; a prefetch only hints at an address (formed with `wrapping_add`, never
        // dereferenced) and cannot fault.
        unsafe {
            // 2 KiB ahead: the destination for writing (its lines were usually not in
            // cache: the store was half the loop's time), the source for reading.
            _mm_prefetch::<_MM_HINT_ET0>(d.as_ptr().wrapping_add(PREFETCH).cast());
            _mm_prefetch::<_MM_HINT_T0>(s.as_ptr().wrapping_add(PREFETCH).cast());
            _mm512_storeu_ps(d.as_mut_ptr(), codec.qdq(_mm512_loadu_ps(s.as_ptr())));
        }
    }
    for (o, x) in dst[whole..n].iter_mut().zip(&src[whole..n]) {
        *o = qdq_branchless(*x * scale, overflow_bits) / scale;
    }
}

/// The magnitude bits an overflow becomes under `overflow` (for [`qdq_branchless`]).
pub fn overflow_magnitude_bits(overflow: Overflow) -> u32 {
    overflow_bits(overflow)
}

/// HiF8 "hybrid" rounding: ties-away for |E| ≤ 3, stochastic above.
///
/// `random` supplies the stochastic bits (uniform u32); the caller derives it from a seed
/// and the element index (see [`crate::hash_u32`]) so results are reproducible.
/// Overflow follows the ties-away threshold first; a stochastic round up onto the Inf
/// pattern (1.5·2^15) overflows too.
pub fn qdq_hybrid(x: f32, overflow: Overflow, random: u32) -> f32 {
    let bits = x.to_bits();
    let sign = bits & SIGN_BIT;
    let a = bits & ABS_MASK;
    if !(UNDERFLOW_BITS..OVERFLOW_BITS).contains(&a) {
        return qdq(x, overflow);
    }
    let e = (a >> 23) as i32 - 127;
    if e.abs() <= 3 {
        return qdq(x, overflow);
    }
    if e == -23 {
        // Between 0 and 2^-22: round up with probability x / 2^-22.
        let significand = a & 0x7F_FFFF | 0x80_0000; // x / 2^-23 in 1.23 fixed point
        let threshold = significand << 8; // x / 2^-22 as a 0.32 fraction
        return if random < threshold {
            f32::from_bits(sign | MIN_DENORMAL_BITS)
        } else {
            0.0
        };
    }
    let shift = 23 - mantissa_bits_for_exponent(e);
    let mask = (1u32 << shift) - 1;
    let rounded = (a + (random & mask)) & !mask;
    if rounded >= STOCHASTIC_OVERFLOW_BITS {
        return f32::from_bits(sign | overflow_bits(overflow));
    }
    f32::from_bits(sign | rounded)
}

fn overflow_bits(overflow: Overflow) -> u32 {
    match overflow {
        Overflow::Inf => F32_INF_BITS,
        Overflow::Saturate => MAX_FINITE_BITS,
    }
}

/// Encodes one f32 to a HiF8 code with ties-away rounding.
pub fn encode(x: f32, overflow: Overflow) -> u8 {
    code_of_exact(qdq(x, overflow))
}

/// Code of a value that is exactly representable in HiF8 (the output of [`qdq`]).
///
/// A value that is not representable is truncated to the code below it in magnitude;
/// callers pass quantized values only.
pub fn code_of_exact(v: f32) -> u8 {
    if v.is_nan() {
        return NAN_CODE;
    }
    let negative = v.is_sign_negative();
    let sign_bit: u8 = if negative { 0x80 } else { 0x00 };
    let a = v.abs();
    if a == 0.0 {
        return 0x00;
    }
    if a.is_infinite() {
        return if negative { NEG_INF_CODE } else { POS_INF_CODE };
    }
    let bits = a.to_bits();
    let e = (bits >> 23) as i32 - 127;
    if e < -15 {
        return sign_bit | (e + 23).clamp(1, 7) as u8;
    }
    let mb = mantissa_bits_for_exponent(e);
    let m = (bits & 0x7F_FFFF) >> (23 - mb);
    let m = m as u8;
    let neg_e = u8::from(e < 0);
    let mag = e.unsigned_abs() as u8;
    let body = match mag {
        0 => 0x08 | m,
        1 => 0x10 | neg_e << 3 | m,
        2..=3 => 0x20 | neg_e << 4 | (mag - 2) << 3 | m,
        4..=7 => 0x40 | neg_e << 4 | (mag - 4) << 2 | m,
        _ => 0x60 | neg_e << 4 | (mag - 8) << 1 | m,
    };
    sign_bit | body
}

/// Where a value falls among HiF8's precision tiers (by the binade of |x|, before rounding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    /// |x| < 2^-23: quantizes to zero.
    Underflow,
    /// 2^-23 ≤ |x| < 2^-15: the power-of-two denormals, no mantissa bits.
    Denormal,
    /// A normal binade keeping this many mantissa bits (3, 2 or 1).
    Mantissa(u8),
    /// |x| ≥ 40960 or infinite: becomes Inf (or saturates).
    Overflow,
    /// NaN input.
    NaN,
}

impl Tier {
    /// Short label used by plots and tables.
    pub fn label(self) -> &'static str {
        match self {
            Tier::Underflow => "underflow",
            Tier::Denormal => "denormal",
            Tier::Mantissa(3) => "3-bit",
            Tier::Mantissa(2) => "2-bit",
            Tier::Mantissa(_) => "1-bit",
            Tier::Overflow => "overflow",
            Tier::NaN => "nan",
        }
    }
}

/// Where HiF8's tiers begin, from the smallest magnitude up: `(e, tier)` says the tier
/// of every |x| in `[2^e, next boundary)` — the denormals, the 1-, 2-, 3-bit binades and back
/// down, then overflow (which begins at [`OVERFLOW_THRESHOLD`], not at a power of two; its
/// entry carries `e = floor(log2 40960) = 15` and [`overflow_log2`] gives the exact edge).
pub fn tier_boundaries() -> Vec<(i32, Tier)> {
    let mut out = Vec::new();
    let mut previous = Tier::Underflow;
    for e in -24..=15 {
        let t = tier(exp2i(e));
        if t != previous {
            out.push((e, t));
            previous = t;
        }
    }
    out.push((15, Tier::Overflow));
    out
}

/// log2 of the overflow threshold (40960).
pub fn overflow_log2() -> f64 {
    f64::from(OVERFLOW_THRESHOLD).log2()
}

/// The tier of any f32 value.
pub fn tier(x: f32) -> Tier {
    let a = x.to_bits() & ABS_MASK;
    if a > F32_INF_BITS {
        return Tier::NaN;
    }
    if a >= OVERFLOW_BITS {
        return Tier::Overflow;
    }
    if a < UNDERFLOW_BITS {
        return Tier::Underflow;
    }
    let e = (a >> 23) as i32 - 127;
    if e < -15 {
        return Tier::Denormal;
    }
    Tier::Mantissa(mantissa_bits_for_exponent(e) as u8)
}

#[cfg(test)]
mod tests;
