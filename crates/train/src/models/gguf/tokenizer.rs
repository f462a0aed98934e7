//! The tokenizer of a GGUF file (`tokenizer.ggml.*`) as the `tokenizer.json` /
//! `tokenizer_config.json` that `AutoTokenizer.from_pretrained(…, gguf_file=…)` builds:
//! byte-level BPE (`gpt2`) with its merges, added tokens, post-processor and pre-tokenizer
//! split. Anything else is refused naming the metadata key.

use serde_json::{Value, json};

use super::file::{GgufFile, MetaValue, meta_text};

/// transformers' `update_post_processor`: "bos:0 $A:0 eos:0" and the pair with type 1.
fn post_processor(
    tokens: &[&str],
    (bos, add_bos): (Option<usize>, bool),
    (eos, add_eos): (Option<usize>, bool),
) -> Value {
    let mut single = Vec::new();
    let mut pair = Vec::new();
    let mut special_tokens = serde_json::Map::new();
    let special =
        |i: usize, type_id: u32| json!({"SpecialToken": {"id": tokens[i], "type_id": type_id}});
    for (type_id, list) in [(0u32, &mut single), (1u32, &mut pair)] {
        if let (true, Some(b)) = (add_bos, bos) {
            list.push(special(b, type_id));
        }
        list.push(
            json!({"Sequence": {"id": if type_id == 0 { "A" } else { "B" }, "type_id": type_id}}),
        );
        if let (true, Some(e)) = (add_eos, eos) {
            list.push(special(e, type_id));
        }
    }
    let pair: Vec<Value> = single.iter().cloned().chain(pair).collect();
    for i in [bos.filter(|_| add_bos), eos.filter(|_| add_eos)]
        .into_iter()
        .flatten()
    {
        special_tokens.insert(
            tokens[i].to_owned(),
            json!({"id": tokens[i], "ids": [i], "tokens": [tokens[i]]}),
        );
    }
    json!({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": special_tokens})
}

/// The added tokens: control tokens spelled in the byte alphabet (special), user-defined
/// tokens the vocabulary holds (not special).
fn added_tokens(
    tokens: &[&str],
    types: &[i64],
    alphabet: &std::collections::BTreeSet<char>,
    vocab: &serde_json::Map<String, Value>,
) -> Vec<Value> {
    let mut added = Vec::new();
    for (i, (t, ty)) in tokens
        .iter()
        .zip(types.iter().chain(std::iter::repeat(&1)))
        .enumerate()
    {
        let in_alphabet = t.chars().all(|c| alphabet.contains(&c));
        let special = match ty {
            3 if in_alphabet => true,
            4 if vocab.contains_key(*t) => false,
            _ => continue,
        };
        added.push(
            json!({"id": i, "content": t, "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": special}),
        );
    }
    added
}

/// `tokenizer.ggml.token_type` (none when absent).
fn token_types(g: &GgufFile) -> Result<Vec<i64>, String> {
    Ok(match g.get("tokenizer.ggml.token_type") {
        None => Vec::new(),
        Some(v) => v
            .as_array()
            .ok_or("metadata 'tokenizer.ggml.token_type' is not an array")?
            .iter()
            .map(|t| match t {
                MetaValue::Int(i) => Ok(*i),
                MetaValue::Uint(u) => Ok(*u as i64),
                _ => Err("metadata 'tokenizer.ggml.token_type' holds a non-integer".to_string()),
            })
            .collect::<Result<_, _>>()?,
    })
}

/// `tokenizer.ggml.merges` as the pairs `tokenizer.json` holds: each part and the token it
/// makes must be in the vocabulary (the tokenizers crate refuses a file where one is not).
fn merge_pairs(
    merges: &[&str],
    vocab: &serde_json::Map<String, Value>,
) -> Result<Vec<Value>, String> {
    merges
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let parts: Vec<&str> = m.split(' ').collect();
            if parts.len() != 2 {
                return Err(format!(
                    "metadata 'tokenizer.ggml.merges'[{i}] is '{m}', not two tokens separated by one space"
                ));
            }
            let joined = format!("{}{}", parts[0], parts[1]);
            if let Some(unknown) = [parts[0], parts[1], joined.as_str()]
                .into_iter()
                .find(|t| !vocab.contains_key(*t))
            {
                return Err(format!(
                    "metadata 'tokenizer.ggml.merges'[{i}] is '{m}': '{unknown}' is not a token \
                     of 'tokenizer.ggml.tokens'"
                ));
            }
            Ok(json!(parts))
        })
        .collect()
}

/// Pre-tokenizer splits `transformers` uses for these `tokenizer.ggml.pre` values (others:
/// GPT-2's ByteLevel regex).
fn split_regex(pre: &str) -> Option<&'static str> {
    const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    const QWEN35: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    Some(match pre {
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" | "dbrx" | "smaug-bpe" => LLAMA3,
        "tekken" => TEKKEN,
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" => QWEN2,
        "qwen35" => QWEN35,
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => GPT4O,
        _ => return None,
    })
}

fn strings<'a>(g: &'a GgufFile, key: &str) -> Result<Option<Vec<&'a str>>, String> {
    let Some(v) = g.get(key) else { return Ok(None) };
    let a = v
        .as_array()
        .ok_or_else(|| format!("metadata '{key}' is {}, not an array of strings", v.kind()))?;
    a.iter()
        .enumerate()
        .map(|(i, s)| {
            s.as_str()
                .ok_or_else(|| format!("metadata '{key}'[{i}] is {}, not a string", s.kind()))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `tokenizer.json` and `tokenizer_config.json` from the file's `tokenizer.ggml.*` keys.
pub fn tokenizer(g: &GgufFile) -> Result<(Value, Value), super::GgufError> {
    tokenizer_text(g).map_err(super::GgufError::whole)
}

pub(super) fn tokenizer_text(g: &GgufFile) -> Result<(Value, Value), String> {
    let tokens = bpe_tokens(g)?;
    let merges = strings(g, "tokenizer.ggml.merges")?.unwrap_or_default();
    let types = token_types(g)?;
    let chars = crate::models::tokenizer::byte_to_char();
    let alphabet: std::collections::BTreeSet<char> = chars.iter().copied().collect();
    let spell = |t: &str| -> String {
        if t.chars().all(|c| alphabet.contains(&c)) {
            t.to_owned()
        } else {
            t.bytes().map(|b| chars[b as usize]).collect()
        }
    };
    let mut vocab = serde_json::Map::new();
    for (i, t) in tokens.iter().enumerate() {
        vocab.insert(spell(t), json!(i));
    }
    let merges = merge_pairs(&merges, &vocab)?;
    let added = added_tokens(&tokens, &types, &alphabet, &vocab);
    let id = |k: &str| token_id(g, k, tokens.len());
    let (bos, eos) = (id("bos_token_id")?, id("eos_token_id")?);
    let (unk, pad) = (id("unknown_token_id")?, id("padding_token_id")?);
    let add_bos = flag(g, "add_bos_token")? && bos.is_some();
    let add_eos = flag(g, "add_eos_token")? && eos.is_some();
    let post_processor = post_processor(&tokens, (bos, add_bos), (eos, add_eos));
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true});
    let pre_tokenizer = pre_tokenizer(g, byte_level);
    let tokenizer = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": post_processor,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
            "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": merges
        }
    });
    let name = |i: Option<usize>| i.map(|i| json!(tokens[i])).unwrap_or(Value::Null);
    let mut config = json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": name(bos),
        "eos_token": name(eos),
        "unk_token": name(unk),
        "pad_token": name(pad),
        "add_bos_token": add_bos,
        "add_eos_token": add_eos,
        "model_max_length": 1_000_000_000_000_000_019_884_624_838_656f64,
    });
    if let Some(t) = g.get("tokenizer.chat_template") {
        let t = t
            .as_str()
            .ok_or("metadata 'tokenizer.chat_template' is not a string")?;
        config["chat_template"] = json!(t);
    }
    Ok((tokenizer, config))
}

/// The tokens of a byte-level BPE tokenizer (the only kind read), refused when absent.
fn bpe_tokens(g: &GgufFile) -> Result<Vec<&str>, String> {
    let kind = g
        .get("tokenizer.ggml.model")
        .ok_or("metadata 'tokenizer.ggml.model' is missing (the file has no tokenizer)")?;
    let kind = kind.as_str().unwrap_or("");
    if kind != "gpt2" {
        return Err(format!(
            "metadata 'tokenizer.ggml.model' is '{kind}': only byte-level BPE ('gpt2') tokenizers are supported"
        ));
    }
    let tokens = strings(g, "tokenizer.ggml.tokens")?
        .ok_or("metadata 'tokenizer.ggml.tokens' is missing")?;
    if tokens.is_empty() {
        return Err(
            "metadata 'tokenizer.ggml.tokens' is an empty list: a tokenizer needs tokens".into(),
        );
    }
    Ok(tokens)
}

/// `tokenizer.ggml.<k>`: a token id below `n`, if given.
fn token_id(g: &GgufFile, k: &str, n: usize) -> Result<Option<usize>, String> {
    match g.get(&format!("tokenizer.ggml.{k}")) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|i| (*i as usize) < n)
            .map(|i| Some(i as usize))
            .ok_or_else(|| {
                format!(
                    "metadata 'tokenizer.ggml.{k}' is {}, not a token id below {n}",
                    meta_text(v),
                )
            }),
    }
}

/// `tokenizer.ggml.<k>`: a boolean (false when absent).
fn flag(g: &GgufFile, k: &str) -> Result<bool, String> {
    match g.get(&format!("tokenizer.ggml.{k}")) {
        None => Ok(false),
        Some(v) => v.as_bool().ok_or_else(|| {
            format!(
                "metadata 'tokenizer.ggml.{k}' is {}, not a boolean",
                v.kind()
            )
        }),
    }
}

/// The pre-tokenizer: the split regex `tokenizer.ggml.pre` names, then bytes; `byte_level`
/// alone when it names none this knows.
fn pre_tokenizer(g: &GgufFile, byte_level: Value) -> Value {
    let pre = g
        .get("tokenizer.ggml.pre")
        .and_then(MetaValue::as_str)
        .unwrap_or("");
    match split_regex(pre) {
        None => byte_level,
        Some(re) => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": re}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
        ]}),
    }
}
