//! Offline replay: every estimator recomputed over recorded amax sequences (no tensors
//! needed), with the same semantics as training ([`crate::QuantizerState`]).

use std::collections::BTreeMap;

use hif8lab_format::{Format, hif8};
use serde::{Deserialize, Serialize};

use crate::config::ScalingConfig;
use crate::estimator::EstimatorSpec;
use crate::import::AmaxSeries;
use crate::plan::ScalingPlan;
use crate::state::QuantizerState;
use crate::trace::json_f32;

impl ScalingConfig {
    /// This config comparing `estimators` (in their order; the first is the active one, which
    /// a replay does not distinguish): what `replay`, `--sweep` and the app's Estimators
    /// panel plan a replay with. An empty list keeps the config's own estimators.
    pub fn comparing(mut self, estimators: &[EstimatorSpec]) -> ScalingConfig {
        if let Some(first) = estimators.first() {
            self.estimator = *first;
            self.shadow = estimators.to_vec();
        }
        self
    }
}

/// One estimator's figures on one quantizer (or in total).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EstimatorReplay {
    /// Calls replayed.
    pub calls: u64,
    /// Calls whose amax exceeded the estimate in effect.
    pub calls_above_est: u64,
    /// Worst amax / est over the calls (1 or less means never exceeded; Inf when an amax
    /// exceeded an estimate of 0). Above 1 exactly when `calls_above_est` > 0.
    #[serde(with = "json_f32")]
    pub worst_ratio: f32,
    /// Median est / amax over calls with a positive finite amax.
    #[serde(with = "json_f32")]
    pub median_headroom: f32,
    /// HiF8 only: calls whose scaled amax left the 3-bit tier (amax·scale ≥ 16).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub beyond_3bit_tier: Option<u64>,
    /// Calls whose scaled amax reached the overflow threshold.
    pub beyond_overflow: u64,
}

/// Replay of one quantizer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuantizerReplay {
    /// Quantizer name.
    pub name: String,
    /// Calls in its sequence (replayed; the ones left out are counted below).
    pub calls: u64,
    /// Calls whose amax was NaN, ±Inf or beyond f32 (left out of the histories).
    #[serde(default)]
    pub nonfinite_amax: u64,
    /// Calls whose amax was negative (impossible; left out).
    #[serde(default)]
    pub negative_amax: u64,
    /// Calls a log printed as 0 at its fixed decimals (the true value is unknown; left out).
    #[serde(default)]
    pub rounded_to_zero: u64,
    /// Per estimator name.
    pub estimators: BTreeMap<String, EstimatorReplay>,
    /// The quantization error the run itself measured (its own estimator), where the trace
    /// has it: replay cannot recompute it for other estimators without the tensors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_sqnr: Option<RecordedSqnr>,
}

/// SQNR recorded in a trace over one quantizer's calls.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedSqnr {
    /// Calls with an SQNR.
    pub calls: u64,
    /// Median (dB).
    pub median_db: f32,
    /// Worst (dB).
    pub worst_db: f32,
}

impl RecordedSqnr {
    /// Median and worst of `values` (`None` when empty).
    pub fn of(values: &[f32]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        Some(RecordedSqnr {
            calls: values.len() as u64,
            median_db: median(values),
            worst_db: values.iter().copied().fold(f32::INFINITY, f32::min),
        })
    }
}

/// The whole replay: per quantizer and in total.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// Per quantizer, in input order.
    pub quantizers: Vec<QuantizerReplay>,
    /// Per estimator name, over all quantizers.
    pub total: BTreeMap<String, EstimatorReplay>,
    /// Estimator names in the order given.
    #[serde(skip)]
    pub order: Vec<String>,
}

#[derive(Default)]
struct Acc {
    calls: u64,
    above: u64,
    worst: f32,
    headrooms: Vec<f32>,
    beyond_tier: u64,
    beyond_overflow: u64,
}

impl Acc {
    fn merge(&mut self, other: &Acc) {
        self.calls += other.calls;
        self.above += other.above;
        self.worst = self.worst.max(other.worst);
        self.headrooms.extend_from_slice(&other.headrooms);
        self.beyond_tier += other.beyond_tier;
        self.beyond_overflow += other.beyond_overflow;
    }

    fn finish(&self, hif8: bool) -> EstimatorReplay {
        EstimatorReplay {
            calls: self.calls,
            calls_above_est: self.above,
            worst_ratio: self.worst,
            median_headroom: median(&self.headrooms),
            beyond_3bit_tier: hif8.then_some(self.beyond_tier),
            beyond_overflow: self.beyond_overflow,
        }
    }
}

/// Median (mean of the two middle values for an even count; NaN when empty).
pub fn median(values: &[f32]) -> f32 {
    if values.is_empty() {
        return f32::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f32::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Whether a scaled HiF8 value lies above the 3-bit tier (in a 2-bit or 1-bit binade, or
/// overflowing): |x| ≥ 16.
pub fn beyond_3bit_tier(scaled: f32) -> bool {
    matches!(
        hif8::tier(scaled),
        hif8::Tier::Mantissa(1 | 2) | hif8::Tier::Overflow
    )
}

/// Replays every series with every estimator of `plan`.
pub fn replay(series: &[AmaxSeries], plan: &ScalingPlan) -> ReplayReport {
    let names = plan.names();
    let hif8 = plan.format() == Format::HiF8;
    let overflow_at = plan.format().facts().overflow_threshold;
    let mut totals: Vec<Acc> = names.iter().map(|_| Acc::default()).collect();
    let mut quantizers = Vec::new();
    for s in series {
        let mut state = QuantizerState::new(plan);
        let mut accs: Vec<Acc> = names.iter().map(|_| Acc::default()).collect();
        let (mut nonfinite, mut negative) = (s.nonfinite, s.negative);
        for &amax in &s.amax {
            // Series built by hand may still hold impossible values: same rule as the
            // importer (count, never replay).
            if !amax.is_finite() {
                nonfinite += 1;
                continue;
            }
            if amax < 0.0 {
                negative += 1;
                continue;
            }
            let decisions = state.call(amax);
            for (acc, d) in accs.iter_mut().zip(&decisions) {
                acc.calls += 1;
                acc.above += u64::from(amax > d.est);
                // Histories hold only finite amax ≥ 0 (the importer keeps the rest out), so
                // the ratio is NaN only for 0/0 and Inf only when an estimate of 0 was
                // exceeded: then it is the worst.
                let ratio = amax / d.est;
                if !ratio.is_nan() {
                    acc.worst = acc.worst.max(ratio);
                }
                if amax.is_finite() && amax > 0.0 {
                    acc.headrooms.push(d.est / amax);
                }
                let scaled = amax * d.scale;
                acc.beyond_tier += u64::from(beyond_3bit_tier(scaled));
                acc.beyond_overflow += u64::from(scaled >= overflow_at);
            }
        }
        for (t, a) in totals.iter_mut().zip(&accs) {
            t.merge(a);
        }
        quantizers.push(QuantizerReplay {
            name: s.name.clone(),
            calls: s.amax.len() as u64 - (nonfinite - s.nonfinite) - (negative - s.negative),
            nonfinite_amax: nonfinite,
            negative_amax: negative,
            rounded_to_zero: s.rounded_to_zero,
            estimators: names
                .iter()
                .cloned()
                .zip(accs.iter().map(|a| a.finish(hif8)))
                .collect(),
            recorded_sqnr: RecordedSqnr::of(&s.sqnr_db),
        });
    }
    ReplayReport {
        quantizers,
        total: names
            .iter()
            .cloned()
            .zip(totals.iter().map(|a| a.finish(hif8)))
            .collect(),
        order: names,
    }
}
