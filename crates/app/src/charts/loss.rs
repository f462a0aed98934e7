//! The Loss panel: the QAT run against its matched baseline, APE, the probes with their intervals.

use super::ShowFramed as _;
use super::*;

pub(crate) fn qat_line(view: &RunView) -> Option<VLine> {
    view.qat_from.map(|s| {
        VLine::new("QAT on", s as f64)
            .color(QAT_ON)
            .width(2.0)
            .style(egui_plot::LineStyle::dashed_dense())
    })
}

/// The Loss panel: QAT run vs matched baseline, APE.
pub(crate) fn loss(cx: &mut PanelCtx<'_>, ui: &mut egui::Ui, view: &RunView) {
    // The hint only where there is saturation to hide (the active estimate was exceeded).
    let saturated = view.calls_above().get(view.active).is_some_and(|n| *n > 0);
    let ape = cx
        .ape(view)
        .map(|a| {
            let hint = if saturated {
                " (the loss hides saturation: see Estimators)"
            } else {
                ""
            };
            format!("; APE vs the matched baseline {a:.3} %{hint}")
        })
        .unwrap_or_default();
    let want = header(
        ui,
        &format!("{}: {} steps{ape}", view.name, view.loss.len()),
        png_button,
    );
    if view.loss.is_empty() && cx.live {
        // No empty axes while the first step is prepared: say what happens instead.
        ui.label(
            "Waiting for the first step: the run is being prepared (on a GPU its kernels are \
             compiled first; the bar above says how far). The curves appear with the first \
             step.",
        );
        return;
    }
    let baseline = cx.baseline_loss();
    let probes = !view.probes.is_empty();
    if let Some(last) = view.probes.last() {
        probes_caption(cx, ui, view, last);
    }
    let mut items = vec![("training loss".to_owned(), series(0))];
    if !baseline.is_empty() {
        items.push(("matched baseline (no quantization)".to_owned(), series(1)));
    }
    if view.qat_from.is_some() {
        items.push(("QAT on".to_owned(), QAT_ON));
    }
    let shown = legend(ui, "loss", &items);
    let on = |name: &str| shown.on(name);
    let height = if probes {
        (ui.available_height() - 215.0).max(140.0)
    } else {
        (ui.available_height() - 4.0).max(140.0)
    };
    let r = plot("loss")
        .height(height)
        .x_axis_label("step")
        .y_axis_label("loss")
        .show_framed(ui, |p| {
            // The baseline dashed underneath, the run on top: where they agree both stay
            // visible.
            if on("matched baseline (no quantization)") {
                // Wide and dashed: a band of the baseline's colour stays visible on both
                // sides of the run's line where they agree.
                p.line(
                    Line::new("matched baseline (no quantization)", decimate_xy(baseline))
                        .color(series(1))
                        .width(5.0)
                        .style(egui_plot::LineStyle::dashed_loose()),
                );
            }
            if on("training loss") {
                p.line(
                    Line::new("training loss", decimate_xy(&view.loss))
                        .color(series(0))
                        .width(1.5),
                );
            }
            if let Some(v) = qat_line(view).filter(|_| on("QAT on")) {
                p.vline(v);
            }
        });
    let mut rect = r.response.rect;
    if probes {
        rect = rect.union(probes_plot(cx, ui, view));
    }
    save_png(cx.exports, want, &view.name, "loss", rect);
}

/// The last knowledge score with its interval, the first, the matched baseline's.
fn probes_caption(
    cx: &PanelCtx<'_>,
    ui: &mut egui::Ui,
    view: &RunView,
    last: &hif8lab_train::ProbeScores,
) {
    let pct = |p: &hif8lab_train::ProbeScores| 100.0 * p.knowledge_acc_norm;
    let b = cx
        .baseline_probes()
        .iter()
        .rfind(|p| p.step == last.step)
        .map(|p| format!(", matched baseline {:.1} %", pct(p)))
        .unwrap_or_default();
    let first = view.probes.first().map(pct).unwrap_or(f64::NAN);
    let [lo, hi] = last.interval(hif8lab_train::eval::ProbeScore::KnowledgeAccNorm);
    let ci = if lo.is_finite() {
        format!(
            " [95 %: {:.1}–{:.1}, {} items]",
            100.0 * lo,
            100.0 * hi,
            last.knowledge_items
        )
    } else {
        String::new()
    };
    crate::glossary::label(
        ui,
        format!(
            "Knowledge probes (accuracy, per-byte likelihood): {:.1} %{ci} at step {} (first evaluation {first:.1} %){b}; completion {:.1} %.",
            pct(last),
            last.step,
            100.0 * last.completion_acc_norm
        ),
    );
}

/// The knowledge probes over the run, with their 95 % interval bands, the matched baseline's
/// and the base model's score; returns the plot's rect.
fn probes_plot(cx: &PanelCtx<'_>, ui: &mut egui::Ui, view: &RunView) -> egui::Rect {
    let pct = |p: &hif8lab_train::ProbeScores| 100.0 * p.knowledge_acc_norm;
    let pts = |v: &[hif8lab_train::ProbeScores]| -> Vec<[f64; 2]> {
        v.iter().map(|p| [p.step as f64, pct(p)]).collect()
    };
    let mut items = vec![(
        "knowledge probes (band: 95 % interval)".to_owned(),
        series(0),
    )];
    if !cx.baseline_probes().is_empty() {
        items.push(("matched baseline".to_owned(), series(1)));
    }
    if cx.base_probes.is_some() {
        items.push(("base model".to_owned(), Color32::GRAY));
    }
    let shown = legend(ui, "probes", &items);
    let on = |name: &str| shown.on(name);
    let r = plot("probes")
        .height(170.0)
        .x_axis_label("step")
        .y_axis_label("knowledge %")
        .include_y(0.0)
        .show_framed(ui, |p| {
            // 95 % interval bands (cluster bootstrap over the probe items) under the curves.
            for (name, v, colour) in [
                (
                    "knowledge probes 95 % interval",
                    view.probes.as_slice(),
                    Color32::from_rgb(70, 130, 220),
                ),
                (
                    "matched baseline 95 % interval",
                    cx.baseline_probes(),
                    Color32::from_rgb(220, 130, 40),
                ),
            ] {
                if let Some(band) = interval_band(v) {
                    p.polygon(
                        Polygon::new(name, band)
                            .fill_color(colour.gamma_multiply(0.18))
                            .stroke(egui::Stroke::NONE)
                            .allow_hover(false),
                    );
                }
            }
            if !cx.baseline_probes().is_empty() && on("matched baseline") {
                p.line(
                    Line::new("matched baseline", pts(cx.baseline_probes()))
                        .color(series(1))
                        .width(2.5)
                        .style(egui_plot::LineStyle::dashed_loose()),
                );
            }
            if on("knowledge probes (band: 95 % interval)") {
                p.line(
                    Line::new("knowledge probes", pts(&view.probes))
                        .color(series(0))
                        .width(2.0),
                );
            }
            if let Some(b) = cx.base_probes.as_ref().filter(|_| on("base model")) {
                p.hline(HLine::new("base model", pct(b)).color(Color32::GRAY));
            }
        });
    r.response.rect
}

/// The 95 % interval band of knowledge acc_norm over the evaluations (percent), as a closed
/// polygon: lower edge forward, upper edge back. `None` with fewer than two evaluations or
/// records without intervals.
pub fn interval_band(v: &[hif8lab_train::ProbeScores]) -> Option<Vec<[f64; 2]>> {
    let edges: Vec<(f64, [f64; 2])> = v
        .iter()
        .map(|p| {
            (
                p.step as f64,
                p.interval(hif8lab_train::eval::ProbeScore::KnowledgeAccNorm),
            )
        })
        .filter(|(_, i)| i[0].is_finite() && i[1].is_finite())
        .collect();
    if edges.len() < 2 {
        return None;
    }
    let lower = edges.iter().map(|(x, i)| [*x, 100.0 * i[0]]);
    let upper = edges.iter().rev().map(|(x, i)| [*x, 100.0 * i[1]]);
    Some(lower.chain(upper).collect())
}

/// Every point of a short curve; bucket means of a long one.
pub(crate) fn decimate_xy(points: &[[f64; 2]]) -> Vec<[f64; 2]> {
    buckets(points.len(), MAX_POINTS)
        .into_iter()
        .map(|(a, b)| {
            let n = (b - a) as f64;
            let sum = points[a..b]
                .iter()
                .fold([0.0, 0.0], |s, p| [s[0] + p[0], s[1] + p[1]]);
            [sum[0] / n, sum[1] / n]
        })
        .collect()
}
