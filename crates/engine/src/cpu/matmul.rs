//! CPU GEMM through `matrixmultiply` (cache-blocked, SIMD, multi-threaded natively): the
//! layouts are expressed as strides, so no operand is ever transposed in memory.

use crate::{Layout, MatmulSpec};

/// `C[b] (+)= op(A[b])·op(B[b])` for every batch; sizes were checked by the caller.
pub(crate) fn gemm(spec: &MatmulSpec, a: &[f32], b: &[f32], c: &mut [f32]) {
    let (m, n, k) = (spec.m, spec.n, spec.k);
    let (sa, sb, sc) = spec.sizes();
    let (rsa, csa) = match spec.layout {
        Layout::NN | Layout::NT => (k as isize, 1),
        Layout::TN => (1, m as isize),
    };
    let (rsb, csb) = match spec.layout {
        Layout::NN | Layout::TN => (n as isize, 1),
        Layout::NT => (1, k as isize),
    };
    let beta = if spec.accumulate { 1.0 } else { 0.0 };
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
        // SAFETY: `a` holds m·k elements, `b` k·n and `c` m·n (sliced above from buffers whose
        // sizes `check_matmul` verified); with the strides chosen for the layout every index
        // sgemm forms, (i·rs + j·cs) for i < rows and j < cols, lies inside its slice. `c`
        // does not alias `a` or `b` (distinct borrows).
        #[allow(unsafe_code)]
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n,
                1.0,
                a.as_ptr(),
                rsa,
                csa,
                b.as_ptr(),
                rsb,
                csb,
                beta,
                c.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    }
}
