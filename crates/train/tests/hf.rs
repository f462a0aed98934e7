//! Hugging Face Llama folders against what `transformers` computed (fixtures written by
//! `tests/fixtures/gen_hf_fixtures.py`): logits, tokenizer ids, the windowed loss, the
//! exported `config.json` and `tokenizer.json`, and bad folders refused by name.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

mod common;

use common::gpu;
use std::path::{Path, PathBuf};

use hif8lab_engine::Backend;
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_train::infer::Model;
use hif8lab_train::models::hf::{self, ExportDtype};
use hif8lab_train::models::tokenizer::{self, Tokenizer};
use serde_json::Value;

const MODELS: [&str; 4] = [
    "tiny-gqa-tied-bf16",
    "tiny-untied-f32-sharded",
    "tiny-mistral-f32",
    "tiny-llama3-rope-f32",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hf")
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn tokenizer_of(dir: &Path) -> Tokenizer {
    let p = dir.join("tokenizer.json");
    Tokenizer::from_json("t", &std::fs::read_to_string(p).unwrap()).unwrap()
}

/// max |ours − ref| / max |ref| (and the largest element-wise error relative to that element
/// where it is not tiny), for one backend and fixture.
fn logits_error<B: Backend>(b: B, name: &str) -> (f64, f64) {
    let dir = fixtures().join(name);
    let reference = json(&dir.join("reference.json"));
    let m = hf::load(&dir).unwrap();
    let ids: Vec<u32> = serde_json::from_value(reference["input_ids"].clone()).unwrap();
    let want: Vec<f64> = serde_json::from_value(reference["logits"].clone()).unwrap();
    let mut model = Model::new(b, m.config.model.clone(), &m.weights, 2).unwrap();
    let got = model.logits(&ids).unwrap();
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let mut worst = 0.0f64;
    let mut worst_elem = 0.0f64;
    for (g, w) in got.iter().zip(&want) {
        let d = (f64::from(*g) - w).abs();
        worst = worst.max(d / scale);
        if w.abs() > 0.1 * scale {
            worst_elem = worst_elem.max(d / w.abs());
        }
    }
    // The loss of the same window (mean over its shifted targets), as transformers computed.
    let r = model.eval(&ids).unwrap();
    let want_loss = reference["loss"].as_f64().unwrap();
    assert!(
        (r.loss() - want_loss).abs() < 1e-5 * want_loss,
        "{name}: loss {} vs transformers {want_loss}",
        r.loss()
    );
    // The windowed loss of eval.txt, `hif8lab eval`'s convention.
    let text = std::fs::read_to_string(dir.join("eval.txt")).unwrap();
    let eval_ids = tokenizer_of(&dir).encode(&text).unwrap();
    let e = model.eval(&eval_ids).unwrap();
    assert_eq!(
        e.tokens,
        reference["eval_tokens"].as_u64().unwrap(),
        "{name}"
    );
    let want_eval = reference["eval_loss"].as_f64().unwrap();
    assert!(
        (e.loss() - want_eval).abs() < 1e-5 * want_eval,
        "{name}: eval loss {} vs transformers {want_eval}",
        e.loss()
    );
    (worst, worst_elem)
}

#[test]
fn logits_and_losses_match_transformers_on_the_cpu() {
    for name in MODELS {
        let (worst, elem) = logits_error(CpuBackend::new(), name);
        println!("cpu {name}: max |Δlogit| / max |logit| = {worst:.2e}, element-wise {elem:.2e}");
        assert!(worst < 1e-4 && elem < 1e-4, "{name}: {worst} {elem}");
    }
}

#[test]
fn logits_and_losses_match_transformers_on_the_gpu() {
    for name in MODELS {
        let Some(g) = gpu() else { return };
        let (worst, elem) = logits_error(g, name);
        println!("gpu {name}: max |Δlogit| / max |logit| = {worst:.2e}, element-wise {elem:.2e}");
        assert!(worst < 1e-4 && elem < 1e-4, "{name}: {worst} {elem}");
    }
}

#[test]
fn greedy_sampling_agrees_across_backends() {
    let Some(g) = gpu() else { return };
    let m = hf::load(&fixtures().join(MODELS[1])).unwrap();
    let prompt = tokenizer_of(&fixtures().join(MODELS[1]))
        .encode("The river")
        .unwrap();
    let mut cpu = Model::new(CpuBackend::new(), m.config.model.clone(), &m.weights, 1).unwrap();
    let a = cpu.sample(&prompt, 12, 0.0, 0, 1, &mut |_| true).unwrap();
    let mut gpu = Model::new(g, m.config.model.clone(), &m.weights, 1).unwrap();
    let b = gpu.sample(&prompt, 12, 0.0, 0, 1, &mut |_| true).unwrap();
    assert_eq!(
        a, b,
        "greedy tokens (logits agree to ~1e-6; no near-ties here)"
    );
    // Seeded sampling is reproducible and depends on the seed.
    let x = cpu.sample(&prompt, 12, 1.0, 0, 7, &mut |_| true).unwrap();
    assert_eq!(
        x,
        cpu.sample(&prompt, 12, 1.0, 0, 7, &mut |_| true).unwrap()
    );
    assert_ne!(
        x,
        cpu.sample(&prompt, 12, 1.0, 0, 8, &mut |_| true).unwrap()
    );
}

#[test]
fn tokenizers_give_the_ids_transformers_gave() {
    for name in MODELS {
        let reference = json(&fixtures().join(name).join("reference.json"));
        let ids: Vec<u32> = serde_json::from_value(reference["sample_ids"].clone()).unwrap();
        let t = tokenizer_of(&fixtures().join(name));
        assert!(matches!(t, Tokenizer::Hf(_)));
        let text = reference["sample_text"].as_str().unwrap();
        assert_eq!(t.encode(text).unwrap(), ids, "{name}");
        assert_eq!(t.decode(&ids), text);
    }
    // The byte tokenizer as transformers saved it: recognized, and the same ids.
    let dir = fixtures().join("byte-tokenizer");
    let saved = std::fs::read_to_string(dir.join("tokenizer.json")).unwrap();
    assert!(tokenizer::is_byte_tokenizer(&saved));
    let ids = json(&dir.join("ids.json"));
    let want: Vec<u32> = serde_json::from_value(ids["ids"].clone()).unwrap();
    assert_eq!(
        Tokenizer::Bytes
            .encode(ids["text"].as_str().unwrap())
            .unwrap(),
        want
    );
    // What export writes for the byte tokenizer is what transformers wrote, field by field.
    let ours = tokenizer::byte_tokenizer_json();
    let theirs: Value = serde_json::from_str(&saved).unwrap();
    for (k, v) in theirs.as_object().unwrap() {
        assert_eq!(ours.get(k), Some(v), "tokenizer.json field '{k}'");
    }
    assert_eq!(
        ours.as_object().unwrap().len(),
        theirs.as_object().unwrap().len()
    );
}

#[test]
fn exported_config_json_has_every_field_transformers_writes() {
    // The smoke preset's shape, as transformers writes its LlamaConfig.
    let theirs = json(&fixtures().join("smoke-config/config.json"));
    let smoke =
        hif8lab_train::RunConfig::parse("smoke", hif8lab_train::config::PRESETS[0].1, &[]).unwrap();
    let ours = hf::config_json(&smoke.model, None, ExportDtype::F32);
    for (k, v) in theirs.as_object().unwrap() {
        match k.as_str() {
            "transformers_version" => {}
            // Special-token ids: the byte tokenizer has none (transformers' defaults are 1, 2).
            "bos_token_id" | "eos_token_id" => assert!(ours[k].is_null(), "{k}"),
            _ => assert_eq!(ours.get(k), Some(v), "config.json field '{k}'"),
        }
    }
    // A folder's own config goes back out with its other fields (ids, versions) kept.
    for name in MODELS {
        let theirs = json(&fixtures().join(name).join("config.json"));
        let m = hf::parse_config(Path::new("config.json"), &theirs.to_string()).unwrap();
        let ours = hf::config_json(&m.model, Some(&theirs), ExportDtype::F32);
        for (k, v) in theirs.as_object().unwrap() {
            if k != "dtype" {
                assert_eq!(ours.get(k), Some(v), "{name}: config.json field '{k}'");
            }
        }
        assert_eq!(ours["dtype"], "float32");
    }
}

/// A copy of fixture `name` in a fresh temporary folder, changed by `edit`.
fn broken(name: &str, tag: &str, edit: impl FnOnce(&Path)) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hif8lab-hf-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(fixtures().join(name)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    edit(&dir);
    dir
}

fn edit_config(dir: &Path, f: impl FnOnce(&mut serde_json::Map<String, Value>)) {
    let mut v = json(&dir.join("config.json"));
    f(v.as_object_mut().unwrap());
    std::fs::write(dir.join("config.json"), v.to_string()).unwrap();
}

fn refused(dir: &Path, file: &str, words: &[&str]) {
    let e = match hf::load(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    };
    assert!(e.contains(file), "names {file}: {e}");
    for w in words {
        assert!(e.contains(w), "says {w}: {e}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_folders_are_refused_naming_file_and_field() {
    let tied = MODELS[0];
    // A header length beyond the file: refused against the file's size, before the 50 MiB it
    // declares are allocated.
    let d = broken(tied, "header-len", |d| {
        let mut bytes = (50u64 << 20).to_le_bytes().to_vec();
        bytes.extend_from_slice(b"{}");
        std::fs::write(d.join("model.safetensors"), bytes).unwrap();
    });
    refused(
        &d,
        "model.safetensors",
        &["header of 52428800 bytes", "holds 10 bytes in all"],
    );
    let d = broken(tied, "missing", |d| {
        edit_config(d, |c| drop(c.remove("hidden_size")))
    });
    refused(&d, "config.json", &["'hidden_size'", "missing"]);
    let d = broken(tied, "arch", |d| {
        edit_config(d, |c| {
            c.insert(
                "architectures".into(),
                serde_json::json!(["MistralForCausalLM"]),
            );
        })
    });
    refused(
        &d,
        "config.json",
        &["'architectures'", "MistralForCausalLM"],
    );
    let d = broken(tied, "rope", |d| {
        edit_config(d, |c| {
            c.insert(
                "rope_scaling".into(),
                serde_json::json!({"type": "linear", "factor": 2.0}),
            );
        })
    });
    refused(&d, "config.json", &["'rope_scaling'"]);
    let d = broken(tied, "bias", |d| {
        edit_config(d, |c| {
            drop(c.insert("attention_bias".into(), Value::Bool(true)))
        });
    });
    refused(&d, "config.json", &["'attention_bias'", "biases"]);
    let d = broken(tied, "window", |d| {
        edit_config(d, |c| {
            drop(c.insert("sliding_window".into(), serde_json::json!(4096)))
        });
    });
    refused(&d, "config.json", &["'sliding_window'"]);
    let d = broken(tied, "nostate", |d| {
        std::fs::remove_file(d.join("model.safetensors")).unwrap()
    });
    refused(&d, "model.safetensors", &["missing"]);
    // A shard of a sharded model is gone.
    let sharded = MODELS[1];
    let d = broken(sharded, "shard", |d| {
        std::fs::remove_file(d.join("model-00003-of-00006.safetensors")).unwrap()
    });
    refused(&d, "model-00003-of-00006.safetensors", &["missing"]);
    // config.json says another shape than the tensors have.
    let d = broken(tied, "shape", |d| {
        edit_config(d, |c| {
            drop(c.insert("intermediate_size".into(), serde_json::json!(128)))
        });
    });
    refused(&d, "model.safetensors", &["mlp.", "shape", "[128, 64]"]);
    // A tensor of a type that is not a float.
    let d = broken(sharded, "dtype", |d| {
        let bytes = safetensors::serialize(
            [(
                "model.norm.weight",
                safetensors::tensor::TensorView::new(
                    safetensors::Dtype::I32,
                    vec![48],
                    &[0u8; 192],
                )
                .unwrap(),
            )],
            None,
        )
        .unwrap();
        let index = json(&d.join("model.safetensors.index.json"));
        let file = index["weight_map"]["model.norm.weight"]
            .as_str()
            .unwrap()
            .to_owned();
        std::fs::write(d.join(&file), bytes).unwrap();
    });
    refused(&d, "safetensors", &["'model.norm.weight'", "I32"]);
    // A bias the model cannot hold.
    let d = broken(tied, "extra", |d| {
        let ck = hif8lab_train::models::checkpoint::Checkpoint::load(&d.join("model.safetensors"))
            .unwrap();
        let mut tensors = ck.tensors.clone();
        tensors.push(hif8lab_train::models::checkpoint::NamedTensor {
            name: "model.layers.0.self_attn.q_proj.bias".into(),
            shape: vec![64],
            data: vec![0.0; 64],
        });
        let ck = hif8lab_train::models::checkpoint::Checkpoint {
            tensors,
            metadata: Default::default(),
        };
        std::fs::write(d.join("model.safetensors"), ck.to_bytes()).unwrap();
    });
    refused(&d, "model.safetensors", &["q_proj.bias", "not supported"]);
}

/// A Mistral without a sliding window reads as a Llama; with one (or with the key absent:
/// transformers' Mistral default is 4096) it is refused. Llama-3 rope scaling reads the same
/// from `rope_parameters` and the older `rope_scaling` / `type` spelling, and other kinds of
/// scaling are refused naming the field.
#[test]
fn mistral_and_llama3_rope_configs_read_as_transformers_reads_them() {
    let mistral = fixtures().join("tiny-mistral-f32");
    let m = hf::load(&mistral).unwrap();
    assert_eq!(m.config.model.rope_scaling, None);
    let text = std::fs::read_to_string(mistral.join("config.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["sliding_window"] = serde_json::json!(4096);
    let e = hf::parse_config(Path::new("c.json"), &v.to_string()).unwrap_err();
    assert!(e.message.contains("sliding_window"), "{e}");
    v.as_object_mut().unwrap().remove("sliding_window");
    assert!(hf::parse_config(Path::new("c.json"), &v.to_string()).is_err());

    let dir = fixtures().join("tiny-llama3-rope-f32");
    let m = hf::load(&dir).unwrap();
    let r = m.config.model.rope_scaling.expect("llama3 scaling");
    assert_eq!((r.factor, r.original_max_positions), (8.0, 16));
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    let mut old = v["rope_parameters"].clone();
    old.as_object_mut().unwrap().remove("rope_type");
    old["type"] = serde_json::json!("llama3");
    v.as_object_mut().unwrap().remove("rope_parameters");
    v["rope_theta"] = serde_json::json!(10000.0);
    v["rope_scaling"] = old;
    let again = hf::parse_config(Path::new("c.json"), &v.to_string()).unwrap();
    assert_eq!(again.model, m.config.model);
    v["rope_scaling"]["type"] = serde_json::json!("yarn");
    let e = hf::parse_config(Path::new("c.json"), &v.to_string()).unwrap_err();
    assert!(
        e.message.contains("'rope_scaling'") && e.message.contains("yarn"),
        "{e}"
    );
    // The exported config states the scaling again, as transformers reads it.
    let out = hf::config_json(&m.config.model, None, ExportDtype::F32);
    assert_eq!(out["rope_parameters"]["rope_type"], "llama3");
    let back = hf::parse_config(Path::new("c.json"), &out.to_string()).unwrap();
    assert_eq!(back.model.rope_scaling, m.config.model.rope_scaling);
}

/// Ambiguous folders are read as transformers reads them, with a note: a tied config whose
/// stored lm_head differs from the embedding gets that head untied; a single
/// model.safetensors beside an index wins over the shards.
#[test]
fn ambiguous_folders_are_read_as_transformers_reads_them() {
    let d = broken(MODELS[0], "tiedhead", |d| {
        let ck = hif8lab_train::models::checkpoint::Checkpoint::load(&d.join("model.safetensors"))
            .unwrap();
        let embed = ck.get("model.embed_tokens.weight").unwrap();
        let head: Vec<f32> = embed.data.iter().map(|v| -v).collect();
        let mut views = Vec::new();
        let mut bytes = Vec::new();
        for t in &ck.tensors {
            bytes.push(
                t.data
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>(),
            );
        }
        bytes.push(head.iter().flat_map(|v| v.to_le_bytes()).collect());
        for (t, b) in ck.tensors.iter().zip(&bytes) {
            views.push((
                t.name.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, t.shape.clone(), b)
                    .unwrap(),
            ));
        }
        views.push((
            "lm_head.weight".into(),
            safetensors::tensor::TensorView::new(
                safetensors::Dtype::F32,
                embed.shape.clone(),
                bytes.last().unwrap(),
            )
            .unwrap(),
        ));
        std::fs::write(
            d.join("model.safetensors"),
            safetensors::serialize(views, None).unwrap(),
        )
        .unwrap();
    });
    let m = hf::load(&d).unwrap();
    assert!(
        !m.config.model.tie_embeddings,
        "a different stored head is untied"
    );
    let head = m.weights.get("lm_head.weight").unwrap();
    let embed = m.weights.get("model.embed_tokens.weight").unwrap();
    assert_eq!(head.data[3], -embed.data[3]);
    assert!(
        m.notes
            .iter()
            .any(|n| n.contains("lm_head.weight") && n.contains("transformers"))
    );
    let _ = std::fs::remove_dir_all(&d);

    let d = broken(MODELS[1], "single", |d| {
        let m = hf::load(d).unwrap();
        let views: Vec<(String, Vec<u8>, Vec<usize>)> = m
            .weights
            .tensors
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    t.data.iter().flat_map(|_| 1.0f32.to_le_bytes()).collect(),
                    t.shape.clone(),
                )
            })
            .collect();
        let st: Vec<_> = views
            .iter()
            .map(|(n, b, s)| {
                (
                    n.as_str(),
                    safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b)
                        .unwrap(),
                )
            })
            .collect();
        std::fs::write(
            d.join("model.safetensors"),
            safetensors::serialize(st, None).unwrap(),
        )
        .unwrap();
    });
    let m = hf::load(&d).unwrap();
    assert!(
        m.weights
            .get("model.norm.weight")
            .unwrap()
            .data
            .iter()
            .all(|v| *v == 1.0)
    );
    assert!(
        m.notes
            .iter()
            .any(|n| n.contains("index") && n.contains("transformers"))
    );
    let _ = std::fs::remove_dir_all(&d);
}
