//! The command line's end-to-end tests, in one test binary: each module is one of the files
//! beside this one (named where the docs cite them, so they stay where they are). One binary
//! links once instead of ten times (docs/benchmarks.md, "Test binaries"). `codec.rs` and
//! `scaling.rs` stay binaries of their own: `scripts/test.sh --quick` runs them by name.
//! [`every_test_file_runs`] fails when a file in `tests/` is in neither place (it would never
//! run: the crate sets `autotests = false`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

mod common;

mod evals;
mod gguf;
mod grid;
mod hf;
mod hostile;
mod hostile_gguf;
mod hostile_models;
mod lessons;
mod probe;
mod train;

/// The modules above.
const MODULES: [&str; 10] = [
    "evals",
    "gguf",
    "grid",
    "hf",
    "hostile",
    "hostile_gguf",
    "hostile_models",
    "lessons",
    "probe",
    "train",
];

#[test]
fn every_test_file_runs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let files = std::fs::read_dir(root.join("tests")).expect("tests/");
    for entry in files.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        let own_binary = manifest.contains(&format!("path = \"tests/{name}\""));
        assert!(
            MODULES.contains(&stem) || own_binary,
            "tests/{name} is neither a module of tests/cli.rs nor a [[test]] of Cargo.toml: it would never run"
        );
    }
}
