//! The statistics passes in SIMD registers (AVX, AVX2, AVX-512 where the build targets
//! them): amax and non-finite count, the error energies, the counts from bounds, HiF8 fake
//! quantization with its amax or its counts in one pass. Each gives exactly what its plain
//! reference in [`crate::stats`] gives (same lanes, same IEEE operations; counts and maxima
//! in any order) — held to it in the tests below; elsewhere the reference runs. The CPU
//! backend of `hif8lab-engine` and the Python package's core both run these.

#[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
use super::Lanes;
use super::{self as reference, CountBounds, ENERGY_LANES, TensorStats};
use hif8lab_format::FakeQuant;

/// amax and non-finite count: [`reference::amax_and_nonfinite`].
pub fn amax_and_nonfinite(x: &[f32]) -> (f32, u64) {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    return amax_and_nonfinite_avx512(x);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
    return reference::amax_and_nonfinite(x);
}

/// The error energies of `x` against its quantized values `q`: [`reference::quant_error_of`].
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
    let lanes = reference::block_lanes(&x[..whole], &given);
    reference::with_tail(lanes, x, whole, &given)
}

/// The counts of one block in AVX-512 or AVX2 registers where the build has them
/// ([`reference::count_group`] elsewhere).
struct Simd;

impl reference::CountN for Simd {
    #[inline(always)]
    fn count<const N: usize>(x: &[f32], bounds: &[f32; N]) -> [u64; N] {
        #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
        return count_group_avx512(x, bounds);
        #[cfg(all(
            target_arch = "x86_64",
            target_feature = "avx2",
            not(target_feature = "avx512f")
        ))]
        return count_group_avx2(x, bounds);
        #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2")))]
        return reference::count_group(x, bounds);
    }
}

/// [`reference::tensor_counts_given`]: the energies and the counts in SIMD registers.
pub fn tensor_counts_given(x: &[f32], q: &[f32], bounds: &CountBounds, reach: f32) -> TensorStats {
    let (signal, noise) = quant_error_of(x, q);
    bounds.counted_with(
        x,
        signal,
        noise,
        (0.0, 0),
        reach,
        reference::count_group_with::<Simd>,
    )
}

/// [`amax_and_nonfinite`] of `x` and `quant.qdq_into(x, out, scale)`: for HiF8 with
/// round-to-nearest where the build has AVX-512, in one pass (each 16 elements loaded once,
/// measured and quantized); elsewhere the two calls. The same results either way.
pub fn amax_qdq_into(x: &[f32], out: &mut [f32], quant: &FakeQuant, scale: f32) -> (f32, u64) {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    if let (hif8lab_format::Format::HiF8, hif8lab_format::Rounding::Nearest) =
        (quant.format, quant.rounding)
    {
        let ob = hif8lab_format::hif8::overflow_magnitude_bits(quant.overflow);
        return amax_qdq_hif8_avx512(x, out, scale, ob);
    }
    let n = x.len().min(out.len());
    let r = amax_and_nonfinite(&x[..n]);
    quant.qdq_into(x, out, scale);
    r
}

/// `quant.qdq_into(x, q, scale)` and then [`tensor_counts_given`]`(x, q, bounds, reach)`: in
/// one pass where the build has AVX-512 and `quant` is HiF8 with round-to-nearest (the common case) — each 16 elements quantized, counted and
/// their energies added together, so the counting runs while the codec waits on memory.
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

/// `block_lanes` of given values in AVX registers: the same IEEE operations per lane as
/// `error_terms` (the compiler's own vectorization of it shuffled lanes and branched).
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
/// `error_terms`' operations; shared by [`lanes_of_blocks_avx512`] and the one pass of
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

/// [`amax_and_nonfinite`] in AVX-512 registers, 16 lanes (a max and counts: the same
/// result in any order).
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
fn amax_and_nonfinite_avx512(x: &[f32]) -> (f32, u64) {
    amax_pass_avx512(x, |_, _| {})
}

/// The amax pass in AVX-512 registers, and what else each load feeds: `block(i, v)` gets
/// the 16 elements from `x[i]` as loaded, for every whole 16 (the elements past the last
/// whole 16, at most 15, are the caller's: [`amax_qdq_hif8_avx512`] quantizes them after).
/// Returns the amax over the non-NaN |x| and the NaN/±Inf count.
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
#[allow(unsafe_code)]
#[inline(always)]
fn amax_pass_avx512(
    x: &[f32],
    mut block: impl FnMut(usize, std::arch::x86_64::__m512),
) -> (f32, u64) {
    use std::arch::x86_64::{
        _MM_HINT_T0, _mm_prefetch, _mm512_and_si512, _mm512_castps_si512, _mm512_cmpge_epi32_mask,
        _mm512_cmple_epi32_mask, _mm512_loadu_ps, _mm512_mask_add_epi32, _mm512_maskz_mov_epi32,
        _mm512_max_epu32, _mm512_reduce_add_epi32, _mm512_reduce_max_epu32, _mm512_set1_epi32,
        _mm512_setzero_si512,
    };
    const L: usize = 16;
    const INF: u32 = 0x7F80_0000;
    const BIG: usize = 1 << 20;
    let mut amax_bits = 0u32;
    let mut nonfinite = 0u64;
    // Blocks of 2^20 elements: per lane a 32-bit count (at most 2^16) and a running max of
    // the magnitude's bits (NaN's bits replaced by 0).
    for (k, big) in x.chunks(BIG).enumerate() {
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
            for (j, b) in big[..whole].chunks_exact(L).enumerate() {
                // 2 KiB ahead (a hint: past the end it does nothing); about 10 % of the
                // pass in a training step, where the tensor is rarely still in cache.
                _mm_prefetch::<_MM_HINT_T0>(b.as_ptr().wrapping_add(PREFETCH).cast());
                let v = _mm512_loadu_ps(b.as_ptr());
                // Magnitudes are below 2^31: signed compares order them.
                let a = _mm512_and_si512(_mm512_castps_si512(v), abs);
                n = _mm512_mask_add_epi32(n, _mm512_cmpge_epi32_mask(a, inf), n, one);
                m = _mm512_max_epu32(
                    m,
                    _mm512_maskz_mov_epi32(_mm512_cmple_epi32_mask(a, inf), a),
                );
                block(k * BIG + j * L, v);
            }
            (
                _mm512_reduce_max_epu32(m),
                _mm512_reduce_add_epi32(n) as u32,
            )
        };
        amax_bits = amax_bits.max(m);
        nonfinite += u64::from(n);
        for v in &big[whole..] {
            let a = v.to_bits() & 0x7FFF_FFFF;
            nonfinite += u64::from(a >= INF);
            amax_bits = amax_bits.max(if a <= INF { a } else { 0 });
        }
    }
    (f32::from_bits(amax_bits), nonfinite)
}

/// How far ahead the AVX-512 passes prefetch (512 f32: 2 KiB).
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
const PREFETCH: usize = 512;

/// [`tensor_qdq_counts`]' one pass in AVX-512 registers.
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx512f",
    target_feature = "avx512vl"
))]
#[allow(unsafe_code)]
mod fused {
    use super::add_energies8;
    use crate::stats::{
        CountBounds, ENERGY_LANES, GROUP, TensorStats, count_group, error_terms, live_bounds,
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
        let live = live_bounds(bounds.bounds(), reach);
        if live.len() > GROUP {
            return None;
        }
        let b: Vec<f32> = live.iter().map(|i| bounds.bounds()[*i]).collect();
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
        let mut counts = vec![0u64; bounds.bounds().len()];
        for (j, i) in live.iter().enumerate() {
            let tail = count_group(&x[whole..], &[b[j]])[0];
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

/// `count_group` in AVX2 registers: per bound, 8 lanes of 32-bit counts (a block gives
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

/// `count_group` in AVX-512 registers: per bound, 16 lanes of 32-bit counts, each
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

/// [`amax_qdq_into`]'s HiF8 work in one pass, 16 lanes in AVX-512 registers: each load of
/// [`amax_pass_avx512`] also feeds the codec (`hif8lab_format::hif8::Qdq16`, the bits of
/// `qdq_branchless`); one read of the operand instead of two.
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
#[allow(unsafe_code)]
fn amax_qdq_hif8_avx512(x: &[f32], out: &mut [f32], scale: f32, overflow_bits: u32) -> (f32, u64) {
    use hif8lab_format::hif8::{Qdq16, qdq_branchless};
    use std::arch::x86_64::{_MM_HINT_ET0, _mm_prefetch, _mm512_storeu_ps};
    let n = x.len().min(out.len());
    let codec = Qdq16::new(scale, overflow_bits);
    let (x, out) = (&x[..n], &mut out[..n]);
    let r = amax_pass_avx512(x, |i, v| {
        let d = &mut out[i..i + 16];
        // SAFETY: AVX-512F is enabled for this build (the cfg above); the store writes the
        // 16 f32 of `d`, a slice of exactly 16; a prefetch only hints at an address (formed
        // with `wrapping_add`, never dereferenced) and cannot fault.
        unsafe {
            _mm_prefetch::<_MM_HINT_ET0>(d.as_ptr().wrapping_add(PREFETCH).cast());
            _mm512_storeu_ps(d.as_mut_ptr(), codec.qdq(v));
        }
    });
    let whole = n / 16 * 16;
    for (o, v) in out[whole..].iter_mut().zip(&x[whole..]) {
        *o = qdq_branchless(*v * scale, overflow_bits) / scale;
    }
    r
}

#[cfg(test)]
mod tests;
