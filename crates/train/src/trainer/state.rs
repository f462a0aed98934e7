//! The trainer's full state as a checkpoint: taking one, reading weights back, restoring.

use super::*;

const CHECKPOINT_FORMAT: &str = "hif8lab-checkpoint-1";

impl<B: Backend> Trainer<B> {
    /// The full training state after the last enqueued step (blocks on readback).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn checkpoint(&self) -> Result<Checkpoint, TrainError> {
        crate::models::checkpoint::materialize(&self.checkpoint_source()?)
            .map_err(|e| TrainError::Checkpoint(e.to_string()))
    }

    /// The full training state as a [`crate::models::checkpoint::CheckpointSource`]: weights and
    /// AdamW moments read back one tensor at a time as they are written (the quantizer bank,
    /// small, read once here), so a checkpoint is written without a copy of the whole state.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn checkpoint_source(&self) -> Result<TrainerCheckpoint<'_, B>, TrainError> {
        let specs = model::param_specs(&self.config.model);
        let mut layout = Vec::new();
        for (prefix, list) in [
            ("", self.params.list()),
            ("optimizer.exp_avg.", self.m.list()),
            ("optimizer.exp_avg_sq.", self.v.list()),
        ] {
            for ((name, shape, _), t) in specs.iter().zip(list) {
                layout.push((format!("{prefix}{name}"), shape.clone(), Part::State(t)));
            }
        }
        let mut bank = Vec::new();
        if let Some(b) = &self.bank {
            let snap = take_value(self.backend.read_bank(b), true)?;
            for (i, q) in snap.quantizers.into_iter().enumerate() {
                for (what, data) in [("history", q.history), ("est", q.est), ("scales", q.scales)] {
                    layout.push((
                        format!("quantizers.{i}.{what}"),
                        vec![data.len()],
                        Part::Bank(bank.len()),
                    ));
                    bank.push(data);
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
        Ok(TrainerCheckpoint {
            trainer: self,
            layout,
            bank,
            metadata,
        })
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
                writes.push((
                    t,
                    ck.tensor_of_shape(&full, shape)
                        .map_err(|e| bad(e.to_string()))?,
                ));
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
            Some(
                bank_snapshot(ck, self.plan.ids.len(), self.active)
                    .map_err(|e| bad(e.to_string()))?,
            )
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

/// The quantizer bank state a checkpoint holds (`quantizers.{i}.history|est|scales` for
/// `quantizers` quantizers), with estimator `active` in use.
pub fn bank_snapshot(
    ck: &Checkpoint,
    quantizers: usize,
    active: usize,
) -> Result<BankSnapshot, crate::models::checkpoint::TensorError> {
    let mut snap = BankSnapshot {
        active,
        quantizers: Vec::new(),
        histogram: None,
    };
    for i in 0..quantizers {
        let get = |what: &str| {
            ck.get(&format!("quantizers.{i}.{what}"))
                .map(|t| t.data.clone())
                .ok_or_else(|| crate::models::checkpoint::TensorError::Missing {
                    name: format!("quantizers.{i}.{what}"),
                })
        };
        snap.quantizers.push(hif8lab_engine::QuantizerSnapshot {
            history: get("history")?,
            est: get("est")?,
            scales: get("scales")?,
            ..Default::default()
        });
    }
    Ok(snap)
}

/// Where a tensor of a [`TrainerCheckpoint`] lives.
#[cfg(not(target_arch = "wasm32"))]
enum Part<'a, T> {
    /// A weight or AdamW moment on the backend, read back when written.
    State(&'a T),
    /// An entry of the bank snapshot.
    Bank(usize),
}

/// A trainer's state, read back tensor by tensor ([`Trainer::checkpoint_source`]).
#[cfg(not(target_arch = "wasm32"))]
pub struct TrainerCheckpoint<'a, B: Backend> {
    trainer: &'a Trainer<B>,
    layout: Vec<(String, Vec<usize>, Part<'a, B::Tensor>)>,
    bank: Vec<Vec<f32>>,
    metadata: std::collections::BTreeMap<String, String>,
}

#[cfg(not(target_arch = "wasm32"))]
impl<B: Backend> crate::models::checkpoint::CheckpointSource for TrainerCheckpoint<'_, B> {
    fn layout(&self) -> Vec<(String, Vec<usize>)> {
        self.layout
            .iter()
            .map(|(n, s, _)| (n.clone(), s.clone()))
            .collect()
    }

    fn metadata(&self) -> std::collections::BTreeMap<String, String> {
        self.metadata.clone()
    }

    fn tensor(&self, i: usize) -> std::io::Result<std::borrow::Cow<'_, [f32]>> {
        match self.layout[i].2 {
            Part::State(t) => take_value(self.trainer.backend.read(t), true)
                .map(std::borrow::Cow::Owned)
                .map_err(|e| std::io::Error::other(e.to_string())),
            Part::Bank(j) => Ok(std::borrow::Cow::Borrowed(&self.bank[j])),
        }
    }
}
