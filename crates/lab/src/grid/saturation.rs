//! Claim 1's statistic, the saturation ratio (calls above most_recent's estimate over calls
//! above max_window(64)'s, summed over the QAT runs): per replicate, and from one replicate
//! by a bootstrap over the quantizers.

use super::count_of_kind;
use super::results::ResultRow;

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

/// Calls above each estimate that exchangeable amax would give (no outliers, no trend: every
/// order of a quantizer's amax values equally likely, ties aside): a call after a history of
/// h values exceeds their maximum with probability 1 / (h + 1) and the last value with
/// probability ½. Over `n` calls from an empty history (the first call sets its own scale)
/// and a window of `w`: (most_recent, max_window(w)) expected counts.
pub fn exchangeable_counts(n: u64, w: u64) -> (f64, f64) {
    let most_recent = n.saturating_sub(1) as f64 / 2.0;
    let max_window = (1..n).map(|h| 1.0 / (h.min(w) + 1) as f64).sum();
    (most_recent, max_window)
}

/// Claim 1's ratio under exchangeable amax for the grid's QAT runs (first replicate): the
/// expected counts summed over the runs' quantizers, their calls per quantizer
/// (`counts.calls / quantizers`) and max_window's window. None when a run lacks the counts.
pub(super) fn null_ratio(rows: &[ResultRow]) -> Option<f64> {
    let (mut mr, mut mw) = (0.0, 0.0);
    for r in rows.iter().filter(|r| !r.summary.shadow_calls().is_empty()) {
        let s = r.seeds.first()?;
        let window = s.estimators.iter().find_map(|e| {
            e.strip_prefix("max_window(")?
                .strip_suffix(')')?
                .parse::<u64>()
                .ok()
        })?;
        if s.quantizers == 0 {
            return None;
        }
        let n = s.counts.calls / s.quantizers as u64;
        let (a, b) = exchangeable_counts(n, window);
        mr += a * s.quantizers as f64;
        mw += b * s.quantizers as f64;
    }
    (mw > 0.0).then(|| mr / mw)
}

#[cfg(test)]
mod tests {
    use super::exchangeable_counts;

    #[test]
    fn the_exchangeable_ratio_grows_with_the_calls() {
        // 30 calls within a window of 64: 14.5 / (H_30 − 1) = 4.84.
        let r = |n| {
            let (a, b) = exchangeable_counts(n, 64);
            a / b
        };
        assert!((r(30) - 4.84).abs() < 0.01, "{}", r(30));
        assert!((r(160) - 15.2).abs() < 0.1, "{}", r(160));
        assert!((r(240) - 18.5).abs() < 0.1, "{}", r(240));
        // A simulation of iid amax agrees.
        let mut rng = hif8lab_train::rng::Rng::new(4);
        let (mut mr, mut mw) = (0u64, 0u64);
        for _ in 0..400 {
            let xs: Vec<u64> = (0..160).map(|_| rng.below(1 << 30) as u64).collect();
            for t in 1..xs.len() {
                mr += u64::from(xs[t] > xs[t - 1]);
                let lo = t.saturating_sub(64);
                mw += u64::from(xs[t] > *xs[lo..t].iter().max().unwrap_or(&0));
            }
        }
        let sim = mr as f64 / mw as f64;
        assert!((sim - r(160)).abs() < 0.6, "{sim} vs {}", r(160));
    }
}
