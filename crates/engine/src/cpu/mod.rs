//! The CPU backend: plain, readable Rust. It is the **oracle** every GPU kernel is tested
//! against (formats from `hif8lab-format`, scaling and statistics from `hif8lab-scaling`,
//! GEMM from the `gemm` crate) and the fallback where WebGPU is missing.

mod matmul;

use std::sync::Mutex;

use hif8lab_format::FakeQuant;
use hif8lab_scaling::QuantizerState;
use hif8lab_scaling::stats::{Threshold, amax_and_nonfinite, tensor_stats};

use crate::bank::{BankConfig, BankSnapshot, QuantizerSnapshot, StatsSnapshot};
use crate::{Backend, BackendInfo, Counters, EngineError, MatmulSpec, Readback, check_matmul};

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

fn same_len(what: &str, a: usize, b: usize) -> Result<(), EngineError> {
    if a == b {
        Ok(())
    } else {
        Err(EngineError::Shape(format!(
            "{what}: lengths {a} and {b} differ"
        )))
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
        }))
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
        let (av, bv) = (a.get().clone(), b.get().clone());
        let mut cv = c.get();
        check_matmul(spec, av.len(), bv.len(), cv.len())?;
        let fused = |data: Vec<f32>, fuse: Option<usize>| -> Result<Vec<f32>, EngineError> {
            match fuse {
                None => Ok(data),
                Some(q) => {
                    let bank = bank.ok_or_else(|| {
                        EngineError::Shape("matmul: fused quantization needs a bank".into())
                    })?;
                    let mut data = data;
                    bank.quant.qdq_slice(&mut data, bank.active_scale(q)?);
                    Ok(data)
                }
            }
        };
        let av = fused(av, spec.fuse_a)?;
        let bv = fused(bv, spec.fuse_b)?;
        matmul::gemm(spec, &av, &bv, &mut cv);
        Ok(())
    }

    fn flush(&self) {}

    fn counters(&self) -> Counters {
        Counters::default()
    }
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
