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
    hif8lab_tests::assert_every_test_file_runs(env!("CARGO_MANIFEST_DIR"), &MODULES, "cli");
}
