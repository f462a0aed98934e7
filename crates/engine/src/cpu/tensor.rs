//! CPU op family `TensorOps`: tensors: create, read, write, copy, elementwise, matrix products.

use super::{CpuBackend, CpuBank, CpuTensor, matmul};
use crate::{EngineError, MatmulSpec, Readback, TensorOps, check_matmul, same_len, within};

impl TensorOps for CpuBackend {
    fn upload(&self, data: &[f32]) -> Result<CpuTensor, EngineError> {
        let _op = self.timed("upload");
        Ok(CpuTensor::new(data.to_vec()))
    }

    fn zeros(&self, len: usize) -> Result<CpuTensor, EngineError> {
        let _op = self.timed("zeros");
        Ok(CpuTensor::new(vec![0.0; len]))
    }

    fn len(&self, t: &CpuTensor) -> usize {
        t.read().len()
    }

    fn write(&self, t: &CpuTensor, data: &[f32]) -> Result<(), EngineError> {
        let _op = self.timed("write");
        let mut d = t.get();
        same_len("write", d.len(), data.len())?;
        d.copy_from_slice(data);
        Ok(())
    }

    fn read(&self, t: &CpuTensor) -> Readback<Vec<f32>> {
        let _op = self.timed("read");
        Readback::ready(Ok(t.to_vec()))
    }

    fn copy_range(
        &self,
        src: &CpuTensor,
        src_at: usize,
        dst: &CpuTensor,
        dst_at: usize,
        len: usize,
    ) -> Result<(), EngineError> {
        let _op = self.timed("copy_range");
        if std::ptr::eq(src, dst) {
            let mut d = dst.get();
            within("copy_range src", d.len(), src_at, len)?;
            within("copy_range dst", d.len(), dst_at, len)?;
            d.copy_within(src_at..src_at + len, dst_at);
            return Ok(());
        }
        let s = src.read();
        let mut d = dst.get();
        within("copy_range src", s.len(), src_at, len)?;
        within("copy_range dst", d.len(), dst_at, len)?;
        d[dst_at..dst_at + len].copy_from_slice(&s[src_at..src_at + len]);
        Ok(())
    }

    fn copy(&self, src: &CpuTensor, dst: &CpuTensor) -> Result<(), EngineError> {
        let _op = self.timed("copy");
        if std::ptr::eq(src, dst) {
            return Ok(());
        }
        let s = src.read();
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
            return Err(EngineError::Shape {
                op: "matmul".into(),
                message: "C must not alias A or B".into(),
            });
        }
        let exact = |fuse: Option<usize>| fuse.is_some() || spec.round_bf16;
        if let Some(kernel) = self
            .bf16_kernel()
            .filter(|_| spec.bf16_units && exact(spec.fuse_a) && exact(spec.fuse_b))
        {
            matmul_bf16(kernel, (a, b, c), spec, bank)?;
            self.count_gemm(spec, true);
            return Ok(());
        }
        // A fused operand's fake-quantized copy, when its statistics pass left one for this
        // very tensor (not written since, same scale): taken, and given back after the
        // product (the operands are only read, so the copy stays valid for the backward
        // pass's products of the same tensor).
        let take = |t: &CpuTensor,
                    fuse: Option<usize>|
         -> Result<Option<(usize, super::Quantized)>, EngineError> {
            let (Some(q), Some(bank)) = (fuse, bank) else {
                return Ok(None);
            };
            let scale = bank.active_scale(q)?;
            Ok(bank.lock().take_quantized(q, t, scale).map(|c| (q, c)))
        };
        // The same tensor fused by the same quantizer on both sides: one operand serves both.
        let same = std::ptr::eq(a, b) && spec.fuse_a == spec.fuse_b;
        let mut cached_a = take(a, spec.fuse_a)?;
        let mut cached_b = if same { None } else { take(b, spec.fuse_b)? };
        let fused = |data: &[f32],
                     fuse: Option<usize>,
                     cached: &Option<(usize, super::Quantized)>|
         -> Result<Option<Vec<f32>>, EngineError> {
            match fuse {
                None if spec.round_bf16 => Ok(Some(
                    data.iter().map(|v| hif8lab_format::bf16_rne(*v)).collect(),
                )),
                None => Ok(None),
                Some(_) if cached.is_some() => Ok(None),
                Some(q) => {
                    let bank = bank.ok_or_else(|| EngineError::Shape {
                        op: "matmul".into(),
                        message: "fused quantization needs a bank".into(),
                    })?;
                    let mut out = vec![0.0; data.len()];
                    super::par::qdq_into(&bank.quant, data, &mut out, bank.active_scale(q)?);
                    Ok(Some(out))
                }
            }
        };
        let av = a.read();
        // A and B may be the same tensor: lock it once.
        let b_guard = if std::ptr::eq(a, b) {
            None
        } else {
            Some(b.read())
        };
        let bv: &[f32] = b_guard.as_deref().map(Vec::as_slice).unwrap_or(&av);
        let mut cv = c.get();
        check_matmul(spec, av.len(), bv.len(), cv.len())?;
        if cached_a
            .as_ref()
            .is_some_and(|(_, c)| c.data.len() != av.len())
        {
            cached_a = None;
        }
        if cached_b
            .as_ref()
            .is_some_and(|(_, c)| c.data.len() != bv.len())
        {
            cached_b = None;
        }
        let qa = fused(&av, spec.fuse_a, &cached_a)?;
        let qb = if same {
            None
        } else {
            fused(bv, spec.fuse_b, &cached_b)?
        };
        let a_in: &[f32] = match (&cached_a, &qa) {
            (Some((_, c)), _) => &c.data,
            (None, Some(v)) => v,
            (None, None) => &av,
        };
        let b_in: &[f32] = match (&cached_b, &qb) {
            _ if same => a_in,
            (Some((_, c)), _) => &c.data,
            (None, Some(v)) => v,
            (None, None) => bv,
        };
        matmul::gemm(spec, a_in, b_in, &mut cv);
        self.count_gemm(spec, false);
        drop(b_guard);
        drop(av);
        // Give the copies back (their tensors were only read: the stamps still hold).
        if let Some(bank) = bank {
            let mut inner = bank.lock();
            for (q, c) in [cached_a, cached_b].into_iter().flatten() {
                inner.quantized[q] = Some(c);
            }
        }
        Ok(())
    }

    fn fill_zero(&self, t: &CpuTensor) -> Result<(), EngineError> {
        let _op = self.timed("fill_zero");
        t.get().fill(0.0);
        Ok(())
    }

    fn add_inplace(&self, dst: &CpuTensor, src: &CpuTensor) -> Result<(), EngineError> {
        let _op = self.launched("add_inplace");
        if std::ptr::eq(dst, src) {
            super::par::pieces_mut(&mut dst.get(), |_, d| {
                for v in d.iter_mut() {
                    *v += *v;
                }
            });
            return Ok(());
        }
        let s = src.read();
        let mut d = dst.get();
        same_len("add_inplace", d.len(), s.len())?;
        super::par::pieces_mut(&mut d, |at, d| {
            let b = super::par::STREAM_BLOCK;
            for (d, s) in d.chunks_mut(b).zip(s[at..].chunks(b)) {
                super::par::will_read(s);
                super::par::will_write(d);
                for (d, s) in d.iter_mut().zip(s) {
                    *d += s;
                }
            }
        });
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

/// The product on the bf16 kernel: each fake-quantized operand as its codes `Q(x·s)` (exact
/// in bf16), each other one rounded to bf16 as the kernel packs it, and `1/(s_a·s_b)` (one
/// rounding from f64) applied to each f32 sum. The codes come from the fake-quantized copy
/// the statistics pass left (`Q(x·s)/s`, times s as the kernel packs it: exact, see
/// `bf16::Source`), or from the codec where there is none (or, never in practice, where
/// the copy cannot give them exactly).
fn matmul_bf16(
    kernel: super::bf16::Bf16Kernel,
    (a, b, c): (&CpuTensor, &CpuTensor, &CpuTensor),
    spec: &MatmulSpec,
    bank: Option<&CpuBank>,
) -> Result<(), EngineError> {
    let scale = |fuse: Option<usize>| -> Result<Option<(usize, f32)>, EngineError> {
        match fuse {
            None => Ok(None),
            Some(q) => {
                let bank = bank.ok_or_else(|| EngineError::Shape {
                    op: "matmul".into(),
                    message: "fused quantization needs a bank".into(),
                })?;
                Ok(Some((q, bank.active_scale(q)?)))
            }
        }
    };
    let (sa, sb) = (scale(spec.fuse_a)?, scale(spec.fuse_b)?);
    let take = |t: &CpuTensor, s: Option<(usize, f32)>| -> Option<(usize, super::Quantized)> {
        let ((q, scale), bank) = (s?, bank?);
        bank.lock().take_quantized(q, t, scale).map(|c| (q, c))
    };
    let same = std::ptr::eq(a, b) && spec.fuse_a == spec.fuse_b;
    // A batched product reads its codes from the codec: the kernel refuses a copy it cannot
    // read exactly batch by batch, and redoing batches already added to C would add them twice.
    let one = spec.batch == 1;
    let mut cached_a = if one { take(a, sa) } else { None };
    let mut cached_b = if same || !one { None } else { take(b, sb) };
    let av = a.read();
    let b_guard = if std::ptr::eq(a, b) {
        None
    } else {
        Some(b.read())
    };
    let bv: &[f32] = b_guard.as_deref().map(Vec::as_slice).unwrap_or(&av);
    let mut cv = c.get();
    check_matmul(spec, av.len(), bv.len(), cv.len())?;
    for (cached, len) in [(&mut cached_a, av.len()), (&mut cached_b, bv.len())] {
        if cached.as_ref().is_some_and(|(_, c)| c.data.len() != len) {
            *cached = None;
        }
    }
    let codes = |data: &[f32], s: Option<(usize, f32)>| -> Option<Vec<f32>> {
        let ((_, scale), bank) = (s?, bank?);
        let mut out = vec![0.0; data.len()];
        super::par::codes_into(&bank.quant, data, &mut out, scale);
        Some(out)
    };
    let inverse = |s: Option<(usize, f32)>| s.map_or(1.0, |(_, s)| f64::from(s));
    let factor = (1.0 / (inverse(sa) * inverse(sb))) as f32;
    // Each operand: its copy times s; else its codes from the codec; not quantized, itself.
    fn from_copy(
        cached: &Option<(usize, super::Quantized)>,
        s: Option<(usize, f32)>,
    ) -> Option<(&[f32], f32)> {
        cached
            .as_ref()
            .zip(s)
            .map(|((_, c), (_, scale))| (c.data.as_slice(), scale))
    }
    fn pick<'c>(
        cached: &'c Option<(usize, super::Quantized)>,
        fresh: &'c Option<Vec<f32>>,
        data: &'c [f32],
        s: Option<(usize, f32)>,
    ) -> (&'c [f32], f32) {
        from_copy(cached, s)
            .or(fresh.as_deref().map(|v| (v, 1.0)))
            .unwrap_or((data, 1.0))
    }
    let fresh = |cached: &Option<(usize, super::Quantized)>, data: &[f32], s| {
        if from_copy(cached, s).is_none() {
            codes(data, s)
        } else {
            None
        }
    };
    let qa = fresh(&cached_a, &av, sa);
    let qb = if same { None } else { fresh(&cached_b, bv, sb) };
    let src_a = pick(&cached_a, &qa, &av[..], sa);
    let src_b = if same {
        src_a
    } else {
        pick(&cached_b, &qb, bv, sb)
    };
    let exact = matmul::gemm_bf16(kernel, spec, src_a, src_b, &mut cv, factor);
    #[cfg(test)]
    if exact && (src_a.1 != 1.0 || src_b.1 != 1.0) {
        super::bf16::FROM_COPY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    if !exact {
        // A copy could not give its codes exactly: every code from the codec.
        let qa = codes(&av, sa);
        let qb = if same { None } else { codes(bv, sb) };
        let a_in: &[f32] = qa.as_deref().unwrap_or(&av);
        let b_in: &[f32] = match &qb {
            _ if same => a_in,
            Some(v) => v,
            None => bv,
        };
        let exact = matmul::gemm_bf16(kernel, spec, (a_in, 1.0), (b_in, 1.0), &mut cv, factor);
        debug_assert!(exact, "codes and rounded operands are always read exactly");
    }
    drop(cv);
    drop(b_guard);
    drop(av);
    // Give the copies back (their tensors were only read: the stamps still hold).
    if let Some(bank) = bank {
        let mut inner = bank.lock();
        for (q, c) in [cached_a, cached_b].into_iter().flatten() {
            inner.quantized[q] = Some(c);
        }
    }
    Ok(())
}
