//! `gpu::cross_entropy`: fused softmax cross-entropy forward and backward (`shaders/cross_entropy.wgsl`).

use bytemuck::{Pod, Zeroable};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/cross_entropy.wgsl");

/// Uniform parameters; keep in sync with `CeParams` in `shaders/cross_entropy.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CeParams {
    /// Rows.
    pub rows: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Scale of dlogits (1 / (rows · accumulation)).
    pub grad_scale: f32,
    /// Padding.
    pub _pad: u32,
}
