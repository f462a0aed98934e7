//! End-to-end tests of `hif8lab train`: the run folder's files and their contents.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::PathBuf;
use std::process::Command;

use crate::common::{hif8lab, train_command, wait_for_lines};

fn out_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("hif8lab-train-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn check_run(dir: &std::path::Path, steps: usize) {
    let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = metrics
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), steps);
    for field in [
        "step",
        "loss",
        "lr",
        "grad_norm",
        "tokens_per_s",
        "qat_enabled",
    ] {
        assert!(!lines[0][field].is_null(), "metrics field {field}");
    }
    let first = lines[0]["loss"].as_f64().unwrap();
    let last = lines[steps - 1]["loss"].as_f64().unwrap();
    assert!(last < first, "loss falls: {first} → {last}");
    let trace = hif8lab_scaling::trace::read_trace(&dir.join("trace.jsonl")).unwrap();
    assert_eq!(trace.header.estimators.len(), 5);
    assert!(!trace.records.is_empty());
    assert!(
        trace.records.iter().all(|r| r.step >= 3),
        "QAT switches on after the warmup"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "finished");
    assert!(
        std::fs::read_to_string(dir.join("config.toml"))
            .unwrap()
            .contains("[qat.scaling]")
    );
}

#[test]
fn train_smoke_writes_a_run_folder() {
    let dir = out_dir("cpu");
    let out = hif8lab(&[
        "train",
        "--preset",
        "smoke",
        "--backend",
        "cpu",
        "--steps",
        "12",
        "--set",
        "qat.warmup_steps=3",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_run(&dir, 12);
    // A second run into the same folder is refused; nothing is overwritten.
    let before = std::fs::read(dir.join("metrics.jsonl")).unwrap();
    let again = hif8lab(&[
        "train",
        "--preset",
        "smoke",
        "--backend",
        "cpu",
        "--steps",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a run"));
    assert_eq!(std::fs::read(dir.join("metrics.jsonl")).unwrap(), before);
}

#[test]
fn train_smoke_on_the_gpu() {
    let dir = out_dir("gpu");
    let out = hif8lab(&[
        "train",
        "--preset",
        "smoke",
        "--backend",
        "gpu",
        "--steps",
        "8",
        "--set",
        "qat.warmup_steps=3",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            std::env::var("HIF8LAB_REQUIRE_GPU").as_deref() != Ok("1"),
            "GPU required: {err}"
        );
        eprintln!("!!!!!!!! SKIPPING: no GPU adapter ({err}) !!!!!!!!");
        return;
    }
    check_run(&dir, 8);
}

#[test]
fn bad_train_input_is_named() {
    let out = hif8lab(&[
        "train",
        "--preset",
        "smoke",
        "--set",
        "model.heads=5",
        "--backend",
        "cpu",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("model.heads 5"));
    let out = hif8lab(&["train", "--preset", "nope"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such preset"));
    let cfg = std::env::temp_dir().join(format!("hif8lab-bad-{}.toml", std::process::id()));
    std::fs::write(&cfg, "[model]\nvocab = 256\n").unwrap();
    let out = hif8lab(&[
        "train",
        "--config",
        cfg.to_str().unwrap(),
        "--backend",
        "cpu",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("hif8lab-bad") && err.contains("d_model"),
        "{err}"
    );
}

#[test]
fn resume_continues_the_run_folder_and_ctrl_c_checkpoints() {
    let dir = out_dir("resume");
    let d = dir.to_str().unwrap();
    let base = [
        "train",
        "--preset",
        "smoke",
        "--backend",
        "cpu",
        "--quiet",
        "--set",
        "qat.warmup_steps=3",
    ];
    let out = hif8lab(
        &[
            &base[..],
            &[
                "--steps",
                "10",
                "--set",
                "train.checkpoint_every=4",
                "--out",
                d,
            ],
        ]
        .concat(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for step in [4, 8, 10] {
        assert!(
            dir.join(format!("checkpoints/step_{step}.safetensors"))
                .exists(),
            "step {step}"
        );
    }
    // Simulate a crash after step 8: drop the last checkpoint; resume redoes steps 8 and 9.
    std::fs::remove_file(dir.join("checkpoints/step_10.safetensors")).unwrap();
    let before: Vec<String> = std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let out = hif8lab(&["train", "--resume", d, "--backend", "cpu", "--quiet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after: Vec<String> = std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(after.len(), 10);
    let loss = |l: &str| {
        serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"]
            .as_f64()
            .unwrap()
    };
    for (a, b) in before.iter().zip(&after) {
        assert_eq!(loss(a), loss(b), "resumed steps are bit-identical");
    }
    let trace = hif8lab_scaling::trace::read_trace(&dir.join("trace.jsonl")).unwrap();
    let mut steps: Vec<u64> = trace.records.iter().map(|r| r.step).collect();
    steps.dedup();
    assert_eq!(
        steps,
        (3..10).collect::<Vec<u64>>(),
        "no duplicated trace records"
    );

    // Ctrl-C (SIGINT) writes a checkpoint and exits with 130.
    let dir2 = out_dir("sigint");
    let mut child = train_command(&dir2, &["--steps", "100000"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_lines(&dir2.join("metrics.jsonl"), 3);
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(hif8lab_train::models::checkpoint::latest(&dir2).is_some());
    let summary = std::fs::read_to_string(dir2.join("summary.json")).unwrap();
    assert!(summary.contains("\"interrupted\""), "{summary}");
}

/// `bench train --json` states the model's parameters and its throughput in model FLOPs
/// (6 per parameter per token), consistent with its tokens/s.
#[test]
fn bench_train_states_model_flops() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args([
            "bench",
            "train",
            "--preset",
            "smoke",
            "--steps",
            "2",
            "--backend",
            "cpu",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let params = v["params"].as_f64().unwrap();
    // The smoke preset's parameters, counted from its shapes here.
    let config = hif8lab_train::RunConfig::parse(
        "smoke",
        hif8lab_train::RunConfig::preset_text("smoke").unwrap(),
        &[],
    )
    .unwrap();
    let m = &config.model;
    let (c, f, hd) = (m.d_model, m.d_ff, m.head_dim());
    let per_layer = 2 * c + c * m.heads * hd * 2 + 2 * c * m.kv_heads * hd + 3 * c * f;
    let head = if m.tie_embeddings { 0 } else { m.vocab * c };
    let expected = m.vocab * c + m.layers * per_layer + c + head;
    assert_eq!(params as usize, expected, "{v}");
    for run in ["plain", "qat"] {
        let tps = v[format!("tokens_per_s_{run}")].as_f64().unwrap();
        let g = v[format!("model_gflops_{run}")].as_f64().unwrap();
        assert!(
            (g - 6.0 * params * tps / 1e9).abs() <= 1e-3 + 1e-3 * g,
            "{run}: {v}"
        );
    }
    // gemm_fraction: the step's own GEMMs alone (positive time) over the step's time, for
    // each run: consistent with the stated milliseconds.
    let alone = v["gemm_ms_per_step_alone"].as_f64().unwrap();
    assert!(
        alone > 0.0 && v["gemm_gflops_alone"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    for (key, ms) in [("gemm_fraction", "plain"), ("gemm_fraction_qat", "qat")] {
        let f = v[key].as_f64().unwrap();
        let step = v[format!("ms_per_step_{ms}")].as_f64().unwrap();
        assert!((f - alone / step).abs() <= 1e-3 + 1e-2 * f, "{key}: {v}");
    }
    assert_eq!(v["model_gflops"], v["model_gflops_plain"]);
}
