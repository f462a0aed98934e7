//! `gpu::rope`: rotary position embedding (rotate-half), forward or inverse (`shaders/rope.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{ELEMENTWISE_GROUPS, Kernel, grid_stride_groups};
use super::{GpuBackend, GpuTensor};
use crate::params_layout;
use crate::{EngineError, RopeShape};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/rope.wgsl");

/// Uniform parameters; keep in sync with `RopeParams` in `shaders/rope.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct RopeParams {
    /// Rows (batch·seq).
    pub rows: u32,
    /// Heads.
    pub heads: u32,
    /// Head dimension (even).
    pub head_dim: u32,
    /// Sequence length (position = row % seq_len).
    pub seq_len: u32,
    /// 1: rotate by −θ.
    pub inverse: u32,
    /// Padding.
    pub _pad: [u32; 3],
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "rope",
    wgsl: WGSL,
    common: &[],
    entries: &["main"],
    bindings: &[(1, "x"), (2, "table"), (3, "out")],
    params: params_layout!(RopeParams {
        rows,
        heads,
        head_dim,
        seq_len,
        inverse
    }),
};

pub(crate) fn launch(
    gpu: &GpuBackend,
    x: &GpuTensor,
    table: &GpuTensor,
    out: &GpuTensor,
    shape: RopeShape,
    inverse: bool,
) -> Result<(), EngineError> {
    crate::checks::rope(x.len, out.len, table.len, &shape)?;
    let n = shape.rows * shape.heads * shape.head_dim;
    let params = RopeParams {
        rows: shape.rows as u32,
        heads: shape.heads as u32,
        head_dim: shape.head_dim as u32,
        seq_len: shape.seq as u32,
        inverse: u32::from(inverse),
        _pad: [0; 3],
    };
    let groups = grid_stride_groups(n / 2, 256, ELEMENTWISE_GROUPS);
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[
            ("x", x.bind()),
            ("table", table.bind()),
            ("out", out.bind()),
        ],
        (groups, 1, 1),
    );
    Ok(())
}
