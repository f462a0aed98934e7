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
    /// The calls whose amax exceeded the active estimate: amax ÷ estimate as counts in bins
    /// of an eighth of an octave (bin k holds ratios in [2^(k/8), 2^((k+1)/8))); empty where
    /// no call exceeded it, or in summaries that predate the record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excess_hist: Vec<u32>,
    /// The largest amax ÷ estimate of those calls (0 where none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub excess_max: f32,
    /// Those calls by where their largest value (amax at the active scale) landed: HiF8's
    /// 3-bit tier (or below), 2-bit, 1-bit, overflow; for a saturating format
    /// (E4M3/E5M2) in range in the first, clipped in the last.
    #[serde(default, skip_serializing_if = "is_none4")]
    pub excess_tiers: [u64; 4],
}

fn is_zero(v: &f32) -> bool {
    *v == 0.0
}

fn is_none4(v: &[u64; 4]) -> bool {
    v.iter().all(|c| *c == 0)
}

/// Bins per octave of [`QuantizerSummary::excess_hist`].
pub const EXCESS_BINS_PER_OCTAVE: u32 = 8;
/// The tiers of [`QuantizerSummary::excess_tiers`], in order.
pub const EXCESS_TIERS: [&str; 4] = ["3-bit", "2-bit", "1-bit", "overflow"];

/// The bin of [`QuantizerSummary::excess_hist`] a ratio above 1 falls in.
pub fn excess_bin(ratio: f32) -> usize {
    let b = (f64::from(ratio).log2() * f64::from(EXCESS_BINS_PER_OCTAVE)).floor();
    if b.is_finite() && b > 0.0 {
        (b as usize).min(64 * EXCESS_BINS_PER_OCTAVE as usize)
    } else {
        0
    }
}

/// Where an exceeded call's largest value landed ([`EXCESS_TIERS`]'s index): `scaled` is its
/// amax at the active scale, `overflowed` whether any element overflowed (or was clipped).
pub fn excess_tier(format: &str, scaled: f32, overflowed: bool) -> usize {
    if overflowed {
        return 3;
    }
    if format != "hif8" {
        return 0;
    }
    match hif8lab_format::hif8::tier(scaled) {
        hif8lab_format::hif8::Tier::Overflow => 3,
        hif8lab_format::hif8::Tier::Mantissa(1) => 2,
        hif8lab_format::hif8::Tier::Mantissa(2) => 1,
        _ => 0,
    }
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
    // Per quantizer: its figures, its calls' SQNR, and its exceeded calls as (amax ÷
    // estimate, amax at the active scale, overflowed).
    type Calls = (QuantizerSummary, Vec<f32>, Vec<(f32, f32, bool)>);
    let mut table: BTreeMap<String, Calls> = BTreeMap::new();
    let n = estimators.len();
    let read = hif8lab_scaling::trace::stream_trace(&path, std::io::BufReader::new(file), |r| {
        let name = r.quantizer().to_string();
        let (q, sqnr, exceeded) = table.entry(name.clone()).or_insert_with(|| {
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
                Vec::new(),
            )
        });
        q.calls += 1;
        if r.amax.is_finite() {
            q.amax_min = q.amax_min.min(r.amax);
            q.amax_max = q.amax_max.max(r.amax);
        }
        for (k, e) in estimators.iter().enumerate() {
            if let Some(v) = r.view(e) {
                q.calls_above[k] += u64::from(v.above_est > 0);
                q.overflow[k] += v.overflow;
            }
        }
        if let Some(db) = r.sqnr_db.filter(|d| d.is_finite()) {
            sqnr.push(db);
        }
        if r.est > 0.0 && r.est.is_finite() && r.amax.is_finite() && r.amax > r.est {
            exceeded.push((r.amax / r.est, r.amax * r.scale, r.overflow > 0));
        }
    });
    let Ok((header, _)) = read else {
        return Vec::new();
    };
    order
        .into_iter()
        .filter_map(|name| table.remove(&name))
        .map(|(mut q, sqnr, exceeded)| {
            for (ratio, scaled, overflowed) in exceeded {
                let b = excess_bin(ratio);
                if q.excess_hist.len() <= b {
                    q.excess_hist.resize(b + 1, 0);
                }
                q.excess_hist[b] += 1;
                q.excess_max = q.excess_max.max(ratio);
                q.excess_tiers[excess_tier(&header.format, scaled, overflowed)] += 1;
            }
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

/// A run's counts and SQNR per role over every call of its `trace.jsonl` (with `trace_every = 1`, the
/// same counts the trainer gathers as it steps): what a run folder written by another
/// trainer (`hif8lab.torch.train`, whose `metrics.jsonl` carries the active estimator's
/// counts only) is summarized from. Each call as [`hif8lab_scaling::CallRecord::from_trace`]
/// reads it, estimators in `estimators` order. The error names the trace file.
pub fn trace_counts(
    dir: &Path,
    estimators: &[String],
) -> Result<
    (
        hif8lab_scaling::CallCounts,
        BTreeMap<hif8lab_scaling::Role, super::SqnrSummary>,
    ),
    String,
> {
    let path = dir.join(super::RunDir::TRACE);
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut counts = hif8lab_scaling::CallCounts::new(estimators.len());
    let mut sqnr: BTreeMap<hif8lab_scaling::Role, Vec<f32>> = BTreeMap::new();
    hif8lab_scaling::trace::stream_trace(&path, std::io::BufReader::new(file), |r| {
        counts.add(&hif8lab_scaling::CallRecord::from_trace(&r, estimators));
        if let Some(db) = r.sqnr_db.filter(|d| d.is_finite()) {
            sqnr.entry(r.role).or_default().push(db);
        }
    })
    .map_err(|e| e.to_string())?;
    Ok((counts, super::SqnrSummary::per_role(sqnr)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn record(amax: f32, est: f32, overflow: u64) -> String {
        let scale = 15.0 / est;
        format!(
            r#"{{"step":0,"micro":0,"block":4,"module":"down","role":"A","numel":8,"amax":{amax},"estimator":"max_window(64)","est":{est},"scale":{scale},"above_est":{},"overflow":{overflow},"underflow":0,"nonfinite":0}}"#,
            u64::from(amax > est)
        )
    }

    fn trace_dir(tag: &str, format: &str, records: &[String]) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("hif8lab-{tag}-{format}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let header = format!(
            r#"{{"hif8lab_trace":1,"format":"{format}","target":15.0,"margin":0,"window":64,"estimator":"max_window(64)","estimators":["max_window(64)"]}}"#
        );
        let text = std::iter::once(header)
            .chain(records.iter().cloned())
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(dir.join(super::super::RunDir::TRACE), text + "\n").unwrap();
        dir
    }

    fn table(format: &str, records: &[String]) -> Vec<QuantizerSummary> {
        let dir = trace_dir("excess", format, records);
        let t = quantizer_table(&dir, &["max_window(64)".to_owned()]);
        let _ = std::fs::remove_dir_all(&dir);
        t
    }

    /// A trace's counts equal what the trainer counts call by call: each estimator from its
    /// shadow column (the active one from the record's own where the shadows lack it), per
    /// role, with the SQNR of every call.
    #[test]
    fn a_trace_counts_every_estimator_and_role() {
        let shadowed = |role: &str, amax: f32, sqnr: &str| {
            format!(
                r#"{{"step":0,"micro":0,"block":4,"module":"down","role":"{role}","numel":8,"amax":{amax},"estimator":"max_window(64)","est":2.0,"scale":7.5,"above_est":{},"overflow":0,"underflow":1,"nonfinite":0,{sqnr}"shadow":{{"most_recent":{{"est":1.0,"above_est":5,"overflow":2}}}}}}"#,
                u64::from(amax > 2.0)
            )
        };
        let calls = [
            shadowed("A", 3.0, r#""sqnr_db":30.5,"#),
            shadowed("G", 1.5, r#""sqnr_db":20.0,"#),
            shadowed("G", 2.5, ""),
        ];
        let dir = trace_dir("counts", "hif8", &calls);
        let names = ["most_recent".to_owned(), "max_window(64)".to_owned()];
        let (c, sqnr) = trace_counts(&dir, &names).unwrap();
        assert_eq!((c.calls, c.underflow), (3, 3));
        assert_eq!(c.calls_above(), [3, 2]);
        assert_eq!(c.estimators[0].overflow, 6);
        assert_eq!(c.calls_above_roles(&[hif8lab_scaling::Role::G]), [2, 1]);
        let one = |db| super::super::SqnrSummary {
            calls: 1,
            median_db: db,
            worst_db: db,
        };
        assert_eq!(sqnr[&hif8lab_scaling::Role::A], one(30.5));
        assert_eq!(sqnr[&hif8lab_scaling::Role::G], one(20.0));
        let _ = std::fs::remove_dir_all(&dir);
        // No trace: an error naming the file.
        let e = trace_counts(&dir, &names).unwrap_err();
        assert!(e.contains("trace.jsonl"), "{e}");
    }

    #[test]
    fn exceeded_calls_record_how_far_above_the_estimate_and_which_tier() {
        // Under the estimate; 1.5× (scaled 22.5: the 2-bit tier); 20× (300: 1-bit); 3000×
        // (45,000: beyond HiF8's overflow threshold 40,960).
        let calls = [
            record(1.0, 2.0, 0),
            record(3.0, 2.0, 0),
            record(40.0, 2.0, 0),
            record(6000.0, 2.0, 3),
        ];
        let t = table("hif8", &calls);
        assert_eq!(t.len(), 1);
        let q = &t[0];
        assert_eq!(q.excess_tiers, [0, 1, 1, 1]);
        assert_eq!(q.excess_max, 3000.0);
        assert_eq!(q.excess_hist.iter().sum::<u32>(), 3);
        // 1.5 = 2^0.585: bin 4; 20 = 2^4.32: bin 34; 3000 = 2^11.55: bin 92.
        assert_eq!(q.excess_hist.len(), 93);
        assert_eq!(
            [q.excess_hist[4], q.excess_hist[34], q.excess_hist[92]],
            [1, 1, 1]
        );
        // A saturating format: in range, or clipped.
        let e4m3 = table("e4m3", &calls);
        assert_eq!(e4m3[0].excess_tiers, [2, 0, 0, 1]);
        // No call above: nothing recorded, nothing serialized.
        let none = table("hif8", &[record(1.0, 2.0, 0)]);
        assert!(none[0].excess_hist.is_empty() && none[0].excess_max == 0.0);
        let json = serde_json::to_string(&none[0]).unwrap();
        assert!(!json.contains("excess"), "{json}");
    }
}
