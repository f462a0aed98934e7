//! The files shipped with the app: the lessons' pretrained base
//! (`assets/lessons/base.safetensors`) and the committed real-model grid's data
//! (`docs/results/real-smollm2/runs.jsonl.gz`). Natively they are compiled in; the browser
//! fetches them from beside its page (`lessons/…`, copied there by `scripts/build-web.sh`)
//! at start, so they do not weigh on the wasm module, and what waits for them starts when
//! they arrive.

/// The page-relative paths the browser fetches them from.
pub const BASE_URL: &str = "lessons/base.safetensors";
/// See [`BASE_URL`].
pub const REAL_RUNS_URL: &str = "lessons/real-smollm2.jsonl.gz";

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
}

pub(crate) fn lesson_grid() -> Option<hif8lab_lab::grid::GridConfig> {
    hif8lab_lab::grid::GridConfig::preset("grid-lesson").ok()
}
