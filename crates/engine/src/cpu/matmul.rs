//! CPU GEMM through the `gemm` crate (cache-blocked, SIMD up to AVX-512), one
//! single-threaded call per tile of C, tiles in parallel natively with rayon: the layouts
//! are expressed as strides, so no operand is ever transposed in memory.

use crate::{Layout, MatmulSpec};

/// Rows (or columns) of C per parallel tile, at most: each tile packs the whole other
/// operand again, so tiles stay large.
const TILE: usize = 128;

/// `C[b] (+)= op(A[b])·op(B[b])` for every batch; sizes were checked by the caller.
pub(crate) fn gemm(spec: &MatmulSpec, a: &[f32], b: &[f32], c: &mut [f32]) {
    let (m, n, k) = (spec.m, spec.n, spec.k);
    let (sa, sb, sc) = spec.sizes();
    // (row stride, column stride) of the logical M×K operand A and K×N operand B.
    let (rsa, csa) = match spec.layout {
        Layout::NN | Layout::NT => (k as isize, 1),
        Layout::TN => (1, m as isize),
    };
    let (rsb, csb) = match spec.layout {
        Layout::NN | Layout::TN => (n as isize, 1),
        Layout::NT => (1, k as isize),
    };
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
        // Tiles: blocks of rows of C (columns when C is wider than tall), each a
        // single-threaded gemm, run in parallel. The tiling depends on the shape only,
        // never on the thread count, so neither do the bits; with two cores it beats
        // gemm's own threading by 1.1–2× on this model's shapes (most for k ≥ 512).
        let by_rows = m >= n;
        let dim = if by_rows { m } else { n };
        let tiles = dim.div_ceil(TILE).max(2);
        let size = dim.div_ceil(tiles).div_ceil(16) * 16;
        let tiles = dim.div_ceil(size);
        let c_at = c.as_mut_ptr() as usize;
        let tile = |t: usize| {
            let start = t * size;
            let len = size.min(dim - start);
            let (rows, cols) = if by_rows { (len, n) } else { (m, len) };
            let (a_off, b_off, c_off) = if by_rows {
                (start as isize * rsa, 0, start * n)
            } else {
                (0, start as isize * csb, start)
            };
            // SAFETY: `a` holds m·k elements, `b` k·n and `c` m·n (sliced above from
            // buffers whose sizes `check_matmul` verified). A tile is rows `start..start +
            // len` of C (or columns), so with the strides chosen for the layout every index
            // gemm forms from the offsets — (start + i)·rsa + j·csa into `a`, i·rsb + (start
            // + j)·csb into `b`, and the C element (i, j) of the tile — lies inside its
            // slice. Tiles write disjoint elements of `c`, which is a distinct mutable
            // borrow held for the whole call, so nothing else reads or writes it and it
            // aliases neither `a` nor `b`. gemm computes dst := alpha·dst + beta·lhs·rhs,
            // reading dst only when `read_dst` is true.
            #[allow(unsafe_code)]
            unsafe {
                gemm::gemm(
                    rows,
                    cols,
                    k,
                    (c_at as *mut f32).add(c_off),
                    1,
                    n as isize,
                    spec.accumulate,
                    a.as_ptr().offset(a_off),
                    csa,
                    rsa,
                    b.as_ptr().offset(b_off),
                    csb,
                    rsb,
                    1.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
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
}
