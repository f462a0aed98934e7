//! CPU op family `TensorOps`: tensors: create, read, write, copy, elementwise, matrix products.

use std::sync::Mutex;

use super::{CpuBackend, CpuBank, CpuTensor, matmul};
use crate::{EngineError, MatmulSpec, Readback, TensorOps, check_matmul, same_len};

impl TensorOps for CpuBackend {
    fn upload(&self, data: &[f32]) -> Result<CpuTensor, EngineError> {
        Ok(CpuTensor {
            data: Mutex::new(data.to_vec()),
        })
    }

    fn zeros(&self, len: usize) -> Result<CpuTensor, EngineError> {
        Ok(CpuTensor {
            data: Mutex::new(vec![0.0; len]),
        })
    }

    fn len(&self, t: &CpuTensor) -> usize {
        t.get().len()
    }

    fn write(&self, t: &CpuTensor, data: &[f32]) -> Result<(), EngineError> {
        let mut d = t.get();
        same_len("write", d.len(), data.len())?;
        d.copy_from_slice(data);
        Ok(())
    }

    fn read(&self, t: &CpuTensor) -> Readback<Vec<f32>> {
        Readback::ready(Ok(t.to_vec()))
    }

    fn copy(&self, src: &CpuTensor, dst: &CpuTensor) -> Result<(), EngineError> {
        if std::ptr::eq(src, dst) {
            return Ok(());
        }
        let s = src.get();
        let mut d = dst.get();
        same_len("copy", s.len(), d.len())?;
        d.copy_from_slice(&s);
        Ok(())
    }

    fn matmul(
        &self,
        a: &CpuTensor,
        b: &CpuTensor,
        c: &CpuTensor,
        spec: &MatmulSpec,
        bank: Option<&CpuBank>,
    ) -> Result<(), EngineError> {
        let _op = self.launched("matmul");
        if std::ptr::eq(a, c) || std::ptr::eq(b, c) {
            return Err(EngineError::Shape("matmul: C must not alias A or B".into()));
        }
        let fused = |data: &[f32], fuse: Option<usize>| -> Result<Option<Vec<f32>>, EngineError> {
            match fuse {
                None if spec.round_bf16 => Ok(Some(
                    data.iter().map(|v| hif8lab_format::bf16_rne(*v)).collect(),
                )),
                None => Ok(None),
                Some(q) => {
                    let bank = bank.ok_or_else(|| {
                        EngineError::Shape("matmul: fused quantization needs a bank".into())
                    })?;
                    let mut out = vec![0.0; data.len()];
                    super::par::qdq_into(&bank.quant, data, &mut out, bank.active_scale(q)?);
                    Ok(Some(out))
                }
            }
        };
        let av = a.get();
        // A and B may be the same tensor: lock it once.
        let b_guard = if std::ptr::eq(a, b) {
            None
        } else {
            Some(b.get())
        };
        let bv: &[f32] = b_guard.as_deref().map(Vec::as_slice).unwrap_or(&av);
        let mut cv = c.get();
        check_matmul(spec, av.len(), bv.len(), cv.len())?;
        let qa = fused(&av, spec.fuse_a)?;
        let qb = fused(bv, spec.fuse_b)?;
        matmul::gemm(
            spec,
            qa.as_deref().unwrap_or(&av),
            qb.as_deref().unwrap_or(bv),
            &mut cv,
        );
        Ok(())
    }

    fn fill_zero(&self, t: &CpuTensor) -> Result<(), EngineError> {
        t.get().fill(0.0);
        Ok(())
    }

    fn add_inplace(&self, dst: &CpuTensor, src: &CpuTensor) -> Result<(), EngineError> {
        let _op = self.launched("add_inplace");
        let s = src.get().clone();
        let mut d = dst.get();
        same_len("add_inplace", d.len(), s.len())?;
        for (d, s) in d.iter_mut().zip(&s) {
            *d += s;
        }
        Ok(())
    }

    fn scale_inplace(&self, dst: &CpuTensor, factor: f32) -> Result<(), EngineError> {
        let _op = self.launched("scale_inplace");
        for d in dst.get().iter_mut() {
            *d *= factor;
        }
        Ok(())
    }
}
