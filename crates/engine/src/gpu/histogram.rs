//! `gpu::histogram`: log2|x·scale| in quarter binades into the bank's histogram slot
//! (`shaders/histogram.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{Bind, Kernel};
use super::{GpuBackend, GpuBank, GpuTensor};
use crate::EngineError;
use crate::params_layout;

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

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "histogram",
    wgsl: WGSL,
    common: &[],
    entries: &["main"],
    bindings: &[(1, "x"), (2, "scales"), (3, "hist")],
    params: params_layout!(HistParams {
        n,
        scale_index,
        quantizer,
        quarter
    }),
};

/// Records the histogram of `x` (under the quantizer's active scale) into the bank's slot.
pub(crate) fn launch(
    gpu: &GpuBackend,
    x: &GpuTensor,
    bank: &GpuBank,
    quantizer: usize,
) -> Result<(), EngineError> {
    bank.config.check_index(quantizer)?;
    let [a, b, c] = hif8lab_scaling::stats::quarter_thresholds();
    let params = HistParams {
        n: x.len as u32,
        scale_index: bank.active_scale_index(quantizer),
        quantizer: quantizer as u32,
        _pad: 0,
        quarter: [a, b, c, 0],
    };
    let out = [
        ("scales", Bind::all(&bank.scales)),
        ("hist", Bind::all(&bank.hist)),
    ];
    gpu.reduce(&KERNEL, WG, &params, x, &out, (&bank.hist, 0, None));
    Ok(())
}
