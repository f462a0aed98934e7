//! `gpu::swiglu`: SwiGLU gate forward and backward (`shaders/swiglu.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{ELEMENTWISE_GROUPS, Kernel, grid_stride_groups};
use super::{GpuBackend, GpuTensor};
use crate::EngineError;
use crate::params_layout;

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/swiglu.wgsl");

/// Uniform parameters; keep in sync with `SwigluParams` in `shaders/swiglu.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SwigluParams {
    /// Elements.
    pub n: u32,
    /// Padding.
    pub _pad: [u32; 3],
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "swiglu",
    wgsl: WGSL,
    common: &[],
    entries: &["main", "backward"],
    bindings: &[(1, "g"), (2, "u"), (3, "dy"), (4, "out"), (5, "du")],
    params: params_layout!(SwigluParams { n }),
};

/// The parameters and grid of `n` elements.
fn params(n: usize) -> (SwigluParams, u32) {
    let params = SwigluParams {
        n: n as u32,
        _pad: [0; 3],
    };
    (params, grid_stride_groups(n, 256, ELEMENTWISE_GROUPS))
}

pub(crate) fn launch(
    gpu: &GpuBackend,
    g: &GpuTensor,
    u: &GpuTensor,
    out: &GpuTensor,
) -> Result<(), EngineError> {
    crate::checks::swiglu(g.len, u.len, out.len)?;
    let (params, groups) = params(g.len);
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[("g", g.bind()), ("u", u.bind()), ("out", out.bind())],
        (groups, 1, 1),
    );
    Ok(())
}

pub(crate) fn launch_backward(
    gpu: &GpuBackend,
    g: &GpuTensor,
    u: &GpuTensor,
    dy: &GpuTensor,
    dg: &GpuTensor,
    du: &GpuTensor,
) -> Result<(), EngineError> {
    crate::checks::swiglu_backward(g.len, [u.len, dy.len, dg.len, du.len])?;
    let (params, groups) = params(g.len);
    gpu.dispatch(
        &KERNEL,
        "backward",
        &params,
        &[
            ("g", g.bind()),
            ("u", u.bind()),
            ("dy", dy.bind()),
            ("out", dg.bind()),
            ("du", du.bind()),
        ],
        (groups, 1, 1),
    );
    Ok(())
}
