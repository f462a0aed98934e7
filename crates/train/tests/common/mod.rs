//! What the trainer's integration tests share.

// Each test file compiles this module on its own.
#![allow(dead_code)]

use hif8lab_engine::gpu::GpuBackend;

/// A GPU backend; without an adapter `None` (and a loud note), or a failure when
/// `HIF8LAB_REQUIRE_GPU=1` (set by scripts/test.sh, so CI never skips).
pub fn gpu() -> Option<GpuBackend> {
    match GpuBackend::new_blocking() {
        Ok(g) => Some(g),
        Err(e) => {
            assert!(
                std::env::var("HIF8LAB_REQUIRE_GPU").as_deref() != Ok("1"),
                "no GPU: {e}"
            );
            eprintln!("!!!!!!!! SKIPPING GPU TESTS: no adapter ({e}) !!!!!!!!");
            None
        }
    }
}
