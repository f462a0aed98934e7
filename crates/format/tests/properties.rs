//! Property tests of the codecs: exhaustive code round trips, and qdq idempotent,
//! monotone and odd-symmetric on arbitrary f32 inputs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use hif8lab_format::{FakeQuant, Format, Overflow, Rounding, hif8};
use proptest::prelude::*;

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn every_code_round_trips() {
    for format in Format::ALL {
        for code in 0..=255u8 {
            let v = format.decode(code);
            let back = format.encode(v, Overflow::Inf);
            if v.is_nan() {
                assert!(format.decode(back).is_nan(), "{format} 0x{code:02X}");
            } else {
                assert_eq!(back, code, "{format} 0x{code:02X} = {v}");
                assert!(same(format.qdq(v, Overflow::Inf), v), "{format} {v}");
            }
        }
    }
}

#[test]
fn hif8_has_one_zero_and_one_nan() {
    let zeros = (0..=255u8).filter(|c| hif8::decode(*c) == 0.0).count();
    let nans = (0..=255u8).filter(|c| hif8::decode(*c).is_nan()).count();
    assert_eq!((zeros, nans), (1, 1));
}

fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        any::<u32>().prop_map(f32::from_bits),
        // Concentrate on the formats' ranges: |x| in 2^-26 .. 2^18.
        (any::<bool>(), -26i32..18, 0u32..(1 << 23)).prop_map(|(neg, e, m)| {
            let bits = (u32::from(neg) << 31) | (((e + 127) as u32) << 23) | m;
            f32::from_bits(bits)
        }),
    ]
}

fn quantizers() -> Vec<FakeQuant> {
    let mut v = Vec::new();
    for format in Format::ALL {
        for overflow in [Overflow::Inf, Overflow::Saturate] {
            v.push(FakeQuant::new(format).with_overflow(overflow));
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 4000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn qdq_is_idempotent(x in any_f32()) {
        for q in quantizers() {
            let once = q.qdq(x, 1.0);
            prop_assert!(same(q.qdq(once, 1.0), once), "{:?} x={} once={}", q, x, once);
        }
    }

    #[test]
    fn qdq_is_monotone(a in any_f32(), b in any_f32()) {
        prop_assume!(!a.is_nan() && !b.is_nan());
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        for q in quantizers() {
            let (ql, qh) = (q.qdq(lo, 1.0), q.qdq(hi, 1.0));
            if ql.is_nan() || qh.is_nan() {
                // Only E4M3 (fn) maps overflow to NaN, which has no order.
                prop_assert!(q.format == Format::E4M3 && q.overflow == Overflow::Inf);
                continue;
            }
            prop_assert!(ql <= qh, "{:?}: q({})={} > q({})={}", q, lo, ql, hi, qh);
        }
    }

    #[test]
    fn qdq_is_odd_symmetric(x in any_f32()) {
        for q in quantizers() {
            let (p, n) = (q.qdq(x, 1.0), q.qdq(-x, 1.0));
            prop_assert!(same(n, -p) || (p == 0.0 && n == 0.0), "{:?} x={} q(x)={} q(-x)={}", q, x, p, n);
        }
    }

    #[test]
    fn scaled_qdq_lands_on_format_values(x in any_f32(), scale_exp in -20i32..20) {
        let scale = f32::from_bits(((scale_exp + 127) as u32) << 23);
        for q in quantizers() {
            let y = q.qdq(x, scale) * scale;
            let code = q.format.encode(y, q.overflow);
            prop_assert!(same(q.format.decode(code), y), "{:?} x={} scale={} y={}", q, x, scale, y);
        }
    }

    #[test]
    fn hybrid_rounds_to_a_neighbour(x in any_f32(), seed in any::<u32>()) {
        prop_assume!(x.is_finite());
        let nearest = FakeQuant::new(Format::HiF8);
        let hybrid = nearest.with_rounding(Rounding::Hybrid { seed });
        let h = hybrid.qdq(x, 1.0);
        let n = nearest.qdq(x, 1.0);
        // The result is a HiF8 value (or Inf) and never further than one step from x.
        prop_assert!(same(hif8::decode(hif8::encode(h, Overflow::Inf)), h));
        if n.is_finite() && h.is_finite() && n != h {
            prop_assert!((h - x).abs() <= 2.0 * (n - x).abs() + (h - n).abs(), "x={} h={} n={}", x, h, n);
            prop_assert!((h >= x) != (n >= x) || h == x || n == x, "x={} h={} n={}", x, h, n);
        }
    }
}
