//! `gpu::sum_squares`: deterministic sum of squares into a slot (`shaders/sum_squares.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::Kernel;
use super::{GpuBackend, GpuTensor};
use crate::params_layout;
use crate::{EngineError, at_least};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/sum_squares.wgsl");

/// Uniform parameters; keep in sync with `SumSquaresParams` in `shaders/sum_squares.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SumSquaresParams {
    /// Elements.
    pub n: u32,
    /// Output slot.
    pub slot: u32,
    /// Padding.
    pub _pad: [u32; 2],
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "sum_squares",
    wgsl: WGSL,
    common: false,
    entries: &["main"],
    bindings: &[(1, "x"), (2, "out")],
    params: params_layout!(SumSquaresParams { n, slot }),
};

pub(crate) fn launch(
    gpu: &GpuBackend,
    x: &GpuTensor,
    out: &GpuTensor,
    slot: usize,
) -> Result<(), EngineError> {
    at_least("sum_squares out", out.len, slot + 1)?;
    let params = SumSquaresParams {
        n: x.len as u32,
        slot: slot as u32,
        _pad: [0; 2],
    };
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[("x", x.bind()), ("out", out.bind())],
        (1, 1, 1),
    );
    Ok(())
}
