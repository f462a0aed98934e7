//! `gpu::quant_stats`: amax, non-finite, shadow above/overflow counts, underflow and the
//! quantization error's energies in one pass, then a one-workgroup `finish` that sums the
//! workgroups' energies in a fixed order (`shaders/quant_stats.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{Bind, Kernel, Snippet};
use super::{GpuBackend, GpuBank, GpuTensor};
use crate::EngineError;
use crate::params_layout;

use super::QuantParams;

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/quant_stats.wgsl");
/// Invocations per workgroup.
pub const WG: u32 = 256;

/// u32 words of one quantizer's statistics slot for `k` estimators.
pub fn slot_words(k: usize) -> usize {
    5 + 2 * k
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
    pub active_index: u32,
    /// u32 words per statistics slot.
    pub stride: u32,
    /// |x·scale| at or above this overflows.
    pub overflow_threshold: f32,
    /// |x·scale| at or below this quantizes to zero.
    pub underflow_max: f32,
    /// Workgroups of the `main` dispatch (the energies `finish` sums).
    pub groups: u32,
    /// Format, overflow, rounding, seed.
    pub quant: QuantParams,
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "quant_stats",
    wgsl: WGSL,
    common: &[Snippet::Quant],
    entries: &["main", "finish"],
    bindings: &[
        (1, "x"),
        (2, "est"),
        (3, "scales"),
        (4, "stats"),
        (5, "partials"),
    ],
    params: params_layout!(StatsParams {
        n,
        quantizer,
        k,
        active_index,
        stride,
        overflow_threshold,
        underflow_max,
        groups,
        quant
    }),
};

pub(crate) fn launch(
    gpu: &GpuBackend,
    x: &GpuTensor,
    bank: &GpuBank,
    quantizer: usize,
) -> Result<(), EngineError> {
    bank.config.check_index(quantizer)?;
    let stride = slot_words(bank.k);
    let params = StatsParams {
        n: x.len as u32,
        quantizer: quantizer as u32,
        k: bank.k as u32,
        active_index: bank.active as u32,
        stride: stride as u32,
        overflow_threshold: bank.config.plan.format().facts().overflow_threshold,
        underflow_max: bank.config.plan.format().facts().underflow_max,
        groups: super::kernel::grid_stride_groups(x.len, WG, super::kernel::REDUCTION_GROUPS),
        quant: bank.quant,
    };
    let out = [
        ("est", Bind::all(&bank.est)),
        ("scales", Bind::all(&bank.scales)),
        ("stats", Bind::all(&bank.stats)),
        ("partials", Bind::all(&bank.partials)),
    ];
    let slot = (
        &bank.stats,
        (quantizer * stride * 4) as u64,
        Some((stride * 4) as u64),
    );
    gpu.reduce(&KERNEL, WG, &params, x, &out, slot);
    gpu.dispatch(
        &KERNEL,
        "finish",
        &params,
        &[
            ("stats", Bind::all(&bank.stats)),
            ("partials", Bind::all(&bank.partials)),
        ],
        (1, 1, 1),
    );
    Ok(())
}
