//! The log2 histogram of a tensor's scaled magnitudes, a quarter binade per bin.

/// Lowest binade of the [`Log2Histogram`]: bins start at |x·scale| = 2^`HIST_LO`.
pub const HIST_LO: i32 = -24;
/// One past the highest binade: bins end at 2^`HIST_HI`.
pub const HIST_HI: i32 = 18;
/// Bins per binade (quarter binades).
pub const HIST_PER_BINADE: usize = 4;
/// Bins of the histogram: `(HIST_HI - HIST_LO) · HIST_PER_BINADE`.
pub const HIST_BINS: usize = (HIST_HI - HIST_LO) as usize * HIST_PER_BINADE;

/// The f32 mantissa fields (23 bits) at or above which a value lies in the 2nd, 3rd and
/// 4th quarter of its binade: the smallest `m` with `1 + m/2^23 ≥ 2^(j/4)`, j = 1, 2, 3.
/// The GPU kernel receives these, so both sides bin by integer comparisons only.
pub fn quarter_thresholds() -> [u32; 3] {
    [1, 2, 3].map(|j: i32| {
        let t = (2f64.powf(f64::from(j) / 4.0) - 1.0) * f64::from(1u32 << 23);
        t.ceil() as u32
    })
}

/// Distribution of log2|x·scale| over one tensor, in quarter binades (SPEC.md §3, optional
/// statistic), with the values outside the binned range counted apart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Log2Histogram {
    /// Elements with x·scale = ±0.
    pub zeros: u64,
    /// Non-zero elements with |x·scale| < 2^`HIST_LO`.
    pub below: u64,
    /// Finite elements with |x·scale| ≥ 2^`HIST_HI`.
    pub above: u64,
    /// Elements whose x·scale is NaN or ±Inf.
    pub nonfinite: u64,
    /// `HIST_BINS` counts; bin `i` holds 2^(HIST_LO + i/4) ≤ |x·scale| < 2^(HIST_LO + (i+1)/4).
    pub bins: Vec<u64>,
}

/// Where one product `p = x·scale` falls in a [`Log2Histogram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistSlot {
    /// ±0.
    Zero,
    /// Below the binned range.
    Below,
    /// Above the binned range.
    Above,
    /// NaN or ±Inf.
    NonFinite,
    /// A bin.
    Bin(usize),
}

/// The slot of `p` (the reference for `shaders/histogram.wgsl`).
pub fn hist_slot(p: f32, quarters: &[u32; 3]) -> HistSlot {
    let a = p.to_bits() & 0x7fff_ffff;
    if a >= 0x7f80_0000 {
        return HistSlot::NonFinite;
    }
    if a == 0 {
        return HistSlot::Zero;
    }
    let e = (a >> 23) as i32 - 127;
    if e < HIST_LO {
        return HistSlot::Below;
    }
    if e >= HIST_HI {
        return HistSlot::Above;
    }
    let m = a & 0x007f_ffff;
    let quarter = quarters.iter().filter(|t| m >= **t).count();
    HistSlot::Bin((e - HIST_LO) as usize * HIST_PER_BINADE + quarter)
}

impl Log2Histogram {
    /// The histogram of `x` at `scale` (products rounded to f32, as on the GPU).
    pub fn of(x: &[f32], scale: f32) -> Self {
        let quarters = quarter_thresholds();
        let mut h = Log2Histogram {
            bins: vec![0; HIST_BINS],
            ..Default::default()
        };
        for v in x {
            match hist_slot(v * scale, &quarters) {
                HistSlot::Zero => h.zeros += 1,
                HistSlot::Below => h.below += 1,
                HistSlot::Above => h.above += 1,
                HistSlot::NonFinite => h.nonfinite += 1,
                HistSlot::Bin(i) => h.bins[i] += 1,
            }
        }
        h
    }

    /// log2 of bin `i`'s lower edge.
    pub fn lower_log2(i: usize) -> f64 {
        f64::from(HIST_LO) + i as f64 / HIST_PER_BINADE as f64
    }

    /// Every element counted.
    pub fn total(&self) -> u64 {
        self.zeros + self.below + self.above + self.nonfinite + self.bins.iter().sum::<u64>()
    }
}

#[cfg(test)]
mod hist_tests {
    use super::*;

    #[test]
    fn slots_match_f64_log2() {
        let q = quarter_thresholds();
        let mut rng = 0x1234_5678u32;
        for _ in 0..200_000 {
            rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let v = f32::from_bits(rng & 0x7fff_ffff);
            if !v.is_finite() || v == 0.0 {
                continue;
            }
            let l = f64::from(v).log2();
            let want = if l < f64::from(HIST_LO) {
                HistSlot::Below
            } else if l >= f64::from(HIST_HI) {
                HistSlot::Above
            } else {
                HistSlot::Bin(((l - f64::from(HIST_LO)) * 4.0).floor() as usize)
            };
            assert_eq!(hist_slot(v, &q), want, "{v:e} (log2 {l})");
            assert_eq!(hist_slot(-v, &q), want);
        }
        assert_eq!(hist_slot(0.0, &q), HistSlot::Zero);
        assert_eq!(hist_slot(-0.0, &q), HistSlot::Zero);
        assert_eq!(hist_slot(f32::NAN, &q), HistSlot::NonFinite);
        assert_eq!(hist_slot(f32::NEG_INFINITY, &q), HistSlot::NonFinite);
        // Exact powers of two open a binade's first bin.
        assert_eq!(hist_slot(1.0, &q), HistSlot::Bin((-HIST_LO) as usize * 4));
        assert_eq!(
            hist_slot(15.0, &q),
            HistSlot::Bin((3 - HIST_LO) as usize * 4 + 3)
        );
    }

    #[test]
    fn histogram_counts_every_element() {
        let x = [0.0, 1.0, -1.5, 3.0e-9, f32::INFINITY, 1.0e9, 40960.0];
        let h = Log2Histogram::of(&x, 1.0);
        assert_eq!(h.total(), x.len() as u64);
        assert_eq!((h.zeros, h.below, h.above, h.nonfinite), (1, 1, 1, 1));
        assert_eq!(h.bins.iter().sum::<u64>(), 3);
    }
}
