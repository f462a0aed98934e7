//! The files shipped with the app: the lessons' pretrained base
//! (`assets/lessons/base.safetensors`), the committed real-model grid's data
//! (`docs/results/real-smollm2/runs.jsonl.gz`) and the real model's outlier quantizers'
//! per-call trace (`docs/results/real-smollm2-dose/outliers/most_recent-low.trace.jsonl.gz`). Natively they are compiled in; the browser
//! fetches them from beside its page (`lessons/…`, copied there by `scripts/build-web.sh`)
//! at start, so they do not weigh on the wasm module, and what waits for them starts when
//! they arrive.

/// The page-relative paths the browser fetches them from.
pub const BASE_URL: &str = "lessons/base.safetensors";
/// See [`BASE_URL`].
pub const REAL_RUNS_URL: &str = "lessons/real-smollm2.jsonl.gz";
/// See [`BASE_URL`].
pub const OUTLIER_TRACE_URL: &str = "lessons/real-smollm2-outliers.trace.jsonl.gz";

/// The committed trace of the real model's three outlier quantizers (block11.down.A, the
/// ~1,700× one, block9.down.A and block26.down.A): every call of the dose study's
/// most_recent-low run, data order 0 (480 steps of SmolLM2-135M), from `hif8lab trace select`.
pub const OUTLIER_TRACE_FILE: &str =
    "docs/results/real-smollm2-dose/outliers/most_recent-low.trace.jsonl.gz";

/// The quantizer lesson 4's panels open on.
pub const OUTLIER_QUANTIZER: &str = "block11.down.A";

/// [`OUTLIER_TRACE_FILE`]'s bytes (compiled into native builds).
#[cfg(not(target_arch = "wasm32"))]
pub fn outlier_trace() -> &'static [u8] {
    include_bytes!(
        "../../../docs/results/real-smollm2-dose/outliers/most_recent-low.trace.jsonl.gz"
    )
}

/// Where the shipped files stand.
#[derive(Debug, Default)]
pub struct Shipped {
    /// Pretrain the lessons' base instead of starting from the shipped one.
    pub pretrain_base: bool,
    /// The shipped base is still being fetched (the browser).
    pub base_pending: bool,
    /// The real-model data is still being fetched (the browser).
    pub runs_pending: bool,
    /// The shipped base's fingerprint and knowledge score.
    pub base: Option<(String, f64)>,
    /// The real-model grid's data file, once fetched (the browser).
    pub real_runs: Option<Vec<u8>>,
    /// Judge the real-model lesson once its data is here.
    pub outliers_waiting: bool,
    /// The outlier trace is still being fetched (the browser).
    pub outlier_pending: bool,
    /// The outlier trace, once fetched (the browser).
    pub outlier_trace: Option<Vec<u8>>,
    /// The panel to open on the outlier trace once it is here.
    pub outlier_waiting: Option<crate::Tab>,
}

pub(crate) fn lesson_grid() -> Option<hif8lab_lab::grid::GridConfig> {
    hif8lab_lab::grid::GridConfig::preset("grid-lesson").ok()
}
