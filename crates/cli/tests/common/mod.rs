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
