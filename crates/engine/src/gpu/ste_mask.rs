//! `gpu::ste_mask`: the clipped straight-through estimator's mask (`shaders/ste_mask.wgsl`).

use bytemuck::{Pod, Zeroable};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/ste_mask.wgsl");

/// Uniform parameters; keep in sync with `SteParams` in `shaders/ste_mask.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SteParams {
    /// Elements.
    pub n: u32,
    /// Index of the quantizer's active estimate in the bank.
    pub est_index: u32,
    /// Padding.
    pub _pad: [u32; 2],
}
