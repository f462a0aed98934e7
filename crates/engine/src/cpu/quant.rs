//! CPU op family `QuantOps`: the quantizer bank: fake quantization, amax, delayed scaling (`hif8lab_scaling::QuantizerState`), statistics.

use hif8lab_scaling::QuantizerState;
use hif8lab_scaling::stats::Threshold;

use std::sync::Mutex;

use super::{BankInner, CpuBackend, CpuBank, CpuTensor};
use crate::bank::{BankConfig, BankSnapshot, QuantizerSnapshot, StatsSnapshot};
use crate::{EngineError, QuantOps, Readback, StepReadback, same_len};

impl QuantOps for CpuBackend {
    fn new_bank(&self, config: &BankConfig) -> Result<CpuBank, EngineError> {
        config.validate()?;
        let k = config.estimators();
        let state = QuantizerState::new(&config.plan);
        let bank = CpuBank {
            quant: config.quant(),
            k,
            active: state.active_index(),
            config: config.clone(),
            inner: Mutex::new(BankInner {
                states: vec![state; config.quantizers],
                measured: vec![0.0; config.quantizers],
                measured_on: vec![None; config.quantizers],
                est: Vec::new(),
                stats: vec![StatsSnapshot::default(); config.quantizers],
                histogram: None,
                quantized: (0..config.quantizers).map(|_| None).collect(),
            }),
        };
        let est = bank.initial_est();
        bank.lock().est = vec![est; config.quantizers];
        Ok(bank)
    }

    fn set_scales(&self, bank: &CpuBank, scales: &[f32]) -> Result<(), EngineError> {
        same_len("set_scales", scales.len(), bank.config.quantizers * bank.k)?;
        let rule = bank.config.plan.rule();
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
        let _op = self.launched("qdq");
        let scale = bank.active_scale(quantizer)?;
        if std::ptr::eq(x, out) {
            bank.quant.qdq_slice(&mut out.get(), scale);
            return Ok(());
        }
        let src = x.read();
        let mut dst = out.get();
        same_len("qdq", src.len(), dst.len())?;
        super::par::qdq_into(&bank.quant, &src, &mut dst, scale);
        Ok(())
    }

    fn amax(&self, x: &CpuTensor, bank: &CpuBank, quantizer: usize) -> Result<(), EngineError> {
        let _op = self.launched("amax");
        bank.config.check_index(quantizer)?;
        let (amax, nonfinite) = super::par::amax(&x.read());
        let on = (x.key(), nonfinite);
        let mut inner = bank.lock();
        inner.measured[quantizer] = amax;
        inner.measured_on[quantizer] = Some(on);
        Ok(())
    }

    fn scale_update(&self, bank: &CpuBank, first: usize, count: usize) -> Result<(), EngineError> {
        let _op = self.launched("scale_update");
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
        let _op = self.launched("reset");
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
        let _op = self.launched("quant_stats");
        bank.config.check_index(quantizer)?;
        let mut inner = bank.lock();
        let scales = inner.states[quantizer].scales().to_vec();
        let thresholds = Threshold::pairs(&inner.est[quantizer], &scales);
        // The statistics and the fake quantization in one codec pass; the copy waits for the
        // fused matmul that follows (the trainer's order: amax, scale update, statistics,
        // matmul), which takes it while `x` is untouched.
        let scale = scales[bank.active];
        let mut copy = inner.quantized[quantizer]
            .take()
            .map(|c| c.data)
            .unwrap_or_default();
        // The amax op's pass on this very tensor, when nothing has touched it since.
        let measured = inner.measured_of(quantizer, x);
        let xv = x.read();
        copy.resize(xv.len(), 0.0);
        let s = super::par::stats_qdq(&xv, &mut copy, &thresholds, scale, &bank.quant, measured);
        drop(xv);
        inner.quantized[quantizer] = Some(super::Quantized {
            key: x.key(),
            scale_bits: scale.to_bits(),
            data: copy,
        });
        inner.stats[quantizer] = StatsSnapshot {
            amax: s.amax,
            nonfinite: s.nonfinite,
            underflow: s.underflow,
            above_est: s.above_est,
            overflow: s.overflow,
            signal: s.signal,
            noise: s.noise,
        };
        Ok(())
    }

    fn histogram(
        &self,
        x: &CpuTensor,
        bank: &CpuBank,
        quantizer: usize,
    ) -> Result<(), EngineError> {
        let _op = self.launched("histogram");
        let scale = bank.active_scale(quantizer)?;
        let hist = hif8lab_scaling::stats::Log2Histogram::of(&x.read(), scale);
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

    fn ste_mask(
        &self,
        x: &CpuTensor,
        grad: &CpuTensor,
        bank: &CpuBank,
        quantizer: usize,
    ) -> Result<(), EngineError> {
        let _op = self.launched("ste_mask");
        bank.config.check_index(quantizer)?;
        let limit = bank.lock().est[quantizer][bank.active];
        let xv = x.read();
        let mut g = grad.get();
        same_len("ste_mask", xv.len(), g.len())?;
        for (gi, xi) in g.iter_mut().zip(xv.iter()) {
            if xi.abs() > limit {
                *gi = 0.0;
            }
        }
        Ok(())
    }
}
