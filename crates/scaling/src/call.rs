//! One quantizer call, as one type from the bank readback to the trace line to the app's
//! storage ([`CallRecord`]), and the one accumulator of its counts ([`CallCounts`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::{QuantizerId, Role};
use crate::trace::{ShadowRecord, TraceRecord};

/// One quantizer call: what the statistics kernel measured against every estimator.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRecord {
    /// Which quantizer.
    pub id: QuantizerId,
    /// Optimizer step.
    pub step: u64,
    /// Micro-batch within the step.
    pub micro: u32,
    /// Elements of the quantized tensor.
    pub numel: u64,
    /// amax of the call.
    pub amax: f32,
    /// Per estimator: estimate in effect.
    pub est: Vec<f32>,
    /// Per estimator: scale (NaN where a trace did not record it).
    pub scales: Vec<f32>,
    /// Per estimator: elements above the estimate.
    pub above_est: Vec<u64>,
    /// Per estimator: elements overflowing at its scale.
    pub overflow: Vec<u64>,
    /// Elements quantized to zero at the active scale.
    pub underflow: u64,
    /// NaN/Inf elements.
    pub nonfinite: u64,
    /// Quantization error of the call at the active scale, as SQNR in dB
    /// ([`crate::stats::sqnr_db`]); `None` for an all-zero tensor or a trace without it.
    pub sqnr_db: Option<f32>,
}

impl CallRecord {
    /// Whether the call's amax exceeded estimator `k`'s estimate (some element above it).
    pub fn above(&self, k: usize) -> bool {
        self.above_est.get(k).is_some_and(|v| *v > 0)
    }

    /// The trace line of this call (schema version 1), `names` in estimator order.
    pub fn to_trace(&self, names: &[String], active: usize) -> TraceRecord {
        let a = active.min(names.len().saturating_sub(1));
        let at = |v: &[u64]| v.get(a).copied().unwrap_or(0);
        TraceRecord {
            step: self.step,
            micro: self.micro,
            block: self.id.block,
            module: self.id.module,
            role: self.id.role,
            numel: self.numel,
            amax: self.amax,
            estimator: names.get(a).cloned().unwrap_or_default(),
            est: self.est.get(a).copied().unwrap_or(f32::NAN),
            scale: self.scales.get(a).copied().unwrap_or(f32::NAN),
            above_est: at(&self.above_est),
            overflow: at(&self.overflow),
            underflow: self.underflow,
            nonfinite: self.nonfinite,
            sqnr_db: self.sqnr_db,
            shadow: names
                .iter()
                .enumerate()
                .map(|(k, name)| {
                    (
                        name.clone(),
                        ShadowRecord {
                            est: self.est.get(k).copied().unwrap_or(f32::NAN),
                            above_est: self.above_est.get(k).copied().unwrap_or(0),
                            overflow: self.overflow.get(k).copied().unwrap_or(0),
                        },
                    )
                })
                .collect::<BTreeMap<_, _>>(),
        }
    }

    /// The call a trace line describes, estimators in `names` order, each as
    /// [`TraceRecord::view`] reads it (an estimator missing from the line has NaN estimate
    /// and zero counts; scales other than the active one are not in a trace and read NaN).
    pub fn from_trace(r: &TraceRecord, names: &[String]) -> Self {
        let shadow = |name: &String| r.view(name);
        CallRecord {
            id: r.quantizer(),
            step: r.step,
            micro: r.micro,
            numel: r.numel,
            amax: r.amax,
            est: names
                .iter()
                .map(|n| shadow(n).map_or(f32::NAN, |s| s.est))
                .collect(),
            scales: names
                .iter()
                .map(|n| if *n == r.estimator { r.scale } else { f32::NAN })
                .collect(),
            above_est: names
                .iter()
                .map(|n| shadow(n).map_or(0, |s| s.above_est))
                .collect(),
            overflow: names
                .iter()
                .map(|n| shadow(n).map_or(0, |s| s.overflow))
                .collect(),
            underflow: r.underflow,
            nonfinite: r.nonfinite,
            sqnr_db: r.sqnr_db,
        }
    }
}

/// One estimator's totals over many calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EstimatorCounts {
    /// Calls whose amax exceeded the estimate.
    pub calls_above_est: u64,
    /// Elements above the estimate.
    pub elements_above_est: u64,
    /// Elements that overflowed at the estimator's scale.
    pub overflow: u64,
}

/// The one accumulator of per-estimator counts, fed as each call arrives: the run folder's
/// metrics and summary, the grid's results and the app's counts all come from it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallCounts {
    /// Calls counted.
    pub calls: u64,
    /// Elements quantized to zero at the active scale.
    pub underflow: u64,
    /// Per estimator (in the run's estimator order).
    pub estimators: Vec<EstimatorCounts>,
    /// Per role (`A`, `W`, `G`): calls above each estimator's estimate.
    pub calls_above_by_role: BTreeMap<Role, Vec<u64>>,
    /// Per role: calls counted (the base a share of `calls_above_by_role` is taken of;
    /// absent from counts written before it was kept).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub calls_by_role: BTreeMap<Role, u64>,
}

impl CallCounts {
    /// Empty counts for `k` estimators.
    pub fn new(k: usize) -> Self {
        CallCounts {
            estimators: vec![EstimatorCounts::default(); k],
            ..Default::default()
        }
    }

    /// Counts one call.
    pub fn add(&mut self, c: &CallRecord) {
        self.add_with_role(c, Some(c.id.role));
    }

    /// Counts one call of a series whose role is unknown (`None`: it is left out of the
    /// per-role counts, kept in every other).
    pub fn add_with_role(&mut self, c: &CallRecord, role: Option<Role>) {
        let k = c.above_est.len().max(c.overflow.len());
        if self.estimators.len() < k {
            self.estimators.resize(k, EstimatorCounts::default());
        }
        let n = self.estimators.len();
        if let Some(r) = role {
            *self.calls_by_role.entry(r).or_default() += 1;
        }
        let mut role = role.map(|r| {
            let v = self
                .calls_above_by_role
                .entry(r)
                .or_insert_with(|| vec![0; n]);
            v.resize(n, 0);
            v
        });
        self.calls += 1;
        self.underflow += c.underflow;
        for (j, e) in self.estimators.iter_mut().enumerate() {
            let above = c.above_est.get(j).copied().unwrap_or(0);
            let hit = u64::from(above > 0);
            e.calls_above_est += hit;
            e.elements_above_est += above;
            e.overflow += c.overflow.get(j).copied().unwrap_or(0);
            if let Some(role) = role.as_mut() {
                role[j] += hit;
            }
        }
    }

    /// Adds counts gathered elsewhere (another step, another segment).
    pub fn merge(&mut self, other: &CallCounts) {
        if self.estimators.len() < other.estimators.len() {
            self.estimators
                .resize(other.estimators.len(), EstimatorCounts::default());
        }
        self.calls += other.calls;
        self.underflow += other.underflow;
        for (a, b) in self.estimators.iter_mut().zip(&other.estimators) {
            a.calls_above_est += b.calls_above_est;
            a.elements_above_est += b.elements_above_est;
            a.overflow += b.overflow;
        }
        let n = self.estimators.len();
        for (role, calls) in &other.calls_by_role {
            *self.calls_by_role.entry(*role).or_default() += calls;
        }
        for (role, v) in &other.calls_above_by_role {
            let mine = self
                .calls_above_by_role
                .entry(*role)
                .or_insert_with(|| vec![0; n]);
            mine.resize(n.max(v.len()), 0);
            for (a, b) in mine.iter_mut().zip(v) {
                *a += b;
            }
        }
    }

    /// Calls counted on quantizers of the given roles.
    pub fn calls_of_roles(&self, roles: &[Role]) -> u64 {
        self.calls_by_role
            .iter()
            .filter(|(r, _)| roles.contains(r))
            .map(|(_, n)| n)
            .sum()
    }

    /// Per estimator: calls above its estimate on quantizers of the given roles.
    pub fn calls_above_roles(&self, roles: &[Role]) -> Vec<u64> {
        let mut out = vec![0u64; self.estimators.len()];
        for (_, v) in self
            .calls_above_by_role
            .iter()
            .filter(|(r, _)| roles.contains(r))
        {
            for (o, c) in out.iter_mut().zip(v) {
                *o += c;
            }
        }
        out
    }

    /// Per estimator: calls above its estimate.
    pub fn calls_above(&self) -> Vec<u64> {
        self.estimators.iter().map(|e| e.calls_above_est).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Module;

    fn call(
        role: Role,
        amax: f32,
        est: [f32; 2],
        above: [u64; 2],
        overflow: [u64; 2],
    ) -> CallRecord {
        CallRecord {
            id: QuantizerId {
                block: 1,
                module: Module::Up,
                role,
            },
            step: 3,
            micro: 0,
            numel: 64,
            amax,
            est: est.to_vec(),
            scales: vec![2.0, 4.0],
            above_est: above.to_vec(),
            overflow: overflow.to_vec(),
            underflow: 5,
            nonfinite: 0,
            sqnr_db: Some(30.0),
        }
    }

    #[test]
    fn counts_each_call_once_per_estimator_and_role() {
        let mut c = CallCounts::new(2);
        c.add(&call(Role::A, 3.0, [2.0, 4.0], [7, 0], [1, 0]));
        c.add(&call(Role::G, 5.0, [4.0, 4.0], [2, 3], [0, 2]));
        c.add(&call(Role::G, 1.0, [4.0, 4.0], [0, 0], [0, 0]));
        assert_eq!(c.calls, 3);
        assert_eq!(c.underflow, 15);
        assert_eq!(c.calls_above(), [2, 1]);
        assert_eq!(c.estimators[0].elements_above_est, 9);
        assert_eq!(c.estimators[1].overflow, 2);
        assert_eq!(c.calls_above_roles(&[Role::G]), [1, 1]);
        assert_eq!(c.calls_above_roles(&[Role::A, Role::W]), [1, 0]);
        let mut twice = c.clone();
        twice.merge(&c);
        assert_eq!(twice.calls_above(), [4, 2]);
        assert_eq!(twice.calls_above_by_role[&Role::A], [2, 0]);
    }

    #[test]
    fn quantizer_names_parse_back_exactly() {
        for role in Role::ALL {
            for module in Module::ALL {
                let id = QuantizerId {
                    block: 12,
                    module,
                    role,
                };
                assert_eq!(id.to_string().parse::<QuantizerId>(), Ok(id));
            }
        }
        for bad in [
            "block1.up",
            "block1.up.A.x",
            "blockx.up.A",
            "block1.up.grad",
            "layer1.up.A",
            "",
        ] {
            assert!(bad.parse::<QuantizerId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn trace_round_trip_keeps_the_call() {
        let names = vec!["most_recent".to_owned(), "max_window(16)".to_owned()];
        let c = call(Role::W, 3.0, [2.0, 4.0], [7, 0], [1, 0]);
        let line = c.to_trace(&names, 1);
        assert_eq!(line.estimator, "max_window(16)");
        assert_eq!(line.scale, 4.0);
        assert_eq!(line.above_est, 0);
        let back = CallRecord::from_trace(&line, &names);
        assert_eq!(back.est, c.est);
        assert_eq!(back.above_est, c.above_est);
        assert_eq!(back.overflow, c.overflow);
        assert!(back.scales[0].is_nan());
        assert_eq!(back.scales[1], 4.0);
        assert_eq!(back.id, c.id);
    }
}
