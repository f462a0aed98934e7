//! e^x for the CPU backend's loops (softmax, sigmoid, cross-entropy): branch-free, so the
//! loops that call it vectorize (libm's `expf` is a call per element, which they cannot).
//! Every CPU path, the fast loops and their readable references alike, uses this one
//! function, so they stay equal bit for bit; against the exact e^x it is within 2 ulp
//! (tested), like the GPU's `exp`. Likewise the order of the attention softmax's sums
//! ([`lane_sum`], [`lane_dot`]): one order that vectorizes, for both.

/// e^x: Cody–Waite reduction x = k·ln 2 + r, |r| ≤ ln 2 / 2, Cephes' degree-7 polynomial
/// for e^r (relative error about 1.7·10⁻⁷), scaled by 2^k in two halves so subnormal
/// results come out right. NaN gives NaN, above 88.72283 +∞, below −104 (where e^x rounds
/// to 0 in f32) 0.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5·2^23: adding it rounds to an integer
    const LN2_HI: f32 = 0.693_359_4; // ln 2 in few bits (k·LN2_HI is exact)
    const LN2_LO: f32 = -2.121_944_4e-4; // ln 2 − LN2_HI
    const MAX: f32 = 88.722_83; // above: e^x overflows f32
    const MIN: f32 = -104.0; // below: e^x < 2^-150, rounds to 0
    let c = x.clamp(MIN, MAX);
    let shifted = c * std::f32::consts::LOG2_E + MAGIC;
    // The integer k sits in the low mantissa bits of `shifted` (|k| < 2^22).
    let k = (shifted.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let kf = shifted - MAGIC;
    let r = c - kf * LN2_HI - kf * LN2_LO;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5; // Cephes: 5.0000001201e-1, which rounds to 0.5 in f32
    let er = p * (r * r) + r + 1.0;
    // 2^k as 2^(k/2)·2^(k − k/2): each half is a normal float for k in [−150, 128].
    let half = k >> 1;
    let pow2 = |e: i32| f32::from_bits((e.wrapping_add(127) as u32) << 23);
    let y = er * pow2(half) * pow2(k.wrapping_sub(half));
    if x > MAX {
        f32::INFINITY
    } else if x < MIN {
        0.0
    } else {
        y
    }
}

/// Lanes of [`lane_sum`]'s order.
const SUM_LANES: usize = 8;

/// Σ x in the CPU backend's order for the attention softmax's sums: 8 lane sums (lane `l`
/// adds the elements at `l`, `l + 8`, `l + 16`, … in ascending order, from 0.0), then the
/// lanes pairwise, ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). A sum in element order
/// waits for each add in turn (one element per add latency); this one is 8 independent sums,
/// one vector add per 8 elements. The readable references use it too, so they stay equal bit
/// for bit (tested against the definition written as plain loops).
#[inline]
pub(crate) fn lane_sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; SUM_LANES];
    let mut chunks = x.chunks_exact(SUM_LANES);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    for (a, v) in acc.iter_mut().zip(chunks.remainder()) {
        *a += v;
    }
    combine_lanes(acc)
}

/// Σ a_i·b_i over the shorter length, each product rounded, summed in [`lane_sum`]'s order.
#[inline]
pub(crate) fn lane_dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; SUM_LANES];
    let (mut ca, mut cb) = (a.chunks_exact(SUM_LANES), b.chunks_exact(SUM_LANES));
    for (x, y) in (&mut ca).zip(&mut cb) {
        for ((s, x), y) in acc.iter_mut().zip(x).zip(y) {
            *s += x * y;
        }
    }
    for ((s, x), y) in acc.iter_mut().zip(ca.remainder()).zip(cb.remainder()) {
        *s += x * y;
    }
    combine_lanes(acc)
}

#[inline(always)]
fn combine_lanes(l: [f32; SUM_LANES]) -> f32 {
    ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

/// max over `x` of the non-NaN elements (−∞ when there are none), as a left fold of
/// `f32::max` from −∞ gives it, in 8 lanes (max is exact, so the order does not change the
/// value; of +0 and −0 either may come out, which no caller can tell apart: they only
/// subtract it before e^x).
#[inline]
pub(crate) fn lane_max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; SUM_LANES];
    let mut chunks = x.chunks_exact(SUM_LANES);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a = a.max(*v);
        }
    }
    for (a, v) in acc.iter_mut().zip(chunks.remainder()) {
        *a = a.max(*v);
    }
    acc.into_iter().fold(f32::NEG_INFINITY, f32::max)
}

#[cfg(test)]
mod tests {
    use super::{exp, lane_dot, lane_max, lane_sum};

    /// [`lane_sum`]'s order written out: element i goes to lane i mod 8.
    fn lane_sum_by_definition(x: &[f32]) -> f32 {
        let mut lanes = [0.0f32; 8];
        for (i, v) in x.iter().enumerate() {
            lanes[i % 8] += v;
        }
        ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
            + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
    }

    #[test]
    fn lane_sums_follow_their_definition() {
        let v = crate::cpu::test_data::values(300, 11, 1e4);
        let w = crate::cpu::test_data::values(300, 12, 1e-3);
        for n in (0..=40).chain([127, 128, 129, 300]) {
            let x = &v[..n];
            assert_eq!(
                lane_sum(x).to_bits(),
                lane_sum_by_definition(x).to_bits(),
                "n {n}"
            );
            let prods: Vec<f32> = x.iter().zip(&w).map(|(a, b)| a * b).collect();
            assert_eq!(
                lane_dot(x, &w[..n]).to_bits(),
                lane_sum_by_definition(&prods).to_bits(),
                "dot n {n}"
            );
            let seq = x.iter().fold(f32::NEG_INFINITY, |m, v| m.max(*v));
            assert_eq!(lane_max(x).to_bits(), seq.to_bits(), "max n {n}");
        }
        // The order is not the element order: the two differ on this sum.
        let x = [1.0f32, 1e8, 1.0, -1e8, 1.0, 0.0, 0.0, 0.0, 1.0];
        assert_eq!(lane_sum(&x), lane_sum_by_definition(&x));
        assert_ne!(lane_sum(&x), x.iter().fold(0.0f32, |s, v| s + v));
        // Specials: NaN ignored by the max, propagated by the sums; infinities.
        let sp = [1.0, f32::NAN, -3.0, f32::INFINITY, 2.0];
        assert_eq!(lane_max(&sp), f32::INFINITY);
        assert_eq!(lane_max(&[f32::NAN, -2.0]), -2.0);
        assert_eq!(lane_max(&[f32::NAN]), f32::NEG_INFINITY);
        assert_eq!(lane_max(&[]), f32::NEG_INFINITY);
        assert!(lane_sum(&sp).is_nan());
        assert_eq!(lane_sum(&[]).to_bits(), 0.0f32.to_bits());
    }

    /// Distance in units in the last place between `got` and the f64 result rounded to f32.
    fn ulps(got: f32, x: f32) -> u32 {
        let want = (f64::from(x)).exp() as f32;
        (got.to_bits() as i64 - want.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn exp_is_within_two_ulp_everywhere() {
        // Every 37th f32 bit pattern of [−104, 88.72] (both signs), plus the ends.
        let mut worst = (0, 0.0f32);
        let mut checked = 0u64;
        for bits in (0u32..0x8000_0000).step_by(37) {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                if !(-104.0..=88.72283).contains(&x) {
                    continue;
                }
                let u = ulps(exp(x), x);
                checked += 1;
                if u > worst.0 {
                    worst = (u, x);
                }
            }
        }
        assert!(checked > 20_000_000, "{checked}");
        assert!(worst.0 <= 2, "worst {} ulp at x = {:e}", worst.0, worst.1);
    }

    #[test]
    fn exp_special_values() {
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert_eq!(exp(-105.0), 0.0);
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(1.0), std::f32::consts::E);
        // Subnormal results: e^−100 ≈ 3.72·10⁻⁴⁴.
        let tiny = exp(-100.0);
        assert!(tiny > 0.0 && !tiny.is_normal());
        assert!(ulps(tiny, -100.0) <= 1);
    }
}
