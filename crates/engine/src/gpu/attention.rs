//! `gpu::attention`: causal grouped-query attention forward and backward (`shaders/attention.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::Kernel;
use super::{GpuBackend, GpuTensor};
use crate::params_layout;
use crate::{AttentionShape, EngineError};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/attention.wgsl");

/// Uniform parameters; keep in sync with `AttentionParams` in `shaders/attention.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AttentionParams {
    /// Batch.
    pub batch: u32,
    /// Sequence length.
    pub seq: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Head dimension.
    pub head_dim: u32,
    /// Score scale 1/sqrt(head_dim).
    pub scale: f32,
    /// Padding.
    pub _pad: [u32; 2],
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "attention",
    wgsl: WGSL,
    common: &[],
    entries: &["main", "backward_q", "backward_kv"],
    bindings: &[
        (1, "q"),
        (2, "k"),
        (3, "v"),
        (4, "probs"),
        (5, "dout"),
        (6, "dscores"),
        (7, "out_a"),
        (8, "out_b"),
    ],
    params: params_layout!(AttentionParams {
        batch,
        seq,
        heads,
        kv_heads,
        head_dim,
        scale
    }),
};

pub(crate) fn launch(
    gpu: &GpuBackend,
    q: &GpuTensor,
    k: &GpuTensor,
    v: &GpuTensor,
    out: &GpuTensor,
    probs: &GpuTensor,
    shape: AttentionShape,
) -> Result<(), EngineError> {
    crate::checks::attention_shape(&shape)?;
    crate::checks::attention(&shape, [q.len, k.len, v.len, out.len, probs.len])?;
    let params = attention_params(&shape);
    let rows = (shape.batch * shape.heads * shape.seq) as u32;
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[
            ("q", q.bind()),
            ("k", k.bind()),
            ("v", v.bind()),
            ("probs", probs.bind()),
            ("out_a", out.bind()),
        ],
        (rows.div_ceil(64), 1, 1),
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)] // the trait method's arguments
pub(crate) fn launch_backward(
    gpu: &GpuBackend,
    q: &GpuTensor,
    k: &GpuTensor,
    v: &GpuTensor,
    probs: &GpuTensor,
    dout: &GpuTensor,
    dscores: &GpuTensor,
    dq: &GpuTensor,
    dk: &GpuTensor,
    dv: &GpuTensor,
    shape: AttentionShape,
) -> Result<(), EngineError> {
    crate::checks::attention_shape(&shape)?;
    crate::checks::attention_backward(&shape, [dscores.len, dq.len, dk.len, dv.len, dout.len])?;
    let params = attention_params(&shape);
    let q_rows = (shape.batch * shape.heads * shape.seq) as u32;
    let kv_rows = (shape.batch * shape.kv_heads * shape.seq) as u32;
    gpu.dispatch(
        &KERNEL,
        "backward_q",
        &params,
        &[
            ("k", k.bind()),
            ("v", v.bind()),
            ("probs", probs.bind()),
            ("dout", dout.bind()),
            ("dscores", dscores.bind()),
            ("out_a", dq.bind()),
        ],
        (q_rows.div_ceil(64), 1, 1),
    );
    gpu.dispatch(
        &KERNEL,
        "backward_kv",
        &params,
        &[
            ("q", q.bind()),
            ("probs", probs.bind()),
            ("dout", dout.bind()),
            ("dscores", dscores.bind()),
            ("out_a", dk.bind()),
            ("out_b", dv.bind()),
        ],
        (kv_rows.div_ceil(64), 1, 1),
    );
    Ok(())
}

fn attention_params(shape: &AttentionShape) -> AttentionParams {
    AttentionParams {
        batch: shape.batch as u32,
        seq: shape.seq as u32,
        heads: shape.heads as u32,
        kv_heads: shape.kv_heads as u32,
        head_dim: shape.head_dim as u32,
        scale: shape.scale(),
        _pad: [0; 2],
    }
}
