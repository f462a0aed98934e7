//! The GPU's `TensorOps` without a kernel of their own: tensors created, written, read,
//! copied and cleared through wgpu's buffer commands (the others have a launcher beside
//! their kernel; `crate::ops` declares which is which).

use super::*;
use crate::{EngineError, Readback, same_len, within};

pub(crate) fn upload(gpu: &GpuBackend, data: &[f32]) -> Result<GpuTensor, EngineError> {
    let t = gpu.tensor(data.len())?;
    write(gpu, &t, data)?;
    Ok(t)
}

pub(crate) fn zeros(gpu: &GpuBackend, len: usize) -> Result<GpuTensor, EngineError> {
    let t = gpu.tensor(len)?;
    if len > 0 {
        gpu.with_encoder(|encoder| encoder.clear_buffer(t.buffer(), 0, Some(t.bytes())));
    }
    Ok(t)
}

pub(crate) fn len(_: &GpuBackend, t: &GpuTensor) -> usize {
    t.len
}

pub(crate) fn write(gpu: &GpuBackend, t: &GpuTensor, data: &[f32]) -> Result<(), EngineError> {
    same_len("write", t.len, data.len())?;
    if data.is_empty() {
        return Ok(());
    }
    gpu.write_ordered(t.buffer(), 0, bytemuck::cast_slice(data));
    Ok(())
}

pub(crate) fn read(gpu: &GpuBackend, t: &GpuTensor) -> Readback<Vec<f32>> {
    gpu.readback(&[(t.buffer(), 0, t.bytes())], |bytes| {
        bytemuck::cast_slice::<u8, f32>(bytes).to_vec()
    })
}

pub(crate) fn copy_range(
    gpu: &GpuBackend,
    src: &GpuTensor,
    src_at: usize,
    dst: &GpuTensor,
    dst_at: usize,
    len: usize,
) -> Result<(), EngineError> {
    within("copy_range src", src.len, src_at, len)?;
    within("copy_range dst", dst.len, dst_at, len)?;
    if len == 0 {
        return Ok(());
    }
    if std::ptr::eq(src, dst) && src_at.abs_diff(dst_at) < len {
        return Err(EngineError::Shape {
            op: "copy_range".into(),
            message: "overlapping ranges of one tensor".into(),
        });
    }
    gpu.with_encoder(|encoder| {
        encoder.copy_buffer_to_buffer(
            src.buffer(),
            src_at as u64 * 4,
            dst.buffer(),
            dst_at as u64 * 4,
            len as u64 * 4,
        );
    });
    Ok(())
}

pub(crate) fn copy(gpu: &GpuBackend, src: &GpuTensor, dst: &GpuTensor) -> Result<(), EngineError> {
    same_len("copy", src.len, dst.len)?;
    if src.len > 0 {
        gpu.with_encoder(|encoder| {
            encoder.copy_buffer_to_buffer(src.buffer(), 0, dst.buffer(), 0, src.bytes());
        });
    }
    Ok(())
}

pub(crate) fn fill_zero(gpu: &GpuBackend, t: &GpuTensor) -> Result<(), EngineError> {
    if t.len > 0 {
        gpu.with_encoder(|encoder| encoder.clear_buffer(t.buffer(), 0, Some(t.bytes())));
    }
    Ok(())
}
