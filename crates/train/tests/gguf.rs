//! GGUF files against the `gguf` Python package and `transformers`' GGUF loader (fixtures
//! written by `tests/fixtures/gen_gguf_fixtures.py`): dequantization of every ggml type bit
//! for bit, the converted model's weights, config, tokenizer ids, logits and loss, the
//! written Hugging Face folder read back, and damaged files refused without a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

mod common;

use std::path::{Path, PathBuf};

use common::gpu;
use hif8lab_engine::Backend;
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_train::infer::Model;
use hif8lab_train::models::gguf::{self, GgufFile, dequant};
use hif8lab_train::models::hf::{self, ExportDtype};
use hif8lab_train::models::tokenizer::Tokenizer;
use serde_json::Value;

const MODELS: [&str; 2] = ["tiny-llama", "tiny-llama-bos"];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf")
}

fn reference(name: &str) -> Value {
    let p = fixtures().join(format!("{name}.reference.json"));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn every_type_dequantizes_as_the_gguf_package_does_bit_for_bit() {
    let bytes = std::fs::read(fixtures().join("dequant.gguf")).unwrap();
    let g = GgufFile::parse(&bytes).unwrap();
    let mut seen = Vec::new();
    for t in g.tensors.iter().filter(|t| !t.name.ends_with(".expected")) {
        let want = g.tensor(&format!("{}.expected", t.name)).unwrap();
        assert_eq!(want.ggml_type, dequant::GgmlType::F32);
        let got = gguf::convert::tensor_f32(&bytes, t);
        let expected = gguf::convert::tensor_f32(&bytes, want);
        assert_eq!(got.len(), 1024, "{}", t.name);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&expected), "{}: not bit-identical", t.name);
        assert_eq!(t.ggml_type.name(), t.name);
        seen.push(t.name.clone());
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            "BF16", "F16", "F32", "Q4_0", "Q4_1", "Q4_K", "Q5_0", "Q5_1", "Q5_K", "Q6_K", "Q8_0"
        ]
    );
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-30)
}

#[test]
fn converted_weights_and_config_equal_transformers() {
    for name in MODELS {
        let r = reference(name);
        let c = gguf::read(&fixtures().join(format!("{name}.gguf"))).unwrap();
        let cfg = &r["config"];
        assert_eq!(c.model.vocab as u64, cfg["vocab_size"].as_u64().unwrap());
        assert_eq!(c.model.d_model as u64, cfg["hidden_size"].as_u64().unwrap());
        assert_eq!(
            c.model.layers as u64,
            cfg["num_hidden_layers"].as_u64().unwrap()
        );
        assert_eq!(
            c.model.kv_heads as u64,
            cfg["num_key_value_heads"].as_u64().unwrap()
        );
        assert_eq!(
            c.model.d_ff as u64,
            cfg["intermediate_size"].as_u64().unwrap()
        );
        assert_eq!(
            c.model.tie_embeddings,
            cfg["tie_word_embeddings"].as_bool().unwrap()
        );
        assert_eq!(
            c.model.norm_eps,
            cfg["rms_norm_eps"].as_f64().unwrap() as f32
        );
        let weights = r["weights"].as_object().unwrap();
        let mut compared = 0;
        for (tname, w) in weights {
            if c.model.tie_embeddings && tname == "lm_head.weight" {
                continue; // transformers' tied head is the embedding
            }
            let t = c
                .weights
                .get(tname)
                .unwrap_or_else(|| panic!("{name}: {tname}"));
            let shape: Vec<usize> = serde_json::from_value(w["shape"].clone()).unwrap();
            assert_eq!(t.shape, shape, "{name}: {tname}");
            let sum: f64 = t.data.iter().map(|v| f64::from(*v)).sum();
            let sumsq: f64 = t.data.iter().map(|v| f64::from(*v).powi(2)).sum();
            assert!(
                close(sumsq, w["sumsq"].as_f64().unwrap(), 1e-9),
                "{name}: {tname} Σx²"
            );
            assert!(
                (sum - w["sum"].as_f64().unwrap()).abs()
                    <= 1e-9 * sumsq.sqrt() * (t.data.len() as f64).sqrt(),
                "{name}: {tname} Σx"
            );
            for s in w["samples"].as_array().unwrap() {
                let (i, v) = (s[0].as_u64().unwrap() as usize, s[1].as_f64().unwrap());
                // (serde_json's float parsing is not correctly rounded in the last f64 bit;
                // every value is an f32, compared as one.)
                assert_eq!(
                    t.data[i], v as f32,
                    "{name}: {tname}[{i}] (Q/K rows unpermuted?)"
                );
            }
            compared += 1;
        }
        assert_eq!(
            compared,
            c.weights.tensors.len(),
            "{name}: every tensor compared"
        );
    }
}

#[test]
fn the_tokenizer_encodes_as_transformers_gguf_conversion() {
    for name in MODELS {
        let r = reference(name);
        let c = gguf::read(&fixtures().join(format!("{name}.gguf"))).unwrap();
        let t = Tokenizer::from_json(name, &c.tokenizer_json.to_string()).unwrap();
        for (text, want) in r["texts"]
            .as_array()
            .unwrap()
            .iter()
            .zip(r["encodings"].as_array().unwrap())
        {
            let want: Vec<u32> = serde_json::from_value(want.clone()).unwrap();
            let got = t.encode_with(text.as_str().unwrap(), true).unwrap();
            assert_eq!(got, want, "{name}: {text}");
        }
        let bos = name.ends_with("bos");
        assert_eq!(c.tokenizer_config["add_bos_token"], bos, "{name}");
        assert_eq!(c.tokenizer_config["bos_token"], "<|im_start|>");
        assert!(
            c.tokenizer_config["chat_template"]
                .as_str()
                .unwrap()
                .contains("im_start")
        );
        assert_eq!(c.generation_config["eos_token_id"], 2);
        // Without special tokens the BOS is not added.
        assert_ne!(t.encode_with("The", false).unwrap().first(), Some(&1));
    }
}

fn logits_error<B: Backend>(b: B, name: &str) -> f64 {
    let r = reference(name);
    let m =
        hif8lab_train::models::source::load_any(&fixtures().join(format!("{name}.gguf"))).unwrap();
    let ids: Vec<u32> = serde_json::from_value(r["input_ids"].clone()).unwrap();
    let want: Vec<f64> = serde_json::from_value(r["logits"].clone()).unwrap();
    let mut model = Model::new(b, m.config.model.clone(), &m.weights, 1).unwrap();
    let got = model.logits(&ids).unwrap();
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (f64::from(*g) - w).abs() / scale)
        .fold(0.0, f64::max);
    let loss = model.eval(&ids).unwrap().loss();
    let want_loss = r["loss"].as_f64().unwrap();
    assert!(
        close(loss, want_loss, 1e-4),
        "{name}: loss {loss} vs {want_loss}"
    );
    worst
}

#[test]
fn logits_and_loss_match_transformers_on_both_backends() {
    for name in MODELS {
        let w = logits_error(CpuBackend::new(), name);
        println!("cpu {name}: max |Δlogit| / max |logit| = {w:.2e}");
        assert!(w < 1e-5, "{name}: {w}");
        let Some(g) = gpu() else { continue };
        let w = logits_error(g, name);
        println!("gpu {name}: max |Δlogit| / max |logit| = {w:.2e}");
        assert!(w < 1e-4, "{name}: {w}");
    }
}

#[test]
fn an_imported_folder_reads_back_the_same_model() {
    let c = gguf::read(&fixtures().join("tiny-llama-bos.gguf")).unwrap();
    let dir = std::env::temp_dir().join(format!("hif8lab-gguf-import-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let parts = c.export_parts(ExportDtype::F32, &c.tokenizer_json.to_string());
    let weights = c.weight_list();
    hf::write_folder(&dir, &parts, &weights).unwrap();
    let back = hf::load(&dir).unwrap();
    assert_eq!(back.config.model, c.model);
    assert_eq!(back.weights.tensors, c.weights.tensors);
    assert_eq!(back.tokenizer_config.as_ref(), Some(&c.tokenizer_config));
    assert_eq!(back.generation_config.as_ref(), Some(&c.generation_config));
    assert_eq!(back.config.json["bos_token_id"], 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cached_generation_equals_recomputing_every_window() {
    // Greedy tokens from the key/value cache equal the argmax of a full forward pass over
    // the whole sequence at each step (CPU and GPU).
    let m = hif8lab_train::models::source::load_any(&fixtures().join("tiny-llama.gguf")).unwrap();
    let mut cfg = m.config.model.clone();
    cfg.context = 24;
    let prompt = [87u32, 260, 272, 274, 275];
    let check = |mut model: Model<_>| {
        let got = model.sample(&prompt, 16, 0.0, 0, 0, &mut |_| true).unwrap();
        let mut ids = prompt.to_vec();
        for (k, t) in got.iter().enumerate() {
            let logits = model.logits(&ids).unwrap();
            let last = &logits[logits.len() - cfg.vocab..];
            let best = (0..cfg.vocab)
                .max_by(|a, b| last[*a].total_cmp(&last[*b]).then(b.cmp(a)))
                .unwrap() as u32;
            assert_eq!(*t, best, "token {k}");
            ids.push(*t);
        }
    };
    check(Model::new(CpuBackend::new(), cfg.clone(), &m.weights, 1).unwrap());
    if let Some(g) = gpu() {
        let mut model = Model::new(g, cfg.clone(), &m.weights, 1).unwrap();
        let got = model.sample(&prompt, 16, 0.0, 0, 0, &mut |_| true).unwrap();
        let mut cpu = Model::new(CpuBackend::new(), cfg.clone(), &m.weights, 1).unwrap();
        assert_eq!(
            got,
            cpu.sample(&prompt, 16, 0.0, 0, 0, &mut |_| true).unwrap()
        );
    }
}

#[test]
fn damaged_files_are_errors_never_panics() {
    let good = std::fs::read(fixtures().join("tiny-llama.gguf")).unwrap();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut refused = 0;
    // Truncations at many lengths, including inside the header and the metadata.
    for cut in (0..4096).chain((4096..good.len()).step_by(9973)) {
        if GgufFile::parse(&good[..cut]).is_err() {
            refused += 1;
        }
    }
    assert!(refused > 4000, "truncated files are refused");
    // Random byte flips in the header and metadata: parse and convert return, never panic.
    let header_end = 40_000.min(good.len());
    for _ in 0..400 {
        let mut bad = good.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() as usize) % header_end;
            bad[at] = next() as u8;
        }
        if let Ok(g) = GgufFile::parse(&bad) {
            let _ = gguf::convert::convert(&g, &bad);
        }
    }
    // Named refusals.
    let e = GgufFile::parse(b"GGUF\x01\0\0\0").unwrap_err();
    assert!(e.at == "header" && e.message.contains("version 1"), "{e:?}");
    let e = GgufFile::parse(b"PK\x03\x04rest").unwrap_err();
    assert!(
        e.at.is_empty() && e.message.contains("not a GGUF file"),
        "{e:?}"
    );
    let mut huge = b"GGUF\x03\0\0\0".to_vec();
    huge.extend(u64::MAX.to_le_bytes());
    huge.extend(1u64.to_le_bytes());
    let e = GgufFile::parse(&huge).unwrap_err();
    assert!(
        e.at == "header" && e.message.contains("do not fit"),
        "{e:?}"
    );
    // A field's error names the field apart from what is wrong with it.
    let mut short = b"GGUF\x03\0\0\0".to_vec();
    short.extend(0u64.to_le_bytes());
    let e = GgufFile::parse(&short).unwrap_err();
    assert_eq!(e.at, "header: metadata_kv_count", "{e:?}");
    assert!(
        e.to_string()
            .starts_with("header: metadata_kv_count: the file ends"),
        "{e}"
    );
}

/// The tiny fixture written again with `edit` applied to its metadata and tensors, then
/// parsed and converted: the error of whichever step refuses it.
fn convert_edited(
    edit: impl FnOnce(&mut Vec<(String, gguf::file::MetaValue)>, &mut Vec<gguf::write::RawTensor>),
) -> Result<gguf::Converted, String> {
    let bytes = std::fs::read(fixtures().join("tiny-llama-bos.gguf")).unwrap();
    let g = GgufFile::parse(&bytes).unwrap();
    let edited = gguf::write::rewrite(&g, &bytes, edit);
    let parsed = GgufFile::parse(&edited).map_err(|e| e.to_string())?;
    gguf::convert::convert(&parsed, &edited).map_err(|e| e.to_string())
}

fn set_meta(meta: &mut [(String, gguf::file::MetaValue)], key: &str, value: gguf::file::MetaValue) {
    meta.iter_mut().find(|(k, _)| k == key).unwrap().1 = value;
}

#[test]
fn the_writer_round_trips_the_fixture() {
    let c = convert_edited(|_, _| {}).unwrap();
    let bytes = std::fs::read(fixtures().join("tiny-llama-bos.gguf")).unwrap();
    let orig = gguf::convert::convert(&GgufFile::parse(&bytes).unwrap(), &bytes).unwrap();
    assert_eq!(c.weights, orig.weights);
    assert_eq!(c.tokenizer_json, orig.tokenizer_json);
    assert_eq!(c.model, orig.model);
}

#[test]
fn metadata_counts_are_checked_against_the_tensors_before_anything_is_sized_by_them() {
    use gguf::file::MetaValue::{Float, Uint};
    // 2^31 blocks in a file of 2: refused at once (the layer list was built first).
    let e = convert_edited(|m, _| set_meta(m, "llama.block_count", Uint(1 << 31))).unwrap_err();
    assert!(
        e.contains("'llama.block_count' is 2147483648") && e.contains("2 blocks"),
        "{e}"
    );
    let e = convert_edited(|m, _| set_meta(m, "llama.block_count", Uint(3))).unwrap_err();
    assert!(e.contains("'llama.block_count' is 3"), "{e}");
    // Sizes that disagree with the tensors are refused naming a key or a tensor.
    for (key, value) in [
        ("llama.embedding_length", Uint(1 << 30)),
        ("llama.feed_forward_length", Uint(1 << 31)),
        ("llama.vocab_size", Uint(1 << 31)),
        ("llama.attention.head_count", Uint(1 << 31)),
        ("llama.attention.head_count_kv", Uint(1)),
    ] {
        let e = convert_edited(|m, _| {
            if let Some(slot) = m.iter_mut().find(|(k, _)| k == key) {
                slot.1 = value.clone();
            } else {
                m.push((key.into(), value.clone()));
            }
        })
        .unwrap_err();
        assert!(
            e.contains("tensor '") || e.contains(key.trim_start_matches("llama.")),
            "{key}: {e}"
        );
    }
    // An epsilon f32 cannot hold (1e39 would be inf, 1e-60 zero) is refused, not written
    // as null or 0.0.
    for eps in [1e39, 1e-60, 2.0] {
        let e = convert_edited(|m, _| {
            set_meta(m, "llama.attention.layer_norm_rms_epsilon", Float(eps))
        })
        .unwrap_err();
        assert!(
            e.contains("layer_norm_rms_epsilon") && e.contains("f32"),
            "{eps}: {e}"
        );
    }
}

#[test]
fn one_weight_twice_overlapping_bytes_and_bad_token_strings_are_refused_by_name() {
    use gguf::file::MetaValue::{Array, Str};
    // blk.00.* beside blk.0.*: the second spelling is refused (it silently won before).
    let e = convert_edited(|_, t| {
        let mut extra = t
            .iter()
            .find(|t| t.name == "blk.0.ffn_up.weight")
            .unwrap()
            .clone();
        extra.name = "blk.00.ffn_up.weight".into();
        t.push(extra);
    })
    .unwrap_err();
    assert!(
        e.contains("blk.00.ffn_up.weight") && e.contains("'00'"),
        "{e}"
    );
    // Two tensors over the same bytes: refused naming both.
    let bytes = std::fs::read(fixtures().join("tiny-llama-bos.gguf")).unwrap();
    let g = GgufFile::parse(&bytes).unwrap();
    let mut overlapping = gguf::write::rewrite(&g, &bytes, |_, _| {});
    let parsed = GgufFile::parse(&overlapping).unwrap();
    let (a, b) = (&parsed.tensors[0], &parsed.tensors[1]);
    // The second tensor's offset field (the last 8 bytes of its description) set to the
    // first's offset: find its description by its name.
    let mut named = (b.name.len() as u64).to_le_bytes().to_vec();
    named.extend(b.name.as_bytes());
    let name_at = overlapping
        .windows(named.len())
        .position(|w| w == named.as_slice())
        .unwrap();
    let offset_at = name_at + named.len() + 4 + 8 * b.dims.len() + 4;
    // The first tensor lies at offset 0 of the data section; the second is moved there.
    overlapping[offset_at..offset_at + 8].copy_from_slice(&0u64.to_le_bytes());
    let e = GgufFile::parse(&overlapping).unwrap_err().to_string();
    assert!(
        e.contains("overlaps") && e.contains(&a.name) && e.contains(&b.name),
        "{e}"
    );
    // A token that is not UTF-8: refused naming its id (it was replaced by U+FFFD).
    let mut marked = gguf::write::rewrite(&g, &bytes, |m, _| {
        let (_, tokens) = m
            .iter_mut()
            .find(|(k, _)| k == "tokenizer.ggml.tokens")
            .unwrap();
        let Array(list) = tokens else { panic!() };
        list[5] = Str("@@NOTUTF8@@".into());
    });
    let at = marked
        .windows(11)
        .position(|w| w == b"@@NOTUTF8@@")
        .unwrap();
    marked[at + 2] = 0xff;
    let e = GgufFile::parse(&marked).unwrap_err().to_string();
    assert!(
        e.contains("'tokenizer.ggml.tokens'[5]") && e.contains("UTF-8"),
        "{e}"
    );
    // An empty token list, a merge naming a token the vocabulary lacks.
    let e =
        convert_edited(|m, _| set_meta(m, "tokenizer.ggml.tokens", Array(Vec::new()))).unwrap_err();
    assert!(
        e.contains("'tokenizer.ggml.tokens' is an empty list"),
        "{e}"
    );
    let e = convert_edited(|m, _| {
        let (_, merges) = m
            .iter_mut()
            .find(|(k, _)| k == "tokenizer.ggml.merges")
            .unwrap();
        let Array(list) = merges else { panic!() };
        list[0] = Str("zzqx qqzx".into());
    })
    .unwrap_err();
    assert!(
        e.contains("'tokenizer.ggml.merges'[0]") && e.contains("'zzqx'"),
        "{e}"
    );
    // An alignment beyond the limit says the limit.
    let e = convert_edited(|m, _| {
        m.push((
            "general.alignment".into(),
            gguf::file::MetaValue::Uint(1 << 30),
        ))
    })
    .unwrap_err();
    assert!(e.contains("1073741824") && e.contains("1048576"), "{e}");
}
