//! `gpu::ste_mask`: the clipped straight-through estimator's mask (`shaders/ste_mask.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{Bind, ELEMENTWISE_GROUPS, Kernel, grid_stride_groups};
use super::{GpuBackend, GpuBank, GpuTensor};
use crate::params_layout;
use crate::{EngineError, same_len};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/ste_mask.wgsl");

/// Uniform parameters; keep in sync with `SteParams` in `shaders/ste_mask.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SteParams {
    /// Elements.
    pub n: u32,
    /// Index of the quantizer's active estimate in the bank.
    pub est_index: u32,
    /// Padding.
    pub _pad: [u32; 2],
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "ste_mask",
    wgsl: WGSL,
    common: &[],
    entries: &["main"],
    bindings: &[(1, "x"), (2, "grad"), (3, "est")],
    params: params_layout!(SteParams { n, est_index }),
};

pub(crate) fn launch(
    gpu: &GpuBackend,
    x: &GpuTensor,
    grad: &GpuTensor,
    bank: &GpuBank,
    quantizer: usize,
) -> Result<(), EngineError> {
    bank.config.check_index(quantizer)?;
    same_len("ste_mask", x.len, grad.len)?;
    let params = SteParams {
        n: x.len as u32,
        est_index: bank.active_scale_index(quantizer),
        _pad: [0; 2],
    };
    let groups = grid_stride_groups(x.len, 256, ELEMENTWISE_GROUPS);
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[
            ("x", x.bind()),
            ("grad", grad.bind()),
            ("est", Bind::all(&bank.est)),
        ],
        (groups, 1, 1),
    );
    Ok(())
}
