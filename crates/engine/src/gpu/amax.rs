//! `gpu::amax`: max |x| of a tensor into the bank's measured-amax slot (`shaders/amax.wgsl`).

use bytemuck::{Pod, Zeroable};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/amax.wgsl");
/// Invocations per workgroup.
pub const WG: u32 = 256;

/// Uniform parameters; keep in sync with `AmaxParams` in `shaders/amax.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct AmaxParams {
    /// Elements.
    pub n: u32,
    /// Quantizer index.
    pub slot: u32,
    /// Padding to 16 bytes.
    pub _pad: [u32; 2],
}
