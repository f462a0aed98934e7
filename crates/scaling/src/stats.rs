//! Statistics of one quantizer call on the CPU: the reference the GPU `quant_stats`
//! kernel must match exactly (SPEC.md §3 "Statistics per quantizer call").
//!
//! Definitions (all counts exact):
//! - `amax`: max |x| over non-NaN elements (an Inf makes it Inf); 0 for an empty tensor;
//! - `nonfinite`: elements that are NaN or ±Inf;
//! - `above[k]`: elements with |x| > `est[k]` (NaN never counts);
//! - `overflow[k]`: elements with |x · scale[k]| ≥ the format's overflow threshold;
//! - `underflow`: non-zero elements that quantize to 0 at the active scale.

use hif8lab_format::FakeQuant;

/// One estimator's threshold pair for the shadow counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Threshold {
    /// The estimate: values above it left the tier the scale aimed for.
    pub est: f32,
    /// The scale: values whose scaled magnitude reaches the overflow threshold clip.
    pub scale: f32,
}

/// Statistics of one tensor for one call.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorStats {
    /// Elements in the tensor.
    pub numel: u64,
    /// max |x| over non-NaN elements.
    pub amax: f32,
    /// NaN or Inf elements.
    pub nonfinite: u64,
    /// Per threshold: elements with |x| > est.
    pub above_est: Vec<u64>,
    /// Per threshold: elements with |x·scale| ≥ overflow threshold.
    pub overflow: Vec<u64>,
    /// Non-zero elements that quantize to zero at the active scale.
    pub underflow: u64,
    /// Σx² over the finite elements whose fake-quantized value is finite.
    pub signal: f64,
    /// Σ(x − qdq(x))² over the same elements, at the active scale (the quantization error
    /// of the call; overflowing elements are counted in `overflow`, not here).
    pub noise: f64,
}

/// SQNR reported when a call's quantization error is exactly zero (every value
/// representable): a cap, not a measurement.
pub const SQNR_CAP_DB: f32 = 300.0;

/// Signal-to-quantization-noise ratio in dB, 10·log10(signal / noise); `None` when there is
/// no signal (an all-zero tensor), [`SQNR_CAP_DB`] when the noise is zero.
pub fn sqnr_db(signal: f64, noise: f64) -> Option<f32> {
    if signal.is_nan() || signal <= 0.0 || !signal.is_finite() || !noise.is_finite() {
        None
    } else if noise <= 0.0 {
        Some(SQNR_CAP_DB)
    } else {
        Some(((10.0 * (signal / noise).log10()) as f32).min(SQNR_CAP_DB))
    }
}

/// Signal and quantization-noise energies of `x` fake-quantized at `scale`: f64 sums in
/// [`ENERGY_LANES`] interleaved lanes (element `i` into lane `i % 8`, each lane in element
/// order, then the lanes in order), so the loop vectorizes instead of waiting on one chain
/// of additions; the order is fixed by the element index alone. Element `i` uses random
/// index `first_index + i` for hybrid rounding, as the fake-quantization of the same tensor
/// does. Non-finite inputs and elements whose quantized value is not finite (overflow
/// without saturation) are left out.
pub fn quant_error(x: &[f32], first_index: u32, scale: f32, quant: &FakeQuant) -> (f64, f64) {
    energies(x, |i, v| {
        quant.qdq_at(v, scale, first_index.wrapping_add(i as u32))
    })
}

/// [`quant_error`] of `x` whose fake-quantized values `q` are already computed (same sums,
/// same order: equal results when `q` is what the quantizer gives).
pub fn quant_error_of(x: &[f32], q: &[f32]) -> (f64, f64) {
    let q = &q[..x.len()];
    let given = |i: usize, _: f32| q[i];
    let whole = x.len() / ENERGY_LANES * ENERGY_LANES;
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx512f",
        target_feature = "avx512vl"
    ))]
    let lanes = lanes_of_blocks_avx512(&x[..whole], &q[..whole]);
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx",
        not(all(target_feature = "avx512f", target_feature = "avx512vl"))
    ))]
    let lanes = lanes_of_blocks(&x[..whole], &q[..whole]);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx")))]
    let lanes = block_lanes(&x[..whole], &given);
    with_tail(lanes, x, whole, &given)
}

/// [`block_lanes`] of given values in AVX registers: the same IEEE operations per lane as
/// [`error_terms`] (the compiler's own vectorization of it shuffled lanes and branched).
#[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
#[cfg_attr(
    all(target_feature = "avx512f", target_feature = "avx512vl"),
    allow(dead_code)
)]
#[allow(unsafe_code)]
fn lanes_of_blocks(x: &[f32], q: &[f32]) -> Lanes {
    use std::arch::x86_64::{
        _CMP_LT_OQ, _mm256_add_pd, _mm256_and_ps, _mm256_castps256_ps128, _mm256_cmp_ps,
        _mm256_cvtps_pd, _mm256_extractf128_ps, _mm256_loadu_ps, _mm256_mul_pd, _mm256_set1_ps,
        _mm256_setzero_pd, _mm256_storeu_pd, _mm256_sub_pd,
    };
    const L: usize = ENERGY_LANES;
    let (mut signal, mut noise) = ([0.0f64; L], [0.0f64; L]);
    // SAFETY: AVX is enabled for this build (the cfg above); every load reads 8 f32 of a
    // block that `chunks_exact` made exactly 8 long, every store writes 4 f64 into an
    // array of 8 at offset 0 or 4.
    unsafe {
        let abs = _mm256_set1_ps(f32::from_bits(0x7FFF_FFFF));
        let inf = _mm256_set1_ps(f32::INFINITY);
        let (mut s_lo, mut s_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
        let (mut n_lo, mut n_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
        for (xb, qb) in x.chunks_exact(L).zip(q.chunks_exact(L)) {
            let (v, qv) = (_mm256_loadu_ps(xb.as_ptr()), _mm256_loadu_ps(qb.as_ptr()));
            // Finite: |x| < inf (false for NaN); both finite or both become +0.0.
            let keep = _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(v, abs), inf),
                _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(qv, abs), inf),
            );
            let (v, qv) = (_mm256_and_ps(v, keep), _mm256_and_ps(qv, keep));
            let (v_lo, v_hi) = (
                _mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)),
            );
            let (q_lo, q_hi) = (
                _mm256_cvtps_pd(_mm256_castps256_ps128(qv)),
                _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(qv)),
            );
            let (e_lo, e_hi) = (_mm256_sub_pd(v_lo, q_lo), _mm256_sub_pd(v_hi, q_hi));
            s_lo = _mm256_add_pd(s_lo, _mm256_mul_pd(v_lo, v_lo));
            s_hi = _mm256_add_pd(s_hi, _mm256_mul_pd(v_hi, v_hi));
            n_lo = _mm256_add_pd(n_lo, _mm256_mul_pd(e_lo, e_lo));
            n_hi = _mm256_add_pd(n_hi, _mm256_mul_pd(e_hi, e_hi));
        }
        _mm256_storeu_pd(signal.as_mut_ptr(), s_lo);
        _mm256_storeu_pd(signal.as_mut_ptr().add(4), s_hi);
        _mm256_storeu_pd(noise.as_mut_ptr(), n_lo);
        _mm256_storeu_pd(noise.as_mut_ptr().add(4), n_hi);
    }
    (signal, noise)
}

/// [`lanes_of_blocks`] with the eight f64 lanes in one AVX-512 register (the AVX path keeps
/// them in two halves): the same lanes, the same IEEE operations per lane, a non-finite
/// pair zeroed by the conversion's mask instead of a bit mask (both give +0.0).
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx512f",
    target_feature = "avx512vl"
))]
#[allow(unsafe_code)]
fn lanes_of_blocks_avx512(x: &[f32], q: &[f32]) -> Lanes {
    use std::arch::x86_64::{
        _CMP_LT_OQ, _mm256_and_ps, _mm256_cmp_ps_mask, _mm256_loadu_ps, _mm256_set1_ps,
        _mm512_setzero_pd, _mm512_storeu_pd,
    };
    const L: usize = ENERGY_LANES;
    let (mut signal, mut noise) = ([0.0f64; L], [0.0f64; L]);
    // SAFETY: AVX-512F and VL are enabled for this build (the cfg above); every load reads
    // 8 f32 of a block that `chunks_exact` made exactly 8 long, every store writes 8 f64
    // into an array of 8.
    unsafe {
        let abs = _mm256_set1_ps(f32::from_bits(0x7FFF_FFFF));
        let inf = _mm256_set1_ps(f32::INFINITY);
        let (mut s, mut n) = (_mm512_setzero_pd(), _mm512_setzero_pd());
        for (xb, qb) in x.chunks_exact(L).zip(q.chunks_exact(L)) {
            let (v, qv) = (_mm256_loadu_ps(xb.as_ptr()), _mm256_loadu_ps(qb.as_ptr()));
            // Finite: |x| < inf (false for NaN); both finite or both become +0.0.
            let keep = _mm256_cmp_ps_mask::<_CMP_LT_OQ>(_mm256_and_ps(v, abs), inf)
                & _mm256_cmp_ps_mask::<_CMP_LT_OQ>(_mm256_and_ps(qv, abs), inf);
            add_energies8(&mut s, &mut n, (v, qv), keep);
        }
        _mm512_storeu_pd(signal.as_mut_ptr(), s);
        _mm512_storeu_pd(noise.as_mut_ptr(), n);
    }
    (signal, noise)
}

/// One block of 8 into the energies' 8 f64 lanes: `s += v²`, `n += (v − q)²` lane by lane,
/// the lanes not in `keep` (a non-finite `v` or `q`) converted as +0.0 (adding nothing) —
/// [`error_terms`]' operations; shared by [`lanes_of_blocks_avx512`] and the one pass of
/// [`tensor_qdq_counts`].
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx512f",
    target_feature = "avx512vl"
))]
#[inline(always)]
#[allow(unsafe_code)]
fn add_energies8(
    s: &mut std::arch::x86_64::__m512d,
    n: &mut std::arch::x86_64::__m512d,
    (v, q): (std::arch::x86_64::__m256, std::arch::x86_64::__m256),
    keep: u8,
) {
    use std::arch::x86_64::{_mm512_add_pd, _mm512_maskz_cvtps_pd, _mm512_mul_pd, _mm512_sub_pd};
    // SAFETY: AVX-512F is enabled for this build (the cfg above), which is all the register
    // intrinsics need (no memory is touched).
    unsafe {
        let (v, q) = (
            _mm512_maskz_cvtps_pd(keep, v),
            _mm512_maskz_cvtps_pd(keep, q),
        );
        let e = _mm512_sub_pd(v, q);
        *s = _mm512_add_pd(*s, _mm512_mul_pd(v, v));
        *n = _mm512_add_pd(*n, _mm512_mul_pd(e, e));
    }
}

/// A block of `L` elements as an array (`x` has exactly `L`, from `chunks_exact`).
#[inline(always)]
fn block<const L: usize>(x: &[f32]) -> &[f32; L] {
    x.try_into()
        .unwrap_or_else(|_| panic!("stats: a block of {} elements, {L} expected", x.len()))
}

/// Lanes of the energy sums.
pub const ENERGY_LANES: usize = 8;

/// Σv² and Σ(v − q)² over the elements whose `v` and `q = quantized(i, v)` are finite, in
/// [`ENERGY_LANES`] lanes.
#[inline(always)]
fn energies(x: &[f32], quantized: impl Fn(usize, f32) -> f32) -> (f64, f64) {
    let whole = x.len() / ENERGY_LANES * ENERGY_LANES;
    with_tail(block_lanes(&x[..whole], &quantized), x, whole, &quantized)
}

/// Per-lane energy sums: lane l of each.
type Lanes = ([f64; ENERGY_LANES], [f64; ENERGY_LANES]);

/// The lane sums over `x`, whole blocks of [`ENERGY_LANES`] elements: lane l takes element
/// l of each block, blocks in order.
#[inline(always)]
fn block_lanes(x: &[f32], quantized: &impl Fn(usize, f32) -> f32) -> Lanes {
    const L: usize = ENERGY_LANES;
    let (mut signal, mut noise) = ([0.0f64; L], [0.0f64; L]);
    for (c, block) in x.chunks_exact(L).enumerate() {
        for l in 0..L {
            let (s, n) = error_terms(block[l], quantized(c * L + l, block[l]));
            signal[l] += s;
            noise[l] += n;
        }
    }
    (signal, noise)
}

/// `lanes` of `x[..whole]` plus the elements from `whole` on (element `whole + l` into lane
/// l), then the lanes summed in order.
#[inline(always)]
fn with_tail(
    (mut signal, mut noise): Lanes,
    x: &[f32],
    whole: usize,
    quantized: &impl Fn(usize, f32) -> f32,
) -> (f64, f64) {
    for (l, v) in x[whole..].iter().enumerate() {
        let (s, n) = error_terms(*v, quantized(whole + l, *v));
        signal[l] += s;
        noise[l] += n;
    }
    (
        signal.iter().fold(0.0, |a, b| a + b),
        noise.iter().fold(0.0, |a, b| a + b),
    )
}

/// One element's v² and (v − q)², both 0 (adding nothing) when `v` or `q` is not finite.
#[inline(always)]
fn error_terms(v: f32, q: f32) -> (f64, f64) {
    // Finite: the magnitude's bits below those of infinity. When either is not, both
    // become +0.0 (bit masks, no branch): terms of exactly 0.
    let finite = |x: f32| (x.to_bits() & 0x7FFF_FFFF) < 0x7F80_0000;
    let mask = 0u32.wrapping_sub(u32::from(finite(v) & finite(q)));
    let (v, q) = (
        f32::from_bits(v.to_bits() & mask),
        f32::from_bits(q.to_bits() & mask),
    );
    let (v, e) = (f64::from(v), f64::from(v) - f64::from(q));
    (v * v, e * e)
}

/// amax and non-finite count (the first pass; all that delayed scaling needs).
pub fn amax_and_nonfinite(x: &[f32]) -> (f32, u64) {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    return amax_and_nonfinite_avx512(x);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
    return amax_and_nonfinite_lanes(x);
}

/// [`amax_and_nonfinite`] in 8 lanes the compiler vectorizes.
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "avx512f"),
    allow(dead_code)
)]
fn amax_and_nonfinite_lanes(x: &[f32]) -> (f32, u64) {
    const L: usize = 8;
    const INF: u32 = 0x7F80_0000;
    let mut amax_bits = 0u32;
    let mut nonfinite = 0u64;
    // Blocks of 2^20 elements: per lane a 32-bit count (cannot wrap) and a running max of
    // the magnitude's bits (NaN's bits replaced by 0), L lanes at once.
    for big in x.chunks(1 << 20) {
        let whole = big.len() / L * L;
        let (mut m, mut n) = ([0u32; L], [0u32; L]);
        for b in big[..whole].chunks_exact(L) {
            let b: &[f32; L] = block(b);
            for l in 0..L {
                let a = b[l].to_bits() & 0x7FFF_FFFF;
                n[l] += u32::from(a >= INF);
                m[l] = m[l].max(if a <= INF { a } else { 0 });
            }
        }
        for v in &big[whole..] {
            let a = v.to_bits() & 0x7FFF_FFFF;
            n[0] += u32::from(a >= INF);
            m[0] = m[0].max(if a <= INF { a } else { 0 });
        }
        amax_bits = m.iter().fold(amax_bits, |a, b| a.max(*b));
        nonfinite += n.iter().map(|c| u64::from(*c)).sum::<u64>();
    }
    (f32::from_bits(amax_bits), nonfinite)
}

/// [`amax_and_nonfinite`] in AVX-512 registers, 16 lanes (a max and counts: the same
/// result in any order).
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
#[allow(unsafe_code)]
fn amax_and_nonfinite_avx512(x: &[f32]) -> (f32, u64) {
    use std::arch::x86_64::{
        _MM_HINT_T0, _mm_prefetch, _mm512_and_si512, _mm512_castps_si512, _mm512_cmpge_epi32_mask,
        _mm512_cmple_epi32_mask, _mm512_loadu_ps, _mm512_mask_add_epi32, _mm512_maskz_mov_epi32,
        _mm512_max_epu32, _mm512_reduce_add_epi32, _mm512_reduce_max_epu32, _mm512_set1_epi32,
        _mm512_setzero_si512,
    };
    const L: usize = 16;
    const INF: u32 = 0x7F80_0000;
    const PREFETCH: usize = 512;
    let mut amax_bits = 0u32;
    let mut nonfinite = 0u64;
    let one_of = |a: u32| (u32::from(a >= INF), if a <= INF { a } else { 0 });
    // Blocks of 2^20 elements: per lane a 32-bit count (at most 2^16) and a running max of
    // the magnitude's bits (NaN's bits replaced by 0).
    for big in x.chunks(1 << 20) {
        let whole = big.len() / L * L;
        // SAFETY: AVX-512F is enabled for this build (the cfg above); each load reads 16
        // f32 of a block that `chunks_exact` made exactly 16 long; a prefetch only hints at
        // an address (formed with `wrapping_add`, never dereferenced) and cannot fault.
        let (m, n) = unsafe {
            let (abs, inf, one) = (
                _mm512_set1_epi32(0x7FFF_FFFF),
                _mm512_set1_epi32(INF as i32),
                _mm512_set1_epi32(1),
            );
            let (mut m, mut n) = (_mm512_setzero_si512(), _mm512_setzero_si512());
            for b in big[..whole].chunks_exact(L) {
                // 2 KiB ahead (a hint: past the end it does nothing); about 10 % of the
                // pass in a training step, where the tensor is rarely still in cache.
                _mm_prefetch::<_MM_HINT_T0>(b.as_ptr().wrapping_add(PREFETCH).cast());
                // Magnitudes are below 2^31: signed compares order them.
                let a = _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(b.as_ptr())), abs);
                n = _mm512_mask_add_epi32(n, _mm512_cmpge_epi32_mask(a, inf), n, one);
                m = _mm512_max_epu32(
                    m,
                    _mm512_maskz_mov_epi32(_mm512_cmple_epi32_mask(a, inf), a),
                );
            }
            (
                _mm512_reduce_max_epu32(m),
                _mm512_reduce_add_epi32(n) as u32,
            )
        };
        amax_bits = amax_bits.max(m);
        nonfinite += u64::from(n);
        for v in &big[whole..] {
            let (c, a) = one_of(v.to_bits() & 0x7FFF_FFFF);
            nonfinite += u64::from(c);
            amax_bits = amax_bits.max(a);
        }
    }
    (f32::from_bits(amax_bits), nonfinite)
}

/// Every statistic of one call. `thresholds` has one entry per estimator; `active_scale`
/// is the scale quantization uses; `quant` gives the format and overflow threshold.
pub fn tensor_stats(
    x: &[f32],
    thresholds: &[Threshold],
    active_scale: f32,
    quant: &FakeQuant,
) -> TensorStats {
    tensor_stats_from(x, 0, thresholds, active_scale, quant)
}

/// [`tensor_stats`] of a piece of a tensor starting at element `first_index` (the random
/// index of hybrid rounding in the quantization error).
pub fn tensor_stats_from(
    x: &[f32],
    first_index: u32,
    thresholds: &[Threshold],
    active_scale: f32,
    quant: &FakeQuant,
) -> TensorStats {
    let (signal, noise) = quant_error(x, first_index, active_scale, quant);
    let amax = amax_and_nonfinite(x);
    counted(x, thresholds, active_scale, quant, signal, noise, amax)
}

/// [`tensor_stats_from`] of a piece `x` whose fake-quantized values at the active scale are
/// `q` (computed once, e.g. by the fake quantization that follows), without the codec and
/// without the amax pass: `amax` and `nonfinite` are 0, for a caller that measures them
/// ([`amax_and_nonfinite`] of the same elements) and puts them in their place. `bounds`:
/// the call's [`CountBounds`] (found once for all its pieces); `reach`: at least every
/// |x| of the piece that is not NaN (the tensor's amax), so that the counts from a bound
/// above it, zero, need no pass over the elements.
pub fn tensor_counts_given(x: &[f32], q: &[f32], bounds: &CountBounds, reach: f32) -> TensorStats {
    let (signal, noise) = quant_error_of(x, q);
    bounds.counted(x, signal, noise, (0.0, 0), reach)
}

/// `quant.qdq_into(x, q, scale)` and then [`tensor_counts_given`]`(x, q, bounds, reach)`,
/// in one pass where the build has AVX-512 and `quant` is HiF8 with round-to-nearest (the
/// common case): each 16 elements quantized, counted and their energies added together, so
/// the counting runs while the codec waits on memory (as separate passes, the codec's
/// waiting and the counting added up). The same results either way (checked in tests).
pub fn tensor_qdq_counts(
    x: &[f32],
    q: &mut [f32],
    quant: &FakeQuant,
    scale: f32,
    bounds: &CountBounds,
    reach: f32,
) -> TensorStats {
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx512f",
        target_feature = "avx512vl"
    ))]
    if let Some(stats) = fused::qdq_counts(x, q, quant, scale, bounds, reach) {
        return stats;
    }
    quant.qdq_into(x, q, scale);
    tensor_counts_given(x, q, bounds, reach)
}

/// [`tensor_qdq_counts`]' one pass in AVX-512 registers.
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx512f",
    target_feature = "avx512vl"
))]
#[allow(unsafe_code)]
mod fused {
    use super::{
        CountBounds, ENERGY_LANES, GROUP, TensorStats, add_energies8, count_group_scalar,
        error_terms, live_bounds,
    };
    use hif8lab_format::hif8::Qdq16;
    use hif8lab_format::{FakeQuant, Format, Rounding};
    use std::arch::x86_64::{
        __m512, __m512d, __m512i, _CMP_GE_OQ, _CMP_LT_OQ, _MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch,
        _mm256_castpd_ps, _mm512_abs_ps, _mm512_castps_pd, _mm512_castps512_ps256,
        _mm512_cmp_ps_mask, _mm512_extractf64x4_pd, _mm512_loadu_ps, _mm512_mask_add_epi32,
        _mm512_set1_epi32, _mm512_set1_ps, _mm512_setzero_pd, _mm512_setzero_si512,
        _mm512_storeu_pd, _mm512_storeu_ps, _mm512_storeu_si512,
    };

    /// `None` where the one pass does not apply (another format or rounding, more live
    /// bounds than one pass counts).
    pub(super) fn qdq_counts(
        x: &[f32],
        q: &mut [f32],
        quant: &FakeQuant,
        scale: f32,
        bounds: &CountBounds,
        reach: f32,
    ) -> Option<TensorStats> {
        if !matches!(
            (quant.format, quant.rounding),
            (Format::HiF8, Rounding::Nearest)
        ) {
            return None;
        }
        let n = x.len().min(q.len());
        // 32-bit lane counts: at most 2^32 per lane.
        if n >= 1 << 36 {
            return None;
        }
        let (x, q) = (&x[..n], &mut q[..n]);
        let live = live_bounds(&bounds.bounds, reach);
        if live.len() > GROUP {
            return None;
        }
        let b: Vec<f32> = live.iter().map(|i| bounds.bounds[*i]).collect();
        let codec = Qdq16::new(
            scale,
            hif8lab_format::hif8::overflow_magnitude_bits(quant.overflow),
        );
        let (live_counts, (signal, noise)) = match b.len() {
            0 => pass::<0>(x, q, &codec, &b),
            1 => pass::<1>(x, q, &codec, &b),
            2 => pass::<2>(x, q, &codec, &b),
            3 => pass::<3>(x, q, &codec, &b),
            4 => pass::<4>(x, q, &codec, &b),
            5 => pass::<5>(x, q, &codec, &b),
            6 => pass::<6>(x, q, &codec, &b),
            7 => pass::<7>(x, q, &codec, &b),
            _ => pass::<GROUP>(x, q, &codec, &b),
        };
        // The elements after the last whole 16: quantized, counted and added on.
        let whole = n / 16 * 16;
        quant.qdq_into(&x[whole..], &mut q[whole..], scale);
        let mut counts = vec![0u64; bounds.bounds.len()];
        for (j, i) in live.iter().enumerate() {
            let tail = count_group_scalar(&x[whole..], &[b[j]])[0];
            counts[*i] = live_counts[j] + tail;
        }
        let (mut signal, mut noise) = (signal, noise);
        for i in whole..n {
            let (s, e) = error_terms(x[i], q[i]);
            signal[i % ENERGY_LANES] += s;
            noise[i % ENERGY_LANES] += e;
        }
        let sum = |l: [f64; ENERGY_LANES]| l.iter().fold(0.0, |a, b| a + b);
        Some(bounds.with_counts(n, counts, sum(signal), sum(noise), (0.0, 0)))
    }

    /// The whole 16s of `x`: `q` written, each bound's count, and the energy lanes
    /// (element i into lane i mod 8, in element order, as `quant_error_of` sums them).
    fn pass<const N: usize>(
        x: &[f32],
        q: &mut [f32],
        codec: &Qdq16,
        bounds: &[f32],
    ) -> (Vec<u64>, ([f64; ENERGY_LANES], [f64; ENERGY_LANES])) {
        const L: usize = 16;
        const PREFETCH: usize = 512;
        let whole = x.len() / L * L;
        let mut lanes = [[0u32; L]; N];
        let (mut signal, mut noise) = ([0.0f64; ENERGY_LANES], [0.0f64; ENERGY_LANES]);
        // SAFETY: AVX-512F and VL are enabled for this build (the module's cfg); each load
        // reads the 16 f32 of `xs` and each store writes the 16 of `qs` (chunks that
        // `chunks_exact` made 16 long), or 16 u32 / 8 f64 into arrays of that many; a
        // prefetch only hints at an address (formed with `wrapping_add`, never
        // dereferenced) and cannot fault.
        unsafe {
            let one = _mm512_set1_epi32(1);
            let inf = _mm512_set1_ps(f32::INFINITY);
            let b: [__m512; N] = std::array::from_fn(|k| _mm512_set1_ps(bounds[k]));
            let mut acc: [__m512i; N] = [_mm512_setzero_si512(); N];
            let (mut s, mut e2): (__m512d, __m512d) = (_mm512_setzero_pd(), _mm512_setzero_pd());
            for (xs, qs) in x[..whole]
                .chunks_exact(L)
                .zip(q[..whole].chunks_exact_mut(L))
            {
                _mm_prefetch::<_MM_HINT_ET0>(qs.as_ptr().wrapping_add(PREFETCH).cast());
                _mm_prefetch::<_MM_HINT_T0>(xs.as_ptr().wrapping_add(PREFETCH).cast());
                let v = _mm512_loadu_ps(xs.as_ptr());
                let qv = codec.qdq(v);
                _mm512_storeu_ps(qs.as_mut_ptr(), qv);
                let (m, qm) = (_mm512_abs_ps(v), _mm512_abs_ps(qv));
                for k in 0..N {
                    // Ordered compare: false for a NaN element or a NaN bound.
                    let hit = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(m, b[k]);
                    acc[k] = _mm512_mask_add_epi32(acc[k], hit, acc[k], one);
                }
                // Both finite (|x| < inf, false for NaN), or both +0.0; elements 0–7 into
                // lanes 0–7, then 8–15.
                let keep = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(m, inf)
                    & _mm512_cmp_ps_mask::<_CMP_LT_OQ>(qm, inf);
                let high =
                    |x: __m512| _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(x)));
                let low = _mm512_castps512_ps256;
                add_energies8(&mut s, &mut e2, (low(v), low(qv)), keep as u8);
                add_energies8(&mut s, &mut e2, (high(v), high(qv)), (keep >> 8) as u8);
            }
            for k in 0..N {
                _mm512_storeu_si512(lanes[k].as_mut_ptr().cast(), acc[k]);
            }
            _mm512_storeu_pd(signal.as_mut_ptr(), s);
            _mm512_storeu_pd(noise.as_mut_ptr(), e2);
        }
        let counts = lanes
            .iter()
            .map(|l| l.iter().map(|c| u64::from(*c)).sum::<u64>())
            .collect();
        (counts, (signal, noise))
    }
}

/// The magnitudes at which each count of a call starts (every count is of the elements
/// whose |x| reaches one of them): found once per call by bisection, since they depend on
/// the thresholds, the active scale and the format only.
#[derive(Clone, Debug, PartialEq)]
pub struct CountBounds {
    /// Above each estimate, then overflowing at each scale, then the two ends of the
    /// underflow range.
    bounds: Vec<f32>,
    /// Thresholds (estimators).
    k: usize,
}

impl CountBounds {
    /// The bounds of a call with these thresholds at this active scale: above the estimate
    /// (|v| > est), overflowing (|v·scale| ≥ limit), and the underflow range [smallest
    /// subnormal, first magnitude that does not underflow).
    pub fn new(thresholds: &[Threshold], active_scale: f32, quant: &FakeQuant) -> Self {
        let facts = quant.format.facts();
        let limit = facts.overflow_threshold;
        // qdq(v·s) == 0 exactly when |v·s| ≤ underflow_max (checked against the codec in the
        // format crate's tests); the comparison is much cheaper than the codec.
        let underflow_max = facts.underflow_max;
        // Each predicate depends on |v| alone and is monotone in it.
        let mut bounds: Vec<f32> = thresholds
            .iter()
            .map(|t| least_magnitude(|m| m > t.est))
            .chain(
                thresholds
                    .iter()
                    .map(|t| least_magnitude(|m| (m * t.scale).abs() >= limit)),
            )
            .collect();
        let nonzero = f32::from_bits(1);
        let underflows = |m: f32| (m * active_scale).abs() <= underflow_max;
        let kept = least_magnitude(|m| !underflows(m));
        bounds.push(nonzero);
        // An empty range when even the smallest magnitude is kept; NaN (counting nothing)
        // when none is.
        bounds.push(if kept.to_bits() <= 1 { nonzero } else { kept });
        CountBounds {
            bounds,
            k: thresholds.len(),
        }
    }

    /// Every count of `x`, with its error energies, amax and non-finite count already
    /// measured; bounds above `reach` (or NaN) count nothing without a pass.
    fn counted(
        &self,
        x: &[f32],
        signal: f64,
        noise: f64,
        (amax, nonfinite): (f32, u64),
        reach: f32,
    ) -> TensorStats {
        let counts = count_at_least(x, &self.bounds, reach);
        self.with_counts(x.len(), counts, signal, noise, (amax, nonfinite))
    }

    /// The statistics from each bound's count.
    fn with_counts(
        &self,
        numel: usize,
        counts: Vec<u64>,
        signal: f64,
        noise: f64,
        (amax, nonfinite): (f32, u64),
    ) -> TensorStats {
        let k = self.k;
        TensorStats {
            numel: numel as u64,
            amax,
            nonfinite,
            above_est: counts[..k].to_vec(),
            overflow: counts[k..2 * k].to_vec(),
            underflow: counts[2 * k] - counts[2 * k + 1],
            signal,
            noise,
        }
    }
}

/// The least magnitude m in [0, +Inf] (by bits) for which `pred(m)` holds, for a `pred`
/// that is false then true as m grows (each count of [`counted`] is of such a predicate of
/// |x|: rounding is monotone); NaN when it holds for none. 31 evaluations.
fn least_magnitude(pred: impl Fn(f32) -> bool) -> f32 {
    let (mut lo, mut hi) = (0u32, 0x7F80_0001u32);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(f32::from_bits(mid)) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    f32::from_bits(lo)
}

/// For each bound: the elements with |x| ≥ bound (NaN elements never count; a NaN bound
/// counts nothing), up to [`GROUP`] bounds per pass, per block of 2^20 elements. Bounds
/// above `reach` (every non-NaN |x| is at most `reach`) and NaN bounds count 0 without a
/// pass.
fn count_at_least(x: &[f32], bounds: &[f32], reach: f32) -> Vec<u64> {
    let mut total = vec![0u64; bounds.len()];
    let live = live_bounds(bounds, reach);
    // Passes of equal size (12 bounds: 6 + 6, not 8 + 4).
    let size = live
        .len()
        .div_ceil(live.len().div_ceil(GROUP).max(1))
        .max(1);
    for big in x.chunks(1 << 20) {
        for group in live.chunks(size) {
            let b: Vec<f32> = group.iter().map(|i| bounds[*i]).collect();
            let counts = count_group_of(big, &b);
            for (i, c) in group.iter().zip(counts) {
                total[*i] += c;
            }
        }
    }
    total
}

/// The indices of the bounds that need a pass: at most `reach` (every non-NaN |x| is at
/// most `reach`, so a bound above it counts zero; a NaN bound counts nothing).
fn live_bounds(bounds: &[f32], reach: f32) -> Vec<usize> {
    (0..bounds.len()).filter(|i| bounds[*i] <= reach).collect()
}

/// Bounds counted per pass of [`count_at_least`], at most.
const GROUP: usize = 8;

/// [`count_group`] for 1 to [`GROUP`] bounds, a pass with exactly as many compares.
fn count_group_of(x: &[f32], bounds: &[f32]) -> Vec<u64> {
    fn n<const N: usize>(x: &[f32], bounds: &[f32]) -> Vec<u64> {
        let b: [f32; N] = std::array::from_fn(|i| bounds[i]);
        count_group(x, &b).to_vec()
    }
    match bounds.len() {
        0 => Vec::new(),
        1 => n::<1>(x, bounds),
        2 => n::<2>(x, bounds),
        3 => n::<3>(x, bounds),
        4 => n::<4>(x, bounds),
        5 => n::<5>(x, bounds),
        6 => n::<6>(x, bounds),
        7 => n::<7>(x, bounds),
        _ => n::<GROUP>(x, bounds),
    }
}

/// [`count_at_least`] of one block (at most 2^20 elements) for `N` bounds: in AVX-512 or
/// AVX2 registers where the build has them (counts do not depend on the order).
#[inline(always)]
fn count_group<const N: usize>(x: &[f32], bounds: &[f32; N]) -> [u64; N] {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    return count_group_avx512(x, bounds);
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        not(target_feature = "avx512f")
    ))]
    return count_group_avx2(x, bounds);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2")))]
    return count_group_scalar(x, bounds);
}

/// [`count_group`] element by element.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "avx2"), allow(dead_code))]
fn count_group_scalar<const N: usize>(x: &[f32], bounds: &[f32; N]) -> [u64; N] {
    let mut counts = [0u32; N];
    for v in x {
        let m = v.abs();
        for (c, b) in counts.iter_mut().zip(bounds) {
            *c += u32::from(m >= *b);
        }
    }
    counts.map(u64::from)
}

/// [`count_group`] in AVX2 registers: per bound, 8 lanes of 32-bit counts (a block gives
/// each lane at most 2^17), each compare's all-ones mask (−1) subtracted: two instructions
/// per bound and 8 elements.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
#[cfg_attr(target_feature = "avx512f", allow(dead_code))]
#[allow(unsafe_code)]
fn count_group_avx2<const N: usize>(x: &[f32], bounds: &[f32; N]) -> [u64; N] {
    use std::arch::x86_64::{
        __m256, _CMP_GE_OQ, _mm256_and_ps, _mm256_castps_si256, _mm256_cmp_ps, _mm256_loadu_ps,
        _mm256_set1_ps, _mm256_setzero_si256, _mm256_storeu_si256, _mm256_sub_epi32,
    };
    const L: usize = 8;
    let whole = x.len() / L * L;
    let mut lanes = [[0u32; L]; N];
    // SAFETY: AVX2 is enabled for this build (the cfg above); each load reads 8 f32 of a
    // block that `chunks_exact` made exactly 8 long; each store writes 8 u32 (32 bytes)
    // into an array of 8.
    unsafe {
        let abs = _mm256_set1_ps(f32::from_bits(0x7FFF_FFFF));
        let b: [__m256; N] = bounds.map(|t| _mm256_set1_ps(t));
        let mut acc = [_mm256_setzero_si256(); N];
        for block in x[..whole].chunks_exact(L) {
            let m = _mm256_and_ps(_mm256_loadu_ps(block.as_ptr()), abs);
            for k in 0..N {
                // Ordered compare: false for a NaN element or a NaN bound.
                let hit = _mm256_cmp_ps::<_CMP_GE_OQ>(m, b[k]);
                acc[k] = _mm256_sub_epi32(acc[k], _mm256_castps_si256(hit));
            }
        }
        for k in 0..N {
            _mm256_storeu_si256(lanes[k].as_mut_ptr().cast(), acc[k]);
        }
    }
    std::array::from_fn(|k| {
        let tail = x[whole..].iter().filter(|v| v.abs() >= bounds[k]).count() as u64;
        lanes[k].iter().map(|c| u64::from(*c)).sum::<u64>() + tail
    })
}

/// [`count_group`] in AVX-512 registers: per bound, 16 lanes of 32-bit counts, each
/// compare's mask adding one to the lanes it hits: two instructions per bound and 16
/// elements.
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
#[allow(unsafe_code)]
fn count_group_avx512<const N: usize>(x: &[f32], bounds: &[f32; N]) -> [u64; N] {
    use std::arch::x86_64::{
        __m512, _CMP_GE_OQ, _mm512_abs_ps, _mm512_cmp_ps_mask, _mm512_loadu_ps,
        _mm512_mask_add_epi32, _mm512_set1_epi32, _mm512_set1_ps, _mm512_setzero_si512,
        _mm512_storeu_si512,
    };
    const L: usize = 16;
    let whole = x.len() / L * L;
    let mut lanes = [[0u32; L]; N];
    // SAFETY: AVX-512F is enabled for this build (the cfg above); each load reads 16 f32 of
    // a block that `chunks_exact` made exactly 16 long; each store writes 16 u32 (64 bytes)
    // into an array of 16.
    unsafe {
        let one = _mm512_set1_epi32(1);
        let b: [__m512; N] = bounds.map(|t| _mm512_set1_ps(t));
        let mut acc = [_mm512_setzero_si512(); N];
        for block in x[..whole].chunks_exact(L) {
            let m = _mm512_abs_ps(_mm512_loadu_ps(block.as_ptr()));
            for k in 0..N {
                // Ordered compare: false for a NaN element or a NaN bound.
                let hit = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(m, b[k]);
                acc[k] = _mm512_mask_add_epi32(acc[k], hit, acc[k], one);
            }
        }
        for k in 0..N {
            _mm512_storeu_si512(lanes[k].as_mut_ptr().cast(), acc[k]);
        }
    }
    std::array::from_fn(|k| {
        let tail = x[whole..].iter().filter(|v| v.abs() >= bounds[k]).count() as u64;
        lanes[k].iter().map(|c| u64::from(*c)).sum::<u64>() + tail
    })
}

/// Every count of a call, with its error energies, amax and non-finite count already
/// measured (every bound counted by a pass).
fn counted(
    x: &[f32],
    thresholds: &[Threshold],
    active_scale: f32,
    quant: &FakeQuant,
    signal: f64,
    noise: f64,
    measured: (f32, u64),
) -> TensorStats {
    CountBounds::new(thresholds, active_scale, quant).counted(
        x,
        signal,
        noise,
        measured,
        f32::INFINITY,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hif8lab_format::Format;

    #[test]
    fn counts_by_definition() {
        let x = [0.5, -3.0, f32::NAN, f32::NEG_INFINITY, 1e-12, 0.0, 2.0];
        let q = FakeQuant::new(Format::HiF8);
        let t = [
            Threshold {
                est: 1.0,
                scale: 15.0,
            },
            Threshold {
                est: 2.0,
                scale: 20000.0,
            },
        ];
        let s = tensor_stats(&x, &t, 15.0, &q);
        assert_eq!(s.amax, f32::INFINITY);
        assert_eq!(s.nonfinite, 2);
        assert_eq!(s.above_est, [3, 2]); // -3, -inf, 2 | -3, -inf
        assert_eq!(s.overflow, [1, 2]); // -inf | -3·2e4, -inf (2·2e4 = 40000 < 40960)
        assert_eq!(s.underflow, 1); // 1e-12·15 < 2^-23
    }

    /// Values of every kind: signs, tiny to overflowing magnitudes, zeros, NaN and ±Inf.
    fn mixed(n: usize) -> Vec<f32> {
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        (0..n)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                match i % 23 {
                    5 => f32::NAN,
                    11 => f32::INFINITY,
                    17 => f32::NEG_INFINITY,
                    19 => 0.0,
                    20 => -0.0,
                    _ => u * 10f32.powi((i % 13) as i32 - 6),
                }
            })
            .collect()
    }

    #[test]
    fn energies_of_given_values_equal_the_codec_path_bit_for_bit() {
        for format in [Format::HiF8, Format::E4M3] {
            let q = FakeQuant::new(format);
            for n in (0..40).chain([1000, 4099]) {
                let x = mixed(n);
                for scale in [1.0, 15.0, 3.0e4] {
                    let mut out = vec![0.0; n];
                    q.qdq_into(&x, &mut out, scale);
                    let (s1, n1) = quant_error(&x, 0, scale, &q);
                    let (s2, n2) = quant_error_of(&x, &out);
                    assert_eq!(
                        (s1.to_bits(), n1.to_bits()),
                        (s2.to_bits(), n2.to_bits()),
                        "{n} {scale}"
                    );
                    // And the definition, summed in the documented lane order.
                    let mut lanes = ([0.0f64; ENERGY_LANES], [0.0f64; ENERGY_LANES]);
                    for (i, (v, qv)) in x.iter().zip(&out).enumerate() {
                        if v.is_finite() && qv.is_finite() {
                            let (v, e) = (f64::from(*v), f64::from(*v) - f64::from(*qv));
                            lanes.0[i % ENERGY_LANES] += v * v;
                            lanes.1[i % ENERGY_LANES] += e * e;
                        }
                    }
                    let sum = |l: [f64; ENERGY_LANES]| l.iter().fold(0.0, |a, b| a + b);
                    assert_eq!(s2.to_bits(), sum(lanes.0).to_bits());
                    assert_eq!(n2.to_bits(), sum(lanes.1).to_bits());
                }
            }
        }
    }

    /// Every compiled variant of the counting, energy and amax kernels (plain, AVX2,
    /// AVX-512) gives the same results on the same data: a build runs one of each, the
    /// others are held to it here (with NaN, ±Inf, ±0 and subnormal-range elements, NaN and
    /// infinite bounds, lengths that leave every tail).
    #[test]
    fn every_kernel_variant_gives_the_same_results() {
        for n in (0..70).chain([1000, 4099]) {
            let x = mixed(n);
            // Stand-ins for quantized values: some differ, some are not finite.
            let q: Vec<f32> = x
                .iter()
                .enumerate()
                .map(|(i, v)| if i % 29 == 3 { f32::INFINITY } else { v * 0.75 })
                .collect();
            let bounds = [0.0, 1e-30, 4e-6, 0.01, 0.5, 3.0, f32::INFINITY, f32::NAN];
            let counts = count_group_scalar(&x, &bounds);
            let definition: Vec<u64> = bounds
                .iter()
                .map(|b| x.iter().filter(|v| v.abs() >= *b).count() as u64)
                .collect();
            assert_eq!(counts.to_vec(), definition, "{n}");
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
            assert_eq!(count_group_avx2(&x, &bounds), counts, "avx2 {n}");
            #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
            assert_eq!(count_group_avx512(&x, &bounds), counts, "avx512 {n}");

            let whole = n / ENERGY_LANES * ENERGY_LANES;
            let lanes_bits = |(s, e): Lanes| (s.map(f64::to_bits), e.map(f64::to_bits));
            let plain = lanes_bits(block_lanes(&x[..whole], &|i, _| q[i]));
            #[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
            assert_eq!(
                lanes_bits(lanes_of_blocks(&x[..whole], &q[..whole])),
                plain,
                "avx {n}"
            );
            #[cfg(all(
                target_arch = "x86_64",
                target_feature = "avx512f",
                target_feature = "avx512vl"
            ))]
            assert_eq!(
                lanes_bits(lanes_of_blocks_avx512(&x[..whole], &q[..whole])),
                plain,
                "avx512 {n}"
            );

            let amax = amax_and_nonfinite_lanes(&x);
            #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
            assert_eq!(amax_and_nonfinite_avx512(&x), amax, "avx512 {n}");
            assert_eq!(amax_and_nonfinite(&x), amax, "{n}");
        }
    }

    /// The one-pass fake quantization and counts equal the codec followed by the counts of
    /// its output, bit for bit (quantized values, counts, energies), for HiF8 in both
    /// overflow modes and for a format the pass leaves to the two calls; with every number
    /// of bounds left after the skip (none to all 12, past one pass's 8), at every length
    /// (every tail after the whole 16s).
    #[test]
    fn one_pass_quantization_and_counts_equal_the_two_calls() {
        use hif8lab_format::Overflow;
        let quants = [
            FakeQuant::new(Format::HiF8),
            FakeQuant {
                overflow: Overflow::Saturate,
                ..FakeQuant::new(Format::HiF8)
            },
            FakeQuant::new(Format::E4M3),
        ];
        let t: Vec<Threshold> = [
            (0.2, 40.0),
            (1e-3, 9e3),
            (3.0, 0.5),
            (50.0, 1e6),
            (7e-6, 2e5),
        ]
        .iter()
        .map(|&(est, scale)| Threshold { est, scale })
        .collect();
        for quant in &quants {
            for n in (0..70).chain([1000, 4099]) {
                let x = mixed(n);
                for scale in [1.0, 15.0, 3.0e4] {
                    let bounds = CountBounds::new(&t, scale, quant);
                    for reach in [0.0, 1e-4, 0.3, 4.0, f32::INFINITY] {
                        let mut q1 = vec![7.0f32; n];
                        let mut q2 = vec![9.0f32; n];
                        let got = tensor_qdq_counts(&x, &mut q1, quant, scale, &bounds, reach);
                        quant.qdq_into(&x, &mut q2, scale);
                        let want = tensor_counts_given(&x, &q2, &bounds, reach);
                        let case = format!("{:?} n {n} scale {scale} reach {reach}", quant.format);
                        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&q1), bits(&q2), "{case}");
                        assert_eq!(got.above_est, want.above_est, "{case}");
                        assert_eq!(got.overflow, want.overflow, "{case}");
                        assert_eq!(got.underflow, want.underflow, "{case}");
                        assert_eq!(got.numel, want.numel, "{case}");
                        assert_eq!(
                            (got.signal.to_bits(), got.noise.to_bits()),
                            (want.signal.to_bits(), want.noise.to_bits()),
                            "{case}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn amax_pass_matches_its_definition_at_every_length() {
        for n in (0..40).chain([1000, 4099]) {
            let x = mixed(n);
            let nonfinite = x.iter().filter(|v| !v.is_finite()).count() as u64;
            let amax = x
                .iter()
                .filter(|v| !v.is_nan())
                .fold(0.0f32, |a, v| a.max(v.abs()));
            assert_eq!(amax_and_nonfinite(&x), (amax, nonfinite), "{n}");
        }
    }

    /// `got`'s counts against their definitions over `x`: above each estimate, overflowing
    /// at each scale, underflowing at the active scale.
    fn assert_counts_by_definition(
        got: &TensorStats,
        x: &[f32],
        t: &[Threshold],
        active: f32,
        facts: &hif8lab_format::FormatFacts,
        case: &str,
    ) {
        let count = |p: &dyn Fn(f32) -> bool| x.iter().filter(|v| p(**v)).count() as u64;
        let above: Vec<u64> = t.iter().map(|t| count(&|v| v.abs() > t.est)).collect();
        let overflow: Vec<u64> = t
            .iter()
            .map(|t| count(&|v| (v * t.scale).abs() >= facts.overflow_threshold))
            .collect();
        let under = count(&|v| v != 0.0 && (v * active).abs() <= facts.underflow_max);
        assert_eq!(got.above_est, above, "{case}");
        assert_eq!(got.overflow, overflow, "{case}");
        assert_eq!(got.underflow, under, "{case}");
    }

    #[test]
    fn bounded_counts_equal_the_definitions() {
        let specials = [
            0.0,
            -0.0,
            f32::from_bits(1),
            1e-30,
            0.5,
            1.0,
            3.0,
            15.0,
            4.0e4,
            3.0e38,
            f32::INFINITY,
            f32::NAN,
            -2.0,
            f32::NEG_INFINITY,
        ];
        let mut x = mixed(5000);
        x.extend(specials);
        x.extend(specials.map(|v| -v));
        for format in [Format::HiF8, Format::E4M3, Format::E5M2] {
            let q = FakeQuant::new(format);
            let facts = format.facts();
            for (i, est) in specials.iter().enumerate() {
                let scale = specials[(i * 5 + 3) % specials.len()];
                let t = [
                    Threshold { est: *est, scale },
                    Threshold {
                        est: -*est,
                        scale: 15.0 / est.abs().max(1e-30),
                    },
                ];
                for active in [scale, 1.0, 7.5e3, 0.0, f32::INFINITY] {
                    let got = counted(&x, &t, active, &q, 0.0, 0.0, (0.0, 0));
                    let case = format!("{format:?} est {est} scale {scale} active {active}");
                    assert_counts_by_definition(&got, &x, &t, active, &facts, &case);
                }
            }
        }
    }

    /// The counts a call's pieces make from bounds found once, skipping every bound above
    /// the tensor's amax (`reach`), equal the definitions: 1 to 9 thresholds (passes of 4
    /// to 20 bounds, split evenly), tensors with and without infinities, NaN kept.
    #[test]
    fn counts_from_shared_bounds_skipping_those_above_amax_equal_the_definitions() {
        let q = FakeQuant::new(Format::HiF8);
        let facts = Format::HiF8.facts();
        let all = mixed(3001);
        let finite: Vec<f32> = all.iter().copied().filter(|v| !v.is_infinite()).collect();
        for x in [&all, &finite, &finite[..7].to_vec(), &Vec::new()] {
            let (amax, _) = amax_and_nonfinite(x);
            for k in 1..=9usize {
                // Estimates and scales around the data's amax: some bounds above it, some below.
                let t: Vec<Threshold> = (0..k)
                    .map(|i| {
                        let f = 0.25 * 2f32.powi(i as i32 - 3);
                        Threshold {
                            est: amax * f,
                            scale: facts.overflow_threshold / (amax.max(1e-30) * f),
                        }
                    })
                    .collect();
                for active in [1.0, 3.0e3, 1.0e9] {
                    let bounds = CountBounds::new(&t, active, &q);
                    let got = bounds.counted(x, 0.0, 0.0, (0.0, 0), amax);
                    let case = format!(
                        "{} elements, amax {amax}, {k} thresholds, active {active}",
                        x.len()
                    );
                    assert_counts_by_definition(&got, x, &t, active, &facts, &case);
                    // Some of these cases skip bounds, others count them all.
                    assert_eq!(
                        got,
                        bounds.counted(x, 0.0, 0.0, (0.0, 0), f32::INFINITY),
                        "{case}"
                    );
                }
            }
        }
    }

    #[test]
    fn amax_ignores_nan_and_handles_empty() {
        assert_eq!(amax_and_nonfinite(&[]), (0.0, 0));
        assert_eq!(amax_and_nonfinite(&[f32::NAN, -2.0, 1.0]), (2.0, 1));
    }
}

/// Lowest binade of the [`Log2Histogram`]: bins start at |x·scale| = 2^`HIST_LO`.
pub const HIST_LO: i32 = -24;
/// One past the highest binade: bins end at 2^`HIST_HI`.
pub const HIST_HI: i32 = 18;
/// Bins per binade (quarter binades).
pub const HIST_PER_BINADE: usize = 4;
/// Bins of the histogram: `(HIST_HI - HIST_LO) · HIST_PER_BINADE`.
pub const HIST_BINS: usize = (HIST_HI - HIST_LO) as usize * HIST_PER_BINADE;

/// The f32 mantissa fields (23 bits) at or above which a value lies in the 2nd, 3rd and
/// 4th quarter of its binade: the smallest `m` with `1 + m/2^23 ≥ 2^(j/4)`, j = 1, 2, 3.
/// The GPU kernel receives these, so both sides bin by integer comparisons only.
pub fn quarter_thresholds() -> [u32; 3] {
    [1, 2, 3].map(|j: i32| {
        let t = (2f64.powf(f64::from(j) / 4.0) - 1.0) * f64::from(1u32 << 23);
        t.ceil() as u32
    })
}

/// Distribution of log2|x·scale| over one tensor, in quarter binades (SPEC.md §3, optional
/// statistic), with the values outside the binned range counted apart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Log2Histogram {
    /// Elements with x·scale = ±0.
    pub zeros: u64,
    /// Non-zero elements with |x·scale| < 2^`HIST_LO`.
    pub below: u64,
    /// Finite elements with |x·scale| ≥ 2^`HIST_HI`.
    pub above: u64,
    /// Elements whose x·scale is NaN or ±Inf.
    pub nonfinite: u64,
    /// `HIST_BINS` counts; bin `i` holds 2^(HIST_LO + i/4) ≤ |x·scale| < 2^(HIST_LO + (i+1)/4).
    pub bins: Vec<u64>,
}

/// Where one product `p = x·scale` falls in a [`Log2Histogram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistSlot {
    /// ±0.
    Zero,
    /// Below the binned range.
    Below,
    /// Above the binned range.
    Above,
    /// NaN or ±Inf.
    NonFinite,
    /// A bin.
    Bin(usize),
}

/// The slot of `p` (the reference for `shaders/histogram.wgsl`).
pub fn hist_slot(p: f32, quarters: &[u32; 3]) -> HistSlot {
    let a = p.to_bits() & 0x7fff_ffff;
    if a >= 0x7f80_0000 {
        return HistSlot::NonFinite;
    }
    if a == 0 {
        return HistSlot::Zero;
    }
    let e = (a >> 23) as i32 - 127;
    if e < HIST_LO {
        return HistSlot::Below;
    }
    if e >= HIST_HI {
        return HistSlot::Above;
    }
    let m = a & 0x007f_ffff;
    let quarter = quarters.iter().filter(|t| m >= **t).count();
    HistSlot::Bin((e - HIST_LO) as usize * HIST_PER_BINADE + quarter)
}

impl Log2Histogram {
    /// The histogram of `x` at `scale` (products rounded to f32, as on the GPU).
    pub fn of(x: &[f32], scale: f32) -> Self {
        let quarters = quarter_thresholds();
        let mut h = Log2Histogram {
            bins: vec![0; HIST_BINS],
            ..Default::default()
        };
        for v in x {
            match hist_slot(v * scale, &quarters) {
                HistSlot::Zero => h.zeros += 1,
                HistSlot::Below => h.below += 1,
                HistSlot::Above => h.above += 1,
                HistSlot::NonFinite => h.nonfinite += 1,
                HistSlot::Bin(i) => h.bins[i] += 1,
            }
        }
        h
    }

    /// log2 of bin `i`'s lower edge.
    pub fn lower_log2(i: usize) -> f64 {
        f64::from(HIST_LO) + i as f64 / HIST_PER_BINADE as f64
    }

    /// Every element counted.
    pub fn total(&self) -> u64 {
        self.zeros + self.below + self.above + self.nonfinite + self.bins.iter().sum::<u64>()
    }
}

#[cfg(test)]
mod hist_tests {
    use super::*;

    #[test]
    fn slots_match_f64_log2() {
        let q = quarter_thresholds();
        let mut rng = 0x1234_5678u32;
        for _ in 0..200_000 {
            rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let v = f32::from_bits(rng & 0x7fff_ffff);
            if !v.is_finite() || v == 0.0 {
                continue;
            }
            let l = f64::from(v).log2();
            let want = if l < f64::from(HIST_LO) {
                HistSlot::Below
            } else if l >= f64::from(HIST_HI) {
                HistSlot::Above
            } else {
                HistSlot::Bin(((l - f64::from(HIST_LO)) * 4.0).floor() as usize)
            };
            assert_eq!(hist_slot(v, &q), want, "{v:e} (log2 {l})");
            assert_eq!(hist_slot(-v, &q), want);
        }
        assert_eq!(hist_slot(0.0, &q), HistSlot::Zero);
        assert_eq!(hist_slot(-0.0, &q), HistSlot::Zero);
        assert_eq!(hist_slot(f32::NAN, &q), HistSlot::NonFinite);
        assert_eq!(hist_slot(f32::NEG_INFINITY, &q), HistSlot::NonFinite);
        // Exact powers of two open a binade's first bin.
        assert_eq!(hist_slot(1.0, &q), HistSlot::Bin((-HIST_LO) as usize * 4));
        assert_eq!(
            hist_slot(15.0, &q),
            HistSlot::Bin((3 - HIST_LO) as usize * 4 + 3)
        );
    }

    #[test]
    fn histogram_counts_every_element() {
        let x = [0.0, 1.0, -1.5, 3.0e-9, f32::INFINITY, 1.0e9, 40960.0];
        let h = Log2Histogram::of(&x, 1.0);
        assert_eq!(h.total(), x.len() as u64);
        assert_eq!((h.zeros, h.below, h.above, h.nonfinite), (1, 1, 1, 1));
        assert_eq!(h.bins.iter().sum::<u64>(), 3);
    }
}
