//! `gpu::attention`: causal grouped-query attention forward and backward (`shaders/attention.wgsl`).

use bytemuck::{Pod, Zeroable};

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
