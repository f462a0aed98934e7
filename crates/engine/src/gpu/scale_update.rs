//! `gpu::scale_update`: delayed scaling of many quantizers on the GPU, twin of
//! `hif8lab_scaling::QuantizerState` (`shaders/scale_update.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{Bind, Kernel, Snippet};
use super::{GpuBackend, GpuBank};
use crate::EngineError;
use crate::params_layout;
use hif8lab_scaling::EstimatorDescriptor;

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/scale_update.wgsl");
/// Invocations per workgroup.
pub const WG: u32 = 64;

/// Uniform parameters; keep in sync with `UpdateParams` in `shaders/scale_update.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct UpdateParams {
    /// First quantizer.
    pub first: u32,
    /// Quantizers to update.
    pub count: u32,
    /// Estimators per quantizer.
    pub k: u32,
    /// History capacity per quantizer.
    pub cap: u32,
    /// Scaling target.
    pub scale_target: f32,
    /// 2^margin.
    pub margin_scale: f32,
    /// 0 = JIT, 1 = TE-style.
    pub cold_start: u32,
    /// 0 = update, 1 = reset.
    pub update_mode: u32,
}

/// One estimator as the kernel sees it; keep in sync with `EstimatorDesc` in the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct EstimatorDesc {
    /// `EstimatorKind::code`: 0 most_recent, 1 max_window, 2 mean_window, 3 ema, 4 holt,
    /// 5 current.
    pub kind: u32,
    /// Window length (windowed kinds).
    pub n: u32,
    /// ema / holt alpha.
    pub alpha: f32,
    /// holt beta.
    pub beta: f32,
    /// holt damping.
    pub damping: f32,
    /// Padding to 32 bytes.
    pub _pad: [u32; 3],
}

impl From<&EstimatorDescriptor> for EstimatorDesc {
    /// The plan's flat record, padded for the uniform layout (the kind codes are
    /// `hif8lab_scaling::EstimatorKind::code`, which the shader's `switch` mirrors).
    fn from(d: &EstimatorDescriptor) -> Self {
        EstimatorDesc {
            kind: d.kind,
            n: d.n,
            alpha: d.alpha,
            beta: d.beta,
            damping: d.damping,
            _pad: [0; 3],
        }
    }
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "scale_update",
    wgsl: WGSL,
    common: &[Snippet::Quant],
    entries: &["main"],
    bindings: &[
        (1, "estimators"),
        (2, "history"),
        (3, "ring_meta"),
        (4, "amax_bits"),
        (5, "est"),
        (6, "scales"),
    ],
    params: params_layout!(UpdateParams {
        first,
        count,
        k,
        cap,
        scale_target,
        margin_scale,
        cold_start,
        update_mode
    }),
};

/// One delayed-scaling call for quantizers `first..first+count`.
pub(crate) fn launch(
    gpu: &GpuBackend,
    bank: &GpuBank,
    first: usize,
    count: usize,
) -> Result<(), EngineError> {
    if count == 0 {
        return Ok(());
    }
    bank.config.check_index(first + count - 1)?;
    record(gpu, bank, first, count, 0);
    Ok(())
}

/// Empties every history and sets every scale to 1.0.
pub(crate) fn launch_reset(gpu: &GpuBackend, bank: &GpuBank) -> Result<(), EngineError> {
    record(gpu, bank, 0, bank.config.quantizers, 1);
    Ok(())
}

fn record(gpu: &GpuBackend, bank: &GpuBank, first: usize, count: usize, update_mode: u32) {
    let rule = bank.config.plan.rule();
    let params = UpdateParams {
        first: first as u32,
        count: count as u32,
        k: bank.k as u32,
        cap: bank.cap as u32,
        scale_target: rule.target,
        margin_scale: hif8lab_scaling::state::pow2(rule.margin),
        cold_start: match bank.config.plan.cold_start() {
            hif8lab_scaling::ColdStart::Jit => 0,
            hif8lab_scaling::ColdStart::Te => 1,
        },
        update_mode,
    };
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[
            ("estimators", Bind::all(&bank.estimators)),
            ("history", Bind::all(&bank.history)),
            ("ring_meta", Bind::all(&bank.meta)),
            ("amax_bits", Bind::all(&bank.amax_bits)),
            ("est", Bind::all(&bank.est)),
            ("scales", Bind::all(&bank.scales)),
        ],
        ((count as u32).div_ceil(WG), 1, 1),
    );
}
