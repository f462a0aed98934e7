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

pub mod panels;
pub mod state;
pub mod training;
#[cfg(target_arch = "wasm32")]
pub mod web;

use std::path::PathBuf;

use hif8lab_train::RunConfig;

use crate::state::RunView;
use crate::training::{Device, Msg, Training};

/// Start-up options (the desktop flags).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// Preset to select.
    pub preset: Option<String>,
    /// Start training at once.
    pub autostart: bool,
    /// A run folder to open.
    pub open: Option<PathBuf>,
    /// A trace (JSONL, CSV or Transformer Engine log) to replay and view.
    pub trace: Option<PathBuf>,
    /// The panel to show first.
    pub tab: Option<Tab>,
    /// A lesson to open.
    pub lesson: Option<String>,
}

/// The dashboard's panels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    /// Loss curve.
    Loss,
    /// amax vs estimates of one quantizer.
    Amax,
    /// Block × step heatmap of saturation.
    Saturation,
    /// Shadow comparison of the estimators.
    Estimators,
    /// The lessons.
    Lessons,
}

/// The editable settings of the side panel.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Preset name.
    pub preset: String,
    /// Optimizer steps.
    pub steps: String,
    /// Learning rate.
    pub lr: String,
    /// Active estimator.
    pub estimator: String,
    /// History window.
    pub window: String,
    /// Scaling target.
    pub target: String,
    /// High-precision warmup steps.
    pub warmup: String,
    /// Train on the GPU (eframe's device) instead of the CPU.
    pub gpu: bool,
    /// Also train the matched high-precision baseline (same data order, quantizers off).
    pub baseline: bool,
}

impl Settings {
    fn from_preset(preset: &str) -> Self {
        let c = RunConfig::parse(
            preset,
            RunConfig::preset_text(preset).unwrap_or_default(),
            &[],
        )
        .ok();
        let (steps, lr, warmup) = c
            .as_ref()
            .map(|c| {
                (
                    c.train.steps.to_string(),
                    c.train.lr.to_string(),
                    c.qat.warmup_steps.to_string(),
                )
            })
            .unwrap_or_default();
        Settings {
            preset: preset.to_owned(),
            steps,
            lr,
            estimator: "max_window".into(),
            window: "64".into(),
            target: "15".into(),
            warmup,
            gpu: false,
            baseline: true,
        }
    }

    /// The run config these settings describe, or the first problem (naming the field).
    pub fn config(&self) -> Result<RunConfig, String> {
        let text = RunConfig::preset_text(&self.preset).map_err(|e| e.to_string())?;
        let sets = [
            format!("train.steps={}", self.steps.trim()),
            format!("train.lr={}", self.lr.trim()),
            format!("qat.scaling.estimator=\"{}\"", self.estimator.trim()),
            format!("qat.scaling.window={}", self.window.trim()),
            format!("qat.scaling.target={}", self.target.trim()),
            format!("qat.warmup_steps={}", self.warmup.trim()),
        ];
        RunConfig::parse(&self.preset, text, &sets).map_err(|e| e.message)
    }
}

/// The app.
pub struct HifApp {
    /// Side-panel settings.
    pub settings: Settings,
    /// The live or opened run.
    pub view: Option<RunView>,
    /// The training thread, while one runs.
    pub training: Option<Training>,
    /// The matched baseline's loss curve (step, loss), when trained alongside.
    pub baseline: Vec<[f64; 2]>,
    /// The baseline's training thread, while it runs.
    pub baseline_training: Option<Training>,
    /// Last status line.
    pub status: String,
    /// Selected panel.
    pub tab: Tab,
    /// Selected quantizer (by name) in the amax panel.
    pub selected: Option<String>,
    /// Run folder path typed in the Runs box.
    pub open_path: String,
    /// eframe's GPU device, when it renders with wgpu.
    pub gpu: Option<Device>,
    /// Whether the heatmap shows overflow instead of above-estimate counts.
    pub show_overflow: bool,
    /// Drive training from the frame loop instead of a thread (always in the browser).
    pub frame_loop: bool,
    /// A standing notice (e.g. why training runs on the CPU in the browser).
    pub notice: Option<String>,
    /// The backend of the current or last run: `webgpu`, `gpu` (native) or `cpu`.
    pub backend: &'static str,
    /// Its adapter's name.
    pub adapter: String,
    /// The last training error.
    pub error: Option<String>,
    /// The lesson shown in the Lessons panel.
    pub lesson: &'static hif8lab_train::lesson::Lesson,
    /// A lesson scenario running headless (native), and its verdict when done.
    pub lesson_job:
        Option<std::sync::mpsc::Receiver<Result<hif8lab_train::lesson::LessonReport, String>>>,
    /// The last verdict of a lesson scenario.
    pub lesson_report: Option<hif8lab_train::lesson::LessonReport>,
}

impl Tab {
    /// Parses a panel name (`loss`, `amax`, `saturation`, `estimators`).
    pub fn parse(s: &str) -> Option<Tab> {
        match s.to_ascii_lowercase().as_str() {
            "loss" => Some(Tab::Loss),
            "amax" => Some(Tab::Amax),
            "saturation" => Some(Tab::Saturation),
            "estimators" => Some(Tab::Estimators),
            "lessons" => Some(Tab::Lessons),
            _ => None,
        }
    }
}

impl HifApp {
    /// A new app (no GPU device: CPU training only).
    pub fn new(options: &Options) -> Self {
        let mut app = HifApp {
            settings: Settings::from_preset(options.preset.as_deref().unwrap_or("smoke")),
            view: None,
            training: None,
            baseline: Vec::new(),
            baseline_training: None,
            status: "Pick a preset and press Start.".into(),
            tab: Tab::Loss,
            selected: None,
            open_path: String::new(),
            gpu: None,
            show_overflow: false,
            frame_loop: cfg!(target_arch = "wasm32"),
            notice: None,
            backend: "cpu",
            adapter: hif8lab_engine::cpu::cpu_name(),
            error: None,
            lesson: &hif8lab_train::lesson::LESSONS[0],
            lesson_job: None,
            lesson_report: None,
        };
        if let Some(name) = &options.lesson {
            match hif8lab_train::lesson::lesson(name) {
                Some(l) => {
                    app.lesson = l;
                    app.tab = Tab::Lessons;
                    app.setup_lesson();
                }
                None => {
                    app.status = format!(
                        "No lesson '{name}' (lessons: {}).",
                        hif8lab_train::lesson::names()
                    )
                }
            }
        }
        if let Some(dir) = &options.open {
            app.open_path = dir.display().to_string();
            app.open_run();
        }
        if let Some(tab) = options.tab {
            app.tab = tab;
        }
        if let Some(path) = &options.trace {
            match RunView::from_trace_file(path) {
                Ok(v) => {
                    app.status = format!("Replayed {} ({} quantizers).", v.name, v.calls.len());
                    app.view = Some(v);
                    app.tab = Tab::Amax;
                }
                Err(e) => app.status = format!("Cannot read trace: {e}"),
            }
        }
        app
    }

    /// Opens the run folder in `open_path`.
    pub fn open_run(&mut self) {
        match RunView::load(std::path::Path::new(self.open_path.trim())) {
            Ok(v) => {
                self.status = format!("Opened {} ({} steps).", v.name, v.loss.len());
                self.view = Some(v);
            }
            Err(e) => self.status = format!("Cannot open: {e}"),
        }
    }

    /// Puts the side panel in the state the current lesson starts from (a live run on the
    /// smoke model with the matched baseline alongside).
    pub fn setup_lesson(&mut self) {
        let mut s = Settings::from_preset("smoke");
        s.baseline = true;
        s.gpu = self.settings.gpu;
        match self.lesson.name {
            // Active most_recent; max_window(64) and the rest shadow it on the same calls.
            "saturation" => s.estimator = "most_recent".into(),
            // From scratch a high rate has nothing to forget: the scenario runs headless.
            "forgetting" | "fixes" => {}
            _ => {}
        }
        self.settings = s;
    }

    /// Runs the current lesson's scenario headless on a thread (native; a few seconds on the
    /// CPU at the lessons' size) and shows its verdict when done.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run_lesson_scenario(&mut self) {
        let name = self.lesson.name;
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("hif8lab-lesson".into())
            .spawn(move || {
                struct Quiet;
                impl hif8lab_train::grid::GridProgress for Quiet {
                    fn start(&mut self, _: &str, _: usize, _: usize, _: bool) {}
                    fn step(&mut self, _: u64, _: u64, _: f32) {}
                    fn probes(&mut self, _: &hif8lab_train::ProbeScores) {}
                }
                let result = hif8lab_train::grid::GridConfig::preset("grid-lesson")
                    .map_err(|e| e.to_string())
                    .and_then(|grid| {
                        hif8lab_train::lesson::run_lesson(
                            name,
                            &|| Ok(hif8lab_engine::cpu::CpuBackend::new()),
                            &grid,
                            std::path::Path::new("runs/lessons-grid-lesson"),
                            &mut Quiet,
                        )
                        .map_err(|e| e.to_string())
                    });
                let _ = tx.send(result);
            });
        match spawned {
            Ok(_) => {
                self.lesson_job = Some(rx);
                self.lesson_report = None;
            }
            Err(e) => self.status = format!("Cannot run the lesson: {e}"),
        }
    }

    /// Opens files handed in together (dropped, or from the browser's file picker).
    pub fn open_files(&mut self, files: &[(String, Vec<u8>)]) {
        match RunView::from_files(files) {
            Ok(v) => {
                self.status = format!("Opened {} ({} quantizers).", v.name, v.calls.len());
                self.selected = v.calls.keys().next().cloned();
                self.view = Some(v);
            }
            Err(e) => self.status = format!("Cannot open: {e}"),
        }
    }

    /// Starts training with the current settings (no-op while they are invalid).
    pub fn start(&mut self, wake: impl Fn() + Send + Sync + 'static) {
        let Ok(config) = self.settings.config() else {
            return;
        };
        let device = match (&self.gpu, self.settings.gpu) {
            (Some(d), true) => d.clone(),
            _ => Device::Cpu,
        };
        (self.backend, self.adapter) = match &device {
            Device::Gpu(g) if g.2.backend == wgpu::Backend::BrowserWebGpu => {
                let i = &g.2;
                let name = [&i.name, &i.driver, &i.driver_info]
                    .into_iter()
                    .find(|s| !s.is_empty())
                    .cloned()
                    .unwrap_or_else(|| "WebGPU adapter (unnamed by the browser)".into());
                ("webgpu", name)
            }
            Device::Gpu(g) => ("gpu", g.2.name.clone()),
            Device::Cpu => ("cpu", hif8lab_engine::cpu::cpu_name()),
        };
        self.error = None;
        let target = config.qat.scaling.target;
        let mut baseline_config = config.clone();
        baseline_config.qat.enabled = false;
        let wake = std::sync::Arc::new(wake);
        let w = wake.clone();
        match self.launch(config, device.clone(), move || w()) {
            Ok(t) => {
                self.view = Some(RunView::new(&self.settings.preset, Vec::new(), 0, target));
                self.training = Some(t);
                self.status = "Starting…".into();
            }
            Err(e) => self.status = format!("Cannot start training: {e}"),
        }
        self.baseline.clear();
        self.baseline_training = None;
        if self.settings.baseline && self.training.is_some() {
            self.baseline_training = self.launch(baseline_config, device, move || wake()).ok();
        }
    }

    /// Starts one run: stepped from the frame loop, or on a thread that calls `wake`.
    fn launch(
        &self,
        config: RunConfig,
        device: Device,
        wake: impl Fn() + Send + 'static,
    ) -> std::io::Result<Training> {
        if self.frame_loop {
            Ok(Training::start_local(config, device))
        } else {
            Training::start(config, device, wake)
        }
    }

    /// Average percentage error of the loss against the matched baseline over the steps
    /// both have reached (SPEC.md §6), if a baseline runs.
    pub fn ape(&self) -> Option<f64> {
        self.ape_of(self.view.as_ref()?)
    }

    /// [`HifApp::ape`] of `view` (the panels hold the view while drawing).
    pub fn ape_of(&self, view: &RunView) -> Option<f64> {
        let n = view.loss.len().min(self.baseline.len());
        (n > 0).then(|| {
            let q: Vec<f64> = view.loss[..n].iter().map(|p| p[1]).collect();
            let b: Vec<f64> = self.baseline[..n].iter().map(|p| p[1]).collect();
            hif8lab_train::corpus::ape(&q, &b)
        })
    }

    /// Drains what training reported (never waits for it). A frame-loop run also trains
    /// here for a few milliseconds, split between the QAT run and its baseline.
    pub fn poll(&mut self) {
        let budget = std::time::Duration::from_millis(12);
        let both = self.training.is_some() && self.baseline_training.is_some();
        let share = if both { budget / 2 } else { budget };
        if let Some(t) = &mut self.baseline_training {
            let mut done = false;
            for msg in t.drain(share) {
                match msg {
                    Msg::Report(r) => self.baseline.push([r.step as f64, f64::from(r.loss)]),
                    Msg::Finished => done = true,
                    Msg::Started { .. } | Msg::Error(_) => {}
                }
            }
            if done {
                self.baseline_training = None;
            }
        }
        let Some(t) = &mut self.training else { return };
        let mut finished = false;
        for msg in t.drain(share) {
            match msg {
                Msg::Started {
                    estimators,
                    active,
                    backend,
                } => {
                    if let Some(v) = &mut self.view {
                        v.estimators = estimators;
                        v.active = active;
                    }
                    self.status = if self.backend == "webgpu" {
                        format!("Training on WebGPU ({}).", self.adapter)
                    } else {
                        format!("Training on {backend}.")
                    };
                }
                Msg::Report(r) => {
                    if let Some(v) = &mut self.view {
                        v.push_report(&r);
                        if self.selected.is_none() {
                            self.selected = r.calls.first().map(|c| c.id.to_string());
                        }
                    }
                }
                Msg::Error(e) => {
                    self.status = format!("Training stopped: {e}");
                    self.error = Some(e);
                }
                Msg::Finished => finished = true,
            }
        }
        if finished {
            self.training = None;
            if !self.status.starts_with("Training stopped") {
                self.status = "Training finished.".into();
            }
            let steps = self.view.as_ref().map(|v| v.loss.len()).unwrap_or(0);
            // For scripts driving the app (the screenshot check waits for this line).
            #[cfg(not(target_arch = "wasm32"))]
            eprintln!("hif8lab-app: {} ({steps} steps)", self.status);
            #[cfg(target_arch = "wasm32")]
            let _ = steps;
        }
    }

    /// Collects a finished lesson scenario.
    fn poll_lesson(&mut self) {
        if let Some(rx) = &self.lesson_job
            && let Ok(result) = rx.try_recv()
        {
            self.lesson_job = None;
            match result {
                Ok(r) => self.lesson_report = Some(r),
                Err(e) => self.status = format!("Lesson scenario failed: {e}"),
            }
        }
    }

    /// What scripts and embedding pages read (the browser's `window.__hif8lab`): backend,
    /// adapter, whether training runs, steps reported, last loss, quantizers seen, last error.
    pub fn snapshot(&self) -> serde_json::Value {
        let view = self.view.as_ref();
        serde_json::json!({
            "backend": self.backend,
            "adapter": self.adapter,
            "running": self.training.is_some(),
            "steps": view.map(|v| v.loss.len()).unwrap_or(0),
            "loss": view.and_then(|v| v.loss.last()).map(|p| p[1]),
            "quantizers": view.map(|v| v.calls.len()).unwrap_or(0),
            "calls": view.map(|v| v.calls.values().map(Vec::len).sum::<usize>()).unwrap_or(0),
            "baseline_steps": self.baseline.len(),
            "tab": format!("{:?}", self.tab).to_ascii_lowercase(),
            "lesson": self.lesson.name,
            "error": self.error,
            "notice": self.notice,
        })
    }

    /// Draws the whole app into `ui` (used by eframe and by the UI tests).
    pub fn show(&mut self, ui: &mut egui::Ui) {
        self.poll();
        self.poll_lesson();
        // Files dropped on the window (natively; the browser page uses its file picker).
        #[cfg(not(target_arch = "wasm32"))]
        let dropped: Vec<(String, Vec<u8>)> = ui.ctx().input(|i| {
            i.raw
                .dropped_files
                .iter()
                .filter_map(|f| Some((f.path().display().to_string(), f.bytes().ok()?)))
                .collect()
        });
        #[cfg(target_arch = "wasm32")]
        let dropped: Vec<(String, Vec<u8>)> = Vec::new();
        if !dropped.is_empty() {
            self.open_files(&dropped);
        }
        panels::side_panel(self, ui);
        panels::central(self, ui);
        if self.frame_loop && (self.training.is_some() || self.baseline_training.is_some()) {
            // The frame loop is what trains: keep it turning.
            ui.ctx().request_repaint();
        } else if self.training.is_some() || self.lesson_job.is_some() {
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_millis(50));
        }
        #[cfg(target_arch = "wasm32")]
        web::publish(self);
    }
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

impl eframe::App for HifApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }
}

pub use eframe::egui;
