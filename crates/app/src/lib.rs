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
}

impl Tab {
    /// Parses a panel name (`loss`, `amax`, `saturation`, `estimators`).
    pub fn parse(s: &str) -> Option<Tab> {
        match s.to_ascii_lowercase().as_str() {
            "loss" => Some(Tab::Loss),
            "amax" => Some(Tab::Amax),
            "saturation" => Some(Tab::Saturation),
            "estimators" => Some(Tab::Estimators),
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
        };
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

    /// Starts training with the current settings (no-op while they are invalid).
    pub fn start(&mut self, wake: impl Fn() + Send + Sync + 'static) {
        let Ok(config) = self.settings.config() else {
            return;
        };
        let device = match (&self.gpu, self.settings.gpu) {
            (Some(d), true) => d.clone(),
            _ => Device::Cpu,
        };
        let target = config.qat.scaling.target;
        let mut baseline_config = config.clone();
        baseline_config.qat.enabled = false;
        let wake = std::sync::Arc::new(wake);
        let w = wake.clone();
        match Training::start(config, device.clone(), move || w()) {
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
            self.baseline_training = Training::start(baseline_config, device, move || wake()).ok();
        }
    }

    /// Average percentage error of the loss against the matched baseline over the steps
    /// both have reached (SPEC.md §6), if a baseline runs.
    pub fn ape(&self) -> Option<f64> {
        let view = self.view.as_ref()?;
        let n = view.loss.len().min(self.baseline.len());
        (n > 0).then(|| {
            let q: Vec<f64> = view.loss[..n].iter().map(|p| p[1]).collect();
            let b: Vec<f64> = self.baseline[..n].iter().map(|p| p[1]).collect();
            hif8lab_train::corpus::ape(&q, &b)
        })
    }

    /// Drains the training threads' messages (never blocks).
    pub fn poll(&mut self) {
        if let Some(t) = &self.baseline_training {
            let mut done = false;
            while let Ok(msg) = t.rx.try_recv() {
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
        let Some(t) = &self.training else { return };
        let mut finished = false;
        while let Ok(msg) = t.rx.try_recv() {
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
                    self.status = format!("Training on {backend}.");
                }
                Msg::Report(r) => {
                    if let Some(v) = &mut self.view {
                        v.push_report(&r);
                        if self.selected.is_none() {
                            self.selected = r.calls.first().map(|c| c.id.to_string());
                        }
                    }
                }
                Msg::Error(e) => self.status = format!("Training stopped: {e}"),
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
            eprintln!("hif8lab-app: {} ({steps} steps)", self.status);
        }
    }

    /// Draws the whole app into `ui` (used by eframe and by the UI tests).
    pub fn show(&mut self, ui: &mut egui::Ui) {
        self.poll();
        panels::side_panel(self, ui);
        panels::central(self, ui);
        if self.training.is_some() {
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_millis(50));
        }
    }
}

impl eframe::App for HifApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }
}

pub use eframe::egui;
