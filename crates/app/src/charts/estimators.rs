//! The estimators tab: every estimator side by side on the same calls (counts over time,
//! headroom distributions, a one-line reading).

use super::ShowFramed as _;
use super::*;
use hif8lab_scaling::Role;

/// What the Estimators panel derives from the calls (cached per view revision).
#[derive(Clone, Debug, Default)]
pub struct EstimatorTables {
    /// The view revision they were computed at.
    pub revision: u64,
    /// Per estimator: calls above its estimate, over every role.
    pub calls_above: Vec<u64>,
    /// Per estimator: calls above its estimate on activations and gradients (the basis the
    /// lessons' texts and tiles count).
    pub calls_above_ag: Vec<u64>,
    /// Per estimator: median est/amax.
    pub headroom: Vec<f32>,
    /// The reading.
    pub reading: String,
    /// Per estimator: (step, cumulative calls above its estimate).
    pub cumulative: Vec<Vec<[f64; 2]>>,
    /// Per estimator: (log2 est/amax bin centre, share of calls) in quarter binades.
    pub headroom_dist: Vec<Vec<[f64; 2]>>,
}

impl EstimatorTables {
    /// Computes the tables of `view`.
    pub fn of(view: &RunView) -> Self {
        let k = view.estimators.len();
        let steps = view.last_step() as usize + 1;
        let mut per_step = vec![vec![0u64; steps]; k];
        const LO: f64 = -4.0;
        const BINS: usize = 64; // -4 … +12 binades
        let mut dist = vec![vec![0u64; BINS]; k];
        for c in view.calls.values().flatten() {
            for e in 0..k {
                per_step[e][c.step as usize] +=
                    u64::from(c.calls_above.get(e).copied().unwrap_or(0));
                if let Some(est) = c.est.get(e)
                    && c.amax > 0.0
                    && *est > 0.0
                {
                    let h = f64::from(*est / c.amax).log2();
                    let b = ((h - LO) * 4.0).floor().clamp(0.0, (BINS - 1) as f64) as usize;
                    dist[e][b] += 1;
                }
            }
        }
        let cumulative = per_step
            .iter()
            .map(|counts| {
                let mut sum = 0u64;
                let pts: Vec<[f64; 2]> = counts
                    .iter()
                    .enumerate()
                    .map(|(s, c)| {
                        sum += c;
                        [s as f64, sum as f64]
                    })
                    .collect();
                buckets(pts.len(), MAX_POINTS)
                    .into_iter()
                    .map(|(_, b)| pts[b - 1])
                    .collect()
            })
            .collect();
        let headroom_dist = dist
            .iter()
            .map(|d| {
                let total = d.iter().sum::<u64>().max(1) as f64;
                d.iter()
                    .enumerate()
                    .map(|(i, c)| [LO + (i as f64 + 0.5) / 4.0, *c as f64 / total])
                    .collect()
            })
            .collect();
        EstimatorTables {
            revision: view.revision,
            calls_above: view.calls_above(),
            calls_above_ag: view.calls_above_roles(&[Role::A, Role::G]),
            headroom: view.median_headroom(),
            reading: view.reading(),
            cumulative,
            headroom_dist,
        }
    }
}

/// The table of counts: per estimator, calls above its estimate on activations and
/// gradients and on every role, and its median headroom, the bases said under it.
fn counts_table(ui: &mut egui::Ui, view: &RunView, t: &EstimatorTables) {
    egui::Grid::new("estimators").striped(true).show(ui, |ui| {
        // Narrow headers on two lines, the active estimator in bold: the table fits a phone.
        ui.strong("estimator\n(active: bold)");
        // Two bases, each named: activations and gradients (what the lessons count) and
        // every role (weights too).
        crate::glossary::explained(
            ui.strong("above est.\nA and G"),
            "calls above its estimate: saturation",
        );
        crate::glossary::explained(
            ui.strong("above est.\nall roles"),
            "calls above its estimate: saturation",
        );
        crate::glossary::explained(ui.strong("median\nheadroom"), "headroom: estimate / amax");
        ui.end_row();
        for (k, (name, h)) in view.estimators.iter().zip(&t.headroom).enumerate() {
            if view.estimators.get(view.active) == Some(name) {
                ui.strong(name);
            } else {
                ui.label(name);
            }
            ui.label(t.calls_above_ag.get(k).copied().unwrap_or(0).to_string());
            ui.label(t.calls_above.get(k).copied().unwrap_or(0).to_string());
            ui.label(format!("{h:.3}"));
            ui.end_row();
        }
    });
    // The two counts' bases, in words (readable without pointing at the headers).
    ui.label(
        RichText::new(
            "above est.: calls whose amax exceeded the estimate; A and G: activations and gradients (what the lessons count); all roles: weights too.",
        )
        .small(),
    );
}

/// The Estimators panel: the shadow comparison of every estimator on the same calls.
pub(super) fn estimators(
    est: &mut EstimatorsPanel,
    cx: &mut PanelCtx<'_>,
    ui: &mut egui::Ui,
    view: &RunView,
) {
    let fresh = est
        .cache
        .as_ref()
        .is_some_and(|t| t.revision == view.revision);
    if !fresh {
        est.cache = Some(EstimatorTables::of(view));
    }
    // Taken out while drawing (put back below), not cloned every frame.
    let Some(t) = est.cache.take() else {
        return;
    };
    let want = header(ui, &t.reading, png_button);
    let top = ui.cursor().min;
    counts_table(ui, view, &t);
    // One legend for both plots (the same estimators, the same colours).
    let items: Vec<(String, Color32)> = view
        .estimators
        .iter()
        .enumerate()
        .map(|(k, n)| (n.clone(), series(k)))
        .collect();
    let shown = legend(ui, "estimators", &items);
    // Both plots and their titles in the space left (at least 140 points each: then the
    // panel scrolls).
    let h = ((ui.available_height() - 70.0) / 2.0).max(140.0);
    crate::glossary::label(
        ui,
        "Cumulative calls whose amax exceeded the estimate (shadow counts on the same run):",
    );
    plot("cumulative")
        .height(h)
        .x_axis_label("step")
        .y_axis_label("calls")
        .include_y(0.0)
        .show_framed(ui, |p| {
            for (k, (name, pts)) in view.estimators.iter().zip(&t.cumulative).enumerate() {
                if shown.on(name) {
                    p.line(Line::new(name.clone(), pts.clone()).color(series(k)));
                }
            }
        });
    crate::glossary::label(
        ui,
        "Headroom distribution: share of calls by log2(est/amax); left of the red line (0) the amax exceeded the estimate:",
    );
    plot("headroom")
        .height(h)
        .x_axis_label("log2(est/amax)")
        .y_axis_label("share of calls")
        .include_y(0.0)
        .show_framed(ui, |p| {
            for (k, (name, pts)) in view.estimators.iter().zip(&t.headroom_dist).enumerate() {
                if shown.on(name) {
                    p.line(Line::new(name.clone(), pts.clone()).color(series(k)));
                }
            }
            p.vline(VLine::new("amax = estimate", 0.0).color(Color32::RED));
        });
    est.cache = Some(t);
    window_sweep(est, ui, view);
    let rect = egui::Rect::from_min_max(top, ui.min_rect().max);
    save_png(cx.exports, want, &view.name, "estimators", rect);
}

/// "Which window?": max_window and mean_window replayed over this run's amax at windows 1 to
/// 1024 (the `replay --sweep window=…` table), computed while the section is open.
fn window_sweep(est: &mut EstimatorsPanel, ui: &mut egui::Ui, view: &RunView) {
    use hif8lab_scaling::sweep::{DEFAULT_WINDOWS, sweep, window_settings};
    egui::CollapsingHeader::new("Which window?")
        .id_salt("window-sweep")
        .show(ui, |ui| {
            if est.sweep.as_ref().is_none_or(|(r, _)| *r != view.revision) {
                let series: Vec<hif8lab_scaling::import::AmaxSeries> = view
                    .calls
                    .iter()
                    .map(|(key, calls)| {
                        let mut s = hif8lab_scaling::import::AmaxSeries::new(format!("{key:?}"));
                        s.amax = calls.iter().map(|c| c.amax).collect();
                        s.steps = calls.iter().map(|c| c.step).collect();
                        s
                    })
                    .collect();
                let base = hif8lab_scaling::ScalingConfig {
                    format: view.format,
                    target: view.target,
                    ..Default::default()
                };
                // A view's target came from a run that planned it; a setting that cannot be
                // planned is left out of the sweep rather than drawn wrong.
                let settings: Vec<_> = window_settings(&DEFAULT_WINDOWS, &base)
                    .iter()
                    .filter_map(|c| c.plan().ok())
                    .collect();
                est.sweep = Some((view.revision, sweep(&series, &settings)));
            }
            let merged: u64 = view
                .calls
                .values()
                .flatten()
                .map(|c| u64::from(c.calls.saturating_sub(1)))
                .sum();
            crate::glossary::label(
                ui,
                format!(
                    "Exceedances against the cost of headroom: each estimator replayed on this run's amax (every role) with windows 1 to 1024. Calls above the estimate are exact for the replay; the SQNR loss (against the best scale) is modelled on a normal tensor with each call's amax — the run keeps no tensors.{}",
                    if merged > 0 {
                        format!(" {merged} calls were merged for display and count once here, so these counts are below the table's above.")
                    } else {
                        String::new()
                    }
                ),
            );
            let Some((_, rows)) = &est.sweep else {
                return;
            };
            // Scrolls sideways on a phone rather than widening the panel.
            egui::ScrollArea::horizontal().id_salt("window-sweep-scroll").show(ui, |ui| {
            egui::Grid::new("window-sweep-table").striped(true).show(ui, |ui| {
                for h in ["estimator", "calls above", "overflowing", "SQNR loss dB", "worst dB", "headroom"] {
                    ui.strong(h);
                }
                ui.end_row();
                for r in rows {
                    ui.label(&r.estimator);
                    ui.label(format!(
                        "{} ({:.1} %)",
                        r.calls_above_est,
                        100.0 * r.calls_above_est as f64 / r.calls.max(1) as f64
                    ));
                    ui.label(r.overflowing_calls.to_string());
                    ui.label(format!("{:.3}", r.sqnr_loss_mean_db));
                    ui.label(format!("{:.2}", r.sqnr_loss_worst_db));
                    ui.label(format!("{:.2}", r.median_headroom));
                    ui.end_row();
                }
            });
            });
        });
}
