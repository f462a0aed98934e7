//! What the panels show and select: the tab, the chosen quantizer, the heatmap's value.

use super::*;

/// The dashboard's panels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    /// Loss curve.
    Loss,
    /// amax vs estimates of one quantizer.
    Amax,
    /// Block × step heatmap of saturation.
    Saturation,
    /// Shadow comparison of the estimators.
    Estimators,
    /// log2|x·scale| of one tensor over the format's tiers.
    Histogram,
    /// Opened and earlier runs: overlay, compare, config diff.
    Runs,
    /// The lessons.
    Lessons,
}

/// What the saturation heatmap counts per call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeatValue {
    /// Elements above the active estimator's estimate.
    AboveEst,
    /// Elements overflowing at the active scale.
    Overflow,
    /// Non-zero elements quantized to zero.
    Underflow,
    /// Quantization error: the worst SQNR of each cell, shown as its shortfall below
    /// [`charts::SQNR_TOP_DB`] (brighter = more precision lost).
    Sqnr,
}

/// What the panels select: one selection shared by every panel.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// The central panel's tab.
    pub tab: Tab,
    /// The quantizer the Amax and Histogram panels show (and the live run bins).
    pub quantizer: Option<state::SeriesKey>,
    /// What the saturation heatmap counts.
    pub heat: HeatValue,
}

impl Tab {
    /// Parses a panel name (`loss`, `amax`, `saturation`, `estimators`, `histogram`, `runs`,
    /// `lessons`).
    pub fn parse(s: &str) -> Option<Tab> {
        match s.to_ascii_lowercase().as_str() {
            "loss" => Some(Tab::Loss),
            "amax" => Some(Tab::Amax),
            "saturation" => Some(Tab::Saturation),
            "estimators" => Some(Tab::Estimators),
            "histogram" => Some(Tab::Histogram),
            "runs" => Some(Tab::Runs),
            "lessons" => Some(Tab::Lessons),
            _ => None,
        }
    }
}
