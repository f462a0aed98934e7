//! The files shipped with the app: the lessons' pretrained base
//! (`assets/lessons/base.safetensors`) and the committed real-model grid's data
//! (`docs/results/real-smollm2/runs.jsonl.gz`). Natively they are compiled in; the browser
//! fetches them from beside its page (`lessons/…`, copied there by `scripts/build-web.sh`)
//! at start, so they do not weigh on the wasm module, and what waits for them starts when
//! they arrive.

use crate::HifApp;

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

fn lesson_grid() -> Option<hif8lab_lab::grid::GridConfig> {
    hif8lab_lab::grid::GridConfig::preset("grid-lesson").ok()
}

impl HifApp {
    /// Takes the shipped base in `bytes`: notes its fingerprint and, unless asked to
    /// pretrain, starts the lessons from it (when it matches the `grid-lesson` preset).
    pub fn adopt_base_bytes(&mut self, bytes: &[u8]) {
        let Some(grid) = lesson_grid() else {
            return;
        };
        if let Some(b) = hif8lab_lab::lesson::base::shipped_from(bytes, &grid) {
            let fingerprint = b.fingerprint();
            self.shipped.base = Some((fingerprint.clone(), b.probes.knowledge_acc_norm));
            if !self.shipped.pretrain_base && self.lessons.base.is_none() {
                self.lessons.base_fingerprint = Some(fingerprint);
                self.lessons.base = Some(b.weights);
                self.lessons.base_probes = Some(b.probes);
                self.lessons.base_from = "shipped";
            }
        }
    }

    /// Whether the shipped base is still on its way (the browser) and is to be used: the
    /// caller starts what it wanted once it arrives ([`HifApp::shipped_arrived`]).
    pub fn awaits_shipped_base(&mut self) -> bool {
        let waits =
            self.lessons.base.is_none() && self.shipped.base_pending && !self.shipped.pretrain_base;
        if waits {
            self.messages.status = "Loading the lessons' shipped base model…".into();
        }
        waits
    }

    /// The shipped base compiled into this build.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn adopt_shipped_base(&mut self) {
        self.adopt_base_bytes(hif8lab_lab::lesson::base::shipped_bytes());
    }

    /// A shipped file the browser fetched (`url`: [`BASE_URL`] or [`REAL_RUNS_URL`]), or why
    /// it could not; starts what waited for it.
    pub fn shipped_arrived(&mut self, url: &str, bytes: Result<Vec<u8>, String>) {
        match (url, bytes) {
            (BASE_URL, result) => {
                self.shipped.base_pending = false;
                match result {
                    Ok(b) => self.adopt_base_bytes(&b),
                    Err(e) => {
                        self.messages.status =
                            format!("No shipped base ({e}): lessons pretrain it.")
                    }
                }
                // What waited starts now: from the shipped base, or pretraining it.
                if std::mem::take(&mut self.lessons.after_base) {
                    self.start_from_base(|| {});
                }
                if std::mem::take(&mut self.lessons.scenario_waiting) {
                    self.run_scenario_in_memory();
                }
            }
            (REAL_RUNS_URL, result) => {
                self.shipped.runs_pending = false;
                match result {
                    Ok(b) => self.shipped.real_runs = Some(b),
                    Err(e) => self.messages.status = format!("No real-model runs ({e})."),
                }
                if std::mem::take(&mut self.shipped.outliers_waiting) {
                    self.judge_real_outliers();
                }
            }
            _ => {}
        }
    }

    /// The real-model lesson's verdict, judged from the committed SmolLM2-135M grid's data
    /// (shipped with the app; nothing trains).
    pub fn judge_real_outliers(&mut self) {
        use hif8lab_lab::lesson::outliers;
        #[cfg(not(target_arch = "wasm32"))]
        let data = outliers::committed();
        #[cfg(target_arch = "wasm32")]
        let data = match &self.shipped.real_runs {
            Some(b) => outliers::committed_from(b),
            None if self.shipped.runs_pending => {
                self.shipped.outliers_waiting = true;
                self.messages.status = "Loading the committed real-model runs…".into();
                return;
            }
            None => Err(format!("{REAL_RUNS_URL} could not be fetched")),
        };
        match data.and_then(|d| outliers::judge(outliers::COMMITTED_FILE, &d)) {
            Ok(r) => {
                self.messages.status = format!(
                    "Judged the committed real-model runs: {} of {} claims hold.",
                    r.claims.iter().filter(|c| c.holds).count(),
                    r.claims.len()
                );
                self.lessons.views.clear();
                self.lessons.report = Some(r);
            }
            Err(e) => self.messages.status = format!("Cannot judge the real-model runs: {e}"),
        }
    }
}
