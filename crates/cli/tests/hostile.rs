//! Hostile-but-fair input to the `hif8lab` binary: every case a clear error (file, key or
//! line, and the rule; a non-zero exit) or correct behaviour, and nothing lost — sizes that
//! cannot fit, settings out of range, impossible trace values, non-UTF-8 stdin, and the run
//! folder's resume, origin and signal handling.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common::{hif8lab, train_command, wait_for_lines};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The command failed and its stderr says `what`.
fn fails_saying(o: &Output, what: &str) {
    assert!(!o.status.success(), "expected a failure saying '{what}'");
    assert!(stderr(o).contains(what), "'{what}' not in: {}", stderr(o));
}

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hif8lab-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&read(&dir.join("summary.json"))).unwrap()
}

fn train(dir: &Path, extra: &[&str]) -> Output {
    train_command(dir, extra).output().expect("run hif8lab")
}

fn resume(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["train", "--resume", dir.to_str().unwrap(), "--quiet"];
    args.extend_from_slice(extra);
    hif8lab(&args)
}

#[test]
fn sizes_that_cannot_fit_are_refused_before_allocating() {
    for set in [
        "model.context=100000",
        "model.d_model=1000000",
        "train.batch=100000000",
        "model.vocab=16777216",
    ] {
        let dir = out_dir("size");
        let o = train(&dir, &["--set", set]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{set}: {err}");
        assert!(
            err.contains("needs about") && err.contains("available") && err.contains("GiB"),
            "{set}: {err}"
        );
        assert!(!dir.exists(), "{set}: nothing written");
    }
    // A float where an integer belongs is named with its --set.
    let o = train(&out_dir("float"), &["--set", "model.d_model=1e6"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--set model.d_model=1e6") && err.contains("usize"),
        "{err}"
    );
    // --dry-run prints the estimate and trains nothing.
    let dir = out_dir("dry");
    let o = train(&dir, &["--dry-run"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    for part in [
        "parameters: 217664",
        "weights",
        "AdamW moments",
        "activations",
        "fits: yes",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    assert!(!dir.exists());
    let o = train(&dir, &["--dry-run", "--set", "model.vocab=16777216"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stdout).contains("total"));
}

#[test]
fn settings_out_of_range_name_the_key() {
    for (set, key) in [
        ("train.beta1=1.5", "train.beta1 must be in [0, 1)"),
        ("train.beta2=1", "train.beta2 must be in [0, 1)"),
        ("train.grad_clip=-1", "train.grad_clip must be in"),
        ("train.steps=0", "train.steps must be at least 1"),
        ("train.weight_decay=nan", "train.weight_decay must be in"),
        ("train.eps=0", "train.eps must be in"),
        ("model.rope_theta=0", "model.rope_theta must be in"),
        ("model.norm_eps=0", "model.norm_eps must be in"),
        ("train.lr=1e30", "train.lr must be in [0, 1], got 1e30"),
        ("train.lr=-1", "train.lr must be in"),
    ] {
        let o = train(&out_dir("range"), &["--set", set]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{set}: {err}");
        assert!(err.contains(key), "{set}: {err}");
        assert!(err.contains(&format!("--set {set}")), "{set}: {err}");
    }
    let o = train(&out_dir("steps0"), &["--steps", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--steps"), "{}", stderr(&o));
}

#[test]
fn replay_counts_impossible_amax_and_keeps_config_ranges() {
    let dir = out_dir("replay");
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("bad.csv");
    std::fs::write(
        &csv,
        "step,layer,role,amax\n0,l,A,1\n1,l,A,nan\n2,l,A,-1\n3,l,A,1e39\n4,l,A,inf\n5,l,A,2\n6,l,A,1\n",
    )
    .unwrap();
    let o = hif8lab(&["replay", csv.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("4 amax value(s) left out"),
        "{}",
        stderr(&o)
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let q = &report["quantizers"][0];
    assert_eq!(q["calls"], 3);
    assert_eq!(q["nonfinite_amax"], 3);
    assert_eq!(q["negative_amax"], 1);
    let mr = &q["estimators"]["most_recent"];
    assert_eq!(mr["calls_above_est"], 1);
    assert!(mr["worst_ratio"].as_f64().unwrap() > 1.0, "{mr}");
    let text = hif8lab(&["replay", csv.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("4 left out: 3 NaN/Inf, 1 negative"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
    for (flag, value, rule) in [
        ("--margin", "100000", "--margin must be in -64..=64"),
        ("--margin", "-65", "--margin must be in -64..=64"),
        ("--window", "70000", "--window must be in 1..=65536"),
        ("--window", "0", "--window must be in 1..=65536"),
        ("--target", "nan", "--target must be a finite number > 0"),
    ] {
        let o = hif8lab(&["replay", csv.to_str().unwrap(), flag, value]);
        assert!(!o.status.success(), "{flag} {value}");
        assert!(stderr(&o).contains(rule), "{flag} {value}: {}", stderr(&o));
    }
}

#[test]
fn codec_stdin_with_non_utf8_names_the_line_and_goes_on() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args(["codec", "encode"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"1.5\n\xff\xfe2\nabc\n15\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().count(), 2, "{out}");
    let err = stderr(&o);
    assert!(
        err.contains("line 2: '\\xff\\xfe2' is not UTF-8 text"),
        "{err}"
    );
    assert!(err.contains("line 3: 'abc' is not a number"), "{err}");
}

#[test]
fn resume_keeps_the_whole_run_and_records_every_change() {
    let dir = out_dir("whole");
    let o = train(
        &dir,
        &["--steps", "12", "--set", "train.checkpoint_every=4"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let before_summary = read(&dir.join("summary.json"));
    let before_metrics = read(&dir.join("metrics.jsonl"));
    // A finished run: said so, nothing changed.
    let o = resume(&dir, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("already finished"), "{}", stderr(&o));
    assert_eq!(read(&dir.join("summary.json")), before_summary);
    assert_eq!(read(&dir.join("metrics.jsonl")), before_metrics);
    // Shortening is refused, nothing changed.
    let o = resume(&dir, &["--steps", "8"]);
    assert_eq!(o.status.code(), Some(2), "input refused: exit 2");
    assert!(stderr(&o).contains("cannot be shortened"), "{}", stderr(&o));
    assert_eq!(read(&dir.join("summary.json")), before_summary);
    // Settings that make it another run are refused.
    let o = resume(&dir, &["--steps", "20", "--set", "train.seed=5"]);
    fails_saying(&o, "train.seed: 1 → 5");
    // Extending is written to config.toml and segments.json; resuming uses the run's backend.
    let o = resume(&dir, &["--steps", "20", "--set", "train.lr=2e-3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("resuming on the cpu backend"),
        "{}",
        stderr(&o)
    );
    let config = String::from_utf8(read(&dir.join("config.toml"))).unwrap();
    assert!(
        config.contains("steps = 20") && config.contains("lr = 0.002"),
        "{config}"
    );
    let segments: serde_json::Value =
        serde_json::from_slice(&read(&dir.join("segments.json"))).unwrap();
    let segments = segments.as_array().unwrap();
    assert_eq!(segments.len(), 2);
    assert_eq!(segments[1]["start_step"], 12);
    assert_eq!(segments[1]["status"], "finished");
    assert_eq!(segments[1]["backend"], "cpu");
    let changes = segments[1]["changes"].to_string();
    assert!(changes.contains("train.steps: 12 → 20"), "{changes}");
    // The summary describes the whole run.
    let s = summary(&dir);
    assert_eq!(s["steps"], 20);
    assert_eq!(s["segments"], 2);
    let metrics = String::from_utf8(read(&dir.join("metrics.jsonl"))).unwrap();
    let above: u64 = metrics
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["calls_above_est"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert_eq!(metrics.lines().count(), 20);
    assert_eq!(s["calls_above_est"], above);
    assert!(above > 0, "QAT ran and saw calls above the estimate");
    // Resuming again without --steps continues to 20 (the recorded count), i.e. finished.
    let o = resume(&dir, &[]);
    assert!(
        stderr(&o).contains("already finished: 20 of 20"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn checkpoints_of_other_runs_and_damaged_ones_are_skipped() {
    let dir = out_dir("origin");
    let other = out_dir("origin-other");
    let o = train(
        &dir,
        &["--steps", "12", "--set", "train.checkpoint_every=4"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = train(
        &other,
        &[
            "--steps",
            "16",
            "--set",
            "train.checkpoint_every=4",
            "--set",
            "train.seed=9",
            // every checkpoint kept: the cases below take its step 4
            "--set",
            "train.keep_checkpoints=10",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // Extend the run: its newest checkpoint is step 12. Put another seed's step 16 beside it
    // and damage step 12's tensor data (100 bytes flipped near the end).
    let ck = |d: &Path, s: u64| d.join(format!("checkpoints/step_{s}.safetensors"));
    std::fs::copy(ck(&other, 16), ck(&dir, 16)).unwrap();
    let mut bytes = read(&ck(&dir, 12));
    let n = bytes.len();
    for b in &mut bytes[n - 300..n - 200] {
        *b ^= 0x5a;
    }
    std::fs::write(ck(&dir, 12), &bytes).unwrap();
    // A temporary left by a killed process.
    let stale = dir.join("checkpoints/step_13.safetensors.tmp-999999999");
    std::fs::write(&stale, b"half").unwrap();
    let o = resume(&dir, &["--steps", "14"]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("step_16.safetensors: written for config fingerprint"),
        "{err}"
    );
    assert!(
        err.contains("step_12.safetensors") && err.contains("checksum mismatch"),
        "{err}"
    );
    assert!(
        err.contains("at step 8 from"),
        "falls back to the newest valid one: {err}"
    );
    assert!(!stale.exists(), "stale temporary removed");
    let segments = String::from_utf8(read(&dir.join("segments.json"))).unwrap();
    assert!(
        segments.contains("checksum mismatch") && segments.contains("removed"),
        "{segments}"
    );
    assert_eq!(summary(&dir)["steps"], 14);
    // With no valid checkpoint at all, the error names each and why.
    let lonely = out_dir("origin-lonely");
    let o = train(&lonely, &["--steps", "4"]);
    assert!(o.status.success());
    std::fs::remove_file(ck(&lonely, 4)).unwrap();
    std::fs::copy(ck(&other, 4), ck(&lonely, 4)).unwrap();
    let o = resume(&lonely, &["--steps", "8"]);
    fails_saying(&o, "no valid checkpoints");
    assert!(stderr(&o).contains("fingerprint"), "{}", stderr(&o));
    // A folder holding old checkpoints but no metrics is not silently reused.
    let reused = out_dir("origin-reused");
    std::fs::create_dir_all(reused.join("checkpoints")).unwrap();
    std::fs::copy(ck(&other, 4), ck(&reused, 4)).unwrap();
    let o = train(&reused, &["--steps", "4"]);
    fails_saying(&o, "holds checkpoints of an earlier run");
    assert!(!reused.join("metrics.jsonl").exists());
}

/// SIGTERM and SIGHUP stop like Ctrl-C: a checkpoint, a summary, exit 128 + signal.
#[cfg(unix)]
#[test]
fn sigterm_and_sighup_checkpoint_and_the_run_resumes() {
    for (signal, code) in [("-TERM", 143), ("-HUP", 129)] {
        let dir = out_dir(&format!("signal{code}"));
        let mut child = train_command(&dir, &["--steps", "100000"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_lines(&dir.join("metrics.jsonl"), 3);
        Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert_eq!(child.wait().unwrap().code(), Some(code), "{signal}");
        let s = summary(&dir);
        assert_eq!(s["status"], "interrupted");
        let steps = s["steps"].as_u64().unwrap();
        assert!(
            dir.join(format!("checkpoints/step_{steps}.safetensors"))
                .exists()
        );
        let o = resume(&dir, &["--steps", &(steps + 3).to_string()]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(summary(&dir)["steps"], steps + 3);
    }
}

/// The run folder survives SIGKILL: killed at random points (during steps, trace writes and
/// checkpoint writes) and resumed each time, it ends with metrics, trace and final
/// checkpoint identical to an uninterrupted run, and no temporary files.
#[cfg(unix)]
#[test]
fn kill_9_at_random_points_then_resume_is_bit_identical() {
    let steps = "120";
    let common = ["--steps", steps, "--set", "train.checkpoint_every=5"];
    let reference = out_dir("kill-ref");
    let o = train(&reference, &common);
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = out_dir("kill");
    let mut rng = hif8lab_scaling_rng(0x5eed);
    let mut kills = 0;
    let mut threshold = 8;
    let mut first = true;
    while kills < 4 && threshold < 110 {
        threshold += 6 + (rng() % 16) as usize;
        let mut cmd = if first {
            train_command(&dir, &common)
        } else {
            let mut c = Command::new(env!("CARGO_BIN_EXE_hif8lab"));
            c.args(["train", "--quiet", "--resume"]).arg(&dir);
            c
        };
        let mut child = cmd.stderr(Stdio::null()).spawn().unwrap();
        first = false;
        // Wait for the threshold, then a random extra moment (a step, a trace or a
        // checkpoint write may be under way).
        let start = std::time::Instant::now();
        loop {
            let lines = std::fs::read_to_string(dir.join("metrics.jsonl"))
                .map(|s| s.lines().count())
                .unwrap_or(0);
            if lines >= threshold || start.elapsed().as_secs() > 120 {
                break;
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_micros(rng() % 20_000));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            kills += 1;
        }
        let _ = child.wait();
    }
    assert!(kills >= 3, "only {kills} kills landed while training");
    // Finish.
    let o = resume(&dir, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let strip = |bytes: Vec<u8>| -> Vec<serde_json::Value> {
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().remove("tokens_per_s");
                v
            })
            .collect()
    };
    assert_eq!(
        strip(read(&dir.join("metrics.jsonl"))),
        strip(read(&reference.join("metrics.jsonl")))
    );
    assert!(
        read(&dir.join("trace.jsonl")) == read(&reference.join("trace.jsonl")),
        "trace"
    );
    let last = format!("checkpoints/step_{steps}.safetensors");
    assert!(
        read(&dir.join(&last)) == read(&reference.join(&last)),
        "final checkpoint"
    );
    for folder in [dir.clone(), dir.join("checkpoints")] {
        for e in std::fs::read_dir(&folder).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!name.contains(".tmp-"), "temporary left: {name}");
        }
    }
    let s = summary(&dir);
    assert_eq!(s["status"], "finished");
    assert_eq!(s["steps"], 120);
    assert_eq!(s["calls_above_est"], summary(&reference)["calls_above_est"]);
}

/// splitmix64 as a closure (the tests' own seeded randomness).
fn hif8lab_scaling_rng(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A GPU run resumes on the GPU (its own adapter) without being told; a resume told to use
/// another backend says so and records it.
#[test]
fn resume_stays_on_the_gpu_run_s_adapter_unless_told() {
    let dir = out_dir("gpu-resume");
    let d = dir.to_str().unwrap();
    let o = hif8lab(&[
        "train",
        "--preset",
        "smoke",
        "--backend",
        "gpu",
        "--quiet",
        "--steps",
        "6",
        "--set",
        "train.checkpoint_every=3",
        "--out",
        d,
    ]);
    if !o.status.success() {
        assert!(
            std::env::var("HIF8LAB_REQUIRE_GPU").as_deref() != Ok("1"),
            "GPU required: {}",
            stderr(&o)
        );
        eprintln!(
            "!!!!!!!! SKIPPING: no GPU adapter ({}) !!!!!!!!",
            stderr(&o)
        );
        return;
    }
    let o = resume(&dir, &["--steps", "9"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("resuming on the gpu backend"),
        "{}",
        stderr(&o)
    );
    let o = resume(&dir, &["--steps", "12", "--backend", "cpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("backend changed: gpu"),
        "{}",
        stderr(&o)
    );
    let segments: serde_json::Value =
        serde_json::from_slice(&read(&dir.join("segments.json"))).unwrap();
    let backends: Vec<&str> = segments
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["backend"].as_str().unwrap())
        .collect();
    assert_eq!(backends, ["gpu", "gpu", "cpu"]);
    assert_eq!(segments[0]["adapter"], segments[1]["adapter"]);
    assert!(
        segments[2]["notes"]
            .to_string()
            .contains("not bit-identical")
    );
    assert_eq!(summary(&dir)["steps"], 12);
}
