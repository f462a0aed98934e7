//! A GGUF Llama file as a Hugging Face Llama folder's parts, converted as `transformers`'
//! own GGUF loader converts it: `config.json` from the `{arch}.*` keys, weights dequantized
//! to f32 under Hugging Face names with llama.cpp's Q/K row permutation undone, and the
//! tokenizer (`tokenizer.ggml.*`) as the `tokenizer.json` / `tokenizer_config.json` that
//! `AutoTokenizer.from_pretrained(…, gguf_file=…)` builds.
//!
//! What this project's model cannot represent, or this converter does not know, is refused
//! naming the metadata key or tensor: other architectures, sliding windows, rope scaling,
//! experts, biases and extra tensors, tokenizers other than byte-level BPE (`gpt2`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::dequant::dequantize;
use super::file::{GgufError, GgufFile, MetaValue, TensorInfo, meta_text};
use super::tokenizer::tokenizer_text;
use crate::config::ModelConfig;
use crate::models::checkpoint::{Checkpoint, NamedTensor};

/// The parts of a Hugging Face folder read out of a GGUF file.
#[derive(Clone, Debug)]
pub struct Converted {
    /// `config.json`.
    pub config_json: Value,
    /// The model sizes of that config.
    pub model: ModelConfig,
    /// Weights under Hugging Face names (f32), in the model's parameter order.
    pub weights: Checkpoint,
    /// `tokenizer.json`.
    pub tokenizer_json: Value,
    /// `tokenizer_config.json` (special tokens, add_bos/add_eos, chat template).
    pub tokenizer_config: Value,
    /// `generation_config.json`.
    pub generation_config: Value,
    /// The ggml types of the file's tensors with their counts (for the user's information).
    pub tensor_types: BTreeMap<String, usize>,
}

impl Converted {
    /// The weights as (name, shape, values), the form an export writes.
    pub fn weight_list(&self) -> Vec<(String, Vec<usize>, Vec<f32>)> {
        self.weights
            .tensors
            .iter()
            .map(|t| (t.name.clone(), t.shape.clone(), t.data.clone()))
            .collect()
    }

    /// What a Hugging Face folder of this model holds besides the weights (`tokenizer_json`:
    /// the `tokenizer.json` text).
    pub fn export_parts<'a>(
        &'a self,
        dtype: crate::models::hf::ExportDtype,
        tokenizer_json: &str,
    ) -> crate::models::hf::ExportParts<'a> {
        crate::models::hf::ExportParts {
            model: &self.model,
            base_config: Some(&self.config_json),
            tokenizer_json: Some(tokenizer_json.to_owned()),
            dtype,
            tokenizer_config: Some(&self.tokenizer_config),
            generation_config: Some(&self.generation_config),
        }
    }
}

/// The `{arch}.` keys read (a key outside this list and the harmless ones is refused).
const KNOWN_KEYS: [&str; 13] = [
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "rope.freq_base",
    "attention.layer_norm_rms_epsilon",
    "vocab_size",
    "rope.dimension_count",
    "attention.key_length",
    "attention.value_length",
    "attention.sliding_window",
];

/// Keys whose only accepted values leave the model a plain Llama.
const NEUTRAL_KEYS: [(&str, &str); 4] = [
    ("expert_count", "0"),
    ("expert_used_count", "0"),
    ("rope.scaling.type", "none"),
    ("rope.scaling.factor", "1"),
];

/// Every `<arch>.` key of the metadata is one this converter reads, or has the value of a
/// plain Llama.
fn check_keys(g: &GgufFile, arch: &str) -> Result<(), String> {
    for (key, value) in &g.metadata {
        let Some(rest) = key.strip_prefix(&format!("{arch}.")) else {
            continue;
        };
        if KNOWN_KEYS.contains(&rest) {
            continue;
        }
        match NEUTRAL_KEYS.iter().find(|(k, _)| *k == rest) {
            Some((_, ok)) if meta_text(value) == *ok => {}
            Some(_) => {
                return Err(format!(
                    "metadata '{key}' is {}: only {} is supported (a plain Llama)",
                    meta_text(value),
                    NEUTRAL_KEYS
                        .iter()
                        .find(|(k, _)| *k == rest)
                        .map_or("", |k| k.1)
                ));
            }
            None => {
                return Err(format!(
                    "metadata '{key}' ({}) is not a key this converter knows; the model may \
                     need something this project does not implement",
                    meta_text(value)
                ));
            }
        }
    }
    Ok(())
}

/// The `<arch>.` keys of a file's metadata, read as positive numbers.
struct Meta<'a> {
    g: &'a GgufFile,
    arch: &'a str,
}

impl Meta<'_> {
    /// `<arch>.<k>`.
    fn key(&self, k: &str) -> String {
        format!("{}.{k}", self.arch)
    }

    /// A positive integer (at most 2^31), or `None` when absent.
    fn int(&self, k: &str) -> Result<Option<usize>, String> {
        match self.g.get(&self.key(k)) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| *n > 0 && *n <= 1 << 31)
                .map(|n| Some(n as usize))
                .ok_or_else(|| {
                    format!(
                        "metadata '{}' must be a positive integer, got {}",
                        self.key(k),
                        meta_text(v)
                    )
                }),
        }
    }

    /// A positive integer that must be there.
    fn need(&self, k: &str) -> Result<usize, String> {
        self.int(k)?
            .ok_or_else(|| format!("metadata '{}' is missing", self.key(k)))
    }

    /// A positive finite number, or `None` when absent.
    fn float(&self, k: &str) -> Result<Option<f64>, String> {
        match self.g.get(&self.key(k)) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|f| f.is_finite() && *f > 0.0)
                .map(Some)
                .ok_or_else(|| {
                    format!(
                        "metadata '{}' must be a positive number, got {}",
                        self.key(k),
                        meta_text(v)
                    )
                }),
        }
    }
}

/// The model's hyperparameters and `config.json` from the file's metadata.
pub fn config(g: &GgufFile) -> Result<(ModelConfig, Value), GgufError> {
    config_text(g).map_err(GgufError::whole)
}

fn config_text(g: &GgufFile) -> Result<(ModelConfig, Value), String> {
    let arch = architecture(g)?;
    check_keys(g, arch)?;
    let meta = Meta { g, arch };
    let (hidden, heads, kv_heads) = meta.attention()?;
    let vocab = meta.vocab()?;
    let (eps, theta) = meta.norm_and_rope()?;
    let context = meta.need("context_length")?;
    let tie = g.tensor("output.weight").is_none();
    let model = ModelConfig {
        vocab,
        d_model: hidden,
        layers: meta.need("block_count")?,
        heads,
        kv_heads,
        d_ff: meta.need("feed_forward_length")?,
        context,
        norm_eps: eps as f32,
        rope_theta: theta,
        tie_embeddings: tie,
        max_positions: Some(context),
        rope_scaling: None,
    };
    let id = |k: &str| {
        g.get(&format!("tokenizer.ggml.{k}"))
            .and_then(MetaValue::as_u64)
    };
    let mut cfg = crate::models::hf::config_json(&model, None, crate::models::hf::ExportDtype::F32);
    cfg["bos_token_id"] = json!(id("bos_token_id"));
    cfg["eos_token_id"] = json!(id("eos_token_id"));
    cfg["pad_token_id"] = json!(id("padding_token_id"));
    Ok((model, cfg))
}

/// `general.architecture`, when it is one this converter reads.
fn architecture(g: &GgufFile) -> Result<&str, String> {
    let arch = g
        .get("general.architecture")
        .ok_or("metadata 'general.architecture' is missing")?;
    let arch = arch.as_str().ok_or_else(|| {
        format!(
            "metadata 'general.architecture' is {}, not a string",
            arch.kind()
        )
    })?;
    if arch != "llama" && arch != "mistral" {
        return Err(format!(
            "metadata 'general.architecture' is '{arch}': only llama (and mistral without a \
             sliding window) is supported"
        ));
    }
    Ok(arch)
}

impl Meta<'_> {
    /// (hidden size, heads, key/value heads), checked against the shapes this model has: no
    /// sliding window, heads that divide evenly, one head size for rope, keys and values.
    fn attention(&self) -> Result<(usize, usize, usize), String> {
        let key = |k: &str| self.key(k);
        if let Some(w) = self
            .g
            .get(&key("attention.sliding_window"))
            .filter(|w| w.as_u64() != Some(0))
        {
            return Err(format!(
                "metadata '{}' is {}: sliding-window attention is not supported",
                key("attention.sliding_window"),
                meta_text(w)
            ));
        }
        let hidden = self.need("embedding_length")?;
        let heads = self.need("attention.head_count")?;
        let kv_heads = self.int("attention.head_count_kv")?.unwrap_or(heads);
        if !hidden.is_multiple_of(heads) || !heads.is_multiple_of(kv_heads) {
            return Err(format!(
                "metadata '{}' {hidden}, '{}' {heads} and '{}' {kv_heads} do not divide evenly",
                key("embedding_length"),
                key("attention.head_count"),
                key("attention.head_count_kv")
            ));
        }
        let head_dim = hidden / heads;
        for k in [
            "rope.dimension_count",
            "attention.key_length",
            "attention.value_length",
        ] {
            if let Some(n) = self.int(k)?.filter(|n| *n != head_dim) {
                return Err(format!(
                    "metadata '{}' is {n}: only {head_dim} (embedding_length / head_count) is supported",
                    key(k)
                ));
            }
        }
        Ok((hidden, heads, kv_heads))
    }

    /// The vocabulary size: `vocab_size`, else the tokenizer's token count.
    fn vocab(&self) -> Result<usize, String> {
        let tokens = self
            .g
            .get("tokenizer.ggml.tokens")
            .and_then(MetaValue::as_array)
            .map(<[MetaValue]>::len);
        match (self.int("vocab_size")?, tokens) {
            (Some(v), _) => Ok(v),
            (None, Some(n)) if n > 0 => Ok(n),
            _ => Err(format!(
                "metadata '{}' is missing (and there are no tokenizer tokens)",
                self.key("vocab_size")
            )),
        }
    }

    /// The RMSNorm epsilon and the rope base, each checked.
    fn norm_and_rope(&self) -> Result<(f64, f64), String> {
        let key = |k: &str| self.key(k);
        let eps = self
            .float("attention.layer_norm_rms_epsilon")?
            .ok_or_else(|| {
                format!(
                    "metadata '{}' is missing",
                    key("attention.layer_norm_rms_epsilon")
                )
            })?;
        // Stored as f32 (as transformers and llama.cpp hold it) and an epsilon: below 1 and
        // not so small that f32 makes it 0 (1e39 would become inf, written `null`; 1e-60, 0.0).
        if !(eps < 1.0 && eps as f32 > 0.0) {
            return Err(format!(
                "metadata '{}' is {eps:e}: an RMSNorm epsilon must be in (0, 1) and \
                 representable in f32 (at least {:e})",
                key("attention.layer_norm_rms_epsilon"),
                f32::from_bits(1)
            ));
        }
        let theta = self.float("rope.freq_base")?.unwrap_or(10000.0);
        if theta <= 1.0 {
            return Err(format!(
                "metadata '{}' is {theta}: a rope base must be above 1",
                key("rope.freq_base")
            ));
        }
        Ok((eps, theta))
    }
}

/// The Hugging Face name of a GGUF tensor name, if it is a Llama tensor.
pub fn hf_name(gguf: &str) -> Option<String> {
    let fixed = match gguf {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(f.to_owned());
    }
    let (layer, part) = block_of(gguf)?;
    let module = match part {
        "attn_norm.weight" => "input_layernorm.weight",
        "attn_q.weight" => "self_attn.q_proj.weight",
        "attn_k.weight" => "self_attn.k_proj.weight",
        "attn_v.weight" => "self_attn.v_proj.weight",
        "attn_output.weight" => "self_attn.o_proj.weight",
        "ffn_norm.weight" => "post_attention_layernorm.weight",
        "ffn_gate.weight" => "mlp.gate_proj.weight",
        "ffn_up.weight" => "mlp.up_proj.weight",
        "ffn_down.weight" => "mlp.down_proj.weight",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{module}"))
}

/// The block number and the rest of a `blk.N.rest` name, with N written as llama.cpp writes
/// it (`blk.0`, never `blk.00`: llama.cpp looks tensors up by that spelling).
fn block_of(gguf: &str) -> Option<(usize, &str)> {
    let (layer, part) = gguf.strip_prefix("blk.")?.split_once('.')?;
    let n: usize = layer.parse().ok()?;
    (n.to_string() == layer).then_some((n, part))
}

/// The metadata's block count against the blocks the file's tensors belong to, before any
/// list is sized by it (a count of 2^31 in a small file would otherwise build 2^31 layers).
fn check_block_count(g: &GgufFile, m: &ModelConfig) -> Result<(), String> {
    let mut blocks = std::collections::BTreeSet::new();
    for t in &g.tensors {
        if let Some(rest) = t.name.strip_prefix("blk.") {
            match block_of(&t.name) {
                Some((n, _)) => {
                    blocks.insert(n);
                }
                None => {
                    let number = rest.split('.').next().unwrap_or("");
                    return Err(format!(
                        "tensor '{}': block number '{number}' is not one llama.cpp writes \
                         (blk.0, blk.1, …: no sign, no leading zeros)",
                        t.name
                    ));
                }
            }
        }
    }
    let arch = g
        .get("general.architecture")
        .and_then(MetaValue::as_str)
        .unwrap_or("llama");
    if !crate::model::blocks_are(&blocks, m.layers) {
        let last = blocks.last().copied().unwrap_or(0);
        return Err(format!(
            "metadata '{arch}.block_count' is {}, but the file's tensors belong to {} blocks{}",
            m.layers,
            blocks.len(),
            if blocks.is_empty() {
                String::new()
            } else {
                format!(" (blk.{} … blk.{last})", blocks.first().unwrap_or(&0))
            }
        ));
    }
    Ok(())
}

/// Undoes llama.cpp's Q/K permutation of rows (`transformers`' `_reverse_permute_weights`):
/// within each head of `head_dim` rows, GGUF row `2i + p` is Hugging Face row `p·head_dim/2 + i`.
pub fn unpermute_rows(data: &[f32], rows: usize, cols: usize, heads: usize) -> Vec<f32> {
    let head_dim = rows / heads;
    let half = head_dim / 2;
    let mut out = vec![0.0f32; data.len()];
    for h in 0..heads {
        for i in 0..half {
            for p in 0..2 {
                let src = h * head_dim + 2 * i + p;
                let dst = h * head_dim + p * half + i;
                out[dst * cols..(dst + 1) * cols]
                    .copy_from_slice(&data[src * cols..(src + 1) * cols]);
            }
        }
    }
    out
}

/// One tensor dequantized to f32 in Hugging Face layout (`bytes` is the whole file).
pub fn tensor_f32(bytes: &[u8], t: &TensorInfo) -> Vec<f32> {
    let mut out = vec![0.0f32; t.elements() as usize];
    dequantize(t.ggml_type, &bytes[t.start..t.start + t.bytes], &mut out);
    out
}

/// The model's weights out of the file (`bytes` is the whole file), checked against `m`.
pub fn weights(g: &GgufFile, bytes: &[u8], m: &ModelConfig) -> Result<Checkpoint, GgufError> {
    weights_text(g, bytes, m).map_err(GgufError::whole)
}

fn weights_text(g: &GgufFile, bytes: &[u8], m: &ModelConfig) -> Result<Checkpoint, String> {
    check_block_count(g, m)?;
    let specs = crate::model::param_specs(m);
    let mut by_name: BTreeMap<String, &TensorInfo> = BTreeMap::new();
    for t in &g.tensors {
        if t.name == "rope_freqs.weight" {
            return Err(
                "tensor 'rope_freqs.weight': rope frequency factors (Llama-3 rope scaling) are \
                 not supported from GGUF"
                    .into(),
            );
        }
        let name = hf_name(&t.name).ok_or_else(|| {
            format!(
                "tensor '{}' is not part of a Llama model this project can represent",
                t.name
            )
        })?;
        if !specs.iter().any(|(n, _, _)| *n == name) {
            return Err(format!(
                "tensor '{}' ({name}) does not fit the model the metadata describes ({} layers{})",
                t.name,
                m.layers,
                if m.tie_embeddings { ", tied" } else { "" }
            ));
        }
        if let Some(other) = by_name.insert(name.clone(), t) {
            return Err(format!(
                "tensors '{}' and '{}' are both '{name}': one weight given twice",
                other.name, t.name
            ));
        }
    }
    let hd = m.head_dim();
    let mut out = Vec::with_capacity(specs.len());
    for (name, shape, _) in specs {
        let t = by_name
            .get(&name)
            .ok_or_else(|| format!("tensor for '{name}' is missing from the file"))?;
        if t.shape() != shape {
            return Err(format!(
                "tensor '{}' has shape {:?} (GGUF dimensions {:?}), the metadata needs {shape:?}",
                t.name,
                t.shape(),
                t.dims
            ));
        }
        let mut data = tensor_f32(bytes, t);
        let heads = if name.ends_with("q_proj.weight") {
            Some(m.heads)
        } else if name.ends_with("k_proj.weight") {
            Some(m.kv_heads)
        } else {
            None
        };
        if let Some(h) = heads {
            data = unpermute_rows(&data, h * hd, m.d_model, h);
        }
        if let Some(i) = data.iter().position(|v| !v.is_finite()) {
            return Err(format!(
                "tensor '{}' holds a non-finite value ({}) at element {i}",
                t.name, data[i]
            ));
        }
        out.push(NamedTensor { name, shape, data });
    }
    Ok(Checkpoint {
        tensors: out,
        metadata: BTreeMap::new(),
    })
}

/// Converts a parsed file (`bytes`: the whole file).
pub fn convert(g: &GgufFile, bytes: &[u8]) -> Result<Converted, GgufError> {
    convert_text(g, bytes).map_err(GgufError::whole)
}

fn convert_text(g: &GgufFile, bytes: &[u8]) -> Result<Converted, String> {
    let (model, config_json) = config_text(g)?;
    let (tokenizer_json, tokenizer_config) = tokenizer_text(g)?;
    let n_tokens = tokenizer_json["model"]["vocab"]
        .as_object()
        .map_or(0, serde_json::Map::len);
    if n_tokens > model.vocab {
        return Err(format!(
            "metadata: the tokenizer has {n_tokens} tokens, the model's vocabulary is {}",
            model.vocab
        ));
    }
    let weights = weights_text(g, bytes, &model)?;
    let mut generation_config = json!({"_from_model_config": true});
    for k in ["bos_token_id", "eos_token_id", "pad_token_id"] {
        if !config_json[k].is_null() {
            generation_config[k] = config_json[k].clone();
        }
    }
    let mut tensor_types = BTreeMap::new();
    for t in &g.tensors {
        *tensor_types
            .entry(t.ggml_type.name().to_owned())
            .or_insert(0) += 1;
    }
    Ok(Converted {
        config_json,
        model,
        weights,
        tokenizer_json,
        tokenizer_config,
        generation_config,
        tensor_types,
    })
}
