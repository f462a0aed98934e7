//! Hugging Face Llama checkpoints in and out: a folder with `config.json`
//! (`LlamaForCausalLM`), one `model.safetensors` or shards named by
//! `model.safetensors.index.json` (F32, BF16 or F16), and `tokenizer.json`.
//!
//! What this project's model cannot represent is refused, naming the file and field: other
//! architectures (a `MistralForCausalLM` with `sliding_window: null` is a Llama), rope
//! scaling other than Llama-3's, biases, sliding windows, activations other than SiLU, a
//! `head_dim` other than hidden / heads. Parameter names are the same on both sides (the
//! model keeps Hugging Face names), so weights need no renaming or permutation (both use the
//! rotate-half RoPE convention).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::checkpoint::{Checkpoint, NamedTensor};
use crate::config::ModelConfig;

/// A Hugging Face folder that cannot be used: which file, which field, why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct HfError {
    /// The file (or folder).
    pub file: String,
    /// What is wrong, naming the field or tensor.
    pub message: String,
}

fn err(file: &Path, message: impl Into<String>) -> HfError {
    HfError {
        file: file.display().to_string(),
        message: message.into(),
    }
}

/// The model part of a `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct HfConfig {
    /// The model sizes (its `context` is `max_position_embeddings`; a run may use less).
    pub model: ModelConfig,
    /// The whole JSON, kept so an export writes the same form back.
    pub json: Value,
}

/// Parses `config.json` text; `file` names it in errors.
pub fn parse_config(file: &Path, text: &str) -> Result<HfConfig, HfError> {
    let json: Value =
        serde_json::from_str(text).map_err(|e| err(file, format!("not JSON: {e}")))?;
    let Some(obj) = json.as_object() else {
        return Err(err(file, "not a JSON object"));
    };
    let arch = obj.get("architectures").and_then(Value::as_array);
    let model_type = obj.get("model_type").and_then(Value::as_str);
    let named = |class: &str, kind: &str| {
        arch.map_or(model_type == Some(kind), |a| a.iter().any(|v| v == class))
    };
    let is_mistral = !named("LlamaForCausalLM", "llama") && named("MistralForCausalLM", "mistral");
    if !named("LlamaForCausalLM", "llama") && !is_mistral {
        return Err(err(
            file,
            format!(
                "field 'architectures' is {}, model_type {}: only LlamaForCausalLM (and \
                 MistralForCausalLM without a sliding window) is supported",
                arch.map_or("(absent)".into(), |a| Value::Array(a.clone()).to_string()),
                model_type.unwrap_or("(absent)")
            ),
        ));
    }
    if is_mistral && !obj.get("sliding_window").is_some_and(Value::is_null) {
        return Err(err(
            file,
            format!(
                "field 'architectures' is MistralForCausalLM and field 'sliding_window' is {}: \
                 a Mistral model is read as a Llama only with sliding_window null \
                 (transformers' default for Mistral is 4096)",
                obj.get("sliding_window")
                    .map_or("absent".into(), Value::to_string)
            ),
        ));
    }
    let int = |key: &str| -> Result<usize, HfError> {
        match obj.get(key) {
            None => Err(err(file, format!("field '{key}' is missing"))),
            Some(v) => v
                .as_u64()
                .filter(|n| *n > 0)
                .map(|n| n as usize)
                .ok_or_else(|| {
                    err(
                        file,
                        format!("field '{key}' must be a positive integer, got {v}"),
                    )
                }),
        }
    };
    let (hidden, heads) = (int("hidden_size")?, int("num_attention_heads")?);
    let kv_heads = match obj.get("num_key_value_heads") {
        None | Some(Value::Null) => heads,
        Some(_) => int("num_key_value_heads")?,
    };
    let rope = obj.get("rope_parameters").filter(|v| !v.is_null());
    let rope_theta = rope
        .and_then(|r| r.get("rope_theta"))
        .or_else(|| obj.get("rope_theta"))
        .map(|v| {
            v.as_f64()
                .filter(|t| t.is_finite() && *t > 1.0)
                .ok_or_else(|| {
                    err(
                        file,
                        format!("field 'rope_theta' must be a number above 1, got {v}"),
                    )
                })
        })
        .transpose()?
        .unwrap_or(10000.0);
    let rope_scaling = rope_scaling(file, obj)?;
    let refuse = |key: &str, ok: &dyn Fn(&Value) -> bool, why: &str| -> Result<(), HfError> {
        match obj.get(key) {
            Some(v) if !ok(v) => Err(err(file, format!("field '{key}' is {v}: {why}"))),
            _ => Ok(()),
        }
    };
    refuse(
        "attention_bias",
        &|v| *v == false,
        "biases are not supported",
    )?;
    refuse("mlp_bias", &|v| *v == false, "biases are not supported")?;
    refuse(
        "sliding_window",
        &Value::is_null,
        "sliding-window attention is not supported",
    )?;
    refuse(
        "hidden_act",
        &|v| *v == "silu",
        "only SiLU (SwiGLU) is supported",
    )?;
    if !heads.is_multiple_of(kv_heads) {
        return Err(err(
            file,
            format!(
                "field 'num_attention_heads' {heads} is not a multiple of num_key_value_heads \
                 {kv_heads} (grouped-query attention needs whole groups)"
            ),
        ));
    }
    if heads == 0 || !hidden.is_multiple_of(heads) {
        return Err(err(
            file,
            format!(
                "field 'hidden_size' {hidden} is not a multiple of num_attention_heads {heads}"
            ),
        ));
    }
    refuse(
        "head_dim",
        &|v| v.is_null() || v.as_u64() == Some((hidden / heads) as u64),
        &format!(
            "only head_dim = hidden_size / num_attention_heads = {} is supported",
            hidden / heads
        ),
    )?;
    let eps = match obj.get("rms_norm_eps") {
        None => return Err(err(file, "field 'rms_norm_eps' is missing")),
        Some(v) => v
            .as_f64()
            .filter(|e| e.is_finite() && *e > 0.0 && *e < 1.0)
            .ok_or_else(|| {
                err(
                    file,
                    format!("field 'rms_norm_eps' must be a number in (0, 1), got {v}"),
                )
            })?,
    };
    let max_positions = int("max_position_embeddings")?;
    let tie = match obj.get("tie_word_embeddings") {
        None => false, // LlamaConfig's default
        Some(v) => v.as_bool().ok_or_else(|| {
            err(
                file,
                format!("field 'tie_word_embeddings' must be true or false, got {v}"),
            )
        })?,
    };
    let model = ModelConfig {
        vocab: int("vocab_size")?,
        d_model: hidden,
        layers: int("num_hidden_layers")?,
        heads,
        kv_heads,
        d_ff: int("intermediate_size")?,
        context: max_positions,
        norm_eps: eps as f32,
        rope_theta,
        tie_embeddings: tie,
        max_positions: Some(max_positions),
        rope_scaling,
    };
    Ok(HfConfig { model, json })
}

/// The rope scaling of a config: none (`default`, absent) or Llama-3's, from either spelling
/// (`rope_scaling` or `rope_parameters`; `rope_type` or the older `type`). Other kinds are
/// refused naming the field.
fn rope_scaling(
    file: &Path,
    obj: &serde_json::Map<String, Value>,
) -> Result<Option<crate::config::RopeScaling>, HfError> {
    for key in ["rope_parameters", "rope_scaling"] {
        let Some(r) = obj.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let kind = r
            .get("rope_type")
            .or_else(|| r.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("default");
        match kind {
            "default" => continue,
            "llama3" => {}
            other => {
                return Err(err(
                    file,
                    format!(
                        "field '{key}' has rope_type '{other}': only default and llama3 rope \
                         scaling are supported"
                    ),
                ));
            }
        }
        let num = |k: &str| -> Result<f64, HfError> {
            r.get(k)
                .and_then(Value::as_f64)
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| {
                    err(
                        file,
                        format!(
                            "field '{key}.{k}' must be a positive number for llama3 rope scaling"
                        ),
                    )
                })
        };
        let (low, high) = (num("low_freq_factor")?, num("high_freq_factor")?);
        if high <= low {
            return Err(err(
                file,
                format!("field '{key}.high_freq_factor' {high} must exceed low_freq_factor {low}"),
            ));
        }
        return Ok(Some(crate::config::RopeScaling {
            factor: num("factor")?,
            low_freq_factor: low,
            high_freq_factor: high,
            original_max_positions: num("original_max_position_embeddings")? as usize,
        }));
    }
    Ok(None)
}

/// A Hugging Face model folder, read.
pub struct HfModel {
    /// The folder.
    pub dir: PathBuf,
    /// Its config.
    pub config: HfConfig,
    /// Its weights under this project's (= Hugging Face) names, as f32.
    pub weights: Checkpoint,
    /// Its `tokenizer.json`, when it has one (for a GGUF file: the converted tokenizer,
    /// written once to a cache folder so runs can name it).
    pub tokenizer: Option<PathBuf>,
    /// Its `tokenizer_config.json` (chat template, special tokens), when it has one.
    pub tokenizer_config: Option<Value>,
    /// Its `generation_config.json`, when it has one.
    pub generation_config: Option<Value>,
    /// The element type its weights are stored in (`torch_dtype`/`dtype` of config.json),
    /// the default of an export.
    pub dtype: Option<ExportDtype>,
    /// Choices made where the folder was ambiguous (as transformers chooses), for the user.
    pub notes: Vec<String>,
}

/// The element type a `config.json` says its weights are stored in (`torch_dtype`, or
/// transformers 5's `dtype`), when it names one this project writes.
pub fn config_dtype(config: &Value) -> Option<ExportDtype> {
    ["torch_dtype", "dtype"]
        .iter()
        .find_map(|k| config.get(*k).and_then(Value::as_str))
        .and_then(|s| s.parse().ok())
}

/// Whether `path` is a model this project opens as a Hugging Face model: a folder with
/// `config.json` or a GGUF file.
pub fn is_model_path(path: &Path) -> bool {
    (path.is_dir() && is_hf_dir(path)) || crate::gguf::is_gguf(path)
}

/// The folder where converted GGUF tokenizers are kept (`HIF8LAB_CACHE`, else
/// `$XDG_CACHE_HOME/hif8lab`, else `~/.cache/hif8lab`).
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("HIF8LAB_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("hif8lab");
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache").join("hif8lab"))
        .unwrap_or_else(|| std::env::temp_dir().join("hif8lab-cache"))
}

/// Reads a model a user brings: a Hugging Face folder ([`load`]) or a GGUF file (converted
/// in memory; its tokenizer files written to [`cache_dir`] under a name from their contents).
#[cfg(not(target_arch = "wasm32"))]
pub fn load_any(path: &Path) -> Result<HfModel, HfError> {
    if path.is_dir() {
        return load(path);
    }
    if !crate::gguf::is_gguf(path) {
        return Err(err(
            path,
            "not a Hugging Face folder (config.json) or a GGUF file",
        ));
    }
    let c = crate::gguf::read(path)?;
    let text = serde_json::to_string(&c.tokenizer_json).unwrap_or_default();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    let dir = cache_dir()
        .join("gguf-tokenizers")
        .join(format!("{stem}-{:08x}", crc32fast::hash(text.as_bytes())));
    let tok = dir.join("tokenizer.json");
    if !tok.is_file() {
        std::fs::create_dir_all(&dir).map_err(|e| err(&dir, e.to_string()))?;
        crate::io::write_atomic(&tok, text.as_bytes()).map_err(|e| err(&tok, e.to_string()))?;
    }
    let parse_config = parse_config(path, &c.config_json.to_string())?;
    Ok(HfModel {
        dir: path.to_owned(),
        config: parse_config,
        weights: c.weights,
        tokenizer: Some(tok),
        tokenizer_config: Some(c.tokenizer_config),
        generation_config: Some(c.generation_config),
        dtype: Some(ExportDtype::F32),
        notes: Vec::new(),
    })
}

/// Whether `dir` looks like a Hugging Face model folder (it has `config.json`).
pub fn is_hf_dir(dir: &Path) -> bool {
    dir.join("config.json").is_file()
}

/// Reads a Hugging Face Llama folder: config, every weight (checked against the config's
/// shapes), and where its tokenizer is.
#[cfg(not(target_arch = "wasm32"))]
pub fn load(dir: &Path) -> Result<HfModel, HfError> {
    let config_path = dir.join("config.json");
    let text =
        std::fs::read_to_string(&config_path).map_err(|e| err(&config_path, e.to_string()))?;
    let config = parse_config(&config_path, &text)?;
    let index = dir.join("model.safetensors.index.json");
    let single = dir.join("model.safetensors");
    let mut notes = Vec::new();
    if single.is_file() && index.is_file() {
        notes.push(format!(
            "{}: both model.safetensors and model.safetensors.index.json are here; reading \
             model.safetensors, as transformers does (the index and its shards are ignored)",
            dir.display()
        ));
    }
    let files: Vec<PathBuf> = if index.is_file() && !single.is_file() {
        let text = std::fs::read_to_string(&index).map_err(|e| err(&index, e.to_string()))?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| err(&index, format!("not JSON: {e}")))?;
        let map = v
            .get("weight_map")
            .and_then(Value::as_object)
            .ok_or_else(|| err(&index, "field 'weight_map' is missing or not an object"))?;
        let mut shards: Vec<String> = Vec::new();
        for (name, file) in map {
            let f = file.as_str().ok_or_else(|| {
                err(
                    &index,
                    format!("field 'weight_map.{name}' is not a file name"),
                )
            })?;
            if f.contains('/') || f.contains('\\') || f.starts_with('.') {
                return Err(err(
                    &index,
                    format!("field 'weight_map.{name}': '{f}' is not a file of this folder"),
                ));
            }
            if !shards.iter().any(|s| s == f) {
                shards.push(f.to_owned());
            }
        }
        shards.sort();
        shards.into_iter().map(|s| dir.join(s)).collect()
    } else {
        vec![dir.join("model.safetensors")]
    };
    // The weights' size from the files' headers (read, not mapped), checked against the
    // memory there is before any weight is read.
    let mut declared: u128 = 0;
    for f in files.iter().filter(|f| f.is_file()) {
        declared += header_elements(f)?;
    }
    if let Some(avail) = hif8lab_engine::host_memory_available()
        && declared * 4 > u128::from(avail)
    {
        return Err(err(
            dir,
            format!(
                "the safetensors headers declare {declared} parameters ({:.1} GiB as f32), more \
                 than the {:.1} GiB of memory available: refused before reading any weight",
                declared as f64 * 4.0 / f64::from(1u32 << 30),
                avail as f64 / f64::from(1u32 << 30)
            ),
        ));
    }
    let mut tensors = Vec::new();
    for f in &files {
        if !f.is_file() {
            return Err(err(
                f,
                if files.len() > 1 {
                    "shard named in model.safetensors.index.json is missing"
                } else {
                    "missing (no model.safetensors or model.safetensors.index.json in the folder)"
                },
            ));
        }
        let ck = Checkpoint::load(f).map_err(|e| err(f, e.message))?;
        tensors.extend(ck.tensors.into_iter().map(|t| (f.clone(), t)));
    }
    let mut config = config;
    // transformers ties the head to the embedding only when a head stored beside it has the
    // same values; a different stored head is used as an untied head (and it warns).
    if config.model.tie_embeddings {
        let head = tensors.iter().find(|(_, t)| t.name == "lm_head.weight");
        let embed = tensors
            .iter()
            .find(|(_, t)| t.name == "model.embed_tokens.weight");
        if let (Some((file, h)), Some((_, e))) = (head, embed)
            && h.data != e.data
        {
            notes.push(format!(
                "{}: config.json ties the embeddings (tie_word_embeddings: true) but lm_head.weight \
                 holds other values than model.embed_tokens.weight; using it as an untied head, \
                 as transformers does",
                file.display()
            ));
            config.model.tie_embeddings = false;
            config.json["tie_word_embeddings"] = Value::Bool(false);
        }
    }
    let weights = select_weights(dir, &config.model, tensors)?;
    let tok = dir.join("tokenizer.json");
    let side = |name: &str| -> Result<Option<Value>, HfError> {
        let p = dir.join(name);
        match std::fs::read_to_string(&p) {
            Err(_) => Ok(None),
            Ok(t) => serde_json::from_str(&t)
                .map(Some)
                .map_err(|e| err(&p, format!("not JSON: {e}"))),
        }
    };
    let dtype = config_dtype(&config.json);
    Ok(HfModel {
        dir: dir.to_owned(),
        config,
        weights,
        tokenizer: tok.is_file().then_some(tok),
        tokenizer_config: side("tokenizer_config.json")?,
        generation_config: side("generation_config.json")?,
        dtype,
        notes,
    })
}

/// Elements declared by a safetensors file's header (read from the file's start; the data
/// is not touched).
#[cfg(not(target_arch = "wasm32"))]
fn header_elements(path: &Path) -> Result<u128, HfError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| err(path, e.to_string()))?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len)
        .map_err(|_| err(path, "shorter than a safetensors header"))?;
    let n = u64::from_le_bytes(len);
    if n > 100 << 20 {
        return Err(err(
            path,
            format!("a safetensors header of {n} bytes (at most 100 MiB)"),
        ));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header)
        .map_err(|_| err(path, "the file ends inside its safetensors header"))?;
    let v: Value = serde_json::from_slice(&header)
        .map_err(|e| err(path, format!("safetensors header is not JSON: {e}")))?;
    let mut total: u128 = 0;
    for (name, t) in v.as_object().into_iter().flatten() {
        if name == "__metadata__" {
            continue;
        }
        let elements = t["shape"]
            .as_array()
            .map(|d| {
                d.iter()
                    .map(|x| u128::from(x.as_u64().unwrap_or(0)))
                    .product::<u128>()
            })
            .unwrap_or(0);
        total = total.saturating_add(elements);
    }
    Ok(total)
}

/// The model's tensors out of a folder's (each with its file): every parameter of the
/// config present with its shape, nothing the model cannot use (biases and the like) —
/// errors name the file and tensor. Rotary caches are ignored; a tied model's `lm_head` too.
pub fn select_weights(
    dir: &Path,
    m: &ModelConfig,
    tensors: Vec<(PathBuf, NamedTensor)>,
) -> Result<Checkpoint, HfError> {
    let specs = crate::model::param_specs(m);
    let mut by_name: BTreeMap<String, (PathBuf, NamedTensor)> = BTreeMap::new();
    for (file, t) in tensors {
        if t.name.ends_with("rotary_emb.inv_freq")
            || (m.tie_embeddings && t.name == "lm_head.weight")
        {
            continue;
        }
        if !specs.iter().any(|(n, _, _)| *n == t.name) {
            return Err(err(
                &file,
                format!(
                    "tensor '{}' is not part of a Llama model this project can represent \
                     (biases and other extra tensors are not supported)",
                    t.name
                ),
            ));
        }
        by_name.insert(t.name.clone(), (file, t));
    }
    let mut out = Vec::new();
    for (name, shape, _) in &specs {
        let Some((file, t)) = by_name.remove(name) else {
            return Err(err(
                dir,
                format!("tensor '{name}' is missing from the safetensors files"),
            ));
        };
        if t.shape != *shape {
            return Err(err(
                &file,
                format!(
                    "tensor '{name}' has shape {:?}, config.json needs {shape:?}",
                    t.shape
                ),
            ));
        }
        if let Some(i) = t.data.iter().position(|v| !v.is_finite()) {
            return Err(err(
                &file,
                format!(
                    "tensor '{name}' holds a non-finite value ({}) at element {i}: the weights are damaged",
                    t.data[i]
                ),
            ));
        }
        out.push(t);
    }
    Ok(Checkpoint {
        tensors: out,
        metadata: BTreeMap::new(),
    })
}

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
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" | "float32" => Ok(Self::F32),
            "bf16" | "bfloat16" => Ok(Self::Bf16),
            "f16" | "float16" => Ok(Self::F16),
            _ => Err(format!("'{s}' is not a dtype (f32, bf16, f16)")),
        }
    }
}

impl ExportDtype {
    fn torch_name(self) -> &'static str {
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

/// The `model.safetensors` bytes of `weights` (model tensors only, in `dtype`).
pub fn model_safetensors(
    weights: &[(String, Vec<usize>, Vec<f32>)],
    dtype: ExportDtype,
) -> Result<Vec<u8>, String> {
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
                .map_err(|e| format!("tensor '{name}': {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let meta = [("format".to_owned(), "pt".to_owned())]
        .into_iter()
        .collect();
    safetensors::serialize(views, Some(meta))
        .map(crate::checkpoint::canonical)
        .map_err(|e| e.to_string())
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
    // A symbolic link: written through to an empty folder it names; a dangling one refused.
    let resolved;
    let out = match std::fs::symlink_metadata(out) {
        Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(out) {
            Ok(target) => {
                resolved = target;
                resolved.as_path()
            }
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
        _ => out,
    };
    if out.exists() && !out.is_dir() {
        return Err(err(
            out,
            "exists and is not a folder (choose another --out)",
        ));
    }
    if out.exists() && std::fs::read_dir(out).map_or(true, |mut d| d.next().is_some()) {
        return Err(err(
            out,
            "exists and is not an empty folder (choose another --out)",
        ));
    }
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
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| err(&tmp, e.to_string()))?;
    let result = (|| {
        let config = config_json(parts.model, parts.base_config, parts.dtype);
        let tokenizer = parts
            .tokenizer_json
            .clone()
            .unwrap_or_else(|| crate::tokenizer::byte_tokenizer_json().to_string());
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
                    .map_err(|e| err(&tmp.join("model.safetensors"), e))?,
            ),
        ];
        let mut names = Vec::new();
        for (file, bytes) in files {
            let path = tmp.join(file);
            std::fs::write(&path, bytes).map_err(|e| err(&path, e.to_string()))?;
            names.push(file.to_owned());
        }
        if out.exists() {
            std::fs::remove_dir(out).map_err(|e| err(out, e.to_string()))?;
        }
        std::fs::rename(&tmp, out).map_err(|e| err(out, e.to_string()))?;
        Ok(names)
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}
