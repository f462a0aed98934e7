//! The panels: the side panel (preset, settings with inline validation, Start / Pause / Stop,
//! open a run) and the central tabs (Loss, Amax, Saturation, Estimators).

use eframe::egui::{self, Color32, RichText};
use egui_plot::{HLine, Legend, Line, Plot, VLine};

use crate::{HifApp, Tab};

fn field(ui: &mut egui::Ui, label: &str, value: &mut String) {
    ui.horizontal(|ui| {
        let name = ui.label(label);
        ui.text_edit_singleline(value).labelled_by(name.id);
    });
}

/// The left side panel.
pub fn side_panel(app: &mut HifApp, ui: &mut egui::Ui) {
    egui::Panel::left("settings")
        .min_size(240.0)
        .show(ui, |ui| {
            ui.heading("hif8lab");
            ui.label("HiF8 delayed-scaling lab");
            ui.separator();
            egui::ComboBox::from_label("preset")
                .selected_text(app.settings.preset.clone())
                .show_ui(ui, |ui| {
                    for (name, _) in hif8lab_train::config::PRESETS {
                        if ui
                            .selectable_label(app.settings.preset == name, name)
                            .clicked()
                        {
                            app.settings = crate::Settings::from_preset(name);
                        }
                    }
                });
            let s = &mut app.settings;
            field(ui, "steps", &mut s.steps);
            field(ui, "lr", &mut s.lr);
            field(ui, "estimator", &mut s.estimator);
            field(ui, "window", &mut s.window);
            field(ui, "target", &mut s.target);
            field(ui, "QAT warmup", &mut s.warmup);
            let gpu_available = app.gpu.is_some();
            ui.add_enabled(
                gpu_available,
                egui::Checkbox::new(&mut app.settings.gpu, "train on the GPU"),
            );
            ui.checkbox(
                &mut app.settings.baseline,
                "train the matched baseline alongside",
            );
            let valid = app.settings.config();
            if let Err(e) = &valid {
                ui.label(
                    RichText::new(format!("Invalid: {e}")).color(Color32::from_rgb(220, 60, 60)),
                );
            }
            ui.label("History advances once per quantizer call (per micro-batch).");
            ui.separator();
            let running = app.training.is_some();
            ui.horizontal(|ui| {
                if ui
                    .add_enabled(valid.is_ok() && !running, egui::Button::new("Start"))
                    .clicked()
                {
                    let ctx = ui.ctx().clone();
                    app.start(move || ctx.request_repaint());
                }
                if let Some(t) = &app.training {
                    let label = if t.paused() { "Resume" } else { "Pause" };
                    if ui.button(label).clicked() {
                        t.set_paused(!t.paused());
                    }
                    if ui.button("Stop").clicked() {
                        t.stop();
                        if let Some(b) = &app.baseline_training {
                            b.stop();
                        }
                    }
                }
            });
            ui.label(&app.status);
            if let Some(n) = &app.notice {
                ui.label(RichText::new(n).color(Color32::from_rgb(230, 150, 40)));
            }
            ui.separator();
            runs_box(app, ui);
        });
}

/// Opening runs and traces, and exporting the current one.
fn runs_box(app: &mut HifApp, ui: &mut egui::Ui) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let name = ui.label("Open a run folder:");
        ui.text_edit_singleline(&mut app.open_path)
            .labelled_by(name.id);
        if ui.button("Open run").clicked() {
            app.open_run();
        }
    }
    #[cfg(target_arch = "wasm32")]
    if ui
        .button("Open files…")
        .on_hover_text("a run folder's metrics.jsonl + trace.jsonl, or one trace / CSV")
        .clicked()
        && let Err(e) = crate::web::pick_files()
    {
        app.status = e;
    }
    #[cfg(not(target_arch = "wasm32"))]
    ui.label("Files dropped on the window open too.");
    if let Some(view) = &app.view {
        ui.horizontal(|ui| {
            let stem = view.name.replace(['/', ' '], "_");
            if ui.button("Export loss (JSONL)").clicked() {
                app.status = crate::export(
                    &format!("{stem}-loss.jsonl"),
                    view.loss_jsonl().as_bytes(),
                    "application/x-ndjson",
                );
            }
            if ui.button("Export calls (CSV)").clicked() {
                app.status = crate::export(
                    &format!("{stem}-calls.csv"),
                    view.calls_csv().as_bytes(),
                    "text/csv",
                );
            }
        });
    }
}

/// The central tabs.
pub fn central(app: &mut HifApp, ui: &mut egui::Ui) {
    egui::CentralPanel::default().show(ui, |ui| {
        ui.horizontal(|ui| {
            for (tab, name) in [
                (Tab::Loss, "Loss"),
                (Tab::Amax, "Amax"),
                (Tab::Saturation, "Saturation"),
                (Tab::Estimators, "Estimators"),
                (Tab::Lessons, "Lessons"),
            ] {
                ui.selectable_value(&mut app.tab, tab, name);
            }
        });
        ui.separator();
        if app.tab == Tab::Lessons {
            lessons(app, ui);
            return;
        }
        // Taken out while drawing (not cloned: a long run holds many calls).
        let Some(view) = app.view.take() else {
            ui.label("No run yet: press Start, or open a run folder.");
            return;
        };
        match app.tab {
            Tab::Loss => loss(ui, &view, &app.baseline, app.ape_of(&view)),
            Tab::Amax => amax(app, ui, &view),
            Tab::Saturation => saturation(app, ui, &view),
            Tab::Estimators => estimators(ui, &view),
            Tab::Lessons => {}
        }
        app.view = Some(view);
    });
}

fn qat_line(view: &crate::state::RunView) -> Option<VLine> {
    view.qat_from
        .map(|s| VLine::new("QAT on", s as f64).color(Color32::GRAY))
}

fn loss(ui: &mut egui::Ui, view: &crate::state::RunView, baseline: &[[f64; 2]], ape: Option<f64>) {
    let ape = ape
        .map(|a| {
            format!(
                "; APE vs the matched baseline {a:.3} % (the loss hides saturation: see Estimators)"
            )
        })
        .unwrap_or_default();
    ui.label(format!("{}: {} steps{ape}", view.name, view.loss.len()));
    Plot::new("loss")
        .legend(Legend::default())
        .x_axis_label("step")
        .y_axis_label("loss")
        .show(ui, |p| {
            p.line(Line::new("training loss", view.loss.clone()));
            if !baseline.is_empty() {
                p.line(Line::new(
                    "matched baseline (no quantization)",
                    baseline.to_vec(),
                ));
            }
            if let Some(v) = qat_line(view) {
                p.vline(v);
            }
        });
}

/// An axis label for a log2 value: `2^3`, or `2^1.25` between integer binades.
fn pow2_label(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("2^{}", v.round())
    } else {
        format!("2^{v:.2}")
    }
}

/// log2 of a positive value (non-positive → NaN, not drawn).
fn log2(v: f32) -> f64 {
    if v > 0.0 {
        f64::from(v).log2()
    } else {
        f64::NAN
    }
}

fn amax(app: &mut HifApp, ui: &mut egui::Ui, view: &crate::state::RunView) {
    let ids: Vec<String> = view.calls.keys().cloned().collect();
    if ids.is_empty() {
        ui.label("No quantizer calls yet (quantization starts after the warmup).");
        return;
    }
    let selected = app
        .selected
        .clone()
        .filter(|s| ids.contains(s))
        .unwrap_or_else(|| ids[0].clone());
    egui::ComboBox::from_label("quantizer")
        .selected_text(selected.clone())
        .show_ui(ui, |ui| {
            for id in &ids {
                ui.selectable_value(&mut app.selected, Some(id.clone()), id.as_str());
            }
        });
    let calls = &view.calls[&selected];
    ui.label(format!(
        "{} calls. log2 axis; horizontal lines: the 3-bit tier top (the active estimate) and, when near, overflow (est·40960/target).",
        calls.len()
    ));
    let active = view.active;
    let data_top = calls
        .iter()
        .map(|c| log2(c.amax))
        .filter(|v| v.is_finite())
        .fold(f64::MIN, f64::max);
    if let Some(last) = calls.last().and_then(|c| c.est.get(active)) {
        let headroom = (40960.0f64 / f64::from(view.target)).log2() + log2(*last) - data_top;
        ui.label(format!(
            "Overflow lies {headroom:.1} binades above the largest amax shown."
        ));
    }
    Plot::new("amax")
        .legend(Legend::default())
        .x_axis_label("quantizer call")
        .y_axis_label("amax")
        .y_axis_formatter(|m, _| pow2_label(m.value))
        .show(ui, |p| {
            for (k, name) in view.estimators.iter().enumerate() {
                let pts: Vec<[f64; 2]> = calls
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| c.est.get(k).map(|e| [i as f64, log2(*e)]))
                    .collect();
                p.line(Line::new(format!("est: {name}"), pts));
            }
            if let Some(last) = calls.last().and_then(|c| c.est.get(active)) {
                let est = log2(*last);
                p.hline(
                    HLine::new("3-bit tier top (last active est)", est).color(Color32::DARK_GREEN),
                );
                // Overflow sits log2(40960/target) binades above; drawn only when the data
                // comes within 4 binades of it, so it does not squash the chart.
                let overflow = est + (40960.0f64 / f64::from(view.target)).log2();
                if overflow - data_top < 4.0 {
                    p.hline(HLine::new("overflow", overflow).color(Color32::RED));
                }
            }
            // amax last and thicker, on top of the estimates.
            p.line(
                Line::new(
                    "amax",
                    calls
                        .iter()
                        .enumerate()
                        .map(|(i, c)| [i as f64, log2(c.amax)])
                        .collect::<Vec<_>>(),
                )
                .width(2.5)
                .color(Color32::WHITE),
            );
        });
}

fn saturation(app: &mut HifApp, ui: &mut egui::Ui, view: &crate::state::RunView) {
    ui.checkbox(
        &mut app.show_overflow,
        "show overflow instead of above-estimate counts",
    );
    let ids: Vec<String> = view.calls.keys().cloned().collect();
    let max_step = view
        .calls
        .values()
        .flatten()
        .map(|c| c.step)
        .max()
        .unwrap_or(0) as usize
        + 1;
    let k = view.active;
    let value = |c: &crate::state::Call| -> u64 {
        if app.show_overflow {
            c.overflow.get(k).copied().unwrap_or(0)
        } else {
            c.above_est.get(k).copied().unwrap_or(0)
        }
    };
    let peak = view
        .calls
        .values()
        .flatten()
        .map(value)
        .max()
        .unwrap_or(0)
        .max(1);
    ui.label(format!("rows: quantizers (block.module.role); columns: steps; brightest = {peak} elements. Click a row to open it in Amax."));
    let (rect, response) = ui.allocate_exact_size(
        egui::vec2(ui.available_width(), (ids.len() as f32 * 14.0).max(20.0)),
        egui::Sense::click(),
    );
    let painter = ui.painter_at(rect);
    let cell_w = rect.width() / max_step.max(1) as f32;
    for (row, id) in ids.iter().enumerate() {
        for c in &view.calls[id] {
            let v = value(c);
            if v == 0 {
                continue;
            }
            let t = (v as f32 / peak as f32).sqrt();
            let x = rect.left() + c.step as f32 * cell_w;
            let y = rect.top() + row as f32 * 14.0;
            let cell =
                egui::Rect::from_min_size(egui::pos2(x, y), egui::vec2(cell_w.max(1.0), 13.0));
            painter.rect_filled(
                cell,
                0.0,
                Color32::from_rgb((60.0 + 195.0 * t) as u8, 40, (90.0 * (1.0 - t)) as u8),
            );
        }
    }
    if let Some(pos) = response.hover_pos() {
        let row = ((pos.y - rect.top()) / 14.0) as usize;
        let step = ((pos.x - rect.left()) / cell_w) as u64;
        if let Some(id) = ids.get(row) {
            let total: u64 = view.calls[id]
                .iter()
                .filter(|c| c.step == step)
                .map(value)
                .sum();
            response
                .clone()
                .on_hover_text(format!("{id}, step {step}: {total}"));
            if response.clicked() {
                app.selected = Some(id.clone());
                app.tab = Tab::Amax;
            }
        }
    }
}

fn estimators(ui: &mut egui::Ui, view: &crate::state::RunView) {
    ui.label(view.reading());
    let counts = view.calls_above();
    let headroom = view.median_headroom();
    egui::Grid::new("estimators").striped(true).show(ui, |ui| {
        ui.strong("estimator");
        ui.strong("calls above its estimate");
        ui.strong("median headroom est/amax");
        ui.end_row();
        for ((name, c), h) in view.estimators.iter().zip(&counts).zip(&headroom) {
            ui.label(name);
            ui.label(c.to_string());
            ui.label(format!("{h:.3}"));
            ui.end_row();
        }
    });
}

/// The Lessons panel: what to predict, what to look at, the controls that matter, a live
/// "what just happened" from the current run's numbers, and (natively) the lesson's headless
/// scenario with its judged claims.
fn lessons(app: &mut HifApp, ui: &mut egui::Ui) {
    ui.horizontal(|ui| {
        for l in &hif8lab_train::lesson::LESSONS {
            if ui
                .selectable_label(app.lesson.name == l.name, l.title)
                .clicked()
            {
                app.lesson = l;
                app.lesson_report = None;
            }
        }
    });
    let l = app.lesson;
    ui.heading(l.title);
    ui.label(RichText::new("Predict").strong());
    ui.label(l.predict);
    ui.label(RichText::new("Look at").strong());
    ui.label(l.look);
    ui.label(format!("Controls that matter: {}.", l.controls.join(", ")));
    ui.horizontal(|ui| {
        let running = app.training.is_some();
        if ui
            .add_enabled(!running, egui::Button::new("Set up and start a live run"))
            .clicked()
        {
            app.setup_lesson();
            let ctx = ui.ctx().clone();
            app.start(move || ctx.request_repaint());
        }
        #[cfg(not(target_arch = "wasm32"))]
        if ui
            .add_enabled(
                app.lesson_job.is_none(),
                egui::Button::new("Run the lesson's scenario"),
            )
            .on_hover_text("pretrained base + the lesson's runs, headless (hif8lab lesson run)")
            .clicked()
        {
            app.run_lesson_scenario();
        }
    });
    ui.separator();
    ui.label(RichText::new("What just happened (this live run)").strong());
    ui.label(live_reading(app));
    #[cfg(target_arch = "wasm32")]
    ui.label(format!(
        "The judged scenario of this lesson runs on the desktop: hif8lab lesson run {}",
        l.name
    ));
    if app.lesson_job.is_some() {
        ui.label("Running the lesson's scenario…");
    }
    if let Some(r) = &app.lesson_report
        && r.lesson == l.name
    {
        ui.label(RichText::new("The lesson's scenario (headless runs)").strong());
        for c in &r.claims {
            let (mark, colour) = if c.holds {
                ("holds", Color32::from_rgb(60, 160, 60))
            } else {
                ("does not hold", Color32::from_rgb(220, 60, 60))
            };
            ui.label(RichText::new(format!("{mark}: {}", c.claim)).color(colour));
            ui.label(c.evidence.to_string());
        }
        ui.label(&r.summary);
    }
}

/// A reading of the live run for the lesson, from its numbers.
fn live_reading(app: &HifApp) -> String {
    let Some(view) = &app.view else {
        return "No run yet: press “Set up and start a live run”.".into();
    };
    let ag = view.calls_above_roles(&["A", "G"]);
    let w = view.calls_above_roles(&["W"]);
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
