//! What the app stores per series: the typed key, and the call entries (single calls, or
//! merged stretches of old calls that keep their extremes).

use super::*;

/// What a stored series is: a quantizer of a run (typed all the way from the bank), or a
/// series imported from another tool under its own name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SeriesKey {
    /// A quantizer of a hif8lab run.
    Quantizer(QuantizerId),
    /// An imported series (a Transformer Engine log's layer, a CSV's `layer.role`).
    Imported(String),
}

impl SeriesKey {
    /// The key of a series named `name`: a quantizer when it is one's name.
    pub fn parse(name: &str) -> Self {
        name.parse::<QuantizerId>().map_or_else(
            |_| SeriesKey::Imported(name.to_owned()),
            SeriesKey::Quantizer,
        )
    }

    /// The operand role, when known (a quantizer's, or an imported name ending in `.A`,
    /// `.W` or `.G`).
    pub fn role(&self) -> Option<Role> {
        match self {
            SeriesKey::Quantizer(id) => Some(id.role),
            SeriesKey::Imported(name) => match name.rsplit('.').next() {
                Some("A") => Some(Role::A),
                Some("W") => Some(Role::W),
                Some("G") => Some(Role::G),
                _ => None,
            },
        }
    }

    /// The quantizer, for a run's series.
    pub fn quantizer(&self) -> Option<QuantizerId> {
        match self {
            SeriesKey::Quantizer(id) => Some(*id),
            SeriesKey::Imported(_) => None,
        }
    }
}

impl From<QuantizerId> for SeriesKey {
    fn from(id: QuantizerId) -> Self {
        SeriesKey::Quantizer(id)
    }
}

impl std::fmt::Display for SeriesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SeriesKey::Quantizer(id) => id.fmt(f),
            SeriesKey::Imported(name) => f.write_str(name),
        }
    }
}

/// One quantizer call as the panels see it, or — for old stretches of a long run — several
/// consecutive calls merged so that their extremes survive: the largest amax, the smallest
/// amax, each estimator's smallest estimate, and per estimator how many of the merged calls
/// exceeded its estimate. An excursion above an estimate is never lost at any zoom.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// Optimizer step (of the first merged call).
    pub step: u64,
    /// Calls merged into this entry (1 for a single call).
    pub calls: u32,
    /// amax of the call (the largest of the merged calls).
    pub amax: f32,
    /// The smallest amax of the merged calls.
    pub amax_min: f32,
    /// Per estimator: calls (of the merged ones) whose amax exceeded its estimate.
    pub calls_above: Vec<u32>,
    /// Per estimator: its estimate (the smallest of the merged calls).
    pub est: Vec<f32>,
    /// Per estimator: elements above its estimate.
    pub above_est: Vec<u64>,
    /// Per estimator: elements overflowing at its scale.
    pub overflow: Vec<u64>,
    /// Elements quantized to zero.
    pub underflow: u64,
    /// SQNR of the call at its active scale (dB; the worst of the merged calls).
    pub sqnr_db: Option<f32>,
}

impl Call {
    /// The panels' view of one call record.
    pub fn of(c: &CallRecord) -> Self {
        Call {
            step: c.step,
            calls: 1,
            amax: c.amax,
            amax_min: c.amax,
            calls_above: c.above_est.iter().map(|v| u32::from(*v > 0)).collect(),
            est: c.est.clone(),
            above_est: c.above_est.clone(),
            overflow: c.overflow.clone(),
            underflow: c.underflow,
            sqnr_db: c.sqnr_db,
        }
    }

    /// Merges the next call(s) into this entry, keeping the extremes and summing counts.
    pub(super) fn absorb(&mut self, next: &Call) {
        self.calls += next.calls;
        self.amax = self.amax.max(next.amax);
        self.amax_min = self.amax_min.min(next.amax_min);
        let pairs = |a: &mut Vec<u64>, b: &[u64]| {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        };
        pairs(&mut self.above_est, &next.above_est);
        pairs(&mut self.overflow, &next.overflow);
        for (x, y) in self.calls_above.iter_mut().zip(&next.calls_above) {
            *x += y;
        }
        for (x, y) in self.est.iter_mut().zip(&next.est) {
            *x = x.min(*y);
        }
        self.underflow += next.underflow;
        self.sqnr_db = match (self.sqnr_db, next.sqnr_db) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}
