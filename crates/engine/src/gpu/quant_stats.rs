//! `gpu::quant_stats`: amax, non-finite, shadow above/overflow counts and underflow in one
//! pass (`shaders/quant_stats.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::QuantParams;

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/quant_stats.wgsl");
/// Invocations per workgroup.
pub const WG: u32 = 256;

/// u32 words of one quantizer's statistics slot for `k` estimators.
pub fn slot_words(k: usize) -> usize {
    3 + 2 * k
}

/// Uniform parameters; keep in sync with `StatsParams` in `shaders/quant_stats.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct StatsParams {
    /// Elements.
    pub n: u32,
    /// Quantizer index.
    pub quantizer: u32,
    /// Estimators per quantizer.
    pub k: u32,
    /// Index of the active estimator.
    pub active: u32,
    /// u32 words per statistics slot.
    pub stride: u32,
    /// |x·scale| at or above this overflows.
    pub overflow_threshold: f32,
    /// |x·scale| at or below this quantizes to zero.
    pub underflow_max: f32,
    /// Padding to a 16-byte boundary.
    pub _pad: u32,
    /// Format, overflow, rounding, seed.
    pub quant: QuantParams,
}
