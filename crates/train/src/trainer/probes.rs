//! Probe scoring on a trainer (knowledge, completion, held-out loss), asynchronous or
//! blocking, and loading base weights.

use super::*;

impl<B: Backend> Trainer<B> {
    /// Replaces the model weights with those of a checkpoint (optimizer, step and data stay
    /// fresh): continued training from a pretrained base.
    pub fn load_weights(&mut self, ck: &Checkpoint) -> Result<(), TrainError> {
        let specs = model::param_specs(&self.config.model);
        for ((name, shape, _), t) in specs.iter().zip(self.params.list()) {
            let data = ck.tensor_of_shape(name, shape)?;
            self.backend.write(t, data)?;
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
                bf16: self.config.train.precision() == crate::config::Precision::Bf16,
                bf16_units: self.gemm.is_some(),
                clipped_ste: false,
                scratch: &[],
                histogram: None,
                first_micro: false,
                norms: None,
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
    pub fn evaluate(&mut self, probes: &crate::eval::ProbeSet) -> Result<ProbeScores, TrainError> {
        self.begin_evaluate(probes)?.finish(true)
    }

    /// Enqueues the probes' forward passes with the current weights (high precision) and
    /// returns at once; [`PendingEval::finish`] scores them once their losses are back (what
    /// the browser does between frames). Call between steps, with no step in flight.
    pub fn begin_evaluate(
        &mut self,
        probes: &crate::eval::ProbeSet,
    ) -> Result<PendingEval, TrainError> {
        let ctx = self.config.model.context;
        let vocab = self.config.model.vocab as u32;
        let tokenizer = &self.tokenizer;
        let tok = |s: &str| -> Vec<f32> {
            tokenizer
                .encode(s)
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.min(vocab - 1) as f32)
                .collect()
        };
        // One sequence per (item, choice): the choice's tokens are the last targets.
        let mc = |items: &[crate::eval::McItem]| -> Vec<(Vec<f32>, Vec<f32>, usize, usize)> {
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
    pub(super) specs: Vec<(String, Vec<usize>)>,
    pub(super) reads: Vec<Readback<Vec<f32>>>,
    pub(super) step: u64,
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
            tensors.push(crate::models::checkpoint::NamedTensor {
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
    knowledge: (Vec<crate::eval::McItem>, Vec<(usize, usize)>),
    completion: (Vec<crate::eval::McItem>, Vec<(usize, usize)>),
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
        Ok(crate::eval::score_probes(
            self.step,
            &rows,
            &self.knowledge,
            &self.completion,
        ))
    }
}
