//! The bf16 GEMM: products on the CPU's bf16 matrix or dot-product units, f32 accumulation.
//!
//! Every HiF8, E4M3 and E5M2 value is exact in bf16 (at most 4 significant bits, exponents far
//! inside bf16's range), and so is every value already rounded to bf16. For operands made only
//! of such values a bf16 GEMM with f32 accumulation computes each product exactly, as 8-bit
//! hardware does; only the order of the f32 additions differs from the f32 path's. This module
//! runs it on AMX tiles (`TDPBF16PS`, Intel since Sapphire Rapids) or on AVX512-BF16
//! (`VDPBF16PS`, Intel since Cooper Lake, AMD since Zen 4), the best the CPU has, chosen at
//! run time; [`reference`] is their scalar twin, bit for bit.
//!
//! The order of accumulation, which the kernel and its twin follow: each element of C is one
//! f32 sum started at +0.0 over k in pairs `(2p, 2p+1)`, p ascending, one rounding to
//! nearest-even per addition, inputs' denormals read as zero, denormal results flushed to
//! zero; an odd k is padded with a zero product. The two kernels group the additions as their
//! instructions do:
//! - AVX512-BF16 (`VDPBF16PS`): per pair, the odd product added first, then the even one.
//! - AMX (`TDPBF16PS`): per chunk of 16 pairs (k padded with zeros to a multiple of 32), the
//!   even products summed into one f32 and the odd ones into another, pairs ascending, and
//!   their sum added to the element: `s ← s + (even + odd)`.
//!
//! The sum is then multiplied by the caller's `factor` (one rounding) and added to C when
//! accumulating. No split of k, no dependence on the thread count or the tiling.

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
/// Columns of C per register block (two 16-lane registers), and per AMX block (two tiles).
const NR: usize = 32;
/// Rows of C per AMX block (two tiles).
const AMX_MR: usize = 32;
/// Pairs of k per AMX tile (a row of 64 bytes): the chunk of k that `TDPBF16PS` sums.
const AMX_KC: usize = 16;

/// A bf16 GEMM kernel this machine can run (only [`detect`] and [`available`] make one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bf16Kernel {
    /// AVX-512 `VDPBF16PS` (16 f32 lanes, 32 products per instruction).
    Avx512Bf16,
    /// AMX `TDPBF16PS` (a 16×16 tile of f32, 16 × 16 × 32 products per instruction); its
    /// operands are packed with the AVX-512 packers, which every AMX CPU can run.
    Amx,
}

impl Bf16Kernel {
    /// Its name in benchmarks and run records.
    pub fn name(self) -> &'static str {
        match self {
            Bf16Kernel::Avx512Bf16 => "avx512-bf16",
            Bf16Kernel::Amx => "amx-bf16",
        }
    }

    /// The kernel of that [`Bf16Kernel::name`], if this CPU can run it.
    pub fn named(name: &str) -> Option<Bf16Kernel> {
        available().into_iter().find(|k| k.name() == name)
    }
}

/// The bf16 kernels this CPU can run (detected once), best first: AMX where the CPU has
/// AMX-TILE, AMX-BF16 and AVX512-BF16 and Linux lets the process use the tiles, then
/// AVX512-BF16.
pub fn available() -> Vec<Bf16Kernel> {
    #[cfg(target_arch = "x86_64")]
    {
        static FOUND: std::sync::OnceLock<Vec<Bf16Kernel>> = std::sync::OnceLock::new();
        FOUND
            .get_or_init(|| {
                let avx512 = std::arch::is_x86_feature_detected!("avx512bf16")
                    && std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw");
                let amx = avx512 && amx::on_cpu() && amx::permitted();
                let mut found = Vec::new();
                if amx {
                    found.push(Bf16Kernel::Amx);
                }
                if avx512 {
                    found.push(Bf16Kernel::Avx512Bf16);
                }
                found
            })
            .clone()
    }
    #[cfg(not(target_arch = "x86_64"))]
    Vec::new()
}

/// The bf16 kernel runs use (detected once), if any: the best [`available`] one, or the one
/// `HIF8LAB_BF16_KERNEL` names (`amx-bf16`, `avx512-bf16`; to compare them on one machine)
/// where this CPU has it.
pub fn detect() -> Option<Bf16Kernel> {
    static CHOSEN: std::sync::OnceLock<Option<Bf16Kernel>> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let best = available().first().copied();
        match std::env::var("HIF8LAB_BF16_KERNEL") {
            Ok(name) if !name.is_empty() => Bf16Kernel::named(&name).or(best),
            _ => best,
        }
    })
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
/// The scalar twin of the kernels: `C (+)= factor · (A·B)` in `kernel`'s order of
/// accumulation (the module's documentation), element by element.
pub(crate) fn reference(
    kernel: Bf16Kernel,
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
            // The product of pair p's element 0 or 1 (zero past k).
            let product = |p: usize, odd: usize| {
                let kk = 2 * p + odd;
                if kk < k {
                    ftz(pair(el(a, i, kk), el(b, kk, j)))
                } else {
                    0.0
                }
            };
            match kernel {
                Bf16Kernel::Avx512Bf16 => {
                    for p in 0..k.div_ceil(2) {
                        s = ftz(s + product(p, 1));
                        s = ftz(s + product(p, 0));
                    }
                }
                Bf16Kernel::Amx => {
                    for chunk in 0..k.div_ceil(2 * AMX_KC) {
                        let (mut even, mut odd) = (0.0f32, 0.0f32);
                        for p in chunk * AMX_KC..(chunk + 1) * AMX_KC {
                            even = ftz(even + product(p, 0));
                            odd = ftz(odd + product(p, 1));
                        }
                        s = ftz(s + ftz(even + odd));
                    }
                }
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
        Bf16Kernel::Avx512Bf16 | Bf16Kernel::Amx if step == 1 => {
            let kp = k.div_ceil(2);
            assert!(rows == 0 || base + (rows - 1) * line + k <= data.len());
            assert!(rows == 0 || (kp - 1) * width + rows <= out.len());
            // SAFETY: the kernel exists on this CPU; the asserts bound every line read and
            // every pair written.
            unsafe { avx512::pack_rows(data, base, line, rows, k, width, out, mul) }
        }
        #[cfg(target_arch = "x86_64")]
        Bf16Kernel::Avx512Bf16 | Bf16Kernel::Amx if line == 1 => {
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

/// Makes `out` `total` long and runs `f(index, chunk)` over its chunks of `len`, each chunk
/// zeroed first (by the thread that then fills it, not in one pass before), in parallel
/// natively. Whether an `f` answered `true`.
fn chunks(
    out: &mut Vec<u32>,
    total: usize,
    len: usize,
    f: impl Fn(usize, &mut [u32]) -> bool + Sync + Send,
) -> bool {
    // Kept from the last call: no allocation, and only a growth is filled here.
    out.truncate(total);
    out.resize(total, 0);
    let f = |i: usize, c: &mut [u32]| {
        c.fill(0);
        f(i, c)
    };
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

/// Rows of C per block of `kernel`, and of A per packed block.
fn block_rows(kernel: Bf16Kernel) -> usize {
    match kernel {
        Bf16Kernel::Amx => AMX_MR,
        Bf16Kernel::Avx512Bf16 => MR,
    }
}

/// The pairs of k a packed line holds: all `k.div_ceil(2)`, and for AMX zeros up to whole
/// tiles.
fn padded_pairs(kernel: Bf16Kernel, k: usize) -> usize {
    let kp = k.div_ceil(2);
    match kernel {
        Bf16Kernel::Amx => kp.div_ceil(AMX_KC) * AMX_KC,
        Bf16Kernel::Avx512Bf16 => kp,
    }
}

/// A packed for `kernel` into `out`, rows past m and pairs past k zero. For AVX512-BF16 in
/// blocks of [`MR`] rows: per block, for each pair p, the MR rows' pairs. For AMX in blocks of
/// [`AMX_MR`] rows, each row's [`padded_pairs`] in a run (a tile's rows). Whether an element
/// was a non-zero denormal.
fn pack_a(kernel: Bf16Kernel, m: usize, k: usize, a: Source, out: &mut Vec<u32>) -> bool {
    let kpad = padded_pairs(kernel, k);
    let block_rows = block_rows(kernel);
    // A's lines are its rows: (row stride, k stride).
    let (line, step) = (a.x.rs as usize, a.x.cs as usize);
    let total = m.div_ceil(block_rows) * block_rows * kpad;
    chunks(out, total, block_rows * kpad, |ib, block| {
        let rows = block_rows.min(m - ib * block_rows);
        let base = ib * block_rows * line;
        match kernel {
            Bf16Kernel::Avx512Bf16 => pack(
                kernel,
                a.x.data,
                base,
                (line, step),
                rows,
                k,
                MR,
                block,
                a.mul,
            ),
            // Rows contiguous along k: each packed as a line of its own, into its run.
            Bf16Kernel::Amx if step == 1 => (0..rows).fold(false, |tiny, r| {
                let run = &mut block[r * kpad..(r + 1) * kpad];
                pack(
                    kernel,
                    a.x.data,
                    base + r * line,
                    (line, step),
                    1,
                    k,
                    1,
                    run,
                    a.mul,
                ) | tiny
            }),
            // Rows side by side: packed pair-major, then each row's pairs gathered.
            Bf16Kernel::Amx => {
                let mut pairs = vec![0u32; kpad * AMX_MR];
                let tiny = pack(
                    kernel,
                    a.x.data,
                    base,
                    (line, step),
                    rows,
                    k,
                    AMX_MR,
                    &mut pairs,
                    a.mul,
                );
                // SAFETY: the kernel exists on this CPU (AVX-512F with it); kpad and AMX_MR
                // are multiples of 16, `pairs` holds kpad·AMX_MR and `block` AMX_MR·kpad.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    avx512::gather_runs(&pairs, AMX_MR, rows, kpad, block)
                };
                tiny
            }
        }
    })
}

/// B packed in panels of [`NR`] columns into `out`: per panel, for each of the
/// [`padded_pairs`] p, the NR columns' pairs (for AMX, a tile's row is 16 of them), columns
/// past n and pairs past k zero. Whether an element was a non-zero denormal.
fn pack_b(kernel: Bf16Kernel, n: usize, k: usize, b: Source, out: &mut Vec<u32>) -> bool {
    let kpad = padded_pairs(kernel, k);
    // B's lines are its columns: (column stride, k stride).
    let (line, step) = (b.x.cs as usize, b.x.rs as usize);
    chunks(out, n.div_ceil(NR) * kpad * NR, kpad * NR, |jp, panel| {
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
    let kpad = padded_pairs(kernel, k);
    // Both operands in one parallel region.
    #[cfg(not(target_arch = "wasm32"))]
    let (tiny_a, tiny_b) = rayon::join(
        || pack_a(kernel, m, k, a, ap),
        || pack_b(kernel, n, k, b, bp),
    );
    #[cfg(target_arch = "wasm32")]
    let (tiny_a, tiny_b) = (pack_a(kernel, m, k, a, ap), pack_b(kernel, n, k, b, bp));
    if (tiny_a && a.mul != 1.0) || (tiny_b && b.mul != 1.0) {
        return false;
    }
    let block_rows = block_rows(kernel);
    let (ap, bp) = (&*ap, &*bp);
    let c_at = c.as_mut_ptr() as usize;
    let c_len = c.len();
    let run = |jp: usize| {
        let j0 = jp * NR;
        let cols = NR.min(n - j0);
        let panel = &bp[jp * kpad * NR..(jp + 1) * kpad * NR];
        // SAFETY: the kernel exists on this CPU (`detect` or `available` found it, the only
        // sources of a `Bf16Kernel`), which for AMX includes the process's permission.
        #[cfg(target_arch = "x86_64")]
        let tiles = (kernel == Bf16Kernel::Amx).then(|| unsafe { amx::Tiles::configure() });
        #[cfg(not(target_arch = "x86_64"))]
        let tiles: Option<()> = None;
        let mut sums = [[0.0f32; NR]; AMX_MR];
        for ib in 0..m.div_ceil(block_rows) {
            let rows = block_rows.min(m - ib * block_rows);
            let block = &ap[ib * block_rows * kpad..(ib + 1) * block_rows * kpad];
            match (kernel, &tiles) {
                // SAFETY: as above; `block` holds kp·MR pairs and `panel` kp·NR.
                #[cfg(target_arch = "x86_64")]
                (Bf16Kernel::Avx512Bf16, _) => unsafe {
                    let first = sums.first_chunk_mut::<MR>().expect("AMX_MR ≥ MR");
                    avx512::block(kp, block, panel, first)
                },
                // SAFETY: the tiles are configured on this thread; `block` holds AMX_MR rows
                // of kpad pairs and `panel` kpad·NR pairs, kpad a multiple of AMX_KC.
                #[cfg(target_arch = "x86_64")]
                (Bf16Kernel::Amx, Some(tiles)) => unsafe {
                    tiles.block(
                        kpad / AMX_KC,
                        block.as_ptr(),
                        kpad,
                        panel.as_ptr(),
                        &mut sums,
                    )
                },
                _ => unreachable!("no bf16 kernel off x86-64, tiles configured for AMX"),
            }
            for (r, s) in sums.iter().enumerate().take(rows) {
                let at = (ib * block_rows + r) * n + j0;
                debug_assert!(at + cols <= c_len);
                // SAFETY: row ib·block_rows + r < m and columns j0..j0 + cols < n of the
                // row-major m×n C, inside `c` (its length was checked by the caller); panels
                // write disjoint columns, and `c` is a mutable borrow held for the whole call.
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
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod linear_tests;
