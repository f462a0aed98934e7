//! The training loop: `Trainer::step()` enqueues one optimizer step (micro-batches, forward,
//! backward, quantizer calls, gradient norm, AdamW) without waiting for the device; loss,
//! gradient norm and every quantizer's statistics are read back asynchronously and arrive as
//! [`StepReport`]s from [`Trainer::poll`] (or [`Trainer::finish`]).

use std::collections::VecDeque;

use hif8lab_engine::{AdamHyper, Backend, BankConfig, BankSnapshot, EngineError, Readback};
use hif8lab_scaling::trace::TraceRecord;
use hif8lab_scaling::{CallRecord, QuantizerId};

use crate::config::RunConfig;
use crate::data::{RunData, Sampler};
use crate::model::{self, Ctx, Params, QuantPlan, Workspace};
use crate::models::checkpoint::Checkpoint;
use crate::models::tokenizer::Tokenizer;

mod probes;
mod state;

pub use crate::eval::{PROBE_SCORES, ProbeIntervals, ProbeMarks, ProbeScore, ProbeScores};
pub use probes::{PendingEval, PendingWeights};
pub use state::bank_snapshot;

pub use crate::error::{InferError, TrainError, io_failed_on_the_way};

/// What one optimizer step measured.
#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    /// Step number (from 0).
    pub step: u64,
    /// Mean training loss over the step's micro-batches.
    pub loss: f32,
    /// Learning rate used.
    pub lr: f32,
    /// Global gradient norm before clipping.
    pub grad_norm: f32,
    /// Whether quantization was on.
    pub qat_enabled: bool,
    /// Tokens in the step.
    pub tokens: u64,
    /// Every quantizer call of the step (empty while quantization is off).
    pub calls: Vec<CallRecord>,
    /// log2|x·scale| of the quantizer chosen with [`Trainer::set_histogram`], at its last
    /// call of the step.
    pub histogram: Option<(QuantizerId, hif8lab_scaling::stats::Log2Histogram)>,
}

struct PendingStep {
    step: u64,
    lr: f32,
    qat: bool,
    tokens: u64,
    /// Banks of all micro-batches but the last (only with gradient accumulation).
    banks: Vec<Readback<BankSnapshot>>,
    /// Per-row losses summed over micro-batches, the norms, and the last bank: one copy.
    main: Readback<hif8lab_engine::StepReadback>,
}

/// A training run on backend `B`.
pub struct Trainer<B: Backend> {
    backend: B,
    config: RunConfig,
    plan: QuantPlan,
    numel: Vec<u64>,
    estimator_names: Vec<String>,
    active: usize,
    bank: Option<B::Bank>,
    params: Params<B::Tensor>,
    grads: Params<B::Tensor>,
    m: Params<B::Tensor>,
    v: Params<B::Tensor>,
    decay: Vec<bool>,
    norms: B::Tensor,
    loss_sum: B::Tensor,
    ws: Workspace<B::Tensor>,
    sampler: Sampler,
    step: u64,
    pending: VecDeque<PendingStep>,
    histogram: Option<usize>,
    tokenizer: Tokenizer,
    /// The bf16 kernel the CPU products run on (`train.gemm`), `None` for the f32 GEMM.
    gemm: Option<hif8lab_engine::cpu::bf16::Bf16Kernel>,
}

/// Learning rate at `step`: linear warmup over `warmup_frac` of the steps, then cosine to 0.
pub fn lr_at(config: &RunConfig, step: u64) -> f32 {
    let t = &config.train;
    let total = t.steps.max(1) as f64;
    let warm = (f64::from(t.warmup_frac) * total).ceil().max(1.0);
    let s = step as f64;
    let factor = if s < warm {
        (s + 1.0) / warm
    } else {
        let progress = ((s - warm) / (total - warm).max(1.0)).min(1.0);
        0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
    };
    (f64::from(t.lr) * factor) as f32
}

fn tensors<B: Backend>(
    b: &B,
    values: &[Vec<f32>],
    layers: usize,
) -> Result<Params<B::Tensor>, EngineError> {
    let list = values
        .iter()
        .map(|v| b.upload(v))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Params::from_list(list, layers))
}

fn zero_tensors<B: Backend>(
    b: &B,
    lens: &[usize],
    layers: usize,
) -> Result<Params<B::Tensor>, EngineError> {
    let list = lens
        .iter()
        .map(|n| b.zeros(*n))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Params::from_list(list, layers))
}

impl<B: Backend> Trainer<B> {
    /// Builds the model, optimizer state and quantizer bank for `config` and its data
    /// ([`RunData::for_config`]); a config that does not fit the backend's memory is refused
    /// before its corpus is read.
    pub fn from_config(backend: B, config: RunConfig) -> Result<Self, TrainError> {
        Self::check_fits(&backend, &config)?;
        let data = RunData::for_config(&config)?;
        Self::build(backend, config, data)
    }

    /// Builds the model, optimizer state and quantizer bank for `config`, training on `data`.
    pub fn new(backend: B, config: RunConfig, data: RunData) -> Result<Self, TrainError> {
        Self::check_fits(&backend, &config)?;
        Self::build(backend, config, data)
    }

    /// The memory `config` needs against what the backend has.
    fn check_fits(backend: &B, config: &RunConfig) -> Result<(), TrainError> {
        let info = backend.info();
        crate::memory::MemoryEstimate::for_config(config)
            .check(&info.memory, &info.adapter)
            .map_err(|e| TrainError::DoesNotFit(e.0))
    }

    /// [`Self::new`] once the config is known to fit.
    fn build(backend: B, config: RunConfig, data: RunData) -> Result<Self, TrainError> {
        let gemm = config.train.gemm.resolve(backend.info().kind)?;
        let m = &config.model;
        let specs = model::param_specs(m);
        let init = model::init_values(m, config.train.seed);
        let params = tensors(&backend, &init, m.layers)?;
        // Zeros made by the backend (no host copies: at 135 M parameters they were 0.5 GB).
        let lens: Vec<usize> = init.iter().map(Vec::len).collect();
        drop(init);
        let grads = zero_tensors(&backend, &lens, m.layers)?;
        let mom1 = zero_tensors(&backend, &lens, m.layers)?;
        let mom2 = zero_tensors(&backend, &lens, m.layers)?;
        let norms = backend.zeros(specs.len())?;
        let loss_sum = backend.zeros(config.train.batch * m.context)?;
        let mut ws = Workspace::new(&backend, m, config.train.batch)?;
        if config.qat.clipped_ste {
            ws = ws.with_weight_scratch(&backend, m)?;
        }
        let plan = QuantPlan::new(m, &config.qat);
        let scaling = config.qat.plan()?;
        let bank = if plan.ids.is_empty() {
            None
        } else {
            Some(backend.new_bank(&BankConfig::new(plan.ids.len(), scaling.clone()))?)
        };
        let numel = plan.numel(m, config.train.batch);
        let RunData { tokenizer, sampler } = data;
        Ok(Trainer {
            estimator_names: scaling.names(),
            active: scaling.active_index(),
            decay: specs.iter().map(|s| s.2).collect(),
            backend,
            plan,
            numel,
            bank,
            params,
            grads,
            m: mom1,
            v: mom2,
            norms,
            loss_sum,
            ws,
            sampler,
            step: 0,
            pending: VecDeque::new(),
            histogram: None,
            tokenizer,
            gemm,
            config,
        })
    }

    /// The kernel of the products whose operands are exact in bf16: `f32`, or the bf16
    /// kernel's name (`avx512-bf16`, `amx-bf16`); what each segment of a run records.
    pub fn gemm_kernel(&self) -> &'static str {
        self.gemm.map_or("f32", |k| k.name())
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The tokenizer of the run's data (`data.tokenizer`).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The run configuration.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The quantizers (bank order).
    pub fn quantizers(&self) -> &[QuantizerId] {
        &self.plan.ids
    }

    /// Estimator names (active at [`Self::active_estimator`]).
    pub fn estimator_names(&self) -> &[String] {
        &self.estimator_names
    }

    /// Index of the active estimator.
    pub fn active_estimator(&self) -> usize {
        self.active
    }

    /// Steps enqueued so far.
    pub fn steps_done(&self) -> u64 {
        self.step
    }

    /// Whether every configured step has been enqueued.
    pub fn finished(&self) -> bool {
        self.step >= self.config.train.steps
    }

    /// Steps enqueued whose reports have not been returned by [`Trainer::poll`] yet.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Whether quantization is on at `step` (QAT enabled and past the high-precision warmup).
    pub fn qat_at(&self, step: u64) -> bool {
        self.bank.is_some() && step >= self.config.qat.warmup_steps
    }

    /// Chooses the quantizer (index into [`Trainer::quantizers`]) whose input each step
    /// bins into a log2|x·scale| histogram (reported in [`StepReport::histogram`]); `None`
    /// stops it. Costs one extra pass over that one tensor per call.
    pub fn set_histogram(&mut self, quantizer: Option<usize>) {
        self.histogram = quantizer.filter(|q| *q < self.plan.ids.len());
    }

    /// Enqueues one optimizer step; never waits for the device.
    pub fn step(&mut self) -> Result<(), TrainError> {
        let step = self.step;
        let t = self.config.train.clone();
        let lr = lr_at(&self.config, step);
        let qat = self.qat_at(step);
        let b = &self.backend;
        if let (true, Some(bank)) = (qat && step == self.config.qat.warmup_steps, &self.bank) {
            // Quantization switches on: every history and scale starts fresh.
            b.reset(bank)?;
        }
        let accum = t.grad_accum;
        let rows = t.batch * self.config.model.context;
        let grad_scale = 1.0 / (rows * accum) as f32;
        let mut banks = Vec::new();
        for micro in 0..accum {
            let (x, y) = self
                .sampler
                .next_batch(t.batch, self.config.model.context)?;
            // Uploads first: a queue write submits what is recorded, so recording the
            // zeroing after it keeps the whole step in one submission.
            self.ws.load(b, &x, &y)?;
            if micro == 0 {
                for g in model::grads_added_to(&self.grads) {
                    b.fill_zero(g)?;
                }
                b.fill_zero(&self.loss_sum)?;
            }
            let cx = Ctx {
                b,
                m: &self.config.model,
                batch: t.batch,
                plan: &self.plan,
                bank: if qat { self.bank.as_ref() } else { None },
                bf16: t.precision() == crate::config::Precision::Bf16,
                bf16_units: self.gemm.is_some(),
                clipped_ste: self.config.qat.clipped_ste,
                scratch: &self.ws.weight_scratch,
                histogram: self.histogram,
                first_micro: micro == 0,
                norms: (micro + 1 == accum).then_some(&self.norms),
            };
            model::forward(&cx, &self.params, &self.ws, grad_scale)?;
            model::backward(&cx, &self.params, &self.grads, &self.ws)?;
            b.add_inplace(&self.loss_sum, &self.ws.losses)?;
            if let (true, Some(bank), true) = (qat, &self.bank, micro + 1 < accum) {
                banks.push(b.read_bank(bank));
            }
        }
        // The backward of the last micro-batch put every gradient's Σx² into `norms`.
        let grads = self.grads.list();
        let params = self.params.list();
        let (ms, vs) = (self.m.list(), self.v.list());
        for i in 0..params.len() {
            let hyper = AdamHyper {
                lr,
                beta1: t.beta1,
                beta2: t.beta2,
                eps: t.eps,
                weight_decay: if self.decay[i] { t.weight_decay } else { 0.0 },
                step: step + 1,
                max_norm: t.grad_clip,
            };
            b.adamw(
                params[i],
                grads[i],
                ms[i],
                vs[i],
                &self.norms,
                grads.len(),
                &hyper,
            )?;
        }
        let bank = if qat { self.bank.as_ref() } else { None };
        let main = b.read_step(&[&self.loss_sum, &self.norms], bank);
        b.flush();
        self.pending.push_back(PendingStep {
            step,
            lr,
            qat,
            tokens: (rows * accum) as u64,
            banks,
            main,
        });
        self.step += 1;
        Ok(())
    }

    /// Reports whose readbacks have all arrived, oldest first; never blocks.
    pub fn poll(&mut self) -> Result<Vec<StepReport>, TrainError> {
        let mut out = Vec::new();
        while let Some(front) = self.pending.front() {
            let ready = front.main.is_ready() && front.banks.iter().all(Readback::is_ready);
            if !ready {
                break;
            }
            let done = self.pending.pop_front().expect("front exists");
            out.push(self.complete(done, false)?);
        }
        Ok(out)
    }

    /// Waits for every pending report (native; blocks).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn finish(&mut self) -> Result<Vec<StepReport>, TrainError> {
        let mut out = Vec::new();
        while let Some(p) = self.pending.pop_front() {
            out.push(self.complete(p, true)?);
        }
        Ok(out)
    }

    /// Waits for the oldest pending report only (native; blocks).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait_oldest(&mut self) -> Result<Vec<StepReport>, TrainError> {
        match self.pending.pop_front() {
            Some(p) => Ok(vec![self.complete(p, true)?]),
            None => Ok(Vec::new()),
        }
    }

    fn complete(&self, p: PendingStep, block: bool) -> Result<StepReport, TrainError> {
        let main = take_value(p.main, block)?;
        let (row_sums, norms) = (&main.tensors[0], &main.tensors[1]);
        let loss_sum: f64 = row_sums.iter().map(|v| f64::from(*v)).sum();
        let loss = (loss_sum / p.tokens.max(1) as f64) as f32;
        let grad_norm = norms.iter().map(|v| f64::from(*v)).sum::<f64>().sqrt() as f32;
        let mut snapshots = p
            .banks
            .into_iter()
            .map(|r| take_value(r, block))
            .collect::<Result<Vec<_>, _>>()?;
        snapshots.extend(main.bank);
        let histogram = snapshots
            .last()
            .and_then(|s| s.histogram.as_ref())
            .and_then(|h| Some((*self.plan.ids.get(h.quantizer)?, h.hist.clone())));
        let mut calls = Vec::new();
        for (micro, snap) in snapshots.into_iter().enumerate() {
            for (q, s) in snap.quantizers.iter().enumerate() {
                calls.push(CallRecord {
                    id: self.plan.ids[q],
                    step: p.step,
                    micro: micro as u32,
                    numel: self.numel[q],
                    amax: s.stats.amax,
                    est: s.est.clone(),
                    scales: s.scales.clone(),
                    above_est: s.stats.above_est.clone(),
                    overflow: s.stats.overflow.clone(),
                    underflow: s.stats.underflow,
                    nonfinite: s.stats.nonfinite,
                    sqnr_db: s.stats.sqnr_db(),
                });
            }
        }
        if let Some(c) = calls.iter().find(|c| c.nonfinite > 0) {
            return Err(TrainError::NonFinite {
                step: p.step,
                what: format!("quantizer {} saw {} NaN/Inf values", c.id, c.nonfinite),
            });
        }
        if !loss.is_finite() {
            return Err(TrainError::NonFinite {
                step: p.step,
                what: "loss (cross_entropy)".into(),
            });
        }
        Ok(StepReport {
            step: p.step,
            loss,
            lr: p.lr,
            grad_norm,
            qat_enabled: p.qat,
            tokens: p.tokens,
            calls,
            histogram,
        })
    }

    /// Trace records of a report's quantizer calls (schema of `hif8lab_scaling::trace`).
    pub fn trace_records(&self, r: &StepReport) -> Vec<TraceRecord> {
        r.calls
            .iter()
            .map(|c| c.to_trace(&self.estimator_names, self.active))
            .collect()
    }
}

fn take_value<T>(r: Readback<T>, block: bool) -> Result<T, TrainError> {
    #[cfg(not(target_arch = "wasm32"))]
    if block {
        return r.wait().map_err(TrainError::from);
    }
    let _ = block;
    r.try_take()
        .unwrap_or(Err(EngineError::NotReady))
        .map_err(TrainError::from)
}
