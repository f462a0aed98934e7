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
pub use saturation::{heat_colour, zero_cell};
pub use tiers::{TierGroup, landmarks, tier_groups, tier_of};

mod colour;
pub use colour::*;

mod amax;
pub use amax::*;

mod loss;
pub use loss::*;

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
    Color32::from_rgb(160, 136, 0),   // mustard (apart from the amax line's orange)
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
    /// The theme the textures were drawn for (dark or not): a switch redraws them.
    dark: bool,
}

/// The Estimators panel: every estimator side by side on the same calls.
#[derive(Default)]
pub struct EstimatorsPanel {
    cache: Option<EstimatorTables>,
    /// The window sweep and the view revision it was computed at (only while shown).
    sweep: Option<(u64, Vec<hif8lab_scaling::sweep::SweepRow>)>,
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
    /// Runs.
    pub runs: RunsPanel,
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

/// Shows a plot with an outline where egui_plot would fill a background (what a software
/// rasterizer spends most of a frame on: see [`crate::theme::unfilled`]).
pub(crate) trait ShowFramed<'a> {
    /// [`Plot::show`], then the plot area's outline.
    fn show_framed<R>(
        self,
        ui: &mut egui::Ui,
        build: impl FnOnce(&mut egui_plot::PlotUi<'a>) -> R + 'a,
    ) -> egui_plot::PlotResponse<R>;
}

impl<'a> ShowFramed<'a> for Plot<'a> {
    fn show_framed<R>(
        self,
        ui: &mut egui::Ui,
        build: impl FnOnce(&mut egui_plot::PlotUi<'a>) -> R + 'a,
    ) -> egui_plot::PlotResponse<R> {
        let r = self.show_background(false).show(ui, build);
        ui.painter().rect_stroke(
            *r.transform.frame(),
            2.0,
            ui.visuals().widgets.noninteractive.bg_stroke,
            egui::StrokeKind::Inside,
        );
        r
    }
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
pub const LANDMARK: Color32 = Color32::from_rgb(0, 152, 160);

/// The Amax legend's entry for the format's lines.
const LANDMARKS: &str = "format's lines (named on the plot)";
