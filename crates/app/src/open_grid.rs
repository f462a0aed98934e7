//! Opening a grid's (or a lesson's) folder natively: its runs of the first data order into
//! the Runs list, overlaid, the low-rate most_recent run current, and its quantizer with the
//! largest amax — a real model's outlier channel — chosen for the Amax panel and outlined on
//! Saturation.

use std::path::Path;

use crate::state::{RunView, SeriesKey};
use crate::{HifApp, Tab};

/// The quantizer of `view` whose amax went highest, that amax, and the median over the
/// quantizers of each one's highest amax.
pub fn largest_amax(view: &RunView) -> Option<(SeriesKey, f32, f32)> {
    let tops: Vec<(SeriesKey, f32)> = view
        .calls
        .iter()
        .filter_map(|(k, calls)| {
            let top = calls
                .iter()
                .map(|c| c.amax)
                .filter(|a| a.is_finite())
                .fold(f32::NEG_INFINITY, f32::max);
            top.is_finite().then(|| (k.clone(), top))
        })
        .collect();
    let (key, top) = tops.iter().max_by(|a, b| a.1.total_cmp(&b.1)).cloned()?;
    let maxima: Vec<f32> = tops.iter().map(|t| t.1).collect();
    Some((key, top, hif8lab_scaling::replay::median(&maxima)))
}

/// The run of a grid folder to show first: the low-rate most_recent run (the paper's
/// failing cell), else the first with quantizer calls, else the first.
fn first_shown(views: &[RunView]) -> usize {
    views
        .iter()
        .position(|v| v.name == "most_recent-low")
        .or_else(|| views.iter().position(|v| !v.calls.is_empty()))
        .unwrap_or(0)
}

impl HifApp {
    /// Opens the runs of a grid's or a lesson's folder (`<dir>/runs/NAME`, the first data
    /// order: names without `-seedK`); returns what was opened, in words.
    pub fn open_grid(&mut self, dir: &Path) -> Result<String, String> {
        let runs = dir.join("runs");
        let mut names: Vec<String> = std::fs::read_dir(&runs)
            .map_err(|e| format!("{}: {e}", runs.display()))?
            .filter_map(|e| e.ok())
            .filter(|e| hif8lab_train::run::RunDir::new(e.path()).has_metrics())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.contains("-seed"))
            .collect();
        names.sort();
        if names.is_empty() {
            return Err(format!("{}: no run folders", runs.display()));
        }
        let mut views = Vec::new();
        let mut skipped = Vec::new();
        for n in names.iter().take(crate::MAX_RUNS + 1) {
            match RunView::load(&runs.join(n)) {
                Ok(v) => views.push(v),
                Err(e) => skipped.push(e),
            }
        }
        if views.is_empty() {
            return Err(skipped.join("; "));
        }
        let shown = views.remove(first_shown(&views));
        let opened = views.len() + 1;
        for v in views {
            self.keep_run(v);
        }
        let mut words = format!(
            "Opened {}: {opened} runs of {} (first data order; in Runs, overlaid), {} shown",
            dir.display(),
            names.len(),
            shown.name
        );
        if let Some((key, top, median)) = largest_amax(&shown) {
            words.push_str(&format!(
                "; the largest amax is {key}'s, {top:.4e} ({:.0}× the median quantizer's): chosen in Amax, outlined on Saturation",
                top / median.max(f32::MIN_POSITIVE)
            ));
            self.selection.quantizer = Some(key);
            self.selection.tab = Tab::Amax;
        }
        if !skipped.is_empty() {
            words.push_str(&format!("; not opened: {}", skipped.join("; ")));
        }
        self.set_view(shown);
        Ok(words + ".")
    }
}
