//! `gpu::swiglu`: SwiGLU gate forward and backward (`shaders/swiglu.wgsl`).

use bytemuck::{Pod, Zeroable};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/swiglu.wgsl");

/// Uniform parameters; keep in sync with `SwigluParams` in `shaders/swiglu.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SwigluParams {
    /// Elements.
    pub n: u32,
    /// Padding.
    pub _pad: [u32; 3],
}
