//! Claim 1's statistic, the saturation ratio (calls above most_recent's estimate over calls
//! above max_window(64)'s, summed over the QAT runs): per replicate, and from one replicate
//! by a bootstrap over the quantizers.

use super::ResultRow;
use super::results::count_of_kind;

/// The per-seed value of the QAT runs' shadow counts: most_recent over max_window.
pub(super) fn ratio_per_seed(rows: &[ResultRow]) -> Vec<f64> {
    let qat: Vec<&ResultRow> = rows
        .iter()
        .filter(|r| !r.summary.shadow_calls().is_empty())
        .collect();
    let seeds = qat.iter().map(|r| r.seeds.len()).min().unwrap_or(0);
    (0..seeds)
        .map(|k| {
            let sum = |prefix: &str| -> u64 {
                qat.iter()
                    .map(|r| count_of_kind(&r.seeds[k].shadow_calls(), prefix))
                    .sum()
            };
            sum("most_recent") as f64 / sum("max_window").max(1) as f64
        })
        .collect()
}

/// The test of the saturation ratio from one replicate.
pub const QUANTIZER_BOOTSTRAP: &str = "cluster bootstrap over the quantizers (one replicate: the same resampled quantizers in every QAT run), 10,000 resamples; percentile interval";

/// With one replicate, the saturation ratio's bootstrap draws over the quantizers: each draw
/// resamples the quantizers (with replacement; the same ones in every QAT run) and sums their
/// calls above most_recent's and max_window's estimates. One run's ratio is exact for that
/// run, yet a bit-level change of the training moved one from 3.01× to 3.00× against a
/// threshold of 3×: spread over which tensors carry the counts, it is not called from one
/// run. None without the per-quantizer figures (data files written before they existed).
pub(super) fn ratio_draws_over_quantizers(
    rows: &[ResultRow],
    seed: u64,
    resamples: usize,
) -> Option<Vec<f64>> {
    let mut totals = std::collections::BTreeMap::<&str, (u64, u64)>::new();
    for r in rows.iter().filter(|r| !r.summary.shadow_calls().is_empty()) {
        let s = r.seeds.first().filter(|s| !s.per_quantizer.is_empty())?;
        let columns = |kind: hif8lab_scaling::EstimatorKind| -> Vec<usize> {
            (s.estimators.iter().enumerate())
                .filter(|(_, e)| hif8lab_scaling::EstimatorKind::of(e) == Some(kind))
                .map(|(i, _)| i)
                .collect()
        };
        let (mr, mw) = (
            columns(hif8lab_scaling::EstimatorKind::MostRecent),
            columns(hif8lab_scaling::EstimatorKind::MaxWindow),
        );
        for q in &s.per_quantizer {
            let sum =
                |cols: &[usize]| -> u64 { cols.iter().filter_map(|c| q.calls_above.get(*c)).sum() };
            let t = totals.entry(q.quantizer.as_str()).or_default();
            *t = (t.0 + sum(&mr), t.1 + sum(&mw));
        }
    }
    let t: Vec<(u64, u64)> = totals.into_values().collect();
    if t.is_empty() {
        return None;
    }
    // The draws of `bootstrap_draws` with one cluster per quantizer, but each draw the ratio
    // of two integer sums, rounded once: through the arms' means it is rounded three times,
    // and integer counts put draws exactly on the 3× threshold, where the last bit decides
    // which side they count on.
    let mut rng = hif8lab_train::rng::Rng::new(seed ^ 0x5A70_0A7E);
    let draws = (0..resamples)
        .map(|_| {
            let (mut a, mut b) = (0u64, 0u64);
            for _ in 0..t.len() {
                let (x, y) = t[rng.below(t.len())];
                (a, b) = (a + x, b + y);
            }
            a as f64 / b.max(1) as f64
        })
        .collect();
    Some(draws)
}
