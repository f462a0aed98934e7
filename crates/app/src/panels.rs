//! The panels: the side panel (preset, the run's settings validated live field by field,
//! Start / Pause / Stop / Reset, opening runs, exports) and the central tabs; the data panels
//! themselves are in [`crate::charts`].

use eframe::egui::{self, Color32, RichText};
use hif8lab_scaling::Role;

use crate::charts::PanelCtx;
use crate::jobs::{JobKind, Jobs};
use crate::settings::{FIELDS, Kind, SettingsPanel};
use crate::theme::TextColours;
use crate::{HifApp, Runs, Tab};

mod form;
pub mod lessons;
use form::{field, form_messages, hf_model_box, preset_line};
use lessons::lessons;
pub use lessons::{LessonsCtx, knowledge_caption};

/// What a panel asks of the app. The side panel, the run bar, the first screen and the
/// Lessons tab draw from a narrow context and push these; [`HifApp::apply`] carries them out
/// once the panel is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
    /// Start a run from the form.
    Start,
    /// Stop, keep the run in Runs, restore the preset's values.
    Reset,
    /// Pause (true) or resume (false) the live run and its baseline.
    Pause(bool),
    /// Stop the live run and its baseline.
    Stop,
    /// Open the run folder typed in the form.
    OpenRun,
    /// Follow the run folder typed in the form as another process writes it.
    Follow,
    /// Open the model (a Hugging Face folder or a GGUF file) typed in the form.
    OpenModel,
    /// Show a tab.
    ShowTab(Tab),
    /// Show a lesson.
    SelectLesson(hif8lab_lab::lesson::LessonId),
    /// A lesson's link to a panel: the panel, with the lesson's data when it has its own.
    LessonLink(Tab),
    /// Judge the committed real-model runs (the outlier lesson).
    JudgeRealOutliers,
    /// The forgetting lesson's run from the base (pretrained first when there is none).
    StartFromBase,
    /// Set the form up for the lesson shown and start its live run.
    StartLessonRun,
    /// Run the lesson's judged scenario.
    RunScenario,
}

/// What the side panel (and a narrow window's settings page) reads and changes: the form is
/// its to edit and the status line its to set; the rest it only reads. What it wants done
/// goes into `actions`.
pub struct SideCtx<'a> {
    /// The form.
    pub form: &'a mut SettingsPanel,
    /// The status line.
    pub status: &'a mut String,
    /// The standing notice.
    pub notice: Option<&'a str>,
    /// The runs (the live one's data is exported from here).
    pub runs: &'a Runs,
    /// What is running.
    pub jobs: &'a Jobs,
    /// Whether eframe's GPU device is there to train on.
    pub gpu_available: bool,
    /// The backend of the current or last run (`gpu`, `webgpu`, `cpu`).
    pub backend: &'static str,
    /// The median time to build a frame's UI.
    pub frame_ms: Option<f32>,
    /// Model FLOPs per second of the last run here (see [`crate::DeviceChoice::pace`]).
    pub pace: Option<f64>,
    /// Model FLOPs of the form's whole run (from its check; None when the form is invalid).
    pub run_flops: Option<f64>,
    /// The form's check: each field's message, and the whole form's verdict.
    pub check: (Vec<Option<String>>, Result<String, String>),
    /// What the panel asks of the app.
    pub actions: Vec<Action>,
}

/// The left side panel.
/// (On a narrow window the settings are a page of the central area instead.)
pub fn side_panel(cx: &mut SideCtx<'_>, ui: &mut egui::Ui) {
    if crate::layout::narrow(ui.ctx()) {
        return;
    }
    egui::Panel::left("settings")
        .frame(crate::theme::unfilled(egui::Frame::side_top_panel(
            ui.style(),
        )))
        .min_size(280.0)
        .max_size((ui.ctx().content_rect().width() * 0.4).max(280.0))
        .show(ui, |ui| {
            crate::layout::scroll(ui, "settings", |ui| side_panel_contents(cx, ui));
        });
}

/// The settings: what is running, the form, Start / Pause / Stop / Reset, opening runs.
pub fn side_panel_contents(cx: &mut SideCtx<'_>, ui: &mut egui::Ui) {
    ui.heading("hif8lab");
    ui.label("HiF8 delayed-scaling lab");
    ui.separator();
    running_box(cx.jobs, cx.runs, cx.backend, ui);
    egui::ComboBox::from_label("preset")
        .selected_text(cx.form.settings.preset.clone())
        .show_ui(ui, |ui| {
            for (name, _) in hif8lab_train::config::PRESETS {
                if ui
                    .selectable_label(cx.form.settings.preset == name, name)
                    .clicked()
                {
                    cx.form.settings = cx.form.settings.switched_to(name);
                }
            }
        });
    preset_line(cx, ui);
    hf_model_box(cx.form, ui);
    let (field_errors, whole) = cx.check.clone();
    // Start right under the preset: a few Tab presses from the top, not after every field
    // (it starts what the fields below say; an invalid form greys it out and says why below).
    let running = cx.jobs.running(JobKind::Run);
    ui.horizontal(|ui| {
        if ui
            .add_enabled(whole.is_ok() && !running, egui::Button::new("Start"))
            .clicked()
        {
            cx.actions.push(Action::Start);
        }
        // Pause and Stop are in the run bar above while a run trains.
        if ui
            .button("Reset")
            .on_hover_text("stop, keep the run in Runs, restore the preset's values")
            .clicked()
        {
            cx.actions.push(Action::Reset);
        }
    });
    if !run_bar_shown(cx.jobs) {
        ui.label(cx.status.as_str());
    }
    if let Some(n) = cx.notice {
        ui.label(RichText::new(n).color(TextColours::of(ui.visuals()).notice));
    }
    for group in ["Training", "Quantization", "Model"] {
        egui::CollapsingHeader::new(group)
            .default_open(group != "Model")
            .show(ui, |ui| {
                for (i, f) in FIELDS.iter().enumerate().filter(|(_, f)| f.group == group) {
                    field(ui, cx.form, f, field_errors[i].as_deref());
                }
            });
    }
    let gpu_available = cx.gpu_available;
    ui.add_enabled(
        gpu_available,
        egui::Checkbox::new(&mut cx.form.settings.gpu, "train on the GPU"),
    )
    .on_disabled_hover_text("no GPU device: eframe does not render with wgpu here");
    ui.checkbox(
        &mut cx.form.settings.baseline,
        "train the matched baseline alongside",
    );
    form_messages(cx.form, ui, &field_errors, &whole);
    ui.label("History advances once per quantizer call (per micro-batch).");
    ui.separator();
    ui.separator();
    runs_box(cx, ui);
    if let Some(ms) = cx.frame_ms {
        ui.separator();
        // A figure for those tuning the app, folded away by default.
        egui::CollapsingHeader::new("Details")
            .id_salt("frame-details")
            .default_open(false)
            .show(ui, |ui| {
                ui.label(format!("UI {ms:.1} ms per frame (median)"))
                    .on_hover_text(
                        "time to build a frame's UI here; drawing it follows on the GPU",
                    );
            });
    }
}

/// Whether the run bar is up: a run trains (or waits paused).
fn run_bar_shown(jobs: &Jobs) -> bool {
    jobs.training(JobKind::Run).is_some()
}

/// The run bar: while a run trains, across the top of the window at every size (above the
/// settings and the tabs), Pause / Resume, Stop, the progress and the status, so the
/// controls of a running run are never scrolled or folded away.
pub fn run_bar(jobs: &Jobs, runs: &Runs, status: &str, ui: &mut egui::Ui) -> Vec<Action> {
    let mut actions = Vec::new();
    if !run_bar_shown(jobs) {
        return actions;
    }
    egui::Panel::top("run-bar")
        .frame(crate::theme::unfilled(egui::Frame::side_top_panel(
            ui.style(),
        )))
        .show(ui, |ui| {
            crate::layout::fitted(ui, "run bar", |ui| {
                ui.horizontal_wrapped(|ui| {
                    let Some(t) = jobs.training(JobKind::Run) else {
                        return;
                    };
                    let (paused, elapsed_s) = (t.paused(), t.elapsed_s());
                    let label = if paused { "Resume" } else { "Pause" };
                    if ui.button(label).clicked() {
                        actions.push(Action::Pause(!paused));
                    }
                    if ui.button("Stop").clicked() {
                        actions.push(Action::Stop);
                    }
                    // Before the first step (GPU kernels compiling, the first step): how long
                    // it has been, so the wait never looks stuck.
                    if runs.live.as_ref().is_none_or(|v| v.loss.is_empty()) {
                        ui.label(format!("{elapsed_s:.0} s since Start"));
                        ui.ctx()
                            .request_repaint_after(std::time::Duration::from_millis(500));
                    }
                    if let Some(view) = &runs.live {
                        let steps = view.config.as_ref().map(|c| c.train.steps as usize);
                        if let Some(n) = steps.filter(|n| *n > 0) {
                            let done = view.loss.len().min(n);
                            ui.add(
                                egui::ProgressBar::new(done as f32 / n as f32)
                                    .desired_width(140.0)
                                    .text(format!("step {done} of {n}")),
                            );
                            if let Some(left) = crate::words::time_left(elapsed_s, done, n) {
                                ui.label(format!("about {left} left"));
                            }
                        }
                    }
                    ui.label(status);
                });
            });
        });
    actions
}

/// What is training now, from the running run's own config (not the form, which may already
/// describe the next run, or a lesson's run the form cannot express).
fn running_box(jobs: &Jobs, runs: &Runs, backend: &str, ui: &mut egui::Ui) {
    if !jobs.any(&[JobKind::Run, JobKind::Base]) {
        return;
    }
    egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.set_width(ui.available_width());
        if jobs.running(JobKind::Base) && !jobs.running(JobKind::Run) {
            ui.label(RichText::new("Running: pretraining the lessons' base model").strong());
            return;
        }
        let Some(view) = &runs.live else {
            return;
        };
        let state = if jobs.training(JobKind::Run).is_some_and(|t| t.paused()) {
            "Paused"
        } else {
            "Running"
        };
        ui.label(RichText::new(format!("{state}: {}", view.name)).strong());
        if let Some(c) = &view.config {
            let s = &c.qat.scaling;
            let qat = if c.qat.enabled {
                format!(
                    "QAT {} with {}, target {}",
                    s.format.name(),
                    s.estimator,
                    s.target
                )
            } else {
                "no quantization".into()
            };
            crate::glossary::label(
                ui,
                format!(
                    "{} steps at lr {}; model d_model {} × {} layers; {qat}; on {}.",
                    c.train.steps, c.train.lr, c.model.d_model, c.model.layers, backend
                ),
            );
        }
        if view.loss.is_empty() {
            ui.label("Preparing the first step…");
        }
        ui.label(RichText::new("The form below sets up the next run.").small());
    });
}

/// Opening runs and traces, and exporting the current one's data.
fn runs_box(cx: &mut SideCtx<'_>, ui: &mut egui::Ui) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let name = ui.label("Open a run folder:");
        ui.text_edit_singleline(&mut cx.form.open_path)
            .labelled_by(name.id);
        ui.horizontal_wrapped(|ui| {
            if ui.button("Open run").clicked() {
                cx.actions.push(Action::OpenRun);
            }
            if ui
                .button("Follow")
                .on_hover_text(
                    "open the run folder and read it again as another process writes it \
                     (a torchrun of hif8lab.torch.train, a train in a terminal)",
                )
                .clicked()
            {
                cx.actions.push(Action::Follow);
            }
            if ui
                .button("Open HF model")
                .on_hover_text(
                    "a Hugging Face Llama folder (config.json, *.safetensors, tokenizer.json) \
                     or a GGUF file: Start continues training it",
                )
                .clicked()
            {
                cx.actions.push(Action::OpenModel);
            }
        });
    }
    #[cfg(target_arch = "wasm32")]
    if ui
        .button("Open files…")
        .on_hover_text(
            "a run folder's metrics.jsonl + trace.jsonl (+ config.toml), one trace / CSV, or a \
             Hugging Face model's config.json + .safetensors + tokenizer.json",
        )
        .clicked()
        && let Err(e) = crate::web::pick_files()
    {
        *cx.status = e;
    }
    #[cfg(not(target_arch = "wasm32"))]
    ui.label("Files dropped on the window open too.");
    if let Some(view) = &cx.runs.live {
        let stem = view.name.replace(['/', ' ', '='], "_");
        ui.horizontal_wrapped(|ui| {
            ui.label("Export:");
            if ui.button("loss (CSV)").clicked() {
                *cx.status = crate::export(
                    &format!("{stem}-loss.csv"),
                    view.loss_csv(cx.runs.baseline_loss()).as_bytes(),
                    "text/csv",
                );
            }
            if ui.button("loss (JSONL)").clicked() {
                *cx.status = crate::export(
                    &format!("{stem}-loss.jsonl"),
                    view.loss_jsonl().as_bytes(),
                    "application/x-ndjson",
                );
            }
            if ui.button("calls (CSV)").clicked() {
                *cx.status = crate::export(
                    &format!("{stem}-calls.csv"),
                    view.calls_csv().as_bytes(),
                    "text/csv",
                );
            }
            if let Some(h) = &view.histogram
                && ui.button("histogram (CSV)").clicked()
            {
                *cx.status = crate::export(
                    &format!("{stem}-histogram.csv"),
                    crate::charts::histogram_csv(h, view.format).as_bytes(),
                    "text/csv",
                );
            }
        });
    }
}

/// The tabs, in order, with their names.
pub const TABS: [(Tab, &str); 7] = [
    (Tab::Loss, "Loss"),
    (Tab::Amax, "Amax"),
    (Tab::Saturation, "Saturation"),
    (Tab::Estimators, "Estimators"),
    (Tab::Histogram, "Histogram"),
    (Tab::Runs, "Runs"),
    (Tab::Lessons, "Lessons"),
];

/// The central tabs: the data panels see their run view and a [`PanelCtx`] only. Every tab
/// scrolls vertically and must fit the width it gets (what does not is reported, see
/// [`crate::layout`]); on a narrow window the settings are one more page here.
pub fn central(app: &mut HifApp, ui: &mut egui::Ui) {
    egui::CentralPanel::default()
        .frame(crate::theme::unfilled(egui::Frame::central_panel(
            ui.style(),
        )))
        .show(ui, |ui| {
            app.frames.central_rect = ui.max_rect();
            let narrow = crate::layout::narrow(ui.ctx());
            crate::layout::fitted(ui, "tab row", |ui| {
                ui.horizontal_wrapped(|ui| {
                    if narrow
                        && ui
                            .selectable_label(app.form.page, "Settings »")
                            .on_hover_text("the run's settings, Start and Stop")
                            .clicked()
                    {
                        app.form.page = !app.form.page;
                    }
                    for (tab, name) in TABS {
                        let on = app.selection.tab == tab && !(narrow && app.form.page);
                        if ui.selectable_label(on, name).clicked() {
                            app.selection.tab = tab;
                            app.form.page = false;
                        }
                    }
                });
            });
            ui.separator();
            if narrow && app.form.page {
                settings_page(app, ui);
                return;
            }
            if narrow && !run_bar_shown(&app.jobs) {
                // The status stays in sight while the settings are folded away.
                ui.label(RichText::new(&app.messages.status).small());
            }
            match app.selection.tab {
                Tab::Lessons => {
                    lessons_tab(app, ui);
                    return;
                }
                Tab::Runs => {
                    let HifApp {
                        panels, runs, png, ..
                    } = app;
                    let exports = &mut png.exports;
                    let chosen =
                        crate::layout::scroll(ui, "runs", |ui| panels.runs.show(ui, runs, exports));
                    if let Some(i) = chosen {
                        app.make_current(i);
                    }
                    return;
                }
                _ => {}
            }
            if app.runs.live.is_none() {
                let ok = app.check_form().1.is_ok();
                let (running, preset) = (app.jobs.running(JobKind::Run), &app.form.settings.preset);
                let actions =
                    crate::layout::scroll(ui, "welcome", |ui| welcome(ok && !running, preset, ui));
                app.apply(ui.ctx(), actions);
                return;
            }
            let HifApp {
                runs,
                panels,
                selection,
                png,
                jobs,
                lessons,
                messages,
                ..
            } = app;
            let status = &messages.status;
            let exports = &mut png.exports;
            let Some(view) = runs.live.as_ref() else {
                return;
            };
            if view.loss.is_empty() && jobs.running(JobKind::Run) {
                // Before the first step: what is happening, not empty axes alone.
                ui.add(egui::Label::new(RichText::new(status.as_str()).strong()).wrap());
            }
            let mut cx = PanelCtx {
                selection,
                exports,
                baseline: runs.baseline.as_ref(),
                base_probes: lessons.base_probes.clone(),
                live: jobs.running(JobKind::Run),
            };
            let tab = cx.selection.tab;
            if let Some(panel) = panels.of(tab) {
                let id = format!("{tab:?}").to_ascii_lowercase();
                crate::layout::scroll(ui, &id, |ui| panel.show(ui, view, &mut cx));
            }
        });
}

/// A narrow window's settings page: the side panel's contents, in the central area.
fn settings_page(app: &mut HifApp, ui: &mut egui::Ui) {
    let mut cx = app.side_ctx();
    crate::layout::scroll(ui, "settings page", |ui| side_panel_contents(&mut cx, ui));
    let actions = std::mem::take(&mut cx.actions);
    app.apply(ui.ctx(), actions);
}

/// The Lessons tab, drawn from its narrow context; what it asks for is applied after.
fn lessons_tab(app: &mut HifApp, ui: &mut egui::Ui) {
    let mut cx = LessonsCtx {
        lessons: &mut app.lessons,
        runs: &app.runs,
        jobs: &app.jobs,
        actions: Vec::new(),
    };
    lessons::lesson_row(&mut cx, ui);
    crate::layout::scroll(ui, "lessons", |ui| lessons(&mut cx, ui));
    let actions = std::mem::take(&mut cx.actions);
    app.apply(ui.ctx(), actions);
}

/// The first screen (no run yet): what this is, where to begin, and the words it uses.
fn welcome(can_start: bool, preset: &str, ui: &mut egui::Ui) -> Vec<Action> {
    let mut actions = Vec::new();
    ui.heading("Why does 8-bit training silently break?");
    crate::glossary::label(
        ui,
        "hif8lab trains a small language model with HiF8 QAT — every matmul's inputs rounded to \
         8 bits — and shows, live, what the rounding does: each quantizer's amax against the \
         estimate its scale was chosen from, where values saturate, and what the model forgets \
         while its loss looks fine.",
    );
    ui.add_space(6.0);
    ui.label(RichText::new("Where to begin").strong());
    ui.horizontal_wrapped(|ui| {
        if ui
            .button("The lessons »")
            .on_hover_text("five short lessons, each with a prediction to make and a verdict")
            .clicked()
        {
            actions.push(Action::ShowTab(Tab::Lessons));
        }
        ui.label("five guided lessons (a minute or two each), or");
    });
    ui.horizontal_wrapped(|ui| {
        if ui
            .add_enabled(can_start, egui::Button::new("A first run »"))
            .on_hover_text("train the form's preset (smoke: 40 steps, a few seconds) with its matched baseline")
            .clicked()
        {
            actions.push(Action::Start);
        }
        ui.label(format!(
            "train the {} preset with the settings {}, then look at Amax and Estimators.",
            preset,
            if crate::layout::narrow(ui.ctx()) {
                "under Settings »"
            } else {
                "on the left"
            }
        ));
    });
    ui.label(if cfg!(target_arch = "wasm32") {
        "Or open a run folder or a trace: Settings, then “Open files…”."
    } else {
        "Or open a run folder or a trace: Settings, then “Open run”."
    });
    ui.add_space(6.0);
    egui::CollapsingHeader::new("The words it uses")
        .default_open(true)
        .show(ui, |ui| {
            for (term, text) in crate::glossary::TERMS {
                ui.horizontal_wrapped(|ui| {
                    ui.label(RichText::new(term).strong());
                    ui.add(egui::Label::new(text).wrap());
                });
            }
        });
    actions
}
