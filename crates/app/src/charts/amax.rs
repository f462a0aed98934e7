//! The Amax panel: one quantizer's amax per call against each estimator's estimate, on a log2 axis
//! with the format's landmarks.

use super::ShowFramed as _;
use super::*;

/// An axis label for a log2 value: `2^3`, or `2^1.25` between integer binades.
pub(crate) fn pow2_label(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("2^{}", v.round())
    } else {
        format!("2^{v:.2}")
    }
}

/// An axis label for a log2 value as the value itself, in at most three significant
/// digits (`0.25`, `1.5`, `3000`); `2^k` where that would be unreadable (below 0.001 or from
/// 100,000).
pub fn value_label(v: f64) -> String {
    let x = 2f64.powf(v);
    if !(1e-3..1e5).contains(&x) {
        return pow2_label(v);
    }
    let digits = (2 - x.log10().floor() as i32).max(0) as usize;
    let text = format!("{x:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// Mantissas of the axis values, roundest first (1, 5, 2, 3 …): a value is marked when no
/// rounder one already marked lies within a label's height of it.
const MANTISSAS: [(f64, u8); 17] = [
    (1.0, 0),
    (5.0, 1),
    (2.0, 2),
    (3.0, 3),
    (2.5, 4),
    (4.0, 4),
    (1.5, 5),
    (6.0, 5),
    (8.0, 5),
    (1.2, 6),
    (1.4, 6),
    (1.6, 6),
    (1.8, 6),
    (3.5, 6),
    (4.5, 6),
    (7.0, 6),
    (9.0, 6),
];

/// Grid marks of a log2 axis at readable values (1, 1.5, 2, 3, 5, 10 … times a power of ten,
/// the roundest that fit), each at least a label's height (20 points) from the next, so that
/// every height of plot gets labelled marks and no label is a fractional exponent. Where no
/// such value lies in the range (under a fifth of a binade), the marks of
/// [`log2_binade_marks`].
pub fn log2_marks(input: egui_plot::GridInput) -> Vec<egui_plot::GridMark> {
    let (lo, hi) = input.bounds;
    if !(input.base_step_size > 0.0 && lo.is_finite() && hi.is_finite() && hi > lo) {
        return Vec::new();
    }
    // egui_plot's base step is its minimal grid spacing (8 points); labels need 20.
    let gap = input.base_step_size * 2.5;
    let mut candidates: Vec<(u8, f64)> = Vec::new();
    let (d0, d1) = (
        (lo * std::f64::consts::LOG10_2).floor() as i32 - 1,
        (hi * std::f64::consts::LOG10_2).ceil() as i32 + 1,
    );
    for d in d0..=d1.min(d0 + 400) {
        for (m, rank) in MANTISSAS {
            let v = (m * 10f64.powi(d)).log2();
            if v >= lo && v <= hi {
                candidates.push((rank, v));
            }
        }
    }
    candidates.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut kept: Vec<f64> = Vec::new();
    for (_, v) in candidates {
        if kept.len() < 4096 && kept.iter().all(|k| (k - v).abs() >= gap) {
            kept.push(v);
        }
    }
    if kept.is_empty() {
        return log2_binade_marks(input);
    }
    kept.sort_by(f64::total_cmp);
    (0..kept.len())
        .map(|i| {
            let before = i.checked_sub(1).map(|j| kept[i] - kept[j]);
            let after = kept.get(i + 1).map(|n| n - kept[i]);
            let step = match (before, after) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => (hi - lo).max(gap),
            };
            egui_plot::GridMark {
                value: kept[i],
                step_size: step,
            }
        })
        .collect()
}

/// Grid marks of a linear axis (the SQNR's dB): one step of 1, 2 or 5 × 10^k for all of
/// them, the finest whose labels stay a label's height (20 points) apart, so a plot 160
/// points high still shows three or four values.
pub fn linear_marks(input: egui_plot::GridInput) -> Vec<egui_plot::GridMark> {
    let (lo, hi) = input.bounds;
    if !(input.base_step_size > 0.0 && lo.is_finite() && hi.is_finite() && hi > lo) {
        return Vec::new();
    }
    // egui_plot's base step is its minimal grid spacing (8 points); labels need 20.
    let gap = input.base_step_size * 2.5;
    let decade = 10f64.powf(gap.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * decade)
        .find(|s| *s >= gap)
        .unwrap_or(10.0 * decade);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last.min(first + 1000))
        .map(|i| egui_plot::GridMark {
            value: i as f64 * step,
            step_size: step,
        })
        .collect()
}

/// A linear mark's label: as many decimals as its step needs.
pub fn linear_label(mark: &egui_plot::GridMark) -> String {
    let decimals = (-mark.step_size.log10().floor()).clamp(0.0, 6.0) as usize;
    format!("{:.*}", decimals, mark.value)
}

/// Grid marks of a log2 axis: steps that are powers of two (in log2 units: ×2, ×4, ×16 … of
/// the value), the finest at least egui's minimal step, so that a short plot still gets
/// labelled marks (a power of ten in log2 units leaves a short plot with none).
pub fn log2_binade_marks(input: egui_plot::GridInput) -> Vec<egui_plot::GridMark> {
    let (lo, hi) = input.bounds;
    if !(input.base_step_size > 0.0 && lo.is_finite() && hi.is_finite() && hi > lo) {
        return Vec::new();
    }
    let s = 2f64.powf(input.base_step_size.log2().ceil());
    let mut marks: Vec<egui_plot::GridMark> = Vec::new();
    for step in [s, 2.0 * s, 4.0 * s] {
        let mut v = (lo / step).ceil() * step;
        while v <= hi && marks.len() < 4096 {
            match marks.iter_mut().find(|m| (m.value - v).abs() < 0.1 * s) {
                // A value on a coarser step keeps the coarser (stronger) mark.
                Some(m) => m.step_size = step,
                None => marks.push(egui_plot::GridMark {
                    value: v,
                    step_size: step,
                }),
            }
            v += step;
        }
    }
    marks
}

/// log2 of a positive value (non-positive → NaN, not drawn).
pub(crate) fn log2(v: f32) -> f64 {
    if v > 0.0 {
        f64::from(v).log2()
    } else {
        f64::NAN
    }
}

/// The quantizer chooser shared by the Amax and Histogram panels.
pub(crate) fn choose_quantizer(
    cx: &mut PanelCtx<'_>,
    ui: &mut egui::Ui,
    ids: &[SeriesKey],
) -> SeriesKey {
    let selected = cx
        .selection
        .quantizer
        .clone()
        .filter(|s| ids.contains(s))
        .unwrap_or_else(|| ids[0].clone());
    egui::ComboBox::from_label("quantizer")
        .selected_text(selected.to_string())
        .show_ui(ui, |ui| {
            for id in ids {
                ui.selectable_value(
                    &mut cx.selection.quantizer,
                    Some(id.clone()),
                    id.to_string(),
                );
            }
        });
    selected
}

/// The Amax panel.
pub(crate) fn amax(cx: &mut PanelCtx<'_>, ui: &mut egui::Ui, view: &RunView) {
    let ids: Vec<SeriesKey> = view.calls.keys().cloned().collect();
    if ids.is_empty() {
        ui.label("No quantizer calls yet (quantization starts after the warmup).");
        return;
    }
    let (selected, want) = ui
        .horizontal_wrapped(|ui| (choose_quantizer(cx, ui, &ids), png_button(ui)))
        .inner;
    let calls = &view.calls[&selected];
    let buckets_shown = buckets(calls.len(), MAX_POINTS);
    caption(ui, view, calls.len(), buckets_shown.len());
    let active = view.active;
    let data = |f: fn(f64, f64) -> f64, init: f64| {
        calls
            .iter()
            .map(|c| log2(c.amax))
            .filter(|v| v.is_finite())
            .fold(init, f)
    };
    let (data_top, data_bottom) = (data(f64::max, f64::MIN), data(f64::min, f64::MAX));
    // x·scale = x·target/est: a scaled landmark L sits at L·est/target unscaled.
    let shift = calls
        .last()
        .and_then(|c| c.est.get(active))
        .map(|e| log2(*e) - f64::from(view.target).log2());
    if let Some(shift) = shift {
        let overflow = f64::from(view.format.facts().overflow_threshold).log2() + shift;
        ui.label(format!(
            "Overflow lies {:.1} binades above the largest amax shown.",
            overflow - data_top
        ));
    }
    let has_sqnr = calls.iter().any(|c| c.sqnr_db.is_some());
    // The landmarks near the data only, so the chart is not squashed.
    let near: Vec<(&'static str, f64)> = shift
        .map(|shift| landmarks_near(view.format, shift, data_bottom, data_top))
        .unwrap_or_default();
    let items = legend_items(view, !near.is_empty());
    let shown = legend(ui, "amax", &items);
    let on = |name: &str| shown.on(name);
    let label_colour = ui.visuals().text_color();
    let amax_height = if has_sqnr {
        (ui.available_height() - 195.0).max(140.0)
    } else {
        (ui.available_height() - 4.0).max(140.0)
    };
    let r = plot("amax")
        .height(amax_height)
        .link_axis(egui::Id::unique("amax-x"), [true, false])
        .x_axis_label("quantizer call")
        .y_axis_label("amax")
        .y_axis_formatter(|m, _| value_label(m.value))
        .y_grid_spacer(log2_marks)
        // Room for the top landmark's name above its line, inside the frame.
        .include_y(near.iter().map(|(_, y)| y + 0.4).fold(data_top, f64::max))
        .show_framed(ui, |p| {
            amax_lines(p, view, calls, &buckets_shown, &near, &on, label_colour)
        });
    let mut rect = r.response.rect;
    if has_sqnr {
        rect = rect.union(sqnr_plot(ui, calls, &buckets_shown));
    }
    save_png(
        cx.exports,
        want,
        &view.name,
        &format!("amax-{selected}"),
        rect,
    );
}

/// What the panel draws, in words: the calls, how they are drawn and where the landmarks sit.
fn caption(ui: &mut egui::Ui, view: &RunView, calls: usize, buckets: usize) {
    let decimated = if buckets < calls {
        format!(" (drawn as {} buckets: amax max, estimates min)", buckets)
    } else {
        String::new()
    };
    crate::glossary::label(
        ui,
        format!(
            "{} calls{decimated}. log2 axis; horizontal lines: the {} landmarks of the scaled domain placed at the last active estimate (the estimate maps to target {}).",
            calls, view.format, view.target
        ),
    );
}

/// The legend's entries: amax, each estimator, the format's landmarks when any is drawn,
/// and the start of quantization.
fn legend_items(view: &RunView, landmarks: bool) -> Vec<(String, Color32)> {
    let mut items: Vec<(String, Color32)> = vec![("amax".into(), AMAX)];
    items.extend(
        view.estimators
            .iter()
            .enumerate()
            .map(|(k, n)| (format!("est: {n}"), series(k))),
    );
    // The format's lines, one entry: dashed, in one colour, each named on the plot (their
    // tier colours would clash with the estimators').
    if landmarks {
        items.push((LANDMARKS.into(), LANDMARK));
    }
    items.push(("QAT on (history reset)".into(), QAT_ON));
    items
}

/// The SQNR of the same calls under the amax plot, sharing its x axis; returns its rect.
fn sqnr_plot(ui: &mut egui::Ui, calls: &[Call], buckets_shown: &[(usize, usize)]) -> egui::Rect {
    // The quantization error of the same calls: where amax jumps above the estimate,
    // HiF8 keeps the values with fewer mantissa bits and the SQNR dips.
    let pts: Vec<[f64; 2]> = buckets_shown
        .iter()
        .filter_map(|(a, b)| {
            let worst = calls[*a..*b]
                .iter()
                .filter_map(|c| c.sqnr_db)
                .fold(f32::INFINITY, f32::min);
            worst.is_finite().then(|| [*a as f64, f64::from(worst)])
        })
        .collect();
    crate::glossary::label(
        ui,
        "SQNR at the scale each call used (dB; the worst of each bucket): it dips where amax jumps above the estimate.",
    );
    let r = plot("amax-sqnr")
        .height(160.0)
        .x_axis_label("quantizer call")
        .y_axis_label("SQNR dB")
        .y_grid_spacer(linear_marks)
        .y_axis_formatter(|m, _| linear_label(&m))
        .link_axis(egui::Id::unique("amax-x"), [true, false])
        .show_framed(ui, |p| {
            p.line(
                Line::new("SQNR at the scale used (dB; worst of each bucket)", pts)
                    .color(series(6))
                    .width(1.5),
            );
        });
    r.response.rect
}

/// The plot's lines: each estimator's estimate (bucket minimum), the format's landmarks near
/// the data, the QAT marker, and amax (bucket maximum) on top.
fn amax_lines(
    p: &mut egui_plot::PlotUi<'_>,
    view: &RunView,
    calls: &[Call],
    buckets_shown: &[(usize, usize)],
    near: &[(&'static str, f64)],
    on: &dyn Fn(&str) -> bool,
    label_colour: Color32,
) {
    for (k, name) in view.estimators.iter().enumerate() {
        if !on(&format!("est: {name}")) {
            continue;
        }
        let pts: Vec<[f64; 2]> = buckets_shown
            .iter()
            .filter_map(|(a, b)| {
                let min = calls[*a..*b]
                    .iter()
                    .filter_map(|c| c.est.get(k))
                    .fold(f32::INFINITY, |m, e| m.min(*e));
                min.is_finite().then(|| [*a as f64, log2(min)])
            })
            .collect();
        p.line(Line::new(format!("est: {name}"), pts).color(series(k)));
    }
    if on(LANDMARKS) {
        for (label, y) in near {
            p.hline(
                HLine::new(*label, *y)
                    .color(LANDMARK)
                    .style(egui_plot::LineStyle::dashed_loose()),
            );
        }
    }
    if on("QAT on (history reset)") {
        p.vline(
            VLine::new(
                format!(
                    "QAT on (step {}; history reset)",
                    view.qat_from.unwrap_or(0)
                ),
                0.0,
            )
            .color(QAT_ON)
            .style(egui_plot::LineStyle::dashed_dense()),
        );
    }
    // amax last and thicker, on top of the estimates.
    if !on("amax") {
        return;
    }
    p.line(
        Line::new(
            "amax",
            buckets_shown
                .iter()
                .map(|(a, b)| {
                    let max = calls[*a..*b].iter().fold(0.0f32, |m, c| m.max(c.amax));
                    [*a as f64, log2(max)]
                })
                .collect::<Vec<_>>(),
        )
        .width(2.5)
        .color(AMAX),
    );
    // The landmarks' names last, over the data: at the plot's left edge, in the theme's text
    // colour (readable on both), just above their lines.
    if on(LANDMARKS) {
        for (label, y) in near {
            p.text(
                egui_plot::Text::new(
                    *label,
                    egui_plot::PlotPoint::new(0.0, *y),
                    RichText::new(*label).color(label_colour).size(11.0),
                )
                .anchor(egui::Align2::LEFT_BOTTOM),
            );
        }
    }
}

/// The format's landmarks (log2, shifted by `shift` into the unscaled domain) that sit near
/// the data between `bottom` and `top` (log2 amax): within half the data's span beyond it,
/// at least 1 and at most 3 binades, so that a distant landmark does not squash the data
/// into a sliver of the axis (the panel says in words how far overflow lies).
pub fn landmarks_near(
    format: Format,
    shift: f64,
    bottom: f64,
    top: f64,
) -> Vec<(&'static str, f64)> {
    let margin = (0.5 * (top - bottom)).clamp(1.0, 3.0);
    landmarks(format)
        .into_iter()
        .map(|(label, at)| (label, at + shift))
        .filter(|(_, y)| *y >= bottom - margin && *y <= top + margin)
        .collect()
}

#[cfg(test)]
mod landmark_tests {
    use super::*;

    #[test]
    fn only_landmarks_near_the_data_are_drawn() {
        // A narrow band of data (one binade): landmarks at most 1 binade beyond it.
        let all = landmarks(Format::HiF8);
        let (bottom, top) = (1.2, 2.1);
        let near = landmarks_near(Format::HiF8, 0.0, bottom, top);
        assert!(near.len() < all.len(), "{near:?}");
        for (label, y) in &near {
            assert!(*y >= bottom - 1.0 && *y <= top + 1.0, "{label} at {y}");
        }
        // Every landmark within the band is kept.
        for (label, y) in &all {
            if *y >= bottom - 1.0 && *y <= top + 1.0 {
                assert!(near.iter().any(|(l, _)| l == label), "{label} dropped");
            }
        }
        // A wide band widens the margin, to at most 3 binades; shifted with the scale.
        let wide = landmarks_near(Format::HiF8, 5.0, -20.0, 20.0);
        assert!(wide.iter().all(|(_, y)| (-23.0..=23.0).contains(y)));
        assert!(wide.len() >= near.len());
    }
}
