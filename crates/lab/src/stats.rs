//! The uncertainty of probe scores and the tests behind verdicts.
//!
//! Probe items are not independent: the knowledge items of one entity ask about the same
//! facts in several phrasings, so they rise and fall together. Every interval and test here
//! therefore resamples **groups** (an entity's items; a completion item is its own group) —
//! a cluster bootstrap — rather than items, and, where a grid ran several seeds, resamples
//! the seeds too (two levels). Everything is deterministic from a fixed resampling seed, so a
//! report is reproducible to the digit.
//!
//! A verdict has three values ([`Verdict3`]): it *holds* when the 95 % interval of the
//! statistic lies on the claim's side of the threshold, *fails* when it lies wholly on the
//! other side, and is *inconclusive* when the interval straddles the threshold.

use serde::{Deserialize, Serialize};

pub mod exact;

pub use hif8lab_train::eval::resample::*;

/// Three-valued verdict on a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict3 {
    /// The interval lies on the claim's side of the threshold.
    Holds,
    /// The interval lies wholly on the other side.
    Fails,
    /// The interval straddles the threshold: the data cannot decide.
    Inconclusive,
    /// No data behind the claim (the runs it needs are missing): no verdict at all.
    #[serde(rename = "not judged")]
    NotJudged,
    /// The data exist but do not contain what the claim is about (the manipulation check:
    /// the arms of "saturation costs X" do not differ in saturation): no verdict.
    #[serde(rename = "not tested")]
    NotTested,
}

impl Verdict3 {
    /// `"holds"`, `"fails"`, `"inconclusive"`, `"not judged"`, `"not tested"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict3::Holds => "holds",
            Verdict3::Fails => "fails",
            Verdict3::Inconclusive => "inconclusive",
            Verdict3::NotJudged => "not judged",
            Verdict3::NotTested => "not tested",
        }
    }

    /// The grid report's words: reproduced / not reproduced / inconclusive / not judged / not
    /// tested at this scale.
    pub fn report_word(self) -> &'static str {
        match self {
            Verdict3::Holds => "reproduced",
            Verdict3::Fails => "not reproduced",
            Verdict3::Inconclusive => "inconclusive",
            Verdict3::NotJudged => "not judged",
            Verdict3::NotTested => "not tested at this scale",
        }
    }

    /// Verdict on "statistic ≥ threshold" (`at_least`) or "statistic < threshold" from its
    /// interval.
    pub fn judge(interval: [f64; 2], threshold: f64, at_least: bool) -> Self {
        let [lo, hi] = interval;
        if !(lo.is_finite() && hi.is_finite()) {
            return Verdict3::Inconclusive;
        }
        match (at_least, lo >= threshold, hi < threshold) {
            (true, true, _) | (false, _, true) => Verdict3::Holds,
            (true, _, true) | (false, true, _) => Verdict3::Fails,
            _ => Verdict3::Inconclusive,
        }
    }

    /// Combines the verdicts of sub-claims that must all hold.
    pub fn all(parts: &[Verdict3]) -> Self {
        if parts.contains(&Verdict3::Fails) {
            Verdict3::Fails
        } else if parts.iter().all(|v| *v == Verdict3::Holds) {
            Verdict3::Holds
        } else {
            Verdict3::Inconclusive
        }
    }
}

/// Wilson score interval (95 %) of `k` successes in `n` independent trials.
pub fn wilson(k: usize, n: usize) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let (z, n, p) = (1.959_964, n as f64, k as f64 / n as f64);
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    [(centre - half).max(0.0), (centre + half).min(1.0)]
}

/// Exact two-sided McNemar p-value from the discordant pairs (`b`: only the first run right,
/// `c`: only the second): binomial(b + c, ½), doubled tail, capped at 1.
pub fn mcnemar(b: usize, c: usize) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    // log C(n, i) summed stably.
    let mut tail = 0.0f64;
    let mut log_c = 0.0f64; // log C(n, 0)
    for i in 0..=k {
        if i > 0 {
            log_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (log_c - n as f64 * std::f64::consts::LN_2).exp();
    }
    (2.0 * tail).min(1.0)
}

/// Per cluster, the sum over its items and over the seeds of (second − first): the input of
/// the cluster sign-flip test ([`exact::sign_flip`]). Seed k of `second` is paired with seed
/// k of `first` (or its only seed).
pub fn cluster_totals(groups: &Groups, first: &Arm, second: &Arm) -> Vec<f64> {
    let mut totals = vec![0.0; groups.len()];
    for (k, b) in second.seeds.iter().enumerate() {
        let Some(a) = first.seeds.get(k % first.seeds.len().max(1)) else {
            continue;
        };
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            if let Some(g) = groups.group_of(i) {
                totals[g] += y - x;
            }
        }
    }
    totals
}

/// Mean and sample standard deviation (0 for one value).
pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let m = v.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (m, 0.0);
    }
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
    (m, var.sqrt())
}

/// Items a paired test needs to detect a difference of `delta` (a fraction, e.g. 0.02) at
/// two-sided α = 0.05 with 80 % power, when a fraction `discordant` of items differ between
/// the two runs (McNemar's normal approximation; independent items).
pub fn items_needed(delta: f64, discordant: f64) -> usize {
    let (za, zb) = (1.959_964, 0.841_621);
    let d = discordant.max(delta);
    let n = (za * d.sqrt() + zb * (d - delta * delta).max(0.0).sqrt()).powi(2) / (delta * delta);
    n.ceil() as usize
}

/// The smallest difference (a fraction) a paired test on `n` items detects at α = 0.05 with
/// 80 % power when a fraction `discordant` of them differ (inverse of [`items_needed`]).
pub fn detectable_difference(n: usize, discordant: f64) -> f64 {
    let (mut lo, mut hi) = (1e-4, 1.0);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if items_needed(mid, discordant) <= n {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;
    use hif8lab_train::rng::Rng;
    #[test]
    fn wilson_matches_published_values() {
        // Wilson (1927) / Newcombe (1998) example: 81 of 263 → 0.2553 – 0.3662.
        let [lo, hi] = wilson(81, 263);
        assert!(
            (lo - 0.2553).abs() < 5e-4 && (hi - 0.3662).abs() < 5e-4,
            "{lo} {hi}"
        );
        assert_eq!(wilson(0, 0), [0.0, 1.0]);
        let [lo, hi] = wilson(10, 10);
        assert!(
            (hi - 1.0).abs() < 1e-12 && (lo - 0.7225).abs() < 5e-4,
            "{lo} {hi}"
        );
    }

    #[test]
    fn mcnemar_exact_values() {
        // binomial(10, ½): P(X ≤ 1) = 11/1024, doubled.
        assert!((mcnemar(1, 9) - 22.0 / 1024.0).abs() < 1e-12);
        assert_eq!(mcnemar(5, 5), 1.0);
        assert_eq!(mcnemar(0, 0), 1.0);
        assert!(mcnemar(0, 30) < 1e-8);
    }

    #[test]
    fn verdicts_follow_the_interval() {
        assert_eq!(Verdict3::judge([0.12, 0.3], 0.1, true), Verdict3::Holds);
        assert_eq!(Verdict3::judge([0.02, 0.08], 0.1, true), Verdict3::Fails);
        assert_eq!(
            Verdict3::judge([0.05, 0.2], 0.1, true),
            Verdict3::Inconclusive
        );
        assert_eq!(Verdict3::judge([0.0, 0.01], 0.02, false), Verdict3::Holds);
        assert_eq!(Verdict3::judge([0.03, 0.05], 0.02, false), Verdict3::Fails);
        assert_eq!(
            Verdict3::judge([f64::NAN, 1.0], 0.0, true),
            Verdict3::Inconclusive
        );
        use Verdict3::*;
        assert_eq!(Verdict3::all(&[Holds, Inconclusive]), Inconclusive);
        assert_eq!(Verdict3::all(&[Holds, Fails, Inconclusive]), Fails);
        assert_eq!(Verdict3::all(&[Holds, Holds]), Holds);
    }

    #[test]
    fn power_calculation_inverts() {
        // 2 points with 5 % of items discordant: about 970 items.
        let n = items_needed(0.02, 0.05);
        assert!((900..1100).contains(&n), "{n}");
        let d = detectable_difference(n, 0.05);
        assert!((d - 0.02).abs() < 1e-3, "{d}");
        assert!(detectable_difference(100, 0.05) > 0.05);
    }

    #[test]
    fn mean_and_spread() {
        assert_eq!(mean_sd(&[2.0]), (2.0, 0.0));
        let (m, s) = mean_sd(&[1.0, 2.0, 3.0]);
        assert!((m - 2.0).abs() < 1e-12 && (s - 1.0).abs() < 1e-12);
    }

    #[test]
    fn correlated_groups_widen_the_interval() {
        // The same 50 % score from independent items vs from all-or-nothing groups of 8:
        // the cluster bootstrap must see the second as far less certain.
        let n = 400;
        let mut rng = Rng::new(11);
        let indep: Vec<bool> = (0..n).map(|_| rng.below(2) == 0).collect();
        let clustered: Vec<bool> = (0..n).map(|i| (i / 8) % 2 == 0).collect();
        let g = Groups::consecutive(n, 8);
        let w = |m: &[bool]| {
            let e = bootstrap(&g, &[Arm::marks(&[m.to_vec()])], &|v| v[0]);
            e.interval[1] - e.interval[0]
        };
        assert!(
            w(&clustered) > 2.0 * w(&indep),
            "{} {}",
            w(&clustered),
            w(&indep)
        );
        // Independent items: close to Wilson's width.
        let [lo, hi] = wilson(n / 2, n);
        assert!(
            (w(&indep) - (hi - lo)).abs() < 0.03,
            "{} {}",
            w(&indep),
            hi - lo
        );
    }

    #[test]
    fn the_design_effect_widens_the_exact_interval_only_for_clustered_pairs() {
        use exact::{design_effect, paired_exact, paired_exact_clustered};
        // Three discordant pairs in three clusters: independent, the interval unchanged.
        assert_eq!(design_effect(&[-1.0, -1.0, 1.0], 3), 1.0);
        assert_eq!(
            paired_exact_clustered(2, 1, 594, 1.0, 0.1),
            paired_exact(2, 1, 594, 0.1)
        );
        // The same three pairs, two of them one item's in two orders: Σ(b−c)² = 4 + 1 over 3.
        let d = design_effect(&[-2.0, -1.0], 3);
        assert!((d - 5.0 / 3.0).abs() < 1e-12, "{d}");
        let [lo, hi] = paired_exact(3, 0, 594, 0.1);
        let [lc, hc] = paired_exact_clustered(3, 0, 594, d, 0.1);
        assert!(lc < lo && hc > hi, "[{lo}, {hi}] vs [{lc}, {hc}]");
        // Pairs of one cluster that disagree in direction never narrow it (floored at 1).
        assert_eq!(design_effect(&[0.0, 1.0], 3), 1.0);
        assert_eq!(
            paired_exact_clustered(2, 1, 300, 0.5, 0.1),
            paired_exact(2, 1, 300, 0.1)
        );
        // Non-whole effective counts stay between the whole ones around them.
        let [a, _] = exact::clopper_pearson(1, 100, 0.05);
        let [b, _] = exact::clopper_pearson_real(1.5, 100.0, 0.05);
        let [c, _] = exact::clopper_pearson(2, 100, 0.05);
        assert!(a < b && b < c, "{a} {b} {c}");
    }
}
