//! Opening a grid's (or a lesson's) folder natively: its runs of the first data order into
//! the Runs list, overlaid, the low-rate most_recent run current, and its quantizer with the
//! largest amax — a real model's outlier channel — chosen for the Amax panel and outlined on
//! Saturation.

use crate::state::{RunView, SeriesKey};

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
pub(crate) fn first_shown(views: &[RunView]) -> usize {
    views
        .iter()
        .position(|v| v.name == "most_recent-low")
        .or_else(|| views.iter().position(|v| !v.calls.is_empty()))
        .unwrap_or(0)
}
