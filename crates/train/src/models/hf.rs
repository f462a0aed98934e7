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

use crate::config::ModelConfig;
use crate::models::checkpoint::{Checkpoint, NamedTensor};

mod config;
pub use config::*;

mod export;
pub use export::*;

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

/// Whether `dir` looks like a Hugging Face model folder (it has `config.json`).
pub fn is_hf_dir(dir: &Path) -> bool {
    dir.join("config.json").is_file()
}

/// The shard files `model.safetensors.index.json` names, each once, sorted; a name that is
/// not a file of the folder is refused.
#[cfg(not(target_arch = "wasm32"))]
fn shard_files(dir: &Path, index: &Path) -> Result<Vec<PathBuf>, HfError> {
    let text = std::fs::read_to_string(index).map_err(|e| err(index, e.to_string()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| err(index, format!("not JSON: {e}")))?;
    let map = v
        .get("weight_map")
        .and_then(Value::as_object)
        .ok_or_else(|| err(index, "field 'weight_map' is missing or not an object"))?;
    let mut shards: Vec<String> = Vec::new();
    for (name, file) in map {
        let f = file.as_str().ok_or_else(|| {
            err(
                index,
                format!("field 'weight_map.{name}' is not a file name"),
            )
        })?;
        if f.contains('/') || f.contains('\\') || f.starts_with('.') {
            return Err(err(
                index,
                format!("field 'weight_map.{name}': '{f}' is not a file of this folder"),
            ));
        }
        if !shards.iter().any(|s| s == f) {
            shards.push(f.to_owned());
        }
    }
    shards.sort();
    Ok(shards.into_iter().map(|s| dir.join(s)).collect())
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
        shard_files(dir, &index)?
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
    // Checked against the file before anything is allocated for it.
    let size = f.metadata().map_err(|e| err(path, e.to_string()))?.len();
    if n > size.saturating_sub(8) {
        return Err(err(
            path,
            format!(
                "its 8-byte prefix declares a safetensors header of {n} bytes, but the file \
                 holds {size} bytes in all (cut short or damaged?)"
            ),
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
    // The layer count against the layers the tensors belong to ([`crate::model::blocks_are`]).
    let layers: std::collections::BTreeSet<usize> = tensors
        .iter()
        .filter_map(|(_, t)| {
            let rest = t.name.strip_prefix("model.layers.")?;
            rest.split_once('.')?.0.parse().ok()
        })
        .collect();
    if !crate::model::blocks_are(&layers, m.layers) {
        return Err(err(
            &dir.join("config.json"),
            format!(
                "field 'num_hidden_layers' is {}, but the safetensors files hold the weights of \
                 {} layers",
                m.layers,
                layers.len()
            ),
        ));
    }
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
