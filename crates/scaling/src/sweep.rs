//! Which window? A sweep of delayed-scaling settings over recorded amax sequences: for each
//! setting (estimator × window, or target, or margin), how often the estimate is exceeded,
//! how often a call overflows, and how much precision the headroom costs.
//!
//! The counts of calls are exact (they need only the amax sequence). What an overflow or a
//! headroom costs in elements and in SQNR needs the tensors, which a trace does not hold: it is
//! **modelled** on a reference tensor — 4,096 standard-normal values scaled so that their
//! largest magnitude is the call's amax — quantized at the call's scale (saturating, so the
//! cost of overflow is finite). The SQNR loss of a call is the reference's SQNR at the best
//! scale for it (the largest over scaled amax values that do not overflow) minus its SQNR at
//! the scale used. The model is a shape, stated as such; it ranks settings by the scale
//! positions they produce, which is exactly what the amax sequence determines.

use hif8lab_format::{FakeQuant, Format, Overflow, hash_u32};
use serde::Serialize;

use crate::config::ScalingConfig;
use crate::estimator::EstimatorSpec;
use crate::import::AmaxSeries;
use crate::plan::ScalingPlan;
use crate::replay::median;
use crate::state::QuantizerState;

/// Elements of the reference tensor.
pub const REFERENCE_ELEMENTS: usize = 4096;
/// Table resolution: steps per binade of scaled amax.
const STEPS_PER_BINADE: f32 = 32.0;
/// Scaled amax range of the table, in binades.
const LOG2_LO: f32 = -40.0;
const LOG2_HI: f32 = 24.0;

/// One setting of a sweep, with its figures over every quantizer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepRow {
    /// The estimator (window resolved).
    pub estimator: String,
    /// History length.
    pub window: usize,
    /// Scaling target.
    pub target: f32,
    /// Margin.
    pub margin: i32,
    /// Calls replayed.
    pub calls: u64,
    /// Calls whose amax exceeded the estimate.
    pub calls_above_est: u64,
    /// Calls whose scaled amax reached the overflow threshold (at least one element
    /// overflowed).
    pub overflowing_calls: u64,
    /// Modelled: overflowed elements per million, over all calls (reference tensor).
    pub overflow_ppm_modelled: f64,
    /// Modelled: mean SQNR loss against the best scale (dB).
    pub sqnr_loss_mean_db: f64,
    /// Modelled: the worst call's SQNR loss (dB).
    pub sqnr_loss_worst_db: f64,
    /// Median estimate ÷ amax (headroom; 1 = none).
    pub median_headroom: f32,
}

/// The reference tensor's SQNR (dB) and overflowed fraction as a function of its scaled amax
/// (`log2` steps), and the best SQNR without overflow.
struct Reference {
    sqnr: Vec<f64>,
    overflow: Vec<f64>,
    best: f64,
}

impl Reference {
    /// The reference of `format`, built once per process (about 8 M quantizations).
    fn of(format: Format) -> &'static Reference {
        static TABLES: [std::sync::OnceLock<Reference>; 3] = [
            std::sync::OnceLock::new(),
            std::sync::OnceLock::new(),
            std::sync::OnceLock::new(),
        ];
        let i = match format {
            Format::HiF8 => 0,
            Format::E4M3 => 1,
            Format::E5M2 => 2,
        };
        TABLES[i].get_or_init(|| Reference::new(format))
    }

    fn new(format: Format) -> Self {
        // Standard normal values (Box–Muller on the format crate's counter hash), largest
        // magnitude 1.
        let u = |i: u32| (f64::from(hash_u32(0x5eed, i)) + 0.5) / 4_294_967_296.0;
        let mut x: Vec<f32> = (0..REFERENCE_ELEMENTS as u32)
            .map(|i| {
                let (a, b) = (u(2 * i), u(2 * i + 1));
                ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()) as f32
            })
            .collect();
        let m = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        x.iter_mut().for_each(|v| *v /= m);
        let q = FakeQuant::new(format).with_overflow(Overflow::Saturate);
        let threshold = format.facts().overflow_threshold;
        let signal: f64 = x.iter().map(|v| f64::from(*v).powi(2)).sum();
        let steps = ((LOG2_HI - LOG2_LO) * STEPS_PER_BINADE) as usize + 1;
        let (mut sqnr, mut overflow) = (Vec::with_capacity(steps), Vec::with_capacity(steps));
        let mut best = f64::NEG_INFINITY;
        for s in 0..steps {
            let a = (LOG2_LO + s as f32 / STEPS_PER_BINADE).exp2();
            let noise: f64 = x.iter().map(|v| f64::from(v - q.qdq(*v, a)).powi(2)).sum();
            let db = if noise > 0.0 {
                10.0 * (signal / noise).log10()
            } else {
                f64::INFINITY
            };
            let over = x.iter().filter(|v| v.abs() * a >= threshold).count();
            if over == 0 && db.is_finite() {
                best = best.max(db);
            }
            sqnr.push(db);
            overflow.push(over as f64 / REFERENCE_ELEMENTS as f64);
        }
        Reference {
            sqnr,
            overflow,
            best,
        }
    }

    /// The table entry of scaled amax `a` (nearest step; clamped to the range).
    fn at(&self, a: f32) -> usize {
        let l = if a > 0.0 { a.log2() } else { LOG2_LO };
        let s = ((l.clamp(LOG2_LO, LOG2_HI) - LOG2_LO) * STEPS_PER_BINADE).round() as usize;
        s.min(self.sqnr.len() - 1)
    }
}

/// The windows a sweep shows by default: 1 (most_recent's memory) to 1024.
pub const DEFAULT_WINDOWS: [usize; 6] = [1, 4, 16, 64, 256, 1024];

/// max_window and mean_window at each of `windows`, the rest of each setting from `base`.
/// A setting is a [`ScalingConfig`] whose one estimator is swept; plan each to sweep it.
pub fn window_settings(windows: &[usize], base: &ScalingConfig) -> Vec<ScalingConfig> {
    [
        EstimatorSpec::MaxWindow(None),
        EstimatorSpec::MeanWindow(None),
    ]
    .iter()
    .flat_map(|e| {
        windows.iter().map(move |w| ScalingConfig {
            window: *w,
            ..base.clone().comparing(&[*e])
        })
    })
    .collect()
}

/// Sweeps each plan's active estimator over `series` (its format, target, margin and cold
/// start as planned).
pub fn sweep(series: &[AmaxSeries], settings: &[ScalingPlan]) -> Vec<SweepRow> {
    settings
        .iter()
        .map(|plan| {
            let reference = Reference::of(plan.format());
            let threshold = plan.format().facts().overflow_threshold;
            let active = plan.active_index();
            let (mut calls, mut above, mut overflowing) = (0u64, 0u64, 0u64);
            let (mut loss_sum, mut worst, mut over_sum) = (0.0f64, 0.0f64, 0.0f64);
            let mut headroom = Vec::new();
            for q in series {
                let mut state = QuantizerState::new(plan);
                for &amax in q.amax.iter().filter(|a| a.is_finite() && **a >= 0.0) {
                    let d = state.call(amax)[active];
                    calls += 1;
                    above += u64::from(amax > d.est);
                    let scaled = amax * d.scale;
                    overflowing += u64::from(scaled >= threshold);
                    if amax > 0.0 {
                        headroom.push(d.est / amax);
                        let i = reference.at(scaled);
                        let loss = (reference.best - reference.sqnr[i]).max(0.0);
                        loss_sum += loss;
                        worst = worst.max(loss);
                        over_sum += reference.overflow[i];
                    }
                }
            }
            let n = calls.max(1) as f64;
            SweepRow {
                estimator: plan.active().to_string(),
                window: plan.window(),
                target: plan.rule().target,
                margin: plan.rule().margin,
                calls,
                calls_above_est: above,
                overflowing_calls: overflowing,
                overflow_ppm_modelled: over_sum / n * 1e6,
                sqnr_loss_mean_db: loss_sum / n,
                sqnr_loss_worst_db: worst,
                median_headroom: median(&headroom),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spiky(n: usize, factor: f32) -> AmaxSeries {
        let mut s = AmaxSeries::new("q".into());
        for i in 0..n {
            s.steps.push(i as u64);
            // A slow oscillation with a spike every 50 calls.
            let base = 1.0 + 0.2 * ((i as f32) * 0.3).sin();
            s.amax.push(if i % 50 == 49 { base * factor } else { base });
        }
        s
    }

    fn max_window(windows: &[usize], target: f32) -> Vec<ScalingPlan> {
        windows
            .iter()
            .map(|w| {
                ScalingConfig {
                    window: *w,
                    target,
                    ..ScalingConfig::default().comparing(&[EstimatorSpec::MaxWindow(None)])
                }
                .plan()
                .expect("plan")
            })
            .collect()
    }

    #[test]
    fn a_longer_window_trades_headroom_for_fewer_exceedances() {
        let rows = sweep(&[spiky(1000, 8.0)], &max_window(&[1, 4, 64], 15.0));
        assert_eq!(rows[0].estimator, "max_window(1)");
        assert!(rows.iter().all(|r| r.calls == 1000));
        // Exceedances fall with the window; headroom rises.
        assert!(rows[0].calls_above_est > rows[1].calls_above_est);
        assert!(rows[1].calls_above_est > rows[2].calls_above_est);
        assert!(rows[2].median_headroom > 7.0 && rows[0].median_headroom < 1.1);
        // HiF8's tapered precision: 8× of headroom costs well under 1 dB on average.
        assert!(rows[2].sqnr_loss_mean_db < 1.0, "{:?}", rows[2]);
        // A spike of 2^12 held for 64 calls pushes the ordinary calls into the tapered
        // binades: there the long window costs more than the short one.
        let rows = sweep(&[spiky(1000, 4096.0)], &max_window(&[1, 64], 15.0));
        assert!(
            rows[1].sqnr_loss_mean_db > rows[0].sqnr_loss_mean_db + 1.0,
            "{rows:?}"
        );
    }

    #[test]
    fn overflow_is_counted_where_the_target_leaves_no_room() {
        // A target of 20,000 leaves 2× before HiF8 overflows (40,960): an 8× spike overflows
        // under a window of 1, never once the window holds the previous spike.
        let rows = sweep(&[spiky(1000, 8.0)], &max_window(&[1, 64], 20_000.0));
        assert_eq!(rows[0].overflowing_calls, 20);
        assert!(rows[0].overflow_ppm_modelled > 0.0);
        assert_eq!(
            rows[1].overflowing_calls, 1,
            "only the first spike: {rows:?}"
        );
    }

    #[test]
    fn the_reference_peaks_without_overflow() {
        let r = Reference::new(Format::HiF8);
        assert!(r.best > 20.0 && r.best < 60.0, "{}", r.best);
        // Far past the overflow threshold elements clip; far below, they underflow.
        assert!(r.overflow[r.at(1e6)] > 0.0);
        assert_eq!(r.overflow[r.at(15.0)], 0.0);
        assert!(r.sqnr[r.at(1e-9)] < r.best - 10.0);
    }
}
