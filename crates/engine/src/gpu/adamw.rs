//! `gpu::adamw`: AdamW with global-norm clipping read from the GPU (`shaders/adamw.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{ELEMENTWISE_GROUPS, Kernel, grid_stride_groups};
use super::{GpuBackend, GpuTensor};
use crate::params_layout;
use crate::{AdamHyper, EngineError};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/adamw.wgsl");

/// Uniform parameters; keep in sync with `AdamParams` in `shaders/adamw.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AdamParams {
    /// Elements.
    pub n: u32,
    /// Entries of the norms buffer to sum.
    pub n_norms: u32,
    /// Learning rate.
    pub lr: f32,
    /// β1.
    pub beta1: f32,
    /// β2.
    pub beta2: f32,
    /// ε.
    pub eps: f32,
    /// Decoupled weight decay.
    pub weight_decay: f32,
    /// 1 − β1^t.
    pub bias_correction1: f32,
    /// 1 − β2^t.
    pub bias_correction2: f32,
    /// Clip threshold (≤ 0: no clipping).
    pub max_norm: f32,
    /// Padding.
    pub _pad: [u32; 2],
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "adamw",
    wgsl: WGSL,
    common: &[],
    entries: &["main"],
    bindings: &[(1, "param"), (2, "grad"), (3, "m"), (4, "v"), (5, "norms")],
    params: params_layout!(AdamParams {
        n,
        n_norms,
        lr,
        beta1,
        beta2,
        eps,
        weight_decay,
        bias_correction1,
        bias_correction2,
        max_norm
    }),
};

#[allow(clippy::too_many_arguments)] // the trait method's arguments
pub(crate) fn launch(
    gpu: &GpuBackend,
    param: &GpuTensor,
    grad: &GpuTensor,
    m: &GpuTensor,
    v: &GpuTensor,
    norms: &GpuTensor,
    n_norms: usize,
    hyper: &AdamHyper,
) -> Result<(), EngineError> {
    crate::checks::adamw(param.len, [grad.len, m.len, v.len], norms.len, n_norms)?;
    let (bc1, bc2) = hyper.bias_corrections();
    let params = AdamParams {
        n: param.len as u32,
        n_norms: n_norms as u32,
        lr: hyper.lr,
        beta1: hyper.beta1,
        beta2: hyper.beta2,
        eps: hyper.eps,
        weight_decay: hyper.weight_decay,
        bias_correction1: bc1,
        bias_correction2: bc2,
        max_norm: hyper.max_norm,
        _pad: [0; 2],
    };
    let groups = grid_stride_groups(param.len, 256, ELEMENTWISE_GROUPS);
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[
            ("param", param.bind()),
            ("grad", grad.bind()),
            ("m", m.bind()),
            ("v", v.bind()),
            ("norms", norms.bind()),
        ],
        (groups, 1, 1),
    );
    Ok(())
}
