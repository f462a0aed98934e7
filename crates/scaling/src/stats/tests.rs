use super::*;
use hif8lab_format::Format;

#[test]
fn counts_by_definition() {
    let x = [0.5, -3.0, f32::NAN, f32::NEG_INFINITY, 1e-12, 0.0, 2.0];
    let q = FakeQuant::new(Format::HiF8);
    let t = [
        Threshold {
            est: 1.0,
            scale: 15.0,
        },
        Threshold {
            est: 2.0,
            scale: 20000.0,
        },
    ];
    let s = tensor_stats(&x, &t, 15.0, &q);
    assert_eq!(s.amax, f32::INFINITY);
    assert_eq!(s.nonfinite, 2);
    assert_eq!(s.above_est, [3, 2]); // -3, -inf, 2 | -3, -inf
    assert_eq!(s.overflow, [1, 2]); // -inf | -3·2e4, -inf (2·2e4 = 40000 < 40960)
    assert_eq!(s.underflow, 1); // 1e-12·15 < 2^-23
}

/// Values of every kind: signs, tiny to overflowing magnitudes, zeros, NaN and ±Inf (the
/// SIMD passes' tests use them too).
pub(super) fn mixed(n: usize) -> Vec<f32> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|i| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            match i % 23 {
                5 => f32::NAN,
                11 => f32::INFINITY,
                17 => f32::NEG_INFINITY,
                19 => 0.0,
                20 => -0.0,
                _ => u * 10f32.powi((i % 13) as i32 - 6),
            }
        })
        .collect()
}

#[test]
fn energies_of_given_values_equal_the_codec_path_bit_for_bit() {
    for format in [Format::HiF8, Format::E4M3] {
        let q = FakeQuant::new(format);
        for n in (0..40).chain([1000, 4099]) {
            let x = mixed(n);
            for scale in [1.0, 15.0, 3.0e4] {
                let mut out = vec![0.0; n];
                q.qdq_into(&x, &mut out, scale);
                let (s1, n1) = quant_error(&x, 0, scale, &q);
                let (s2, n2) = quant_error_of(&x, &out);
                assert_eq!(
                    (s1.to_bits(), n1.to_bits()),
                    (s2.to_bits(), n2.to_bits()),
                    "{n} {scale}"
                );
                // And the definition, summed in the documented lane order.
                let mut lanes = ([0.0f64; ENERGY_LANES], [0.0f64; ENERGY_LANES]);
                for (i, (v, qv)) in x.iter().zip(&out).enumerate() {
                    if v.is_finite() && qv.is_finite() {
                        let (v, e) = (f64::from(*v), f64::from(*v) - f64::from(*qv));
                        lanes.0[i % ENERGY_LANES] += v * v;
                        lanes.1[i % ENERGY_LANES] += e * e;
                    }
                }
                let sum = |l: [f64; ENERGY_LANES]| l.iter().fold(0.0, |a, b| a + b);
                assert_eq!(s2.to_bits(), sum(lanes.0).to_bits());
                assert_eq!(n2.to_bits(), sum(lanes.1).to_bits());
            }
        }
    }
}

#[test]
fn amax_pass_matches_its_definition_at_every_length() {
    for n in (0..40).chain([1000, 4099]) {
        let x = mixed(n);
        let nonfinite = x.iter().filter(|v| !v.is_finite()).count() as u64;
        let amax = x
            .iter()
            .filter(|v| !v.is_nan())
            .fold(0.0f32, |a, v| a.max(v.abs()));
        assert_eq!(amax_and_nonfinite(&x), (amax, nonfinite), "{n}");
    }
}

/// `got`'s counts against their definitions over `x`: above each estimate, overflowing
/// at each scale, underflowing at the active scale.
fn assert_counts_by_definition(
    got: &TensorStats,
    x: &[f32],
    t: &[Threshold],
    active: f32,
    facts: &hif8lab_format::FormatFacts,
    case: &str,
) {
    let count = |p: &dyn Fn(f32) -> bool| x.iter().filter(|v| p(**v)).count() as u64;
    let above: Vec<u64> = t.iter().map(|t| count(&|v| v.abs() > t.est)).collect();
    let overflow: Vec<u64> = t
        .iter()
        .map(|t| count(&|v| (v * t.scale).abs() >= facts.overflow_threshold))
        .collect();
    let under = count(&|v| v != 0.0 && (v * active).abs() <= facts.underflow_max);
    assert_eq!(got.above_est, above, "{case}");
    assert_eq!(got.overflow, overflow, "{case}");
    assert_eq!(got.underflow, under, "{case}");
}

#[test]
fn bounded_counts_equal_the_definitions() {
    let specials = [
        0.0,
        -0.0,
        f32::from_bits(1),
        1e-30,
        0.5,
        1.0,
        3.0,
        15.0,
        4.0e4,
        3.0e38,
        f32::INFINITY,
        f32::NAN,
        -2.0,
        f32::NEG_INFINITY,
    ];
    let mut x = mixed(5000);
    x.extend(specials);
    x.extend(specials.map(|v| -v));
    for format in [Format::HiF8, Format::E4M3, Format::E5M2] {
        let q = FakeQuant::new(format);
        let facts = format.facts();
        for (i, est) in specials.iter().enumerate() {
            let scale = specials[(i * 5 + 3) % specials.len()];
            let t = [
                Threshold { est: *est, scale },
                Threshold {
                    est: -*est,
                    scale: 15.0 / est.abs().max(1e-30),
                },
            ];
            for active in [scale, 1.0, 7.5e3, 0.0, f32::INFINITY] {
                let got = counted(&x, &t, active, &q, 0.0, 0.0, (0.0, 0));
                let case = format!("{format:?} est {est} scale {scale} active {active}");
                assert_counts_by_definition(&got, &x, &t, active, &facts, &case);
            }
        }
    }
}

/// The counts a call's pieces make from bounds found once, skipping every bound above
/// the tensor's amax (`reach`), equal the definitions: 1 to 9 thresholds (passes of 4
/// to 20 bounds, split evenly), tensors with and without infinities, NaN kept.
#[test]
fn counts_from_shared_bounds_skipping_those_above_amax_equal_the_definitions() {
    let q = FakeQuant::new(Format::HiF8);
    let facts = Format::HiF8.facts();
    let all = mixed(3001);
    let finite: Vec<f32> = all.iter().copied().filter(|v| !v.is_infinite()).collect();
    for x in [&all, &finite, &finite[..7].to_vec(), &Vec::new()] {
        let (amax, _) = amax_and_nonfinite(x);
        for k in 1..=9usize {
            // Estimates and scales around the data's amax: some bounds above it, some below.
            let t: Vec<Threshold> = (0..k)
                .map(|i| {
                    let f = 0.25 * 2f32.powi(i as i32 - 3);
                    Threshold {
                        est: amax * f,
                        scale: facts.overflow_threshold / (amax.max(1e-30) * f),
                    }
                })
                .collect();
            for active in [1.0, 3.0e3, 1.0e9] {
                let bounds = CountBounds::new(&t, active, &q);
                let got = bounds.counted_with(x, 0.0, 0.0, (0.0, 0), amax, count_group_of);
                let case = format!(
                    "{} elements, amax {amax}, {k} thresholds, active {active}",
                    x.len()
                );
                assert_counts_by_definition(&got, x, &t, active, &facts, &case);
                // Some of these cases skip bounds, others count them all.
                assert_eq!(
                    got,
                    bounds.counted_with(x, 0.0, 0.0, (0.0, 0), f32::INFINITY, count_group_of),
                    "{case}"
                );
            }
        }
    }
}

#[test]
fn amax_ignores_nan_and_handles_empty() {
    assert_eq!(amax_and_nonfinite(&[]), (0.0, 0));
    assert_eq!(amax_and_nonfinite(&[f32::NAN, -2.0, 1.0]), (2.0, 1));
}
