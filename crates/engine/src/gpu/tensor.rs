//! GPU op family `TensorOps`: tensors: create, read, write, copy, elementwise, matrix products; kernel-backed operations call the launcher beside
//! their kernel.

use super::*;
use crate::{EngineError, MatmulSpec, Readback, TensorOps, same_len, within};

impl TensorOps for GpuBackend {
    fn upload(&self, data: &[f32]) -> Result<GpuTensor, EngineError> {
        let t = self.tensor(data.len())?;
        self.write(&t, data)?;
        Ok(t)
    }

    fn zeros(&self, len: usize) -> Result<GpuTensor, EngineError> {
        let t = self.tensor(len)?;
        if len > 0 {
            self.with_encoder(|encoder| encoder.clear_buffer(t.buffer(), 0, Some(t.bytes())));
        }
        Ok(t)
    }

    fn len(&self, t: &GpuTensor) -> usize {
        t.len
    }

    fn write(&self, t: &GpuTensor, data: &[f32]) -> Result<(), EngineError> {
        same_len("write", t.len, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.write_ordered(t.buffer(), 0, bytemuck::cast_slice(data));
        Ok(())
    }

    fn read(&self, t: &GpuTensor) -> Readback<Vec<f32>> {
        self.readback(&[(t.buffer(), 0, t.bytes())], |bytes| {
            bytemuck::cast_slice::<u8, f32>(bytes).to_vec()
        })
    }

    fn copy_range(
        &self,
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
            return Err(EngineError::Shape(
                "copy_range: overlapping ranges of one tensor".into(),
            ));
        }
        self.with_encoder(|encoder| {
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

    fn copy(&self, src: &GpuTensor, dst: &GpuTensor) -> Result<(), EngineError> {
        same_len("copy", src.len, dst.len)?;
        if src.len > 0 {
            self.with_encoder(|encoder| {
                encoder.copy_buffer_to_buffer(src.buffer(), 0, dst.buffer(), 0, src.bytes());
            });
        }
        Ok(())
    }

    fn matmul(
        &self,
        a: &GpuTensor,
        b: &GpuTensor,
        c: &GpuTensor,
        spec: &MatmulSpec,
        bank: Option<&GpuBank>,
    ) -> Result<(), EngineError> {
        matmul::launch(self, a, b, c, spec, bank)
    }

    fn fill_zero(&self, t: &GpuTensor) -> Result<(), EngineError> {
        if t.len > 0 {
            self.with_encoder(|encoder| encoder.clear_buffer(t.buffer(), 0, Some(t.bytes())));
        }
        Ok(())
    }

    fn add_inplace(&self, dst: &GpuTensor, src: &GpuTensor) -> Result<(), EngineError> {
        elementwise::launch_add(self, dst, src)
    }

    fn scale_inplace(&self, dst: &GpuTensor, factor: f32) -> Result<(), EngineError> {
        elementwise::launch_scale(self, dst, factor)
    }
}
