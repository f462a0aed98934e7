//! CPU GEMM through the `gemm` crate (cache-blocked, SIMD up to AVX-512, multi-threaded
//! natively with rayon): the layouts are expressed as strides, so no operand is ever
//! transposed in memory.

use crate::{Layout, MatmulSpec};

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
    #[cfg(not(target_arch = "wasm32"))]
    let parallelism = if m * n * k >= 64 * 64 * 64 {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    #[cfg(target_arch = "wasm32")]
    let parallelism = gemm::Parallelism::None;
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
        // SAFETY: `a` holds m·k elements, `b` k·n and `c` m·n (sliced above from buffers
        // whose sizes `check_matmul` verified); with the strides chosen for the layout every
        // index gemm forms, (i·rs + j·cs) for i < rows and j < cols, lies inside its slice.
        // `c` is a distinct mutable borrow, so it aliases neither `a` nor `b`. gemm computes
        // dst := alpha·dst + beta·lhs·rhs, reading dst only when `read_dst` is true.
        #[allow(unsafe_code)]
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                n as isize,
                spec.accumulate,
                a.as_ptr(),
                csa,
                rsa,
                b.as_ptr(),
                csb,
                rsb,
                1.0f32,
                1.0f32,
                false,
                false,
                false,
                parallelism,
            );
        }
    }
}
