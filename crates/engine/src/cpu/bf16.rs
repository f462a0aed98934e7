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
mod tests;

#[cfg(test)]
mod linear_tests;
