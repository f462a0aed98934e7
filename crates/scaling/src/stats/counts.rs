//! The counts of a call (above each estimate, overflowing at each scale, underflowing):
//! each is of the elements whose |x| reaches a bound, found once per call by bisection.

use hif8lab_format::FakeQuant;

use super::{TensorStats, Threshold};

/// The magnitudes at which each count of a call starts (every count is of the elements
/// whose |x| reaches one of them): found once per call by bisection, since they depend on
/// the thresholds, the active scale and the format only.
#[derive(Clone, Debug, PartialEq)]
pub struct CountBounds {
    /// Above each estimate, then overflowing at each scale, then the two ends of the
    /// underflow range.
    bounds: Vec<f32>,
    /// Thresholds (estimators).
    k: usize,
}

impl CountBounds {
    /// The bounds of a call with these thresholds at this active scale: above the estimate
    /// (|v| > est), overflowing (|v·scale| ≥ limit), and the underflow range [smallest
    /// subnormal, first magnitude that does not underflow).
    pub fn new(thresholds: &[Threshold], active_scale: f32, quant: &FakeQuant) -> Self {
        let facts = quant.format.facts();
        let limit = facts.overflow_threshold;
        // qdq(v·s) == 0 exactly when |v·s| ≤ underflow_max (checked against the codec in the
        // format crate's tests); the comparison is much cheaper than the codec.
        let underflow_max = facts.underflow_max;
        // Each predicate depends on |v| alone and is monotone in it.
        let mut bounds: Vec<f32> = thresholds
            .iter()
            .map(|t| least_magnitude(|m| m > t.est))
            .chain(
                thresholds
                    .iter()
                    .map(|t| least_magnitude(|m| (m * t.scale).abs() >= limit)),
            )
            .collect();
        let nonzero = f32::from_bits(1);
        let underflows = |m: f32| (m * active_scale).abs() <= underflow_max;
        let kept = least_magnitude(|m| !underflows(m));
        bounds.push(nonzero);
        // An empty range when even the smallest magnitude is kept; NaN (counting nothing)
        // when none is.
        bounds.push(if kept.to_bits() <= 1 { nonzero } else { kept });
        CountBounds {
            bounds,
            k: thresholds.len(),
        }
    }

    /// Every count of `x`, with its error energies, amax and non-finite count already
    /// measured; bounds above `reach` (or NaN) count nothing without a pass. `counter` counts
    /// a block ([`count_group_of`] here, a SIMD one on the CPU backend; the counts do not
    /// depend on it).
    pub fn counted_with(
        &self,
        x: &[f32],
        signal: f64,
        noise: f64,
        measured: (f32, u64),
        reach: f32,
        counter: GroupCounter,
    ) -> TensorStats {
        let counts = count_at_least(x, &self.bounds, reach, counter);
        self.with_counts(x.len(), counts, signal, noise, measured)
    }

    /// The bounds: above each estimate, then overflowing at each scale, then the two ends
    /// of the underflow range.
    pub fn bounds(&self) -> &[f32] {
        &self.bounds
    }

    /// The statistics from each bound's count (one per [`Self::bounds`]).
    pub fn with_counts(
        &self,
        numel: usize,
        counts: Vec<u64>,
        signal: f64,
        noise: f64,
        (amax, nonfinite): (f32, u64),
    ) -> TensorStats {
        let k = self.k;
        TensorStats {
            numel: numel as u64,
            amax,
            nonfinite,
            above_est: counts[..k].to_vec(),
            overflow: counts[k..2 * k].to_vec(),
            underflow: counts[2 * k] - counts[2 * k + 1],
            signal,
            noise,
        }
    }
}

/// The least magnitude m in [0, +Inf] (by bits) for which `pred(m)` holds, for a `pred`
/// that is false then true as m grows (each count of [`CountBounds::counted_with`] is of such a predicate of
/// |x|: rounding is monotone); NaN when it holds for none. 31 evaluations.
fn least_magnitude(pred: impl Fn(f32) -> bool) -> f32 {
    let (mut lo, mut hi) = (0u32, 0x7F80_0001u32);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(f32::from_bits(mid)) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    f32::from_bits(lo)
}

/// For each bound: the elements with |x| ≥ bound (NaN elements never count; a NaN bound
/// counts nothing), up to [`GROUP`] bounds per pass, per block of 2^20 elements. Bounds
/// above `reach` (every non-NaN |x| is at most `reach`) and NaN bounds count 0 without a
/// pass.
fn count_at_least(x: &[f32], bounds: &[f32], reach: f32, counter: GroupCounter) -> Vec<u64> {
    let mut total = vec![0u64; bounds.len()];
    let live = live_bounds(bounds, reach);
    // Passes of equal size (12 bounds: 6 + 6, not 8 + 4).
    let size = live
        .len()
        .div_ceil(live.len().div_ceil(GROUP).max(1))
        .max(1);
    for big in x.chunks(1 << 20) {
        for group in live.chunks(size) {
            let b: Vec<f32> = group.iter().map(|i| bounds[*i]).collect();
            let counts = counter(big, &b);
            for (i, c) in group.iter().zip(counts) {
                total[*i] += c;
            }
        }
    }
    total
}

/// The indices of the bounds that need a pass: at most `reach` (every non-NaN |x| is at
/// most `reach`, so a bound above it counts zero; a NaN bound counts nothing).
pub fn live_bounds(bounds: &[f32], reach: f32) -> Vec<usize> {
    (0..bounds.len()).filter(|i| bounds[*i] <= reach).collect()
}

/// Bounds counted per pass over the elements, at most.
pub const GROUP: usize = 8;

/// Counts, for 0 to [`GROUP`] bounds, the elements of a block (at most 2^20) with |x| ≥
/// each bound (NaN elements and NaN bounds never count).
pub type GroupCounter = fn(&[f32], &[f32]) -> Vec<u64>;

/// Counts one block for a fixed number of bounds (a plain loop, or SIMD registers).
pub trait CountN {
    /// The elements of `x` (at most 2^20) with |x| ≥ each of the `N` bounds.
    fn count<const N: usize>(x: &[f32], bounds: &[f32; N]) -> [u64; N];
}

/// The plain [`CountN`]: [`count_group`].
pub struct Plain;

impl CountN for Plain {
    fn count<const N: usize>(x: &[f32], bounds: &[f32; N]) -> [u64; N] {
        count_group(x, bounds)
    }
}

/// A [`GroupCounter`] from a [`CountN`]: 0 to [`GROUP`] bounds, a pass with exactly as many
/// compares.
pub fn count_group_with<C: CountN>(x: &[f32], bounds: &[f32]) -> Vec<u64> {
    fn n<C: CountN, const N: usize>(x: &[f32], bounds: &[f32]) -> Vec<u64> {
        let b: [f32; N] = std::array::from_fn(|i| bounds[i]);
        C::count(x, &b).to_vec()
    }
    match bounds.len() {
        0 => Vec::new(),
        1 => n::<C, 1>(x, bounds),
        2 => n::<C, 2>(x, bounds),
        3 => n::<C, 3>(x, bounds),
        4 => n::<C, 4>(x, bounds),
        5 => n::<C, 5>(x, bounds),
        6 => n::<C, 6>(x, bounds),
        7 => n::<C, 7>(x, bounds),
        _ => n::<C, GROUP>(x, bounds),
    }
}

/// The plain [`GroupCounter`].
pub fn count_group_of(x: &[f32], bounds: &[f32]) -> Vec<u64> {
    count_group_with::<Plain>(x, bounds)
}

/// The elements of one block (at most 2^20) with |x| ≥ each of `N` bounds, element by
/// element (32-bit counts: a block cannot wrap them).
pub fn count_group<const N: usize>(x: &[f32], bounds: &[f32; N]) -> [u64; N] {
    let mut counts = [0u32; N];
    for v in x {
        let m = v.abs();
        for (c, b) in counts.iter_mut().zip(bounds) {
            *c += u32::from(m >= *b);
        }
    }
    counts.map(u64::from)
}

/// Every count of a call, with its error energies, amax and non-finite count already
/// measured (every bound counted by a pass).
pub(super) fn counted(
    x: &[f32],
    thresholds: &[Threshold],
    active_scale: f32,
    quant: &FakeQuant,
    signal: f64,
    noise: f64,
    measured: (f32, u64),
) -> TensorStats {
    CountBounds::new(thresholds, active_scale, quant).counted_with(
        x,
        signal,
        noise,
        measured,
        f32::INFINITY,
        count_group_of,
    )
}
