//! The bf16 GEMM: products on the CPU's bf16 dot-product units, f32 accumulation.
//!
//! Every HiF8, E4M3 and E5M2 value is exact in bf16 (at most 4 significant bits, exponents far
//! inside bf16's range), and so is every value already rounded to bf16. For operands made only
//! of such values a bf16 GEMM with f32 accumulation computes each product exactly, as 8-bit
//! hardware does; only the order of the f32 additions differs from the f32 path's. This module
//! runs it on AVX512-BF16 (`VDPBF16PS`, Intel since Cooper Lake, AMD since Zen 4), chosen at
//! run time; [`reference`] is its scalar twin, bit for bit.
//!
//! The order of accumulation, which both follow: each element of C is one f32 sum started at
//! +0.0, over k in pairs `(2p, 2p+1)` for p ascending, the odd product added first, then the
//! even one (`VDPBF16PS`'s definition: one rounding to nearest-even per addition, inputs'
//! denormals read as zero, denormal results flushed to zero); an odd k is padded with a zero
//! product. The sum is then multiplied by the caller's `factor` (one rounding) and added to C
//! when accumulating. No split of k, no dependence on the thread count or the tiling.

#![allow(unsafe_code)]
// Off x86-64 no kernel exists (`detect` finds none), so the packing and blocking code is
// compiled (and unit-tested natively) but never reached.
#![cfg_attr(
    not(target_arch = "x86_64"),
    allow(
        dead_code,
        unused_variables,
        unused_mut,
        unreachable_code,
        clippy::never_loop
    )
)]

/// An operand of a product: its elements and the (row, column) strides of its logical matrix.
#[derive(Clone, Copy)]
pub(crate) struct Operand<'a> {
    pub data: &'a [f32],
    pub rs: isize,
    pub cs: isize,
}

/// Products whose codes came from a fake-quantized copy (tests).
#[cfg(test)]
pub(crate) static FROM_COPY: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Rows of C per register block.
const MR: usize = 8;
/// Columns of C per register block (two 16-lane registers).
const NR: usize = 32;

/// A bf16 GEMM kernel this machine can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bf16Kernel {
    /// AVX-512 `VDPBF16PS` (16 f32 lanes, 32 products per instruction).
    Avx512Bf16,
}

impl Bf16Kernel {
    /// Its name in benchmarks and run records.
    pub fn name(self) -> &'static str {
        match self {
            Bf16Kernel::Avx512Bf16 => "avx512-bf16",
        }
    }
}

/// The best bf16 kernel this CPU has (detected once), if any. AMX tiles are not used yet:
/// on a CPU with AMX this is the AVX512-BF16 kernel, which every AMX CPU also has.
pub fn detect() -> Option<Bf16Kernel> {
    #[cfg(target_arch = "x86_64")]
    {
        static FOUND: std::sync::OnceLock<Option<Bf16Kernel>> = std::sync::OnceLock::new();
        *FOUND.get_or_init(|| {
            (std::arch::is_x86_feature_detected!("avx512bf16")
                && std::arch::is_x86_feature_detected!("avx512f"))
            .then_some(Bf16Kernel::Avx512Bf16)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// The bf16 bit pattern of `x`, rounded to nearest-even, as `VCVTNE2PS2BF16` converts: f32
/// denormals become (signed) zero, NaN a quiet NaN. Exact for the codes this module is
/// given; what `train.precision = "bf16"` rounds its operands to here.
#[inline(always)]
fn bf16_bits(x: f32) -> u32 {
    let b = x.to_bits();
    if x.is_nan() {
        (b >> 16) | 0x40
    } else if x.is_subnormal() {
        (b >> 16) & 0x8000
    } else {
        (b + 0x7fff + ((b >> 16) & 1)) >> 16
    }
}

#[cfg(test)]
/// A bf16 value as the dot-product units read it: denormals as (signed) zero.
#[inline(always)]
fn daz(bits: u32) -> f32 {
    let x = f32::from_bits(bits << 16);
    if x.is_subnormal() {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

#[cfg(test)]
/// A result as the dot-product units write it: denormals flushed to (signed) zero.
#[inline(always)]
fn ftz(x: f32) -> f32 {
    if x.is_subnormal() {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

#[cfg(test)]
/// Element (i, j) of an operand.
#[inline(always)]
fn el(x: Operand, i: usize, j: usize) -> f32 {
    x.data[(i as isize * x.rs + j as isize * x.cs) as usize]
}

#[cfg(test)]
/// The scalar twin of the kernels: `C (+)= factor · (A·B)` in the module's order of
/// accumulation, element by element.
pub(crate) fn reference(
    (m, n, k): (usize, usize, usize),
    a: Operand,
    b: Operand,
    c: &mut [f32],
    accumulate: bool,
    factor: f32,
) {
    let pair = |x: f32, y: f32| -> f32 { daz(bf16_bits(x)) * daz(bf16_bits(y)) };
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0f32;
            for p in 0..k.div_ceil(2) {
                let (k0, k1) = (2 * p, 2 * p + 1);
                if k1 < k {
                    s = ftz(s + ftz(pair(el(a, i, k1), el(b, k1, j))));
                } else {
                    s = ftz(s + 0.0);
                }
                s = ftz(s + ftz(pair(el(a, i, k0), el(b, k0, j))));
            }
            let o = &mut c[i * n + j];
            let v = s * factor;
            *o = if accumulate { *o + v } else { v };
        }
    }
}

/// The bf16 bits of `x·mul` and whether `x` was a non-zero f32 denormal (when `mul` is not 1,
/// the codes `x·s` of a fake-quantized copy `x = Q(x·s)/s` are exact only where `x` is not:
/// see [`Source`]).
#[inline(always)]
fn scaled_bits(x: f32, mul: f32) -> (u32, bool) {
    (bf16_bits(x * mul), x != 0.0 && x.abs() < f32::MIN_POSITIVE)
}

/// Packs `rows` lines of an operand into `out[p·width + r]` (the pair p of line r), for p
/// in `0..kp`: line r's element kk is `data[base + r·line + kk·step]`, times `mul`. Lines
/// past `rows` stay as `out` holds them (zero). The loops run along whichever of the two is
/// contiguous. Returns whether an element was a non-zero denormal.
#[allow(clippy::too_many_arguments)]
fn pack_lines(
    data: &[f32],
    base: usize,
    (line, step): (usize, usize),
    rows: usize,
    k: usize,
    width: usize,
    out: &mut [u32],
    mul: f32,
) -> bool {
    let kp = k.div_ceil(2);
    let mut tiny = false;
    if step == 1 {
        // Each line contiguous along k: its pairs are adjacent elements.
        for r in 0..rows {
            let row = &data[base + r * line..base + r * line + k];
            let whole = k / 2;
            for (p, two) in row.chunks_exact(2).enumerate() {
                let (lo, t0) = scaled_bits(two[0], mul);
                let (hi, t1) = scaled_bits(two[1], mul);
                out[p * width + r] = lo | (hi << 16);
                tiny |= t0 | t1;
            }
            if whole < kp {
                let (lo, t) = scaled_bits(row[k - 1], mul);
                out[whole * width + r] = lo;
                tiny |= t;
            }
        }
    } else {
        // The lines contiguous at each k (line stride 1): two runs of `rows` per pair.
        debug_assert_eq!(line, 1);
        for p in 0..kp {
            let lo = &data[base + 2 * p * step..][..rows];
            let dst = &mut out[p * width..p * width + rows];
            if 2 * p + 1 < k {
                let hi = &data[base + (2 * p + 1) * step..][..rows];
                for ((o, l), h) in dst.iter_mut().zip(lo).zip(hi) {
                    let (l, t0) = scaled_bits(*l, mul);
                    let (h, t1) = scaled_bits(*h, mul);
                    *o = l | (h << 16);
                    tiny |= t0 | t1;
                }
            } else {
                for (o, l) in dst.iter_mut().zip(lo) {
                    let (l, t) = scaled_bits(*l, mul);
                    *o = l;
                    tiny |= t;
                }
            }
        }
    }
    tiny
}

/// [`pack_lines`], with lines contiguous along k converted 32 elements at a time in AVX-512
/// registers (`VCVTNE2PS2BF16`: the same bits).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn pack(
    kernel: Bf16Kernel,
    data: &[f32],
    base: usize,
    (line, step): (usize, usize),
    rows: usize,
    k: usize,
    width: usize,
    out: &mut [u32],
    mul: f32,
) -> bool {
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Bf16Kernel::Avx512Bf16 if step == 1 => {
            let kp = k.div_ceil(2);
            assert!(rows == 0 || base + (rows - 1) * line + k <= data.len());
            assert!(rows == 0 || (kp - 1) * width + rows <= out.len());
            // SAFETY: the kernel exists on this CPU; the asserts bound every line read and
            // every pair written.
            unsafe { avx512::pack_rows(data, base, line, rows, k, width, out, mul) }
        }
        #[cfg(target_arch = "x86_64")]
        Bf16Kernel::Avx512Bf16 if line == 1 => {
            let kp = k.div_ceil(2);
            assert!(rows == 0 || base + (k - 1) * step + rows <= data.len());
            assert!(rows <= width && kp * width <= out.len());
            // SAFETY: the kernel exists on this CPU; the asserts bound every run read and
            // every pair written.
            unsafe { avx512::pack_runs(data, base, step, rows, k, width, out, mul) }
        }
        _ => pack_lines(data, base, (line, step), rows, k, width, out, mul),
    }
}

/// An operand as the kernel reads it: `x·mul` of each element `x`, rounded to bf16.
///
/// `mul = s` turns a fake-quantized copy `x = Q(·)/s` (an f32 rounding of code/s) back into
/// its codes: the product is within 2⁻²³ of the code, which has at most 4 significant bits,
/// so bf16's rounding lands on the code exactly, wherever `x` is a normal f32 (or zero,
/// infinite, NaN). Scales are at most `target/1e-12`, so a non-zero code over `s` is far from
/// the denormals; the packers still report one ([`gemm`] then refuses the operand).
#[derive(Clone, Copy)]
pub(crate) struct Source<'a> {
    /// The elements and their strides.
    pub x: Operand<'a>,
    /// What each element is multiplied by (1 for codes and rounded operands).
    pub mul: f32,
}

/// Runs `f(index, chunk)` over the chunks of `out`, in parallel natively.
fn chunks(
    out: &mut [u32],
    len: usize,
    f: impl Fn(usize, &mut [u32]) -> bool + Sync + Send,
) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        out.par_chunks_mut(len)
            .enumerate()
            .map(|(i, c)| f(i, c))
            .reduce(|| false, |a, b| a | b)
    }
    #[cfg(target_arch = "wasm32")]
    out.chunks_mut(len)
        .enumerate()
        .fold(false, |t, (i, c)| f(i, c) | t)
}

/// A packed in blocks of [`MR`] rows into `out`: per block, for each pair p, the MR rows'
/// pairs, rows past m zero. Whether an element was a non-zero denormal.
fn pack_a(kernel: Bf16Kernel, m: usize, k: usize, a: Source, out: &mut Vec<u32>) -> bool {
    let kp = k.div_ceil(2);
    out.clear();
    out.resize(m.div_ceil(MR) * kp * MR, 0);
    // A's lines are its rows: (row stride, k stride).
    let (line, step) = (a.x.rs as usize, a.x.cs as usize);
    chunks(out, kp * MR, |ib, block| {
        let rows = MR.min(m - ib * MR);
        pack(
            kernel,
            a.x.data,
            ib * MR * line,
            (line, step),
            rows,
            k,
            MR,
            block,
            a.mul,
        )
    })
}

/// B packed in panels of [`NR`] columns into `out`: per panel, for each pair p, the NR
/// columns' pairs, columns past n zero. Whether an element was a non-zero denormal.
fn pack_b(kernel: Bf16Kernel, n: usize, k: usize, b: Source, out: &mut Vec<u32>) -> bool {
    let kp = k.div_ceil(2);
    out.clear();
    out.resize(n.div_ceil(NR) * kp * NR, 0);
    // B's lines are its columns: (column stride, k stride).
    let (line, step) = (b.x.cs as usize, b.x.rs as usize);
    chunks(out, kp * NR, |jp, panel| {
        let cols = NR.min(n - jp * NR);
        pack(
            kernel,
            b.x.data,
            jp * NR * line,
            (line, step),
            cols,
            k,
            NR,
            panel,
            b.mul,
        )
    })
}

std::thread_local! {
    /// The packed operands of this thread's last call, kept (no allocation and page faults
    /// per call).
    static PACKED: std::cell::RefCell<(Vec<u32>, Vec<u32>)> = const {
        std::cell::RefCell::new((Vec::new(), Vec::new()))
    };
}

/// `C (+)= factor · (A·B)` for an m×k `a` and a k×n `b` (their elements times their `mul`,
/// rounded to bf16) and a row-major m×n `c`, on `kernel`; bit for bit [`reference`] on the
/// rounded operands. `false` (and C untouched) where an operand with `mul ≠ 1` held a
/// non-zero denormal ([`Source`]).
pub(crate) fn gemm(
    kernel: Bf16Kernel,
    (m, n, k): (usize, usize, usize),
    a: Source,
    b: Source,
    c: &mut [f32],
    accumulate: bool,
    factor: f32,
) -> bool {
    if m == 0 || n == 0 {
        return true;
    }
    PACKED.with(|cell| match cell.try_borrow_mut() {
        Ok(mut packed) => {
            let (ap, bp) = &mut *packed;
            gemm_packed(kernel, (m, n, k), (a, b), (ap, bp), c, accumulate, factor)
        }
        // Re-entered on this thread (never in the trainer): buffers of its own.
        Err(_) => gemm_packed(
            kernel,
            (m, n, k),
            (a, b),
            (&mut Vec::new(), &mut Vec::new()),
            c,
            accumulate,
            factor,
        ),
    })
}

fn gemm_packed(
    kernel: Bf16Kernel,
    (m, n, k): (usize, usize, usize),
    (a, b): (Source, Source),
    (ap, bp): (&mut Vec<u32>, &mut Vec<u32>),
    c: &mut [f32],
    accumulate: bool,
    factor: f32,
) -> bool {
    let kp = k.div_ceil(2);
    let tiny_a = pack_a(kernel, m, k, a, ap);
    let tiny_b = pack_b(kernel, n, k, b, bp);
    if (tiny_a && a.mul != 1.0) || (tiny_b && b.mul != 1.0) {
        return false;
    }
    let (ap, bp) = (&*ap, &*bp);
    let c_at = c.as_mut_ptr() as usize;
    let c_len = c.len();
    let run = |jp: usize| {
        let j0 = jp * NR;
        let cols = NR.min(n - j0);
        let panel = &bp[jp * kp * NR..(jp + 1) * kp * NR];
        for ib in 0..m.div_ceil(MR) {
            let rows = MR.min(m - ib * MR);
            let mut sums = [[0.0f32; NR]; MR];
            let block = &ap[ib * kp * MR..(ib + 1) * kp * MR];
            match kernel {
                // SAFETY: the kernel exists on this CPU (`detect` found it, the only source
                // of a `Bf16Kernel`); `block` holds kp·MR pairs and `panel` kp·NR.
                #[cfg(target_arch = "x86_64")]
                Bf16Kernel::Avx512Bf16 => unsafe { avx512::block(kp, block, panel, &mut sums) },
                #[cfg(not(target_arch = "x86_64"))]
                _ => unreachable!("no bf16 kernel off x86-64"),
            }
            for (r, s) in sums.iter().enumerate().take(rows) {
                let at = (ib * MR + r) * n + j0;
                debug_assert!(at + cols <= c_len);
                // SAFETY: row ib·MR + r < m and columns j0..j0 + cols < n of the row-major
                // m×n C, inside `c` (its length was checked by the caller); panels write
                // disjoint columns, and `c` is a mutable borrow held for the whole call.
                let row =
                    unsafe { std::slice::from_raw_parts_mut((c_at as *mut f32).add(at), cols) };
                for (o, v) in row.iter_mut().zip(s) {
                    let v = v * factor;
                    *o = if accumulate { *o + v } else { v };
                }
            }
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        (0..n.div_ceil(NR)).into_par_iter().for_each(run);
    }
    #[cfg(target_arch = "wasm32")]
    (0..n.div_ceil(NR)).for_each(run);
    true
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{MR, NR};
    use std::arch::x86_64::{
        __m512, __m512bh, __m512i, _mm512_dpbf16_ps, _mm512_loadu_si512, _mm512_set1_epi32,
        _mm512_setzero_ps, _mm512_storeu_ps,
    };

    /// [`super::pack_lines`] for lines contiguous along k: 32 elements of a line (16 pairs)
    /// per conversion, times `mul`, and whether one was a non-zero denormal.
    ///
    /// # Safety
    /// The CPU has AVX512-F, -BW and -BF16; line r's k elements start at `base + r·line`
    /// inside `data`, and `out` holds `(kp − 1)·width + rows` pairs.
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
        use std::arch::x86_64::{
            _CMP_LT_OQ, _CMP_NEQ_UQ, _mm512_abs_ps, _mm512_cmp_ps_mask, _mm512_cvtne2ps_pbh,
            _mm512_maskz_loadu_ps, _mm512_mul_ps, _mm512_set1_ps, _mm512_setzero_ps,
            _mm512_storeu_si512,
        };
        let kp = k.div_ceil(2);
        let vmul = _mm512_set1_ps(mul);
        let (zero, least) = (_mm512_setzero_ps(), _mm512_set1_ps(f32::MIN_POSITIVE));
        let mut tiny = 0u16;
        let mut pairs = [0u32; 16];
        for r in 0..rows {
            let row = base + r * line;
            let mut kk = 0;
            while kk < k {
                let left = k - kk;
                let m0 = if left >= 16 {
                    0xffff
                } else {
                    (1u16 << left) - 1
                };
                let m1 = if left >= 32 {
                    0xffff
                } else if left > 16 {
                    (1u16 << (left - 16)) - 1
                } else {
                    0
                };
                // SAFETY: the masks keep the loads inside the line's k elements (caller);
                // the store writes the 16 u32 of `pairs`.
                unsafe {
                    let at = data.as_ptr().add(row + kk);
                    let x0 = _mm512_maskz_loadu_ps(m0, at);
                    let x1 = _mm512_maskz_loadu_ps(m1, at.wrapping_add(16));
                    for x in [x0, x1] {
                        let ax = _mm512_abs_ps(x);
                        tiny |= _mm512_cmp_ps_mask::<_CMP_LT_OQ>(ax, least)
                            & _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(ax, zero);
                    }
                    let bh = _mm512_cvtne2ps_pbh(_mm512_mul_ps(x1, vmul), _mm512_mul_ps(x0, vmul));
                    _mm512_storeu_si512(
                        pairs.as_mut_ptr().cast(),
                        std::mem::transmute::<__m512bh, __m512i>(bh),
                    );
                }
                let p0 = kk / 2;
                for (i, pair) in pairs.iter().enumerate().take((kp - p0).min(16)) {
                    out[(p0 + i) * width + r] = *pair;
                }
                kk += 32;
            }
        }
        tiny != 0
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
            _CMP_LT_OQ, _CMP_NEQ_UQ, _mm512_abs_ps, _mm512_cmp_ps_mask, _mm512_cvtne2ps_pbh,
            _mm512_loadu_si512, _mm512_mask_storeu_epi32, _mm512_maskz_loadu_ps, _mm512_mul_ps,
            _mm512_permutexvar_epi16, _mm512_set1_ps, _mm512_setzero_ps,
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
        let (zero, least) = (_mm512_setzero_ps(), _mm512_set1_ps(f32::MIN_POSITIVE));
        // SAFETY: 64 readable bytes.
        let order = unsafe { _mm512_loadu_si512(INTERLEAVE.as_ptr().cast()) };
        let mut tiny = 0u16;
        for p in 0..kp {
            let has_hi = 2 * p + 1 < k;
            let mut r0 = 0;
            while r0 < rows {
                let left = rows - r0;
                let mask = if left >= 16 {
                    0xffff
                } else {
                    (1u16 << left) - 1
                };
                let hi_mask = if has_hi { mask } else { 0 };
                // SAFETY: the masks keep the loads inside the runs (caller); the store writes
                // `left.min(16)` pairs at p·width + r0 < kp·width.
                unsafe {
                    let lo_at = data.as_ptr().add(base + 2 * p * step + r0);
                    let lo = _mm512_maskz_loadu_ps(mask, lo_at);
                    let hi = _mm512_maskz_loadu_ps(hi_mask, lo_at.wrapping_add(step));
                    for x in [lo, hi] {
                        let ax = _mm512_abs_ps(x);
                        tiny |= _mm512_cmp_ps_mask::<_CMP_LT_OQ>(ax, least)
                            & _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(ax, zero);
                    }
                    let bh = _mm512_cvtne2ps_pbh(_mm512_mul_ps(hi, vmul), _mm512_mul_ps(lo, vmul));
                    let pairs = _mm512_permutexvar_epi16(
                        order,
                        std::mem::transmute::<__m512bh, __m512i>(bh),
                    );
                    _mm512_mask_storeu_epi32(
                        out.as_mut_ptr().add(p * width + r0).cast(),
                        mask,
                        pairs,
                    );
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
                let av = unsafe {
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(pair as i32))
                };
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use hif8lab_format::{FakeQuant, Format};

    /// `n` values of `format` (codes in the scaled domain: what a quantized GEMM is given),
    /// spread over many binades, with signs, zeros and the format's extremes.
    fn codes(n: usize, seed: u64, format: Format) -> Vec<f32> {
        let raw = crate::cpu::test_data::values(n, seed, 2.0);
        let q = FakeQuant::new(format);
        raw.iter()
            .enumerate()
            .map(|(i, r)| {
                // Exponents −12…7: inside every format's range (no Inf or NaN), over 20 binades.
                let e = (i as i32 * 7 + seed as i32) % 20 - 12;
                let x = r * 2f32.powi(e);
                match i % 53 {
                    0 => 0.0,
                    1 => -0.0,
                    _ => q.qdq(x, 1.0),
                }
            })
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        crate::cpu::test_data::bits(v)
    }

    /// The kernel this machine runs, or why the test has nothing to check here.
    pub(crate) fn kernel_or_skip(test: &str) -> Option<Bf16Kernel> {
        match detect() {
            Some(k) => Some(k),
            None if std::env::var("HIF8LAB_REQUIRE_BF16").is_ok_and(|v| v == "1") => {
                panic!("{test}: HIF8LAB_REQUIRE_BF16=1 but this CPU has no AVX512-BF16")
            }
            None => {
                eprintln!("{test}: not checked here: this CPU has no AVX512-BF16");
                None
            }
        }
    }

    fn operands<'a>(
        (m, n, k): (usize, usize, usize),
        layout: u8,
        av: &'a [f32],
        bv: &'a [f32],
    ) -> (Operand<'a>, Operand<'a>) {
        // NN, NT, TN as strides (row, column) of the logical A and B.
        let ((rsa, csa), (rsb, csb)) = match layout {
            0 => ((k, 1), (n, 1)),
            1 => ((k, 1), (1, k)),
            _ => ((1, m), (n, 1)),
        };
        (
            Operand {
                data: av,
                rs: rsa as isize,
                cs: csa as isize,
            },
            Operand {
                data: bv,
                rs: rsb as isize,
                cs: csb as isize,
            },
        )
    }

    #[test]
    fn bf16_kernel_equals_its_scalar_reference_bit_for_bit() {
        let Some(kernel) = kernel_or_skip("bf16_kernel_equals_its_scalar_reference_bit_for_bit")
        else {
            return;
        };
        // Ragged edges (m, n not multiples of 8 and 32), odd k, k not a multiple of 32, and
        // the trainer's shapes (d 64 → 4·64; 576 → 1,536 at 256 rows).
        let shapes = [
            (1, 1, 1),
            (3, 5, 7),
            (9, 33, 31),
            (17, 64, 96),
            (8, 32, 2),
            (40, 70, 129),
            (256, 576, 1536),
            (576, 256, 256),
        ];
        let formats = [Format::HiF8, Format::E4M3, Format::E5M2];
        for (s, &(m, n, k)) in shapes.iter().enumerate() {
            let format = formats[s % 3];
            let av = codes(m * k, 11 + s as u64, format);
            let bv = codes(k * n, 97 + s as u64, formats[(s + 1) % 3]);
            for (layout, acc, factor) in [(0, false, 1.0), (1, true, 0.37), (2, false, 3.0e-3)] {
                let (a, b) = operands((m, n, k), layout, &av, &bv);
                let start = crate::cpu::test_data::values(m * n, 5, 4.0);
                let (mut want, mut got) = (start.clone(), start);
                reference((m, n, k), a, b, &mut want, acc, factor);
                let (sa, sb) = (Source { x: a, mul: 1.0 }, Source { x: b, mul: 1.0 });
                assert!(gemm(kernel, (m, n, k), sa, sb, &mut got, acc, factor));
                let first = bits(&want)
                    .iter()
                    .zip(bits(&got))
                    .position(|(w, g)| *w != g);
                assert_eq!(
                    first, None,
                    "{m}×{n}×{k} layout {layout} accumulate {acc} ({format:?}): first difference"
                );
            }
        }
    }

    /// The AVX-512 packer converts as the scalar one does, bit for bit: ties, NaN, ±Inf,
    /// f32 denormals (to signed zero), values that round to bf16's largest or overflow, a
    /// multiplier, k odd and not a multiple of 32, and it reports the denormals.
    #[test]
    fn the_vector_packer_equals_the_scalar_one() {
        let Some(kernel) = kernel_or_skip("the_vector_packer_equals_the_scalar_one") else {
            return;
        };
        let special = [
            1.0f32,
            f32::from_bits(0x3f80_8000),
            f32::from_bits(0x3f81_8000),
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
            -1e-40,
            f32::from_bits(0x007f_ffff),
            f32::MAX,
            -0.0,
            f32::from_bits(0x7f7f_8000),
        ];
        for (k, rows, mul) in [
            (37usize, 5usize, 1.0f32),
            (64, 8, 3.0),
            (1, 3, 1.0),
            (95, 8, 0.75),
        ] {
            let line = k + 3;
            let mut data = crate::cpu::test_data::values(rows * line, 4, 10.0);
            for (i, v) in data.iter_mut().enumerate() {
                if i % 5 == 0 {
                    *v = special[(i / 5) % special.len()];
                }
            }
            let kp = k.div_ceil(2);
            let mut scalar = vec![0u32; kp * MR];
            let mut vector = vec![0u32; kp * MR];
            let t1 = pack_lines(&data, 0, (line, 1), rows, k, MR, &mut scalar, mul);
            let t2 = pack(kernel, &data, 0, (line, 1), rows, k, MR, &mut vector, mul);
            assert_eq!(scalar, vector, "k {k}, rows {rows}, mul {mul}");
            let denormal = (0..rows).any(|r| {
                data[r * line..r * line + k]
                    .iter()
                    .any(|v| v.is_subnormal())
            });
            assert_eq!((t1, t2), (denormal, denormal), "k {k}: denormals reported");
            // The same data as lines side by side (element kk of line r at kk·step + r), for
            // blocks of 8 (A) and panels of 32 (B).
            for width in [MR, NR] {
                let rows = rows.min(width) + (width == NR) as usize * 17;
                let step = rows + 2;
                let data: Vec<f32> = (0..k * step).map(|i| data[i % data.len()]).collect();
                let mut scalar = vec![0u32; kp * width];
                let mut vector = vec![0u32; kp * width];
                let t1 = pack_lines(&data, 0, (1, step), rows, k, width, &mut scalar, mul);
                let t2 = pack(
                    kernel,
                    &data,
                    0,
                    (1, step),
                    rows,
                    k,
                    width,
                    &mut vector,
                    mul,
                );
                assert_eq!(scalar, vector, "runs: k {k}, rows {rows}, width {width}");
                assert_eq!(t1, t2);
            }
        }
    }

    /// The reference is specific: the same sums in another order (the even product first, or
    /// k ascending one by one) give other bits on these operands, so a kernel that
    /// accumulated differently could not pass the test above.
    #[test]
    fn the_order_of_accumulation_is_observable() {
        let (m, n, k) = (16, 32, 512);
        let av = codes(m * k, 3, Format::HiF8);
        let bv = codes(k * n, 4, Format::HiF8);
        let (a, b) = operands((m, n, k), 0, &av, &bv);
        let mut want = vec![0.0; m * n];
        reference((m, n, k), a, b, &mut want, false, 1.0);
        let mut even_first = vec![0.0f32; m * n];
        let mut ascending = vec![0.0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let (mut s1, mut s2) = (0.0f32, 0.0f32);
                for p in 0..k / 2 {
                    s1 += el(a, i, 2 * p) * el(b, 2 * p, j);
                    s1 += el(a, i, 2 * p + 1) * el(b, 2 * p + 1, j);
                }
                for kk in 0..k {
                    s2 += el(a, i, kk) * el(b, kk, j);
                }
                even_first[i * n + j] = s1;
                ascending[i * n + j] = s2;
            }
        }
        assert_ne!(bits(&want), bits(&even_first));
        assert_ne!(bits(&want), bits(&ascending));
        // …while the three agree to f32 accumulation.
        for ((w, e), s) in want.iter().zip(&even_first).zip(&ascending) {
            assert!(
                (w - e).abs() <= 1e-4 * (1.0 + w.abs()) && (w - s).abs() <= 1e-4 * (1.0 + w.abs())
            );
        }
    }
}

/// The bf16 kernel inside the backend's matmul: a quantized linear's three products.
#[cfg(test)]
mod linear_tests {
    use crate::cpu::CpuBackend;
    use crate::prelude::*;
    use crate::{BankConfig, Layout, MatmulSpec};
    use hif8lab_scaling::ScalingConfig;

    /// The forward (A·Wᵀ, NT), the input gradient (G·W, NN) and the weight gradient (Gᵀ·A,
    /// TN) of a fake-quantized linear (every operand quantized, HiF8, delayed scales not at
    /// the operands' amax) on the bf16 kernel against the f32 oracle.
    ///
    /// The bound, derived: both approximate E = Σ q_a·q_b / (s_a·s_b) over the codes q. The
    /// f32 path rounds each operand q/s (≤ u = 2⁻²⁴ relative), each product (≤ u) and sums k
    /// terms (≤ (k−1)·u·Σ|terms|); the kernel's products are exact, its sum is within k·u·Σ
    /// and the factor 1/(s_a·s_b) (rounded once) and its product add 2u. So the two differ by
    /// at most (2k + 5)·u·Σ|x_a·x_b| (to first order; 1 % of slack for the second), per
    /// element of C, with Σ|x_a·x_b| over the fake-quantized operands in f64.
    #[test]
    fn a_quantized_linear_on_the_bf16_kernel_equals_the_f32_oracle_within_the_bound() {
        let Some(_) = super::tests::kernel_or_skip(
            "a_quantized_linear_on_the_bf16_kernel_equals_the_f32_oracle_within_the_bound",
        ) else {
            return;
        };
        let cpu = CpuBackend::new();
        let plan = ScalingConfig::default().plan().unwrap();
        let k_est = plan.estimators().len();
        let bank = cpu.new_bank(&BankConfig::new(3, plan)).unwrap();
        // Scales (A, W, G) aimed at amaxes 0.6, 1.3 and 0.002 (the operands reach about 1,
        // 1 and 0.004: values above the estimate land in HiF8's coarser tiers).
        let scales: Vec<f32> = [15.0 / 0.6, 15.0 / 1.3, 15.0 / 0.002]
            .iter()
            .flat_map(|s| std::iter::repeat_n(*s as f32, k_est))
            .collect();
        cpu.set_scales(&bank, &scales).unwrap();
        let (rows, cin, cout) = (70, 96, 131);
        let x = crate::cpu::test_data::values(rows * cin, 1, 2.0);
        let w = crate::cpu::test_data::values(cout * cin, 2, 2.0);
        let g = crate::cpu::test_data::values(rows * cout, 3, 0.008);
        let (xt, wt, gt) = (
            cpu.upload(&x).unwrap(),
            cpu.upload(&w).unwrap(),
            cpu.upload(&g).unwrap(),
        );
        let fq = |v: &[f32], q: usize| {
            let t = cpu.upload(v).unwrap();
            let out = cpu.zeros(v.len()).unwrap();
            cpu.qdq(&t, &out, &bank, q).unwrap();
            cpu.read(&out).wait().unwrap()
        };
        let (qx, qw, qg) = (fq(&x, 0), fq(&w, 1), fq(&g, 2));
        // (A, B, m, n, k, layout, quantizers, fake-quantized A and B with their strides)
        type Case<'a> = (
            &'a crate::cpu::CpuTensor,
            &'a crate::cpu::CpuTensor,
            (usize, usize, usize),
            Layout,
            (usize, usize),
        );
        let cases: [Case; 3] = [
            (&xt, &wt, (rows, cout, cin), Layout::NT, (0, 1)),
            (&gt, &wt, (rows, cin, cout), Layout::NN, (2, 1)),
            (&gt, &xt, (cout, cin, rows), Layout::TN, (2, 0)),
        ];
        let fqs = [&qx, &qw, &qg];
        for (a, b, (m, n, k), layout, (qa, qb)) in cases {
            let base = MatmulSpec {
                fuse_a: Some(qa),
                fuse_b: Some(qb),
                ..MatmulSpec::new(m, n, k, layout)
            };
            let units = MatmulSpec {
                bf16_units: true,
                ..base
            };
            let run = |spec: &MatmulSpec| {
                let c = cpu.zeros(m * n).unwrap();
                cpu.matmul(a, b, &c, spec, Some(&bank)).unwrap();
                cpu.read(&c).wait().unwrap()
            };
            let (before, _) = cpu.gemm_flops();
            let oracle = run(&base);
            let (after, bf16_before) = cpu.gemm_flops();
            let got = run(&units);
            assert!(after > before, "{layout:?}: the oracle ran on the f32 GEMM");
            assert!(
                cpu.gemm_flops().1 > bf16_before,
                "{layout:?}: the kernel ran"
            );
            let (fa, fb) = (fqs[qa], fqs[qb]);
            let el_a = |i: usize, p: usize| match layout {
                Layout::TN => fa[p * m + i],
                _ => fa[i * k + p],
            };
            let el_b = |p: usize, j: usize| match layout {
                Layout::NT => fb[j * k + p],
                _ => fb[p * n + j],
            };
            let u = 2f64.powi(-24);
            let mut worst = 0.0f64;
            for i in 0..m {
                for j in 0..n {
                    let abs: f64 = (0..k)
                        .map(|p| (f64::from(el_a(i, p)) * f64::from(el_b(p, j))).abs())
                        .sum();
                    let bound = (2 * k + 5) as f64 * u * abs * 1.01;
                    let d = (f64::from(oracle[i * n + j]) - f64::from(got[i * n + j])).abs();
                    assert!(
                        d <= bound,
                        "{layout:?} ({i}, {j}): f32 {} vs bf16 kernel {}, |Δ| {d:e} > bound {bound:e}",
                        oracle[i * n + j],
                        got[i * n + j]
                    );
                    if abs > 0.0 {
                        worst = worst.max(d / bound);
                    }
                }
            }
            // The kernel is not the f32 path under another name: some element differs.
            assert!(
                oracle
                    .iter()
                    .zip(&got)
                    .any(|(o, g)| o.to_bits() != g.to_bits()),
                "{layout:?}: the bf16 kernel gave the f32 path's bits everywhere"
            );
            eprintln!("{layout:?}: worst |Δ| / bound = {worst:.3}");
        }
    }

    /// The codes taken from the statistics pass's fake-quantized copy (`Q(x·s)/s` times s)
    /// are the codec's own, bit for bit — also where the copy holds denormals (a scale of
    /// 2¹³⁰ on values near 10⁻⁴⁰), which the kernel refuses and takes from the codec instead.
    #[test]
    fn codes_from_the_fake_quantized_copy_equal_the_codecs() {
        let Some(_) =
            super::tests::kernel_or_skip("codes_from_the_fake_quantized_copy_equal_the_codecs")
        else {
            return;
        };
        let cpu = CpuBackend::new();
        let plan = ScalingConfig::default().plan().unwrap();
        let k_est = plan.estimators().len();
        let bank = cpu.new_bank(&BankConfig::new(2, plan)).unwrap();
        let (m, n, k) = (45, 70, 99);
        for (span, scale) in [(2.0f32, 9.0f32), (4e-40, 2f32.powi(126) * 16.0)] {
            cpu.set_scales(
                &bank,
                &[vec![scale; k_est], vec![scale * 0.5; k_est]].concat(),
            )
            .unwrap();
            let a = cpu
                .upload(&crate::cpu::test_data::values(m * k, 8, span))
                .unwrap();
            let b = cpu
                .upload(&crate::cpu::test_data::values(k * n, 9, span))
                .unwrap();
            let spec = MatmulSpec {
                fuse_a: Some(0),
                fuse_b: Some(1),
                bf16_units: true,
                ..MatmulSpec::new(m, n, k, Layout::NN)
            };
            let run = |stats_first: bool| {
                if stats_first {
                    cpu.quant_stats(&a, &bank, 0).unwrap();
                    cpu.quant_stats(&b, &bank, 1).unwrap();
                }
                let c = cpu.zeros(m * n).unwrap();
                cpu.matmul(&a, &b, &c, &spec, Some(&bank)).unwrap();
                crate::cpu::test_data::bits(&cpu.read(&c).wait().unwrap())
            };
            let codec = run(false);
            assert!(
                codec.iter().any(|v| *v != 0),
                "span {span}: a product of zeros"
            );
            let copies = || crate::cpu::bf16::FROM_COPY.load(std::sync::atomic::Ordering::Relaxed);
            let before = copies();
            assert_eq!(codec, run(true), "span {span}, scale {scale}");
            if span > 1.0 {
                assert!(copies() > before, "the product took the copies' codes");
            }
        }
    }

    /// A batched product on the kernel, accumulating, equals its batches one by one.
    #[test]
    fn a_batched_quantized_product_equals_its_batches() {
        let Some(_) =
            super::tests::kernel_or_skip("a_batched_quantized_product_equals_its_batches")
        else {
            return;
        };
        let cpu = CpuBackend::new();
        let plan = ScalingConfig::default().plan().unwrap();
        let k_est = plan.estimators().len();
        let bank = cpu.new_bank(&BankConfig::new(2, plan)).unwrap();
        cpu.set_scales(&bank, &[vec![7.0; k_est], vec![3.0; k_est]].concat())
            .unwrap();
        let (m, n, k, batch) = (9, 40, 33, 3);
        let av = crate::cpu::test_data::values(batch * m * k, 21, 2.0);
        let bv = crate::cpu::test_data::values(batch * k * n, 22, 2.0);
        let start = crate::cpu::test_data::values(batch * m * n, 23, 1.0);
        let spec = |batch| MatmulSpec {
            batch,
            accumulate: true,
            fuse_a: Some(0),
            fuse_b: Some(1),
            bf16_units: true,
            ..MatmulSpec::new(m, n, k, Layout::NN)
        };
        let (a, b, c) = (
            cpu.upload(&av).unwrap(),
            cpu.upload(&bv).unwrap(),
            cpu.upload(&start).unwrap(),
        );
        cpu.quant_stats(&a, &bank, 0).unwrap();
        cpu.quant_stats(&b, &bank, 1).unwrap();
        cpu.matmul(&a, &b, &c, &spec(batch), Some(&bank)).unwrap();
        let whole = crate::cpu::test_data::bits(&cpu.read(&c).wait().unwrap());
        let mut parts = Vec::new();
        for i in 0..batch {
            let a = cpu.upload(&av[i * m * k..(i + 1) * m * k]).unwrap();
            let b = cpu.upload(&bv[i * k * n..(i + 1) * k * n]).unwrap();
            let c = cpu.upload(&start[i * m * n..(i + 1) * m * n]).unwrap();
            cpu.matmul(&a, &b, &c, &spec(1), Some(&bank)).unwrap();
            parts.extend(crate::cpu::test_data::bits(&cpu.read(&c).wait().unwrap()));
        }
        assert_eq!(whole, parts);
    }
}
