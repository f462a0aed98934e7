//! `gpu::rmsnorm`: RMSNorm forward and backward (`shaders/rmsnorm.wgsl`).

use bytemuck::{Pod, Zeroable};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/rmsnorm.wgsl");

/// Uniform parameters; keep in sync with `NormParams` in `shaders/rmsnorm.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct NormParams {
    /// Rows.
    pub rows: u32,
    /// Channels.
    pub channels: u32,
    /// Epsilon inside the square root.
    pub eps: f32,
    /// Padding.
    pub _pad: u32,
}
