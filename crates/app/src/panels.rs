//! The panels: the side panel (preset, the run's settings validated live field by field,
//! Start / Pause / Stop / Reset, opening runs, exports) and the central tabs; the data panels
//! themselves are in [`crate::charts`].

use eframe::egui::{self, Color32, RichText};
use hif8lab_scaling::Role;

use crate::charts::PanelCtx;
use crate::jobs::JobKind;
use crate::settings::{FIELDS, Kind};
use crate::state::RunView;
use crate::theme::TextColours;
use crate::{HifApp, Tab};

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
    let warning = app.settings.field_warning(key);
    let flag = error
        .map(|e| (e, TextColours::of(ui.visuals()).fails))
        .or(warning
            .as_deref()
            .map(|w| (w, TextColours::of(ui.visuals()).inconclusive)));
    match f.kind {
        Kind::Text | Kind::Blocks => {
            ui.horizontal(|ui| {
                let name = field_label(ui, f, flag);
                let mut text = app.settings.get(key).to_owned();
                let edit = egui::TextEdit::singleline(&mut text).desired_width(120.0);
                if ui.add(edit).labelled_by(name.id).changed() {
                    app.settings.set(key, &text);
                }
            });
        }
        Kind::Choice(options) => {
            ui.horizontal(|ui| {
                let current = app.settings.get(key).to_owned();
                let name = field_label(ui, f, flag);
                egui::ComboBox::from_id_salt(key)
                    .selected_text(current.clone())
                    .show_ui(ui, |ui| {
                        for o in options {
                            if ui.selectable_label(current == *o, *o).clicked() {
                                app.settings.set(key, o);
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
                let current = app.settings.get(key).to_owned();
                for o in options {
                    let mut on = current.split(',').any(|s| s.trim() == *o);
                    if ui.checkbox(&mut on, *o).changed() {
                        app.settings.toggle(key, o, on);
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

/// The settings: what is running, the form, Start / Pause / Stop / Reset, opening runs.
pub fn side_panel_contents(app: &mut HifApp, ui: &mut egui::Ui) {
    ui.heading("hif8lab");
    ui.label("HiF8 delayed-scaling lab");
    ui.separator();
    running_box(app, ui);
    egui::ComboBox::from_label("preset")
        .selected_text(app.settings.preset.clone())
        .show_ui(ui, |ui| {
            for (name, _) in hif8lab_train::config::PRESETS {
                if ui
                    .selectable_label(app.settings.preset == name, name)
                    .clicked()
                {
                    app.settings = app.settings.switched_to(name);
                }
            }
        });
    if let Some(m) = &app.hf_model {
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
            app.hf_model = None;
            app.form_check = None;
        }
    }
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
        ui.label(&app.status);
    }
    if let Some(n) = &app.notice {
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
    let gpu_available = app.gpu.is_some();
    ui.add_enabled(
        gpu_available,
        egui::Checkbox::new(&mut app.settings.gpu, "train on the GPU"),
    )
    .on_disabled_hover_text("no GPU device: eframe does not render with wgpu here");
    ui.checkbox(
        &mut app.settings.baseline,
        "train the matched baseline alongside",
    );
    // The fields' messages, listed here (not under each field: a message appearing must not
    // move the field the user is about to click).
    let marked: Vec<&String> = field_errors.iter().flatten().collect();
    match &whole {
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
        if let Some(w) = app.settings.field_warning(f.key) {
            ui.label(RichText::new(w).color(TextColours::of(ui.visuals()).inconclusive));
        }
    }
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
                let baseline = app.jobs.training(JobKind::Baseline);
                let label = if t.paused() { "Resume" } else { "Pause" };
                let pause = ui.button(label);
                if pause.clicked() {
                    let pause = !t.paused();
                    for t in [Some(t), baseline].into_iter().flatten() {
                        t.set_paused(pause);
                    }
                    let step = app.runs.live.as_ref().map_or(0, |v| v.loss.len());
                    app.status = if pause {
                        format!("Paused after step {step}: press Resume to continue.")
                    } else {
                        format!("Resumed after step {step}: training.")
                    };
                }
                if ui.button("Stop").clicked() {
                    for t in [Some(t), baseline].into_iter().flatten() {
                        t.stop();
                    }
                }
                // Before the first step (GPU kernels compiling, the first step): how long
                // it has been, so the wait never looks stuck.
                if app.runs.live.as_ref().is_none_or(|v| v.loss.is_empty()) {
                    ui.label(format!("{:.0} s since Start", t.elapsed_s()));
                    ui.ctx()
                        .request_repaint_after(std::time::Duration::from_millis(500));
                }
                if let Some(view) = &app.runs.live {
                    let steps = view
                        .config
                        .as_ref()
                        .and_then(|c| crate::settings::lookup(c, "train.steps"))
                        .map(crate::settings::text_of)
                        .and_then(|s| s.parse::<usize>().ok());
                    if let Some(n) = steps.filter(|n| *n > 0) {
                        let done = view.loss.len().min(n);
                        ui.add(
                            egui::ProgressBar::new(done as f32 / n as f32)
                                .desired_width(140.0)
                                .text(format!("step {done} of {n}")),
                        );
                    }
                }
                ui.label(&app.status);
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
            let get = |k: &str| {
                crate::settings::lookup(c, k)
                    .map(crate::settings::text_of)
                    .unwrap_or_else(|| "?".into())
            };
            let qat = if get("qat.enabled") == "true" {
                format!(
                    "QAT {} with {}, target {}",
                    get("qat.scaling.format"),
                    get("qat.scaling.estimator"),
                    get("qat.scaling.target")
                )
            } else {
                "no quantization".into()
            };
            crate::glossary::label(
                ui,
                format!(
                    "{} steps at lr {}; model d_model {} × {} layers; {qat}; on {}.",
                    get("train.steps"),
                    get("train.lr"),
                    get("model.d_model"),
                    get("model.layers"),
                    app.backend.name()
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
        ui.text_edit_singleline(&mut app.open_path)
            .labelled_by(name.id);
        ui.horizontal_wrapped(|ui| {
            if ui.button("Open run").clicked() {
                app.open_run();
            }
            if ui
                .button("Open HF model")
                .on_hover_text(
                    "a Hugging Face Llama folder (config.json, *.safetensors, tokenizer.json) \
                     or a GGUF file: Start continues training it",
                )
                .clicked()
            {
                let dir = std::path::PathBuf::from(app.open_path.trim());
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
        app.status = e;
    }
    #[cfg(not(target_arch = "wasm32"))]
    ui.label("Files dropped on the window open too.");
    if let Some(view) = &app.runs.live {
        let stem = view.name.replace(['/', ' ', '='], "_");
        ui.horizontal_wrapped(|ui| {
            ui.label("Export:");
            if ui.button("loss (CSV)").clicked() {
                app.status = crate::export(
                    &format!("{stem}-loss.csv"),
                    view.loss_csv(app.runs.baseline_loss()).as_bytes(),
                    "text/csv",
                );
            }
            if ui.button("loss (JSONL)").clicked() {
                app.status = crate::export(
                    &format!("{stem}-loss.jsonl"),
                    view.loss_jsonl().as_bytes(),
                    "application/x-ndjson",
                );
            }
            if ui.button("calls (CSV)").clicked() {
                app.status = crate::export(
                    &format!("{stem}-calls.csv"),
                    view.calls_csv().as_bytes(),
                    "text/csv",
                );
            }
            if let Some(h) = &view.histogram
                && ui.button("histogram (CSV)").clicked()
            {
                app.status = crate::export(
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
        app.central_rect = ui.max_rect();
        let narrow = crate::layout::narrow(ui.ctx());
        crate::layout::fitted(ui, "tab row", |ui| {
            ui.horizontal_wrapped(|ui| {
                if narrow
                    && ui
                        .selectable_label(app.settings_page, "Settings »")
                        .on_hover_text("the run's settings, Start and Stop")
                        .clicked()
                {
                    app.settings_page = !app.settings_page;
                }
                for (tab, name) in TABS {
                    let on = app.selection.tab == tab && !(narrow && app.settings_page);
                    if ui.selectable_label(on, name).clicked() {
                        app.selection.tab = tab;
                        app.settings_page = false;
                    }
                }
            });
        });
        ui.separator();
        if narrow && app.settings_page {
            crate::layout::scroll(ui, "settings page", |ui| side_panel_contents(app, ui));
            return;
        }
        if narrow && !run_bar_shown(app) {
            // The status stays in sight while the settings are folded away.
            ui.label(RichText::new(&app.status).small());
        }
        match app.selection.tab {
            Tab::Lessons => {
                crate::layout::scroll(ui, "lessons", |ui| lessons(app, ui));
                return;
            }
            Tab::Runs => {
                let HifApp {
                    runs_panel,
                    runs,
                    exports,
                    ..
                } = app;
                let chosen =
                    crate::layout::scroll(ui, "runs", |ui| runs_panel.show(ui, runs, exports));
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
            exports,
            jobs,
            base_probes,
            status,
            ..
        } = app;
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
            base_probes: base_probes.clone(),
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
            .on_hover_text("three short experiments, each with a prediction to make and a verdict")
            .clicked()
        {
            app.selection.tab = Tab::Lessons;
        }
        ui.label("three guided experiments (about a minute each), or");
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
            app.settings.preset,
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

/// The Lessons panel: what to predict, what to look at, the controls that matter, a live
/// "what just happened" from the current run's numbers, and (natively) the lesson's headless
/// scenario with its judged claims.
fn lessons(app: &mut HifApp, ui: &mut egui::Ui) {
    ui.horizontal_wrapped(|ui| {
        for l in &hif8lab_train::lesson::LESSONS {
            if ui
                .selectable_label(app.lesson.name == l.name, l.title)
                .clicked()
            {
                app.select_lesson(l);
            }
        }
    });
    let l = app.lesson;
    ui.heading(l.title);
    ui.label(RichText::new("Predict").strong());
    crate::glossary::label(ui, l.predict);
    ui.label(RichText::new("Look at").strong());
    crate::glossary::label(ui, l.look);
    // The panels the lesson points at, one click away.
    ui.horizontal_wrapped(|ui| {
        for (tab, name) in TABS {
            if tab != Tab::Lessons
                && l.look.contains(name)
                && ui
                    .link(format!("Open {name} »"))
                    .on_hover_text(format!("show the {name} panel of the current run"))
                    .clicked()
            {
                app.selection.tab = tab;
            }
        }
    });
    crate::glossary::label(
        ui,
        format!("Controls that matter: {}.", l.controls.join(", ")),
    );
    let running = app.jobs.any(&[JobKind::Run, JobKind::Base]);
    if l.name == "forgetting" {
        forgetting_controls(app, ui, running);
    }
    if l.name == "outliers" {
        // Nothing trains here: the verdict comes from the committed real-model runs.
        if ui
            .button("Judge the committed SmolLM2-135M runs")
            .on_hover_text("the claims of lesson 1 on the real model's outlier quantizer, from docs/results/real-smollm2 (hif8lab lesson run outliers)")
            .clicked()
        {
            app.judge_real_outliers();
        }
    } else {
        scenario_buttons(app, ui, running);
    }
    // The scenario's progress right under its button, where the user looks after pressing.
    if let Some(p) = app.jobs.lesson_progress() {
        ui.label(RichText::new(p).strong());
    }
    ui.separator();
    if l.name != "outliers" {
        ui.label(RichText::new("What just happened (this lesson's live run)").strong());
        crate::glossary::label(ui, live_reading(app));
    }
    if let Some(r) = &app.lesson_report
        && r.lesson == l.name
    {
        ui.label(
            RichText::new("The lesson's scenario (its runs, judged from their numbers)").strong(),
        );
        let held = r.claims.iter().filter(|c| c.holds).count();
        ui.label(RichText::new(format!("{held} of {} claims hold", r.claims.len())).strong());
        for c in &r.claims {
            use hif8lab_train::stats::Verdict3;
            let t = TextColours::of(ui.visuals());
            let colour = match c.verdict {
                Verdict3::Holds => t.holds,
                Verdict3::Fails => t.fails,
                Verdict3::Inconclusive => t.inconclusive,
            };
            ui.label(RichText::new(format!("{}: {}", c.verdict.as_str(), c.claim)).color(colour));
            // The same words as the command line and the reports.
            ui.label(format!("Measured: {}.", c.measured_words()));
            for part in &c.parts {
                ui.label(format!("Also: {part}."));
            }
            // The claim's raw numbers stay available, folded.
            egui::CollapsingHeader::new("details (the claim's data)")
                .id_salt(("claim", &c.claim))
                .show(ui, |ui| {
                    ui.label(RichText::new(c.evidence.to_string()).small().monospace());
                });
        }
        ui.label(&r.summary);
        small_multiples(app, ui);
    }
}

/// The forgetting lesson's controls: the learning rate (log slider), QAT on/off, and the
/// run from the pretrained base.
fn forgetting_controls(app: &mut HifApp, ui: &mut egui::Ui, running: bool) {
    ui.horizontal_wrapped(|ui| {
        ui.add(
            egui::Slider::new(&mut app.lesson_lr, 1e-5..=1e-2)
                .logarithmic(true)
                .text("learning rate")
                .custom_formatter(|v, _| format!("{v:.0e}")),
        );
        ui.checkbox(&mut app.lesson_qat, "HiF8 QAT (max_window(64), warmup)");
    });
    {
        let label = if app.base.is_some() {
            "Continue training the base at this rate"
        } else {
            "Pretrain the base, then continue at this rate"
        };
        if ui.add_enabled(!running, egui::Button::new(label)).clicked() {
            let ctx = ui.ctx().clone();
            app.start_from_base(move || ctx.request_repaint());
        }
        if let Some(b) = &app.base_probes {
            let from = match app.base_from {
                "shipped" => {
                    " Shipped with the app: the weights the desktop app's pretraining gives, bit for bit (a browser's own pretraining rounds its products differently)."
                }
                "pretrained" => " Pretrained here.",
                _ => "",
            };
            ui.label(format!(
                "Base model: knowledge {:.1} %, completion {:.1} % (probes of the facts it was pretrained on).{from}",
                100.0 * b.knowledge_acc_norm,
                100.0 * b.completion_acc_norm
            ));
        }
    }
}

/// A scenario run's knowledge before → after as its claim measures it: from the base model
/// (what every run continued from) to the run's last evaluation, with the relative drop the
/// claims use and the same change in points.
pub fn knowledge_caption(base: Option<&hif8lab_train::ProbeScores>, v: &RunView) -> String {
    let (Some(base), Some(end)) = (base, v.probes.last()) else {
        return String::new();
    };
    let (b, e) = (base.knowledge_acc_norm, end.knowledge_acc_norm);
    let drop = hif8lab_train::corpus::relative_drop(b, e);
    format!(
        "knowledge {:.1} % (base) to {:.1} %: {} {:.1} % relative ({:+.1} points)",
        100.0 * b,
        100.0 * e,
        if drop >= 0.0 { "dropped" } else { "rose" },
        drop.abs(),
        100.0 * (e - b)
    )
}

/// The lesson scenario's runs as small multiples: each run's loss with its numbers.
fn small_multiples(app: &HifApp, ui: &mut egui::Ui) {
    let views = &app.lesson_views;
    if views.is_empty() {
        return;
    }
    ui.label(RichText::new("The scenario's runs").strong());
    let top = views
        .iter()
        .flat_map(|v| v.loss.iter().map(|p| p[1]))
        .fold(0.0f64, f64::max);
    // As many columns as fit at 200 points or more (one on a phone).
    let columns = ((ui.available_width() / 210.0).floor() as usize).clamp(1, 4);
    let width = (ui.available_width() / columns as f32 - 12.0).max(120.0);
    egui::Grid::new("multiples").show(ui, |ui| {
        for (i, v) in views.iter().enumerate() {
            ui.vertical(|ui| {
                ui.set_width(width);
                let above = v.calls_above().get(v.active).copied().unwrap_or(0);
                ui.add(egui::Label::new(RichText::new(&v.name).strong().small()).wrap());
                crate::glossary::label(
                    ui,
                    format!(
                        "final loss {:.3}; {above} calls above the estimate; {}",
                        v.loss.last().map(|p| p[1]).unwrap_or(f64::NAN),
                        knowledge_caption(app.base_probes.as_ref(), v)
                    ),
                );
                egui_plot::Plot::new(format!("multiple-{i}"))
                    .height(110.0)
                    .width(width)
                    .x_axis_label("step")
                    .y_axis_label("loss")
                    .include_y(0.0)
                    .include_y(top)
                    .allow_drag(false)
                    .allow_zoom(false)
                    .allow_scroll(false)
                    .show(ui, |p| {
                        p.line(
                            egui_plot::Line::new("loss", v.loss.clone())
                                .color(crate::charts::series(0)),
                        );
                    });
            });
            if i % columns == columns - 1 {
                ui.end_row();
            }
        }
    });
}

/// A reading of the live run for the lesson, from its numbers.
fn live_reading(app: &HifApp) -> String {
    let start = if app.lesson.name == "forgetting" {
        if app.base.is_some() {
            "“Continue training the base at this rate”"
        } else {
            "“Pretrain the base, then continue at this rate”"
        }
    } else {
        "“Set up and start a live run”"
    };
    let Some(view) = app
        .runs
        .live
        .as_ref()
        .filter(|_| app.lesson_run == Some(app.lesson.name))
    else {
        if app
            .lesson_report
            .as_ref()
            .is_some_and(|r| r.lesson == app.lesson.name)
        {
            return format!(
                "The scenario's runs are judged below. For a live run of your own, press {start}."
            );
        }
        return format!("No run of this lesson yet: press {start}.");
    };
    if view.loss.is_empty() {
        return format!("Starting {}: preparing the first step…", view.name);
    }
    if app.lesson.name == "forgetting"
        && let (Some(base), Some(now)) = (&app.base_probes, view.probes.last())
    {
        let drop =
            hif8lab_train::corpus::relative_drop(base.knowledge_acc_norm, now.knowledge_acc_norm);
        let first = view.loss.first().map(|p| p[1]).unwrap_or(f64::NAN);
        let last = view.loss.last().map(|p| p[1]).unwrap_or(f64::NAN);
        let lr = view
            .config
            .as_ref()
            .and_then(|c| crate::settings::lookup(c, "train.lr"))
            .map(crate::settings::text_of)
            .unwrap_or_default();
        return format!(
            "{} steps at lr {lr}: knowledge accuracy {:.1} % to {:.1} % (a drop of {drop:.1} % relative to the base) while the training loss went from {first:.3} to {last:.3}. {}",
            view.loss.len(),
            100.0 * base.knowledge_acc_norm,
            100.0 * now.knowledge_acc_norm,
            match (drop >= 10.0, view_lr(view) >= 1e-3) {
                (true, true) =>
                    "The model forgot facts while its loss looked fine: try a rate 30x lower.",
                (true, false) => "The model forgot facts even at this low rate.",
                (false, true) =>
                    "The facts survived so far at this high rate: watch the next evaluations.",
                (false, false) => "The facts survived at this low rate: try a rate 30x higher.",
            }
        );
    }
    let ag = view.calls_above_roles(&[Role::A, Role::G]);
    let w = view.calls_above_roles(&[Role::W]);
    let of = |counts: &[u64], prefix: &str| {
        view.estimators
            .iter()
            .zip(counts)
            .find(|(n, _)| n.starts_with(prefix))
            .map(|(_, c)| *c)
            .unwrap_or(0)
    };
    let ape = app
        .ape()
        .map(|a| format!(" The loss is within {a:.3} % (APE) of the matched baseline."))
        .unwrap_or_default();
    format!(
        "{} steps. On activations and gradients, amax exceeded most_recent's estimate on {} calls and max_window(64)'s on {}; on weights (drifting slowly) {} and {}.{ape}",
        view.loss.len(),
        of(&ag, "most_recent"),
        of(&ag, "max_window"),
        of(&w, "most_recent"),
        of(&w, "max_window"),
    )
}

/// The learning rate `view` trains at (NaN when unknown).
fn view_lr(view: &RunView) -> f64 {
    view.config
        .as_ref()
        .and_then(|c| crate::settings::lookup(c, "train.lr"))
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(f64::NAN)
}

/// A lesson's two buttons: a live run set up for it, and its judged scenario.
fn scenario_buttons(app: &mut HifApp, ui: &mut egui::Ui, running: bool) {
    let l = app.lesson;
    ui.horizontal_wrapped(|ui| {
        if l.name != "forgetting"
            && ui
                .add_enabled(!running, egui::Button::new("Set up and start a live run"))
                .clicked()
        {
            app.setup_lesson();
            let ctx = ui.ctx().clone();
            app.start(move || ctx.request_repaint());
            app.lesson_run = Some(l.name);
        }
        let busy = app.jobs.any(&[JobKind::Lesson, JobKind::Scenario]) || app.scenario_waiting;
        if ui
            .add_enabled(!busy, egui::Button::new("Run the lesson's scenario"))
            .on_hover_text("pretrained base + the lesson's runs, judged from their numbers (hif8lab lesson run)")
            .clicked()
        {
            #[cfg(not(target_arch = "wasm32"))]
            app.run_lesson_scenario();
            #[cfg(target_arch = "wasm32")]
            app.run_scenario_in_memory();
        }
    });
}
