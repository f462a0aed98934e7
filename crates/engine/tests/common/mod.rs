//! Helpers shared by the GPU test files.

use std::sync::OnceLock;

use hif8lab_engine::gpu::GpuBackend;

/// The shared test adapter. Without one this panics when `HIF8LAB_REQUIRE_GPU=1` (set by
/// scripts/test.sh, hence in CI); elsewhere it returns `None` after a loud line.
pub fn gpu() -> Option<&'static GpuBackend> {
    static GPU: OnceLock<Option<GpuBackend>> = OnceLock::new();
    GPU.get_or_init(|| match GpuBackend::new_blocking() {
        Ok(g) => {
            eprintln!("GPU tests on adapter: {:?}", g.adapter_info().name);
            Some(g)
        }
        Err(e) => {
            if std::env::var("HIF8LAB_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("HIF8LAB_REQUIRE_GPU=1 but no GPU adapter: {e}");
            }
            eprintln!("!!!!!!!! SKIPPING GPU TESTS: no adapter ({e}) !!!!!!!!");
            None
        }
    })
    .as_ref()
}
