//! `gpu::attention_cached`: attention of new rows over a key/value cache
//! (`shaders/attention_cached.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{Kernel, Snippet};
use super::{GpuBackend, GpuTensor};
use crate::params_layout;
use crate::{CachedAttentionShape, EngineError};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/attention_cached.wgsl");

/// Uniform parameters; keep in sync with `CachedAttentionParams` in
/// `shaders/attention_cached.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CachedAttentionParams {
    /// Sequences.
    pub batch: u32,
    /// Positions in the cache before these rows.
    pub past: u32,
    /// New rows per sequence.
    pub new_rows: u32,
    /// Cache positions per sequence.
    pub capacity: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Head dimension.
    pub head_dim: u32,
    /// Score scale 1/sqrt(head_dim).
    pub scale: f32,
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "attention_cached",
    wgsl: WGSL,
    common: &[Snippet::Reduce],
    entries: &["main"],
    bindings: &[(1, "q"), (2, "k"), (3, "v"), (4, "scores"), (5, "out")],
    params: params_layout!(CachedAttentionParams {
        batch,
        past,
        new_rows,
        capacity,
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
    scores: &GpuTensor,
    shape: CachedAttentionShape,
) -> Result<(), EngineError> {
    shape.check()?;
    crate::checks::attention_cached(&shape, [q.len, k.len, v.len, out.len, scores.len])?;
    let params = CachedAttentionParams {
        batch: shape.batch as u32,
        past: shape.past as u32,
        new_rows: shape.new as u32,
        capacity: shape.capacity as u32,
        heads: shape.heads as u32,
        kv_heads: shape.kv_heads as u32,
        head_dim: shape.head_dim as u32,
        scale: shape.scale(),
    };
    let rows = (shape.batch * shape.heads * shape.new) as u32;
    if rows == 0 {
        return Ok(());
    }
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[
            ("q", q.bind()),
            ("k", k.bind()),
            ("v", v.bind()),
            ("scores", scores.bind()),
            ("out", out.bind()),
        ],
        (rows.min(65535), rows.div_ceil(65535), 1),
    );
    Ok(())
}
