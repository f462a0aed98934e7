//! `gpu::rope`: rotary position embedding (rotate-half), forward or inverse (`shaders/rope.wgsl`).

use bytemuck::{Pod, Zeroable};

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
