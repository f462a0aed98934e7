//! `gpu::cross_entropy`: fused softmax cross-entropy forward and backward (`shaders/cross_entropy.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{Kernel, Snippet};
use super::{GpuBackend, GpuTensor};
use crate::EngineError;
use crate::params_layout;

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/cross_entropy.wgsl");

/// Uniform parameters; keep in sync with `CeParams` in `shaders/cross_entropy.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CeParams {
    /// Rows.
    pub rows: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Scale of dlogits (1 / (rows · accumulation)).
    pub grad_scale: f32,
    /// 1: write dlogits; 0: the losses only (evaluation).
    pub gradient: u32,
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "cross_entropy",
    wgsl: WGSL,
    common: &[Snippet::Reduce],
    entries: &["main"],
    bindings: &[(1, "logits"), (2, "targets"), (3, "losses"), (4, "dlogits")],
    params: params_layout!(CeParams {
        rows,
        vocab,
        grad_scale,
        gradient
    }),
};

pub(crate) fn launch(
    gpu: &GpuBackend,
    logits: &GpuTensor,
    targets: &GpuTensor,
    losses: &GpuTensor,
    dlogits: &GpuTensor,
    grad_scale: f32,
) -> Result<(), EngineError> {
    crate::checks::cross_entropy(logits.len, targets.len, losses.len, dlogits.len)?;
    let gradient = dlogits.len > 0;
    let params = CeParams {
        rows: targets.len as u32,
        vocab: (logits.len / targets.len) as u32,
        grad_scale,
        gradient: u32::from(gradient),
    };
    // Losses only: a one-element stand-in is bound where dlogits would be (never written).
    let stand_in;
    let dlogits = if gradient {
        dlogits
    } else {
        stand_in = gpu.tensor(1)?;
        &stand_in
    };
    gpu.dispatch(
        &KERNEL,
        "main",
        &params,
        &[
            ("logits", logits.bind()),
            ("targets", targets.bind()),
            ("losses", losses.bind()),
            ("dlogits", dlogits.bind()),
        ],
        {
            let rows = targets.len as u32;
            (rows.min(65535), rows.div_ceil(65535), 1)
        },
    );
    Ok(())
}
