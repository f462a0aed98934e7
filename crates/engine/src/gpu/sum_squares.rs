//! `gpu::sum_squares`: deterministic sum of squares into a slot (`shaders/sum_squares.wgsl`):
//! per-workgroup sums, then a one-workgroup `finish` that adds them in a fixed order.

use bytemuck::{Pod, Zeroable};

use super::kernel::{Bind, Kernel};
use super::{GpuBackend, GpuTensor};
use crate::EngineError;
use crate::params_layout;

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
    /// Workgroups of the `main` dispatch ([`crate::cpu::sum_squares_groups`]: the CPU twin
    /// sums in the same groups).
    pub groups: u32,
    /// Padding.
    pub _pad: u32,
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "sum_squares",
    wgsl: WGSL,
    common: &[],
    entries: &["main", "finish"],
    bindings: &[(1, "x"), (2, "out"), (3, "partials")],
    params: params_layout!(SumSquaresParams { n, slot, groups }),
};

pub(crate) fn launch(
    gpu: &GpuBackend,
    x: &GpuTensor,
    out: &GpuTensor,
    slot: usize,
) -> Result<(), EngineError> {
    crate::checks::sum_squares(out.len, slot)?;
    let groups = crate::cpu::sum_squares_groups(x.len);
    let params = SumSquaresParams {
        n: x.len as u32,
        slot: slot as u32,
        groups: groups as u32,
        _pad: 0,
    };
    let partials = ("partials", Bind::all(&gpu.sum_partials));
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[("x", x.bind()), partials],
        (groups as u32, 1, 1),
    );
    gpu.dispatch(
        &KERNEL,
        "finish",
        &params,
        &[("out", out.bind()), partials],
        (1, 1, 1),
    );
    Ok(())
}
