//! The CPU backend: plain, readable Rust. It is the **oracle** every GPU kernel is tested
//! against (formats from `hif8lab-format`, scaling and statistics from `hif8lab-scaling`,
//! GEMM from the `gemm` crate) and the fallback where WebGPU is missing.

mod matmul;
mod ops;

use std::sync::Mutex;

use hif8lab_format::FakeQuant;
use hif8lab_scaling::QuantizerState;
use hif8lab_scaling::stats::{Threshold, amax_and_nonfinite, tensor_stats};

use crate::bank::{BankConfig, BankSnapshot, QuantizerSnapshot, StatsSnapshot};
use crate::{
    AdamHyper, AttentionShape, Backend, BackendInfo, Counters, EngineError, MatmulSpec, Readback,
    RopeShape, StepReadback, at_least, check_matmul, rows_of, same_len,
};

/// A CPU tensor: a flat f32 vector behind a lock (outputs are written through `&`).
#[derive(Debug, Default)]
pub struct CpuTensor {
    data: Mutex<Vec<f32>>,
}

impl CpuTensor {
    fn get(&self) -> std::sync::MutexGuard<'_, Vec<f32>> {
        self.data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A copy of the contents.
    pub fn to_vec(&self) -> Vec<f32> {
        self.get().clone()
    }
}

struct BankInner {
    states: Vec<QuantizerState>,
    measured: Vec<f32>,
    est: Vec<Vec<f32>>,
    stats: Vec<StatsSnapshot>,
    histogram: Option<crate::BankHistogram>,
}

/// A CPU quantizer bank: one [`QuantizerState`] per quantizer.
pub struct CpuBank {
    config: BankConfig,
    quant: FakeQuant,
    k: usize,
    active: usize,
    inner: Mutex<BankInner>,
}

impl CpuBank {
    fn lock(&self) -> std::sync::MutexGuard<'_, BankInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn active_scale(&self, quantizer: usize) -> Result<f32, EngineError> {
        self.config.check_index(quantizer)?;
        Ok(self.lock().states[quantizer].scales()[self.active])
    }

    fn initial_est(&self) -> Vec<f32> {
        let rule = self.config.scaling.rule();
        vec![rule.implied_est(1.0); self.k]
    }
}

/// The CPU backend.
#[derive(Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    /// A CPU backend.
    pub fn new() -> Self {
        CpuBackend
    }
}

impl Backend for CpuBackend {
    type Tensor = CpuTensor;
    type Bank = CpuBank;

    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: "cpu",
            adapter: cpu_name(),
            api: "native".into(),
            device_type: "Cpu".into(),
            memory: crate::MemoryLimits::host(),
        }
    }

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

    fn new_bank(&self, config: &BankConfig) -> Result<CpuBank, EngineError> {
        config.validate()?;
        let k = config.estimators();
        let state = QuantizerState::new(&config.scaling);
        let bank = CpuBank {
            quant: config.quant(),
            k,
            active: state.active_index(),
            config: config.clone(),
            inner: Mutex::new(BankInner {
                states: vec![state; config.quantizers],
                measured: vec![0.0; config.quantizers],
                est: Vec::new(),
                stats: vec![StatsSnapshot::default(); config.quantizers],
                histogram: None,
            }),
        };
        let est = bank.initial_est();
        bank.lock().est = vec![est; config.quantizers];
        Ok(bank)
    }

    fn set_scales(&self, bank: &CpuBank, scales: &[f32]) -> Result<(), EngineError> {
        same_len("set_scales", scales.len(), bank.config.quantizers * bank.k)?;
        let rule = bank.config.scaling.rule();
        let mut inner = bank.lock();
        for (q, chunk) in scales.chunks(bank.k).enumerate() {
            inner.states[q].set_scales(chunk);
            inner.est[q] = chunk.iter().map(|s| rule.implied_est(*s)).collect();
        }
        Ok(())
    }

    fn qdq(
        &self,
        x: &CpuTensor,
        out: &CpuTensor,
        bank: &CpuBank,
        quantizer: usize,
    ) -> Result<(), EngineError> {
        let scale = bank.active_scale(quantizer)?;
        if std::ptr::eq(x, out) {
            bank.quant.qdq_slice(&mut out.get(), scale);
            return Ok(());
        }
        let src = x.get();
        let mut dst = out.get();
        same_len("qdq", src.len(), dst.len())?;
        bank.quant.qdq_into(&src, &mut dst, scale);
        Ok(())
    }

    fn amax(&self, x: &CpuTensor, bank: &CpuBank, quantizer: usize) -> Result<(), EngineError> {
        bank.config.check_index(quantizer)?;
        let (amax, _) = amax_and_nonfinite(&x.get());
        bank.lock().measured[quantizer] = amax;
        Ok(())
    }

    fn scale_update(&self, bank: &CpuBank, first: usize, count: usize) -> Result<(), EngineError> {
        if count == 0 {
            return Ok(());
        }
        bank.config.check_index(first + count - 1)?;
        let mut inner = bank.lock();
        for q in first..first + count {
            let amax = inner.measured[q];
            let decisions = inner.states[q].call(amax);
            inner.est[q] = decisions.iter().map(|d| d.est).collect();
        }
        Ok(())
    }

    fn reset(&self, bank: &CpuBank) -> Result<(), EngineError> {
        let est = bank.initial_est();
        let mut inner = bank.lock();
        for q in 0..bank.config.quantizers {
            inner.states[q].reset();
            inner.est[q] = est.clone();
        }
        Ok(())
    }

    fn quant_stats(
        &self,
        x: &CpuTensor,
        bank: &CpuBank,
        quantizer: usize,
    ) -> Result<(), EngineError> {
        bank.config.check_index(quantizer)?;
        let mut inner = bank.lock();
        let scales = inner.states[quantizer].scales().to_vec();
        let thresholds: Vec<Threshold> = inner.est[quantizer]
            .iter()
            .zip(&scales)
            .map(|(est, scale)| Threshold {
                est: *est,
                scale: *scale,
            })
            .collect();
        let s = tensor_stats(&x.get(), &thresholds, scales[bank.active], &bank.quant);
        inner.stats[quantizer] = StatsSnapshot {
            amax: s.amax,
            nonfinite: s.nonfinite,
            underflow: s.underflow,
            above_est: s.above_est,
            overflow: s.overflow,
        };
        Ok(())
    }

    fn histogram(
        &self,
        x: &CpuTensor,
        bank: &CpuBank,
        quantizer: usize,
    ) -> Result<(), EngineError> {
        let scale = bank.active_scale(quantizer)?;
        let hist = hif8lab_scaling::stats::Log2Histogram::of(&x.get(), scale);
        bank.lock().histogram = Some(crate::BankHistogram { quantizer, hist });
        Ok(())
    }

    fn read_bank(&self, bank: &CpuBank) -> Readback<BankSnapshot> {
        let inner = bank.lock();
        let quantizers = (0..bank.config.quantizers)
            .map(|q| QuantizerSnapshot {
                measured_amax: inner.measured[q],
                est: inner.est[q].clone(),
                scales: inner.states[q].scales().to_vec(),
                history: inner.states[q].history(),
                stats: inner.stats[q].clone(),
            })
            .collect();
        Readback::ready(Ok(BankSnapshot {
            active: bank.active,
            quantizers,
            histogram: inner.histogram.clone(),
        }))
    }

    fn read_step(&self, tensors: &[&CpuTensor], bank: Option<&CpuBank>) -> Readback<StepReadback> {
        let bank = bank
            .map(|b| self.read_bank(b).try_take())
            .and_then(|r| r.and_then(Result::ok));
        Readback::ready(Ok(StepReadback {
            tensors: tensors.iter().map(|t| t.to_vec()).collect(),
            bank,
        }))
    }

    fn restore_bank(&self, bank: &CpuBank, snapshot: &BankSnapshot) -> Result<(), EngineError> {
        same_len(
            "restore_bank quantizers",
            snapshot.quantizers.len(),
            bank.config.quantizers,
        )?;
        let mut inner = bank.lock();
        for (q, s) in snapshot.quantizers.iter().enumerate() {
            same_len("restore_bank scales", s.scales.len(), bank.k)?;
            same_len("restore_bank est", s.est.len(), bank.k)?;
            inner.states[q].restore(&s.history, &s.scales);
            inner.est[q] = s.est.clone();
        }
        inner.histogram = None;
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
                    bank.quant.qdq_into(data, &mut out, bank.active_scale(q)?);
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

    fn ste_mask(
        &self,
        x: &CpuTensor,
        grad: &CpuTensor,
        bank: &CpuBank,
        quantizer: usize,
    ) -> Result<(), EngineError> {
        bank.config.check_index(quantizer)?;
        let limit = bank.lock().est[quantizer][bank.active];
        let xv = x.get();
        let mut g = grad.get();
        same_len("ste_mask", xv.len(), g.len())?;
        for (gi, xi) in g.iter_mut().zip(xv.iter()) {
            if xi.abs() > limit {
                *gi = 0.0;
            }
        }
        Ok(())
    }

    fn fill_zero(&self, t: &CpuTensor) -> Result<(), EngineError> {
        t.get().fill(0.0);
        Ok(())
    }

    fn add_inplace(&self, dst: &CpuTensor, src: &CpuTensor) -> Result<(), EngineError> {
        let s = src.get().clone();
        let mut d = dst.get();
        same_len("add_inplace", d.len(), s.len())?;
        for (d, s) in d.iter_mut().zip(&s) {
            *d += s;
        }
        Ok(())
    }

    fn scale_inplace(&self, dst: &CpuTensor, factor: f32) -> Result<(), EngineError> {
        for d in dst.get().iter_mut() {
            *d *= factor;
        }
        Ok(())
    }

    fn embedding(
        &self,
        tokens: &CpuTensor,
        table: &CpuTensor,
        out: &CpuTensor,
        channels: usize,
    ) -> Result<(), EngineError> {
        let (t, w, mut o) = (tokens.get(), table.get(), out.get());
        rows_of("embedding table", w.len(), channels)?;
        at_least("embedding out", o.len(), t.len() * channels)?;
        ops::embedding(&t, &w, &mut o, channels);
        Ok(())
    }

    fn embedding_backward(
        &self,
        tokens: &CpuTensor,
        dout: &CpuTensor,
        dtable: &CpuTensor,
        channels: usize,
    ) -> Result<(), EngineError> {
        let (t, d, mut w) = (tokens.get(), dout.get(), dtable.get());
        rows_of("embedding dtable", w.len(), channels)?;
        at_least("embedding dout", d.len(), t.len() * channels)?;
        ops::embedding_backward(&t, &d, &mut w, channels);
        Ok(())
    }

    fn rmsnorm(
        &self,
        x: &CpuTensor,
        weight: &CpuTensor,
        out: &CpuTensor,
        rstd: &CpuTensor,
        eps: f32,
    ) -> Result<(), EngineError> {
        let (xv, w, mut o, mut r) = (x.get(), weight.get(), out.get(), rstd.get());
        let rows = rows_of("rmsnorm x", xv.len(), w.len())?;
        same_len("rmsnorm out", o.len(), xv.len())?;
        same_len("rmsnorm rstd", r.len(), rows)?;
        ops::rmsnorm(&xv, &w, &mut o, &mut r, eps);
        Ok(())
    }

    fn rmsnorm_backward(
        &self,
        x: &CpuTensor,
        weight: &CpuTensor,
        rstd: &CpuTensor,
        dy: &CpuTensor,
        dx: &CpuTensor,
        dweight: &CpuTensor,
    ) -> Result<(), EngineError> {
        let (xv, w, r, d) = (x.get(), weight.get(), rstd.get(), dy.get());
        let (mut dxv, mut dwv) = (dx.get(), dweight.get());
        let rows = rows_of("rmsnorm_backward x", xv.len(), w.len())?;
        same_len("rmsnorm_backward rstd", r.len(), rows)?;
        same_len("rmsnorm_backward dy", d.len(), xv.len())?;
        same_len("rmsnorm_backward dx", dxv.len(), xv.len())?;
        same_len("rmsnorm_backward dweight", dwv.len(), w.len())?;
        ops::rmsnorm_backward(&xv, &w, &r, &d, &mut dxv, &mut dwv);
        Ok(())
    }

    fn rope(
        &self,
        x: &CpuTensor,
        table: &CpuTensor,
        out: &CpuTensor,
        shape: RopeShape,
        inverse: bool,
    ) -> Result<(), EngineError> {
        let (xv, t, mut o) = (x.get(), table.get(), out.get());
        let n = shape.rows * shape.heads * shape.head_dim;
        at_least("rope x", xv.len(), n)?;
        at_least("rope out", o.len(), n)?;
        at_least("rope table", t.len(), shape.seq * shape.head_dim)?;
        ops::rope(&xv, &t, &mut o, shape, inverse);
        Ok(())
    }

    fn attention(
        &self,
        q: &CpuTensor,
        k: &CpuTensor,
        v: &CpuTensor,
        out: &CpuTensor,
        probs: &CpuTensor,
        shape: AttentionShape,
    ) -> Result<(), EngineError> {
        check_attention(&shape)?;
        let (qv, kv, vv) = (q.get(), k.get(), v.get());
        let (mut o, mut p) = (out.get(), probs.get());
        at_least("attention q", qv.len(), shape.q_len())?;
        at_least("attention k", kv.len(), shape.kv_len())?;
        at_least("attention v", vv.len(), shape.kv_len())?;
        at_least("attention out", o.len(), shape.q_len())?;
        at_least("attention probs", p.len(), shape.probs_len())?;
        ops::attention(&qv, &kv, &vv, &mut o, &mut p, shape);
        Ok(())
    }

    fn attention_backward(
        &self,
        q: &CpuTensor,
        k: &CpuTensor,
        v: &CpuTensor,
        probs: &CpuTensor,
        dout: &CpuTensor,
        dscores: &CpuTensor,
        dq: &CpuTensor,
        dk: &CpuTensor,
        dv: &CpuTensor,
        shape: AttentionShape,
    ) -> Result<(), EngineError> {
        check_attention(&shape)?;
        let (qv, kv, vv, p, d) = (q.get(), k.get(), v.get(), probs.get(), dout.get());
        let (mut ds, mut dqv, mut dkv, mut dvv) = (dscores.get(), dq.get(), dk.get(), dv.get());
        at_least("attention_backward dscores", ds.len(), shape.probs_len())?;
        at_least("attention_backward dq", dqv.len(), shape.q_len())?;
        at_least("attention_backward dk", dkv.len(), shape.kv_len())?;
        at_least("attention_backward dv", dvv.len(), shape.kv_len())?;
        at_least("attention_backward dout", d.len(), shape.q_len())?;
        ops::attention_backward(
            &qv,
            &kv,
            &vv,
            &p,
            &d,
            ops::AttentionGrads {
                dscores: &mut ds,
                dq: &mut dqv,
                dk: &mut dkv,
                dv: &mut dvv,
            },
            shape,
        );
        Ok(())
    }

    fn swiglu(&self, g: &CpuTensor, u: &CpuTensor, out: &CpuTensor) -> Result<(), EngineError> {
        let (gv, uv, mut o) = (g.get(), u.get(), out.get());
        same_len("swiglu u", uv.len(), gv.len())?;
        same_len("swiglu out", o.len(), gv.len())?;
        ops::swiglu(&gv, &uv, &mut o);
        Ok(())
    }

    fn swiglu_backward(
        &self,
        g: &CpuTensor,
        u: &CpuTensor,
        dy: &CpuTensor,
        dg: &CpuTensor,
        du: &CpuTensor,
    ) -> Result<(), EngineError> {
        let (gv, uv, d) = (g.get(), u.get(), dy.get());
        let (mut dgv, mut duv) = (dg.get(), du.get());
        for (what, len) in [
            ("u", uv.len()),
            ("dy", d.len()),
            ("dg", dgv.len()),
            ("du", duv.len()),
        ] {
            same_len(&format!("swiglu_backward {what}"), len, gv.len())?;
        }
        ops::swiglu_backward(&gv, &uv, &d, &mut dgv, &mut duv);
        Ok(())
    }

    fn cross_entropy(
        &self,
        logits: &CpuTensor,
        targets: &CpuTensor,
        losses: &CpuTensor,
        dlogits: &CpuTensor,
        grad_scale: f32,
    ) -> Result<(), EngineError> {
        let (l, t) = (logits.get(), targets.get());
        let (mut lo, mut dl) = (losses.get(), dlogits.get());
        same_len("cross_entropy losses", lo.len(), t.len())?;
        rows_of("cross_entropy logits", l.len(), l.len() / t.len().max(1))?;
        same_len("cross_entropy dlogits", dl.len(), l.len())?;
        if t.is_empty() || l.len() % t.len() != 0 {
            return Err(EngineError::Shape(
                "cross_entropy: logits are not rows of targets".into(),
            ));
        }
        ops::cross_entropy(&l, &t, &mut lo, &mut dl, grad_scale);
        Ok(())
    }

    fn sum_squares(&self, x: &CpuTensor, out: &CpuTensor, slot: usize) -> Result<(), EngineError> {
        let v = ops::sum_squares(&x.get());
        let mut o = out.get();
        at_least("sum_squares out", o.len(), slot + 1)?;
        o[slot] = v;
        Ok(())
    }

    fn adamw(
        &self,
        param: &CpuTensor,
        grad: &CpuTensor,
        m: &CpuTensor,
        v: &CpuTensor,
        norms: &CpuTensor,
        n_norms: usize,
        hyper: &AdamHyper,
    ) -> Result<(), EngineError> {
        let (g, nv) = (grad.get(), norms.get());
        let (mut p, mut mv, mut vv) = (param.get(), m.get(), v.get());
        for (what, len) in [("grad", g.len()), ("m", mv.len()), ("v", vv.len())] {
            same_len(&format!("adamw {what}"), len, p.len())?;
        }
        at_least("adamw norms", nv.len(), n_norms)?;
        ops::adamw(&mut p, &g, &mut mv, &mut vv, &nv[..n_norms], hyper);
        Ok(())
    }

    fn flush(&self) {}

    fn counters(&self) -> Counters {
        Counters::default()
    }
}

/// Checks an attention shape (shared by both backends).
pub(crate) fn check_attention(s: &AttentionShape) -> Result<(), EngineError> {
    if s.kv_heads == 0 || !s.heads.is_multiple_of(s.kv_heads) || s.head_dim == 0 || s.seq == 0 {
        return Err(EngineError::Shape(format!(
            "attention: heads {} must be a multiple of kv_heads {}, head_dim and seq > 0",
            s.heads, s.kv_heads
        )));
    }
    Ok(())
}

/// The CPU model name where the OS tells it, else the architecture.
pub fn cpu_name() -> String {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(name) = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.trim().to_owned())
    }) {
        return name;
    }
    std::env::consts::ARCH.to_owned()
}
