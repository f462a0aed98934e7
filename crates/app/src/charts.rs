//! The data panels: Loss, Amax (log2 axis, every estimator, the format's tiers), Saturation
//! (block × step heatmaps per role), Estimators (shadow comparison), Histogram (log2|x·scale|
//! over the tiers) and Runs (overlay, config diff). Long runs are drawn decimated: at most
//! [`MAX_POINTS`] points per line, heatmap columns binned to the pixels available, and the
//! Estimators tables cached per view revision.

use eframe::egui::{self, Color32, RichText};
use egui_plot::{Axis, Bar, BarChart, HLine, Line, Plot, Polygon, Span, VLine};

use crate::layout::legend;
use hif8lab_format::{Format, hif8};
use hif8lab_scaling::stats::{HIST_BINS, HIST_PER_BINADE, Log2Histogram};

use crate::state::{Call, HistView, RunView, SeriesKey, buckets};
use crate::{HeatValue, Selection, Tab};

mod histogram;
mod runs;
mod tiers;

mod estimators;
mod saturation;

pub use estimators::EstimatorTables;
use estimators::estimators;
use histogram::histogram;
pub use histogram::histogram_csv;
pub use runs::RunsPanel;
use saturation::saturation;
pub use tiers::{TierGroup, landmarks, tier_groups, tier_of};

/// Most points drawn per line (long runs are bucketed: amax keeps each bucket's max, an
/// estimate its min, so no excursion above an estimate is hidden).
pub const MAX_POINTS: usize = 1000;
/// The top of the SQNR colour scale (dB): calls at or above it draw dark.
pub const SQNR_TOP_DB: f32 = 50.0;

/// Series colours, in order: every one of medium luminance, so it contrasts (≥ 3:1) with the
/// plot background of both the dark and the light theme, and every two of them (and the amax
/// line) at least 20 apart in CIEDE2000 ΔE, so no two look alike (tests check both).
pub const SERIES: [Color32; 8] = [
    Color32::from_rgb(31, 119, 200),  // blue
    Color32::from_rgb(142, 102, 2),   // ochre
    Color32::from_rgb(30, 145, 60),   // green
    Color32::from_rgb(223, 53, 158),  // magenta
    Color32::from_rgb(130, 90, 210),  // violet
    Color32::from_rgb(154, 86, 85),   // rose brown
    Color32::from_rgb(0, 140, 150),   // teal
    Color32::from_rgb(120, 120, 120), // grey
];

/// The amax line (the Amax panel's main data), in both themes: an orange red, apart from
/// every series colour.
pub const AMAX: Color32 = Color32::from_rgb(218, 102, 34);

/// The colour of series `i`.
pub fn series(i: usize) -> Color32 {
    SERIES[i % SERIES.len()]
}

/// CIE L*a*b* (D65) of an sRGB colour.
pub fn lab(c: Color32) -> [f64; 3] {
    let lin = |v: u8| {
        let v = f64::from(v) / 255.0;
        if v <= 0.040_45 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    let (r, g, b) = (lin(c.r()), lin(c.g()), lin(c.b()));
    let x = (0.412_456_4 * r + 0.357_576_1 * g + 0.180_437_5 * b) / 0.950_47;
    let y = 0.212_672_9 * r + 0.715_152_2 * g + 0.072_175 * b;
    let z = (0.019_333_9 * r + 0.119_192 * g + 0.950_304_1 * b) / 1.088_83;
    let f = |t: f64| {
        if t > 216.0 / 24389.0 {
            t.cbrt()
        } else {
            (24389.0 / 27.0 * t + 16.0) / 116.0
        }
    };
    let (fx, fy, fz) = (f(x), f(y), f(z));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

/// The CIEDE2000 colour difference of two L*a*b* colours (Sharma, Wu and Dalal 2005): about
/// 1 is just noticeable, 20 clearly different colours.
pub fn delta_e2000(p: [f64; 3], q: [f64; 3]) -> f64 {
    let ([l1, a1, b1], [l2, a2, b2]) = (p, q);
    let (c1, c2) = (a1.hypot(b1), a2.hypot(b2));
    let cb7 = ((c1 + c2) / 2.0).powi(7);
    let g = 0.5 * (1.0 - (cb7 / (cb7 + 25f64.powi(7))).sqrt());
    let (a1p, a2p) = ((1.0 + g) * a1, (1.0 + g) * a2);
    let (c1p, c2p) = (a1p.hypot(b1), a2p.hypot(b2));
    let hue = |b: f64, a: f64| {
        if b == 0.0 && a == 0.0 {
            0.0
        } else {
            b.atan2(a).to_degrees().rem_euclid(360.0)
        }
    };
    let (h1p, h2p) = (hue(b1, a1p), hue(b2, a2p));
    let dlp = l2 - l1;
    let dcp = c2p - c1p;
    let dhp = if c1p * c2p == 0.0 {
        0.0
    } else {
        let d = h2p - h1p;
        if d > 180.0 {
            d - 360.0
        } else if d < -180.0 {
            d + 360.0
        } else {
            d
        }
    };
    let dhp_big = 2.0 * (c1p * c2p).sqrt() * (dhp.to_radians() / 2.0).sin();
    let lbp = (l1 + l2) / 2.0;
    let cbp = (c1p + c2p) / 2.0;
    let hbp = if c1p * c2p == 0.0 {
        h1p + h2p
    } else if (h1p - h2p).abs() <= 180.0 {
        (h1p + h2p) / 2.0
    } else if h1p + h2p < 360.0 {
        (h1p + h2p + 360.0) / 2.0
    } else {
        (h1p + h2p - 360.0) / 2.0
    };
    let cos = |d: f64| d.to_radians().cos();
    let t = 1.0 - 0.17 * cos(hbp - 30.0) + 0.24 * cos(2.0 * hbp) + 0.32 * cos(3.0 * hbp + 6.0)
        - 0.20 * cos(4.0 * hbp - 63.0);
    let dth = 30.0 * (-((hbp - 275.0) / 25.0).powi(2)).exp();
    let rc = 2.0 * (cbp.powi(7) / (cbp.powi(7) + 25f64.powi(7))).sqrt();
    let sl = 1.0 + 0.015 * (lbp - 50.0).powi(2) / (20.0 + (lbp - 50.0).powi(2)).sqrt();
    let sc = 1.0 + 0.045 * cbp;
    let sh = 1.0 + 0.015 * cbp * t;
    let rt = -(2.0 * dth).to_radians().sin() * rc;
    let (x, y, z) = (dlp / sl, dcp / sc, dhp_big / sh);
    (x * x + y * y + z * z + rt * y * z).sqrt()
}

/// WCAG contrast ratio of two colours (1 to 21).
pub fn contrast(a: Color32, b: Color32) -> f32 {
    let lum = |c: Color32| {
        let lin = |v: u8| {
            let v = f32::from(v) / 255.0;
            if v <= 0.040_45 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * lin(c.r()) + 0.7152 * lin(c.g()) + 0.0722 * lin(c.b())
    };
    let (x, y) = (lum(a), lum(b));
    (x.max(y) + 0.05) / (x.min(y) + 0.05)
}

/// PNG exports the panels asked for this frame (the app takes the screenshot).
#[derive(Debug, Default)]
pub struct Exports {
    /// The file name and the screen region (points) of the plot to save.
    pub png: Option<(String, egui::Rect)>,
}

impl Exports {
    /// Asks for `rect` to be saved as `name`.
    pub fn request(&mut self, name: String, rect: egui::Rect) {
        self.png = Some((name, rect));
    }
}

/// What a data panel sees besides its run view: the one selection, the export queue, the
/// matched baseline (a run like any other), the base model's scores, and whether a run is
/// training.
pub struct PanelCtx<'a> {
    /// Tab, quantizer, heatmap mode.
    pub selection: &'a mut Selection,
    /// Exports asked for.
    pub exports: &'a mut Exports,
    /// The matched baseline, when trained alongside.
    pub baseline: Option<&'a RunView>,
    /// The lessons' base model's probe scores.
    pub base_probes: Option<hif8lab_train::ProbeScores>,
    /// A run is training (its next step answers a new selection).
    pub live: bool,
}

impl PanelCtx<'_> {
    fn baseline_loss(&self) -> &[[f64; 2]] {
        self.baseline.map_or(&[], |b| &b.loss)
    }

    fn baseline_probes(&self) -> &[hif8lab_train::ProbeScores] {
        self.baseline.map_or(&[], |b| &b.probes)
    }

    /// APE of `view`'s loss against the baseline over the steps both reached (SPEC.md §6).
    fn ape(&self, view: &RunView) -> Option<f64> {
        crate::state::ape(view, self.baseline?)
    }
}

/// A data panel: draws one run view; owns what it caches between frames.
pub trait Panel {
    /// Draws `view`.
    fn show(&mut self, ui: &mut egui::Ui, view: &RunView, cx: &mut PanelCtx<'_>);
    /// Forgets what it derived (a different view is shown).
    fn clear(&mut self) {}
}

/// The Loss panel: QAT run vs matched baseline, APE, probes.
#[derive(Default)]
pub struct LossPanel;

/// The Amax panel: one quantizer's amax history against every estimator's estimate.
#[derive(Default)]
pub struct AmaxPanel;

/// The Saturation panel: per-role heatmaps of what each call counted.
#[derive(Default)]
pub struct SaturationPanel {
    cache: Option<crate::HeatCache>,
    textures: Vec<egui::TextureHandle>,
    /// The outlined quantizer last scrolled into view (once per choice).
    shown: Option<SeriesKey>,
}

/// The Estimators panel: every estimator side by side on the same calls.
#[derive(Default)]
pub struct EstimatorsPanel {
    cache: Option<EstimatorTables>,
}

/// The Histogram panel: one call's log2|x·scale| against the format's tiers.
#[derive(Default)]
pub struct HistogramPanel;

impl Panel for LossPanel {
    fn show(&mut self, ui: &mut egui::Ui, view: &RunView, cx: &mut PanelCtx<'_>) {
        loss(cx, ui, view);
    }
}

impl Panel for AmaxPanel {
    fn show(&mut self, ui: &mut egui::Ui, view: &RunView, cx: &mut PanelCtx<'_>) {
        amax(cx, ui, view);
    }
}

impl Panel for SaturationPanel {
    fn show(&mut self, ui: &mut egui::Ui, view: &RunView, cx: &mut PanelCtx<'_>) {
        saturation(self, cx, ui, view);
    }
    fn clear(&mut self) {
        self.cache = None;
    }
}

impl Panel for EstimatorsPanel {
    fn show(&mut self, ui: &mut egui::Ui, view: &RunView, cx: &mut PanelCtx<'_>) {
        estimators(self, cx, ui, view);
    }
    fn clear(&mut self) {
        self.cache = None;
    }
}

impl Panel for HistogramPanel {
    fn show(&mut self, ui: &mut egui::Ui, view: &RunView, cx: &mut PanelCtx<'_>) {
        histogram(cx, ui, view);
    }
}

/// The data panels of the central area.
#[derive(Default)]
pub struct Panels {
    /// Loss.
    pub loss: LossPanel,
    /// Amax.
    pub amax: AmaxPanel,
    /// Saturation.
    pub saturation: SaturationPanel,
    /// Estimators.
    pub estimators: EstimatorsPanel,
    /// Histogram.
    pub histogram: HistogramPanel,
}

impl Panels {
    /// The panel of `tab` (none for Runs and Lessons, which are not about one view).
    pub fn of(&mut self, tab: Tab) -> Option<&mut dyn Panel> {
        match tab {
            Tab::Loss => Some(&mut self.loss),
            Tab::Amax => Some(&mut self.amax),
            Tab::Saturation => Some(&mut self.saturation),
            Tab::Estimators => Some(&mut self.estimators),
            Tab::Histogram => Some(&mut self.histogram),
            Tab::Runs | Tab::Lessons => None,
        }
    }

    /// Forgets every panel's derived data.
    pub fn clear(&mut self) {
        self.saturation.clear();
        self.estimators.clear();
    }
}

/// A plot as the panels draw it: inside a scrolling panel the mouse wheel scrolls the panel
/// (it does not pan the plot into empty ranges); drag to pan, Ctrl + wheel or pinch to zoom,
/// double-click to reset. The legend is drawn above the plot by [`legend`], never over it.
fn plot(id: &str) -> Plot<'_> {
    Plot::new(id).allow_scroll(false)
}

/// A header row: the text (wrapping, its terms explained on hover) and what follows it.
fn header<R>(ui: &mut egui::Ui, text: &str, then: impl FnOnce(&mut egui::Ui) -> R) -> R {
    ui.horizontal_wrapped(|ui| {
        crate::glossary::label(ui, text);
        then(ui)
    })
    .inner
}

/// A "Save PNG" button; the plot drawn after it in the same frame is saved when clicked.
fn png_button(ui: &mut egui::Ui) -> bool {
    ui.button("Save PNG")
        .on_hover_text(
            "save this plot as an image (exports/ on the desktop, a download on the web)",
        )
        .clicked()
}

fn save_png(exports: &mut Exports, want: bool, view: &str, what: &str, rect: egui::Rect) {
    if want {
        let stem = view.replace(['/', ' ', '='], "_");
        exports.request(format!("{stem}-{what}.png"), rect);
    }
}

/// The "QAT on" marker's colour: a warm grey, apart from the amax line and the series it is
/// drawn with (the Amax panel's estimators, the Loss panel's two runs).
pub const QAT_ON: Color32 = Color32::from_rgb(141, 133, 135);

/// The colour of a format's lines on the Amax panel (dashed, named on the plot).
pub const LANDMARK: Color32 = Color32::from_rgb(60, 140, 140);

/// The Amax legend's entry for the format's lines.
const LANDMARKS: &str = "format's lines (named on the plot)";

fn qat_line(view: &RunView) -> Option<VLine> {
    view.qat_from.map(|s| {
        VLine::new("QAT on", s as f64)
            .color(QAT_ON)
            .width(2.0)
            .style(egui_plot::LineStyle::dashed_dense())
    })
}

/// The Loss panel: QAT run vs matched baseline, APE.
fn loss(cx: &mut PanelCtx<'_>, ui: &mut egui::Ui, view: &RunView) {
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
    let pct = |p: &hif8lab_train::ProbeScores| 100.0 * p.knowledge_acc_norm;
    if let Some(last) = view.probes.last() {
        let b = cx
            .baseline_probes()
            .iter()
            .rfind(|p| p.step == last.step)
            .map(|p| format!(", matched baseline {:.1} %", pct(p)))
            .unwrap_or_default();
        let first = view.probes.first().map(pct).unwrap_or(f64::NAN);
        let [lo, hi] = last.interval("knowledge_acc_norm");
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
        .show(ui, |p| {
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
            .show(ui, |p| {
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
        rect = rect.union(r.response.rect);
    }
    save_png(cx.exports, want, &view.name, "loss", rect);
}

/// The 95 % interval band of knowledge acc_norm over the evaluations (percent), as a closed
/// polygon: lower edge forward, upper edge back. `None` with fewer than two evaluations or
/// records without intervals.
pub fn interval_band(v: &[hif8lab_train::ProbeScores]) -> Option<Vec<[f64; 2]>> {
    let edges: Vec<(f64, [f64; 2])> = v
        .iter()
        .map(|p| (p.step as f64, p.interval("knowledge_acc_norm")))
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
fn decimate_xy(points: &[[f64; 2]]) -> Vec<[f64; 2]> {
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

/// An axis label for a log2 value: `2^3`, or `2^1.25` between integer binades.
fn pow2_label(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("2^{}", v.round())
    } else {
        format!("2^{v:.2}")
    }
}

/// Grid marks of a log2 axis: steps that are powers of two (in log2 units: ×2, ×4, ×16 … of
/// the value), the finest at least egui's minimal step, so that a short plot still gets
/// labelled marks (a power of ten in log2 units leaves a short plot with none).
pub fn log2_marks(input: egui_plot::GridInput) -> Vec<egui_plot::GridMark> {
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
fn log2(v: f32) -> f64 {
    if v > 0.0 {
        f64::from(v).log2()
    } else {
        f64::NAN
    }
}

/// The quantizer chooser shared by the Amax and Histogram panels.
fn choose_quantizer(cx: &mut PanelCtx<'_>, ui: &mut egui::Ui, ids: &[SeriesKey]) -> SeriesKey {
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
fn amax(cx: &mut PanelCtx<'_>, ui: &mut egui::Ui, view: &RunView) {
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
    let decimated = if buckets_shown.len() < calls.len() {
        format!(
            " (drawn as {} buckets: amax max, estimates min)",
            buckets_shown.len()
        )
    } else {
        String::new()
    };
    crate::glossary::label(
        ui,
        format!(
            "{} calls{decimated}. log2 axis; horizontal lines: the {} landmarks of the scaled domain placed at the last active estimate (the estimate maps to target {}).",
            calls.len(),
            view.format,
            view.target
        ),
    );
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
        .map(|shift| {
            landmarks(view.format)
                .into_iter()
                .map(|(label, at)| (label, at + shift))
                .filter(|(_, y)| *y > data_bottom - 3.0 && *y < data_top + 4.0)
                .collect()
        })
        .unwrap_or_default();
    let mut items: Vec<(String, Color32)> = vec![("amax".into(), AMAX)];
    items.extend(
        view.estimators
            .iter()
            .enumerate()
            .map(|(k, n)| (format!("est: {n}"), series(k))),
    );
    // The format's lines, one entry: dashed, in one colour, each named on the plot (their
    // tier colours would clash with the estimators').
    if !near.is_empty() {
        items.push((LANDMARKS.into(), LANDMARK));
    }
    items.push(("QAT on (history reset)".into(), QAT_ON));
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
        .y_axis_formatter(|m, _| pow2_label(m.value))
        .y_grid_spacer(log2_marks)
        .show(ui, |p| {
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
                // Named at the plot's left edge, in the theme's text colour (readable on both).
                for (label, y) in &near {
                    p.hline(
                        HLine::new(*label, *y)
                            .color(LANDMARK)
                            .style(egui_plot::LineStyle::dashed_loose()),
                    );
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
        });
    let mut rect = r.response.rect;
    if has_sqnr {
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
            .link_axis(egui::Id::unique("amax-x"), [true, false])
            .show(ui, |p| {
                p.line(
                    Line::new("SQNR at the scale used (dB; worst of each bucket)", pts)
                        .color(series(6))
                        .width(1.5),
                );
            });
        rect = rect.union(r.response.rect);
    }
    save_png(
        cx.exports,
        want,
        &view.name,
        &format!("amax-{selected}"),
        rect,
    );
}
