//! `gpu::elementwise`: in-place add and scale (`shaders/elementwise.wgsl`).

use bytemuck::{Pod, Zeroable};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/elementwise.wgsl");

/// Uniform parameters; keep in sync with `ElementwiseParams` in `shaders/elementwise.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ElementwiseParams {
    /// Elements.
    pub n: u32,
    /// Factor of scale_inplace.
    pub factor: f32,
    /// Padding.
    pub _pad: [u32; 2],
}
