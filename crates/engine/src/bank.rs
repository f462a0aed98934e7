//! The quantizer bank: what both backends keep per quantizer (amax history, each
//! estimator's estimate and scale, the statistics of the last call), and its snapshot.

use hif8lab_format::{FakeQuant, Rounding};
use hif8lab_scaling::ScalingPlan;

use crate::EngineError;

/// Most estimators a bank evaluates per call (the statistics slot has room for this many).
pub const MAX_ESTIMATORS: usize = 8;

/// Configuration of a bank of quantizers sharing one scaling plan and format.
#[derive(Clone, Debug, PartialEq)]
pub struct BankConfig {
    /// Number of quantizers.
    pub quantizers: usize,
    /// Estimators (active and shadows), history length, scale rule, cold start, format and
    /// overflow, resolved once ([`hif8lab_scaling::ScalingConfig::plan`]).
    pub plan: ScalingPlan,
    /// Rounding mode of the fake quantization.
    pub rounding: Rounding,
}

impl BankConfig {
    /// A bank of `quantizers` quantizers executing `plan`, nearest rounding.
    pub fn new(quantizers: usize, plan: ScalingPlan) -> Self {
        BankConfig {
            quantizers,
            plan,
            rounding: Rounding::Nearest,
        }
    }

    /// The fake quantizer of the bank's format, overflow and rounding.
    pub fn quant(&self) -> FakeQuant {
        FakeQuant::new(self.plan.format())
            .with_overflow(self.plan.overflow())
            .with_rounding(self.rounding)
    }

    /// Estimators per quantizer.
    pub fn estimators(&self) -> usize {
        self.plan.estimators().len()
    }

    /// Checks the bank fits the engine's layout.
    pub fn validate(&self) -> Result<(), EngineError> {
        if self.quantizers == 0 {
            return Err(EngineError::Config(
                "a bank needs at least one quantizer".into(),
            ));
        }
        if self.estimators() > MAX_ESTIMATORS {
            return Err(EngineError::Config(format!(
                "{} estimators configured, at most {MAX_ESTIMATORS} fit a statistics slot",
                self.estimators()
            )));
        }
        Ok(())
    }

    /// Checks a quantizer index.
    pub fn check_index(&self, quantizer: usize) -> Result<(), EngineError> {
        if quantizer < self.quantizers {
            Ok(())
        } else {
            Err(EngineError::Shape {
                op: "bank".into(),
                message: format!(
                    "quantizer {quantizer} out of range (bank has {})",
                    self.quantizers
                ),
            })
        }
    }
}

/// Statistics of a quantizer's last `quant_stats` call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// max |x| over non-NaN elements.
    pub amax: f32,
    /// NaN/Inf elements.
    pub nonfinite: u64,
    /// Non-zero elements that quantize to zero at the active scale.
    pub underflow: u64,
    /// Per estimator: |x| > est.
    pub above_est: Vec<u64>,
    /// Per estimator: |x·scale| ≥ overflow threshold.
    pub overflow: Vec<u64>,
    /// Σx² of the elements the quantization error covers
    /// ([`hif8lab_scaling::stats::quant_error`]).
    pub signal: f64,
    /// Σ(x − qdq(x))² at the active scale (f64 sums on the CPU, f32 on the GPU).
    pub noise: f64,
}

impl StatsSnapshot {
    /// The call's SQNR in dB ([`hif8lab_scaling::stats::sqnr_db`]).
    pub fn sqnr_db(&self) -> Option<f32> {
        hif8lab_scaling::stats::sqnr_db(self.signal, self.noise)
    }
}

/// One quantizer's state as read back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantizerSnapshot {
    /// The amax measured by the last `amax` call (input of `scale_update`).
    pub measured_amax: f32,
    /// Per estimator: the estimate in effect.
    pub est: Vec<f32>,
    /// Per estimator: the scale.
    pub scales: Vec<f32>,
    /// The amax history, oldest first.
    pub history: Vec<f32>,
    /// Statistics of the last `quant_stats` call.
    pub stats: StatsSnapshot,
}

/// The bank's histogram slot: log2|x·scale| of the last [`crate::QuantOps::histogram`] call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BankHistogram {
    /// The quantizer whose input it bins.
    pub quantizer: usize,
    /// The counts.
    pub hist: hif8lab_scaling::stats::Log2Histogram,
}

/// The whole bank as read back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BankSnapshot {
    /// Index of the active estimator.
    pub active: usize,
    /// Per quantizer.
    pub quantizers: Vec<QuantizerSnapshot>,
    /// The histogram slot, once a `histogram` call filled it.
    pub histogram: Option<BankHistogram>,
}
