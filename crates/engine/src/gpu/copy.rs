//! `gpu::copy`: the plain copy kernel, bandwidth reference of the benchmark (`shaders/copy.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{ELEMENTWISE_GROUPS, Kernel, grid_stride_groups};
use super::{GpuBackend, GpuTensor};
use crate::params_layout;
use crate::{EngineError, same_len};

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

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "copy",
    wgsl: WGSL,
    common: false,
    entries: &["main"],
    bindings: &[(1, "x"), (2, "out")],
    params: params_layout!(CopyParams { n }),
};

/// Runs the plain copy kernel (the bandwidth reference of the benchmark).
pub(crate) fn launch(
    gpu: &GpuBackend,
    src: &GpuTensor,
    dst: &GpuTensor,
) -> Result<(), EngineError> {
    same_len("copy_kernel", src.len, dst.len)?;
    let params = CopyParams {
        n: src.len as u32,
        _pad: [0; 3],
    };
    let groups = grid_stride_groups(src.len, WG, ELEMENTWISE_GROUPS);
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[("x", src.bind()), ("out", dst.bind())],
        (groups, 1, 1),
    );
    Ok(())
}
