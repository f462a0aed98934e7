//! The kernel, its packers and its scalar twin, held to each other.

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

/// Every kernel this CPU can run (each named where it cannot: both kernels' tests run
/// wherever the feature exists), or why the test has nothing to check here.
fn kernels_or_skip(test: &str) -> Vec<Bf16Kernel> {
    let found = available();
    for missing in [Bf16Kernel::Amx, Bf16Kernel::Avx512Bf16] {
        if !found.contains(&missing) {
            eprintln!(
                "{test}: the {} kernel not checked here: this CPU (or OS) cannot run it",
                missing.name()
            );
        }
    }
    if found.is_empty() {
        kernel_or_skip(test);
    }
    found
}

#[test]
fn bf16_kernel_equals_its_scalar_reference_bit_for_bit() {
    // Ragged edges (m, n not multiples of 8 and 32), odd k, k not a multiple of 32 (nor of
    // an AMX tile's 32), m past one and two AMX blocks, and the trainer's shapes (d 64 →
    // 4·64; 576 → 1,536 at 256 rows).
    let shapes = [
        (1, 1, 1),
        (3, 5, 7),
        (9, 33, 31),
        (17, 64, 96),
        (8, 32, 2),
        (40, 70, 129),
        (33, 31, 33),
        (71, 47, 200),
        (256, 576, 1536),
        (576, 256, 256),
    ];
    for kernel in kernels_or_skip("bf16_kernel_equals_its_scalar_reference_bit_for_bit") {
        kernel_equals_reference(kernel, &shapes);
    }
}

fn kernel_equals_reference(kernel: Bf16Kernel, shapes: &[(usize, usize, usize)]) {
    let formats = [Format::HiF8, Format::E4M3, Format::E5M2];
    for (s, &(m, n, k)) in shapes.iter().enumerate() {
        let format = formats[s % 3];
        let av = codes(m * k, 11 + s as u64, format);
        let bv = codes(k * n, 97 + s as u64, formats[(s + 1) % 3]);
        for (layout, acc, factor) in [(0, false, 1.0), (1, true, 0.37), (2, false, 3.0e-3)] {
            let (a, b) = operands((m, n, k), layout, &av, &bv);
            let start = crate::cpu::test_data::values(m * n, 5, 4.0);
            let (mut want, mut got) = (start.clone(), start);
            reference(kernel, (m, n, k), a, b, &mut want, acc, factor);
            let (sa, sb) = (Source { x: a, mul: 1.0 }, Source { x: b, mul: 1.0 });
            assert!(gemm(kernel, (m, n, k), sa, sb, &mut got, acc, factor));
            let first = bits(&want)
                .iter()
                .zip(bits(&got))
                .position(|(w, g)| *w != g);
            assert_eq!(
                first,
                None,
                "{}: {m}×{n}×{k} layout {layout} accumulate {acc} ({format:?}): first difference",
                kernel.name()
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
        // A line alone (AMX's rows of A), blocks of 8 (A), panels of 32 (B: two groups of
        // 16 lines transposed in registers, the second partial).
        for (width, rows) in [(1, 1), (MR, rows), (NR, rows), (NR, rows + 17)] {
            let data: Vec<f32> = (0..rows * line).map(|i| data[i % data.len()]).collect();
            let mut scalar = vec![0u32; kp * width];
            let mut vector = vec![0u32; kp * width];
            let t1 = pack_lines(&data, 0, (line, 1), rows, k, width, &mut scalar, mul);
            let t2 = pack(
                kernel,
                &data,
                0,
                (line, 1),
                rows,
                k,
                width,
                &mut vector,
                mul,
            );
            assert_eq!(
                scalar, vector,
                "k {k}, rows {rows}, width {width}, mul {mul}"
            );
            let denormal = (0..rows).any(|r| {
                data[r * line..r * line + k]
                    .iter()
                    .any(|v| v.is_subnormal())
            });
            assert_eq!((t1, t2), (denormal, denormal), "k {k}: denormals reported");
        }
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

/// The register transpose gathers each line's pairs from a pair-major block as a scalar
/// gather does (16 × 16 tiles; lines past `rows` left alone).
#[test]
fn the_vector_gather_equals_the_scalar_one() {
    #[cfg(target_arch = "x86_64")]
    {
        let Some(_) = kernel_or_skip("the_vector_gather_equals_the_scalar_one") else {
            return;
        };
        for (rows, kpad) in [(32usize, 16usize), (17, 48), (5, 32), (1, 16)] {
            let width = 32;
            let pairs: Vec<u32> = (0..kpad * width)
                .map(|i| {
                    crate::cpu::test_data::bits(&crate::cpu::test_data::values(1, i as u64, 1.0))[0]
                })
                .collect();
            let mut vector = vec![u32::MAX; rows * kpad];
            // SAFETY: the kernel (AVX-512F with it) exists here; sizes as documented.
            unsafe { avx512::gather_runs(&pairs, width, rows, kpad, &mut vector) };
            for r in 0..rows {
                for p in 0..kpad {
                    assert_eq!(
                        vector[r * kpad + p],
                        pairs[p * width + r],
                        "rows {rows}: ({r}, {p})"
                    );
                }
            }
        }
    }
}

/// The reference is specific: the same sums in another order (the even product first, k
/// ascending one by one, the other kernel's grouping, or AMX's chunk sums added to the
/// element one after the other) give other bits on these operands, so a kernel that
/// accumulated differently could not pass the test above.
#[test]
fn the_order_of_accumulation_is_observable() {
    let (m, n, k) = (16, 32, 512);
    let av = codes(m * k, 3, Format::HiF8);
    let bv = codes(k * n, 4, Format::HiF8);
    let (a, b) = operands((m, n, k), 0, &av, &bv);
    let mut avx = vec![0.0; m * n];
    reference(
        Bf16Kernel::Avx512Bf16,
        (m, n, k),
        a,
        b,
        &mut avx,
        false,
        1.0,
    );
    let mut amx = vec![0.0; m * n];
    reference(Bf16Kernel::Amx, (m, n, k), a, b, &mut amx, false, 1.0);
    let mut even_first = vec![0.0f32; m * n];
    let mut ascending = vec![0.0f32; m * n];
    let mut chunks_split = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut s1, mut s2, mut s3) = (0.0f32, 0.0f32, 0.0f32);
            for p in 0..k / 2 {
                s1 += el(a, i, 2 * p) * el(b, 2 * p, j);
                s1 += el(a, i, 2 * p + 1) * el(b, 2 * p + 1, j);
            }
            for kk in 0..k {
                s2 += el(a, i, kk) * el(b, kk, j);
            }
            for chunk in (0..k).step_by(32) {
                let (mut even, mut odd) = (0.0f32, 0.0f32);
                for kk in (chunk..chunk + 32).step_by(2) {
                    even += el(a, i, kk) * el(b, kk, j);
                    odd += el(a, i, kk + 1) * el(b, kk + 1, j);
                }
                s3 = (s3 + even) + odd;
            }
            even_first[i * n + j] = s1;
            ascending[i * n + j] = s2;
            chunks_split[i * n + j] = s3;
        }
    }
    for (name, want) in [("avx512-bf16", &avx), ("amx-bf16", &amx)] {
        for (other, got) in [
            ("even first", &even_first),
            ("ascending", &ascending),
            ("chunk sums split", &chunks_split),
        ] {
            assert_ne!(bits(want), bits(got), "{name} against {other}");
        }
    }
    assert_ne!(bits(&avx), bits(&amx));
    // …while all agree to f32 accumulation: within 2k·2⁻²⁴·Σ|a·b| of each other.
    for others in [&amx, &even_first, &ascending, &chunks_split] {
        for (idx, (w, e)) in avx.iter().zip(others.iter()).enumerate() {
            let (i, j) = (idx / n, idx % n);
            let magnitude: f64 = (0..k)
                .map(|kk| (el(a, i, kk) as f64 * el(b, kk, j) as f64).abs())
                .sum();
            let bound = 2.0 * k as f64 * 2f64.powi(-24) * magnitude;
            assert!(
                ((w - e) as f64).abs() <= bound,
                "({i}, {j}): {w} against {e}"
            );
        }
    }
}
