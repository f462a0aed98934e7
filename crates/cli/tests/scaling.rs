//! End-to-end tests of `hif8lab trace synth`, `hif8lab replay` and `hif8lab export te-recipe`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::PathBuf;

mod common;
use common::hif8lab;

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hif8lab-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

fn fixture(name: &str) -> String {
    format!(
        "{}/../../tests/fixtures/scaling/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn synth_then_replay_json_on_a_spike_trace() {
    let csv = temp_path("spike.csv");
    let out = hif8lab(&[
        "trace",
        "synth",
        "--pattern",
        "spike",
        "--calls",
        "500",
        "--seed",
        "3",
        "--out",
        csv.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&csv).expect("written");
    assert!(text.starts_with("step,layer,role,amax\n"));
    assert_eq!(text.lines().count(), 1 + 3 * 500);
    let out = hif8lab(&["replay", csv.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let total = &v["total"];
    for name in [
        "most_recent",
        "ema(0.1)",
        "mean_window(64)",
        "max_window(64)",
        "current",
    ] {
        assert_eq!(total[name]["calls"], 1500, "{name}");
        for field in ["calls_above_est", "worst_ratio", "median_headroom"] {
            assert!(total[name][field].is_number(), "{name}.{field}");
        }
    }
    let mr = total["most_recent"]["calls_above_est"].as_u64().unwrap();
    let mw = total["max_window(64)"]["calls_above_est"].as_u64().unwrap();
    assert!(mw * 5 < mr, "max_window {mw} vs most_recent {mr}");
    assert_eq!(total["current"]["calls_above_est"], 0);
    assert_eq!(v["quantizers"].as_array().unwrap().len(), 3);
}

#[test]
fn replay_accepts_estimator_lists_with_parameters_and_te_logs() {
    let out = hif8lab(&[
        "replay",
        &fixture("sample_te.log"),
        "--estimators",
        "holt(0.5,0.1,0.9),max_window(2)",
        "--window",
        "2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("holt(0.5,0.1,0.9)") && text.contains("max_window(2)"),
        "{text}"
    );
    assert!(
        text.contains("decoder.layers.1.mlp.linear_fc1.activation (3 calls)"),
        "{text}"
    );
}

#[test]
fn replay_errors_name_the_file_line_and_field() {
    let out = hif8lab(&["replay", &fixture("bad_amax.csv")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad_amax.csv:3: field 'amax'"), "{err}");
    let out = hif8lab(&[
        "replay",
        &fixture("sample.csv"),
        "--estimators",
        "median(3)",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown estimator"));
    let out = hif8lab(&["trace", "synth", "--pattern", "sawtooth"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn te_recipe_export() {
    let out = hif8lab(&[
        "export",
        "te-recipe",
        "--estimator",
        "max_window",
        "--window",
        "64",
        "--format",
        "e4m3",
        "--target",
        "448",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("DelayedScaling(fp8_format=Format.E4M3, margin=0, amax_history_len=64, amax_compute_algo=\"max\")"), "{text}");
    assert!(
        text.contains("--fp8-amax-history-len 64 --fp8-amax-compute-algo max"),
        "{text}"
    );
    let out = hif8lab(&["export", "te-recipe"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("HiF8 has no TE format"), "{text}");
    assert!(
        text.contains("target 15 is not a power-of-two fraction"),
        "{text}"
    );
    let config = temp_path("run.toml");
    std::fs::write(
        &config,
        "[scaling]\namax_compute_algo = \"most_recent\"\namax_history_len = 16\nmargin = 1\n",
    )
    .unwrap();
    let out = hif8lab(&[
        "export",
        "te-recipe",
        "--config",
        config.to_str().unwrap(),
        "--format",
        "e4m3",
        "--target",
        "448",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("margin=1, amax_history_len=16, amax_compute_algo=\"most_recent\""),
        "{text}"
    );
    std::fs::write(&config, "[scaling]\nwindw = 3\n").unwrap();
    let out = hif8lab(&["export", "te-recipe", "--config", config.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run.toml") && err.contains("windw"), "{err}");
}

/// `trace select` keeps the calls of the quantizers named, in file order with the header,
/// gzipped or not, readable by `replay`; a quantizer the trace never calls is refused by name
/// and nothing is written.
#[test]
fn trace_select_keeps_the_quantizers_named() {
    let trace = format!(
        "{}/../../tests/fixtures/real-trace.jsonl.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let all: Vec<serde_json::Value> = {
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(std::fs::File::open(&trace).unwrap()),
            &mut text,
        )
        .unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let is = |r: &serde_json::Value, block: u64, role: &str| {
        r["block"] == block && r["module"] == "gate" && r["role"] == role
    };
    let want = all[1..]
        .iter()
        .filter(|r| is(r, 3, "A") || is(r, 3, "W"))
        .count();
    assert!(want > 0 && want < all.len() - 1);
    for name in ["kept.jsonl", "kept.jsonl.gz"] {
        let out_path = temp_path(name);
        let out = hif8lab(&[
            "trace",
            "select",
            &trace,
            "--quantizers",
            "block3.gate.A,block3.gate.W",
            "--out",
            out_path.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bytes = std::fs::read(&out_path).unwrap();
        let text = if name.ends_with(".gz") {
            let mut t = String::new();
            std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut t)
                .unwrap();
            t
        } else {
            String::from_utf8(bytes).unwrap()
        };
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0], all[0], "the header as it was");
        let kept: Vec<&serde_json::Value> = all[1..]
            .iter()
            .filter(|r| is(r, 3, "A") || is(r, 3, "W"))
            .collect();
        assert_eq!(lines.len() - 1, want);
        for (a, b) in lines[1..].iter().zip(kept) {
            assert_eq!(a["step"], b["step"]);
            assert_eq!(a["amax"], b["amax"]);
            assert_eq!(a["role"], b["role"]);
        }
        let replay = hif8lab(&["replay", out_path.to_str().unwrap(), "--json"]);
        assert!(
            replay.status.success(),
            "{}",
            String::from_utf8_lossy(&replay.stderr)
        );
    }
    let missing = temp_path("missing.jsonl");
    let out = hif8lab(&[
        "trace",
        "select",
        &trace,
        "--quantizers",
        "block3.gate.A,block29.down.G",
        "--out",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("block29.down.G") && err.contains("--quantizers"),
        "{err}"
    );
    assert!(!missing.exists());
}
