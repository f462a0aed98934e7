//! Claims and how they are judged, for the grid's report and the lessons alike (one type,
//! one wording).
//!
//! A claim is posed before the data as one or more **parts**: a statistic in the claim's own
//! units, a side (at least / below / within a margin) and one threshold that decides both
//! outcomes. Each part carries what its uncertainty is made of ([`Spread`]): bootstrap draws
//! (clusters of items, seeds), per-seed values (a t interval across seeds), an exact paired
//! interval (few discordant 0/1 items), or nothing (one run's exact count: no interval).
//!
//! A claim **holds** when every part's interval lies on the claim's side of its threshold,
//! **fails** when a part's interval lies wholly on the other side, and is **inconclusive**
//! otherwise. "At least" and "below" parts are judged on two-sided intervals at 1 − α
//! (α = 0.05: 95 %); "within" parts (equivalence) by two one-sided tests, i.e. on the 1 − 2α
//! interval (90 %). Over the claims of one report, Holm's step-down procedure sets each
//! claim's α: the claim with the smallest p-value is judged at 0.05 / m, the next at
//! 0.05 / (m − 1), …, and the interval shown is the one at the claim's own α, so that every
//! verdict follows from its own interval and threshold.

use serde::Serialize;

use crate::stats::Verdict3;
#[cfg(doc)]
use crate::stats::exact::{design_effect, paired_exact};
use crate::stats::exact::{normal_quantile, paired_exact_clustered, t_interval};

/// The family-wise error rate of a report's verdicts.
pub const ALPHA: f64 = 0.05;

/// The test of claims on exact quantities of one run (counts, APE): no sampling error
/// within the run, and one run gives no interval across seeds.
pub const EXACT: &str = "exact value of this run (counts and losses carry no sampling error within a run; one run: no interval across seeds)";

/// Which side of the threshold the claim takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// statistic ≥ threshold.
    AtLeast,
    /// statistic > threshold, strictly: a one-sided claim of an effect (a zero-width
    /// interval at the threshold is no effect).
    Above,
    /// statistic < threshold.
    Below,
    /// −threshold < statistic < threshold (equivalence, TOST).
    Within,
}

/// What a statistic's uncertainty is made of.
#[derive(Clone, Debug, PartialEq)]
pub enum Spread {
    /// Bootstrap draws of the statistic, finite and sorted ascending ([`Spread::draws`]).
    Draws(Vec<f64>),
    /// One value per independent replicate (seed): a t interval across them.
    Seeds(Vec<f64>),
    /// A paired difference of two proportions on `n` items (pooled over seeds) with `b`
    /// items right only in the first arm and `c` only in the second, as the statistic
    /// `offset + scale · (c − b) / n`: the exact interval of [`paired_exact_clustered`] (of
    /// [`paired_exact`] when `deff` is 1: the items independent).
    PairedExact {
        /// Right only in the first arm.
        b: usize,
        /// Right only in the second arm.
        c: usize,
        /// Items (× seeds).
        n: usize,
        /// Units per unit of difference.
        scale: f64,
        /// The design effect of the pairs' clusters ([`design_effect`]): 1 when every
        /// cluster holds at most one discordant pair.
        deff: f64,
    },
    /// A difference of two proportions on independent samples (two runs' accuracies
    /// without per-document logs), `k_first` of `n_first` and `k_second` of `n_second`
    /// right, as the statistic `scale · (p_first − p_second)`: Newcombe's hybrid score
    /// interval (method 10, Wilson intervals at the same level).
    Unpaired {
        /// Right in the first run.
        k_first: usize,
        /// Items of the first run.
        n_first: usize,
        /// Right in the second run.
        k_second: usize,
        /// Items of the second run.
        n_second: usize,
        /// Units per unit of difference.
        scale: f64,
    },
    /// An approximately normal statistic with this standard error (an average over
    /// independent tasks of statistics with their own intervals).
    Normal {
        /// Standard error, in the statistic's units.
        se: f64,
    },
    /// An exact quantity of one run: no interval.
    None,
}

impl Spread {
    /// Bootstrap draws as a spread: the finite ones, sorted once (every interval and p-value
    /// of the part reads them).
    pub fn draws(mut draws: Vec<f64>) -> Self {
        draws.retain(|v| v.is_finite());
        draws.sort_by(f64::total_cmp);
        Spread::Draws(draws)
    }
}

/// One statistic of a claim, judged against its threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    /// What is measured, in words ("relative knowledge drop of A vs B").
    pub measured: String,
    /// Its unit as printed after the number (`%`, `×`, ` points`, ` nats`).
    pub unit: String,
    /// The statistic on the data as observed.
    pub value: f64,
    /// Its uncertainty.
    pub spread: Spread,
    /// The claim's side.
    pub side: Side,
    /// The threshold (for `Within`, the margin).
    pub threshold: f64,
    /// The test behind the interval.
    pub test: String,
    /// The sources of variation the interval covers.
    pub variation: String,
}

impl Part {
    /// A part on an exact quantity of one run: judged as that run's value, no interval.
    pub fn exact(measured: &str, unit: &str, value: f64, side: Side, threshold: f64) -> Self {
        Part {
            measured: measured.into(),
            unit: unit.into(),
            value,
            spread: Spread::None,
            side,
            threshold,
            test: EXACT.into(),
            variation: "one run".into(),
        }
    }

    /// Two-sided interval at `confidence`.
    pub fn interval(&self, confidence: f64) -> [f64; 2] {
        let alpha = 1.0 - confidence;
        match &self.spread {
            Spread::Draws(d) if d.is_empty() => [f64::NEG_INFINITY, f64::INFINITY],
            Spread::Draws(d) => [quantile(d, alpha / 2.0), quantile(d, 1.0 - alpha / 2.0)],
            Spread::Seeds(v) => t_interval(v, alpha),
            Spread::PairedExact {
                b,
                c,
                n,
                scale,
                deff,
            } => {
                let [lo, hi] = paired_exact_clustered(*b, *c, *n, *deff, alpha);
                let (x, y) = (scale * lo, scale * hi);
                [x.min(y), x.max(y)]
            }
            Spread::Unpaired {
                k_first,
                n_first,
                k_second,
                n_second,
                scale,
            } => {
                let [lo, hi] = newcombe(*k_first, *n_first, *k_second, *n_second, alpha);
                let (x, y) = (scale * lo, scale * hi);
                [x.min(y), x.max(y)]
            }
            Spread::Normal { se } => {
                let half = normal_quantile(1.0 - alpha / 2.0) * se;
                [self.value - half, self.value + half]
            }
            Spread::None => [self.value, self.value],
        }
    }

    /// The interval the part is judged on at level `alpha`: two-sided 1 − α for a one-sided
    /// claim, 1 − 2α for an equivalence (TOST).
    pub fn judged_interval(&self, alpha: f64) -> ([f64; 2], f64) {
        let confidence = match self.side {
            Side::Within => 1.0 - 2.0 * alpha,
            _ => 1.0 - alpha,
        };
        (self.interval(confidence), confidence)
    }

    /// The part's verdict at level `alpha`.
    pub fn verdict(&self, alpha: f64) -> Verdict3 {
        if matches!(self.spread, Spread::None) {
            return self.exact_verdict();
        }
        let ([lo, hi], _) = self.judged_interval(alpha);
        if lo.is_nan() || hi.is_nan() {
            return Verdict3::Inconclusive;
        }
        let t = self.threshold;
        let (holds, fails) = match self.side {
            Side::AtLeast => (lo >= t, hi < t),
            Side::Above => (lo > t, hi <= t),
            Side::Below => (hi < t, lo >= t),
            Side::Within => (lo > -t && hi < t, lo >= t || hi <= -t),
        };
        if holds {
            Verdict3::Holds
        } else if fails {
            Verdict3::Fails
        } else {
            Verdict3::Inconclusive
        }
    }

    /// The verdict on an exact quantity of one run.
    fn exact_verdict(&self) -> Verdict3 {
        let (v, t) = (self.value, self.threshold);
        let holds = match self.side {
            Side::AtLeast => v >= t,
            Side::Above => v > t,
            Side::Below => v < t,
            Side::Within => v.abs() < t,
        };
        if v.is_nan() {
            Verdict3::Inconclusive
        } else if holds {
            Verdict3::Holds
        } else {
            Verdict3::Fails
        }
    }

    /// The smallest α at which the part is decided (holds or fails), i.e. its p-value
    /// against the threshold (1 when it is not decided at α = 0.5). Exact quantities of one
    /// run have none.
    pub fn p_value(&self) -> Option<f64> {
        if matches!(self.spread, Spread::None) {
            return None;
        }
        let decided = |a: f64| self.verdict(a) != Verdict3::Inconclusive;
        let floor = match &self.spread {
            Spread::Draws(d) => 1.0 / (d.len() + 1) as f64,
            _ => 1e-9,
        };
        if decided(floor) {
            return Some(floor);
        }
        let top = match self.side {
            Side::Within => 0.5,
            _ => 1.0,
        };
        if !decided(top * 0.999) {
            return Some(1.0);
        }
        let (mut lo, mut hi) = (floor.ln(), (top * 0.999).ln());
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if decided(mid.exp()) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(hi.exp())
    }

    /// Whether the part is decided even at the smallest α its spread can show (its p-value
    /// is then a bound).
    pub fn p_at_floor(&self) -> bool {
        match &self.spread {
            Spread::Draws(d) => {
                let floor = 1.0 / (d.len() + 1) as f64;
                self.p_value().is_some_and(|p| p <= floor)
            }
            _ => false,
        }
    }

    /// The smallest distance from the threshold this part could detect with 80 % power at
    /// level `alpha` (normal approximation from the interval's width), in its units.
    pub fn detectable(&self, alpha: f64) -> Option<f64> {
        if matches!(self.spread, Spread::None) {
            return None;
        }
        let [lo, hi] = self.interval(0.95);
        let se = (hi - lo) / (2.0 * normal_quantile(0.975));
        let z = match self.side {
            Side::Within => normal_quantile(1.0 - alpha),
            _ => normal_quantile(1.0 - alpha / 2.0),
        };
        let d = (z + normal_quantile(0.8)) * se;
        d.is_finite().then_some(d)
    }
}

/// Wilson score interval at confidence 1 − `alpha` of `k` successes in `n` trials.
pub fn wilson_at(k: usize, n: usize, alpha: f64) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let (z, n, p) = (
        normal_quantile(1.0 - alpha / 2.0),
        n as f64,
        k as f64 / n as f64,
    );
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    [(centre - half).max(0.0), (centre + half).min(1.0)]
}

/// Newcombe's (1998) hybrid score interval (method 10) at confidence 1 − `alpha` of the
/// difference p₁ − p₂ of two independent proportions.
pub fn newcombe(k1: usize, n1: usize, k2: usize, n2: usize, alpha: f64) -> [f64; 2] {
    let p = |k: usize, n: usize| if n == 0 { 0.5 } else { k as f64 / n as f64 };
    let (p1, p2) = (p(k1, n1), p(k2, n2));
    let ([l1, u1], [l2, u2]) = (wilson_at(k1, n1, alpha), wilson_at(k2, n2, alpha));
    let d = p1 - p2;
    [
        d - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt(),
        d + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt(),
    ]
}

/// The `q`-quantile of sorted values (linear interpolation).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (i, f) = (pos.floor() as usize, pos.fract());
    if i + 1 < sorted.len() {
        sorted[i] * (1.0 - f) + sorted[i + 1] * f
    } else {
        sorted[i]
    }
}

/// A claim, judged: what the CLI, the app, the browser and the reports show.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Claim {
    /// The claim.
    pub claim: String,
    /// Whether the data show it holds (`verdict == holds`).
    pub holds: bool,
    /// holds / fails / inconclusive.
    pub verdict: Verdict3,
    /// What the deciding statistic measures.
    pub measured: String,
    /// The deciding statistic, in `unit`.
    pub statistic: f64,
    /// Its unit.
    pub unit: String,
    /// The interval it was judged on (at `confidence`).
    pub interval: [f64; 2],
    /// The interval's confidence (Holm-adjusted where a report judges several claims); none
    /// for an exact quantity of one run (no interval).
    pub confidence: Option<f64>,
    /// p-value against the threshold (Holm-adjusted over the report's claims; one-sided
    /// for an equivalence, two-sided otherwise); absent for an exact quantity of one run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// Whether `p_value` is a bound: the data decide the claim even at the smallest α the
    /// resampling can show (p ≤ 1 / (resamples + 1), times Holm's factor).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub p_is_bound: bool,
    /// The threshold, in words, with the side it is on.
    pub threshold: String,
    /// The test behind the interval and its sidedness.
    pub test: String,
    /// The sources of variation the interval covers.
    pub variation: String,
    /// The smallest distance from the threshold the deciding statistic could detect (80 %
    /// power at the claim's α), in `unit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detectable: Option<f64>,
    /// The other parts of the claim, each in the same words.
    pub parts: Vec<String>,
    /// The numbers behind it (text for the grid, an object for a lesson).
    pub evidence: serde_json::Value,
    /// The parts, kept for re-judging at another α.
    #[serde(skip)]
    spec: Vec<Part>,
    /// The level the claim was judged at (its share of the family's α under Holm's rule),
    /// and whether its deciding part is an equivalence: why its interval has its confidence.
    #[serde(skip)]
    level: (f64, bool),
}

impl Claim {
    /// A claim of `parts` that must all hold, judged alone (α = 0.05).
    pub fn new(claim: &str, parts: Vec<Part>, evidence: serde_json::Value) -> Self {
        let mut c = Claim {
            claim: claim.into(),
            holds: false,
            verdict: Verdict3::Inconclusive,
            measured: String::new(),
            statistic: f64::NAN,
            unit: String::new(),
            interval: [f64::NAN; 2],
            confidence: Some(1.0 - ALPHA),
            p_value: None,
            p_is_bound: false,
            threshold: String::new(),
            test: String::new(),
            variation: String::new(),
            detectable: None,
            parts: Vec::new(),
            evidence,
            spec: parts,
            level: (ALPHA, false),
        };
        c.judge_at(ALPHA, c.raw_p());
        c
    }

    /// The claim's p-value before adjustment: for a claim that the data put on the holding
    /// side, the largest of its parts' (all must hold); otherwise the smallest failing
    /// part's, times the number of parts (Bonferroni within the claim).
    fn raw_p(&self) -> Option<f64> {
        // Exact parts of one run have no p-value: their verdict is fixed, and they take no
        // part in the adjustment.
        let tested: Vec<(&Part, f64)> = self
            .spec
            .iter()
            .filter_map(|p| p.p_value().map(|q| (p, q)))
            .collect();
        if tested.is_empty() {
            return None;
        }
        let leaning_fail: Vec<f64> = tested
            .iter()
            .filter(|(p, _)| p.exact_verdict() == Verdict3::Fails)
            .map(|(_, q)| *q)
            .collect();
        Some(if leaning_fail.is_empty() {
            tested.iter().map(|(_, q)| *q).fold(0.0, f64::max)
        } else {
            (leaning_fail.iter().copied().fold(1.0, f64::min) * tested.len() as f64).min(1.0)
        })
    }

    /// Judges at level `alpha` (failing parts at α / parts), showing the deciding part.
    fn judge_at(&mut self, alpha: f64, p: Option<f64>) {
        let k = self.spec.len().max(1) as f64;
        let verdicts: Vec<Verdict3> = self
            .spec
            .iter()
            .map(|part| match part.verdict(alpha) {
                Verdict3::Fails if part.verdict(alpha / k) == Verdict3::Fails => Verdict3::Fails,
                Verdict3::Fails => Verdict3::Inconclusive,
                v => v,
            })
            .collect();
        // A claim with no part has no data behind it: not judged, never a verdict.
        self.verdict = if verdicts.is_empty() {
            Verdict3::NotJudged
        } else {
            Verdict3::all(&verdicts)
        };
        self.holds = self.verdict == Verdict3::Holds;
        self.p_value = p;
        self.p_is_bound = false;
        // The deciding part: a failing one, else the weakest (largest p).
        let decisive = verdicts
            .iter()
            .position(|v| *v == Verdict3::Fails)
            .or_else(|| {
                // The weakest part (largest p); the first of equals.
                (0..self.spec.len()).rev().max_by(|a, b| {
                    let p = |i: usize| self.spec[i].p_value().unwrap_or(0.0);
                    p(*a).total_cmp(&p(*b))
                })
            });
        let Some(d) = decisive else {
            return;
        };
        let part = &self.spec[d];
        self.level = (alpha, part.side == Side::Within);
        // The claim's p-value comes from its deciding part: a bound when that part's is.
        self.p_is_bound = part.p_at_floor();
        let (interval, confidence) = part.judged_interval(alpha);
        self.measured = part.measured.clone();
        self.statistic = part.value;
        self.unit = part.unit.clone();
        self.interval = interval;
        self.confidence = (!matches!(part.spread, Spread::None)).then_some(confidence);
        self.threshold = threshold_words(part);
        self.test = part.test.clone();
        self.variation = part.variation.clone();
        self.detectable = part.detectable(alpha);
        self.parts = self
            .spec
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != d)
            .map(|(_, p)| part_sentence(p, alpha, p.verdict(alpha)))
            .collect();
    }

    /// The p-value in words, as a bound where the resampling cannot resolve it further.
    pub fn p_text(&self, p: f64) -> String {
        if self.p_is_bound && p < 1.0 {
            format!(
                "p ≤ {}",
                p_words(p)
                    .trim_start_matches("p = ")
                    .trim_start_matches("p < ")
            )
        } else {
            p_words(p)
        }
    }

    /// The claim's result in words: the same text in the CLI, the app and the reports.
    pub fn sentence(&self) -> String {
        let mut s = format!("{}: {}", self.verdict.as_str(), self.claim);
        s.push_str(". Measured: ");
        s.push_str(&self.measured_words());
        for p in &self.parts {
            s.push_str("; ");
            s.push_str(p);
        }
        s.push('.');
        s
    }

    /// The claim at a glance: the deciding statistic in its unit, its interval, the
    /// threshold (what [`Claim::method_words`] leaves out: how it was tested).
    pub fn glance(&self) -> String {
        let mut s = self.statistic_words();
        match self.interval_words() {
            Some(interval) => s.push_str(&format!(" [{interval}; {}]", self.level_words())),
            None => s.push_str(" (one run, exact)"),
        }
        s.push_str(&format!("; threshold {}", self.threshold));
        s
    }

    /// How the claim was tested: the test, what varies, the p-value and the smallest
    /// distance from the threshold the design detects.
    pub fn method_words(&self) -> String {
        let mut s = format!("test: {}", self.test);
        if self.confidence.is_some() {
            s.push_str(&format!("; over {}", self.variation));
        }
        s.push_str(&self.power_words());
        s
    }

    /// The deciding statistic with its interval, threshold, test and power, in words.
    pub fn measured_words(&self) -> String {
        let mut s = self.statistic_words();
        match self.interval_words() {
            Some(interval) => s.push_str(&format!(", {interval} ({})", self.variation)),
            None => s.push_str(" (one run, exact: no interval)"),
        }
        s.push_str(&format!("; threshold: {}", self.threshold));
        s.push_str(&self.power_words());
        s.push_str(&format!("; test: {}", self.test));
        s
    }

    /// Why the claim's interval has its confidence, so that a 90 % or 97.5 % interval beside
    /// the 95 % ones of the same quantity elsewhere reads as chosen: "95 %: the 5 % of one
    /// claim", "97.5 %: Holm's share of 5 % with 2 claims open", "90 %: an equivalence, two
    /// one-sided tests at 5 %".
    pub fn level_words(&self) -> String {
        let (alpha, equivalence) = self.level;
        let open = (ALPHA / alpha).round() as usize;
        let share = if open <= 1 {
            format!("at α = {}", trim(alpha))
        } else {
            format!(
                "at α = {}, Holm's share of {} with {open} claims still open",
                trim(alpha),
                trim(ALPHA)
            )
        };
        if equivalence {
            format!("an equivalence: two one-sided tests {share}")
        } else {
            format!("two-sided {share}")
        }
    }

    /// What is measured and its value in its unit.
    fn statistic_words(&self) -> String {
        format!("{} {}", self.measured, number(self.statistic, &self.unit))
    }

    /// "95 % interval lo to hi", when the claim has an interval.
    fn interval_words(&self) -> Option<String> {
        self.confidence.map(|confidence| {
            format!(
                "{} interval {} to {}",
                percent(confidence),
                number(self.interval[0], &self.unit),
                number(self.interval[1], &self.unit),
            )
        })
    }

    /// "; p = …; smallest detectable distance …", each where the claim has it.
    fn power_words(&self) -> String {
        let mut s = String::new();
        if let Some(p) = self.p_value {
            s.push_str(&format!("; {}", self.p_text(p)));
        }
        if let Some(d) = self.detectable {
            s.push_str(&format!(
                "; smallest detectable distance from the threshold {}",
                number(d, &self.unit)
            ));
        }
        s
    }
}

/// The verdicts of a set of claims counted by outcome, every outcome that occurs named:
/// "2 hold, 1 inconclusive, 1 fails (of 4 claims)". `words` gives the outcome words
/// ([`Verdict3::as_str`] for lessons, [`Verdict3::report_word`] for the grid's report).
pub fn headline(claims: &[Claim], words: fn(Verdict3) -> &'static str) -> String {
    let order = [
        Verdict3::Holds,
        Verdict3::Inconclusive,
        Verdict3::Fails,
        Verdict3::NotTested,
        Verdict3::NotJudged,
    ];
    let parts: Vec<String> = order
        .iter()
        .filter_map(|v| {
            let n = claims.iter().filter(|c| c.verdict == *v).count();
            (n > 0).then(|| {
                let word = words(*v);
                // "holds"/"fails" are singular verbs: "2 hold", "1 fails".
                let word = match word {
                    "holds" if n > 1 => "hold",
                    "fails" if n > 1 => "fail",
                    w => w,
                };
                format!("{n} {word}")
            })
        })
        .collect();
    format!(
        "{} (of {} claim{})",
        if parts.is_empty() {
            "none judged".to_string()
        } else {
            parts.join(", ")
        },
        claims.len(),
        if claims.len() == 1 { "" } else { "s" }
    )
}

/// Judges the claims of one report together: Holm's step-down over their p-values sets
/// each claim's α (see the module docs); claims without a p-value (exact quantities of one
/// run) keep α = 0.05.
pub fn judge_family(claims: &mut [Claim]) {
    let raw: Vec<Option<f64>> = claims.iter().map(Claim::raw_p).collect();
    let tested: Vec<usize> = (0..claims.len()).filter(|i| raw[*i].is_some()).collect();
    let m = tested.len();
    let mut order = tested.clone();
    order.sort_by(|a, b| raw[*a].unwrap_or(1.0).total_cmp(&raw[*b].unwrap_or(1.0)));
    let adjusted = crate::stats::exact::holm(
        &tested
            .iter()
            .map(|i| raw[*i].unwrap_or(1.0))
            .collect::<Vec<_>>(),
    );
    let mut stopped = false;
    for (rank, &i) in order.iter().enumerate() {
        let alpha = ALPHA / (m - rank) as f64;
        let adj = tested.iter().position(|t| *t == i).map(|k| adjusted[k]);
        claims[i].judge_at(alpha, adj);
        if stopped {
            // Holm stops at the first claim it cannot decide: the rest stay undecided.
            claims[i].verdict = Verdict3::Inconclusive;
            claims[i].holds = false;
        }
        stopped |= raw[i].unwrap_or(1.0) > alpha;
    }
}

/// A level without trailing zeros: 0.05, 0.025, 0.0125.
fn trim(alpha: f64) -> String {
    let s = format!("{alpha:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

mod words;
pub use words::{number, p_words};
use words::{part_sentence, percent, threshold_words};

#[cfg(test)]
mod tests;
