//! Scale estimators: pure functions from the amax history of earlier calls to the amax
//! the next scale should be computed from (SPEC.md §3).
//!
//! Each estimator is a small type implementing [`Estimator`]; [`EstimatorSpec`] names one
//! with its parameters, parses from and prints to the config spelling (`max_window(64)`,
//! `ema(0.1)`, …) and delegates to the types. Cold start, the scale rule and fallbacks live
//! in [`crate::state`], not here.
//!
//! All arithmetic is f32 in a fixed order (oldest entry first) so the GPU `scale_update`
//! kernel can reproduce every estimate bit for bit. Non-finite entries propagate (a NaN or
//! Inf in the window makes the estimate non-finite), so a poisoned history is visible and the
//! scale rule falls back to the previous scale.

use std::fmt;
use std::str::FromStr;

/// An estimator: the amax expected at the next call, from earlier calls' amax values.
pub trait Estimator {
    /// Canonical name with parameters, e.g. `max_window(64)`.
    fn name(&self) -> String;
    /// The estimate. `history` holds earlier calls' amax, oldest first, newest last, and is
    /// never empty (the caller handles cold start); `current` is this call's own amax, used
    /// only by current-tensor scaling.
    fn estimate(&self, history: &[f32], current: f32) -> f32;
    /// How many history entries this estimator reads (0 for current-tensor scaling).
    fn history_needed(&self) -> usize;
}

/// NaN-propagating maximum: NaN wins, then the larger value.
pub fn max_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || a > b { a } else { b }
}

/// `v` pulled into `[lo, hi]` (NaN passes through). A mean or a convex combination of f32
/// values can round just outside the range of its inputs (a window of identical amax
/// values can average to one ulp below them); estimators clamp so that a flat signal is
/// never "above its own estimate". The WGSL twin `clamp_between` in `scale_update.wgsl`
/// compares the same way.
pub fn clamp_between(v: f32, lo: f32, hi: f32) -> f32 {
    if v < lo {
        lo
    } else if v > hi {
        hi
    } else {
        v
    }
}

fn last_n(history: &[f32], n: usize) -> &[f32] {
    &history[history.len().saturating_sub(n.max(1))..]
}

/// The previous call's amax (Transformer Engine's `most_recent`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MostRecent;

impl Estimator for MostRecent {
    fn name(&self) -> String {
        "most_recent".into()
    }
    fn estimate(&self, history: &[f32], _current: f32) -> f32 {
        history[history.len() - 1]
    }
    fn history_needed(&self) -> usize {
        1
    }
}

/// Max over the last `n` calls (Transformer Engine's `max`; the paper's fix with n = 64).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaxWindow {
    /// Window length in calls.
    pub n: usize,
}

impl Estimator for MaxWindow {
    fn name(&self) -> String {
        format!("max_window({})", self.n)
    }
    fn estimate(&self, history: &[f32], _current: f32) -> f32 {
        last_n(history, self.n)
            .iter()
            .fold(f32::NEG_INFINITY, |m, a| max_nan(*a, m))
    }
    fn history_needed(&self) -> usize {
        self.n
    }
}

/// Mean over the last `n` calls (summed oldest first in f32, then divided, then clamped to
/// the window's [min, max] so rounding never leaves the range of the values averaged).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeanWindow {
    /// Window length in calls.
    pub n: usize,
}

impl Estimator for MeanWindow {
    fn name(&self) -> String {
        format!("mean_window({})", self.n)
    }
    fn estimate(&self, history: &[f32], _current: f32) -> f32 {
        let w = last_n(history, self.n);
        let sum = w.iter().fold(0.0f32, |s, a| s + a);
        let (lo, hi) = w[1..].iter().fold((w[0], w[0]), |(lo, hi), a| {
            (if *a < lo { *a } else { lo }, if *a > hi { *a } else { hi })
        });
        clamp_between(sum / w.len() as f32, lo, hi)
    }
    fn history_needed(&self) -> usize {
        self.n
    }
}

/// Exponential smoothing `e ← alpha·amax + (1 − alpha)·e`, seeded with the oldest entry of
/// the stored history and folded over it (so it is a pure function of the history; entries
/// older than the history length weigh less than (1 − alpha)^len). Each update is clamped
/// between its two inputs (a convex combination never leaves them; f32 rounding could).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ema {
    /// Weight of the newest amax, in (0, 1].
    pub alpha: f32,
}

impl Estimator for Ema {
    fn name(&self) -> String {
        format!("ema({})", self.alpha)
    }
    fn estimate(&self, history: &[f32], _current: f32) -> f32 {
        let keep = 1.0 - self.alpha;
        history[1..].iter().fold(history[0], |e, a| {
            let (lo, hi) = if *a < e { (*a, e) } else { (e, *a) };
            clamp_between(self.alpha * a + keep * e, lo, hi)
        })
    }
    fn history_needed(&self) -> usize {
        usize::MAX
    }
}

/// Damped-trend Holt smoothing: level `l`, trend `b`, damping `phi`; the estimate is the
/// one-step forecast `l + phi·b`. Seeded with `l = h[0]`, `b = 0`. The level update (a convex
/// combination of the amax and the previous forecast) is clamped between those two, so a
/// flat history forecasts exactly its value; the trend may still carry the forecast beyond
/// the history, as Holt's method intends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Holt {
    /// Level smoothing weight.
    pub alpha: f32,
    /// Trend smoothing weight.
    pub beta: f32,
    /// Trend damping in [0, 1].
    pub damping: f32,
}

impl Estimator for Holt {
    fn name(&self) -> String {
        format!("holt({},{},{})", self.alpha, self.beta, self.damping)
    }
    fn estimate(&self, history: &[f32], _current: f32) -> f32 {
        let (alpha, beta, phi) = (self.alpha, self.beta, self.damping);
        let mut level = history[0];
        let mut trend = 0.0f32;
        for a in &history[1..] {
            let previous = level;
            let forecast = level + phi * trend;
            let (lo, hi) = if *a < forecast {
                (*a, forecast)
            } else {
                (forecast, *a)
            };
            level = clamp_between(alpha * a + (1.0 - alpha) * forecast, lo, hi);
            trend = beta * (level - previous) + (1.0 - beta) * phi * trend;
        }
        level + phi * trend
    }
    fn history_needed(&self) -> usize {
        usize::MAX
    }
}

/// Current-tensor scaling (CTS): this call's own amax; no delay, but it needs the amax
/// before quantizing (an extra reduction pass).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Current;

impl Estimator for Current {
    fn name(&self) -> String {
        "current".into()
    }
    fn estimate(&self, _history: &[f32], current: f32) -> f32 {
        current
    }
    fn history_needed(&self) -> usize {
        0
    }
}

/// An estimator with its parameters, as written in configs and on the command line.
///
/// Windowed estimators may omit `n` (`max_window`): [`crate::ScalingConfig::plan`] then fills
/// in the configured `window` (a [`crate::plan::ResolvedEstimator`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EstimatorSpec {
    /// `most_recent` (alias `most-recent`, TE's `most_recent`).
    MostRecent,
    /// `max_window(n)` (aliases `max`, TE's `max`).
    MaxWindow(Option<usize>),
    /// `mean_window(n)` (alias `mean`).
    MeanWindow(Option<usize>),
    /// `ema(alpha)`; `ema` alone means alpha 0.1.
    Ema(f32),
    /// `holt(alpha,beta,damping)`; `holt` alone means holt(0.5,0.1,0.9).
    Holt(f32, f32, f32),
    /// `current` (alias `cts`).
    Current,
}

/// The longest estimator window or amax history accepted anywhere (calls): a bound on what
/// a config, a spelling or a replay may allocate.
pub const WINDOW_MAX: usize = 1 << 16;

/// Default smoothing weight of `ema`.
pub const DEFAULT_EMA_ALPHA: f32 = 0.1;
/// Default parameters of `holt` (alpha, beta, damping).
pub const DEFAULT_HOLT: (f32, f32, f32) = (0.5, 0.1, 0.9);

/// Which estimator a spec is, its parameters aside: `max_window(64)`, `max_window` and `max`
/// are all [`EstimatorKind::MaxWindow`]. What a run's estimator names are matched by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EstimatorKind {
    /// `most_recent`.
    MostRecent,
    /// `max_window(n)`.
    MaxWindow,
    /// `mean_window(n)`.
    MeanWindow,
    /// `ema(alpha)`.
    Ema,
    /// `holt(alpha,beta,damping)`.
    Holt,
    /// `current`.
    Current,
}

impl EstimatorKind {
    /// Every kind, in the order of their codes: the table the twins' tests walk (a new kind
    /// added here fails the WGSL and torch suites until they implement it).
    pub const ALL: [EstimatorKind; 6] = [
        EstimatorKind::MostRecent,
        EstimatorKind::MaxWindow,
        EstimatorKind::MeanWindow,
        EstimatorKind::Ema,
        EstimatorKind::Holt,
        EstimatorKind::Current,
    ];

    /// The kind's code in the flat descriptors of the WGSL kernel and the torch bank.
    pub fn code(self) -> u32 {
        match self {
            EstimatorKind::MostRecent => 0,
            EstimatorKind::MaxWindow => 1,
            EstimatorKind::MeanWindow => 2,
            EstimatorKind::Ema => 3,
            EstimatorKind::Holt => 4,
            EstimatorKind::Current => 5,
        }
    }

    /// The kind of a descriptor code.
    pub fn from_code(code: u32) -> Option<EstimatorKind> {
        EstimatorKind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The kind's name, its parameters aside (`max_window`).
    pub fn name(self) -> &'static str {
        match self {
            EstimatorKind::MostRecent => "most_recent",
            EstimatorKind::MaxWindow => "max_window",
            EstimatorKind::MeanWindow => "mean_window",
            EstimatorKind::Ema => "ema",
            EstimatorKind::Holt => "holt",
            EstimatorKind::Current => "current",
        }
    }

    /// The kind of an estimator name (any spelling [`EstimatorSpec`] parses), if it is one.
    pub fn of(name: &str) -> Option<EstimatorKind> {
        name.parse::<EstimatorSpec>().ok().map(|s| s.kind())
    }

    /// The index of the first of `names` (a run's estimators, in order) of this kind.
    pub fn position_in<S: AsRef<str>>(self, names: &[S]) -> Option<usize> {
        names
            .iter()
            .position(|n| EstimatorKind::of(n.as_ref()) == Some(self))
    }
}

impl EstimatorSpec {
    /// Its kind, parameters aside.
    pub fn kind(&self) -> EstimatorKind {
        match self {
            EstimatorSpec::MostRecent => EstimatorKind::MostRecent,
            EstimatorSpec::MaxWindow(_) => EstimatorKind::MaxWindow,
            EstimatorSpec::MeanWindow(_) => EstimatorKind::MeanWindow,
            EstimatorSpec::Ema(_) => EstimatorKind::Ema,
            EstimatorSpec::Holt(..) => EstimatorKind::Holt,
            EstimatorSpec::Current => EstimatorKind::Current,
        }
    }

    /// The default shadow set of SPEC.md §3: most_recent, ema(0.1), mean_window, max_window,
    /// current (windows from the configured `window`).
    pub fn default_set() -> Vec<EstimatorSpec> {
        vec![
            EstimatorSpec::MostRecent,
            EstimatorSpec::Ema(DEFAULT_EMA_ALPHA),
            EstimatorSpec::MeanWindow(None),
            EstimatorSpec::MaxWindow(None),
            EstimatorSpec::Current,
        ]
    }

    /// Whether this is current-tensor scaling (no history, needs this call's amax first).
    pub fn is_current(&self) -> bool {
        matches!(self, EstimatorSpec::Current)
    }

    /// Checks parameter ranges; the message names the bad parameter.
    pub fn validate(&self) -> Result<(), crate::range::RangeError> {
        use crate::range::RangeError;
        let unit = |name: &str, v: f32, open_zero: bool| {
            let ok = if open_zero {
                v > 0.0 && v <= 1.0
            } else {
                (0.0..=1.0).contains(&v)
            };
            if ok {
                Ok(())
            } else {
                Err(RangeError::new(
                    name,
                    format!(
                        "{name} must be in {} 1], got {v}",
                        if open_zero { "(0," } else { "[0," }
                    ),
                ))
            }
        };
        match *self {
            EstimatorSpec::MaxWindow(Some(n)) | EstimatorSpec::MeanWindow(Some(n))
                if !(1..=WINDOW_MAX).contains(&n) =>
            {
                Err(RangeError::new(
                    "window",
                    format!("window length must be in 1..={WINDOW_MAX}, got {n}"),
                ))
            }
            EstimatorSpec::Ema(alpha) => unit("ema alpha", alpha, true),
            EstimatorSpec::Holt(alpha, beta, damping) => {
                unit("holt alpha", alpha, true)?;
                unit("holt beta", beta, false)?;
                unit("holt damping", damping, false)
            }
            _ => Ok(()),
        }
    }
}

impl EstimatorSpec {
    /// Canonical spelling: `max_window(64)`, or `max_window` while its window is open.
    pub fn name(&self) -> String {
        match *self {
            EstimatorSpec::MostRecent => MostRecent.name(),
            EstimatorSpec::MaxWindow(None) => "max_window".into(),
            EstimatorSpec::MeanWindow(None) => "mean_window".into(),
            EstimatorSpec::MaxWindow(Some(n)) => MaxWindow { n }.name(),
            EstimatorSpec::MeanWindow(Some(n)) => MeanWindow { n }.name(),
            EstimatorSpec::Ema(alpha) => Ema { alpha }.name(),
            EstimatorSpec::Holt(alpha, beta, damping) => Holt {
                alpha,
                beta,
                damping,
            }
            .name(),
            EstimatorSpec::Current => Current.name(),
        }
    }
}

impl fmt::Display for EstimatorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Why an estimator spelling was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad estimator '{given}': {reason} (expected most_recent, max_window(N), mean_window(N), ema(ALPHA), holt(ALPHA,BETA,DAMPING) or current)"
)]
pub struct EstimatorParseError {
    /// The text given.
    pub given: String,
    /// What is wrong with it.
    pub reason: String,
}

impl FromStr for EstimatorSpec {
    type Err = EstimatorParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| EstimatorParseError {
            given: s.to_owned(),
            reason,
        };
        let t = s.trim().to_ascii_lowercase();
        let (name, args) = match t.split_once('(') {
            Some((name, rest)) => {
                let inner = rest
                    .strip_suffix(')')
                    .ok_or_else(|| err("missing ')'".into()))?;
                let args: Vec<&str> = inner.split(',').map(str::trim).collect();
                (name.trim().to_owned(), args)
            }
            None => (t.clone(), Vec::new()),
        };
        let float = |v: &str| {
            v.parse::<f32>()
                .map_err(|_| err(format!("'{v}' is not a number")))
        };
        let count = |v: &str| {
            v.parse::<usize>()
                .map_err(|_| err(format!("'{v}' is not a window length")))
        };
        let arity = |n: usize| {
            if args.len() == n {
                Ok(())
            } else {
                Err(err(format!("takes {n} argument(s), got {}", args.len())))
            }
        };
        let spec = match (name.as_str(), args.is_empty()) {
            ("most_recent" | "most-recent" | "mostrecent", true) => EstimatorSpec::MostRecent,
            ("current" | "cts", true) => EstimatorSpec::Current,
            ("max_window" | "max-window" | "max", true) => EstimatorSpec::MaxWindow(None),
            ("max_window" | "max-window" | "max", false) => {
                arity(1)?;
                EstimatorSpec::MaxWindow(Some(count(args[0])?))
            }
            ("mean_window" | "mean-window" | "mean", true) => EstimatorSpec::MeanWindow(None),
            ("mean_window" | "mean-window" | "mean", false) => {
                arity(1)?;
                EstimatorSpec::MeanWindow(Some(count(args[0])?))
            }
            ("ema", true) => EstimatorSpec::Ema(DEFAULT_EMA_ALPHA),
            ("ema", false) => {
                arity(1)?;
                EstimatorSpec::Ema(float(args[0])?)
            }
            ("holt", true) => {
                let (a, b, d) = DEFAULT_HOLT;
                EstimatorSpec::Holt(a, b, d)
            }
            ("holt", false) => {
                arity(3)?;
                EstimatorSpec::Holt(float(args[0])?, float(args[1])?, float(args[2])?)
            }
            (_, _) => return Err(err("unknown estimator".into())),
        };
        spec.validate().map_err(|e| err(e.message))?;
        Ok(spec)
    }
}

impl serde::Serialize for EstimatorSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> serde::Deserialize<'de> for EstimatorSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for text in [
            "most_recent",
            "max_window(64)",
            "mean_window(8)",
            "ema(0.1)",
            "holt(0.5,0.1,0.9)",
            "current",
            "max_window",
        ] {
            let spec: EstimatorSpec = text.parse().expect(text);
            assert_eq!(spec.to_string(), text);
        }
        assert_eq!("max".parse(), Ok(EstimatorSpec::MaxWindow(None)));
        assert_eq!("CTS".parse(), Ok(EstimatorSpec::Current));
        assert_eq!(" ema ( 0.25 ) ".parse(), Ok(EstimatorSpec::Ema(0.25)));
    }

    #[test]
    fn bad_spellings_say_why() {
        let e = "ema(2)".parse::<EstimatorSpec>().unwrap_err();
        assert!(e.to_string().contains("ema alpha must be in (0, 1]"), "{e}");
        let e = "max_window(x)".parse::<EstimatorSpec>().unwrap_err();
        assert!(e.to_string().contains("'x' is not a window length"), "{e}");
        let e = "median".parse::<EstimatorSpec>().unwrap_err();
        assert!(e.to_string().contains("unknown estimator"), "{e}");
        assert!("max_window(0)".parse::<EstimatorSpec>().is_err());
        assert!("holt(0.5,0.1)".parse::<EstimatorSpec>().is_err());
    }
}
