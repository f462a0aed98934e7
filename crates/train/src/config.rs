//! Run configuration: TOML with `[model]`, `[train]`, `[qat]` (with `[qat.scaling]`) and
//! `[data]`; presets shipped in `assets/presets/`; `--set key=value` overrides by dotted
//! path. Unknown keys and bad values are errors naming the key.

use hif8lab_scaling::{Module, Role, ScalingConfig, ScalingPlan};
use serde::{Deserialize, Serialize};

mod data;

pub use data::{BYTE_TOKENIZER, Corpus, DataConfig};

/// Presets compiled into the binary (so the browser build has them too).
pub const PRESETS: [(&str, &str); 3] = [
    ("smoke", include_str!("../../../assets/presets/smoke.toml")),
    ("small", include_str!("../../../assets/presets/small.toml")),
    (
        "medium",
        include_str!("../../../assets/presets/medium.toml"),
    ),
];

/// Model sizes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Vocabulary (256 for the byte-level tokenizer).
    pub vocab: usize,
    /// Residual width.
    pub d_model: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention; divides `heads`).
    pub kv_heads: usize,
    /// SwiGLU hidden width.
    pub d_ff: usize,
    /// Context length (tokens per sequence).
    pub context: usize,
    /// RMSNorm epsilon.
    #[serde(default = "default_eps")]
    pub norm_eps: f32,
    /// RoPE base.
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    /// The LM head is the token embedding (Hugging Face `tie_word_embeddings`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tie_embeddings: bool,
    /// The longest context the model was made for (Hugging Face
    /// `max_position_embeddings`); absent: `context`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_positions: Option<usize>,
    /// Llama-3-style rope scaling (Hugging Face `rope_type: llama3`); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_scaling: Option<RopeScaling>,
}

/// Llama-3-style rope scaling, as a Hugging Face config states it (`rope_type: llama3`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RopeScaling {
    /// `factor`.
    pub factor: f64,
    /// `low_freq_factor`.
    pub low_freq_factor: f64,
    /// `high_freq_factor`.
    pub high_freq_factor: f64,
    /// `original_max_position_embeddings`.
    pub original_max_positions: usize,
}

fn default_eps() -> f32 {
    1e-5
}

fn default_rope_theta() -> f64 {
    10000.0
}

impl ModelConfig {
    /// Head dimension.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.heads.max(1)
    }

    /// The RoPE table of `positions` positions (with the model's rope scaling).
    pub fn rope_table(&self, positions: usize) -> Vec<f32> {
        let scaling = self.rope_scaling.map(|s| hif8lab_engine::Llama3Scaling {
            factor: s.factor,
            low_freq_factor: s.low_freq_factor,
            high_freq_factor: s.high_freq_factor,
            original_max_positions: s.original_max_positions as f64,
        });
        hif8lab_engine::rope_table_scaled(positions, self.head_dim(), self.rope_theta, scaling)
    }
}

/// Optimization.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Optimizer steps.
    pub steps: u64,
    /// Sequences per micro-batch.
    pub batch: usize,
    /// Micro-batches per optimizer step.
    #[serde(default = "one")]
    pub grad_accum: usize,
    /// Peak learning rate.
    pub lr: f32,
    /// Fraction of steps of linear warmup (then cosine to 0).
    #[serde(default = "default_warmup_frac")]
    pub warmup_frac: f32,
    /// Decoupled weight decay (matrices and embeddings; not norms).
    #[serde(default = "default_weight_decay")]
    pub weight_decay: f32,
    /// AdamW β1.
    #[serde(default = "default_beta1")]
    pub beta1: f32,
    /// AdamW β2.
    #[serde(default = "default_beta2")]
    pub beta2: f32,
    /// AdamW ε.
    #[serde(default = "default_adam_eps")]
    pub eps: f32,
    /// Global gradient-norm clip (0: off).
    #[serde(default = "one_f32")]
    pub grad_clip: f32,
    /// Seed of initialization and data order.
    #[serde(default)]
    pub seed: u64,
    /// Write one trace record every this many steps (1: every call).
    #[serde(default = "one_u64")]
    pub trace_every: u64,
    /// Write a checkpoint every this many steps (0: only at the end).
    #[serde(default)]
    pub checkpoint_every: u64,
    /// Keep this many newest checkpoints; older ones are removed once a newer one is
    /// written (at least 1; more guard against a damaged newest one).
    #[serde(
        default = "default_keep_checkpoints",
        skip_serializing_if = "is_default_keep_checkpoints"
    )]
    pub keep_checkpoints: usize,
    /// Score the probes (knowledge recall, completion, held-out loss; see the grid) every this
    /// many steps and at the end, into the run folder's `probes.jsonl` (0: never).
    #[serde(default)]
    pub eval_every: u64,
    /// The Hugging Face Llama folder whose weights the run started from (`train --init-from`);
    /// absent: initialized from the seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_from: Option<String>,
    /// The earlier spelling of `precision = "bf16"` (kept so that older configs read the
    /// same): round the operands of every GEMM that are not fake-quantized to bf16.
    #[serde(default)]
    pub bf16_gemm: bool,
    /// The numerics of the products: `"f32"` (every operand as it is) or `"bf16"` (every
    /// operand that is not fake-quantized rounded to bf16, to nearest even, f32 accumulation,
    /// f32 master weights, optimizer, norms, softmax and loss: PyTorch's autocast, the
    /// paper's BF16 baseline).
    #[serde(default, skip_serializing_if = "Precision::is_f32")]
    pub precision: Precision,
    /// Which kernel computes the CPU products whose operands are all exact in bf16
    /// (fake-quantized, or rounded under `precision = "bf16"`): `"auto"` (the bf16
    /// dot-product units where the CPU has them, the f32 GEMM elsewhere), `"f32"` (the f32
    /// GEMM: the oracle) or `"bf16"` (the units, and an error where the CPU lacks them). The
    /// products are the same; only the order of f32 accumulation differs. Each segment of a
    /// run records the kernel it used (`segments.json`, `gemm`). The GPU ignores it.
    #[serde(default, skip_serializing_if = "Gemm::is_auto")]
    pub gemm: Gemm,
}

impl TrainConfig {
    /// The precision in effect (`bf16_gemm = true` is `precision = "bf16"`).
    pub fn precision(&self) -> Precision {
        if self.bf16_gemm {
            Precision::Bf16
        } else {
            self.precision
        }
    }
}

/// `train.precision`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Every operand as it is.
    #[default]
    F32,
    /// Operands that are not fake-quantized rounded to bf16.
    Bf16,
}

impl Precision {
    /// `f32` or `bf16`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
        }
    }
    fn is_f32(&self) -> bool {
        *self == Precision::F32
    }
}

/// `train.gemm`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Gemm {
    /// The bf16 units where the CPU has them.
    #[default]
    Auto,
    /// The f32 GEMM.
    F32,
    /// The bf16 units, required.
    Bf16,
}

impl Gemm {
    fn is_auto(&self) -> bool {
        *self == Gemm::Auto
    }

    /// The kernel for a run on a backend of `kind` (`cpu` or `gpu`): `None` for the f32
    /// GEMM. An error where `"bf16"` is asked of a CPU without the units.
    pub fn resolve(
        self,
        kind: &str,
    ) -> Result<Option<hif8lab_engine::cpu::bf16::Bf16Kernel>, crate::TrainError> {
        if kind != "cpu" {
            return Ok(None);
        }
        let found = hif8lab_engine::cpu::bf16::detect();
        match self {
            Gemm::F32 => Ok(None),
            Gemm::Auto => Ok(found),
            Gemm::Bf16 => found.map(Some).ok_or_else(|| crate::TrainError::Setting {
                setting: "train.gemm = \"bf16\"".into(),
                message: "this CPU has no bf16 dot-product units (AMX or AVX512-BF16); use \
                              \"auto\" or \"f32\""
                    .into(),
            }),
        }
    }
}

fn one() -> usize {
    1
}
fn one_u64() -> u64 {
    1
}
fn default_keep_checkpoints() -> usize {
    3
}
fn is_default_keep_checkpoints(n: &usize) -> bool {
    *n == default_keep_checkpoints()
}
fn one_f32() -> f32 {
    1.0
}
fn default_warmup_frac() -> f32 {
    0.03
}
fn default_weight_decay() -> f32 {
    0.1
}
fn default_beta1() -> f32 {
    0.9
}
fn default_beta2() -> f32 {
    0.95
}
fn default_adam_eps() -> f32 {
    1e-8
}

/// Quantization-aware training (SPEC.md §3–4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QatConfig {
    /// Quantizers on at all (after the warmup).
    #[serde(default)]
    pub enabled: bool,
    /// Optimizer steps of high precision first; then histories reset and quantization on.
    #[serde(default)]
    pub warmup_steps: u64,
    /// Quantized linear layers (`gate`, `up`, `down`, optionally `q`, `k`, `v`, `o`).
    #[serde(default = "default_modules")]
    pub modules: Vec<Module>,
    /// Quantized roles (`A`, `W`, `G`).
    #[serde(default = "default_roles")]
    pub roles: Vec<Role>,
    /// Quantized blocks; absent = all but the first and last few (the paper keeps the
    /// first 3 and last 2 of 26 in high precision).
    #[serde(default)]
    pub blocks: Option<Vec<u32>>,
    /// Zero the gradient where the forward value was above the estimate (clipped STE)
    /// instead of passing it through unchanged (identity STE, the paper's choice).
    /// Needs `scaling.overflow = "saturate"`.
    #[serde(default)]
    pub clipped_ste: bool,
    /// Estimators, window, target, margin, cold start, format, overflow.
    #[serde(default)]
    pub scaling: ScalingConfig,
}

fn default_modules() -> Vec<Module> {
    vec![Module::Gate, Module::Up, Module::Down]
}

fn default_roles() -> Vec<Role> {
    Role::ALL.to_vec()
}

impl Default for QatConfig {
    fn default() -> Self {
        QatConfig {
            enabled: false,
            warmup_steps: 0,
            modules: default_modules(),
            roles: default_roles(),
            blocks: None,
            clipped_ste: false,
            scaling: ScalingConfig::default(),
        }
    }
}

impl QatConfig {
    /// The plan of `scaling` (SPEC.md §3: every executor runs it); a range out of bounds is
    /// an error naming `qat.scaling.<field>`.
    pub fn plan(&self) -> Result<ScalingPlan, hif8lab_scaling::ConfigError> {
        self.scaling.plan().map_err(|e| {
            hif8lab_scaling::ConfigError::new(format!("qat.scaling.{}", e.field), e.message)
        })
    }

    /// How many blocks stay in high precision at each end when `blocks` is unset: the first
    /// ⌈3L/26⌉ and the last ⌈2L/26⌉ of `layers`, like the paper's 3 and 2 of 26.
    pub fn high_precision_ends(layers: usize) -> (usize, usize) {
        ((3 * layers).div_ceil(26), (2 * layers).div_ceil(26))
    }

    /// The quantized blocks for a model of `layers` blocks.
    pub fn blocks_for(&self, layers: usize) -> Vec<u32> {
        match &self.blocks {
            Some(b) => b.clone(),
            None => {
                let (first, last) = Self::high_precision_ends(layers);
                (first..layers.saturating_sub(last))
                    .map(|b| b as u32)
                    .collect()
            }
        }
    }
}

/// A whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Model sizes.
    pub model: ModelConfig,
    /// Optimization.
    pub train: TrainConfig,
    /// Quantization-aware training.
    #[serde(default)]
    pub qat: QatConfig,
    /// Data.
    #[serde(default)]
    pub data: DataConfig,
}

/// Display text of a config value: strings bare, lists comma-separated, null as `auto`,
/// f32 settings (widened to f64 in JSON) in the f32's shortest form (0.002, not
/// 0.0020000000949949026).
pub fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(a) => a.iter().map(value_text).collect::<Vec<_>>().join(","),
        serde_json::Value::Null => "auto".into(),
        serde_json::Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(v) if f64::from(v as f32) == v => (v as f32).to_string(),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// A config (as JSON: a [`RunConfig`] or one read from a run folder) flattened to
/// `dotted.key → value text`.
pub fn flatten_json(config: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    fn walk(
        prefix: &str,
        v: &serde_json::Value,
        out: &mut std::collections::BTreeMap<String, String>,
    ) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            other => {
                out.insert(prefix.to_owned(), value_text(other));
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk("", config, &mut out);
    out
}

/// The keys whose values differ between two flattened configs: `(key, a, b)`, with `(none)`
/// where one side lacks the key.
pub fn diff_flat(
    a: &std::collections::BTreeMap<String, String>,
    b: &std::collections::BTreeMap<String, String>,
) -> Vec<(String, String, String)> {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (x, y) = (a.get(k), b.get(k));
            (x != y).then(|| {
                let show = |v: Option<&String>| v.cloned().unwrap_or_else(|| "(none)".into());
                (k.clone(), show(x), show(y))
            })
        })
        .collect()
}

/// A configuration error: where (file or source, key) and what.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{source_name}: {}{message}", set.as_ref().map(|s| format!("--set {s}: ")).unwrap_or_default())]
pub struct ConfigError {
    /// File path, preset name or `--set`.
    pub source_name: String,
    /// The `--set KEY=VALUE` that brought the bad value, when one did.
    pub set: Option<String>,
    /// What is wrong, naming the key.
    pub message: String,
}

impl RunConfig {
    /// Tokens an optimizer step trains on: sequences per micro-batch × context × micro-batches.
    pub fn tokens_per_step(&self) -> usize {
        self.train.batch * self.model.context * self.train.grad_accum
    }

    /// The benchmark variant of this run: quantization on from the first step (no warm-up)
    /// or off, `steps` steps in all, no evaluations and no checkpoints — what `hif8lab
    /// bench train` and the browser's `bench_cpu` time, so both time the same thing.
    pub fn bench_variant(&self, qat: bool, steps: u64) -> RunConfig {
        let mut c = self.clone();
        c.qat.enabled = qat;
        c.qat.warmup_steps = 0;
        c.train.steps = steps;
        c.train.eval_every = 0;
        c.train.checkpoint_every = 0;
        c
    }

    /// The timed blocks of a benchmark of two variants over `steps` steps each: for every
    /// block, the timed steps each variant has done at its end (about a tenth of `steps`
    /// per block, at least one) and the order the two run in — plain, QAT, QAT, plain, … —
    /// so a machine whose speed drifts slows both alike. `hif8lab bench train` and the
    /// browser's `bench_cpu` both follow it.
    pub fn bench_blocks(steps: u64) -> impl Iterator<Item = (u64, [usize; 2])> {
        let rounds = steps.clamp(1, 10);
        (0..rounds).map(move |round| {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            (steps * (round + 1) / rounds, order)
        })
    }

    /// A preset's one-line description: its file's first comment, after `# NAME: `.
    pub fn preset_description(name: &str) -> Option<&'static str> {
        let text = PRESETS.iter().find(|(n, _)| *n == name)?.1;
        let first = text.lines().next()?.strip_prefix('#')?.trim();
        Some(first.strip_prefix(name)?.strip_prefix(':')?.trim())
    }

    /// The TOML text of a preset.
    pub fn preset_text(name: &str) -> Result<&'static str, ConfigError> {
        PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .ok_or_else(|| ConfigError {
                set: None,
                source_name: format!("preset '{name}'"),
                message: format!(
                    "no such preset (available: {})",
                    PRESETS
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }

    /// Parses TOML text, applies `key=value` overrides (dotted keys, TOML values; a bare
    /// word is taken as a string), deserializes and validates.
    pub fn parse(source_name: &str, text: &str, overrides: &[String]) -> Result<Self, ConfigError> {
        let err = |message: String| ConfigError {
            set: None,
            source_name: source_name.to_owned(),
            message,
        };
        let mut table: toml::Table = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        for o in overrides {
            let set_err = |message: String| ConfigError {
                set: None,
                source_name: format!("--set {o}"),
                message,
            };
            let (key, raw) = o
                .split_once('=')
                .ok_or_else(|| set_err("expected key=value".into()))?;
            let value: toml::Value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(raw.trim().to_owned()));
            let path: Vec<&str> = key.trim().split('.').collect();
            let (last, parents) = path
                .split_last()
                .ok_or_else(|| set_err("empty key".into()))?;
            let mut node = &mut table;
            for p in parents {
                node = node
                    .entry((*p).to_owned())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                    .as_table_mut()
                    .ok_or_else(|| set_err(format!("'{p}' is not a table")))?;
            }
            node.insert((*last).to_owned(), value);
        }
        // An error blames the last --set that set a key it is about.
        let blamed = |message: String, names: &dyn Fn(&str) -> bool| {
            let set = overrides
                .iter()
                .rev()
                .find(|o| o.split_once('=').is_some_and(|(k, _)| names(k.trim())))
                .cloned();
            ConfigError {
                set,
                ..err(message)
            }
        };
        let config: RunConfig = serde_path_to_error::deserialize(toml::Value::Table(table))
            .map_err(|e| {
                let key = e.path().to_string();
                let message = format!("key '{key}': {}", e.into_inner().message());
                blamed(message, &|k| k == key)
            })?;
        config
            .validate()
            .map_err(|e| blamed(e.message.clone(), &|k| e.involves(k)))?;
        Ok(config)
    }

    /// The settings a checkpoint must share with the run that continues from it: the model,
    /// data, quantization and the seed, batch and accumulation that fix the data order and
    /// initial state. The schedule (steps, lr, betas, clipping, …) and the logging intervals
    /// may change on a resume; these may not.
    pub const CONTINUATION_KEYS: [&str; 6] = [
        "model",
        "data",
        "qat",
        "train.seed",
        "train.batch",
        "train.grad_accum",
    ];

    /// A short fingerprint (CRC-32, hex) of [`Self::CONTINUATION_KEYS`], stored in every
    /// checkpoint and compared on resume.
    pub fn continuation_fingerprint(&self) -> String {
        let flat = self.flat();
        let mut text = String::new();
        for (key, value) in &flat {
            if Self::CONTINUATION_KEYS
                .iter()
                .any(|k| key == k || key.starts_with(&format!("{k}.")))
            {
                text.push_str(&format!("{key}={value}\n"));
            }
        }
        format!("{:08x}", crc32fast::hash(text.as_bytes()))
    }

    /// Every key as `dotted.key → value text` ([`value_text`]), sorted.
    pub fn flat(&self) -> std::collections::BTreeMap<String, String> {
        serde_json::to_value(self)
            .map(|v| flatten_json(&v))
            .unwrap_or_default()
    }

    /// `key: a → b` for every key whose value differs (`(none)` where one side lacks it).
    pub fn differences(&self, other: &RunConfig) -> Vec<String> {
        diff_flat(&self.flat(), &other.flat())
            .into_iter()
            .map(|(k, a, b)| format!("{k}: {a} → {b}"))
            .collect()
    }

    /// [`Self::differences`] limited to [`Self::CONTINUATION_KEYS`]: what makes `other`
    /// another run than `self`.
    pub fn continuation_differences(&self, other: &RunConfig) -> Vec<String> {
        self.differences(other)
            .into_iter()
            .filter(|d| {
                Self::CONTINUATION_KEYS
                    .iter()
                    .any(|k| d.starts_with(&format!("{k}:")) || d.starts_with(&format!("{k}.")))
            })
            .collect()
    }

    /// The config as TOML (the run folder's `config.toml`, fully resolved).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}

mod validate;
pub use validate::InvalidKey;

#[cfg(test)]
mod tests;
