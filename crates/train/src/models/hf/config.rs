//! `config.json`: what this project's model can represent, read from a Hugging Face config.

use super::*;

/// The model part of a `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct HfConfig {
    /// The model sizes (its `context` is `max_position_embeddings`; a run may use less).
    pub model: ModelConfig,
    /// The whole JSON, kept so an export writes the same form back.
    pub json: Value,
}

/// A Llama (or a Mistral without a sliding window, which is one), by `architectures` or
/// `model_type`.
fn check_architecture(file: &Path, obj: &serde_json::Map<String, Value>) -> Result<(), HfError> {
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
    Ok(())
}

/// Refuses field `key` when its value fails `ok`, saying `why`.
type Refuse<'a> = &'a dyn Fn(&str, &dyn Fn(&Value) -> bool, &str) -> Result<(), HfError>;

/// The fields of a Llama this model does not implement: biases, sliding windows, other
/// activations.
fn refuse_unsupported(refuse: Refuse<'_>) -> Result<(), HfError> {
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
    Ok(())
}

/// Parses `config.json` text; `file` names it in errors.
pub fn parse_config(file: &Path, text: &str) -> Result<HfConfig, HfError> {
    let json: Value =
        serde_json::from_str(text).map_err(|e| err(file, format!("not JSON: {e}")))?;
    let Some(obj) = json.as_object() else {
        return Err(err(file, "not a JSON object"));
    };
    check_architecture(file, obj)?;
    let f = Fields { file, obj };
    let (hidden, heads) = (f.int("hidden_size")?, f.int("num_attention_heads")?);
    let kv_heads = match obj.get("num_key_value_heads") {
        None | Some(Value::Null) => heads,
        Some(_) => f.int("num_key_value_heads")?,
    };
    let rope_theta = f.rope_theta()?;
    let rope_scaling = rope_scaling(file, obj)?;
    let refuse = |key: &str, ok: &dyn Fn(&Value) -> bool, why: &str| -> Result<(), HfError> {
        match obj.get(key) {
            Some(v) if !ok(v) => Err(err(file, format!("field '{key}' is {v}: {why}"))),
            _ => Ok(()),
        }
    };
    refuse_unsupported(&refuse)?;
    check_heads(file, hidden, heads, kv_heads)?;
    refuse(
        "head_dim",
        &|v| v.is_null() || v.as_u64() == Some((hidden / heads) as u64),
        &format!(
            "only head_dim = hidden_size / num_attention_heads = {} is supported",
            hidden / heads
        ),
    )?;
    let eps = f.eps()?;
    let max_positions = f.int("max_position_embeddings")?;
    let tie = f.tie()?;
    let model = ModelConfig {
        vocab: f.int("vocab_size")?,
        d_model: hidden,
        layers: f.int("num_hidden_layers")?,
        heads,
        kv_heads,
        d_ff: f.int("intermediate_size")?,
        context: max_positions,
        norm_eps: eps as f32,
        rope_theta,
        tie_embeddings: tie,
        max_positions: Some(max_positions),
        rope_scaling,
    };
    Ok(HfConfig { model, json })
}

/// The fields of a `config.json` object, each read with its check (`file` names it in
/// errors).
struct Fields<'a> {
    file: &'a Path,
    obj: &'a serde_json::Map<String, Value>,
}

impl Fields<'_> {
    /// A positive integer field.
    fn int(&self, key: &str) -> Result<usize, HfError> {
        match self.obj.get(key) {
            None => Err(err(self.file, format!("field '{key}' is missing"))),
            Some(v) => v
                .as_u64()
                .filter(|n| *n > 0)
                .map(|n| n as usize)
                .ok_or_else(|| {
                    err(
                        self.file,
                        format!("field '{key}' must be a positive integer, got {v}"),
                    )
                }),
        }
    }

    /// The rope base (`rope_parameters.rope_theta` or `rope_theta`; 10000 when absent).
    fn rope_theta(&self) -> Result<f64, HfError> {
        let rope = self.obj.get("rope_parameters").filter(|v| !v.is_null());
        Ok(rope
            .and_then(|r| r.get("rope_theta"))
            .or_else(|| self.obj.get("rope_theta"))
            .map(|v| {
                v.as_f64()
                    .filter(|t| t.is_finite() && *t > 1.0)
                    .ok_or_else(|| {
                        err(
                            self.file,
                            format!("field 'rope_theta' must be a number above 1, got {v}"),
                        )
                    })
            })
            .transpose()?
            .unwrap_or(10000.0))
    }

    /// The RMSNorm epsilon, in (0, 1).
    fn eps(&self) -> Result<f64, HfError> {
        match self.obj.get("rms_norm_eps") {
            None => Err(err(self.file, "field 'rms_norm_eps' is missing")),
            Some(v) => v
                .as_f64()
                .filter(|e| e.is_finite() && *e > 0.0 && *e < 1.0)
                .ok_or_else(|| {
                    err(
                        self.file,
                        format!("field 'rms_norm_eps' must be a number in (0, 1), got {v}"),
                    )
                }),
        }
    }

    /// Whether the head shares the embedding's weights (false when absent, LlamaConfig's
    /// default).
    fn tie(&self) -> Result<bool, HfError> {
        match self.obj.get("tie_word_embeddings") {
            None => Ok(false),
            Some(v) => v.as_bool().ok_or_else(|| {
                err(
                    self.file,
                    format!("field 'tie_word_embeddings' must be true or false, got {v}"),
                )
            }),
        }
    }
}

/// Heads that divide the hidden size, and key/value heads that divide the heads.
fn check_heads(file: &Path, hidden: usize, heads: usize, kv_heads: usize) -> Result<(), HfError> {
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
    Ok(())
}

/// The rope scaling of a config: none (`default`, absent) or Llama-3's, from either spelling
/// (`rope_scaling` or `rope_parameters`; `rope_type` or the older `type`). Other kinds are
/// refused naming the field.
pub(crate) fn rope_scaling(
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
