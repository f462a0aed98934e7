//! Export of a model as a Hugging Face Llama folder (`export hf`): `config.json`, weights,
//! generation and tokenizer configs.

use super::*;

/// Element type of exported weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportDtype {
    /// float32 (exact).
    F32,
    /// bfloat16 (rounded to nearest even).
    Bf16,
    /// float16 (rounded to nearest even).
    F16,
}

impl std::str::FromStr for ExportDtype {
    type Err = hif8lab_format::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "f32" | "float32" => Ok(Self::F32),
            "bf16" | "bfloat16" => Ok(Self::Bf16),
            "f16" | "float16" => Ok(Self::F16),
            _ => Err(hif8lab_format::UnknownName {
                kind: "dtype",
                given: s.to_owned(),
                expected: "f32, bf16, f16".into(),
            }),
        }
    }
}

impl ExportDtype {
    pub(crate) fn torch_name(self) -> &'static str {
        match self {
            Self::F32 => "float32",
            Self::Bf16 => "bfloat16",
            Self::F16 => "float16",
        }
    }
}

/// `config.json` for model `m`: the original folder's JSON with the model fields set (an
/// exported run that started from a Hugging Face model keeps its other fields), or the form
/// `transformers` writes for a new `LlamaConfig`.
pub fn config_json(m: &ModelConfig, base: Option<&Value>, dtype: ExportDtype) -> Value {
    let mut v = base.cloned().unwrap_or_else(|| {
        json!({
            "architectures": ["LlamaForCausalLM"],
            "attention_bias": false,
            "attention_dropout": 0.0,
            "bos_token_id": null,
            "eos_token_id": null,
            "hidden_act": "silu",
            "initializer_range": 0.02,
            "mlp_bias": false,
            "model_type": "llama",
            "pad_token_id": null,
            "pretraining_tp": 1,
            "use_cache": true,
        })
    });
    let fields = json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": m.vocab,
        "hidden_size": m.d_model,
        "intermediate_size": m.d_ff,
        "num_hidden_layers": m.layers,
        "num_attention_heads": m.heads,
        "num_key_value_heads": m.kv_heads,
        "head_dim": m.head_dim(),
        // The f32's shortest decimal (1e-6, not 9.99999997e-7).
        "rms_norm_eps": m.norm_eps.to_string().parse::<f64>().unwrap_or(f64::from(m.norm_eps)),
        "rope_theta": m.rope_theta,
        "rope_parameters": match m.rope_scaling {
            None => json!({"rope_theta": m.rope_theta, "rope_type": "default"}),
            Some(r) => json!({
                "rope_theta": m.rope_theta,
                "rope_type": "llama3",
                "factor": r.factor,
                "low_freq_factor": r.low_freq_factor,
                "high_freq_factor": r.high_freq_factor,
                "original_max_position_embeddings": r.original_max_positions,
            }),
        },
        "max_position_embeddings": m.max_positions.unwrap_or(m.context),
        "tie_word_embeddings": m.tie_embeddings,
        "dtype": dtype.torch_name(),
        "torch_dtype": dtype.torch_name(),
    });
    // A Mistral source (read as a Llama: no sliding window) keeps its class.
    let mistral = v["architectures"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x == "MistralForCausalLM"));
    if let (Some(obj), Some(f)) = (v.as_object_mut(), fields.as_object()) {
        for (k, val) in f {
            if mistral && (k == "architectures" || k == "model_type") {
                continue;
            }
            obj.insert(k.clone(), val.clone());
        }
        obj.remove("rope_scaling");
    }
    v
}

/// What writing `weights` in f16 does to them: how many lie beyond its range (they would
/// become ±inf; the first such tensor named) and how many become 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct F16Range {
    /// Weights of magnitude 65520 or more (round to ±inf).
    pub overflow: u64,
    /// Nonzero weights of magnitude 2^-25 or less (round to zero).
    pub flushed: u64,
    /// The first tensor holding an overflowing weight.
    pub first_overflow: Option<String>,
}

impl F16Range {
    /// Counts over `weights` (name, shape, values).
    pub fn of(weights: &[(String, Vec<usize>, Vec<f32>)]) -> Self {
        // f16's largest finite value is 65504 (rounding to nearest: from 65520 on, ±inf);
        // below 2^-25 a value rounds to zero.
        let mut r = F16Range::default();
        for (name, _, data) in weights {
            for v in data {
                if v.abs() >= 65520.0 {
                    r.overflow += 1;
                    r.first_overflow.get_or_insert_with(|| name.clone());
                } else if *v != 0.0 && v.abs() <= 2.0f32.powi(-25) {
                    r.flushed += 1;
                }
            }
        }
        r
    }

    /// Refuses overflow unless `allow_overflow` (the message names the first tensor and the
    /// flag); returns the notes to print (flushed weights, allowed overflow).
    pub fn check(&self, allow_overflow: bool) -> Result<Vec<String>, F16OverflowError> {
        let mut notes = Vec::new();
        if self.flushed > 0 {
            notes.push(format!(
                "note: {} weights below f16's smallest value become 0 in f16",
                self.flushed
            ));
        }
        if self.overflow > 0 && !allow_overflow {
            return Err(F16OverflowError {
                weights: self.overflow,
                first: self.first_overflow.clone().unwrap_or_default(),
            });
        }
        if self.overflow > 0 {
            notes.push(format!(
                "warning: {} weights beyond f16's range written as ±inf (--allow-overflow)",
                self.overflow
            ));
        }
        Ok(notes)
    }
}

/// Weights that `--dtype f16` would turn into ±inf, refused without `--allow-overflow`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "--dtype f16: {weights} weights lie beyond f16's range (±65504; first in '{first}') and \
     would become ±inf: write bf16 or f32, or pass --allow-overflow"
)]
pub struct F16OverflowError {
    /// How many weights.
    pub weights: u64,
    /// The first tensor that holds one.
    pub first: String,
}

/// Tensors that safetensors refuses to write (a shape that does not match the data).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct SerializeError {
    /// The safetensors error, naming the tensor where one is at fault.
    pub message: String,
}

/// The `model.safetensors` bytes of `weights` (model tensors only, in `dtype`).
pub fn model_safetensors(
    weights: &[(String, Vec<usize>, Vec<f32>)],
    dtype: ExportDtype,
) -> Result<Vec<u8>, SerializeError> {
    let bytes: Vec<Vec<u8>> = weights
        .iter()
        .map(|(_, _, d)| match dtype {
            ExportDtype::F32 => d.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ExportDtype::Bf16 => d
                .iter()
                .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
                .collect(),
            ExportDtype::F16 => d
                .iter()
                .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                .collect(),
        })
        .collect();
    let st_dtype = match dtype {
        ExportDtype::F32 => safetensors::Dtype::F32,
        ExportDtype::Bf16 => safetensors::Dtype::BF16,
        ExportDtype::F16 => safetensors::Dtype::F16,
    };
    let views = weights
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), b)| {
            safetensors::tensor::TensorView::new(st_dtype, shape.clone(), b)
                .map(|v| (name.as_str(), v))
                .map_err(|e| SerializeError {
                    message: format!("tensor '{name}': {e}"),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let meta = [("format".to_owned(), "pt".to_owned())]
        .into_iter()
        .collect();
    safetensors::serialize(views, Some(meta))
        .map(crate::models::checkpoint::canonical)
        .map_err(|e| SerializeError {
            message: e.to_string(),
        })
}

/// `generation_config.json` (sampling defaults; the ids of the config, when it has them).
pub fn generation_config(config: &Value) -> Value {
    let mut g = json!({"_from_model_config": true, "use_cache": true});
    for key in ["bos_token_id", "eos_token_id", "pad_token_id"] {
        if let Some(v) = config.get(key).filter(|v| !v.is_null()) {
            g[key] = v.clone();
        }
    }
    g
}

/// `tokenizer_config.json` that makes `AutoTokenizer` load `tokenizer.json` as it is (no
/// special tokens added on encode).
pub fn tokenizer_config() -> Value {
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": false,
        "add_eos_token": false,
        "model_max_length": 1_000_000_000_000_000_019_884_624_838_656f64,
    })
}

/// What an exported folder holds besides the weights.
pub struct ExportParts<'a> {
    /// The model.
    pub model: &'a ModelConfig,
    /// The `config.json` the run started from, if any (its other fields are kept).
    pub base_config: Option<&'a Value>,
    /// `tokenizer.json` text (the byte tokenizer's when `None`).
    pub tokenizer_json: Option<String>,
    /// Weight element type.
    pub dtype: ExportDtype,
    /// The source's `tokenizer_config.json` (kept as it is), if any.
    pub tokenizer_config: Option<&'a Value>,
    /// The source's `generation_config.json` (kept as it is), if any.
    pub generation_config: Option<&'a Value>,
}

/// Writes a Hugging Face folder at `out` (which must not exist, or be empty): built in a
/// temporary sibling folder, then renamed, so a failure leaves nothing half-written.
/// Returns the files written.
#[cfg(not(target_arch = "wasm32"))]
pub fn write_folder(
    out: &Path,
    parts: &ExportParts<'_>,
    weights: &[(String, Vec<usize>, Vec<f32>)],
) -> Result<Vec<String>, HfError> {
    let resolved = writable_target(out)?;
    let out = resolved.as_deref().unwrap_or(out);
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| err(parent, e.to_string()))?;
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export".into());
    let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    // What a killed writer of the same folder left (its process gone) goes first.
    if let Ok(entries) = std::fs::read_dir(parent) {
        let prefix = format!(".{name}.tmp-");
        for e in entries.filter_map(Result::ok) {
            let file = e.file_name().to_string_lossy().into_owned();
            if file.starts_with(&prefix) && crate::io::left_by_ended_process(&file) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| err(&tmp, e.to_string()))?;
    let result = write_files(&tmp, parts, weights).and_then(|names| {
        if out.exists() {
            std::fs::remove_dir(out).map_err(|e| err(out, e.to_string()))?;
        }
        std::fs::rename(&tmp, out).map_err(|e| err(out, e.to_string()))?;
        Ok(names)
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

/// Where an export to `out` goes: `out` itself (`None`), or the folder a symbolic link
/// names; refused when it is a file, a folder with something in it, or a dangling link.
#[cfg(not(target_arch = "wasm32"))]
fn writable_target(out: &Path) -> Result<Option<std::path::PathBuf>, HfError> {
    // A symbolic link: written through to an empty folder it names; a dangling one refused.
    let resolved = match std::fs::symlink_metadata(out) {
        Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(out) {
            Ok(target) => Some(target),
            Err(_) => {
                let target = std::fs::read_link(out).unwrap_or_default();
                return Err(err(
                    out,
                    format!(
                        "is a symbolic link to {}, which does not exist: create that folder or \
                         choose another --out",
                        target.display()
                    ),
                ));
            }
        },
        _ => None,
    };
    let target = resolved.as_deref().unwrap_or(out);
    if target.exists() && !target.is_dir() {
        return Err(err(
            target,
            "exists and is not a folder (choose another --out)",
        ));
    }
    if target.exists() && std::fs::read_dir(target).map_or(true, |mut d| d.next().is_some()) {
        return Err(err(
            target,
            "exists and is not an empty folder (choose another --out)",
        ));
    }
    Ok(resolved)
}

/// The folder's files written into `tmp`; their names.
#[cfg(not(target_arch = "wasm32"))]
fn write_files(
    tmp: &Path,
    parts: &ExportParts<'_>,
    weights: &[(String, Vec<usize>, Vec<f32>)],
) -> Result<Vec<String>, HfError> {
    let config = config_json(parts.model, parts.base_config, parts.dtype);
    let tokenizer = parts
        .tokenizer_json
        .clone()
        .unwrap_or_else(|| crate::models::tokenizer::byte_tokenizer_json().to_string());
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("config.json", pretty(&config).into_bytes()),
        (
            "generation_config.json",
            pretty(
                parts
                    .generation_config
                    .unwrap_or(&generation_config(&config)),
            )
            .into_bytes(),
        ),
        ("tokenizer.json", tokenizer.into_bytes()),
        (
            "tokenizer_config.json",
            pretty(parts.tokenizer_config.unwrap_or(&tokenizer_config())).into_bytes(),
        ),
        (
            "model.safetensors",
            model_safetensors(weights, parts.dtype)
                .map_err(|e| err(&tmp.join("model.safetensors"), e.message))?,
        ),
    ];
    let mut names = Vec::new();
    for (file, bytes) in files {
        let path = tmp.join(file);
        std::fs::write(&path, bytes).map_err(|e| err(&path, e.to_string()))?;
        names.push(file.to_owned());
    }
    Ok(names)
}
