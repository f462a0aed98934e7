//! `gpu::rmsnorm`: RMSNorm forward and backward (`shaders/rmsnorm.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::Kernel;
use super::{GpuBackend, GpuTensor};
use crate::EngineError;
use crate::params_layout;

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/rmsnorm.wgsl");

/// Uniform parameters; keep in sync with `NormParams` in `shaders/rmsnorm.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct NormParams {
    /// Rows.
    pub rows: u32,
    /// Channels.
    pub channels: u32,
    /// Epsilon inside the square root.
    pub eps: f32,
    /// Padding.
    pub _pad: u32,
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "rmsnorm",
    wgsl: WGSL,
    common: &[],
    entries: &["main", "backward_x", "backward_w"],
    bindings: &[(1, "x"), (2, "w"), (3, "rstd"), (4, "dy"), (5, "out")],
    params: params_layout!(NormParams {
        rows,
        channels,
        eps
    }),
};

pub(crate) fn launch(
    gpu: &GpuBackend,
    x: &GpuTensor,
    weight: &GpuTensor,
    out: &GpuTensor,
    rstd: &GpuTensor,
    eps: f32,
) -> Result<(), EngineError> {
    let rows = crate::checks::rmsnorm(x.len, weight.len, out.len, rstd.len)?;
    let params = NormParams {
        rows: rows as u32,
        channels: weight.len as u32,
        eps,
        _pad: 0,
    };
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[
            ("x", x.bind()),
            ("w", weight.bind()),
            ("rstd", rstd.bind()),
            ("out", out.bind()),
        ],
        ((rows as u32).div_ceil(64), 1, 1),
    );
    Ok(())
}

pub(crate) fn launch_backward(
    gpu: &GpuBackend,
    x: &GpuTensor,
    weight: &GpuTensor,
    rstd: &GpuTensor,
    dy: &GpuTensor,
    dx: &GpuTensor,
    dweight: &GpuTensor,
) -> Result<(), EngineError> {
    let rows = crate::checks::rmsnorm_backward(
        [x.len, weight.len, rstd.len],
        [dy.len, dx.len, dweight.len],
    )?;
    let params = NormParams {
        rows: rows as u32,
        channels: weight.len as u32,
        eps: 0.0,
        _pad: 0,
    };
    gpu.dispatch(
        &KERNEL,
        "backward_x",
        &params,
        &[
            ("x", x.bind()),
            ("w", weight.bind()),
            ("rstd", rstd.bind()),
            ("dy", dy.bind()),
            ("out", dx.bind()),
        ],
        ((rows as u32).div_ceil(64), 1, 1),
    );
    gpu.dispatch(
        &KERNEL,
        "backward_w",
        &params,
        &[
            ("x", x.bind()),
            ("rstd", rstd.bind()),
            ("dy", dy.bind()),
            ("out", dweight.bind()),
        ],
        ((weight.len as u32).div_ceil(64), 1, 1),
    );
    Ok(())
}
