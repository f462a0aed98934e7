//! Validation of a run configuration: every message names the key.

use super::*;

/// A setting out of range or inconsistent with another: the keys involved (the first is the
/// one the message is about) and the message, which names them. A `--set` of any of the
/// keys (or of a table holding one) is blamed for it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidKey {
    /// The dotted keys involved (`model.d_model`, `model.heads`).
    pub keys: Vec<&'static str>,
    /// What is wrong.
    pub message: String,
}

impl InvalidKey {
    fn new(keys: &[&'static str], message: impl Into<String>) -> Self {
        InvalidKey {
            keys: keys.to_vec(),
            message: message.into(),
        }
    }

    /// Whether a `--set` of `key` set one of the keys involved (the key itself, or a
    /// table above it).
    pub fn involves(&self, key: &str) -> bool {
        self.keys.iter().any(|k| {
            *k == key
                || k.strip_prefix(key)
                    .is_some_and(|rest| rest.starts_with('.'))
        })
    }
}

impl RunConfig {
    /// Checks ranges and consistency; the error names the keys.
    pub fn validate(&self) -> Result<(), InvalidKey> {
        self.check_model()?;
        self.check_ranges()?;
        self.check_rest()
    }

    /// The model's sizes: positive, consistent, representable.
    fn check_model(&self) -> Result<(), InvalidKey> {
        let m = &self.model;
        let positive = [
            ("model.vocab", m.vocab),
            ("model.d_model", m.d_model),
            ("model.layers", m.layers),
            ("model.heads", m.heads),
            ("model.kv_heads", m.kv_heads),
            ("model.d_ff", m.d_ff),
            ("model.context", m.context),
            ("train.batch", self.train.batch),
            ("train.grad_accum", self.train.grad_accum),
            ("train.keep_checkpoints", self.train.keep_checkpoints),
        ];
        for (key, v) in positive {
            if v == 0 {
                return Err(InvalidKey::new(&[key], format!("{key} must be at least 1")));
            }
        }
        // The block count sizes a list in the checks below: bounded first (far above anything
        // trainable here); every other size is left to the memory estimate.
        if m.layers > 1 << 12 {
            return Err(InvalidKey::new(
                &["model.layers"],
                format!("model.layers must be at most {}, got {}", 1 << 12, m.layers),
            ));
        }
        if m.context < 2 {
            return Err(InvalidKey::new(
                &["model.context"],
                "model.context must be at least 2",
            ));
        }
        if !m.d_model.is_multiple_of(m.heads) {
            return Err(InvalidKey::new(
                &["model.d_model", "model.heads"],
                format!(
                    "model.d_model {} must be a multiple of model.heads {}",
                    m.d_model, m.heads
                ),
            ));
        }
        if !m.heads.is_multiple_of(m.kv_heads) {
            return Err(InvalidKey::new(
                &["model.heads", "model.kv_heads"],
                format!(
                    "model.heads {} must be a multiple of model.kv_heads {}",
                    m.heads, m.kv_heads
                ),
            ));
        }
        if !m.head_dim().is_multiple_of(2) {
            return Err(InvalidKey::new(
                &["model.d_model", "model.heads"],
                format!(
                    "model.d_model / model.heads = {} must be even (RoPE)",
                    m.head_dim()
                ),
            ));
        }
        if m.max_positions.is_some_and(|p| m.context > p) {
            return Err(InvalidKey::new(
                &["model.context", "model.max_positions"],
                format!(
                    "model.context {} is longer than model.max_positions {} (the longest context \
                 the model was made for)",
                    m.context,
                    m.max_positions.unwrap_or_default()
                ),
            ));
        }
        if m.vocab > 1 << 24 {
            return Err(InvalidKey::new(
                &["model.vocab"],
                "model.vocab must be below 2^24",
            ));
        }
        Ok(())
    }

    /// Each numeric setting in the range where training means something; a value outside
    /// would otherwise train silently wrong or end in "non-finite values" without a name.
    fn check_ranges(&self) -> Result<(), InvalidKey> {
        let (m, t) = (&self.model, &self.train);
        if t.steps == 0 {
            return Err(InvalidKey::new(
                &["train.steps"],
                "train.steps must be at least 1",
            ));
        }
        let ranges: [(&'static str, f64, f64, f64, &str); 9] = [
            (
                "model.norm_eps",
                f64::from(m.norm_eps),
                1e-12,
                1.0,
                "[1e-12, 1]",
            ),
            ("model.rope_theta", m.rope_theta, 1.0, 1e12, "[1, 1e12]"),
            ("train.lr", f64::from(t.lr), 0.0, 1.0, "[0, 1]"),
            (
                "train.warmup_frac",
                f64::from(t.warmup_frac),
                0.0,
                1.0,
                "[0, 1]",
            ),
            (
                "train.weight_decay",
                f64::from(t.weight_decay),
                0.0,
                10.0,
                "[0, 10]",
            ),
            ("train.beta1", f64::from(t.beta1), 0.0, 1.0, "[0, 1)"),
            ("train.beta2", f64::from(t.beta2), 0.0, 1.0, "[0, 1)"),
            ("train.eps", f64::from(t.eps), 1e-30, 1.0, "[1e-30, 1]"),
            (
                "train.grad_clip",
                f64::from(t.grad_clip),
                0.0,
                f64::from(f32::MAX),
                "[0, f32 max] (0 turns clipping off)",
            ),
        ];
        for (key, v, lo, hi, shown) in ranges {
            let half_open = shown.ends_with(')');
            let inside = v.is_finite() && v >= lo && if half_open { v < hi } else { v <= hi };
            if !inside {
                let shown_v = if v != 0.0 && !(1e-4..1e6).contains(&v.abs()) {
                    format!("{:e}", v as f32)
                } else {
                    format!("{}", v as f32)
                };
                return Err(InvalidKey::new(
                    &[key],
                    format!("{key} must be in {shown}, got {shown_v}"),
                ));
            }
        }
        Ok(())
    }

    /// Why QAT is on yet quantizes nothing (no block, module or role left), if it is: such
    /// a run traces no quantizer, so `train` says so loudly and a grid refuses it (its
    /// claims would be judged from no data).
    pub fn qat_quantizes_nothing(&self) -> Option<String> {
        let q = &self.qat;
        if !q.enabled {
            return None;
        }
        let layers = self.model.layers;
        if q.blocks_for(layers).is_empty() {
            let why = match &q.blocks {
                Some(_) => "qat.blocks is an empty list".to_owned(),
                None => {
                    let (first, last) = QatConfig::high_precision_ends(layers);
                    format!(
                        "the default placement keeps the first {first} and last {last} of \
                         model.layers = {layers} blocks in high precision, which leaves none"
                    )
                }
            };
            return Some(format!(
                "qat.enabled = true but no block is quantized ({why}): name blocks (e.g. \
                 --set qat.blocks=[0]) or set qat.enabled=false"
            ));
        }
        if q.modules.is_empty() {
            return Some("qat.enabled = true but qat.modules is an empty list".into());
        }
        if q.roles.is_empty() {
            return Some("qat.enabled = true but qat.roles is an empty list".into());
        }
        None
    }

    /// Data, trace and QAT settings.
    fn check_rest(&self) -> Result<(), InvalidKey> {
        let m = &self.model;
        if self.data.bytes == 0 {
            return Err(InvalidKey::new(
                &["data.bytes"],
                "data.bytes must be at least 1",
            ));
        }
        if self.data.entities == 0 {
            return Err(InvalidKey::new(
                &["data.entities"],
                "data.entities must be at least 1",
            ));
        }
        if self.train.trace_every == 0 {
            return Err(InvalidKey::new(
                &["train.trace_every"],
                "train.trace_every must be at least 1",
            ));
        }
        for b in self.qat.blocks_for(m.layers) {
            if b as usize >= m.layers {
                return Err(InvalidKey::new(
                    &["qat.blocks", "model.layers"],
                    format!(
                        "qat.blocks: block {b} does not exist (model.layers = {})",
                        m.layers
                    ),
                ));
            }
        }
        if self.qat.clipped_ste && self.qat.scaling.overflow != hif8lab_format::Overflow::Saturate {
            return Err(InvalidKey::new(
                &["qat.clipped_ste", "qat.scaling.overflow"],
                "qat.clipped_ste = true needs qat.scaling.overflow = \"saturate\" (the mask zeroes \
                 the gradient of values that saturation clipped)",
            ));
        }
        self.qat
            .scaling
            .validate()
            .map_err(|e| InvalidKey::new(&["qat.scaling"], format!("qat.scaling: {e}")))
    }
}
