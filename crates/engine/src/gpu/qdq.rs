//! `gpu::qdq`: fake-quantize a tensor with a scale read from the bank (`shaders/qdq.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::QuantParams;

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/qdq.wgsl");
/// Invocations per workgroup (the shader's `WG` override default).
pub const WG: u32 = 256;

/// Uniform parameters; keep in sync with `QdqParams` in `shaders/qdq.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct QdqParams {
    /// Elements.
    pub n: u32,
    /// Index into the bank's scale array.
    pub scale_index: u32,
    /// Padding to 16 bytes.
    pub _pad: [u32; 2],
    /// Format, overflow, rounding, seed.
    pub quant: QuantParams,
}
