//! `gpu::qdq`: fake-quantize a tensor with a scale read from the bank (`shaders/qdq.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{Bind, ELEMENTWISE_GROUPS, Kernel, Snippet, grid_stride_groups};
use super::{GpuBackend, GpuBank, GpuTensor};
use crate::params_layout;
use crate::{EngineError, same_len};

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

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "qdq",
    wgsl: WGSL,
    common: &[Snippet::Quant],
    entries: &["main"],
    bindings: &[(1, "x"), (2, "out"), (3, "scales")],
    params: params_layout!(QdqParams {
        n,
        scale_index,
        quant
    }),
};

pub(crate) fn launch(
    gpu: &GpuBackend,
    x: &GpuTensor,
    out: &GpuTensor,
    bank: &GpuBank,
    quantizer: usize,
) -> Result<(), EngineError> {
    bank.config.check_index(quantizer)?;
    same_len("qdq", x.len, out.len)?;
    let params = QdqParams {
        n: x.len as u32,
        scale_index: bank.active_scale_index(quantizer),
        _pad: [0; 2],
        quant: bank.quant,
    };
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[
            ("x", x.bind()),
            ("out", out.bind()),
            ("scales", Bind::all(&bank.scales)),
        ],
        (grid_stride_groups(x.len, WG, ELEMENTWISE_GROUPS), 1, 1),
    );
    Ok(())
}
