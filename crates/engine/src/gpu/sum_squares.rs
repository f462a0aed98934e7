//! `gpu::sum_squares`: deterministic sum of squares into a slot (`shaders/sum_squares.wgsl`).

use bytemuck::{Pod, Zeroable};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/sum_squares.wgsl");

/// Uniform parameters; keep in sync with `SumSquaresParams` in `shaders/sum_squares.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SumSquaresParams {
    /// Elements.
    pub n: u32,
    /// Output slot.
    pub slot: u32,
    /// Padding.
    pub _pad: [u32; 2],
}
