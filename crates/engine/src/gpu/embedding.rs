//! `gpu::embedding`: token embedding gather and scatter-add backward (`shaders/embedding.wgsl`).

use bytemuck::{Pod, Zeroable};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/embedding.wgsl");

/// Uniform parameters; keep in sync with `EmbeddingParams` in `shaders/embedding.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct EmbeddingParams {
    /// Tokens (rows).
    pub tokens: u32,
    /// Channels.
    pub channels: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Padding.
    pub _pad: u32,
}
