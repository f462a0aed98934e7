//! `gpu::amax`: max |x| of a tensor into the bank's measured-amax slot (`shaders/amax.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{Bind, Kernel};
use super::{GpuBackend, GpuBank, GpuTensor};
use crate::EngineError;
use crate::params_layout;

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

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "amax",
    wgsl: WGSL,
    common: &[],
    entries: &["main"],
    bindings: &[(1, "x"), (2, "amax_bits")],
    params: params_layout!(AmaxParams { n, slot }),
};

/// Records one amax measurement of `x` into the quantizer's bank slot.
pub(crate) fn launch(
    gpu: &GpuBackend,
    x: &GpuTensor,
    bank: &GpuBank,
    quantizer: usize,
) -> Result<(), EngineError> {
    bank.config.check_index(quantizer)?;
    let params = AmaxParams {
        n: x.len as u32,
        slot: quantizer as u32,
        _pad: [0; 2],
    };
    let out = [("amax_bits", Bind::all(&bank.amax_bits))];
    let slot = (&bank.amax_bits, quantizer as u64 * 4, Some(4));
    gpu.reduce(&KERNEL, WG, &params, x, &out, slot);
    Ok(())
}
