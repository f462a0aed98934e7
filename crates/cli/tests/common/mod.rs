//! What the end-to-end tests of the `hif8lab` binary share.

// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `hif8lab ARGS…` to completion.
pub fn hif8lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args(args)
        .output()
        .expect("run hif8lab")
}

/// `hif8lab train --preset smoke --backend cpu --quiet --out DIR` plus `extra`.
pub fn train_command(dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hif8lab"));
    cmd.args([
        "train",
        "--preset",
        "smoke",
        "--backend",
        "cpu",
        "--quiet",
        "--out",
    ])
    .arg(dir)
    .args(extra);
    cmd
}

/// Waits until the file at `path` has at least `lines` lines (a run has started).
pub fn wait_for_lines(path: &Path, lines: usize) {
    let start = std::time::Instant::now();
    while std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
        < lines
    {
        assert!(start.elapsed().as_secs() < 60, "training did not start");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The command succeeded (else its output in the failure); its stdout.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A JSON file's value.
pub fn json_file(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A path as the `&str` of a command-line argument.
pub fn arg(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A fresh temporary path (removed if it exists) for test `name`.
pub fn tmp(prefix: &str, name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("hif8lab-{prefix}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}
