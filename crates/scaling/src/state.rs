//! Per-quantizer delayed-scaling state: the amax history, the scale rule, cold start, reset
//! and the per-call decision of every configured estimator (the active one and its shadows).
//!
//! One call of a quantizer, SPEC.md §3:
//! 1. the caller measures `amax = max|x|` of the tensor;
//! 2. [`QuantizerState::decide`] gives, for each estimator, `est` from the history of
//!    *earlier* calls (or this call's amax on a just-in-time cold start) and the scale
//!    `target / (est + 1e-12) / 2^margin`, keeping the previous scale when `est` is 0,
//!    negative, NaN or Inf;
//! 3. the caller quantizes with the active estimator's scale;
//! 4. [`QuantizerState::observe`] pushes amax to the history and remembers the scales.
//!
//! [`QuantizerState::call`] does 2 and 4 in one go. The GPU `scale_update` kernel is the
//! twin of this file.

use std::collections::VecDeque;

use crate::config::ColdStart;
use crate::estimator::Estimator;
use crate::plan::{ResolvedEstimator, ScalingPlan};
pub use crate::rule::{EST_EPSILON, ScaleRule, pow2};

/// What one estimator decided for one call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// The estimate in effect: the estimator's output, or, when that was unusable (or no
    /// history exists under TE-style cold start), the amax the kept scale aims at.
    pub est: f32,
    /// The estimator's own output (NaN when it had no history to read).
    pub raw_est: f32,
    /// The scale to quantize with.
    pub scale: f32,
    /// Whether the previous scale was kept (unusable estimate or TE-style cold start).
    pub kept_previous: bool,
    /// Whether the history was empty (first call after start or reset).
    pub cold: bool,
}

/// Delayed-scaling state of one quantizer (one block, module and role).
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizerState {
    estimators: Vec<ResolvedEstimator>,
    active: usize,
    rule: ScaleRule,
    cold_start: ColdStart,
    capacity: usize,
    history: VecDeque<f32>,
    scales: Vec<f32>,
    calls: u64,
}

impl QuantizerState {
    /// A fresh state executing `plan` (scales 1.0, empty history).
    pub fn new(plan: &ScalingPlan) -> Self {
        let estimators = plan.estimators().to_vec();
        let capacity = plan.history_len();
        QuantizerState {
            active: plan.active_index(),
            rule: plan.rule(),
            cold_start: plan.cold_start(),
            capacity,
            history: VecDeque::with_capacity(capacity),
            scales: vec![1.0; estimators.len()],
            estimators,
            calls: 0,
        }
    }

    /// Forgets the history and every scale (used when QAT switches on after warmup).
    pub fn reset(&mut self) {
        self.history.clear();
        self.scales.iter_mut().for_each(|s| *s = 1.0);
    }

    /// The estimators, active one at [`Self::active_index`].
    pub fn estimators(&self) -> &[ResolvedEstimator] {
        &self.estimators
    }

    /// Index of the estimator that drives quantization.
    pub fn active_index(&self) -> usize {
        self.active
    }

    /// The stored amax history, oldest first.
    pub fn history(&self) -> Vec<f32> {
        self.history.iter().copied().collect()
    }

    /// The scale each estimator used at the last call (1.0 before any).
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// Restores a saved state: the history (oldest first; the newest `capacity` entries are
    /// kept) and each estimator's last scale (checkpoint resume).
    pub fn restore(&mut self, history: &[f32], scales: &[f32]) {
        self.history.clear();
        let skip = history.len().saturating_sub(self.capacity);
        self.history.extend(&history[skip..]);
        self.set_scales(scales);
    }

    /// Overrides every estimator's current scale (tools and tests); the history is untouched.
    pub fn set_scales(&mut self, scales: &[f32]) {
        for (s, v) in self.scales.iter_mut().zip(scales) {
            *s = *v;
        }
    }

    /// Quantizer calls observed since creation (not reset by [`Self::reset`]).
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// The scale rule.
    pub fn rule(&self) -> ScaleRule {
        self.rule
    }

    /// Every estimator's decision for a call whose own amax is `amax`, without changing
    /// the state. `amax` is read only by just-in-time cold start and current scaling.
    pub fn decide(&self, amax: f32) -> Vec<Decision> {
        let history = self.history();
        self.estimators
            .iter()
            .zip(&self.scales)
            .map(|(spec, previous)| self.decide_one(spec, *previous, &history, amax))
            .collect()
    }

    fn decide_one(
        &self,
        spec: &ResolvedEstimator,
        previous: f32,
        history: &[f32],
        amax: f32,
    ) -> Decision {
        let cold = history.is_empty();
        let raw_est = if spec.is_current() {
            amax
        } else if cold {
            match self.cold_start {
                ColdStart::Jit => amax,
                ColdStart::Te => f32::NAN,
            }
        } else {
            spec.estimate(history, amax)
        };
        match self.rule.scale_for(raw_est) {
            Some(scale) => Decision {
                est: raw_est,
                raw_est,
                scale,
                kept_previous: false,
                cold,
            },
            None => Decision {
                est: self.rule.implied_est(previous),
                raw_est,
                scale: previous,
                kept_previous: true,
                cold,
            },
        }
    }

    /// Records a finished call: pushes `amax` (dropping the oldest beyond the history
    /// length) and remembers each estimator's scale.
    pub fn observe(&mut self, decisions: &[Decision], amax: f32) {
        for (s, d) in self.scales.iter_mut().zip(decisions) {
            *s = d.scale;
        }
        if self.capacity > 0 {
            if self.history.len() == self.capacity {
                self.history.pop_front();
            }
            self.history.push_back(amax);
        }
        self.calls += 1;
    }

    /// [`Self::decide`] then [`Self::observe`]: one whole quantizer call.
    pub fn call(&mut self, amax: f32) -> Vec<Decision> {
        let decisions = self.decide(amax);
        self.observe(&decisions, amax);
        decisions
    }
}
