//! `gpu::histogram`: log2|x·scale| in quarter binades into the bank's histogram slot
//! (`shaders/histogram.wgsl`).

use bytemuck::{Pod, Zeroable};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/histogram.wgsl");
/// Invocations per workgroup.
pub const WG: u32 = 256;
/// Words before the bins: quantizer + 1, zeros, below, above, nonfinite.
pub const HEAD: usize = 5;
/// u32 words of the slot.
pub const WORDS: usize = HEAD + hif8lab_scaling::stats::HIST_BINS;

/// Uniform parameters; keep in sync with `HistParams` in `shaders/histogram.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct HistParams {
    /// Elements.
    pub n: u32,
    /// Index of the active scale in the bank's scale array.
    pub scale_index: u32,
    /// Quantizer index (recorded in the slot).
    pub quantizer: u32,
    /// Padding.
    pub _pad: u32,
    /// Quarter-binade mantissa thresholds (`stats::quarter_thresholds`), then padding.
    pub quarter: [u32; 4],
}
