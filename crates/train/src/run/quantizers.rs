//! Per-quantizer figures of a run, from its `trace.jsonl`: where the outliers are (amax
//! range), how often each estimator's estimate was exceeded there, what overflowed (or was
//! clipped, with a saturating format) and the worst quantization error.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One quantizer over a run's traced calls.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QuantizerSummary {
    /// `block11.down.A`.
    pub quantizer: String,
    /// Traced calls (every call with `train.trace_every = 1`).
    pub calls: u64,
    /// Smallest amax of a call.
    pub amax_min: f32,
    /// Largest amax of a call.
    pub amax_max: f32,
    /// Per estimator (the summary's `estimators` order): calls whose amax exceeded its
    /// estimate.
    pub calls_above: Vec<u64>,
    /// Per estimator: elements at or beyond the format's overflow threshold at its scale
    /// (clipped to the maximum where the run saturates).
    pub overflow: Vec<u64>,
    /// Median SQNR of the calls at the active scale (dB).
    pub sqnr_median_db: Option<f32>,
    /// Worst SQNR (dB).
    pub sqnr_worst_db: Option<f32>,
}

/// The per-quantizer figures of the run folder `dir` (its `trace.jsonl`), estimators in
/// `estimators` order; quantizers in the trace's order of first appearance. Empty where
/// there is no trace (no quantization) or it cannot be read.
pub fn quantizer_table(dir: &Path, estimators: &[String]) -> Vec<QuantizerSummary> {
    let path = dir.join(super::RunDir::TRACE);
    let Ok(file) = std::fs::File::open(&path) else {
        return Vec::new();
    };
    let mut order: Vec<String> = Vec::new();
    let mut table: BTreeMap<String, (QuantizerSummary, Vec<f32>)> = BTreeMap::new();
    let n = estimators.len();
    let read = hif8lab_scaling::trace::stream_trace(&path, std::io::BufReader::new(file), |r| {
        let name = r.quantizer().to_string();
        let (q, sqnr) = table.entry(name.clone()).or_insert_with(|| {
            order.push(name.clone());
            (
                QuantizerSummary {
                    quantizer: name,
                    amax_min: f32::INFINITY,
                    amax_max: 0.0,
                    calls_above: vec![0; n],
                    overflow: vec![0; n],
                    ..QuantizerSummary::default()
                },
                Vec::new(),
            )
        });
        q.calls += 1;
        if r.amax.is_finite() {
            q.amax_min = q.amax_min.min(r.amax);
            q.amax_max = q.amax_max.max(r.amax);
        }
        for (k, e) in estimators.iter().enumerate() {
            if let Some(s) = r.shadow.get(e) {
                q.calls_above[k] += u64::from(s.above_est > 0);
                q.overflow[k] += s.overflow;
            } else if *e == r.estimator {
                q.calls_above[k] += u64::from(r.above_est > 0);
                q.overflow[k] += r.overflow;
            }
        }
        if let Some(db) = r.sqnr_db.filter(|d| d.is_finite()) {
            sqnr.push(db);
        }
    });
    if read.is_err() {
        return Vec::new();
    }
    order
        .into_iter()
        .filter_map(|name| table.remove(&name))
        .map(|(mut q, sqnr)| {
            if q.amax_min > q.amax_max {
                q.amax_min = 0.0;
            }
            if let Some(s) = super::SqnrSummary::of(&sqnr) {
                q.sqnr_median_db = Some(s.median_db);
                q.sqnr_worst_db = Some(s.worst_db);
            }
            q
        })
        .collect()
}
