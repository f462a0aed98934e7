//! `gpu::elementwise`: in-place add and scale, and the plain copy that is the benchmark's
//! bandwidth reference (`shaders/elementwise.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{ELEMENTWISE_GROUPS, Kernel, grid_stride_groups};
use super::{GpuBackend, GpuTensor};
use crate::params_layout;
use crate::{EngineError, same_len};

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/elementwise.wgsl");

/// Uniform parameters; keep in sync with `ElementwiseParams` in `shaders/elementwise.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ElementwiseParams {
    /// Elements.
    pub n: u32,
    /// Factor of scale_inplace.
    pub factor: f32,
    /// Padding.
    pub _pad: [u32; 2],
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "elementwise",
    wgsl: WGSL,
    common: &[],
    entries: &["add_inplace", "scale_inplace", "copy"],
    bindings: &[(1, "src"), (2, "dst")],
    params: params_layout!(ElementwiseParams { n, factor }),
};

/// `dst += src`.
pub(crate) fn launch_add(
    gpu: &GpuBackend,
    dst: &GpuTensor,
    src: &GpuTensor,
) -> Result<(), EngineError> {
    same_len("add_inplace", dst.len, src.len)?;
    launch_entry(gpu, "add_inplace", dst, Some(src), 1.0);
    Ok(())
}

/// `dst *= factor`.
pub(crate) fn launch_scale(
    gpu: &GpuBackend,
    dst: &GpuTensor,
    factor: f32,
) -> Result<(), EngineError> {
    launch_entry(gpu, "scale_inplace", dst, None, factor);
    Ok(())
}

/// `dst = src` by the kernel (the bandwidth reference of `hif8lab bench kernels`).
pub(crate) fn launch_copy(
    gpu: &GpuBackend,
    src: &GpuTensor,
    dst: &GpuTensor,
) -> Result<(), EngineError> {
    same_len("copy_kernel", src.len, dst.len)?;
    launch_entry(gpu, "copy", dst, Some(src), 1.0);
    Ok(())
}

fn launch_entry(
    gpu: &GpuBackend,
    entry: &str,
    dst: &GpuTensor,
    src: Option<&GpuTensor>,
    factor: f32,
) {
    let params = ElementwiseParams {
        n: dst.len as u32,
        factor,
        _pad: [0; 2],
    };
    let groups = grid_stride_groups(dst.len, 256, ELEMENTWISE_GROUPS);
    let mut bindings = vec![("dst", dst.bind())];
    if let Some(src) = src {
        bindings.push(("src", src.bind()));
    }
    gpu.dispatch(&KERNEL, entry, &params, &bindings, (groups, 1, 1));
}
