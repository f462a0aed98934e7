//! `gpu::matmul`: tiled register-blocked GEMM with three layouts, batching and fused
//! fake quantization (`shaders/matmul.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{Bind, Kernel, Snippet};
use super::{GpuBackend, GpuBank, GpuTensor};
use crate::params_layout;
use crate::{EngineError, MatmulSpec, check_matmul};

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
    pub operand_layout: u32,
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

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "matmul",
    wgsl: WGSL,
    common: &[Snippet::Quant],
    entries: &["main"],
    bindings: &[(1, "a"), (2, "b"), (3, "c"), (4, "scales")],
    params: params_layout!(MatmulParams {
        m,
        n,
        k,
        operand_layout,
        batch_stride_a,
        batch_stride_b,
        batch_stride_c,
        accumulate,
        fuse_a,
        fuse_b,
        scale_index_a,
        scale_index_b,
        round_bf16,
        quant
    }),
};

pub(crate) fn launch(
    gpu: &GpuBackend,
    a: &GpuTensor,
    b: &GpuTensor,
    c: &GpuTensor,
    spec: &MatmulSpec,
    bank: Option<&GpuBank>,
) -> Result<(), EngineError> {
    check_matmul(spec, a.len, b.len, c.len)?;
    let max_groups = gpu.limits.max_compute_workgroups_per_dimension as usize;
    if spec.batch > max_groups {
        return Err(EngineError::Shape {
            op: "matmul".into(),
            message: format!(
                "batch {} exceeds {max_groups} workgroups per dimension",
                spec.batch
            ),
        });
    }
    if spec.batch == 0 || spec.m == 0 || spec.n == 0 {
        return Ok(());
    }
    let need_bank = spec.fuse_a.is_some() || spec.fuse_b.is_some();
    let bank = match (bank, need_bank) {
        (Some(bank), _) => Some(bank),
        (None, false) => None,
        (None, true) => {
            return Err(EngineError::Shape {
                op: "matmul".into(),
                message: "fused quantization needs a bank".into(),
            });
        }
    };
    let scale_index = |fuse: Option<usize>| -> Result<u32, EngineError> {
        match (fuse, bank) {
            (Some(q), Some(bank)) => {
                bank.config.check_index(q)?;
                Ok(bank.active_scale_index(q))
            }
            _ => Ok(0),
        }
    };
    let (sa, sb, sc) = spec.sizes();
    let params = MatmulParams {
        m: spec.m as u32,
        n: spec.n as u32,
        k: spec.k as u32,
        operand_layout: spec.layout.id(),
        batch_stride_a: sa as u32,
        batch_stride_b: sb as u32,
        batch_stride_c: sc as u32,
        accumulate: u32::from(spec.accumulate),
        fuse_a: u32::from(spec.fuse_a.is_some()),
        fuse_b: u32::from(spec.fuse_b.is_some()),
        scale_index_a: scale_index(spec.fuse_a)?,
        scale_index_b: scale_index(spec.fuse_b)?,
        round_bf16: u32::from(spec.round_bf16),
        _pad: [0; 3],
        quant: bank.map(|b| b.quant).unwrap_or_default(),
    };
    let scales = bank.map(|b| &b.scales).unwrap_or(&gpu.one_scale);
    let groups = (
        (spec.n as u32).div_ceil(TILE.1),
        (spec.m as u32).div_ceil(TILE.0),
        spec.batch as u32,
    );
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[
            ("a", a.bind()),
            ("b", b.bind()),
            ("c", c.bind()),
            ("scales", Bind::all(scales)),
        ],
        groups,
    );
    Ok(())
}
