//! `train --init-from`, `export hf`, `eval` and `sample` end to end on the Hugging Face
//! fixtures (written by `transformers`, see tests/fixtures/gen_hf_fixtures.py).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{hif8lab, ok};
use hif8lab_train::models::checkpoint::Checkpoint;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hf")
        .join(name)
}

fn tmp(name: &str) -> PathBuf {
    crate::common::tmp("cli-hf", name)
}

fn fails(o: &Output, words: &[&str]) {
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "succeeded: {e}");
    for w in words {
        assert!(e.contains(w), "says {w}: {e}");
    }
}

fn json(path: &Path) -> Value {
    crate::common::json_file(path)
}

fn s(p: &Path) -> &str {
    crate::common::arg(p)
}

/// The model tensors of a checkpoint (or an exported folder), by name.
fn model_tensors(ck: &Checkpoint) -> Vec<(String, Vec<u32>)> {
    let mut v: Vec<(String, Vec<u32>)> = ck
        .tensors
        .iter()
        .filter(|t| !t.name.starts_with("optimizer.") && !t.name.starts_with("quantizers."))
        .map(|t| (t.name.clone(), t.data.iter().map(|x| x.to_bits()).collect()))
        .collect();
    v.sort();
    v
}

/// `train --init-from DIR --preset smoke --backend cpu --quiet --out OUT` plus `extra`.
fn train_from(dir: &str, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["--init-from", dir];
    args.extend(extra);
    crate::common::train_command(out, &args).output().unwrap()
}

fn eval_json(model: &Path, text: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "eval",
        s(model),
        "--text",
        s(text),
        "--backend",
        "cpu",
        "--json",
    ];
    args.extend(extra);
    serde_json::from_str(&ok(&hif8lab(&args))).unwrap()
}

#[test]
fn init_from_export_and_back_is_bit_identical_and_eval_agrees() {
    let src = fixture("tiny-gqa-tied-bf16");
    let text = src.join("eval.txt");
    let run = tmp("run");
    ok(&train_from(
        s(&src),
        &run,
        &[
            "--set",
            "train.steps=4",
            "--set",
            "qat.enabled=true",
            "--set",
            "qat.warmup_steps=1",
            "--set",
            "qat.blocks=[0,1]",
        ],
    ));
    // The run records where it started, and keeps the model's config and tokenizer.
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(
        config.contains("init_from = ") && config.contains("tie_embeddings = true"),
        "{config}"
    );
    assert_eq!(
        std::fs::read(run.join("hf/tokenizer.json")).unwrap(),
        std::fs::read(src.join("tokenizer.json")).unwrap()
    );
    // Training moved the weights away from the folder's.
    let start = Checkpoint::load(&src.join("model.safetensors")).unwrap();
    let after = Checkpoint::load(&run.join("checkpoints/step_4.safetensors")).unwrap();
    assert!(
        after.get("lm_head.weight").is_none(),
        "tied: no separate head"
    );
    assert_ne!(model_tensors(&start), model_tensors(&after));

    // By default an export keeps the source's dtype (bf16 here); f32 asked for is exact.
    let default_dtype = tmp("export-default");
    ok(&hif8lab(&[
        "export",
        "hf",
        s(&run),
        "--out",
        s(&default_dtype),
    ]));
    assert_eq!(
        json(&default_dtype.join("config.json"))["dtype"],
        "bfloat16"
    );
    std::fs::remove_dir_all(&default_dtype).unwrap();
    let out = tmp("export");
    ok(&hif8lab(&[
        "export",
        "hf",
        s(&run),
        "--out",
        s(&out),
        "--dtype",
        "f32",
    ]));
    for f in [
        "config.json",
        "model.safetensors",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    // config.json: every field transformers wrote for the folder, the same (dtype: float32).
    let theirs = json(&src.join("config.json"));
    let ours = json(&out.join("config.json"));
    for (k, v) in theirs.as_object().unwrap() {
        if k != "dtype" {
            assert_eq!(ours.get(k), Some(v), "config.json field '{k}'");
        }
    }
    assert_eq!(ours["dtype"], "float32");
    assert_eq!(
        std::fs::read(out.join("tokenizer.json")).unwrap(),
        std::fs::read(src.join("tokenizer.json")).unwrap()
    );
    let exported = Checkpoint::load(&out.join("model.safetensors")).unwrap();
    assert_eq!(
        model_tensors(&exported),
        model_tensors(&after),
        "export is exact"
    );

    // Back in: a run from the export with lr 0 keeps the weights bit for bit.
    let back = tmp("back");
    ok(&train_from(
        s(&out),
        &back,
        &["--set", "train.steps=1", "--set", "train.lr=0"],
    ));
    let again = Checkpoint::load(&back.join("checkpoints/step_1.safetensors")).unwrap();
    assert_eq!(
        model_tensors(&again),
        model_tensors(&after),
        "round trip is bit-identical"
    );

    // eval: the run folder and its export give the same numbers; the fields are the contract.
    let a = eval_json(&run, &text, &[]);
    let b = eval_json(&out, &text, &[]);
    for k in ["tokens", "loss", "perplexity", "bits_per_byte", "backend"] {
        assert!(a.get(k).is_some(), "{k}");
    }
    assert_eq!(a["loss"], b["loss"]);
    assert_eq!(a["tokens"], 185);
    // A checkpoint file of the run is a model too.
    let c = eval_json(&run.join("checkpoints/step_4.safetensors"), &text, &[]);
    assert_eq!(a["loss"], c["loss"]);
    let loss = a["loss"].as_f64().unwrap();
    assert!((a["perplexity"].as_f64().unwrap() - loss.exp()).abs() < 1e-9);
    // Quantized: the run's fake quantization with its saved state; a different loss.
    let q = eval_json(&run, &text, &["--quantized"]);
    assert_eq!(q["quantized"], true);
    let ql = q["loss"].as_f64().unwrap();
    assert!(ql.is_finite() && ql != loss, "{ql} vs {loss}");
    fails(
        &hif8lab(&[
            "eval",
            s(&out),
            "--text",
            s(&text),
            "--backend",
            "cpu",
            "--quantized",
        ]),
        &["--quantized", "quantizer state"],
    );

    // sample: seeded and reproducible; another seed, another text.
    let sample = |seed: &str| {
        ok(&hif8lab(&[
            "sample",
            s(&out),
            "--prompt",
            "The river",
            "--tokens",
            "24",
            "--seed",
            seed,
            "--temperature",
            "1",
            "--top-k",
            "0",
            "--backend",
            "cpu",
        ]))
    };
    let (x, y, z) = (sample("3"), sample("3"), sample("4"));
    assert_eq!(x, y);
    assert_ne!(x, z);
    assert!(x.starts_with("The river"));

    // Exporting over a folder that holds something is refused; nothing is changed.
    fails(
        &hif8lab(&["export", "hf", s(&run), "--out", s(&out)]),
        &["not an empty folder"],
    );
    assert_eq!(
        model_tensors(&Checkpoint::load(&out.join("model.safetensors")).unwrap()),
        model_tensors(&after)
    );
    fails(
        &hif8lab(&[
            "export",
            "hf",
            s(&run),
            "--step",
            "99",
            "--out",
            s(&tmp("x99")),
        ]),
        &["--step 99", "step_99.safetensors", "4"],
    );
    for d in [run, out, back] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn byte_level_runs_export_the_byte_tokenizer_and_sharded_models_train() {
    let run = tmp("bytes");
    ok(
        &crate::common::train_command(&run, &["--set", "train.steps=2"])
            .output()
            .unwrap(),
    );
    let out = tmp("bytes-export");
    ok(&hif8lab(&[
        "export",
        "hf",
        s(&run),
        "--out",
        s(&out),
        "--dtype",
        "bf16",
    ]));
    let tokenizer = std::fs::read_to_string(out.join("tokenizer.json")).unwrap();
    assert!(hif8lab_train::models::tokenizer::is_byte_tokenizer(
        &tokenizer
    ));
    let theirs = json(&fixture("byte-tokenizer/tokenizer.json"));
    assert_eq!(serde_json::from_str::<Value>(&tokenizer).unwrap(), theirs);
    let config = json(&out.join("config.json"));
    let smoke = json(&fixture("smoke-config/config.json"));
    for (k, v) in smoke.as_object().unwrap() {
        if !matches!(
            k.as_str(),
            "transformers_version" | "bos_token_id" | "eos_token_id" | "dtype"
        ) {
            assert_eq!(config.get(k), Some(v), "config.json field '{k}'");
        }
    }
    assert_eq!(config["dtype"], "bfloat16");
    // bf16 and f16 exports hold each weight rounded to nearest even, nothing else.
    let f16 = tmp("bytes-export-f16");
    ok(&hif8lab(&[
        "export",
        "hf",
        s(&run),
        "--out",
        s(&f16),
        "--dtype",
        "f16",
    ]));
    let ck = Checkpoint::load(&run.join("checkpoints/step_2.safetensors")).unwrap();
    for (dir, round) in [
        (
            &out,
            (|v: f32| half::bf16::from_f32(v).to_f32()) as fn(f32) -> f32,
        ),
        (&f16, |v: f32| half::f16::from_f32(v).to_f32()),
    ] {
        let m = hif8lab_train::models::hf::load(dir).unwrap();
        for t in &m.weights.tensors {
            let want: Vec<u32> = ck
                .get(&t.name)
                .unwrap()
                .data
                .iter()
                .map(|v| round(*v).to_bits())
                .collect();
            let got: Vec<u32> = t.data.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{}", t.name);
        }
    }
    let _ = std::fs::remove_dir_all(f16);
    // A sharded, untied f32 model continues training with QAT on attention too.
    let sharded = tmp("sharded");
    ok(&train_from(
        s(&fixture("tiny-untied-f32-sharded")),
        &sharded,
        &[
            "--set",
            "train.steps=2",
            "--set",
            "qat.enabled=true",
            "--set",
            "qat.modules=[\"q\",\"k\",\"v\",\"o\",\"gate\",\"up\",\"down\"]",
        ],
    ));
    let summary = json(&sharded.join("summary.json"));
    assert_eq!(summary["steps"], 2);
    assert!(summary["final_loss"].as_f64().unwrap().is_finite());
    let config = std::fs::read_to_string(sharded.join("config.toml")).unwrap();
    assert!(
        config.contains("rope_theta = 500000.0") && config.contains("context = 24"),
        "{config}"
    );
    for d in [run, out, sharded] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn bad_models_and_texts_are_refused_by_name() {
    let missing = tmp("nothing-here");
    fails(
        &hif8lab(&["eval", s(&missing), "--text", "x.txt"]),
        &["nothing-here", "not a run folder"],
    );
    // A folder whose config.json lacks a field: exit code 2, the file and field named.
    let bad = tmp("bad-config");
    std::fs::create_dir_all(&bad).unwrap();
    let mut c = json(&fixture("tiny-gqa-tied-bf16/config.json"));
    c.as_object_mut().unwrap().remove("num_hidden_layers");
    std::fs::write(bad.join("config.json"), c.to_string()).unwrap();
    let o = hif8lab(&[
        "train",
        "--init-from",
        s(&bad),
        "--preset",
        "smoke",
        "--out",
        s(&tmp("never")),
    ]);
    fails(&o, &["config.json", "'num_hidden_layers'", "missing"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!tmp("never").exists(), "no run folder for a refused model");
    // A text that is not UTF-8.
    let text = bad.join("bad.txt");
    std::fs::write(&text, [b'a', b'b', 0xFF, b'c']).unwrap();
    fails(
        &hif8lab(&[
            "eval",
            s(&fixture("tiny-gqa-tied-bf16")),
            "--text",
            s(&text),
            "--backend",
            "cpu",
        ]),
        &["bad.txt", "not UTF-8", "byte 2"],
    );
    let _ = std::fs::remove_dir_all(bad);
}
