//! The AVX512-BF16 kernel and the vector packers (which the AMX kernel shares).

use super::{MR, NR};
use std::arch::x86_64::{
    __m512, __m512bh, __m512i, _mm512_dpbf16_ps, _mm512_loadu_si512, _mm512_set1_epi32,
    _mm512_setzero_ps, _mm512_storeu_ps,
};

/// The 32 elements of `x0` then `x1`, times `vmul`, converted to bf16 (`VCVTNE2PS2BF16`) as
/// 16 u32 of two adjacent elements each, the earlier in the low half; `tiny` gains the lanes
/// that held a non-zero denormal.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
#[inline]
fn bf16_of(x0: __m512, x1: __m512, vmul: __m512, tiny: &mut u16) -> __m512i {
    use std::arch::x86_64::{
        _CMP_LT_OQ, _CMP_NEQ_UQ, _mm512_abs_ps, _mm512_cmp_ps_mask, _mm512_cvtne2ps_pbh,
        _mm512_mul_ps, _mm512_set1_ps,
    };
    let (zero, least) = (_mm512_setzero_ps(), _mm512_set1_ps(f32::MIN_POSITIVE));
    for x in [x0, x1] {
        let ax = _mm512_abs_ps(x);
        *tiny |= _mm512_cmp_ps_mask::<_CMP_LT_OQ>(ax, least)
            & _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(ax, zero);
    }
    let bh = _mm512_cvtne2ps_pbh(_mm512_mul_ps(x1, vmul), _mm512_mul_ps(x0, vmul));
    // SAFETY: 64 bytes become 64 bytes.
    unsafe { std::mem::transmute::<__m512bh, __m512i>(bh) }
}

/// 32 elements at `at` (the first `left` of them: masked loads) times `vmul`, converted to
/// 16 bf16 pairs; `tiny` gains the lanes that held a non-zero denormal.
///
/// # Safety
/// The CPU has AVX512-F, -BW and -BF16; `at` points to `left.min(32)` readable f32.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
#[inline]
unsafe fn convert(at: *const f32, left: usize, vmul: __m512, tiny: &mut u16) -> __m512i {
    use std::arch::x86_64::_mm512_maskz_loadu_ps;
    // SAFETY: the masks keep the loads inside the `left` elements (caller).
    let (x0, x1) = unsafe {
        (
            _mm512_maskz_loadu_ps(first(left), at),
            _mm512_maskz_loadu_ps(first(left.saturating_sub(16)), at.wrapping_add(16)),
        )
    };
    bf16_of(x0, x1, vmul, tiny)
}

/// Transposes 16 rows of 16 u32 in registers (four stages of 16 shuffles).
#[target_feature(enable = "avx512f")]
#[inline]
fn transpose16(r: &mut [__m512i; 16]) {
    use std::arch::x86_64::{
        _mm512_shuffle_i32x4, _mm512_unpackhi_epi32, _mm512_unpackhi_epi64, _mm512_unpacklo_epi32,
        _mm512_unpacklo_epi64,
    };
    // Per 128-bit lane L: rows interleaved in pairs, then in fours; b[4g + c]'s lane L is
    // column 4L + c of rows 4g…4g + 3.
    let mut a = *r;
    for i in 0..8 {
        a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    let mut b = a;
    for g in 0..4 {
        b[4 * g] = _mm512_unpacklo_epi64(a[4 * g], a[4 * g + 2]);
        b[4 * g + 1] = _mm512_unpackhi_epi64(a[4 * g], a[4 * g + 2]);
        b[4 * g + 2] = _mm512_unpacklo_epi64(a[4 * g + 1], a[4 * g + 3]);
        b[4 * g + 3] = _mm512_unpackhi_epi64(a[4 * g + 1], a[4 * g + 3]);
    }
    // Column 4L + c gathers lane L of b[c], b[4 + c], b[8 + c], b[12 + c].
    for c in 0..4 {
        let e0 = _mm512_shuffle_i32x4::<0x44>(b[c], b[4 + c]);
        let e1 = _mm512_shuffle_i32x4::<0xEE>(b[c], b[4 + c]);
        let e2 = _mm512_shuffle_i32x4::<0x44>(b[8 + c], b[12 + c]);
        let e3 = _mm512_shuffle_i32x4::<0xEE>(b[8 + c], b[12 + c]);
        r[c] = _mm512_shuffle_i32x4::<0x88>(e0, e2);
        r[4 + c] = _mm512_shuffle_i32x4::<0xDD>(e0, e2);
        r[8 + c] = _mm512_shuffle_i32x4::<0x88>(e1, e3);
        r[12 + c] = _mm512_shuffle_i32x4::<0xDD>(e1, e3);
    }
}

/// The first `n ≤ 16` bits set.
fn first(n: usize) -> u16 {
    if n >= 16 { 0xffff } else { (1u16 << n) - 1 }
}

/// [`super::pack_lines`] for lines contiguous along k: 32 elements of a line (16 pairs)
/// per conversion, times `mul`, and whether one was a non-zero denormal. A single line
/// (`width` 1) is stored as converted; otherwise 16 lines at a time are converted and
/// transposed in registers, so that each pair's lines are one (masked) store.
///
/// # Safety
/// The CPU has AVX512-F, -BW and -BF16; line r's k elements start at `base + r·line`
/// inside `data`; `out` holds `(kp − 1)·width + rows` pairs, and `rows ≤ width`.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn pack_rows(
    data: &[f32],
    base: usize,
    line: usize,
    rows: usize,
    k: usize,
    width: usize,
    out: &mut [u32],
    mul: f32,
) -> bool {
    use std::arch::x86_64::{_mm512_mask_storeu_epi32, _mm512_set1_ps, _mm512_setzero_si512};
    let kp = k.div_ceil(2);
    let vmul = _mm512_set1_ps(mul);
    let mut tiny = 0u16;
    if rows == 0 {
        return false;
    }
    if width == 1 {
        for kk in (0..k).step_by(32) {
            let p0 = kk / 2;
            // SAFETY: the line's k elements are inside `data` and its kp pairs inside `out`
            // (caller); the store writes pairs p0…min(p0 + 16, kp).
            unsafe {
                let v = convert(data.as_ptr().add(base + kk), k - kk, vmul, &mut tiny);
                _mm512_mask_storeu_epi32(out.as_mut_ptr().add(p0).cast(), first(kp - p0), v);
            }
        }
        return tiny != 0;
    }
    for g0 in (0..rows).step_by(16) {
        let lines = (rows - g0).min(16);
        for kk in (0..k).step_by(32) {
            let p0 = kk / 2;
            let mut v = [_mm512_setzero_si512(); 16];
            for (i, v) in v.iter_mut().enumerate().take(lines) {
                // SAFETY: line g0 + i < rows: its k elements are inside `data` (caller).
                *v = unsafe {
                    convert(
                        data.as_ptr().add(base + (g0 + i) * line + kk),
                        k - kk,
                        vmul,
                        &mut tiny,
                    )
                };
            }
            transpose16(&mut v);
            for (q, v) in v.iter().enumerate().take((kp - p0).min(16)) {
                // SAFETY: pair p0 + q < kp and lines g0…g0 + lines ≤ rows ≤ width: inside
                // the `(kp − 1)·width + rows` pairs of `out` (caller).
                unsafe {
                    _mm512_mask_storeu_epi32(
                        out.as_mut_ptr().add((p0 + q) * width + g0).cast(),
                        first(lines),
                        *v,
                    )
                };
            }
        }
    }
    tiny != 0
}

/// Gathers each of `rows` lines' pairs from a pair-major block (`pairs[p·width + r]`, as
/// [`super::pack_lines`] leaves lines side by side) into runs of `kpad` (`out[r·kpad + p]`),
/// 16 × 16 at a time transposed in registers.
///
/// # Safety
/// The CPU has AVX-512F; `pairs` holds `kpad·width` pairs and `out` `rows·kpad`, `kpad` a
/// multiple of 16 and `width` of 16, `rows ≤ width`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn gather_runs(
    pairs: &[u32],
    width: usize,
    rows: usize,
    kpad: usize,
    out: &mut [u32],
) {
    use std::arch::x86_64::_mm512_storeu_si512;
    assert!(kpad.is_multiple_of(16) && width.is_multiple_of(16) && rows <= width);
    assert!(pairs.len() >= kpad * width && out.len() >= rows * kpad);
    for r0 in (0..rows).step_by(16) {
        for p0 in (0..kpad).step_by(16) {
            let mut v = [std::arch::x86_64::_mm512_setzero_si512(); 16];
            for (q, v) in v.iter_mut().enumerate() {
                // SAFETY: (p0 + q)·width + r0 + 16 ≤ kpad·width (asserted).
                *v =
                    unsafe { _mm512_loadu_si512(pairs.as_ptr().add((p0 + q) * width + r0).cast()) };
            }
            transpose16(&mut v);
            for (i, v) in v.iter().enumerate().take(rows - r0) {
                // SAFETY: (r0 + i)·kpad + p0 + 16 ≤ rows·kpad (asserted).
                unsafe {
                    _mm512_storeu_si512(out.as_mut_ptr().add((r0 + i) * kpad + p0).cast(), *v)
                };
            }
        }
    }
}

/// [`super::pack_lines`] for lines side by side (line stride 1): per pair, the runs of
/// `rows` elements at k = 2p and 2p + 1, 16 lines per conversion, interleaved into pairs.
///
/// # Safety
/// The CPU has AVX512-F, -BW and -BF16; the run at k starts at `base + k·step` inside
/// `data` and holds `rows` ≤ `width` elements; `out` holds `kp·width` pairs.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn pack_runs(
    data: &[f32],
    base: usize,
    step: usize,
    rows: usize,
    k: usize,
    width: usize,
    out: &mut [u32],
    mul: f32,
) -> bool {
    use std::arch::x86_64::{
        _mm512_mask_storeu_epi32, _mm512_maskz_loadu_ps, _mm512_permutexvar_epi16, _mm512_set1_ps,
    };
    // [lo0..lo15 | hi0..hi15] → lo0, hi0, lo1, hi1, …
    const INTERLEAVE: [u16; 32] = {
        let mut t = [0u16; 32];
        let mut i = 0;
        while i < 16 {
            t[2 * i] = i as u16;
            t[2 * i + 1] = i as u16 + 16;
            i += 1;
        }
        t
    };
    let kp = k.div_ceil(2);
    let vmul = _mm512_set1_ps(mul);
    // SAFETY: 64 readable bytes.
    let order = unsafe { _mm512_loadu_si512(INTERLEAVE.as_ptr().cast()) };
    let mut tiny = 0u16;
    for p in 0..kp {
        let has_hi = 2 * p + 1 < k;
        let mut r0 = 0;
        while r0 < rows {
            let mask = first(rows - r0);
            let hi_mask = if has_hi { mask } else { 0 };
            // SAFETY: the masks keep the loads inside the runs (caller); the store writes
            // the `mask`'s pairs (at most 16) at p·width + r0 < kp·width.
            unsafe {
                let lo_at = data.as_ptr().add(base + 2 * p * step + r0);
                let lo = _mm512_maskz_loadu_ps(mask, lo_at);
                let hi = _mm512_maskz_loadu_ps(hi_mask, lo_at.wrapping_add(step));
                let pairs = _mm512_permutexvar_epi16(order, bf16_of(lo, hi, vmul, &mut tiny));
                _mm512_mask_storeu_epi32(out.as_mut_ptr().add(p * width + r0).cast(), mask, pairs);
            }
            r0 += 16;
        }
    }
    tiny != 0
}

/// One MR×NR block of sums over all `kp` pairs.
///
/// # Safety
/// The CPU has AVX512-F and AVX512-BF16; `a` holds `kp·MR` pairs, `b` `kp·NR`.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn block(kp: usize, a: &[u32], b: &[u32], out: &mut [[f32; NR]; MR]) {
    assert!(a.len() >= kp * MR && b.len() >= kp * NR);
    let mut acc: [[__m512; 2]; MR] = [[_mm512_setzero_ps(); 2]; MR];
    for p in 0..kp {
        // SAFETY: p·NR + 32 ≤ kp·NR ≤ b.len() (checked above): two 64-byte loads.
        let (b0, b1) = unsafe {
            let at = b.as_ptr().add(p * NR);
            (
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(at.cast())),
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(at.add(16).cast())),
            )
        };
        let pairs = &a[p * MR..(p + 1) * MR];
        for (accs, &pair) in acc.iter_mut().zip(pairs) {
            // SAFETY: 64 bytes become 64 bytes (32 bf16).
            let av =
                unsafe { std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(pair as i32)) };
            accs[0] = _mm512_dpbf16_ps(accs[0], av, b0);
            accs[1] = _mm512_dpbf16_ps(accs[1], av, b1);
        }
    }
    for (accs, row) in acc.iter().zip(out.iter_mut()) {
        // SAFETY: `row` is NR = 32 writable f32: two 16-lane stores.
        unsafe {
            _mm512_storeu_ps(row.as_mut_ptr(), accs[0]);
            _mm512_storeu_ps(row.as_mut_ptr().add(16), accs[1]);
        }
    }
}
