//! The bf16 kernel inside the backend's matmul: a quantized linear's three products.

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
    let Some(_) = super::tests::kernel_or_skip("a_batched_quantized_product_equals_its_batches")
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
