//! Fuzz-style tests of every parser a user can feed: run configs (TOML and `--set`),
//! safetensors checkpoints (and restoring them into a trainer), Hugging Face `config.json`
//! and `tokenizer.json`, GGUF files, JSONL traces, CSV amax
//! files, Transformer Engine / nvdlfw-inspect logs, corpus files, probe sets (`probe --set`),
//! a grid's data file (`grid --recompute`), training logs (`compare-logs`, `import log`: every
//! pattern) and lm-eval results files (`compare-evals`; 20,000 inputs, each a file on disk). Each gets structure-aware
//! mutations of valid inputs plus random bytes — at least 100,000 inputs per parser — and
//! must never panic: every input is accepted or refused with a message that names its
//! source. (The codec's stdin is fuzzed in the CLI crate, `codec.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::Path;
use std::time::Instant;

use hif8lab_engine::cpu::CpuBackend;
use hif8lab_scaling::import::{import_bytes, parse_csv, parse_te_log};
use hif8lab_scaling::trace::parse_trace;
use hif8lab_tests::{Mutator, fixtures_dir, fuzz};
use hif8lab_train::config::{PRESETS, RunConfig};
use hif8lab_train::models::checkpoint::Checkpoint;
use hif8lab_train::{Trainer, data};

/// Inputs per parser.
const INPUTS: usize = 100_000;

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(fixtures_dir().join(path)).unwrap()
}

fn report(name: &str, start: Instant, (ok, rejected): (usize, usize)) {
    println!(
        "fuzz {name}: {} inputs in {:.2} s ({ok} accepted, {rejected} refused with a message)",
        ok + rejected,
        start.elapsed().as_secs_f64()
    );
    assert_eq!(ok + rejected, INPUTS);
}

#[test]
fn fuzz_run_config_toml_and_set() {
    let seeds: Vec<Vec<u8>> = PRESETS.iter().map(|(_, t)| t.as_bytes().to_vec()).collect();
    let mut m = Mutator::new(
        1,
        &[
            "steps",
            "batch",
            "lr",
            "model",
            "[train]",
            "qat.scaling",
            "estimator",
            "max_window(64)",
            "1e6",
            "100000",
        ],
    );
    let start = Instant::now();
    let counts = fuzz("config", INPUTS, &mut m, &seeds, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        match RunConfig::parse("fuzz.toml", &text, &[]) {
            Ok(c) => {
                // An accepted config is one the trainer's checks accept too.
                c.validate()
                    .map_err(|e| format!("accepted but invalid: {e}"))?;
                Ok(())
            }
            Err(e) => {
                assert!(e.to_string().starts_with("fuzz.toml"), "{e}");
                Err(e.message)
            }
        }
    });
    report("config TOML", start, counts);

    let sets: Vec<Vec<u8>> = [
        "train.lr=1e-5",
        "qat.scaling.estimator=most_recent",
        "model.d_model=128",
        "qat.blocks=[1,2]",
        "qat.roles=[\"A\",\"W\"]",
        "train.steps=10",
        "data.corpus=kb",
        "qat.scaling.window=16",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let mut m = Mutator::new(
        2,
        &["=", ".", "train.", "model.", "qat.scaling.", "1e30", "-5"],
    );
    let start = Instant::now();
    let counts = fuzz("--set", INPUTS, &mut m, &sets, |bytes| {
        let set = String::from_utf8_lossy(bytes).into_owned();
        match RunConfig::parse("preset 'smoke'", PRESETS[0].1, &[set]) {
            Ok(_) => Ok(()),
            Err(e) => {
                assert!(!e.source_name.is_empty(), "{e}");
                Err(e.message)
            }
        }
    });
    report("--set", start, counts);
}

#[test]
fn fuzz_checkpoints_and_restore() {
    // A tiny run's real checkpoint (model, AdamW moments, quantizer state, metadata).
    let config = RunConfig::parse(
        "tiny",
        PRESETS[0].1,
        &[
            "model.vocab=128".into(),
            "model.d_model=8".into(),
            "model.layers=3".into(),
            "model.heads=2".into(),
            "model.kv_heads=1".into(),
            "model.d_ff=8".into(),
            "model.context=4".into(),
            "train.batch=1".into(),
            "train.steps=4".into(),
            "qat.warmup_steps=1".into(),
            "data.bytes=2000".into(),
        ],
    )
    .unwrap();
    let mut trainer = Trainer::from_config(CpuBackend::new(), config.clone()).unwrap();
    for _ in 0..3 {
        trainer.step().unwrap();
    }
    trainer.finish().unwrap();
    let seed = trainer.checkpoint().unwrap().to_bytes();
    assert!(seed.len() < 64 * 1024, "{}", seed.len());
    let mut m = Mutator::new(
        3,
        &[
            "F32",
            "F16",
            "shape",
            "data_offsets",
            "__metadata__",
            "step",
            "tensor_crc32",
        ],
    );
    let mut restored = 0usize;
    let start = Instant::now();
    let counts = fuzz("checkpoint", INPUTS, &mut m, &[seed], |bytes| {
        match Checkpoint::from_bytes("fuzz.safetensors", bytes) {
            Ok(ck) => {
                // What loads must restore or be refused with a message, never panic.
                match trainer.restore(&ck) {
                    Ok(()) => restored += 1,
                    Err(e) => assert!(!e.to_string().is_empty()),
                }
                Ok(())
            }
            Err(e) => {
                assert!(e.to_string().contains("fuzz.safetensors"), "{e}");
                Err(e.message)
            }
        }
    });
    report("checkpoint", start, counts);
    println!("  of which restored into a trainer: {restored}");
}

#[test]
fn fuzz_traces_csv_and_te_logs() {
    // A real trace: a tiny QAT run's records through the trace writer.
    let jsonl = trace_seed();
    let mut m = Mutator::new(
        4,
        &[
            "\"amax\":",
            "\"step\":",
            "\"hif8lab_trace\":1",
            "\"shadow\":{}",
            "\"role\":\"A\"",
            "1e39",
        ],
    );
    let start = Instant::now();
    let counts = fuzz("trace", INPUTS, &mut m, &[jsonl], |bytes| {
        parse_trace(Path::new("fuzz.jsonl"), bytes)
            .map(|_| ())
            .map_err(|e| named(e.to_string(), "fuzz.jsonl"))
    });
    report("trace JSONL", start, counts);

    let csv_seeds = vec![
        fixture("scaling/sample.csv"),
        fixture("scaling/bad_amax.csv"),
    ];
    let mut m = Mutator::new(5, &["step", "layer", "role", "amax", ",,", "\"\""]);
    let start = Instant::now();
    let counts = fuzz("csv", INPUTS, &mut m, &csv_seeds, |bytes| {
        parse_csv(Path::new("fuzz.csv"), bytes)
            .map(|_| ())
            .map_err(|e| named(e.to_string(), "fuzz.csv"))
    });
    report("CSV", start, counts);

    let te_seeds = vec![
        fixture("scaling/sample_te.log"),
        fixture("scaling/nvdlfw/max_min.log"),
    ];
    let mut m = Mutator::new(
        6,
        &[
            "iteration=",
            "value=",
            "_max",
            "_min",
            "_amax",
            "_cur_amax",
            "0.0000",
            "_activation",
        ],
    );
    let start = Instant::now();
    let counts = fuzz("te-log", INPUTS, &mut m, &te_seeds, |bytes| {
        parse_te_log(Path::new("fuzz.log"), bytes)
            .map(|_| ())
            .map_err(|e| named(e.to_string(), "fuzz.log"))
    });
    report("TE log", start, counts);

    // The importer's own choice of reader, over all three kinds.
    let mut all = csv_seeds.clone();
    all.extend(te_seeds);
    all.push(trace_seed());
    let mut m = Mutator::new(7, &["{", "step,layer,role,amax\n"]);
    let start = Instant::now();
    let counts = fuzz("import", INPUTS, &mut m, &all, |bytes| {
        import_bytes(Path::new("fuzz.any"), bytes)
            .map(|_| ())
            .map_err(|e| named(e.to_string(), "fuzz.any"))
    });
    report("import (any kind)", start, counts);
}

#[test]
fn fuzz_grid_configs() {
    let seeds: Vec<Vec<u8>> = hif8lab_lab::grid::GRID_PRESETS
        .iter()
        .map(|(_, t)| t.as_bytes().to_vec())
        .collect();
    let mut m = Mutator::new(
        12,
        &[
            "entities",
            "eval_every",
            "lr_high",
            "[continue]",
            "[pretrain]",
            "steps",
            "0",
            "1e9",
            "qat_warmup_steps",
        ],
    );
    let start = Instant::now();
    let counts = fuzz("grid config", INPUTS, &mut m, &seeds, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        match hif8lab_lab::grid::GridConfig::parse(&text, "grid.toml") {
            Ok(g) => {
                // Every run it makes is one the trainer's checks accept.
                for r in hif8lab_lab::grid::grid_runs() {
                    g.run_config(&r)
                        .validate()
                        .map_err(|e| format!("accepted but invalid: {e}"))?;
                }
                Ok(())
            }
            Err(e) => {
                assert!(e.to_string().starts_with("grid.toml"), "{e}");
                Err(e.message)
            }
        }
    });
    report("grid config", start, counts);
}

#[test]
fn fuzz_probe_records() {
    // A probes.jsonl line with per-item marks, as a run folder holds it.
    let line = r#"{"step":40,"knowledge_acc":0.5,"knowledge_acc_norm":0.5,"completion_acc":0.25,"completion_acc_norm":0.75,"heldout_loss":2.5,"knowledge_items":12,"completion_items":4,"intervals":{"knowledge_acc":[0.2,0.8],"knowledge_acc_norm":[0.2,0.8],"completion_acc":[0.0,0.7],"completion_acc_norm":[0.3,1.0],"heldout_loss":[2.4,2.6]},"marks":{"knowledge_acc":"a5f","knowledge_acc_norm":"0f0","completion_acc":"8","completion_acc_norm":"e","heldout":[2.4,2.6]}}"#;
    let mut m = Mutator::new(13, &["\"marks\"", "\"fff\"", "12", "-1", "1e300", "null"]);
    let start = Instant::now();
    let counts = fuzz(
        "probe record",
        INPUTS,
        &mut m,
        &[line.as_bytes().to_vec()],
        |bytes| {
            let p: hif8lab_train::ProbeScores =
                serde_json::from_slice(bytes).map_err(|e| format!("probes.jsonl: {e}"))?;
            // Whatever the record says, reading its items and comparing it never panics, and
            // item values come back only when the marks cover the items.
            for name in hif8lab_train::trainer::PROBE_SCORES {
                let g = p.groups(name);
                if let Some(v) = p.item_values(name)
                    && name != hif8lab_train::eval::ProbeScore::HeldoutLoss
                {
                    assert_eq!(v.len(), g.items());
                }
                let _ = p.interval(name);
            }
            if bytes.len() % 16 != 0 {
                return Ok(()); // the bootstrap below is slow: one record in 16 takes it
            }
            let run = hif8lab_lab::grid::RunSummary {
                probes: Some(p.clone()),
                ..Default::default()
            };
            let e = hif8lab_lab::grid::compare(
                &[std::slice::from_ref(&run), std::slice::from_ref(&run)],
                hif8lab_train::eval::ProbeScore::KnowledgeAccNorm,
                &|m| m[1] - m[0],
            );
            assert!(e.value == 0.0 || e.value.is_nan(), "{e:?}");
            Ok(())
        },
    );
    report("probe records", start, counts);
}

/// Probe sets (`hif8lab probe --set FILE`): the shipped general-knowledge set mutated.
#[test]
fn fuzz_probe_sets() {
    use hif8lab_train::eval::{GENERAL_KNOWLEDGE, items_from_tsv};
    let seed: Vec<u8> = GENERAL_KNOWLEDGE
        .lines()
        .take(12)
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes();
    let mut m = Mutator::new(19, &["\t", "\t\t", "#", "\r\n", "Paris"]);
    let start = Instant::now();
    let counts = fuzz("probe set", INPUTS, &mut m, &[seed], |bytes| {
        let text = std::str::from_utf8(bytes).map_err(|e| format!("probes.tsv: {e}"))?;
        let items = items_from_tsv("probes.tsv", text).map_err(|e| e.to_string())?;
        for i in &items {
            assert!(i.answer < i.choices.len() && i.choices.len() >= 4);
        }
        Ok(())
    });
    report("probe sets", start, counts);
}

/// A small grid's data, consistent with the grid's design: three complete runs of one data
/// order, scored on the base's items, the QAT runs shadowing the same two estimators.
fn grid_data_seed() -> hif8lab_lab::grid::GridData {
    use hif8lab_lab::grid::{GridData, GridDataRun, RunSummary};
    use hif8lab_train::run::RunStatus;
    let probes = |right: &str| hif8lab_train::ProbeScores {
        step: 4,
        knowledge_acc_norm: 0.5,
        knowledge_items: 12,
        completion_items: 4,
        marks: Some(hif8lab_train::trainer::ProbeMarks {
            knowledge_acc: right.into(),
            knowledge_acc_norm: right.into(),
            completion_acc: "8".into(),
            completion_acc_norm: "e".into(),
            heldout: vec![2.4, 2.6, 2.5, 2.7, 2.3],
            knowledge_group: vec![0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
            completion_group: vec![0, 0, 0, 1],
            knowledge_margin: vec![
                0.5, -0.25, 0.1, 0.0, 1.0, -1.0, 0.5, 0.5, 0.2, -0.1, 0.3, 0.7,
            ],
            completion_margin: vec![0.1, 0.2, -0.3, 0.4],
        }),
        ..Default::default()
    };
    let estimators = vec!["most_recent".to_string(), "max_window(64)".to_string()];
    let run = |name: &str, est: &str, right: &str| {
        let qat = est != "none";
        let mut counts = hif8lab_scaling::call::CallCounts::new(if qat { 2 } else { 0 });
        if qat {
            counts.calls = 40;
            counts.estimators[0].calls_above_est = 12;
            counts.estimators[1].calls_above_est = 3;
        }
        GridDataRun {
            run: name.into(),
            order: 0,
            base_seed: 0,
            summary: RunSummary {
                name: name.into(),
                status: RunStatus::Finished,
                steps: 4,
                target_steps: 4,
                lr: 1e-4,
                estimator: est.into(),
                estimators: if qat { estimators.clone() } else { Vec::new() },
                quantizers: if qat { 6 } else { 0 },
                counts,
                losses: vec![3.0, 2.5, 2.25, 2.0],
                probes: Some(probes(right)),
                ..Default::default()
            },
        }
    };
    GridData {
        bases: vec![probes("fff")],
        runs: vec![
            run("baseline-low", "none", "ff0"),
            run("max_window-low", "max_window(64)", "fe0"),
            run("most_recent-low", "most_recent", "f70"),
        ],
        base_model: None,
    }
}

/// Grid data whose records disagree with the grid's design, one mutation at a time: each
/// refused naming the run and the field (each was read before, and moved a verdict).
#[test]
fn grid_data_inconsistent_with_its_design_is_refused_by_run_and_field() {
    use hif8lab_lab::grid::{GridData, GridDataRun};
    let good = grid_data_seed();
    GridData::from_jsonl("runs.jsonl.gz", &good.to_jsonl()).unwrap();
    type Mutation = (&'static str, fn(&mut GridDataRun), &'static str);
    let cases: [Mutation; 7] = [
        (
            "items",
            |r| r.summary.probes.as_mut().unwrap().knowledge_items = 6,
            "probes.knowledge_items",
        ),
        (
            "marks",
            |r| {
                r.summary
                    .probes
                    .as_mut()
                    .unwrap()
                    .marks
                    .as_mut()
                    .unwrap()
                    .heldout
                    .pop()
                    .map(drop)
                    .unwrap_or(())
            },
            "marks.heldout",
        ),
        (
            "missing counts",
            |r| {
                r.summary.counts.estimators.pop();
            },
            "summary.counts",
        ),
        (
            "unfinished",
            |r| r.summary.status = hif8lab_train::run::RunStatus::Interrupted,
            "summary.status",
        ),
        (
            "short",
            |r| {
                r.summary.steps = 2;
                r.summary.losses.truncate(2);
            },
            "summary.steps",
        ),
        (
            "other estimators",
            |r| r.summary.estimators[1] = "ema".into(),
            "summary.estimators",
        ),
        (
            "no quantizers",
            |r| r.summary.quantizers = 0,
            "summary.quantizers",
        ),
    ];
    for (what, mutate, field) in cases {
        let mut bad = good.clone();
        mutate(&mut bad.runs[2]);
        let e = GridData::from_jsonl("runs.jsonl.gz", &bad.to_jsonl())
            .expect_err(what)
            .to_string();
        assert!(
            e.contains("runs.jsonl.gz") && e.contains("most_recent-low") && e.contains(field),
            "{what}: {e}"
        );
    }
    // A run given twice.
    let mut twice = good.clone();
    twice.runs.push(twice.runs[1].clone());
    let e = GridData::from_jsonl("runs.jsonl.gz", &twice.to_jsonl()).unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
    // One gzip stream, nothing after it.
    let z = good.to_gzip_jsonl().unwrap();
    assert_eq!(GridData::from_gzip("runs.jsonl.gz", &z).unwrap(), good);
    for tail in [z.clone(), b"\n".to_vec()] {
        let e = GridData::from_gzip("runs.jsonl.gz", &[z.as_slice(), &tail].concat()).unwrap_err();
        assert!(e.to_string().contains("follow the gzip stream"), "{e}");
    }
}

/// A grid's data (`runs.jsonl.gz`, as JSON lines): every input is read or refused by name,
/// and one accepted input in 500 is turned into a report (the bootstrap is slow).
#[test]
fn fuzz_grid_data() {
    use hif8lab_lab::grid::{GridData, results_of};
    let data = grid_data_seed();
    let seed = data.to_jsonl().into_bytes();
    let mut m = Mutator::new(
        17,
        &[
            "\"order\":99999",
            "\"base_seed\":1",
            "\"kind\":\"base\"",
            "\"run\":\"nope\"",
            "1e300",
            "null",
            "-1",
        ],
    );
    let start = Instant::now();
    let (mut accepted, mut reports) = (0usize, 0usize);
    let counts = fuzz("grid data", INPUTS, &mut m, &[seed], |bytes| {
        let text = std::str::from_utf8(bytes).map_err(|e| format!("runs.jsonl.gz: {e}"))?;
        let data = GridData::from_jsonl("runs.jsonl.gz", text).map_err(|e| e.to_string())?;
        accepted += 1;
        if accepted % 500 == 1 {
            reports += 1;
            let r = results_of("runs.jsonl.gz", data).map_err(|e| e.to_string())?;
            let _ = r.verdicts.len();
        }
        Ok(())
    });
    println!("{reports} reports computed");
    assert!(reports > 5, "{reports} reports");
    report("grid data", start, counts);
}

#[test]
fn fuzz_corpus_files() {
    let seeds = vec![
        b"The river Quelt runs past the library of Amarin.\n".to_vec(),
        data::synthetic_corpus(1, 600).into_bytes(),
    ];
    let mut m = Mutator::new(8, &[]);
    let start = Instant::now();
    let counts = fuzz("corpus", INPUTS, &mut m, &seeds, |bytes| {
        let text = data::corpus_text(Path::new("fuzz.txt"), bytes.to_vec())
            .map_err(|e| named(e, "fuzz.txt"))?;
        let mut sampler = data::Sampler::new(data::tokenize(&text), 1);
        let (inputs, targets) = sampler.next_batch(2, 8).map_err(|e| e.to_string())?;
        assert_eq!((inputs.len(), targets.len()), (16, 16));
        assert!(inputs.iter().all(|t| (0.0..256.0).contains(t)));
        Ok(())
    });
    report("corpus", start, counts);
}

#[test]
fn fuzz_hf_config_and_tokenizer_json() {
    let hf = fixtures_dir().join("hf");
    let config = std::fs::read(hf.join("tiny-gqa-tied-bf16/config.json")).unwrap();
    let sharded = std::fs::read(hf.join("tiny-untied-f32-sharded/config.json")).unwrap();
    let mut m = Mutator::new(
        11,
        &[
            "\"architectures\"",
            "LlamaForCausalLM",
            "\"rope_scaling\"",
            "null",
            "true",
            "-1",
            "1e400",
            "\"head_dim\"",
            "\"num_key_value_heads\"",
        ],
    );
    let start = Instant::now();
    let counts = fuzz("config.json", INPUTS, &mut m, &[config, sharded], |bytes| {
        let text = String::from_utf8_lossy(bytes);
        match hif8lab_train::models::hf::parse_config(Path::new("fuzz/config.json"), &text) {
            Ok(c) => {
                // An accepted config describes a model whose run config validates, or the
                // run refuses it with a message.
                let mut run = RunConfig::parse("smoke", PRESETS[0].1, &[]).unwrap();
                run.model = c.model;
                run.model.context = run.model.context.min(64);
                run.validate().map_err(|e| format!("fuzz/config.json: {e}"))
            }
            Err(e) => Err(named(e.to_string(), "fuzz/config.json")),
        }
    });
    report("config.json", start, counts);

    // tokenizer.json: the byte tokenizer as transformers wrote it and a trained BPE.
    let byte = std::fs::read(hf.join("byte-tokenizer/tokenizer.json")).unwrap();
    let bpe = std::fs::read(hf.join("bpe-tokenizer/tokenizer.json")).unwrap();
    let mut m = Mutator::new(
        12,
        &[
            "\"BPE\"",
            "\"merges\"",
            "\"vocab\"",
            "ByteLevel",
            "null",
            "[]",
        ],
    );
    let start = Instant::now();
    let counts = fuzz("tokenizer.json", INPUTS, &mut m, &[byte, bpe], |bytes| {
        let text = String::from_utf8_lossy(bytes);
        let t =
            hif8lab_train::models::tokenizer::Tokenizer::from_json("fuzz/tokenizer.json", &text)
                .map_err(|e| named(e, "fuzz/tokenizer.json"))?;
        let ids = t
            .encode("The river Quelt, naïve café 東京.")
            .map_err(|e| e.to_string())?;
        let _ = t.decode(&ids);
        Ok(())
    });
    report("tokenizer.json", start, counts);
}

/// GGUF files: the container parser and the conversion to a Hugging Face model (config,
/// dequantized weights, tokenizer), from a small valid file of every 32-element block type.
#[test]
fn fuzz_gguf_files() {
    let seed = std::fs::read(fixtures_dir().join("gguf/fuzz-seed.gguf")).unwrap();
    let mut m = Mutator::new(
        13,
        &[
            "GGUF",
            "llama.block_count",
            "llama.embedding_length",
            "tokenizer.ggml.model",
            "tokenizer.ggml.tokens",
            "gpt2",
            "general.alignment",
            "\u{0}\u{0}\u{0}\u{0}",
            "\u{ff}\u{ff}\u{ff}\u{ff}",
        ],
    );
    let start = Instant::now();
    let mut converted = 0;
    let counts = fuzz("gguf", INPUTS, &mut m, &[seed], |bytes| {
        let g = hif8lab_train::models::gguf::GgufFile::parse(bytes)
            .map_err(|e| format!("fuzz.gguf: {e}"))?;
        let c = hif8lab_train::models::gguf::convert::convert(&g, bytes)
            .map_err(|e| format!("fuzz.gguf: {e}"))?;
        converted += 1;
        // An accepted file describes a model whose weights have the config's shapes.
        hif8lab_train::models::hf::select_weights(
            Path::new("fuzz.gguf"),
            &c.model,
            c.weights
                .tensors
                .into_iter()
                .map(|t| ("fuzz.gguf".into(), t))
                .collect(),
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    });
    report("gguf", start, counts);
    assert!(converted > 0, "some mutated files still convert");
}

/// Checks an error message names its source, and passes it on.
fn named(message: impl std::fmt::Display, source: &str) -> String {
    let message = message.to_string();
    assert!(
        message.contains(source),
        "error does not name {source}: {message}"
    );
    message
}

fn trace_seed() -> Vec<u8> {
    use hif8lab_scaling::trace::{TRACE_VERSION, TraceHeader, TraceWriter};
    let config = RunConfig::parse(
        "tiny",
        PRESETS[0].1,
        &[
            "model.layers=3".into(),
            "train.steps=3".into(),
            "qat.warmup_steps=1".into(),
            "data.bytes=4000".into(),
        ],
    )
    .unwrap();
    let mut trainer = Trainer::from_config(CpuBackend::new(), config.clone()).unwrap();
    let names = trainer.estimator_names().to_vec();
    let header = TraceHeader {
        hif8lab_trace: TRACE_VERSION,
        format: "hif8".into(),
        target: 15.0,
        margin: 0,
        window: 64,
        estimator: names[trainer.active_estimator()].clone(),
        estimators: names,
        config: serde_json::Value::Null,
    };
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    let mut reports = Vec::new();
    for _ in 0..3 {
        trainer.step().unwrap();
        reports.extend(trainer.poll().unwrap());
    }
    reports.extend(trainer.finish().unwrap());
    for r in &reports {
        for rec in trainer.trace_records(r).iter().take(6) {
            w.record(rec).unwrap();
        }
    }
    w.flush().unwrap();
    w.into_inner()
}

/// GGUF metadata values (not the container's structure) driven through to the model: each
/// input is the tiny fixture with one to three metadata values replaced by a hostile one (0,
/// 2^31, 2^63, −1, 1e39, 1e-60, NaN, empty or odd strings and arrays, another type). Every
/// file converts or is refused naming a metadata key or tensor; a converted one gives a
/// model whose weights have its config's shapes and whose sizes a run config accepts or
/// refuses by key — and nothing is sized from metadata the tensors do not back (the block
/// count of 2^31 used to build 2^31 layers).
#[test]
fn fuzz_gguf_metadata_values() {
    use hif8lab_train::models::gguf::{self, GgufFile, file::MetaValue};
    let bytes = fixture("gguf/tiny-llama-bos.gguf");
    let g = GgufFile::parse(&bytes).unwrap();
    let keys: Vec<String> = g.metadata.keys().cloned().collect();
    let hostile = |k: u64| -> MetaValue {
        match k % 14 {
            0 => MetaValue::Uint(0),
            1 => MetaValue::Uint(1 << 31),
            2 => MetaValue::Uint(u64::MAX),
            3 => MetaValue::Int(-1),
            4 => MetaValue::Float(1e39),
            5 => MetaValue::Float(1e-60),
            6 => MetaValue::Float(f64::NAN),
            7 => MetaValue::Str(String::new()),
            8 => MetaValue::Str("llama".into()),
            9 => MetaValue::Array(Vec::new()),
            10 => MetaValue::Array(vec![MetaValue::Uint(3); 3]),
            11 => MetaValue::Bool(true),
            12 => MetaValue::Uint(3),
            _ => MetaValue::Uint((k >> 8) & 0xffff),
        }
    };
    const FILES: usize = 3_000;
    let start = Instant::now();
    let (mut converted, mut refused) = (0usize, 0usize);
    for i in 0..FILES as u64 {
        let r = hif8lab_tests::splitmix64(0x6767_7566, i);
        let edited = gguf::write::rewrite(&g, &bytes, |meta, _| {
            for j in 0..1 + r % 3 {
                let pick = hif8lab_tests::splitmix64(r, j);
                let key = &keys[pick as usize % keys.len()];
                let slot = meta.iter_mut().find(|(k, _)| k == key).unwrap();
                slot.1 = hostile(pick >> 16);
            }
        });
        let outcome = GgufFile::parse(&edited)
            .and_then(|p| gguf::convert::convert(&p, &edited))
            .map_err(|e| e.to_string());
        match outcome {
            Err(e) => {
                assert!(
                    e.contains("metadata '") || e.contains("tensor '") || e.contains("metadata:"),
                    "refusal names no key or tensor: {e}"
                );
                refused += 1;
            }
            Ok(c) => {
                converted += 1;
                let weights: Vec<_> = c
                    .weights
                    .tensors
                    .into_iter()
                    .map(|t| ("fuzz.gguf".into(), t))
                    .collect();
                hif8lab_train::models::hf::select_weights(
                    Path::new("fuzz.gguf"),
                    &c.model,
                    weights,
                )
                .unwrap();
                let mut run =
                    RunConfig::parse("smoke", RunConfig::preset_text("smoke").unwrap(), &[])
                        .unwrap();
                run.model = c.model.clone();
                run.model.context = run.model.context.min(64);
                if let Err(e) = run.validate() {
                    assert!(
                        e.keys.iter().all(|k| e.message.contains(k)) && !e.keys.is_empty(),
                        "a run refuses naming its keys: {e:?}"
                    );
                }
            }
        }
    }
    println!(
        "fuzz gguf metadata values: {FILES} files in {:.2} s ({converted} converted, {refused} refused by key or tensor)",
        start.elapsed().as_secs_f64()
    );
    assert!(
        converted > 0 && refused > FILES / 10,
        "{converted} / {refused}"
    );
}

/// One record of a valid grid's data mutated (fields the design fixes, and fields the
/// report never reads): every mutation is refused naming the run, or leaves the report
/// byte for byte as it was — never a report over records that disagree.
#[test]
fn fuzz_grid_data_consistency() {
    use hif8lab_lab::grid::{GridData, results_of};
    let good = grid_data_seed();
    let md = |d: GridData| results_of("runs.jsonl.gz", d).unwrap().markdown();
    let original = md(good.clone());
    let lines: Vec<String> = good.to_jsonl().lines().map(str::to_owned).collect();
    // (JSON pointer within a run line, replacement; None deletes the key).
    let edits: [(&str, Option<serde_json::Value>); 16] = [
        ("/summary/probes/knowledge_items", Some(6.into())),
        ("/summary/probes/completion_items", Some(0.into())),
        ("/summary/probes/marks/knowledge_acc", Some("ff".into())),
        (
            "/summary/probes/marks/heldout",
            Some(serde_json::json!([2.5])),
        ),
        (
            "/summary/probes/marks/knowledge_margin",
            Some(serde_json::json!([0.5])),
        ),
        ("/summary/probes", None),
        ("/summary/status", Some("interrupted".into())),
        ("/summary/status", Some("failed".into())),
        ("/summary/error", Some("killed".into())),
        ("/summary/steps", Some(3.into())),
        ("/summary/target_steps", Some(8.into())),
        ("/summary/counts/estimators", Some(serde_json::json!([]))),
        ("/summary/estimators", Some(serde_json::json!(["ema"]))),
        ("/summary/quantizers", Some(0.into())),
        ("/summary/wall_s", Some(99.5.into())),
        ("/summary/adapter", Some("another adapter".into())),
    ];
    let (mut refused, mut unchanged) = (0, 0);
    for line in 1..lines.len() {
        for (pointer, value) in &edits {
            let mut v: serde_json::Value = serde_json::from_str(&lines[line]).unwrap();
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            let Some(obj) = v.pointer_mut(parent).and_then(|p| p.as_object_mut()) else {
                continue;
            };
            match value {
                Some(x) => {
                    obj.insert(key.to_owned(), x.clone());
                }
                None => {
                    obj.remove(key);
                }
            }
            let mut text = lines.clone();
            text[line] = v.to_string();
            match GridData::from_jsonl("runs.jsonl.gz", &text.join("\n")) {
                Err(e) => {
                    let run = v["run"].as_str().unwrap();
                    assert!(e.to_string().contains(run), "{pointer}: {e}");
                    refused += 1;
                }
                Ok(d) => {
                    assert_eq!(md(d), original, "{pointer} changed the report");
                    unchanged += 1;
                }
            }
        }
    }
    println!("grid data consistency: {refused} refused, {unchanged} reports unchanged");
    assert!(refused > 20 && unchanged > 0, "{refused} / {unchanged}");
}

#[test]
fn fuzz_training_logs() {
    use hif8lab_lab::evals::train_log::{LogPattern, parse_log};
    let kv: String = (1..=40)
        .map(|s| {
            format!(
                "2026-05-06 02:18:14,897 [INFO] step={s}/40 | loss={:.4} | lr=1e-05 | quant={} | samples=1,024\n",
                5.0 - f64::from(s) * 0.01,
                if s > 10 { "ON" } else { "OFF" }
            )
        })
        .collect();
    let jsonl: String = (1..=40)
        .map(|s| {
            format!(
                "{{\"step\":{s},\"loss\":{}}}\n",
                4.0 + f64::from(s % 3) * 0.1
            )
        })
        .collect();
    let csv: String = std::iter::once("step,loss,lr\n".to_string())
        .chain((1..=40).map(|s| format!("{s},{},1e-5\n", 3.0 + f64::from(s % 5) * 0.01)))
        .collect();
    let seeds = vec![kv.into_bytes(), jsonl.into_bytes(), csv.into_bytes()];
    let mut m = Mutator::new(21, &["step=", "loss=", "|", ",", "\n", "-", "nan", "{"]);
    let start = Instant::now();
    let patterns = [
        LogPattern::Auto,
        LogPattern::KeyValue,
        LogPattern::Jsonl,
        LogPattern::Csv,
    ];
    let mut i = 0usize;
    let counts = fuzz("training log", INPUTS, &mut m, &seeds, |bytes| {
        i += 1;
        let log = parse_log(Path::new("fuzz.log"), bytes, patterns[i % 4])
            .map_err(|e| named(e, "fuzz.log"))?;
        // What is accepted is what the comparison may take: finite losses ≥ 0, steps in order.
        assert!(
            log.records
                .iter()
                .all(|r| r.loss.is_finite() && r.loss >= 0.0)
        );
        assert!(log.records.windows(2).all(|w| w[0].step < w[1].step));
        Ok(())
    });
    report("training log", start, counts);
}

#[test]
fn fuzz_lm_eval_results_files() {
    use hif8lab_lab::evals::lm_eval::EvalRun;
    let base = fixtures_dir().join("lm-eval/base");
    let results = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("results_")
        })
        .unwrap();
    let name = results.file_name().unwrap().to_owned();
    let seeds = vec![std::fs::read(&results).unwrap()];
    let dir = std::env::temp_dir().join(format!("hif8lab-fuzz-lm-eval-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut m = Mutator::new(
        22,
        &[
            "\"n-shot\"",
            "\"acc_norm,none\"",
            "1.5",
            "-0.5",
            "null",
            "{}",
        ],
    );
    let start = Instant::now();
    // Each input is a file on disk (the reader takes folders): a fifth of the usual count.
    let n = INPUTS / 5;
    let counts = fuzz("lm-eval results", n, &mut m, &seeds, |bytes| {
        std::fs::write(dir.join(&name), bytes).unwrap();
        let run = EvalRun::open(&dir).map_err(|e| e.to_string())?;
        assert!(!run.tasks.is_empty());
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "fuzz lm-eval results: {} inputs in {:.2} s ({} accepted, {} refused with a message)",
        counts.0 + counts.1,
        start.elapsed().as_secs_f64(),
        counts.0,
        counts.1
    );
    assert_eq!(counts.0 + counts.1, n);
}
