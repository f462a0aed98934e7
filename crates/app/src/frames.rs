//! The frame-time benchmark (`--bench-frames`): frames per tab, timed.

use super::*;

/// Frame statistics: frames drawn, how long their UI and background work took, where the
/// central panel was, what did not fit, and the frame-time benchmark when it runs.
pub struct FrameStats {
    /// Milliseconds spent building recent frames' UI (newest last, at most 120).
    pub ui_ms: std::collections::VecDeque<f32>,
    /// The whole frame's CPU time as eframe measures it (the UI, tessellation and the
    /// painter's calls; newest last, at most 120), in ms.
    pub cpu_ms: std::collections::VecDeque<f32>,
    /// Frames drawn so far (the page's snapshot carries it, so scripts can wait for a frame
    /// drawn after a change).
    pub count: u64,
    /// When the last frame began.
    pub(crate) started: Option<web_time::Instant>,
    /// How long the last frame's background work took (ms).
    pub(crate) poll_ms: f32,
    /// How long the frame before took besides its background work (drawing; ms).
    pub(crate) last_ms: f32,
    /// The frame-time benchmark, when running.
    pub bench: Option<FrameBench>,
    /// Where the central panel was drawn last frame.
    pub central_rect: egui::Rect,
    /// The last frame's layout overflow: every region whose content did not fit the space
    /// it was given (see [`crate::layout`]); empty when everything fits.
    pub overflow: Vec<String>,
}

/// How many recent frames' figures [`FrameStats`] keeps.
const RECENT: usize = 120;

/// Appends a frame's figure to `recent`, dropping the oldest beyond [`RECENT`].
pub(crate) fn push_recent(recent: &mut std::collections::VecDeque<f32>, figure: f32) {
    recent.push_back(figure);
    while recent.len() > RECENT {
        recent.pop_front();
    }
}

impl Default for FrameStats {
    fn default() -> Self {
        FrameStats {
            ui_ms: Default::default(),
            cpu_ms: Default::default(),
            count: 0,
            started: None,
            poll_ms: 0.0,
            last_ms: 0.0,
            bench: None,
            central_rect: egui::Rect::NOTHING,
            overflow: Vec::new(),
        }
    }
}

/// The frame-time benchmark (`hif8lab-app --bench-frames N`): each data panel drawn for N
/// frames with continuous repaints; the interval between frames is the whole frame (UI,
/// tessellation, rendering and presenting), the UI time is what [`HifApp::show`] took.
#[derive(Debug)]
pub struct FrameBench {
    per_tab: usize,
    frame: usize,
    last: Option<web_time::Instant>,
    /// Per panel: (name, frame intervals ms, UI ms).
    pub figures: Vec<(Tab, Vec<f32>, Vec<f32>)>,
}

/// The panels the benchmark draws.
pub const BENCH_TABS: [Tab; 7] = [
    Tab::Lessons,
    Tab::Loss,
    Tab::Amax,
    Tab::Saturation,
    Tab::Estimators,
    Tab::Histogram,
    Tab::Runs,
];

impl FrameBench {
    /// A benchmark of `per_tab` frames per panel.
    pub fn new(per_tab: usize) -> Self {
        FrameBench {
            per_tab: per_tab.max(2),
            frame: 0,
            last: None,
            figures: BENCH_TABS
                .iter()
                .map(|t| (*t, Vec::new(), Vec::new()))
                .collect(),
        }
    }

    /// The panel to draw now, or `None` when done.
    pub fn tab(&self) -> Option<Tab> {
        BENCH_TABS.get(self.frame / self.per_tab).copied()
    }

    /// Records a frame that took `ui_ms` to build (the first frame of a panel is not
    /// counted: it fills the caches).
    pub fn record(&mut self, ui_ms: f32) {
        let now = web_time::Instant::now();
        let i = self.frame / self.per_tab;
        let first_of_tab = self.frame.is_multiple_of(self.per_tab);
        if let (Some(last), false, Some(f)) = (self.last, first_of_tab, self.figures.get_mut(i)) {
            f.1.push(now.duration_since(last).as_secs_f32() * 1000.0);
            f.2.push(ui_ms);
        }
        self.last = Some(now);
        self.frame += 1;
    }

    /// The report: per panel the median and 95th-percentile frame interval and UI time.
    pub fn report(&self) -> String {
        let pct = |v: &[f32], p: f32| {
            let mut v = v.to_vec();
            v.sort_by(f32::total_cmp);
            v.get(((v.len() as f32 - 1.0) * p).round() as usize)
                .copied()
                .unwrap_or(f32::NAN)
        };
        let mut out = String::from("panel        frame p50  frame p95   UI p50   UI p95  (ms)\n");
        for (tab, frames, ui) in &self.figures {
            out.push_str(&format!(
                "{:<12} {:>9.2}  {:>9.2}  {:>7.2}  {:>7.2}\n",
                format!("{tab:?}"),
                pct(frames, 0.5),
                pct(frames, 0.95),
                pct(ui, 0.5),
                pct(ui, 0.95)
            ));
        }
        out
    }
}
