//! The scaling plan: a [`ScalingConfig`] resolved once into what every executor runs.
//!
//! A config is what a user writes (`max_window` without its window, shadows that repeat the
//! active estimator, a window that is only a default). A plan is what the Rust reference
//! ([`crate::QuantizerState`]), the WGSL `scale_update` kernel (its estimator descriptors)
//! and the torch bank of the Python package execute: every estimator with its parameters
//! fixed, the active one's index, the history length, the scale rule, cold start and the
//! format. It is built only by [`ScalingConfig::plan`], which checks every range once; the
//! executors take it as it is and never resolve a window themselves.

use std::fmt;

use hif8lab_format::{Format, Overflow};

use crate::config::{ColdStart, ScalingConfig};
use crate::estimator::{
    Current, Ema, Estimator, EstimatorKind, EstimatorSpec, Holt, MaxWindow, MeanWindow, MostRecent,
};
use crate::range::RangeError;
use crate::rule::ScaleRule;

/// A scaling config that cannot become a plan: the field and a message naming it.
pub type ConfigError = RangeError;

/// An estimator with every parameter fixed: what an executor runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ResolvedEstimator {
    /// The previous call's amax.
    MostRecent,
    /// Max over the last `n` calls.
    MaxWindow(usize),
    /// Mean over the last `n` calls.
    MeanWindow(usize),
    /// Exponential smoothing with weight `alpha`.
    Ema(f32),
    /// Damped-trend Holt smoothing (alpha, beta, damping).
    Holt(f32, f32, f32),
    /// This call's own amax.
    Current,
}

/// One estimator as a flat record, the form the WGSL kernel and the torch bank read:
/// the kind's code ([`EstimatorKind::code`]) and its parameters (0 where unused).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EstimatorDescriptor {
    /// [`EstimatorKind::code`] of the kind.
    pub kind: u32,
    /// Window length (windowed kinds).
    pub n: u32,
    /// ema / holt alpha.
    pub alpha: f32,
    /// holt beta.
    pub beta: f32,
    /// holt damping.
    pub damping: f32,
}

impl ResolvedEstimator {
    /// Its kind, parameters aside.
    pub fn kind(&self) -> EstimatorKind {
        self.spec().kind()
    }

    /// The spec that writes it (`max_window(64)` with its window).
    pub fn spec(&self) -> EstimatorSpec {
        match *self {
            ResolvedEstimator::MostRecent => EstimatorSpec::MostRecent,
            ResolvedEstimator::MaxWindow(n) => EstimatorSpec::MaxWindow(Some(n)),
            ResolvedEstimator::MeanWindow(n) => EstimatorSpec::MeanWindow(Some(n)),
            ResolvedEstimator::Ema(a) => EstimatorSpec::Ema(a),
            ResolvedEstimator::Holt(a, b, d) => EstimatorSpec::Holt(a, b, d),
            ResolvedEstimator::Current => EstimatorSpec::Current,
        }
    }

    /// Whether this is current-tensor scaling (no history, needs this call's amax first).
    pub fn is_current(&self) -> bool {
        matches!(self, ResolvedEstimator::Current)
    }

    /// The flat record of the kernel and the torch bank.
    pub fn descriptor(&self) -> EstimatorDescriptor {
        let base = EstimatorDescriptor {
            kind: self.kind().code(),
            ..EstimatorDescriptor::default()
        };
        match *self {
            ResolvedEstimator::MostRecent | ResolvedEstimator::Current => base,
            ResolvedEstimator::MaxWindow(n) | ResolvedEstimator::MeanWindow(n) => {
                EstimatorDescriptor {
                    // plan() bounds every window by WINDOW_MAX, far below u32::MAX.
                    n: u32::try_from(n).unwrap_or(u32::MAX),
                    ..base
                }
            }
            ResolvedEstimator::Ema(alpha) => EstimatorDescriptor { alpha, ..base },
            ResolvedEstimator::Holt(alpha, beta, damping) => EstimatorDescriptor {
                alpha,
                beta,
                damping,
                ..base
            },
        }
    }

    fn with<R>(&self, f: impl FnOnce(&dyn Estimator) -> R) -> R {
        match *self {
            ResolvedEstimator::MostRecent => f(&MostRecent),
            ResolvedEstimator::MaxWindow(n) => f(&MaxWindow { n }),
            ResolvedEstimator::MeanWindow(n) => f(&MeanWindow { n }),
            ResolvedEstimator::Ema(alpha) => f(&Ema { alpha }),
            ResolvedEstimator::Holt(alpha, beta, damping) => f(&Holt {
                alpha,
                beta,
                damping,
            }),
            ResolvedEstimator::Current => f(&Current),
        }
    }
}

impl Estimator for ResolvedEstimator {
    fn name(&self) -> String {
        self.with(|e| e.name())
    }
    fn estimate(&self, history: &[f32], current: f32) -> f32 {
        self.with(|e| e.estimate(history, current))
    }
    fn history_needed(&self) -> usize {
        self.with(|e| e.history_needed())
    }
}

impl fmt::Display for ResolvedEstimator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A [`ScalingConfig`] resolved and checked: what the Rust state, the WGSL kernel and the
/// torch bank execute. Built only by [`ScalingConfig::plan`].
#[derive(Clone, Debug, PartialEq)]
pub struct ScalingPlan {
    estimators: Vec<ResolvedEstimator>,
    active: usize,
    history_len: usize,
    window: usize,
    rule: ScaleRule,
    cold_start: ColdStart,
    format: Format,
    overflow: Overflow,
}

impl ScalingPlan {
    /// Every estimator evaluated at each call: the shadow list in its order, duplicates
    /// removed, with the active estimator first if the list lacks it.
    pub fn estimators(&self) -> &[ResolvedEstimator] {
        &self.estimators
    }

    /// The names of [`Self::estimators`], in order (trace headers, summaries, the app).
    pub fn names(&self) -> Vec<String> {
        self.estimators.iter().map(ToString::to_string).collect()
    }

    /// The flat records of [`Self::estimators`] (the WGSL kernel, the torch bank).
    pub fn descriptors(&self) -> Vec<EstimatorDescriptor> {
        self.estimators.iter().map(|e| e.descriptor()).collect()
    }

    /// Index of the estimator that drives quantization.
    pub fn active_index(&self) -> usize {
        self.active
    }

    /// The estimator that drives quantization.
    pub fn active(&self) -> ResolvedEstimator {
        self.estimators[self.active]
    }

    /// Entries each quantizer keeps: the window, or more if a windowed estimator asks.
    pub fn history_len(&self) -> usize {
        self.history_len
    }

    /// The configured window (the default `N` the windowed estimators were resolved with).
    pub fn window(&self) -> usize {
        self.window
    }

    /// The scale rule (target and margin).
    pub fn rule(&self) -> ScaleRule {
        self.rule
    }

    /// Cold-start behaviour on an empty history.
    pub fn cold_start(&self) -> ColdStart {
        self.cold_start
    }

    /// Number format of the quantizers.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Overflow behaviour of the quantizers.
    pub fn overflow(&self) -> Overflow {
        self.overflow
    }
}

impl ScalingConfig {
    /// The plan of this config: every range checked once (each error names its field),
    /// windows resolved, duplicates removed, the history length fixed.
    pub fn plan(&self) -> Result<ScalingPlan, ConfigError> {
        self.check_ranges()?;
        let resolve = |spec: &EstimatorSpec| -> Result<ResolvedEstimator, ConfigError> {
            let resolved = match *spec {
                EstimatorSpec::MostRecent => ResolvedEstimator::MostRecent,
                EstimatorSpec::MaxWindow(n) => {
                    ResolvedEstimator::MaxWindow(n.unwrap_or(self.window))
                }
                EstimatorSpec::MeanWindow(n) => {
                    ResolvedEstimator::MeanWindow(n.unwrap_or(self.window))
                }
                EstimatorSpec::Ema(a) => ResolvedEstimator::Ema(a),
                EstimatorSpec::Holt(a, b, d) => ResolvedEstimator::Holt(a, b, d),
                EstimatorSpec::Current => ResolvedEstimator::Current,
            };
            if let ResolvedEstimator::MaxWindow(n) | ResolvedEstimator::MeanWindow(n) = resolved
                && !(1..=crate::config::WINDOW_MAX).contains(&n)
            {
                return Err(RangeError::new(
                    format!("estimator '{spec}'"),
                    format!(
                        "estimator '{spec}': window length must be in 1..={}, got {n}",
                        crate::config::WINDOW_MAX
                    ),
                ));
            }
            Ok(resolved)
        };
        let active = resolve(&self.estimator)?;
        let mut estimators: Vec<ResolvedEstimator> = Vec::new();
        for spec in &self.shadow {
            let spec = resolve(spec)?;
            if !estimators.contains(&spec) {
                estimators.push(spec);
            }
        }
        let active_index = match estimators.iter().position(|e| *e == active) {
            Some(i) => i,
            None => {
                estimators.insert(0, active);
                0
            }
        };
        let history_len = estimators
            .iter()
            .map(|e| match e.history_needed() {
                usize::MAX => self.window,
                n => n,
            })
            .chain([self.window])
            .max()
            .unwrap_or(self.window);
        Ok(ScalingPlan {
            estimators,
            active: active_index,
            history_len,
            window: self.window,
            rule: ScaleRule {
                target: self.target,
                margin: self.margin,
            },
            cold_start: self.cold_start,
            format: self.format,
            overflow: self.overflow,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_plan_resolves_windows_and_keeps_the_shadow_order() {
        let plan = ScalingConfig::default().plan().expect("default plan");
        assert_eq!(
            plan.names(),
            [
                "most_recent",
                "ema(0.1)",
                "mean_window(64)",
                "max_window(64)",
                "current"
            ]
        );
        assert_eq!(plan.active_index(), 3);
        assert_eq!(plan.history_len(), 64);
        assert_eq!(plan.active(), ResolvedEstimator::MaxWindow(64));
    }

    #[test]
    fn an_active_estimator_missing_from_the_shadows_comes_first() {
        let config = ScalingConfig {
            estimator: EstimatorSpec::MaxWindow(Some(200)),
            shadow: vec![EstimatorSpec::MostRecent, EstimatorSpec::MostRecent],
            ..ScalingConfig::default()
        };
        let plan = config.plan().expect("plan");
        assert_eq!(plan.names(), ["max_window(200)", "most_recent"]);
        assert_eq!(plan.active_index(), 0);
        assert_eq!(plan.history_len(), 200);
    }

    #[test]
    fn every_bad_range_is_refused_by_name() {
        let bad = [
            (
                ScalingConfig {
                    window: 0,
                    ..ScalingConfig::default()
                },
                "window",
            ),
            (
                ScalingConfig {
                    estimator: EstimatorSpec::MaxWindow(Some(1 << 40)),
                    ..ScalingConfig::default()
                },
                "estimator 'max_window(1099511627776)'",
            ),
            (
                ScalingConfig {
                    target: f32::NAN,
                    ..ScalingConfig::default()
                },
                "target",
            ),
            (
                ScalingConfig {
                    margin: 65,
                    ..ScalingConfig::default()
                },
                "margin",
            ),
        ];
        for (config, field) in bad {
            let e = config.plan().expect_err(field);
            assert_eq!(e.field, field, "{e}");
        }
    }

    #[test]
    fn descriptors_carry_the_kind_codes_and_parameters() {
        let d = ResolvedEstimator::Holt(0.5, 0.1, 0.9).descriptor();
        assert_eq!(
            (d.kind, d.alpha, d.beta, d.damping),
            (EstimatorKind::Holt.code(), 0.5, 0.1, 0.9)
        );
        assert_eq!(ResolvedEstimator::MeanWindow(7).descriptor().n, 7);
        for kind in EstimatorKind::ALL {
            assert_eq!(EstimatorKind::from_code(kind.code()), Some(kind));
        }
    }
}
