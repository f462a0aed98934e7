//! The training loop: `Trainer::step()` enqueues one optimizer step (micro-batches, forward,
//! backward, quantizer calls, gradient norm, AdamW) without waiting for the device; loss,
//! gradient norm and every quantizer's statistics are read back asynchronously and arrive as
//! [`StepReport`]s from [`Trainer::poll`] (or [`Trainer::finish`]).

use std::collections::VecDeque;

use hif8lab_engine::{AdamHyper, Backend, BankConfig, BankSnapshot, EngineError, Readback};
use hif8lab_scaling::trace::TraceRecord;
use hif8lab_scaling::{CallRecord, Module, QuantizerId, Role};

use crate::checkpoint::Checkpoint;
use crate::config::RunConfig;
use crate::data::{Sampler, synthetic_corpus, tokenize};
use crate::model::{self, Ctx, Params, QuantPlan, Workspace};

/// One quantizer call as read back (the scaling crate's call record).
pub type CallReport = CallRecord;

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

/// Errors of training: engine failures, bad data, non-finite values.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrainError {
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The data could not be prepared.
    #[error("data: {0}")]
    Data(String),
    /// A checkpoint does not fit this run.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// The run cannot fit in the backend's memory (checked before allocating).
    #[error("{0}")]
    DoesNotFit(String),
    /// A loss or quantizer input became NaN/Inf.
    #[error("non-finite values at step {step}: {what}")]
    NonFinite {
        /// The step.
        step: u64,
        /// The first offending op or quantizer.
        what: String,
    },
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

impl<B: Backend> Trainer<B> {
    /// Builds the model, optimizer state, quantizer bank and data for `config`.
    pub fn new(backend: B, config: RunConfig) -> Result<Self, TrainError> {
        let info = backend.info();
        crate::memory::MemoryEstimate::for_config(&config)
            .check(&info.memory, &info.adapter)
            .map_err(|e| TrainError::DoesNotFit(e.0))?;
        let m = &config.model;
        let specs = model::param_specs(m);
        let init = model::init_values(m, config.train.seed);
        let zeros: Vec<Vec<f32>> = init.iter().map(|v| vec![0.0; v.len()]).collect();
        let params = tensors(&backend, &init, m.layers)?;
        let grads = tensors(&backend, &zeros, m.layers)?;
        let mom1 = tensors(&backend, &zeros, m.layers)?;
        let mom2 = tensors(&backend, &zeros, m.layers)?;
        let norms = backend.zeros(specs.len())?;
        let loss_sum = backend.zeros(config.train.batch * m.context)?;
        let mut ws = Workspace::new(&backend, m, config.train.batch)?;
        if config.qat.clipped_ste {
            ws = ws.with_weight_scratch(&backend, m)?;
        }
        let plan = QuantPlan::new(m, &config.qat);
        let bank = if plan.ids.is_empty() {
            None
        } else {
            Some(backend.new_bank(&BankConfig::new(plan.ids.len(), config.qat.scaling.clone()))?)
        };
        let n = (config.train.batch * m.context) as u64;
        let (c, f) = (m.d_model as u64, m.d_ff as u64);
        let qd = (m.heads * m.head_dim()) as u64;
        let kvd = (m.kv_heads * m.head_dim()) as u64;
        let numel = plan
            .ids
            .iter()
            .map(|id| {
                let (cin, cout) = match id.module {
                    Module::Gate | Module::Up => (c, f),
                    Module::Down => (f, c),
                    Module::Q => (c, qd),
                    Module::K | Module::V => (c, kvd),
                    Module::O => (qd, c),
                };
                match id.role {
                    Role::A => n * cin,
                    Role::W => cout * cin,
                    Role::G => n * cout,
                }
            })
            .collect();
        let d = &config.data;
        let text = match d.corpus.as_str() {
            "synthetic" => synthetic_corpus(config.train.seed, d.bytes),
            "kb" => {
                let kb = crate::corpus::KnowledgeBase::generate(d.entities, d.kb_seed);
                crate::corpus::pretrain_corpus(&kb, config.train.seed, d.bytes)
            }
            "web" => crate::corpus::web_corpus(config.train.seed, d.bytes),
            path => {
                crate::data::read_corpus(std::path::Path::new(path)).map_err(TrainError::Data)?
            }
        };
        let sampler = Sampler::new(tokenize(&text), config.train.seed).map_err(TrainError::Data)?;
        let scaling = &config.qat.scaling;
        Ok(Trainer {
            estimator_names: scaling
                .estimators()
                .iter()
                .map(ToString::to_string)
                .collect(),
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
            config,
        })
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
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
                .next_batch(t.batch, self.config.model.context)
                .map_err(TrainError::Data)?;
            // Uploads first: a queue write submits what is recorded, so recording the
            // zeroing after it keeps the whole step in one submission.
            self.ws.load(b, &x, &y)?;
            if micro == 0 {
                for g in self.grads.list() {
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
                bf16: t.bf16_gemm,
                clipped_ste: self.config.qat.clipped_ste,
                scratch: &self.ws.weight_scratch,
                histogram: self.histogram,
            };
            model::forward(&cx, &self.params, &self.ws, grad_scale)?;
            model::backward(&cx, &self.params, &self.grads, &self.ws)?;
            b.add_inplace(&self.loss_sum, &self.ws.losses)?;
            if let (true, Some(bank), true) = (qat, &self.bank, micro + 1 < accum) {
                banks.push(b.read_bank(bank));
            }
        }
        let grads = self.grads.list();
        for (i, g) in grads.iter().enumerate() {
            b.sum_squares(g, &self.norms, i)?;
        }
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

    /// Current parameter values in `param_specs` order (blocks on readback).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_params(&self) -> Result<Vec<Vec<f32>>, TrainError> {
        let reads: Vec<_> = self
            .params
            .list()
            .into_iter()
            .map(|t| self.backend.read(t))
            .collect();
        reads.into_iter().map(|r| take_value(r, true)).collect()
    }
}

const CHECKPOINT_FORMAT: &str = "hif8lab-checkpoint-1";

/// Probe results of one evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProbeScores {
    /// Step after which the probes ran.
    pub step: u64,
    /// Knowledge recall accuracy (summed log-likelihood).
    pub knowledge_acc: f64,
    /// Knowledge recall accuracy (per-byte log-likelihood).
    pub knowledge_acc_norm: f64,
    /// Completion accuracy (summed log-likelihood).
    pub completion_acc: f64,
    /// Completion accuracy (per-byte log-likelihood).
    pub completion_acc_norm: f64,
    /// Mean loss on held-out pretraining text.
    pub heldout_loss: f64,
}

impl<B: Backend> Trainer<B> {
    /// Replaces the model weights with those of a checkpoint (optimizer, step and data stay
    /// fresh): continued training from a pretrained base.
    pub fn load_weights(&mut self, ck: &Checkpoint) -> Result<(), TrainError> {
        let specs = model::param_specs(&self.config.model);
        for ((name, shape, _), t) in specs.iter().zip(self.params.list()) {
            let nt = ck
                .get(name)
                .ok_or_else(|| TrainError::Checkpoint(format!("tensor '{name}' missing")))?;
            if &nt.shape != shape {
                return Err(TrainError::Checkpoint(format!(
                    "tensor '{name}' has shape {:?}, this model needs {shape:?} (different config?)",
                    nt.shape
                )));
            }
            self.backend.write(t, &nt.data)?;
        }
        Ok(())
    }

    /// Enqueues a forward pass over `(inputs, targets)` sequences (each `context` long), in
    /// batches of the workspace, quantizers off; returns each batch's loss readback with the
    /// number of sequences it holds. Never waits.
    fn enqueue_row_losses(
        &mut self,
        seqs: &[(Vec<f32>, Vec<f32>)],
    ) -> Result<Vec<BatchLosses>, TrainError> {
        let (batch, ctx) = (self.config.train.batch, self.config.model.context);
        let mut out = Vec::new();
        for chunk in seqs.chunks(batch) {
            let mut x = Vec::with_capacity(batch * ctx);
            let mut y = Vec::with_capacity(batch * ctx);
            for i in 0..batch {
                let (a, b) = chunk.get(i).unwrap_or(&chunk[0]);
                x.extend_from_slice(a);
                y.extend_from_slice(b);
            }
            self.ws.load(&self.backend, &x, &y)?;
            let cx = Ctx {
                b: &self.backend,
                m: &self.config.model,
                batch,
                plan: &self.plan,
                bank: None,
                bf16: self.config.train.bf16_gemm,
                clipped_ste: false,
                scratch: &[],
                histogram: None,
            };
            model::forward(&cx, &self.params, &self.ws, 1.0)?;
            out.push((self.backend.read(&self.ws.losses), chunk.len()));
        }
        self.backend.flush();
        Ok(out)
    }

    /// Scores the probes with the current weights (high precision). Call between steps
    /// (after [`Self::finish`]); blocks.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn evaluate(
        &mut self,
        probes: &crate::corpus::ProbeSet,
    ) -> Result<ProbeScores, TrainError> {
        self.begin_evaluate(probes)?.finish(true)
    }

    /// Enqueues the probes' forward passes with the current weights (high precision) and
    /// returns at once; [`PendingEval::finish`] scores them once their losses are back (what
    /// the browser does between frames). Call between steps, with no step in flight.
    pub fn begin_evaluate(
        &mut self,
        probes: &crate::corpus::ProbeSet,
    ) -> Result<PendingEval, TrainError> {
        let ctx = self.config.model.context;
        let vocab = self.config.model.vocab as u32;
        let tok = |s: &str| -> Vec<f32> {
            crate::data::tokenize(s)
                .into_iter()
                .map(|t| t.min(vocab - 1) as f32)
                .collect()
        };
        // One sequence per (item, choice): the choice's tokens are the last targets.
        let mc = |items: &[crate::corpus::McItem]| -> Vec<(Vec<f32>, Vec<f32>, usize, usize)> {
            let mut seqs = Vec::new();
            for it in items {
                for c in &it.choices {
                    let mut t = tok(&it.context);
                    let choice = tok(c);
                    t.extend_from_slice(&choice);
                    let t = &t[t.len().saturating_sub(ctx + 1)..];
                    let used = t.len() - 1;
                    let mut x = t[..used].to_vec();
                    let mut y = t[1..].to_vec();
                    x.resize(ctx, 0.0);
                    y.resize(ctx, 0.0);
                    seqs.push((x, y, used.min(ctx), choice.len().min(used)));
                }
            }
            seqs
        };
        let (knowledge, completion) = (mc(&probes.knowledge), mc(&probes.completion));
        let held = tok(&probes.heldout);
        let windows: Vec<(Vec<f32>, Vec<f32>)> = held
            .windows(ctx + 1)
            .step_by(ctx)
            .take(32)
            .map(|w| (w[..ctx].to_vec(), w[1..].to_vec()))
            .collect();
        let all: Vec<(Vec<f32>, Vec<f32>)> = knowledge
            .iter()
            .chain(&completion)
            .map(|(x, y, _, _)| (x.clone(), y.clone()))
            .chain(windows.iter().cloned())
            .collect();
        let reads = self.enqueue_row_losses(&all)?;
        let spans =
            |v: &[(Vec<f32>, Vec<f32>, usize, usize)]| v.iter().map(|s| (s.2, s.3)).collect();
        Ok(PendingEval {
            step: self.step,
            ctx,
            reads,
            knowledge: (probes.knowledge.clone(), spans(&knowledge)),
            completion: (probes.completion.clone(), spans(&completion)),
        })
    }
}

/// One forward batch's per-token losses on their way back, with the sequences it holds.
type BatchLosses = (Readback<Vec<f32>>, usize);

/// Weights on their way back ([`Trainer::begin_weights`]).
pub struct PendingWeights {
    specs: Vec<(String, Vec<usize>)>,
    reads: Vec<Readback<Vec<f32>>>,
    step: u64,
}

impl PendingWeights {
    /// Whether every tensor has arrived.
    pub fn is_ready(&self) -> bool {
        self.reads.iter().all(Readback::is_ready)
    }

    /// The weights as a checkpoint (`block`: wait, natively; otherwise they must be ready).
    pub fn finish(self, block: bool) -> Result<Checkpoint, TrainError> {
        let mut tensors = Vec::new();
        for ((name, shape), r) in self.specs.into_iter().zip(self.reads) {
            tensors.push(crate::checkpoint::NamedTensor {
                name,
                shape,
                data: take_value(r, block)?,
            });
        }
        let metadata = [("step".to_owned(), self.step.to_string())].into();
        Ok(Checkpoint { tensors, metadata })
    }
}

/// Probe scoring in flight ([`Trainer::begin_evaluate`]).
pub struct PendingEval {
    step: u64,
    ctx: usize,
    reads: Vec<BatchLosses>,
    /// Items and, per (item, choice) sequence, (tokens used, choice tokens).
    knowledge: (Vec<crate::corpus::McItem>, Vec<(usize, usize)>),
    completion: (Vec<crate::corpus::McItem>, Vec<(usize, usize)>),
}

impl PendingEval {
    /// Whether every loss has arrived.
    pub fn is_ready(&self) -> bool {
        self.reads.iter().all(|(r, _)| r.is_ready())
    }

    /// The scores (`block`: wait for the losses, natively; otherwise they must be ready).
    pub fn finish(self, block: bool) -> Result<ProbeScores, TrainError> {
        let ctx = self.ctx;
        let mut rows: Vec<Vec<f32>> = Vec::new();
        for (r, n) in self.reads {
            let losses = take_value(r, block)?;
            for i in 0..n {
                rows.push(losses[i * ctx..(i + 1) * ctx].to_vec());
            }
        }
        let mut at = 0;
        let mut score = |(items, spans): &(Vec<crate::corpus::McItem>, Vec<(usize, usize)>)| {
            let mut ll = Vec::new();
            let mut k = 0;
            for it in items {
                let mut row = Vec::new();
                for _ in &it.choices {
                    let (used, n) = spans[k];
                    let l: f64 = rows[at + k][used - n..used]
                        .iter()
                        .map(|v| f64::from(*v))
                        .sum();
                    row.push(-l);
                    k += 1;
                }
                ll.push(row);
            }
            at += k;
            crate::corpus::mc_accuracy(items, &ll)
        };
        let (knowledge_acc, knowledge_acc_norm) = score(&self.knowledge);
        let (completion_acc, completion_acc_norm) = score(&self.completion);
        let held = &rows[at..];
        let n: usize = held.iter().map(Vec::len).sum();
        let heldout_loss =
            held.iter().flatten().map(|v| f64::from(*v)).sum::<f64>() / n.max(1) as f64;
        Ok(ProbeScores {
            step: self.step,
            knowledge_acc,
            knowledge_acc_norm,
            completion_acc,
            completion_acc_norm,
            heldout_loss,
        })
    }
}

impl<B: Backend> Trainer<B> {
    /// The full training state after the last enqueued step (blocks on readback).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn checkpoint(&self) -> Result<Checkpoint, TrainError> {
        let specs = model::param_specs(&self.config.model);
        let read = |list: Vec<&B::Tensor>| -> Result<Vec<Vec<f32>>, TrainError> {
            let reads: Vec<_> = list.into_iter().map(|t| self.backend.read(t)).collect();
            reads.into_iter().map(|r| take_value(r, true)).collect()
        };
        let (p, m, v) = (
            read(self.params.list())?,
            read(self.m.list())?,
            read(self.v.list())?,
        );
        let mut tensors = Vec::new();
        for (prefix, values) in [
            ("", &p),
            ("optimizer.exp_avg.", &m),
            ("optimizer.exp_avg_sq.", &v),
        ] {
            for ((name, shape, _), data) in specs.iter().zip(values) {
                tensors.push(crate::checkpoint::NamedTensor {
                    name: format!("{prefix}{name}"),
                    shape: shape.clone(),
                    data: data.clone(),
                });
            }
        }
        if let Some(bank) = &self.bank {
            let snap = take_value(self.backend.read_bank(bank), true)?;
            for (i, q) in snap.quantizers.iter().enumerate() {
                for (what, data) in [
                    ("history", &q.history),
                    ("est", &q.est),
                    ("scales", &q.scales),
                ] {
                    tensors.push(crate::checkpoint::NamedTensor {
                        name: format!("quantizers.{i}.{what}"),
                        shape: vec![data.len()],
                        data: data.clone(),
                    });
                }
            }
        }
        let metadata = [
            ("format", CHECKPOINT_FORMAT.to_owned()),
            ("step", self.step.to_string()),
            ("data_position", self.sampler.position.to_string()),
            ("seed", self.config.train.seed.to_string()),
            ("config_fingerprint", self.config.continuation_fingerprint()),
            ("config", self.config.to_toml()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        Ok(Checkpoint { tensors, metadata })
    }

    /// Enqueues the readback of the model weights (no optimizer state); [`PendingWeights`]
    /// turns them into a checkpoint [`Trainer::load_weights`] accepts. Never waits.
    pub fn begin_weights(&self) -> PendingWeights {
        self.backend.flush();
        PendingWeights {
            specs: model::param_specs(&self.config.model)
                .into_iter()
                .map(|(name, shape, _)| (name, shape))
                .collect(),
            reads: self
                .params
                .list()
                .into_iter()
                .map(|t| self.backend.read(t))
                .collect(),
            step: self.step,
        }
    }

    /// Continues from a checkpoint of a run with the same model (shapes are checked): the
    /// parameters, optimizer moments, quantizer histories, step and data position.
    pub fn restore(&mut self, ck: &Checkpoint) -> Result<(), TrainError> {
        let bad = |m: String| TrainError::Checkpoint(m);
        if ck.metadata.get("format").map(String::as_str) != Some(CHECKPOINT_FORMAT) {
            return Err(bad(format!(
                "not a {CHECKPOINT_FORMAT} file (metadata 'format')"
            )));
        }
        let meta_u64 = |k: &str| -> Result<u64, TrainError> {
            ck.metadata
                .get(k)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad(format!("metadata '{k}' missing or not a number")))
        };
        // Everything is checked before anything is written: a refused checkpoint leaves the
        // trainer as it was. Shapes first (they name the tensor), then the fingerprint.
        let specs = model::param_specs(&self.config.model);
        let mut writes = Vec::new();
        for (prefix, list) in [
            ("", self.params.list()),
            ("optimizer.exp_avg.", self.m.list()),
            ("optimizer.exp_avg_sq.", self.v.list()),
        ] {
            for ((name, shape, _), t) in specs.iter().zip(list) {
                let full = format!("{prefix}{name}");
                let nt = ck
                    .get(&full)
                    .ok_or_else(|| bad(format!("tensor '{full}' missing")))?;
                if &nt.shape != shape {
                    return Err(bad(format!(
                        "tensor '{full}' has shape {:?}, this model needs {shape:?} (different config?)",
                        nt.shape
                    )));
                }
                writes.push((t, &nt.data));
            }
        }
        if let Some(stored) = ck.metadata.get("config_fingerprint") {
            let ours = self.config.continuation_fingerprint();
            if *stored != ours {
                let differences = ck
                    .metadata
                    .get("config")
                    .and_then(|t| toml::from_str::<RunConfig>(t).ok())
                    .map(|theirs| theirs.continuation_differences(&self.config).join("; "))
                    .unwrap_or_default();
                return Err(bad(format!(
                    "written for config fingerprint {stored}, this run has {ours} (another \
                     run's checkpoint?){}",
                    if differences.is_empty() {
                        String::new()
                    } else {
                        format!(": {differences} (checkpoint → this run)")
                    }
                )));
            }
        }
        let bank_snapshot = if self.bank.is_some() {
            let mut snap = BankSnapshot {
                active: self.active,
                quantizers: Vec::new(),
                histogram: None,
            };
            for i in 0..self.plan.ids.len() {
                let get = |what: &str| {
                    ck.get(&format!("quantizers.{i}.{what}"))
                        .map(|t| t.data.clone())
                        .ok_or_else(|| bad(format!("tensor 'quantizers.{i}.{what}' missing")))
                };
                snap.quantizers.push(hif8lab_engine::QuantizerSnapshot {
                    history: get("history")?,
                    est: get("est")?,
                    scales: get("scales")?,
                    ..Default::default()
                });
            }
            Some(snap)
        } else {
            None
        };
        let step = meta_u64("step")?;
        let position = meta_u64("data_position")?;
        for (t, data) in writes {
            self.backend.write(t, data)?;
        }
        if let (Some(bank), Some(snap)) = (&self.bank, &bank_snapshot) {
            self.backend.restore_bank(bank, snap)?;
        }
        self.step = step;
        self.sampler.position = position;
        self.pending.clear();
        Ok(())
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
