use super::*;
use crate::stats::Threshold;
use crate::stats::tests::mixed;
use hif8lab_format::Format;

/// Every compiled variant of the counting, energy and amax kernels (AVX2, AVX-512) gives
/// what the plain reference gives on the same data: a build runs one of each, all are
/// held to the reference here (with NaN, ±Inf, ±0 and subnormal-range elements, NaN and
/// infinite bounds, lengths that leave every tail).
#[test]
fn every_kernel_variant_gives_the_same_results() {
    for n in (0..70).chain([1000, 4099]) {
        let x = mixed(n);
        // Stand-ins for quantized values: some differ, some are not finite.
        let q: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, v)| if i % 29 == 3 { f32::INFINITY } else { v * 0.75 })
            .collect();
        let bounds = [0.0, 1e-30, 4e-6, 0.01, 0.5, 3.0, f32::INFINITY, f32::NAN];
        let counts = reference::count_group(&x, &bounds);
        let definition: Vec<u64> = bounds
            .iter()
            .map(|b| x.iter().filter(|v| v.abs() >= *b).count() as u64)
            .collect();
        assert_eq!(counts.to_vec(), definition, "{n}");
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
        assert_eq!(count_group_avx2(&x, &bounds), counts, "avx2 {n}");
        #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
        assert_eq!(count_group_avx512(&x, &bounds), counts, "avx512 {n}");

        let whole = n / ENERGY_LANES * ENERGY_LANES;
        let lanes_bits = |(s, e): crate::stats::Lanes| (s.map(f64::to_bits), e.map(f64::to_bits));
        let plain = lanes_bits(reference::block_lanes(&x[..whole], &|i, _| q[i]));
        #[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
        assert_eq!(
            lanes_bits(lanes_of_blocks(&x[..whole], &q[..whole])),
            plain,
            "avx {n}"
        );
        #[cfg(all(
            target_arch = "x86_64",
            target_feature = "avx512f",
            target_feature = "avx512vl"
        ))]
        assert_eq!(
            lanes_bits(lanes_of_blocks_avx512(&x[..whole], &q[..whole])),
            plain,
            "avx512 {n}"
        );

        let amax = reference::amax_and_nonfinite(&x);
        #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
        assert_eq!(amax_and_nonfinite_avx512(&x), amax, "avx512 {n}");
        assert_eq!(amax_and_nonfinite(&x), amax, "{n}");
    }
}

/// The one-pass fake quantization and counts equal the codec followed by the counts of
/// its output, bit for bit (quantized values, counts, energies), for HiF8 in both
/// overflow modes and for a format the pass leaves to the two calls; with every number
/// of bounds left after the skip (none to all 12, past one pass's 8), at every length
/// (every tail after the whole 16s).
#[test]
fn one_pass_quantization_and_counts_equal_the_two_calls() {
    use hif8lab_format::Overflow;
    let quants = [
        FakeQuant::new(Format::HiF8),
        FakeQuant {
            overflow: Overflow::Saturate,
            ..FakeQuant::new(Format::HiF8)
        },
        FakeQuant::new(Format::E4M3),
    ];
    let t: Vec<Threshold> = [
        (0.2, 40.0),
        (1e-3, 9e3),
        (3.0, 0.5),
        (50.0, 1e6),
        (7e-6, 2e5),
    ]
    .iter()
    .map(|&(est, scale)| Threshold { est, scale })
    .collect();
    for quant in &quants {
        for n in (0..70).chain([1000, 4099]) {
            let x = mixed(n);
            for scale in [1.0, 15.0, 3.0e4] {
                let bounds = CountBounds::new(&t, scale, quant);
                for reach in [0.0, 1e-4, 0.3, 4.0, f32::INFINITY] {
                    let mut q1 = vec![7.0f32; n];
                    let mut q2 = vec![9.0f32; n];
                    let got = tensor_qdq_counts(&x, &mut q1, quant, scale, &bounds, reach);
                    quant.qdq_into(&x, &mut q2, scale);
                    let want = reference::tensor_counts_given(&x, &q2, &bounds, reach);
                    let case = format!("{:?} n {n} scale {scale} reach {reach}", quant.format);
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&q1), bits(&q2), "{case}");
                    assert_eq!(got.above_est, want.above_est, "{case}");
                    assert_eq!(got.overflow, want.overflow, "{case}");
                    assert_eq!(got.underflow, want.underflow, "{case}");
                    assert_eq!(got.numel, want.numel, "{case}");
                    assert_eq!(
                        (got.signal.to_bits(), got.noise.to_bits()),
                        (want.signal.to_bits(), want.noise.to_bits()),
                        "{case}"
                    );
                }
            }
        }
    }
}

/// The one-pass amax and fake quantization equal the reference amax pass and the codec, bit
/// for bit, for HiF8 in both overflow modes and for a format left to the two calls, at every
/// length (every tail after the whole 16s, and past one 2^20 piece) and at scales that
/// overflow, underflow and keep.
#[test]
fn one_pass_amax_and_quantization_equal_the_two_calls() {
    use hif8lab_format::Overflow;
    let quants = [
        FakeQuant::new(Format::HiF8),
        FakeQuant {
            overflow: Overflow::Saturate,
            ..FakeQuant::new(Format::HiF8)
        },
        FakeQuant::new(Format::E5M2),
    ];
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    for quant in &quants {
        for n in (0..70).chain([4099, (1 << 20) + 37]) {
            let mut x = mixed(n);
            if n == 33 {
                // only NaN and finite values: the amax ignores the NaN
                x.iter_mut()
                    .filter(|v| v.is_infinite())
                    .for_each(|v| *v = f32::NAN);
            }
            for scale in [1.0, 15.0, 3.0e4] {
                let mut q1 = vec![7.0f32; n];
                let mut q2 = vec![9.0f32; n];
                let got = amax_qdq_into(&x, &mut q1, quant, scale);
                quant.qdq_into(&x, &mut q2, scale);
                let want = reference::amax_and_nonfinite(&x);
                let case = format!("{:?} n {n} scale {scale}", quant.format);
                assert_eq!(
                    (got.0.to_bits(), got.1),
                    (want.0.to_bits(), want.1),
                    "{case}"
                );
                assert_eq!(bits(&q1), bits(&q2), "{case}");
            }
        }
    }
}
