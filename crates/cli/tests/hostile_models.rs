//! Damaged or extreme models refused by name rather than run into garbage: non-finite weights,
//! config fields out of range, f16 exports that would overflow, and benchmark sizes that
//! measure nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::{Path, PathBuf};

use crate::common::{hif8lab, train_command, wait_for_lines};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hf")
        .join(name)
}

fn copy_of(name: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "hif8lab-hostile-models-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    for e in std::fs::read_dir(fixture(name)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
    }
    d
}

/// Rewrites the folder's single f32 model.safetensors with `edit` applied to one tensor.
fn edit_weight(dir: &Path, name: &str, edit: impl Fn(&mut Vec<f32>)) {
    let path = dir.join("model.safetensors");
    let ck = hif8lab_train::models::checkpoint::Checkpoint::load(&path).unwrap();
    let mut tensors = ck.tensors.clone();
    edit(&mut tensors.iter_mut().find(|t| t.name == name).unwrap().data);
    let weights: Vec<(String, Vec<usize>, Vec<f32>)> = tensors
        .into_iter()
        .map(|t| (t.name, t.shape, t.data))
        .collect();
    let bytes = hif8lab_train::models::hf::model_safetensors(
        &weights,
        hif8lab_train::models::hf::ExportDtype::F32,
    )
    .unwrap();
    std::fs::write(&path, bytes).unwrap();
}

fn fails_saying(args: &[&str], words: &[&str]) {
    let o = hif8lab(args);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} succeeded: {e}");
    for w in words {
        assert!(e.contains(w), "{args:?}: says {w}: {e}");
    }
    assert!(
        o.stdout.len() < 200,
        "{args:?}: printed output: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn damaged_weights_and_fields_out_of_range_are_refused_by_name() {
    let d = copy_of("tiny-mistral-f32", "nan");
    edit_weight(&d, "model.layers.1.mlp.up_proj.weight", |v| v[7] = f32::NAN);
    let p = d.to_str().unwrap();
    fails_saying(
        &["sample", p, "--prompt", "The", "--tokens", "3"],
        &["model.layers.1.mlp.up_proj.weight", "non-finite"],
    );
    fails_saying(&["eval", p, "--text", p], &["up_proj", "non-finite"]);
    let _ = std::fs::remove_dir_all(&d);
    for (field, value, says) in [
        ("rope_theta", "0.0", "'rope_theta'"),
        ("rms_norm_eps", "-1.0", "'rms_norm_eps'"),
        ("num_key_value_heads", "3", "num_key_value_heads 3"),
    ] {
        let d = copy_of("tiny-mistral-f32", field);
        let cfg = d.join("config.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
        v[field] = serde_json::from_str(value).unwrap();
        if field == "rope_theta"
            && let Some(r) = v.get_mut("rope_parameters")
        {
            r["rope_theta"] = serde_json::from_str(value).unwrap();
        }
        std::fs::write(&cfg, v.to_string()).unwrap();
        fails_saying(
            &["sample", d.to_str().unwrap(), "--tokens", "3"],
            &["config.json", says],
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn an_f16_export_that_would_overflow_is_refused_unless_allowed() {
    let d = copy_of("tiny-mistral-f32", "f16");
    edit_weight(&d, "model.layers.0.mlp.down_proj.weight", |v| v[3] = 1.0e6);
    let run =
        std::env::temp_dir().join(format!("hif8lab-hostile-models-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&run);
    let o = hif8lab(&[
        "train",
        "--init-from",
        d.to_str().unwrap(),
        "--preset",
        "smoke",
        "--steps",
        "1",
        "--out",
        run.to_str().unwrap(),
        "--backend",
        "cpu",
        "--quiet",
        "--set",
        "train.lr=0",
        "--set",
        "model.context=16",
        "--set",
        "train.eval_every=0",
        "--set",
        "qat.enabled=false",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = run.with_extension("f16");
    let _ = std::fs::remove_dir_all(&out);
    let (r, x) = (run.to_str().unwrap(), out.to_str().unwrap());
    fails_saying(
        &["export", "hf", r, "--out", x, "--dtype", "f16"],
        &["1 weights", "down_proj", "--allow-overflow"],
    );
    assert!(!out.exists(), "nothing written");
    let o = hif8lab(&[
        "export",
        "hf",
        r,
        "--out",
        x,
        "--dtype",
        "f16",
        "--allow-overflow",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("written as ±inf"));
    for p in [&d, &run, &out] {
        let _ = std::fs::remove_dir_all(p);
    }
}

#[test]
fn benchmarks_of_nothing_are_refused() {
    for args in [
        &["bench", "codec", "--elements", "0"][..],
        &["bench", "train", "--steps", "0"],
        &["bench", "codec", "--elements", "18446744073709551615"],
        &[
            "trace",
            "synth",
            "--pattern",
            "spike",
            "--calls",
            "18446744073709551615",
        ],
    ] {
        let o = hif8lab(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}

/// One writer per run folder: while a run trains, a second `train --out` of the same folder
/// and a `--resume` of it are refused naming the writer's pid; readers still read; after
/// the writer is killed (-9) the folder resumes at once, and its metrics hold each step once.
#[test]
fn a_run_folder_has_one_writer_and_a_killed_one_resumes() {
    let dir = std::env::temp_dir().join(format!("hif8lab-lock-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut first = train_command(
        &dir,
        &["--steps", "400", "--set", "train.checkpoint_every=5"],
    )
    .spawn()
    .unwrap();
    wait_for_lines(&dir.join("metrics.jsonl"), 3);
    let pid = first.id().to_string();
    let second = train_command(&dir, &["--steps", "5", "--set", "train.lr=0.002"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "a second writer ran: {e}");
    assert!(e.contains("another process") && e.contains(&pid), "{e}");
    let o = hif8lab(&["train", "--resume", dir.to_str().unwrap(), "--quiet"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains(&pid),
        "resume while training: {e}"
    );
    // A reader is not a writer.
    wait_for_lines(&dir.join("metrics.jsonl"), 12);
    first.kill().unwrap();
    first.wait().unwrap();
    let done = std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    let target = (done + 5).to_string();
    let o = hif8lab(&[
        "train",
        "--resume",
        dir.to_str().unwrap(),
        "--quiet",
        "--steps",
        &target,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    let steps: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()?
                .get("step")?
                .as_u64()
        })
        .collect();
    let mut unique = steps.clone();
    unique.dedup();
    assert_eq!(steps, unique, "each step once");
    assert_eq!(steps.last(), Some(&(done + 4)));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Results that cannot be written: a full disk is an error naming standard output (exit
/// non-zero, no panic); a reader that went away ends the program quietly with 141.
#[test]
fn results_to_a_full_disk_fail_and_to_a_closed_pipe_end_quietly() {
    let bin = env!("CARGO_BIN_EXE_hif8lab");
    let trace = std::env::temp_dir().join(format!("hif8lab-out-trace-{}.csv", std::process::id()));
    let o = hif8lab(&[
        "trace",
        "synth",
        "--pattern",
        "spike",
        "--calls",
        "200",
        "--out",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = trace.to_str().unwrap();
    let run = std::env::temp_dir().join(format!("hif8lab-out-dry-{}", std::process::id()));
    for cmd in [
        format!("'{bin}' replay '{t}' --json"),
        format!("'{bin}' replay '{t}'"),
        format!("'{bin}' export te-recipe"),
        format!(
            "'{bin}' train --preset smoke --dry-run --out '{}'",
            run.display()
        ),
        format!("'{bin}' lesson list"),
    ] {
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{cmd} > /dev/full"))
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{cmd} > /dev/full succeeded");
        assert!(
            e.contains("standard output") && !e.contains("panicked"),
            "{cmd}: {e}"
        );
        let o = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "{cmd} | head -c 1 >/dev/null; echo \"status ${{PIPESTATUS[0]}}\""
            ))
            .output()
            .unwrap();
        let (out, e) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert!(!e.contains("panicked"), "{cmd} | head: {e}");
        // A short result may fit the pipe before the reader leaves (status 0); else 141.
        assert!(
            out.contains("status 141") || out.contains("status 0"),
            "{cmd} | head: {out} {e}"
        );
    }
    let _ = std::fs::remove_file(&trace);
}

/// A grid configuration with a rate that is not a number is refused by name (it panicked
/// while building the runs' configs).
#[test]
fn grid_configs_with_nan_rates_are_refused_by_name() {
    let preset = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/presets/grid-micro.toml");
    let text = std::fs::read_to_string(preset).unwrap();
    for (from, to) in [
        ("lr = 3e-3", "lr = nan"),
        ("lr_low = 1e-4", "lr_low = nan"),
        ("lr_high = 1e-3", "lr_high = inf"),
    ] {
        assert!(text.contains(from), "{from}");
        let cfg =
            std::env::temp_dir().join(format!("hif8lab-nan-grid-{}.toml", std::process::id()));
        std::fs::write(&cfg, text.replace(from, to)).unwrap();
        let out = std::env::temp_dir().join(format!("hif8lab-nan-grid-out-{}", std::process::id()));
        let (c, o) = (cfg.to_str().unwrap(), out.to_str().unwrap());
        for args in [
            vec!["pretrain", "--config", c, "--out", o],
            vec!["grid", "--config", c, "--out", o],
            vec!["lesson", "run", "saturation", "--config", c, "--out", o],
        ] {
            let r = hif8lab(&args);
            let e = String::from_utf8_lossy(&r.stderr);
            assert_eq!(r.status.code(), Some(2), "{args:?} ({to}): {e}");
            assert!(
                e.contains("lr") && !e.contains("panicked"),
                "{args:?} ({to}): {e}"
            );
        }
        let _ = std::fs::remove_file(&cfg);
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// An error says each thing once: the OS error of a missing file, the folder that could not
/// be created.
#[test]
fn errors_say_each_thing_once() {
    let o = hif8lab(&["replay", "/nonexistent/x.csv"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.matches("No such file").count(), 1, "{e}");
    let o = hif8lab(&[
        "train",
        "--preset",
        "smoke",
        "--steps",
        "1",
        "--out",
        "/proc/hif8lab-nope",
        "--quiet",
        "--backend",
        "cpu",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert_eq!(e.matches("/proc/hif8lab-nope").count(), 1, "{e}");
}

/// A grid folder's finished runs are reused only for the configuration they ran: another
/// d_model or rate over the same folder is refused naming the keys that differ (and
/// results.md is not rewritten with the old numbers).
#[test]
fn grid_runs_of_another_config_are_not_reused() {
    let preset = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/presets/grid-micro.toml");
    let text = std::fs::read_to_string(preset).unwrap();
    let out = std::env::temp_dir().join(format!("hif8lab-reuse-grid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = out.to_str().unwrap();
    let first = hif8lab(&[
        "grid",
        "--preset",
        "grid-micro",
        "--backend",
        "cpu",
        "--out",
        o,
        "--runs",
        "baseline-high",
    ]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let results = std::fs::read(out.join("results.md")).unwrap();
    // The same configuration again: reused.
    let again = hif8lab(&[
        "grid",
        "--preset",
        "grid-micro",
        "--backend",
        "cpu",
        "--out",
        o,
        "--runs",
        "baseline-high",
    ]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    for (from, to, key) in [
        ("d_model = 32", "d_model = 48", "model.d_model"),
        ("lr_high = 1e-3", "lr_high = 2e-3", "train.lr"),
    ] {
        let cfg = out.with_extension(format!("{}.toml", key.replace('.', "-")));
        std::fs::write(&cfg, text.replace(from, to)).unwrap();
        let r = hif8lab(&[
            "grid",
            "--config",
            cfg.to_str().unwrap(),
            "--backend",
            "cpu",
            "--out",
            o,
            "--runs",
            "baseline-high",
        ]);
        let e = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success(), "{key}: reused: {e}");
        assert!(
            e.contains(key) && e.contains("another configuration"),
            "{key}: {e}"
        );
        let _ = std::fs::remove_file(&cfg);
    }
    assert_eq!(
        std::fs::read(out.join("results.md")).unwrap(),
        results,
        "results.md untouched"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// `export hf --out` a symbolic link: through it to the empty folder it names; a dangling
/// one refused naming the link and its target. `export te-recipe --config` takes a run's
/// own config.toml.
#[test]
fn export_through_links_and_te_recipe_of_a_run_config() {
    let base = std::env::temp_dir().join(format!("hif8lab-links-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let run = base.join("run");
    let o = train_command(&run, &["--steps", "1"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = run.to_str().unwrap();
    let target = base.join("empty");
    std::fs::create_dir_all(&target).unwrap();
    let link = base.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = hif8lab(&["export", "hf", r, "--out", link.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(link.join("config.json").is_file() && target.join("model.safetensors").is_file());
    let dangling = base.join("dangling");
    std::os::unix::fs::symlink(base.join("nowhere"), &dangling).unwrap();
    let o = hif8lab(&["export", "hf", r, "--out", dangling.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("symbolic link") && e.contains("nowhere"),
        "{e}"
    );
    let o = hif8lab(&[
        "export",
        "te-recipe",
        "--config",
        run.join("config.toml").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("DelayedScaling"));
    let _ = std::fs::remove_dir_all(&base);
}

/// A folder whose safetensors headers declare more weights than memory holds is refused
/// from the headers alone (dry run included); a dry run checks the starting weights' shapes.
#[test]
fn oversized_headers_and_mismatched_shapes_are_refused_before_training() {
    let d = copy_of("tiny-mistral-f32", "huge");
    let header = br#"{"model.embed_tokens.weight":{"dtype":"F32","shape":[68000000000],"data_offsets":[0,4]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&[0u8; 4]);
    std::fs::write(d.join("model.safetensors"), bytes).unwrap();
    let p = d.to_str().unwrap();
    let start = std::time::Instant::now();
    for args in [
        vec![
            "train",
            "--init-from",
            p,
            "--preset",
            "smoke",
            "--dry-run",
            "--out",
            "/tmp/hif8lab-never",
        ],
        vec!["eval", p, "--text", p],
    ] {
        let o = hif8lab(&args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && e.contains("headers declare 68000000000"),
            "{args:?}: {e}"
        );
    }
    assert!(start.elapsed().as_secs() < 30);
    let _ = std::fs::remove_dir_all(&d);
    let o = hif8lab(&[
        "train",
        "--init-from",
        fixture("tiny-mistral-f32").to_str().unwrap(),
        "--preset",
        "smoke",
        "--set",
        "model.d_model=128",
        "--dry-run",
        "--out",
        "/tmp/hif8lab-never",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "dry run said it fits: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        e.contains("model.embed_tokens.weight") && e.contains("[384, 128]"),
        "{e}"
    );
}

/// A bad value that came from the model's config.json is blamed on it, not on a `--set`
/// the user never typed.
#[test]
fn values_from_a_models_config_are_not_blamed_on_a_set() {
    let d = copy_of("tiny-mistral-f32", "ctx1");
    let cfg = d.join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    v["max_position_embeddings"] = serde_json::json!(1);
    std::fs::write(&cfg, v.to_string()).unwrap();
    let o = hif8lab(&[
        "train",
        "--init-from",
        d.to_str().unwrap(),
        "--preset",
        "smoke",
        "--dry-run",
        "--out",
        "/tmp/hif8lab-never",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--init-from") && e.contains("from its config") && !e.contains("--set"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A corpus too short for one window is refused before a run folder exists, naming the
/// keys (data.bytes, or the corpus file); the --out stays free.
#[test]
fn corpora_too_short_are_refused_naming_the_key_and_leave_no_folder() {
    let empty = std::env::temp_dir().join(format!("hif8lab-empty-{}.txt", std::process::id()));
    std::fs::write(&empty, "").unwrap();
    let corpus = format!("data.corpus={}", empty.display());
    for (set, says) in [
        ("data.bytes=10", "data.bytes = 10"),
        (corpus.as_str(), "(the file)"),
    ] {
        let out = std::env::temp_dir().join(format!("hif8lab-short-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let o = train_command(&out, &["--set", set]).output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && e.contains(says) && e.contains("model.context + 2"),
            "{set}: {e}"
        );
        assert!(!out.exists(), "{set}: a failed run left {}", out.display());
    }
    let _ = std::fs::remove_file(&empty);
}

/// The loss of every step a run folder's metrics record, as written.
fn losses(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            Some(
                serde_json::from_str::<serde_json::Value>(l)
                    .ok()?
                    .get("loss")?
                    .to_string(),
            )
        })
        .collect()
}

/// `train {common} --out {out}` to the end: the run an interrupted one must equal.
fn train_uninterrupted(common: &str, out: &Path) {
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "'{}' train {common} --out '{}'",
            env!("CARGO_BIN_EXE_hif8lab"),
            out.display()
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A file size limit (`ulimit -f`, SIGXFSZ) or a full disk while the trace is appended: the
/// error says the folder is resumable, and `--resume` finishes the run — from step 0 when no
/// checkpoint was written yet — with the same losses as an uninterrupted run.
#[test]
fn a_full_disk_leaves_a_resumable_folder() {
    let bin = env!("CARGO_BIN_EXE_hif8lab");
    let dir = std::env::temp_dir().join(format!("hif8lab-fsz-{}", std::process::id()));
    let whole = dir.with_extension("whole");
    for d in [&dir, &whole] {
        let _ = std::fs::remove_dir_all(d);
    }
    let common = "--preset smoke --steps 30 --quiet --backend cpu --set train.checkpoint_every=10";
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -f 40; '{bin}' train {common} --out '{}'",
            dir.display()
        ))
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("File too large") && e.contains("left resumable"),
        "{e}"
    );
    let o = hif8lab(&["train", "--resume", dir.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    train_uninterrupted(common, &whole);
    assert_eq!(
        losses(&dir),
        losses(&whole),
        "the resumed run is the uninterrupted one"
    );
    for d in [&dir, &whole] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A full disk (ENOSPC, a small tmpfs in a user and mount namespace): while the trace is
/// appended (no checkpoint yet) and while a checkpoint is written. Each time the error says
/// the folder is resumable, and the folder, copied off the full disk, resumes to the losses
/// of an uninterrupted run.
#[test]
fn no_space_left_leaves_a_resumable_folder() {
    let bin = env!("CARGO_BIN_EXE_hif8lab");
    let base = std::env::temp_dir().join(format!("hif8lab-enospc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("mnt")).unwrap();
    let common = "--preset smoke --steps 30 --quiet --backend cpu --set train.checkpoint_every=10";
    let whole = base.join("whole");
    train_uninterrupted(common, &whole);
    // 100 KB: the trace fills it before step 10's checkpoint; 4 MB: step 20's checkpoint.
    for (size, when) in [("100k", "trace"), ("4m", "checkpoint")] {
        let kept = base.join(format!("kept-{when}"));
        let mnt = base.join("mnt");
        let o = std::process::Command::new("unshare")
            .args(["-rm", "bash", "-c"])
            .arg(format!(
                "mount -t tmpfs -o size={size} tmpfs '{m}' || exit 99; \
                 '{bin}' train {common} --out '{m}/run'; code=$?; \
                 cp -a '{m}/run' '{k}'; exit $code",
                m = mnt.display(),
                k = kept.display()
            ))
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_ne!(
            o.status.code(),
            Some(99),
            "no tmpfs in a user namespace: {e}"
        );
        assert_eq!(o.status.code(), Some(1), "{when}: {e}");
        assert!(
            e.contains("No space left on device") && e.contains("left resumable"),
            "{when}: {e}"
        );
        let o = hif8lab(&["train", "--resume", kept.to_str().unwrap(), "--quiet"]);
        assert!(
            o.status.success(),
            "{when}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            losses(&kept),
            losses(&whole),
            "{when}: resumed = uninterrupted"
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// Only the newest `train.keep_checkpoints` (default 3) checkpoints stay; 0 is refused.
#[test]
fn old_checkpoints_are_pruned() {
    let dir = std::env::temp_dir().join(format!("hif8lab-prune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = train_command(
        &dir,
        &["--steps", "40", "--set", "train.checkpoint_every=5"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut names: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "step_30.safetensors",
            "step_35.safetensors",
            "step_40.safetensors"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
    let o = train_command(&dir, &["--steps", "4", "--set", "train.keep_checkpoints=0"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("train.keep_checkpoints"), "{e}");
}

#[test]
fn a_model_whose_forward_pass_overflows_is_refused_naming_the_model_and_the_block() {
    let d = copy_of("tiny-mistral-f32", "overflow");
    // Block 1's gate and up projections at 1e20: their product (about 1e42) passes f32's
    // largest value in the SwiGLU, though every weight is finite.
    for w in ["gate_proj", "up_proj"] {
        edit_weight(&d, &format!("model.layers.1.mlp.{w}.weight"), |v| {
            v.iter_mut().for_each(|x| *x = 1.0e20);
        });
    }
    let p = d.to_str().unwrap();
    let text = d.join("config.json");
    let t = text.to_str().unwrap();
    let says = [p, "overflows", "block 1 (model.layers.1)"];
    fails_saying(&["eval", p, "--text", t, "--backend", "cpu"], &says);
    fails_saying(&["probe", p, "--backend", "cpu"], &says);
    fails_saying(
        &[
            "sample",
            p,
            "--prompt",
            "The",
            "--tokens",
            "3",
            "--backend",
            "cpu",
        ],
        &says,
    );
    for args in [
        vec!["eval", p, "--text", t, "--backend", "cpu"],
        vec!["probe", p, "--backend", "cpu"],
    ] {
        assert_eq!(
            hif8lab(&args).status.code(),
            Some(2),
            "{args:?}: input refused"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}
