//! Serde configuration of delayed scaling, with the names of SPEC.md §7 and the Transformer
//! Engine / Megatron spellings accepted on input (`amax_history_len`, `amax_compute_algo`).

use hif8lab_format::{Format, Overflow};
use serde::{Deserialize, Serialize};

use crate::estimator::EstimatorSpec;
use crate::range::RangeError;

/// What the first call after a (re)start does when the history is empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColdStart {
    /// "Just in time": the first call uses its own amax (the paper's code).
    #[default]
    Jit,
    /// Transformer Engine style: the first call keeps the initial scale 1.0.
    Te,
}

impl ColdStart {
    /// Lower-case name as written in configs.
    pub fn name(self) -> &'static str {
        match self {
            ColdStart::Jit => "jit",
            ColdStart::Te => "te",
        }
    }
}

/// Delayed-scaling configuration of the quantizers of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingConfig {
    /// The estimator that drives quantization (TE: `amax_compute_algo = "max" | "most_recent"`).
    #[serde(default = "default_estimator", alias = "amax_compute_algo")]
    pub estimator: EstimatorSpec,
    /// History length in quantizer calls, and the default `N` of windowed estimators
    /// (TE: `amax_history_len`).
    #[serde(default = "default_window", alias = "amax_history_len")]
    pub window: usize,
    /// Where the estimated amax lands after scaling.
    #[serde(default = "default_target")]
    pub target: f32,
    /// Extra power-of-two headroom: `scale = target / est / 2^margin`.
    #[serde(default)]
    pub margin: i32,
    /// Cold-start behaviour on an empty history.
    #[serde(default)]
    pub cold_start: ColdStart,
    /// Estimators evaluated beside the active one on the same calls (shadow comparison).
    #[serde(default = "EstimatorSpec::default_set")]
    pub shadow: Vec<EstimatorSpec>,
    /// Number format of the quantizers.
    #[serde(default, with = "format_name")]
    pub format: Format,
    /// Overflow behaviour of the quantizers.
    #[serde(default, with = "overflow_name")]
    pub overflow: Overflow,
}

fn default_estimator() -> EstimatorSpec {
    EstimatorSpec::MaxWindow(None)
}

fn default_window() -> usize {
    64
}

fn default_target() -> f32 {
    15.0
}

impl Default for ScalingConfig {
    fn default() -> Self {
        ScalingConfig {
            estimator: default_estimator(),
            window: default_window(),
            target: default_target(),
            margin: 0,
            cold_start: ColdStart::Jit,
            shadow: EstimatorSpec::default_set(),
            format: Format::HiF8,
            overflow: Overflow::Inf,
        }
    }
}

/// The margins a config accepts (`scale = target / est / 2^margin`); the CLI uses the same.
pub const MARGIN_RANGE: std::ops::RangeInclusive<i32> = -64..=64;

/// The longest amax history a config accepts (calls).
pub use crate::estimator::WINDOW_MAX;

impl ScalingConfig {
    /// Checks value ranges; each message names the field (`window`, `target`, …). The same
    /// check [`Self::plan`] makes (call that where the plan is wanted).
    pub fn validate(&self) -> Result<(), RangeError> {
        self.plan().map(|_| ())
    }

    /// The ranges [`Self::plan`] checks before it resolves anything.
    pub(crate) fn check_ranges(&self) -> Result<(), RangeError> {
        if !(1..=WINDOW_MAX).contains(&self.window) {
            return Err(RangeError::new(
                "window",
                format!(
                    "window must be in 1..={WINDOW_MAX}, got {} (amax_history_len)",
                    self.window
                ),
            ));
        }
        if !(self.target.is_finite() && self.target > 0.0) {
            return Err(RangeError::new(
                "target",
                format!("target must be a finite number > 0, got {}", self.target),
            ));
        }
        if !MARGIN_RANGE.contains(&self.margin) {
            return Err(RangeError::new(
                "margin",
                format!(
                    "margin must be in {}..={}, got {}",
                    MARGIN_RANGE.start(),
                    MARGIN_RANGE.end(),
                    self.margin
                ),
            ));
        }
        for spec in std::iter::once(&self.estimator).chain(&self.shadow) {
            spec.validate().map_err(|e| {
                RangeError::new(
                    format!("estimator '{spec}'"),
                    format!("estimator '{spec}': {e}"),
                )
            })?;
        }
        Ok(())
    }
}

/// Serde of [`Format`] by its name (`hif8`, `e4m3`, `e5m2`).
pub mod format_name {
    use hif8lab_format::Format;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes the name.
    pub fn serialize<S: Serializer>(f: &Format, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(f.name())
    }

    /// Parses a name.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Format, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// Serde of [`Overflow`] by its name (`inf`, `saturate`).
pub mod overflow_name {
    use hif8lab_format::Overflow;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes the name.
    pub fn serialize<S: Serializer>(o: &Overflow, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(o.name())
    }

    /// Parses a name.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Overflow, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}
