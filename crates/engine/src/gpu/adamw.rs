//! `gpu::adamw`: AdamW with global-norm clipping read from the GPU (`shaders/adamw.wgsl`).

use bytemuck::{Pod, Zeroable};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/adamw.wgsl");

/// Uniform parameters; keep in sync with `AdamParams` in `shaders/adamw.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AdamParams {
    /// Elements.
    pub n: u32,
    /// Entries of the norms buffer to sum.
    pub n_norms: u32,
    /// Learning rate.
    pub lr: f32,
    /// β1.
    pub beta1: f32,
    /// β2.
    pub beta2: f32,
    /// ε.
    pub eps: f32,
    /// Decoupled weight decay.
    pub weight_decay: f32,
    /// 1 − β1^t.
    pub bias_correction1: f32,
    /// 1 − β2^t.
    pub bias_correction2: f32,
    /// Clip threshold (≤ 0: no clipping).
    pub max_norm: f32,
    /// Padding.
    pub _pad: [u32; 2],
}
