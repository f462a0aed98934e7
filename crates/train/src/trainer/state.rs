//! The trainer's full state as a checkpoint: taking one, reading weights back, restoring.

use super::*;

const CHECKPOINT_FORMAT: &str = "hif8lab-checkpoint-1";

impl<B: Backend> Trainer<B> {
    /// The full training state after the last enqueued step (blocks on readback).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn checkpoint(&self) -> Result<Checkpoint, TrainError> {
        let specs = model::param_specs(&self.config.model);
        let read = |list: Vec<&B::Tensor>| -> Result<Vec<Vec<f32>>, TrainError> {
            let reads: Vec<_> = list.into_iter().map(|t| self.backend.read(t)).collect();
            reads.into_iter().map(|r| take_value(r, true)).collect()
        };
        // Each group read back and moved in (never copied: at 135 M parameters a copy of
        // weights and moments is 1.6 GB more at the peak).
        let mut tensors = Vec::new();
        for (prefix, list) in [
            ("", self.params.list()),
            ("optimizer.exp_avg.", self.m.list()),
            ("optimizer.exp_avg_sq.", self.v.list()),
        ] {
            for ((name, shape, _), data) in specs.iter().zip(read(list)?) {
                tensors.push(crate::checkpoint::NamedTensor {
                    name: format!("{prefix}{name}"),
                    shape: shape.clone(),
                    data,
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
                writes.push((t, ck.tensor_of_shape(&full, shape).map_err(bad)?));
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
            Some(bank_snapshot(ck, self.plan.ids.len(), self.active).map_err(bad)?)
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
) -> Result<BankSnapshot, String> {
    let mut snap = BankSnapshot {
        active,
        quantizers: Vec::new(),
        histogram: None,
    };
    for i in 0..quantizers {
        let get = |what: &str| {
            ck.get(&format!("quantizers.{i}.{what}"))
                .map(|t| t.data.clone())
                .ok_or_else(|| format!("tensor 'quantizers.{i}.{what}' missing"))
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
