//! `gpu::matmul`: tiled register-blocked GEMM with three layouts, batching and fused
//! fake quantization (`shaders/matmul.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::QuantParams;

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/matmul.wgsl");
/// Output tile computed by one workgroup (rows, columns).
pub const TILE: (u32, u32) = (64, 64);

/// Uniform parameters; keep in sync with `MatmulParams` in `shaders/matmul.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct MatmulParams {
    /// Rows of C.
    pub m: u32,
    /// Columns of C.
    pub n: u32,
    /// Inner dimension.
    pub k: u32,
    /// 0 NN, 1 NT, 2 TN.
    pub layout: u32,
    /// Elements between consecutive A operands.
    pub batch_stride_a: u32,
    /// Elements between consecutive B operands.
    pub batch_stride_b: u32,
    /// Elements between consecutive C outputs.
    pub batch_stride_c: u32,
    /// 1: C += A·B.
    pub accumulate: u32,
    /// 1: fake-quantize A on load.
    pub fuse_a: u32,
    /// 1: fake-quantize B on load.
    pub fuse_b: u32,
    /// Scale index of A's quantizer.
    pub scale_index_a: u32,
    /// Scale index of B's quantizer.
    pub scale_index_b: u32,
    /// 1: round operands that are not fake-quantized to bf16 on load.
    pub round_bf16: u32,
    /// Padding to a 16-byte boundary.
    pub _pad: [u32; 3],
    /// Format, overflow, rounding, seed.
    pub quant: QuantParams,
}
