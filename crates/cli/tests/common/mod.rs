//! What the end-to-end tests of the `hif8lab` binary share.

use std::process::{Command, Output};

/// Runs `hif8lab ARGS…` to completion.
pub fn hif8lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args(args)
        .output()
        .expect("run hif8lab")
}
