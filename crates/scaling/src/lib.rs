//! # hif8lab-scaling
//!
//! The exact definition of per-tensor *delayed scaling* in hif8lab (SPEC.md §3): amax
//! histories, every estimator (most_recent, max_window, mean_window, ema, holt, current),
//! the scale rule with its fallbacks, cold start and reset, the shadow comparison of all
//! estimators on the same calls, the CPU reference of the per-call statistics, the JSONL
//! trace schema, importers (CSV, Transformer Engine logs), offline replay, synthetic traces
//! and the Transformer Engine recipe export.
//!
//! Pure Rust, no GPU; builds for wasm32. The GPU `scale_update` and `quant_stats` kernels of
//! `hif8lab-engine` are twins of [`state`] and [`stats`]; tensors and training live there
//! and in `hif8lab-train`, not here.

pub mod call;
pub mod config;
pub mod estimator;
pub mod ids;
pub mod import;
pub mod plan;
pub mod range;
pub mod replay;
pub mod rule;
pub mod state;
pub mod stats;
pub mod sweep;
pub mod synth;
pub mod te;
pub mod trace;

pub use call::{CallCounts, CallRecord, EstimatorCounts};
pub use config::{ColdStart, ScalingConfig};
pub use estimator::{Estimator, EstimatorKind, EstimatorSpec};
pub use ids::{Module, QuantizerId, Role};
pub use plan::{ConfigError, EstimatorDescriptor, ResolvedEstimator, ScalingPlan};
pub use range::RangeError;
pub use state::{Decision, QuantizerState, ScaleRule};
