//! `gpu::embedding`: token embedding gather and scatter-add backward (`shaders/embedding.wgsl`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{ELEMENTWISE_GROUPS, Kernel, grid_stride_groups};
use super::{GpuBackend, GpuTensor};
use crate::EngineError;
use crate::params_layout;

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/embedding.wgsl");

/// Uniform parameters; keep in sync with `EmbeddingParams` in `shaders/embedding.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct EmbeddingParams {
    /// Tokens (rows).
    pub tokens: u32,
    /// Channels.
    pub channels: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Padding.
    pub _pad: u32,
}

/// The kernel, as the registry knows it.
pub const KERNEL: Kernel = Kernel {
    name: "embedding",
    wgsl: WGSL,
    common: &[],
    entries: &["main", "backward"],
    bindings: &[(1, "tokens"), (2, "src"), (3, "dst")],
    params: params_layout!(EmbeddingParams {
        tokens,
        channels,
        vocab
    }),
};

pub(crate) fn launch(
    gpu: &GpuBackend,
    tokens: &GpuTensor,
    table: &GpuTensor,
    out: &GpuTensor,
    channels: usize,
) -> Result<(), EngineError> {
    let vocab = crate::checks::embedding(table.len, out.len, tokens.len, channels)?;
    dispatch(gpu, "main", tokens, (vocab, channels), table, out);
    Ok(())
}

pub(crate) fn launch_backward(
    gpu: &GpuBackend,
    tokens: &GpuTensor,
    dout: &GpuTensor,
    dtable: &GpuTensor,
    channels: usize,
) -> Result<(), EngineError> {
    let vocab = crate::checks::embedding_backward(dtable.len, dout.len, tokens.len, channels)?;
    dispatch(gpu, "backward", tokens, (vocab, channels), dout, dtable);
    Ok(())
}

/// One launch of `entry` (the gather `main` or the scatter-add `backward`) over a table of
/// `vocab × channels`: `src` read, `dst` written, one lane per (token, channel).
fn dispatch(
    gpu: &GpuBackend,
    entry: &'static str,
    tokens: &GpuTensor,
    (vocab, channels): (usize, usize),
    src: &GpuTensor,
    dst: &GpuTensor,
) {
    let params = EmbeddingParams {
        tokens: tokens.len as u32,
        channels: channels as u32,
        vocab: vocab as u32,
        _pad: 0,
    };
    let groups = grid_stride_groups(tokens.len * channels, 256, ELEMENTWISE_GROUPS);
    gpu.dispatch(
        &KERNEL,
        entry,
        &params,
        &[
            ("tokens", tokens.bind()),
            ("src", src.bind()),
            ("dst", dst.bind()),
        ],
        (groups, 1, 1),
    );
}
