//! # hif8lab-app
//!
//! The desktop dashboard (eframe + egui_plot): pick a preset, edit the key settings (checked
//! live, Start disabled while invalid), train on a background thread, and watch — while it
//! trains — the loss, every quantizer's amax against each estimator's prediction on a log2
//! axis with HiF8's tier lines, a block × step saturation heatmap, and the shadow comparison
//! of all estimators on the same calls. A saved run folder opens in the same panels.
//!
//! Draws, never computes: training lives in `hif8lab-train` (run by [`training`]), the data
//! model of the panels in [`state`].

mod app;
pub use app::HifApp;
pub mod charts;
pub mod glossary;
pub mod hf_model;
pub mod jobs;
pub mod layout;
pub mod panels;
pub mod png;
pub mod scenario;
pub mod settings;
pub mod shipped;
pub mod state;
pub mod theme;
pub mod training;
#[cfg(not(target_arch = "wasm32"))]
pub mod watch;
#[cfg(target_arch = "wasm32")]
pub mod web;
pub mod words;

use std::path::PathBuf;

use hif8lab_train::RunConfig;

pub use crate::settings::Settings;
use crate::state::RunView;
use crate::training::{Device, Msg, RunExtras, Training};
use std::sync::Arc;

mod frames;
pub use frames::*;

mod selection;
pub use selection::*;

/// Start-up options (the desktop flags).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// Preset to select.
    pub preset: Option<String>,
    /// Start training at once.
    pub autostart: bool,
    /// A run folder to open.
    pub open: Option<PathBuf>,
    /// A run folder to follow while another process writes it (`--watch`).
    pub watch: Option<PathBuf>,
    /// A run folder to read as `--open` would, report and quit (`--check-open`).
    pub check_open: Option<PathBuf>,
    /// A trace (JSONL, CSV or Transformer Engine log) to replay and view.
    pub trace: Option<PathBuf>,
    /// The panel to show first.
    pub tab: Option<Tab>,
    /// A lesson to open.
    pub lesson: Option<String>,
    /// The backend asked for (`--backend`, `?backend=`): `cpu` trains on the CPU even where
    /// a GPU device is available; unset, the desktop app trains on the CPU and the page on
    /// WebGPU where it has it.
    pub backend: Option<hif8lab_engine::BackendChoice>,
    /// Once training finishes, save the shown panel as this PNG (in `exports/`) — what the
    /// screenshot script uses to check the export end to end.
    pub png_after: Option<String>,
    /// Measure frame times: draw a synthetic 64-quantizer × 10,000-step run on every panel
    /// for this many frames each, print the figures and quit.
    pub bench_frames: Option<usize>,
    /// A Hugging Face Llama folder to continue training from.
    pub init_from: Option<PathBuf>,
    /// Pretrain the lessons' base here instead of starting from the shipped one (the same
    /// bits; what a test compares).
    pub pretrain_base: bool,
}

/// The runs the app holds: the live (or opened) run, its matched baseline — a run like any
/// other — and earlier runs for comparison.
#[derive(Default)]
pub struct Runs {
    /// The live or opened run.
    pub live: Option<RunView>,
    /// The matched high-precision baseline, when trained alongside.
    pub baseline: Option<RunView>,
    /// Earlier and opened runs, for the Runs panel (newest last).
    pub earlier: Vec<RunView>,
    /// Which of `earlier` are overlaid (same length).
    pub overlay: Vec<bool>,
    /// Quantizers of the live run in bank order (for choosing the binned tensor).
    pub quantizers: Vec<hif8lab_scaling::QuantizerId>,
}

impl Runs {
    /// The baseline's loss curve (empty without one).
    pub fn baseline_loss(&self) -> &[[f64; 2]] {
        self.baseline.as_ref().map_or(&[], |b| &b.loss)
    }

    /// The baseline's probe scores (empty without one).
    pub fn baseline_probes(&self) -> &[hif8lab_train::ProbeScores] {
        self.baseline.as_ref().map_or(&[], |b| &b.probes)
    }
}

/// What the current or last run trains on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// The browser's WebGPU.
    WebGpu,
    /// A native GPU through wgpu.
    Gpu,
    /// The CPU backend.
    Cpu,
}

impl BackendKind {
    /// `webgpu`, `gpu` or `cpu` (the page's snapshot field).
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::WebGpu => "webgpu",
            BackendKind::Gpu => "gpu",
            BackendKind::Cpu => "cpu",
        }
    }
}

/// The form's check: the settings it was made for, each field's message, the whole config's
/// verdict (Ok: the memory it needs, in one line), and the model FLOPs of its whole run (what
/// the form's time estimate divides by this device's pace; None for an invalid config).
pub type FormCheck = (
    Settings,
    Vec<Option<String>>,
    Result<String, String>,
    Option<f64>,
);

/// Heatmaps per role with what they were computed for: (view revision, columns, count).
pub type HeatCache = ((u64, usize, HeatValue), Vec<Vec<u64>>);

/// Where the app's lesson scenarios write their runs (as `hif8lab lesson run` does).
pub const LESSON_OUT: &str = "runs/lessons-grid-lesson";

/// Most earlier runs kept for comparison.
pub const MAX_RUNS: usize = 12;

/// What the user is told.
#[derive(Debug, Default)]
pub struct Messages {
    /// Last status line (a message to the user; nothing decides on it).
    pub status: String,
    /// A standing notice (e.g. why training runs on the CPU in the browser).
    pub notice: Option<String>,
    /// The last training error.
    pub error: Option<String>,
    /// The GPU kernels a run's device compiled before its first step (the last count's
    /// total), said once all are.
    pub kernels: Option<usize>,
    /// While the first step of a run is under way: when it began and the line it extends
    /// with the time so far.
    pub first_step: Option<(web_time::Instant, String)>,
}

impl Messages {
    /// The status while the first step runs: what it is doing and for how long so far.
    pub fn first_step_words(base: &str, seconds: f64) -> String {
        format!(
            "{base} First step running ({seconds:.0} s so far): every kernel runs on the device for the first time — the forward pass, the backward pass and AdamW — which takes longest (tens of seconds on a software WebGPU adapter); later steps are faster…"
        )
    }
}

/// What trains.
pub struct DeviceChoice {
    /// eframe's GPU device, when it renders with wgpu.
    pub gpu: Option<Device>,
    /// Drive training from the frame loop instead of a thread (always in the browser).
    pub frame_loop: bool,
    /// The backend of the current or last run.
    pub backend: BackendKind,
    /// Its adapter's name.
    pub adapter: String,
    /// Model FLOPs per second the last run trained at here (with its baseline beside it, if
    /// it had one): what the form's time estimate divides by.
    pub pace: Option<f64>,
}

/// Saves an export: natively into `exports/` (beside the working directory's `runs/`),
/// written whole then renamed; in the browser as a download. Returns a status line.
pub fn export(name: &str, bytes: &[u8], mime: &str) -> String {
    #[cfg(target_arch = "wasm32")]
    {
        match web::download(name, bytes, mime) {
            Ok(()) => format!("Downloaded {name}."),
            Err(e) => e,
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = mime;
        let path = std::path::Path::new("exports").join(name);
        let written = std::fs::create_dir_all("exports")
            .map_err(|e| e.to_string())
            .and_then(|()| {
                hif8lab_train::run::write_atomic(&path, bytes).map_err(|e| e.to_string())
            });
        match written {
            Ok(()) => format!("Saved {}.", path.display()),
            Err(e) => format!("Cannot save {}: {e}", path.display()),
        }
    }
}

pub use eframe::egui;
