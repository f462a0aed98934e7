//! The panels: the side panel (preset, the run's settings validated live field by field,
//! Start / Pause / Stop / Reset, opening runs, exports) and the central tabs; the data panels
//! themselves are in [`crate::charts`].

use eframe::egui::{self, Color32, RichText};
use hif8lab_scaling::Role;

use crate::charts::PanelCtx;
use crate::jobs::JobKind;
use crate::settings::{FIELDS, Kind};
use crate::theme::TextColours;
use crate::{HifApp, Tab};

pub mod lessons;
pub use lessons::knowledge_caption;
use lessons::lessons;

/// A field's label: marked (!) (red for an error, amber for a warning) with the message as its
/// hover; the messages themselves are listed under the form, so a message appearing never
/// moves the fields below it.
fn field_label(
    ui: &mut egui::Ui,
    f: &crate::settings::Field,
    flag: Option<(&str, Color32)>,
) -> egui::Response {
    let help = crate::glossary::explanations(f.label);
    let help = if help.is_empty() {
        f.help.to_owned()
    } else {
        format!("{}\n\n{help}", f.help)
    };
    match flag {
        Some((message, colour)) => ui
            .label(RichText::new(format!("(!) {}", f.label)).color(colour))
            .on_hover_text(format!("{message}\n\n{help}")),
        None => ui.label(f.label).on_hover_text(help),
    }
}

/// One field of the form; a problem marks its label (see [`field_label`]).
fn field(ui: &mut egui::Ui, app: &mut HifApp, f: &crate::settings::Field, error: Option<&str>) {
    let key = f.key;
    let warning = app.form.settings.field_warning(key);
    let flag = error
        .map(|e| (e, TextColours::of(ui.visuals()).fails))
        .or(warning
            .as_deref()
            .map(|w| (w, TextColours::of(ui.visuals()).inconclusive)));
    match f.kind {
        Kind::Text | Kind::Blocks => {
            ui.horizontal(|ui| {
                let name = field_label(ui, f, flag);
                let mut text = app.form.settings.get(key).to_owned();
                let edit = egui::TextEdit::singleline(&mut text).desired_width(120.0);
                if ui.add(edit).labelled_by(name.id).changed() {
                    app.form.settings.set(key, &text);
                }
            });
        }
        Kind::Choice(options) => {
            ui.horizontal(|ui| {
                let current = app.form.settings.get(key).to_owned();
                let name = field_label(ui, f, flag);
                egui::ComboBox::from_id_salt(key)
                    .selected_text(current.clone())
                    .show_ui(ui, |ui| {
                        for o in options {
                            if ui.selectable_label(current == *o, *o).clicked() {
                                app.form.settings.set(key, o);
                            }
                        }
                    })
                    .response
                    .labelled_by(name.id);
            });
        }
        Kind::Set(options) => {
            ui.horizontal_wrapped(|ui| {
                field_label(ui, f, flag);
                let current = app.form.settings.get(key).to_owned();
                for o in options {
                    let mut on = current.split(',').any(|s| s.trim() == *o);
                    if ui.checkbox(&mut on, *o).changed() {
                        app.form.settings.toggle(key, o, on);
                    }
                }
            });
        }
    }
}

/// The left side panel.
/// (On a narrow window the settings are a page of the central area instead.)
pub fn side_panel(app: &mut HifApp, ui: &mut egui::Ui) {
    if crate::layout::narrow(ui.ctx()) {
        return;
    }
    egui::Panel::left("settings")
        .min_size(280.0)
        .max_size((ui.ctx().content_rect().width() * 0.4).max(280.0))
        .show(ui, |ui| {
            crate::layout::scroll(ui, "settings", |ui| side_panel_contents(app, ui));
        });
}

/// The opened Hugging Face or GGUF model, with the button that forgets it.
fn hf_model_box(app: &mut HifApp, ui: &mut egui::Ui) {
    if let Some(m) = &app.form.hf_model {
        let kind = if m.source.ends_with(".gguf") {
            "GGUF"
        } else {
            "Hugging Face"
        };
        let text = format!(
            "Model: {} ({kind}, {:.2} M parameters, {} layers × d_model {}); the preset's \
             model fields do not apply",
            m.name,
            m.parameters() as f64 / 1e6,
            m.model.layers,
            m.model.d_model
        );
        ui.label(RichText::new(text).strong());
        if ui
            .button("Use the preset's model")
            .on_hover_text("forget the opened Hugging Face model")
            .clicked()
        {
            app.form.hf_model = None;
            app.form.check = None;
        }
    }
}

/// The form's check: each marked field's message (listed here, not under each field: a message
/// appearing must not move the field the user is about to click), or the memory the run needs;
/// then the fields' warnings.
fn form_messages<E: std::fmt::Display, M: std::fmt::Display>(
    app: &HifApp,
    ui: &mut egui::Ui,
    field_errors: &[Option<String>],
    whole: &Result<M, E>,
) {
    let marked: Vec<&String> = field_errors.iter().flatten().collect();
    match whole {
        Err(e) if marked.is_empty() => {
            ui.label(
                RichText::new(format!("Invalid: {e}")).color(TextColours::of(ui.visuals()).fails),
            );
        }
        Err(_) => {
            ui.label(
                RichText::new("Invalid: fix the fields marked (!)")
                    .color(TextColours::of(ui.visuals()).fails),
            );
            for m in marked {
                ui.label(RichText::new(m).color(TextColours::of(ui.visuals()).fails));
            }
        }
        Ok(memory) => {
            ui.label(format!("Memory: {memory}"));
        }
    }
    for f in FIELDS.iter() {
        if let Some(w) = app.form.settings.field_warning(f.key) {
            ui.label(RichText::new(w).color(TextColours::of(ui.visuals()).inconclusive));
        }
    }
}

/// The settings: what is running, the form, Start / Pause / Stop / Reset, opening runs.
pub fn side_panel_contents(app: &mut HifApp, ui: &mut egui::Ui) {
    ui.heading("hif8lab");
    ui.label("HiF8 delayed-scaling lab");
    ui.separator();
    running_box(app, ui);
    egui::ComboBox::from_label("preset")
        .selected_text(app.form.settings.preset.clone())
        .show_ui(ui, |ui| {
            for (name, _) in hif8lab_train::config::PRESETS {
                if ui
                    .selectable_label(app.form.settings.preset == name, name)
                    .clicked()
                {
                    app.form.settings = app.form.settings.switched_to(name);
                }
            }
        });
    hf_model_box(app, ui);
    let (field_errors, whole) = app.check_form();
    // Start right under the preset: a few Tab presses from the top, not after every field
    // (it starts what the fields below say; an invalid form greys it out and says why below).
    let running = app.jobs.running(JobKind::Run);
    ui.horizontal(|ui| {
        if ui
            .add_enabled(whole.is_ok() && !running, egui::Button::new("Start"))
            .clicked()
        {
            let ctx = ui.ctx().clone();
            app.start(move || ctx.request_repaint());
        }
        // Pause and Stop are in the run bar above while a run trains.
        if ui
            .button("Reset")
            .on_hover_text("stop, keep the run in Runs, restore the preset's values")
            .clicked()
        {
            app.reset();
        }
    });
    if !run_bar_shown(app) {
        ui.label(&app.messages.status);
    }
    if let Some(n) = &app.messages.notice {
        ui.label(RichText::new(n).color(TextColours::of(ui.visuals()).notice));
    }
    for group in ["Training", "Quantization", "Model"] {
        egui::CollapsingHeader::new(group)
            .default_open(group != "Model")
            .show(ui, |ui| {
                for (i, f) in FIELDS.iter().enumerate().filter(|(_, f)| f.group == group) {
                    field(ui, app, f, field_errors[i].as_deref());
                }
            });
    }
    let gpu_available = app.device.gpu.is_some();
    ui.add_enabled(
        gpu_available,
        egui::Checkbox::new(&mut app.form.settings.gpu, "train on the GPU"),
    )
    .on_disabled_hover_text("no GPU device: eframe does not render with wgpu here");
    ui.checkbox(
        &mut app.form.settings.baseline,
        "train the matched baseline alongside",
    );
    form_messages(app, ui, &field_errors, &whole);
    ui.label("History advances once per quantizer call (per micro-batch).");
    ui.separator();
    ui.separator();
    runs_box(app, ui);
    if let Some(ms) = app.frame_time() {
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
fn run_bar_shown(app: &HifApp) -> bool {
    app.jobs.training(JobKind::Run).is_some()
}

/// The run bar: while a run trains, across the top of the window at every size (above the
/// settings and the tabs), Pause / Resume, Stop, the progress and the status, so the
/// controls of a running run are never scrolled or folded away.
pub fn run_bar(app: &mut HifApp, ui: &mut egui::Ui) {
    if !run_bar_shown(app) {
        return;
    }
    egui::Panel::top("run-bar").show(ui, |ui| {
        crate::layout::fitted(ui, "run bar", |ui| {
            ui.horizontal_wrapped(|ui| {
                let Some(t) = app.jobs.training(JobKind::Run) else {
                    return;
                };
                let (paused, elapsed_s) = (t.paused(), t.elapsed_s());
                let label = if paused { "Resume" } else { "Pause" };
                if ui.button(label).clicked() {
                    app.pause_live(!paused);
                }
                if ui.button("Stop").clicked() {
                    app.stop_live();
                }
                // Before the first step (GPU kernels compiling, the first step): how long
                // it has been, so the wait never looks stuck.
                if app.runs.live.as_ref().is_none_or(|v| v.loss.is_empty()) {
                    ui.label(format!("{elapsed_s:.0} s since Start"));
                    ui.ctx()
                        .request_repaint_after(std::time::Duration::from_millis(500));
                }
                if let Some(view) = &app.runs.live {
                    let steps = view.config.as_ref().map(|c| c.train.steps as usize);
                    if let Some(n) = steps.filter(|n| *n > 0) {
                        let done = view.loss.len().min(n);
                        ui.add(
                            egui::ProgressBar::new(done as f32 / n as f32)
                                .desired_width(140.0)
                                .text(format!("step {done} of {n}")),
                        );
                    }
                }
                ui.label(&app.messages.status);
            });
        });
    });
}

/// What is training now, from the running run's own config (not the form, which may already
/// describe the next run, or a lesson's run the form cannot express).
fn running_box(app: &HifApp, ui: &mut egui::Ui) {
    if !app.jobs.any(&[JobKind::Run, JobKind::Base]) {
        return;
    }
    egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.set_width(ui.available_width());
        if app.jobs.running(JobKind::Base) && !app.jobs.running(JobKind::Run) {
            ui.label(RichText::new("Running: pretraining the lessons' base model").strong());
            return;
        }
        let Some(view) = &app.runs.live else {
            return;
        };
        let state = if app.paused() { "Paused" } else { "Running" };
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
                    c.train.steps,
                    c.train.lr,
                    c.model.d_model,
                    c.model.layers,
                    app.device.backend.name()
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
fn runs_box(app: &mut HifApp, ui: &mut egui::Ui) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let name = ui.label("Open a run folder:");
        ui.text_edit_singleline(&mut app.form.open_path)
            .labelled_by(name.id);
        ui.horizontal_wrapped(|ui| {
            if ui.button("Open run").clicked() {
                app.open_run();
            }
            if ui
                .button("Follow")
                .on_hover_text(
                    "open the run folder and read it again as another process writes it \
                     (a torchrun of hif8lab.torch.train, a train in a terminal)",
                )
                .clicked()
            {
                app.follow(std::path::PathBuf::from(app.form.open_path.trim()));
            }
            if ui
                .button("Open HF model")
                .on_hover_text(
                    "a Hugging Face Llama folder (config.json, *.safetensors, tokenizer.json) \
                     or a GGUF file: Start continues training it",
                )
                .clicked()
            {
                let dir = std::path::PathBuf::from(app.form.open_path.trim());
                app.open_hf_dir(&dir);
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
        app.messages.status = e;
    }
    #[cfg(not(target_arch = "wasm32"))]
    ui.label("Files dropped on the window open too.");
    if let Some(view) = &app.runs.live {
        let stem = view.name.replace(['/', ' ', '='], "_");
        ui.horizontal_wrapped(|ui| {
            ui.label("Export:");
            if ui.button("loss (CSV)").clicked() {
                app.messages.status = crate::export(
                    &format!("{stem}-loss.csv"),
                    view.loss_csv(app.runs.baseline_loss()).as_bytes(),
                    "text/csv",
                );
            }
            if ui.button("loss (JSONL)").clicked() {
                app.messages.status = crate::export(
                    &format!("{stem}-loss.jsonl"),
                    view.loss_jsonl().as_bytes(),
                    "application/x-ndjson",
                );
            }
            if ui.button("calls (CSV)").clicked() {
                app.messages.status = crate::export(
                    &format!("{stem}-calls.csv"),
                    view.calls_csv().as_bytes(),
                    "text/csv",
                );
            }
            if let Some(h) = &view.histogram
                && ui.button("histogram (CSV)").clicked()
            {
                app.messages.status = crate::export(
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
    egui::CentralPanel::default().show(ui, |ui| {
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
            crate::layout::scroll(ui, "settings page", |ui| side_panel_contents(app, ui));
            return;
        }
        if narrow && !run_bar_shown(app) {
            // The status stays in sight while the settings are folded away.
            ui.label(RichText::new(&app.messages.status).small());
        }
        match app.selection.tab {
            Tab::Lessons => {
                crate::layout::scroll(ui, "lessons", |ui| lessons(app, ui));
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
            crate::layout::scroll(ui, "welcome", |ui| welcome(app, ui));
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

/// The first screen (no run yet): what this is, where to begin, and the words it uses.
fn welcome(app: &mut HifApp, ui: &mut egui::Ui) {
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
            app.selection.tab = Tab::Lessons;
        }
        ui.label("five guided lessons (a minute or two each), or");
    });
    ui.horizontal_wrapped(|ui| {
        let ok = app.check_form().1.is_ok();
        if ui
            .add_enabled(ok && !app.jobs.running(JobKind::Run), egui::Button::new("A first run »"))
            .on_hover_text("train the form's preset (smoke: 40 steps, a few seconds) with its matched baseline")
            .clicked()
        {
            let ctx = ui.ctx().clone();
            app.start(move || ctx.request_repaint());
        }
        ui.label(format!(
            "train the {} preset with the settings {}, then look at Amax and Estimators.",
            app.form.settings.preset,
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
}
