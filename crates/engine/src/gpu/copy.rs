//! `gpu::copy`: the plain copy kernel, bandwidth reference of the benchmark (`shaders/copy.wgsl`).

use bytemuck::{Pod, Zeroable};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/copy.wgsl");
/// Invocations per workgroup.
pub const WG: u32 = 256;

/// Uniform parameters; keep in sync with `CopyParams` in `shaders/copy.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct CopyParams {
    /// Elements.
    pub n: u32,
    /// Padding to 16 bytes.
    pub _pad: [u32; 3],
}
