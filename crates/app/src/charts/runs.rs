//! The runs tab: every run side by side (loss, probes, counts) and their config diff.

use super::ShowFramed as _;
use super::*;

/// The Runs panel: the current run and earlier / opened ones, loss overlay, config diff. It
/// sees the runs, the overlay ticks and the export queue only.
#[derive(Default)]
pub struct RunsPanel;

impl RunsPanel {
    /// Draws the runs; returns the index of an earlier run to make current, when asked.
    pub fn show(
        &mut self,
        ui: &mut egui::Ui,
        runs: &mut crate::Runs,
        exports: &mut Exports,
    ) -> Option<usize> {
        runs_panel(ui, runs, exports)
    }
}

/// A run's name in the table: at most 40 characters, the whole name on hover.
fn short_name(ui: &mut egui::Ui, name: &str) {
    if name.chars().count() <= 40 {
        ui.label(name);
    } else {
        let short: String = name.chars().take(38).collect();
        ui.label(format!("{short}…")).on_hover_text(name);
    }
}

fn runs_panel(ui: &mut egui::Ui, app: &mut crate::Runs, exports: &mut Exports) -> Option<usize> {
    if app.live.is_none() && app.earlier.is_empty() {
        ui.label("No runs yet: train one or open a run folder. Each new run or opened folder keeps the previous one here.");
        return None;
    }
    let want = ui
        .horizontal_wrapped(|ui| {
            ui.label(format!(
                "The current run and {} earlier ones (at most {}); tick to overlay and diff against the current one.",
                app.earlier.len(),
                crate::MAX_RUNS
            ));
            png_button(ui)
        })
        .inner;
    let wide = ui.available_width() >= 900.0;
    let show = runs_table(ui, app, wide);
    // The overlay's legend above the plot (the overlay ticks choose the runs).
    let mut items: Vec<(String, Color32)> = app
        .live
        .iter()
        .map(|v| (format!("current: {}", v.name), series(0)))
        .collect();
    items.extend(
        app.earlier
            .iter()
            .zip(&app.overlay)
            .enumerate()
            .filter(|(_, (_, on))| **on)
            .map(|(i, (v, _))| (v.name.clone(), series(i + 1))),
    );
    let shown = legend(ui, "runs", &items);
    let on = |name: &str| shown.on(name);
    let h = (ui.available_height() * 0.55).max(150.0);
    let r = plot("runs-loss")
        .height(h)
        .x_axis_label("step")
        .y_axis_label("loss")
        .show_framed(ui, |p| {
            if let Some(v) = app
                .live
                .as_ref()
                .filter(|v| on(&format!("current: {}", v.name)))
            {
                p.line(
                    Line::new(format!("current: {}", v.name), decimate_xy(&v.loss))
                        .color(series(0))
                        .width(2.0),
                );
            }
            for (i, (v, on)) in app.earlier.iter().zip(&app.overlay).enumerate() {
                if *on && shown.on(&v.name) {
                    p.line(Line::new(v.name.clone(), decimate_xy(&v.loss)).color(series(i + 1)));
                }
            }
        });
    let name = app
        .live
        .as_ref()
        .map(|v| v.name.clone())
        .unwrap_or_else(|| "runs".into());
    save_png(exports, want, &name, "runs", r.response.rect);
    let Some(current) = app.live.as_ref().and_then(|v| v.config.as_ref()) else {
        ui.label("The current run has no config to compare (a replayed trace).");
        return show;
    };
    config_diffs(ui, app, current, wide);
    show
}

/// The runs: a table where it fits, on a narrow window one block per run; returns the run
/// whose "make current" was pressed.
fn runs_table(ui: &mut egui::Ui, app: &mut crate::Runs, wide: bool) -> Option<usize> {
    let summary = |v: &RunView| {
        let last = v
            .loss
            .last()
            .map(|p| format!("{:.4}", p[1]))
            .unwrap_or_default();
        let above = v.calls_above().get(v.active).copied().unwrap_or(0);
        (v.loss.len(), last, above)
    };
    let mut show: Option<usize> = None;
    if wide {
        egui::Grid::new("runs").striped(true).show(ui, |ui| {
            for h in [
                "overlay",
                "run",
                "steps",
                "final loss",
                "calls above active est",
                "format",
                "",
            ] {
                ui.strong(h);
            }
            ui.end_row();
            if let Some(v) = &app.live {
                let (n, last, above) = summary(v);
                ui.label("current");
                short_name(ui, &v.name);
                ui.label(n.to_string());
                ui.label(last);
                ui.label(above.to_string());
                ui.label(v.format.to_string());
                ui.label("");
                ui.end_row();
            }
            for (i, v) in app.earlier.iter().enumerate() {
                let (n, last, above) = summary(v);
                let on = app.overlay[i];
                // No visible text (the name is in the next column), an accessible one.
                ui.checkbox(&mut app.overlay[i], "").widget_info(|| {
                    egui::WidgetInfo::selected(
                        egui::Role::CheckBox,
                        true,
                        on,
                        format!("overlay {}", v.name),
                    )
                });
                short_name(ui, &v.name);
                ui.label(n.to_string());
                ui.label(last);
                ui.label(above.to_string());
                ui.label(v.format.to_string());
                if ui.button("make current").clicked() {
                    show = Some(i);
                }
                ui.end_row();
            }
        });
    } else {
        let line = |v: &RunView| {
            let (n, last, above) = summary(v);
            format!(
                "{n} steps, final loss {last}, {above} calls above the active estimate, {}",
                v.format
            )
        };
        if let Some(v) = &app.live {
            ui.add(egui::Label::new(RichText::new(format!("current: {}", v.name)).strong()).wrap());
            ui.add(egui::Label::new(line(v)).wrap());
        }
        for (i, v) in app.earlier.iter().enumerate() {
            ui.separator();
            ui.horizontal_wrapped(|ui| {
                ui.checkbox(&mut app.overlay[i], "overlay");
                if ui.button("make current").clicked() {
                    show = Some(i);
                }
            });
            ui.add(egui::Label::new(RichText::new(&v.name).strong()).wrap());
            ui.add(egui::Label::new(line(v)).wrap());
        }
    }
    show
}

/// Each overlaid run's config against the current one's, key by key.
fn config_diffs(
    ui: &mut egui::Ui,
    app: &crate::Runs,
    current: &hif8lab_train::RunConfig,
    wide: bool,
) {
    let current = current.flat();
    for (v, on) in app.earlier.iter().zip(&app.overlay) {
        if !*on {
            continue;
        }
        let Some(other) = &v.config else { continue };
        let d = crate::settings::diff(&current, &other.flat());
        ui.add(
            egui::Label::new(RichText::new(format!("Config diff: current vs {}", v.name)).strong())
                .wrap(),
        );
        if d.is_empty() {
            ui.label("identical configs");
            continue;
        }
        if wide {
            egui::Grid::new(format!("diff-{}", v.name))
                .striped(true)
                .show(ui, |ui| {
                    ui.strong("key");
                    ui.strong("current");
                    ui.strong(&v.name);
                    ui.end_row();
                    for (k, a, b) in d {
                        ui.label(k);
                        ui.label(a);
                        ui.label(b);
                        ui.end_row();
                    }
                });
        } else {
            for (k, a, b) in d {
                ui.add(egui::Label::new(format!("{k}: {a} (current) vs {b}")).wrap());
            }
        }
    }
}
