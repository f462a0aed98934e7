#[test]
fn tier_boundaries_are_the_spec_binades() {
    // SPEC.md §2: denormals from 2^-23, then 1, 2, 3, 2, 1 mantissa bits by |e|.
    assert_eq!(
        super::tier_boundaries(),
        vec![
            (-23, super::Tier::Denormal),
            (-15, super::Tier::Mantissa(1)),
            (-7, super::Tier::Mantissa(2)),
            (-3, super::Tier::Mantissa(3)),
            (4, super::Tier::Mantissa(2)),
            (8, super::Tier::Mantissa(1)),
            (15, super::Tier::Overflow),
        ]
    );
    assert!((super::overflow_log2() - 40960f64.log2()).abs() < 1e-12);
}

use super::*;

#[test]
fn spec_landmarks() {
    assert_eq!(decode(0x00).to_bits(), 0.0f32.to_bits());
    assert!(decode(0x80).is_nan());
    assert_eq!(decode(POS_INF_CODE), f32::INFINITY);
    assert_eq!(decode(NEG_INF_CODE), f32::NEG_INFINITY);
    assert_eq!(decode(0x6E), MAX_FINITE);
    assert_eq!(decode(0x7E), MIN_NORMAL);
    assert_eq!(decode(0x01), MIN_DENORMAL);
    assert_eq!(decode(0x2F), TOP_OF_3BIT_TIER);
    assert_eq!(decode(0x4F), TOP_OF_2BIT_TIER);
    assert_eq!(decode(0x08), 1.0);
}

#[test]
fn value_set_has_126_positive_finite_nonzero_values() {
    let mut values: Vec<u32> = (0u8..=0x7F)
        .map(decode)
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(f32::to_bits)
        .collect();
    values.sort_unstable();
    values.dedup();
    assert_eq!(values.len(), 126);
}

/// The AVX2 slice codec equals the scalar one lane for lane (and in the tail) on the
/// same sweep of bit patterns, at several scales, both overflow modes.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
#[test]
fn avx2_slice_qdq_equals_the_scalar_codec() {
    slice_qdq_equals_the_scalar_codec(qdq_scaled_into);
}

/// The AVX-512 slice codec likewise (16 lanes: offsets into every lane and the tail).
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
#[test]
fn avx512_slice_qdq_equals_the_scalar_codec() {
    slice_qdq_equals_the_scalar_codec(qdq_scaled_into_avx512);
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
fn slice_qdq_equals_the_scalar_codec(codec: fn(&[f32], &mut [f32], f32, u32)) {
    let mut xs: Vec<f32> = (0..=u32::MAX).step_by(257).map(f32::from_bits).collect();
    for exponent in 0u32..=255 {
        for top in 0u32..16 {
            for low in [
                0u32, 1, 0x3FFFF, 0x40000, 0x40001, 0x7FFFF, 0xFFFFF, 0x1FFFFF,
            ] {
                let m = ((top << 19) | low) & 0x7F_FFFF;
                xs.push(f32::from_bits(exponent << 23 | m));
                xs.push(f32::from_bits(
                    SIGN_BIT | exponent << 23 | m.wrapping_sub(1) & 0x7F_FFFF,
                ));
            }
        }
    }
    xs.extend([
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        0.0,
        -0.0,
        40960.0,
        40959.996,
    ]);
    let mut out = vec![0.0f32; xs.len()];
    for o in [Overflow::Inf, Overflow::Saturate] {
        let ob = overflow_magnitude_bits(o);
        for scale in [1.0f32, 3.0, 0.37, 1.0e-3, 7.5e4, 2.0f32.powi(-20)] {
            // Offsets: every element in every lane and in the scalar tail.
            for skip in [0, 3, 7, 12] {
                let (src, dst) = (&xs[skip..], &mut out[skip..]);
                codec(src, dst, scale, ob);
                for (x, q) in src.iter().zip(dst.iter()) {
                    let want = qdq_branchless(*x * scale, ob) / scale;
                    assert_eq!(
                        q.to_bits(),
                        want.to_bits(),
                        "x = {x:e} ({:#010x}) scale {scale} {o:?}",
                        x.to_bits()
                    );
                }
            }
        }
    }
}

/// The branch-free codec equals the reference on a sweep of every bit pattern (a
/// stride prime to every field) and on every pattern near each rounding boundary and
/// special range, both overflow modes.
#[test]
fn branchless_qdq_equals_qdq() {
    let check = |bits: u32| {
        let x = f32::from_bits(bits);
        for o in [Overflow::Inf, Overflow::Saturate] {
            let (r, f) = (qdq(x, o), qdq_branchless(x, overflow_magnitude_bits(o)));
            assert_eq!(r.to_bits(), f.to_bits(), "x = {x:e} ({bits:#010x}) {o:?}");
        }
    };
    for bits in (0..=u32::MAX).step_by(257) {
        check(bits);
    }
    for exponent in 0u32..=255 {
        for sign in [0, SIGN_BIT] {
            for top in 0u32..16 {
                for low in [0u32, 1, 2, 0x3FFFF, 0x40000, 0x40001, 0x7FFFF] {
                    for shift in [0u32, 1, 2, 3] {
                        let m = ((top << 19) | low << shift) & 0x7F_FFFF;
                        check(sign | exponent << 23 | m);
                        check(sign | exponent << 23 | (m.wrapping_sub(1) & 0x7F_FFFF));
                    }
                }
            }
        }
    }
}

#[test]
fn rounding_edges() {
    let inf = Overflow::Inf;
    assert_eq!(qdq(40959.996, inf), MAX_FINITE);
    assert_eq!(qdq(40960.0, inf), f32::INFINITY);
    assert_eq!(qdq(-40960.0, Overflow::Saturate), -MAX_FINITE);
    assert_eq!(qdq(f32::NEG_INFINITY, Overflow::Saturate), -MAX_FINITE);
    assert_eq!(qdq(exp2i(-23), inf), MIN_DENORMAL);
    assert_eq!(qdq(f32::from_bits(0x33FF_FFFF), inf).to_bits(), 0);
    assert_eq!(qdq(-1e-30, inf).to_bits(), 0, "no negative zero");
    assert_eq!(qdq(1.0625, inf), 1.125, "tie rounds away");
    assert_eq!(qdq(-1.0625, inf), -1.125, "tie rounds away");
    assert_eq!(qdq(15.5, inf), 16.0, "carry into the next binade");
    assert_eq!(qdq(36864.0, inf), MAX_FINITE);
}

#[test]
fn hybrid_is_ties_away_in_the_3bit_tier_and_unbiased_above() {
    for r in [0u32, 1, u32::MAX / 2, u32::MAX] {
        assert_eq!(qdq_hybrid(1.0625, Overflow::Inf, r), 1.125);
    }
    // 2 mantissa bits at e=4 step by 4: 18 lies halfway between 16 and 20, 17 a quarter.
    let n = 4096u32;
    let ups = |x: f32| {
        (0..n)
            .map(|i| qdq_hybrid(x, Overflow::Inf, crate::hash_u32(7, i)))
            .filter(|v| *v == 20.0)
            .count()
    };
    assert!((1900..2200).contains(&ups(18.0)), "ups = {}", ups(18.0));
    assert!((900..1150).contains(&ups(17.0)), "ups = {}", ups(17.0));
    assert_eq!(qdq_hybrid(18.0, Overflow::Inf, 0), 16.0);
    assert_eq!(qdq_hybrid(18.0, Overflow::Inf, u32::MAX), 20.0);
    assert_eq!(
        qdq_hybrid(20.0, Overflow::Inf, u32::MAX),
        20.0,
        "exact stays"
    );
    assert_eq!(qdq_hybrid(40000.0, Overflow::Inf, u32::MAX), f32::INFINITY);
    assert_eq!(qdq_hybrid(40000.0, Overflow::Saturate, 0), MAX_FINITE);
}

#[test]
fn tiers() {
    assert_eq!(tier(15.0), Tier::Mantissa(3));
    assert_eq!(tier(16.0), Tier::Mantissa(2));
    assert_eq!(tier(224.0), Tier::Mantissa(2));
    assert_eq!(tier(256.0), Tier::Mantissa(1));
    assert_eq!(tier(40960.0), Tier::Overflow);
    assert_eq!(tier(1e-5), Tier::Denormal);
    assert_eq!(tier(1e-9), Tier::Underflow);
    assert_eq!(tier(f32::NAN), Tier::NaN);
}
