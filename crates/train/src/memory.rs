//! What a run configuration needs in memory, estimated before anything is allocated, and the
//! check that refuses a run the backend cannot hold (a failed allocation aborts the process;
//! a vocabulary of 2^24 would spend minutes initializing before it does).
//!
//! The parts mirror what [`crate::Trainer::new`] allocates: weights, gradients and the two
//! AdamW moments (f32 each), the activations one micro-batch keeps for the backward pass
//! ([`crate::model::Workspace`]), the quantizer bank, the tokenized corpus, and the host
//! vectors the initial weights are made in. Sizes are computed in `u128`, so no config
//! overflows the arithmetic.

use std::fmt;

use hif8lab_engine::MemoryLimits;

use crate::config::RunConfig;

/// One part of the estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryPart {
    /// What it is (`weights`, `activations`, …).
    pub name: &'static str,
    /// Bytes.
    pub bytes: u128,
    /// Whether it lives on the device (GPU backend) or always on the host.
    pub on_device: bool,
}

/// The memory a configuration needs.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryEstimate {
    /// Trainable parameters.
    pub parameters: u128,
    /// The parts, in allocation order.
    pub parts: Vec<MemoryPart>,
    /// The largest single tensor: name and bytes (one GPU binding must hold it).
    pub largest_tensor: (&'static str, u128),
}

/// A run that does not fit: the estimate and the limit it exceeds.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct DoesNotFit(pub String);

fn mb(bytes: u128) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / f64::from(1u32 << 30))
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    }
}

/// The counts an estimate is made of: parameters, activations and tensor sizes, in f32s.
struct Counts {
    parameters: u128,
    activations: u128,
    /// [vocab, d_model], [batch·context, vocab], [batch, heads, context, context],
    /// [batch·context, d_ff], [d_ff, d_model].
    table: u128,
    logits: u128,
    probs: u128,
    mlp_acts: u128,
    mlp_weight: u128,
}

impl Counts {
    fn of(config: &RunConfig) -> Self {
        let m = &config.model;
        let u = |v: usize| v as u128;
        let (v, c, f, layers) = (u(m.vocab), u(m.d_model), u(m.d_ff), u(m.layers));
        let hd = u(m.head_dim());
        let (qd, kvd) = (u(m.heads) * hd, u(m.kv_heads) * hd);
        let per_block = 2 * c + qd * c + 2 * kvd * c + c * qd + 3 * f * c;
        let tables = if m.tie_embeddings { 1 } else { 2 };
        let batch = u(config.train.batch);
        let t = u(m.context);
        let n = batch * t;
        let probs = batch * u(m.heads) * t * t;
        // Per block (Workspace::BlockActs): x, h1, x2, h2 [n, c]; rstd1, rstd2 [n]; q, att
        // [n, qd]; k, v [n, kvd]; probs [b, heads, t, t]; g, u, s [n, f].
        let block_acts = 4 * n * c + 2 * n + 2 * n * qd + 2 * n * kvd + probs + 3 * n * f;
        // Shared: tokens, targets, rstdf, losses [n]; xf, hf, dres, dh, dtmp [n, c]; logits,
        // dlogits [n, v]; dq, dq_r, datt, q_pre [n, qd]; dk, dv, dk_r, k_pre [n, kvd];
        // dscores [probs]; dg, du, ds [n, f]; rope table [t, hd].
        let shared =
            4 * n + 5 * n * c + 2 * n * v + 4 * n * qd + 4 * n * kvd + probs + 3 * n * f + t * hd;
        Counts {
            parameters: tables * v * c + layers * per_block + c,
            activations: layers * block_acts + shared,
            table: v * c,
            logits: n * v,
            probs,
            mlp_acts: n * f,
            mlp_weight: f * c,
        }
    }

    /// The largest single tensor: name and bytes.
    fn largest(&self) -> (&'static str, u128) {
        [
            ("embedding / LM head [vocab, d_model]", self.table),
            ("logits [batch·context, vocab]", self.logits),
            (
                "attention probabilities [batch, heads, context, context]",
                self.probs,
            ),
            ("MLP activations [batch·context, d_ff]", self.mlp_acts),
            ("MLP weight [d_ff, d_model]", self.mlp_weight),
        ]
        .into_iter()
        .max_by_key(|(_, e)| *e)
        .map_or(("none", 0), |(name, e)| (name, e * 4))
    }
}

impl MemoryEstimate {
    /// The estimate for `config`.
    pub fn for_config(config: &RunConfig) -> Self {
        let counts = Counts::of(config);
        let parameters = counts.parameters;
        let quantizers = crate::model::QuantPlan::new(&config.model, &config.qat)
            .ids
            .len();
        // Every buffer the engine's bank allocates, from the engine's own layout.
        // A config whose scaling cannot be planned is refused before it trains; its estimate
        // counts no bank.
        let bank = config.qat.scaling.plan().map_or(0, |plan| {
            hif8lab_engine::gpu::bank_bytes(&hif8lab_engine::BankConfig::new(quantizers, plan))
        });
        let corpus_bytes = match &config.data.corpus {
            crate::config::Corpus::File(path) => path_bytes(path),
            _ => config.data.bytes as u128,
        };
        let f32s = |count: u128| count * 4;
        let part = |name, bytes, on_device| MemoryPart {
            name,
            bytes,
            on_device,
        };
        let mut parts = vec![
            part("weights", f32s(parameters), true),
            part("gradients", f32s(parameters), true),
            part("AdamW moments", f32s(2 * parameters), true),
            part("activations", f32s(counts.activations), true),
            part("quantizer bank", bank, true),
            // The text and its token ids (u32 per byte).
            part("corpus", corpus_bytes * 5, false),
            // Initial values, made on the host before upload (zeros are the backend's).
            part("initialization (host, transient)", f32s(parameters), false),
        ];
        if config.train.init_from.is_some() {
            // The model's weights as read (f32), held until they are loaded.
            parts.push(part(
                "init-from weights (host, transient)",
                f32s(parameters),
                false,
            ));
        }
        MemoryEstimate {
            parameters,
            parts,
            largest_tensor: counts.largest(),
        }
    }

    /// Bytes in all.
    pub fn total(&self) -> u128 {
        self.parts.iter().map(|p| p.bytes).sum()
    }

    /// Bytes that live on the device when training on a GPU.
    pub fn device(&self) -> u128 {
        self.parts
            .iter()
            .filter(|p| p.on_device)
            .map(|p| p.bytes)
            .sum()
    }

    /// Checks the estimate against what a backend can hold (`limits`, on the device called
    /// `adapter`); the error gives the estimate and the limit.
    pub fn check(&self, limits: &MemoryLimits, adapter: &str) -> Result<(), DoesNotFit> {
        if let Some(limit) = limits.max_tensor_bytes {
            let (name, bytes) = self.largest_tensor;
            if bytes > u128::from(limit) {
                return Err(DoesNotFit(format!(
                    "the largest tensor, {name}, needs {} but one buffer on '{adapter}' holds at \
                     most {} (max_storage_buffer_binding_size); make the model, batch or context \
                     smaller",
                    mb(bytes),
                    mb(u128::from(limit))
                )));
            }
        }
        // Where tensors live on a separate device, only the host parts stay on the host.
        let host_need = if limits.device_in_host {
            self.total()
        } else {
            self.total() - self.device()
        };
        if let Some(limit) = limits.host_bytes
            && host_need > u128::from(limit)
        {
            return Err(DoesNotFit(format!(
                "this run needs about {} of memory ({}) but {} is available on this machine; \
                 make the model, batch, context or corpus smaller",
                mb(host_need),
                self.breakdown(),
                mb(u128::from(limit))
            )));
        }
        if let (false, Some(limit)) = (limits.device_in_host, limits.device_bytes)
            && self.device() > u128::from(limit)
        {
            return Err(DoesNotFit(format!(
                "this run needs about {} of device memory but '{adapter}' has {}",
                mb(self.device()),
                mb(u128::from(limit))
            )));
        }
        Ok(())
    }

    /// Bytes of the part called `name` (0 when there is none).
    fn part(&self, name: &str) -> u128 {
        self.parts
            .iter()
            .filter(|p| p.name == name)
            .map(|p| p.bytes)
            .sum()
    }

    /// `0.22 M parameters, about 10.0 MiB (weights, gradients and AdamW 3.4 MiB, activations
    /// 3.1 MiB)`: the line the CLI and the app show.
    pub fn summary(&self) -> String {
        let state = self.part("weights") + self.part("gradients") + self.part("AdamW moments");
        format!(
            "{:.2} M parameters, about {} (weights, gradients and AdamW {}, activations {})",
            self.parameters as f64 / 1e6,
            mb(self.total()),
            mb(state),
            mb(self.part("activations"))
        )
    }

    /// `weights 13.4 MiB, gradients …` in one line.
    pub fn breakdown(&self) -> String {
        self.parts
            .iter()
            .map(|p| format!("{} {}", p.name, mb(p.bytes)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for MemoryEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "parameters: {}", self.parameters)?;
        for p in &self.parts {
            writeln!(f, "  {:<34} {:>12}", p.name, mb(p.bytes))?;
        }
        writeln!(f, "  {:<34} {:>12}", "total", mb(self.total()))?;
        write!(
            f,
            "largest tensor: {} ({})",
            self.largest_tensor.0,
            mb(self.largest_tensor.1)
        )
    }
}

/// Bytes of a corpus file, or of the files of a corpus folder (0 when unreadable: reading
/// the corpus then reports the error with its path).
fn path_bytes(path: &std::path::Path) -> u128 {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => u128::from(m.len()),
        Ok(m) if m.is_dir() => std::fs::read_dir(path)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| e.metadata().ok())
                    .filter(|m| m.is_file())
                    .map(|m| u128::from(m.len()))
                    .sum()
            })
            .unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(host: u64, max_tensor: Option<u64>, device_in_host: bool) -> MemoryLimits {
        MemoryLimits {
            host_bytes: Some(host),
            device_bytes: None,
            device_in_host,
            max_tensor_bytes: max_tensor,
        }
    }

    #[test]
    fn parameters_match_the_model_and_huge_configs_are_refused() {
        let (_, text) = crate::config::PRESETS[1];
        let config = RunConfig::parse("small", text, &[]).expect("preset");
        let e = MemoryEstimate::for_config(&config);
        let specs = crate::model::param_specs(&config.model);
        let counted: usize = specs
            .iter()
            .map(|(_, s, _)| s.iter().product::<usize>())
            .sum();
        assert_eq!(e.parameters, counted as u128);
        // Tied embeddings: one table fewer.
        let tied =
            RunConfig::parse("small", text, &["model.tie_embeddings=true".into()]).expect("tied");
        let counted: usize = crate::model::param_specs(&tied.model)
            .iter()
            .map(|(_, s, _)| s.iter().product::<usize>())
            .sum();
        assert_eq!(
            MemoryEstimate::for_config(&tied).parameters,
            counted as u128
        );
        assert!(e.check(&limits(8 << 30, None, true), "cpu").is_ok());
        // Continuing from a model: its weights are held while they load.
        let mut from = config.clone();
        from.train.init_from = Some("model.gguf".into());
        let f = MemoryEstimate::for_config(&from);
        assert_eq!(f.total(), e.total() + 4 * e.parameters);
        assert!(
            f.parts
                .iter()
                .any(|p| p.name.starts_with("init-from weights"))
        );
        let err = e
            .check(&limits(1 << 20, None, true), "cpu")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is available") && err.contains("weights"),
            "{err}"
        );
        let huge =
            RunConfig::parse("small", text, &["model.context=100000".into()]).expect("parses");
        let h = MemoryEstimate::for_config(&huge);
        assert!(h.total() > 1u128 << 40, "{}", h.total());
        let err = h
            .check(&limits(u64::MAX, Some(128 << 20), false), "gpu")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("largest tensor") && err.contains("attention"),
            "{err}"
        );
        // A discrete GPU keeps the device parts off the host.
        let host_parts = (e.total() - e.device()) as u64;
        assert!(e.check(&limits(host_parts + 1, None, false), "gpu").is_ok());
        assert!(e.check(&limits(host_parts + 1, None, true), "gpu").is_err());
    }
}
