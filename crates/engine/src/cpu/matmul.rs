//! CPU GEMM. Natively and in the browser's SIMD build: the `gemm-f32` kernels (cache-blocked,
//! SIMD up to AVX-512 natively, simd128 in wasm), one single-threaded call per tile of C,
//! tiles in parallel natively with rayon. In the browser's baseline build (no simd128) a
//! portable register-blocked kernel ([`portable`]): `gemm-f32`'s wasm build holds simd128
//! kernels whatever the target features, and one SIMD instruction anywhere in a module keeps
//! a browser without SIMD from loading it. The layouts are expressed as strides, so no
//! operand is ever transposed in memory.

use crate::{Layout, MatmulSpec};

/// Rows (or columns) of C per parallel tile, at most: each tile packs the whole other
/// operand again, so tiles stay large. 256 rather than 128 (4 tiles instead of 8 for the
/// `small` preset's 1,024 rows, still 2 per thread for rayon to balance): the repacking was
/// about 7 % of a step (`gemm_common::pack_operands::pack_lhs` in a profile), and the
/// matmul time of a `small` QAT step fell in 9 of 11 alternating pairs (125–148 against
/// 128–165 ms in a noisy window). Bits do not depend on it (a 6-step `small` run's
/// checkpoint was byte-identical at 128 and 256).
#[cfg(any(not(target_arch = "wasm32"), target_feature = "simd128"))]
const TILE: usize = 256;

pub(crate) use super::bf16::Operand;

/// (row stride, column stride) of the logical M×K operand A and K×N operand B of `spec`.
fn strides(spec: &MatmulSpec) -> ((isize, isize), (isize, isize)) {
    let (m, n, k) = (spec.m as isize, spec.n as isize, spec.k as isize);
    let a = match spec.layout {
        Layout::NN | Layout::NT => (k, 1),
        Layout::TN => (1, m),
    };
    let b = match spec.layout {
        Layout::NN | Layout::TN => (n, 1),
        Layout::NT => (1, k),
    };
    (a, b)
}

/// `C[b] (+)= factor · op(A[b])·op(B[b])` for every batch on the bf16 kernel, each operand's
/// elements times its multiplier (`(data, mul)`: see `bf16::Source`); sizes were checked by
/// the caller. `false` where an operand could not be read exactly (C untouched from that
/// batch on; the trainer's products have one batch).
pub(crate) fn gemm_bf16(
    kernel: super::bf16::Bf16Kernel,
    spec: &MatmulSpec,
    (a, mul_a): (&[f32], f32),
    (b, mul_b): (&[f32], f32),
    c: &mut [f32],
    factor: f32,
) -> bool {
    let (m, n, k) = (spec.m, spec.n, spec.k);
    let (sa, sb, sc) = spec.sizes();
    let ((rsa, csa), (rsb, csb)) = strides(spec);
    for batch in 0..spec.batch {
        let a = Operand {
            data: &a[batch * sa..(batch + 1) * sa],
            rs: rsa,
            cs: csa,
        };
        let b = Operand {
            data: &b[batch * sb..(batch + 1) * sb],
            rs: rsb,
            cs: csb,
        };
        let c = &mut c[batch * sc..(batch + 1) * sc];
        if k == 0 {
            if !spec.accumulate {
                c.fill(0.0);
            }
            continue;
        }
        let (a, b) = (
            super::bf16::Source { x: a, mul: mul_a },
            super::bf16::Source { x: b, mul: mul_b },
        );
        if !super::bf16::gemm(kernel, (m, n, k), a, b, c, spec.accumulate, factor) {
            return false;
        }
    }
    true
}

/// `C[b] (+)= op(A[b])·op(B[b])` for every batch; sizes were checked by the caller.
pub(crate) fn gemm(spec: &MatmulSpec, a: &[f32], b: &[f32], c: &mut [f32]) {
    let (m, n, k) = (spec.m, spec.n, spec.k);
    let (sa, sb, sc) = spec.sizes();
    let ((rsa, csa), (rsb, csb)) = strides(spec);
    for batch in 0..spec.batch {
        let a = &a[batch * sa..(batch + 1) * sa];
        let b = &b[batch * sb..(batch + 1) * sb];
        let c = &mut c[batch * sc..(batch + 1) * sc];
        if m == 0 || n == 0 {
            continue;
        }
        if k == 0 {
            if !spec.accumulate {
                c.fill(0.0);
            }
            continue;
        }
        let a = Operand {
            data: a,
            rs: rsa,
            cs: csa,
        };
        let b = Operand {
            data: b,
            rs: rsb,
            cs: csb,
        };
        #[cfg(all(target_arch = "wasm32", not(target_feature = "simd128")))]
        portable::gemm(m, n, k, a, b, c, spec.accumulate);
        #[cfg(any(not(target_arch = "wasm32"), target_feature = "simd128"))]
        tiled(m, n, k, a, b, c, spec.accumulate);
    }
}

/// One batch through `gemm-f32`: tiles of rows of C (columns when C is wider than tall), each
/// a single-threaded call, run in parallel; with two cores it beats gemm's own threading by
/// 1.1–2× on this model's shapes (most for k ≥ 512). The tile count is a multiple of the
/// thread count, so every thread gets as many tiles: 3 tiles of a 576-wide C on 2 threads
/// kept one thread idle for a third of the call (SmolLM2-135M's d_model; those shapes ran at
/// 200–250 GFLOP/s against 310–330 for 1,536-wide ones). The bits do not depend on the
/// tiling: an element of C is one dot product over k, chunked by `gemm-f32` along k alone
/// (its `kc` comes from k and the caches, never from the tile's rows or columns), so the
/// thread count changes which call computes it, not how (`tests/threads.rs` in the trainer
/// holds a QAT run's bits equal on 1, 2 and 3 threads).
#[cfg(any(not(target_arch = "wasm32"), target_feature = "simd128"))]
fn tiled(m: usize, n: usize, k: usize, a: Operand, b: Operand, c: &mut [f32], acc: bool) {
    let by_rows = m >= n;
    let dim = if by_rows { m } else { n };
    #[cfg(not(target_arch = "wasm32"))]
    let threads = rayon::current_num_threads().max(1);
    #[cfg(target_arch = "wasm32")]
    let threads = 1;
    let tiles = dim.div_ceil(TILE).max(2).next_multiple_of(threads);
    let size = dim.div_ceil(tiles).div_ceil(16) * 16;
    let tiles = dim.div_ceil(size);
    let c_at = c.as_mut_ptr() as usize;
    let tile = |t: usize| {
        let start = t * size;
        let len = size.min(dim - start);
        let (rows, cols) = if by_rows { (len, n) } else { (m, len) };
        let (a_off, b_off, c_off) = if by_rows {
            (start as isize * a.rs, 0, start * n)
        } else {
            (0, start as isize * b.cs, start)
        };
        // SAFETY: `a` holds m·k elements, `b` k·n and `c` m·n (sliced by the caller from
        // buffers whose sizes `check_matmul` verified). A tile is rows `start..start + len`
        // of C (or columns), so with the strides chosen for the layout every index the
        // kernel forms from the offsets — (start + i)·rs + j·cs into `a`, i·rs + (start +
        // j)·cs into `b`, and the C element (i, j) of the tile — lies inside its slice.
        // Tiles write disjoint elements of `c`, which is a distinct mutable borrow held for
        // the whole call, so nothing else reads or writes it and it aliases neither `a` nor
        // `b`.
        #[allow(unsafe_code)]
        unsafe {
            gemm_f32_call(
                (rows, cols, k),
                (c_at as *mut f32).add(c_off),
                n as isize,
                acc,
                (a.data.as_ptr().offset(a_off), a.rs, a.cs),
                (b.data.as_ptr().offset(b_off), b.rs, b.cs),
            );
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        (0..tiles).into_par_iter().for_each(tile);
    }
    #[cfg(target_arch = "wasm32")]
    (0..tiles).for_each(tile);
}

/// `dst (+)= lhs·rhs` for a row-major `dst` (row stride `dst_rs`, unit column stride) through
/// `gemm-f32`'s kernel for this machine. `gemm-f32`'s kernels want a column-major
/// destination, so a row-major one is computed as `dstᵀ = rhsᵀ·lhsᵀ` — what the `gemm`
/// crate's generic entry point does before it dispatches (strides here are never negative).
///
/// # Safety
/// Every index (i·rs + j·cs) the shapes and strides form must lie inside the buffer behind
/// its pointer, and `dst`'s elements must not be read or written elsewhere during the call.
#[cfg(any(not(target_arch = "wasm32"), target_feature = "simd128"))]
#[allow(unsafe_code)]
unsafe fn gemm_f32_call(
    (m, n, k): (usize, usize, usize),
    dst: *mut f32,
    dst_rs: isize,
    read_dst: bool,
    (lhs, lhs_rs, lhs_cs): (*const f32, isize, isize),
    (rhs, rhs_rs, rhs_cs): (*const f32, isize, isize),
) {
    // A row-major destination (column stride 1 below its row stride) as its transpose.
    let (m, n, dst_cs, dst_rs, lhs, lhs_cs, lhs_rs, rhs, rhs_cs, rhs_rs) = if 1 < dst_rs {
        (n, m, dst_rs, 1, rhs, rhs_rs, rhs_cs, lhs, lhs_rs, lhs_cs)
    } else {
        (m, n, 1, dst_rs, lhs, lhs_cs, lhs_rs, rhs, rhs_cs, rhs_rs)
    };
    // SAFETY: the caller's contract; a transposed view reads the same elements.
    unsafe {
        gemm_f32::gemm::f32::get_gemm_fn()(
            m,
            n,
            k,
            dst,
            dst_cs,
            dst_rs,
            read_dst,
            lhs,
            lhs_cs,
            lhs_rs,
            rhs,
            rhs_cs,
            rhs_rs,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm_common::Parallelism::None,
        );
    }
}

/// The portable kernel of the browser's baseline build (compiled everywhere so that native
/// tests check it): B packed into panels of [`NR`] columns (k-major, zero-padded), A into
/// blocks of [`MR`] rows, and an `MR`×`NR` block of sums in locals per pair. Each element of
/// C is one sum over k ascending from 0.0, then added to C when accumulating.
#[cfg_attr(
    any(not(target_arch = "wasm32"), target_feature = "simd128"),
    allow(dead_code)
)]
pub(crate) mod portable {
    use super::Operand;

    /// Rows of A per block.
    const MR: usize = 4;
    /// Columns of B per panel (4 × 2 sums and 2 + 1 operands stay in a browser's registers).
    const NR: usize = 2;

    /// `c (+)= a·b` for an m×k `a`, a k×n `b` and a row-major m×n `c`.
    pub(crate) fn gemm(
        m: usize,
        n: usize,
        k: usize,
        a: Operand,
        b: Operand,
        c: &mut [f32],
        accumulate: bool,
    ) {
        let el = |x: Operand, i: usize, j: usize| x.data[i * x.rs as usize + j * x.cs as usize];
        // A in blocks of MR rows, each k-major ([kk][r]), the last block zero-padded.
        let row_blocks = m.div_ceil(MR);
        let mut ap = vec![0.0f32; row_blocks * k * MR];
        for (ib, block) in ap.chunks_exact_mut(k * MR).enumerate() {
            for r in 0..MR.min(m - ib * MR) {
                for kk in 0..k {
                    block[kk * MR + r] = el(a, ib * MR + r, kk);
                }
            }
        }
        let mut panel = vec![0.0f32; k * NR];
        for j0 in (0..n).step_by(NR) {
            let cols = NR.min(n - j0);
            for kk in 0..k {
                for cc in 0..NR {
                    panel[kk * NR + cc] = if cc < cols { el(b, kk, j0 + cc) } else { 0.0 };
                }
            }
            for (ib, block) in ap.chunks_exact(k * MR).enumerate() {
                let mut s = [[0.0f32; NR]; MR];
                for (av, bv) in block.chunks_exact(MR).zip(panel.chunks_exact(NR)) {
                    for r in 0..MR {
                        for cc in 0..NR {
                            s[r][cc] += av[r] * bv[cc];
                        }
                    }
                }
                for (r, sr) in s.iter().enumerate().take(MR.min(m - ib * MR)) {
                    let row = &mut c[(ib * MR + r) * n + j0..][..cols];
                    for (o, v) in row.iter_mut().zip(sr) {
                        *o = if accumulate { *o + v } else { *v };
                    }
                }
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::super::Operand;

        /// Each element a plain sum over k ascending, added to C when accumulating: the
        /// portable kernel's order, so the two agree bit for bit.
        fn plain(m: usize, n: usize, k: usize, a: Operand, b: Operand, c: &mut [f32], acc: bool) {
            for i in 0..m {
                for j in 0..n {
                    let mut s = 0.0f32;
                    for kk in 0..k {
                        s += a.data[i * a.rs as usize + kk * a.cs as usize]
                            * b.data[kk * b.rs as usize + j * b.cs as usize];
                    }
                    let o = &mut c[i * n + j];
                    *o = if acc { *o + s } else { s };
                }
            }
        }

        #[test]
        fn portable_gemm_equals_the_plain_sums_in_every_layout() {
            let values = |n: usize, seed: u64| crate::cpu::test_data::values(n, seed, 3.0);
            for (m, n, k) in [
                (1, 1, 1),
                (3, 5, 7),
                (4, 2, 9),
                (9, 7, 1),
                (17, 13, 33),
                (64, 3, 5),
            ] {
                for (layout, acc) in [(0, false), (1, true), (2, false), (2, true)] {
                    let (av, bv) = (values(m * k, 1), values(k * n, 2));
                    // NN, NT, TN as strides (row, column) of the logical A and B.
                    let ((rsa, csa), (rsb, csb)) = match layout {
                        0 => ((k, 1), (n, 1)),
                        1 => ((k, 1), (1, k)),
                        _ => ((1, m), (n, 1)),
                    };
                    let a = Operand {
                        data: &av,
                        rs: rsa as isize,
                        cs: csa as isize,
                    };
                    let b = Operand {
                        data: &bv,
                        rs: rsb as isize,
                        cs: csb as isize,
                    };
                    let start = values(m * n, 3);
                    let (mut c1, mut c2) = (start.clone(), start);
                    plain(m, n, k, a, b, &mut c1, acc);
                    super::gemm(m, n, k, a, b, &mut c2, acc);
                    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&c1),
                        bits(&c2),
                        "{m}×{n}×{k} layout {layout} acc {acc}"
                    );
                }
            }
        }
    }
}
