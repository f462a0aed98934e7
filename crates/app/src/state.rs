//! What the dashboard shows, fed by live `StepReport`s or by a saved run folder: loss per
//! step, and per quantizer the amax of every call with every estimator's estimate and counts.
//! Draws nothing; the panels read it.

use std::collections::BTreeMap;
use std::path::Path;

use hif8lab_format::Format;
use hif8lab_scaling::stats::Log2Histogram;
use hif8lab_scaling::trace::{Trace, TraceRecord, parse_trace};
use hif8lab_scaling::{CallCounts, CallRecord, Module, QuantizerId, Role};
use hif8lab_train::run::{MetricsLine, RunDir};
use hif8lab_train::{RunConfig, StepReport};

mod export;
mod series;

pub use series::{Call, SeriesKey};

/// Everything known about one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunView {
    /// Display name.
    pub name: String,
    /// (step, loss).
    pub loss: Vec<[f64; 2]>,
    /// First step with quantization on, if any.
    pub qat_from: Option<u64>,
    /// Estimator names (active at `active`).
    pub estimators: Vec<String>,
    /// Index of the active estimator.
    pub active: usize,
    /// Calls of each quantizer (or imported series), in order.
    pub calls: BTreeMap<SeriesKey, Vec<Call>>,
    /// Scaling target (for the tier lines).
    pub target: f32,
    /// The quantization format (for tiers and the overflow line).
    pub format: Format,
    /// The latest log2|x·scale| histogram of the quantizer chosen for binning.
    pub histogram: Option<HistView>,
    /// Knowledge and completion probe scores, when evaluated.
    pub probes: Vec<hif8lab_train::ProbeScores>,
    /// The run's config, when known (a replayed trace has none).
    pub config: Option<RunConfig>,
    /// Bumped by every change, so panels can cache what they derive from the calls.
    pub revision: u64,
    /// Every call counted as it arrived (the same accumulator as the run folder's summary).
    pub counts: CallCounts,
}

/// The histogram of one quantizer call.
#[derive(Clone, Debug, PartialEq)]
pub struct HistView {
    /// The quantizer.
    pub id: SeriesKey,
    /// Step of the call.
    pub step: u64,
    /// The counts.
    pub hist: Log2Histogram,
}

/// Splits `len` items into at most `max` consecutive buckets `(start, end)` (all of them
/// when `len <= max`): what the plots draw per bucket so long runs stay cheap to draw.
pub fn buckets(len: usize, max: usize) -> Vec<(usize, usize)> {
    let max = max.max(1);
    if len <= max {
        return (0..len).map(|i| (i, i + 1)).collect();
    }
    (0..max)
        .map(|b| (b * len / max, (b + 1) * len / max))
        .filter(|(a, e)| e > a)
        .collect()
}

/// Median by selection (O(n)); NaN when empty.
fn median_of(mut v: Vec<f32>) -> f32 {
    let n = v.len();
    if n == 0 {
        return f32::NAN;
    }
    let (_, hi, _) = v.select_nth_unstable_by(n / 2, f32::total_cmp);
    let hi = *hi;
    if n % 2 == 1 {
        hi
    } else {
        let lo = v[..n / 2].iter().copied().fold(f32::NEG_INFINITY, f32::max);
        (lo + hi) / 2.0
    }
}

/// Keeps at most this many entries per quantizer: beyond it the older half is merged pairwise
/// (extremes kept), so older stretches are stored at coarser resolution, recent calls whole.
pub const MAX_CALLS: usize = 20_000;

impl RunView {
    /// An empty view for a live run.
    pub fn new(name: &str, estimators: Vec<String>, active: usize, target: f32) -> Self {
        RunView {
            name: name.to_owned(),
            estimators,
            active,
            target,
            ..Default::default()
        }
    }

    /// An empty view for series replayed through `plan`'s estimators (active and shadows).
    fn for_replay(name: &str, plan: &hif8lab_scaling::ScalingPlan) -> Self {
        RunView::new(name, plan.names(), plan.active_index(), plan.rule().target)
    }

    /// A synthetic run of `quantizers` × `steps` calls (a random walk of amax with bursts,
    /// every default estimator replayed on it): what the frame-time benchmark draws.
    pub fn synthetic(quantizers: usize, steps: u64, seed: u64) -> Self {
        use hif8lab_scaling::{QuantizerState, ScalingConfig};
        let Ok(plan) = ScalingConfig::default().plan() else {
            return RunView::default();
        };
        let mut view = RunView::for_replay(&format!("synthetic {quantizers}x{steps}"), &plan);
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        let roles = [Role::W, Role::A, Role::G];
        for i in 0..quantizers {
            let id = QuantizerId {
                block: (i / (Module::ALL.len() * roles.len())) as u32,
                module: Module::ALL[(i / roles.len()) % Module::ALL.len()],
                role: roles[i % roles.len()],
            };
            let mut state = QuantizerState::new(&plan);
            let mut level = 0.0f64;
            for step in 0..steps {
                level += (next() - 0.5) * 0.1;
                let burst = if next() < 0.01 { 3.0 * next() } else { 0.0 };
                let amax = (level + burst).exp2() as f32;
                let numel = 4096u64;
                let d = state.call(amax);
                view.push_call(&CallRecord {
                    id,
                    step,
                    micro: 0,
                    numel,
                    amax,
                    scales: d.iter().map(|x| x.scale).collect(),
                    nonfinite: 0,
                    est: d.iter().map(|x| x.est).collect(),
                    above_est: d
                        .iter()
                        .map(|x| {
                            if amax > x.est {
                                (next() * numel as f64 * 0.01) as u64 + 1
                            } else {
                                0
                            }
                        })
                        .collect(),
                    overflow: vec![0; d.len()],
                    underflow: (next() * 3.0) as u64,
                    // HiF8 near its target keeps about 30 dB; a burst above the estimate
                    // rounds coarser.
                    sqnr_db: Some((30.0 - 4.0 * burst + next() - 0.5) as f32),
                });
            }
        }
        view.loss = (0..steps)
            .map(|s| [s as f64, 5.0 * (-(s as f64) / 3000.0).exp() + 2.0])
            .collect();
        view.qat_from = Some(0);
        view
    }

    /// Takes format, target and the config diff's source from a run's config.
    pub fn set_config(&mut self, config: &RunConfig) {
        self.format = config.qat.scaling.format;
        self.target = config.qat.scaling.target;
        self.config = Some(config.clone());
        self.changed();
    }

    /// The series, grouped by role (`W`, `A`, `G`, then those without one): rows of the
    /// saturation heatmaps.
    pub fn rows_by_role(&self) -> Vec<(Option<Role>, Vec<SeriesKey>)> {
        let mut out: Vec<(Option<Role>, Vec<SeriesKey>)> = Vec::new();
        for role in [Role::W, Role::A, Role::G] {
            let ids: Vec<SeriesKey> = self
                .calls
                .keys()
                .filter(|k| k.role() == Some(role))
                .cloned()
                .collect();
            if !ids.is_empty() {
                out.push((Some(role), ids));
            }
        }
        let other: Vec<SeriesKey> = self
            .calls
            .keys()
            .filter(|k| k.role().is_none())
            .cloned()
            .collect();
        if !other.is_empty() {
            out.push((None, other));
        }
        out
    }

    /// The last step any call reached (0 without calls).
    pub fn last_step(&self) -> u64 {
        self.calls
            .values()
            .filter_map(|c| c.last())
            .map(|c| c.step)
            .max()
            .unwrap_or(0)
    }

    /// A heatmap of `rows` × `columns`: each cell sums `value` over the row's calls whose
    /// step falls in the column's range of steps `0..=last_step`.
    pub fn heatmap(
        &self,
        rows: &[SeriesKey],
        columns: usize,
        value: impl Fn(&Call) -> u64,
    ) -> Vec<u64> {
        self.heatmap_by(rows, columns, value, |a, b| a + b)
    }

    /// [`Self::heatmap`] with another way of combining the calls of a cell (`max` shows the
    /// worst call of each column).
    pub fn heatmap_by(
        &self,
        rows: &[SeriesKey],
        columns: usize,
        value: impl Fn(&Call) -> u64,
        combine: impl Fn(u64, u64) -> u64,
    ) -> Vec<u64> {
        let columns = columns.max(1);
        let steps = self.last_step() + 1;
        let mut out = vec![0u64; rows.len() * columns];
        for (r, id) in rows.iter().enumerate() {
            for c in self.calls.get(id).into_iter().flatten() {
                let col = ((c.step as u128 * columns as u128) / u128::from(steps)) as usize;
                let cell = &mut out[r * columns + col.min(columns - 1)];
                *cell = combine(*cell, value(c));
            }
        }
        out
    }

    /// Adds a live step report.
    pub fn push_report(&mut self, r: &StepReport) {
        self.changed();
        if let Some((id, h)) = &r.histogram {
            self.histogram = Some(HistView {
                id: SeriesKey::Quantizer(*id),
                step: r.step,
                hist: h.clone(),
            });
        }
        self.loss.push([r.step as f64, f64::from(r.loss)]);
        if r.qat_enabled && self.qat_from.is_none() {
            self.qat_from = Some(r.step);
        }
        for c in &r.calls {
            self.push_call(c);
        }
    }

    fn changed(&mut self) {
        self.revision += 1;
    }

    /// Counts a call of the run's quantizers and stores it.
    pub fn push_call(&mut self, c: &CallRecord) {
        self.push_series(SeriesKey::Quantizer(c.id), c);
    }

    /// Counts a call and stores it under `key` (merging old entries when the history is
    /// full); an imported series without a role stays out of the per-role counts.
    pub fn push_series(&mut self, key: SeriesKey, c: &CallRecord) {
        self.changed();
        if self.counts.estimators.len() < self.estimators.len() {
            self.counts = CallCounts::new(self.estimators.len());
        }
        self.counts.add_with_role(c, key.role());
        let calls = self.calls.entry(key).or_default();
        calls.push(Call::of(c));
        if calls.len() > MAX_CALLS {
            let old = calls.len() / 2;
            let mut merged: Vec<Call> = Vec::with_capacity(old / 2 + 1);
            for pair in calls[..old].chunks(2) {
                let mut m = pair[0].clone();
                if let Some(next) = pair.get(1) {
                    m.absorb(next);
                }
                merged.push(m);
            }
            merged.extend(calls.drain(old..));
            *calls = merged;
        }
    }

    /// Loads a run folder (`metrics.jsonl`, `trace.jsonl`; its config and probes when
    /// present).
    pub fn load(dir: &Path) -> Result<Self, String> {
        let run = RunDir::new(dir);
        let text = |e: hif8lab_train::run::RunDirError| e.to_string();
        let mut view = Self::from_run(
            &run.name(),
            &run.metrics().map_err(text)?,
            &run.trace().map_err(text)?,
        );
        if run.has_config() {
            view.set_config(&run.config().map_err(text)?);
        }
        view.probes = run.probes().map_err(text)?;
        Ok(view)
    }

    /// Reads a run's `config.toml` (`path` names it in errors).
    pub fn read_config(&mut self, path: &Path, bytes: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        let config =
            RunConfig::parse(&path.display().to_string(), text, &[]).map_err(|e| e.to_string())?;
        self.set_config(&config);
        Ok(())
    }

    /// A run from the contents of its `metrics.jsonl` and `trace.jsonl` (paths name them in
    /// errors); what a browser's file picker delivers.
    pub fn from_run_files(
        name: &str,
        metrics_path: &Path,
        metrics: &[u8],
        trace_path: &Path,
        trace: &[u8],
    ) -> Result<Self, String> {
        let (lines, _) = hif8lab_scaling::trace::read_jsonl::<MetricsLine>(metrics_path, metrics)
            .map_err(|e| e.to_string())?;
        let trace = parse_trace(trace_path, trace).map_err(|e| e.to_string())?;
        Ok(Self::from_run(name, &lines, &trace))
    }

    /// A run from its metrics lines and trace.
    pub fn from_run(name: &str, lines: &[MetricsLine], trace: &Trace) -> Self {
        let estimators = trace.header.estimators.clone();
        let active = estimators
            .iter()
            .position(|e| *e == trace.header.estimator)
            .unwrap_or(0);
        let mut view = RunView::new(name, estimators.clone(), active, trace.header.target);
        for l in lines {
            view.loss.push([l.step as f64, f64::from(l.loss)]);
            if l.qat_enabled && view.qat_from.is_none() {
                view.qat_from = Some(l.step);
            }
        }
        for r in &trace.records {
            view.push_record(r, &estimators);
        }
        view
    }

    /// A run of a committed results folder (`runs.jsonl.gz`): its loss curve, its probes and
    /// its per-estimator counts from the summary; no per-call trace (the folder keeps none).
    pub fn from_summary(name: &str, s: &hif8lab_train::run::RunSummary) -> Self {
        let active = s
            .estimators
            .iter()
            .position(|e| *e == s.estimator)
            .unwrap_or(0);
        let mut view = RunView::new(name, s.estimators.clone(), active, 15.0);
        view.loss = s
            .losses
            .iter()
            .enumerate()
            .map(|(i, l)| [i as f64, *l])
            .collect();
        view.probes = s.earlier_probes.iter().chain(&s.probes).cloned().collect();
        view.counts = s.counts.clone();
        view.revision += 1;
        view
    }

    fn push_record(&mut self, r: &TraceRecord, estimators: &[String]) {
        self.push_call(&CallRecord::from_trace(r, estimators));
    }

    /// A view of an amax trace from outside (hif8lab JSONL, CSV `step,layer,role,amax`, or a
    /// Transformer Engine log): every default estimator replayed over each series with the
    /// product's own delayed-scaling semantics. Counts are per call (1 when amax > est). A
    /// name ending in `.gz` is read gzipped (as the committed outlier trace is kept).
    pub fn from_trace_file(path: &Path) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_trace_bytes(path, &bytes)
    }

    /// [`RunView::from_trace_file`] on contents already read; `path` names them (and says
    /// whether they are gzipped).
    pub fn from_trace_bytes(path: &Path, bytes: &[u8]) -> Result<Self, String> {
        if path.extension().is_some_and(|e| e == "gz") {
            let mut plain = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut plain)
                .map_err(|e| format!("{}: not gzip ({e})", path.display()))?;
            return Self::from_trace_bytes(&path.with_extension(""), &plain);
        }
        use hif8lab_scaling::{QuantizerState, ScalingConfig};
        let imported =
            hif8lab_scaling::import::import_bytes(path, bytes).map_err(|e| e.to_string())?;
        let plan = ScalingConfig::default().plan().map_err(|e| e.to_string())?;
        let overflow_at = plan.format().facts().overflow_threshold;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut view = RunView::for_replay(&name, &plan);
        for series in &imported.series {
            let mut state = QuantizerState::new(&plan);
            for (step, amax) in series.steps.iter().zip(&series.amax) {
                let d = state.call(*amax);
                let key = SeriesKey::parse(&series.name);
                // The record's id matters only for a quantizer's series (the key says which).
                let id = key.quantizer().unwrap_or(QuantizerId {
                    block: 0,
                    module: Module::Up,
                    role: key.role().unwrap_or(Role::A),
                });
                view.push_series(
                    key,
                    &CallRecord {
                        id,
                        step: *step,
                        micro: 0,
                        numel: 0,
                        amax: *amax,
                        est: d.iter().map(|x| x.est).collect(),
                        scales: d.iter().map(|x| x.scale).collect(),
                        above_est: d.iter().map(|x| u64::from(*amax > x.est)).collect(),
                        overflow: d
                            .iter()
                            .map(|x| u64::from(*amax * x.scale >= overflow_at))
                            .collect(),
                        underflow: 0,
                        nonfinite: 0,
                        sqnr_db: None,
                    },
                );
            }
        }
        Ok(view)
    }

    /// A view from files handed in together (a run folder's `metrics.jsonl` + `trace.jsonl`,
    /// or one trace / CSV / Transformer Engine log), as `(name, contents)`.
    pub fn from_files(files: &[(String, Vec<u8>)]) -> Result<Self, String> {
        let find = |n: &str| files.iter().find(|(name, _)| name.ends_with(n));
        match (find(RunDir::METRICS), find(RunDir::TRACE)) {
            (Some(m), Some(t)) => {
                let mut v = RunView::from_run_files(
                    "opened run",
                    Path::new(&m.0),
                    &m.1,
                    Path::new(&t.0),
                    &t.1,
                )?;
                if let Some((name, bytes)) = find(RunDir::CONFIG) {
                    v.read_config(Path::new(name), bytes)?;
                }
                Ok(v)
            }
            _ => {
                let (name, bytes) = files.first().ok_or("no file")?;
                RunView::from_trace_bytes(Path::new(name), bytes)
            }
        }
    }

    /// Per estimator: the median headroom est/amax over all calls (NaN without calls).
    pub fn median_headroom(&self) -> Vec<f32> {
        (0..self.estimators.len())
            .map(|k| {
                let v: Vec<f32> = self
                    .calls
                    .values()
                    .flatten()
                    .filter(|c| c.amax > 0.0)
                    .filter_map(|c| c.est.get(k).map(|e| e / c.amax))
                    .collect();
                median_of(v)
            })
            .collect()
    }

    /// Per estimator: calls above its estimate on quantizers of the given roles (`A`, `W`,
    /// `G`), from the accumulator (every call counted, whatever is stored).
    pub fn calls_above_roles(&self, roles: &[Role]) -> Vec<u64> {
        self.padded(self.counts.calls_above_roles(roles))
    }

    /// Per estimator: calls whose amax exceeded its estimate, over all quantizers.
    pub fn calls_above(&self) -> Vec<u64> {
        self.padded(self.counts.calls_above())
    }

    fn padded(&self, mut v: Vec<u64>) -> Vec<u64> {
        v.resize(self.estimators.len(), 0);
        v
    }

    /// A one-line reading of the shadow comparison, from the numbers.
    pub fn reading(&self) -> String {
        let counts = self.calls_above();
        if counts.is_empty() || self.calls.is_empty() {
            return "No quantizer calls yet.".into();
        }
        let parts: Vec<String> = self
            .estimators
            .iter()
            .zip(&counts)
            .map(|(e, c)| format!("{e} on {c}"))
            .collect();
        let total = self.counts.calls;
        format!(
            "Of {total} quantizer calls (all roles), amax exceeded the estimate of {}.",
            parts.join("; ")
        )
    }
}

/// Average percentage error of `view`'s loss against `baseline`'s over the steps both have
/// reached (SPEC.md §6); `None` before either has a step.
pub fn ape(view: &RunView, baseline: &RunView) -> Option<f64> {
    let n = view.loss.len().min(baseline.loss.len());
    (n > 0).then(|| {
        let q: Vec<f64> = view.loss[..n].iter().map(|p| p[1]).collect();
        let b: Vec<f64> = baseline.loss[..n].iter().map(|p| p[1]).collect();
        hif8lab_train::eval::ape(&q, &b)
    })
}

/// The text a CSV writer holds.
pub fn csv_text(w: csv::Writer<Vec<u8>>) -> String {
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn buckets_cover_every_item_once() {
        for (len, max) in [
            (0, 10),
            (5, 10),
            (10, 10),
            (11, 10),
            (10_000, 1000),
            (10_007, 999),
        ] {
            let b = buckets(len, max);
            assert!(b.len() <= max.max(1), "{len}/{max}");
            let mut next = 0;
            for (a, e) in &b {
                assert_eq!(*a, next, "{len}/{max}: contiguous");
                assert!(e > a);
                next = *e;
            }
            assert_eq!(next, len, "{len}/{max}: all covered");
        }
    }

    #[test]
    fn heatmap_sums_every_call_into_its_step_column() {
        let v = RunView::synthetic(6, 1000, 3);
        let rows: Vec<SeriesKey> = v.calls.keys().cloned().collect();
        let total: u64 = v.calls.values().flatten().map(|c| c.underflow).sum();
        for columns in [1, 7, 333, 1000] {
            let map = v.heatmap(&rows, columns, |c| c.underflow);
            assert_eq!(map.len(), rows.len() * columns);
            assert_eq!(map.iter().sum::<u64>(), total, "{columns} columns");
        }
        // One column per step: a cell is exactly that call's count.
        let map = v.heatmap(&rows, 1000, |c| c.underflow);
        let c = &v.calls[&rows[2]][417];
        assert_eq!(map[2 * 1000 + c.step as usize], c.underflow);
    }

    #[test]
    fn derived_counts_follow_new_calls() {
        let mut v = RunView::synthetic(3, 50, 5);
        let before = v.calls_above();
        let (r0, k) = (v.revision, v.active);
        let id = v.calls.keys().next().cloned().unwrap();
        let first = v.calls[&id][0].clone();
        let n = v.estimators.len();
        let call = CallRecord {
            id: id.quantizer().unwrap(),
            step: 50,
            micro: 0,
            numel: 64,
            amax: first.amax,
            est: first.est.clone(),
            scales: vec![1.0; n],
            above_est: vec![1; n],
            overflow: vec![0; n],
            underflow: 0,
            nonfinite: 0,
            sqnr_db: Some(25.0),
        };
        v.push_call(&call);
        assert!(v.revision > r0);
        assert_eq!(v.calls_above()[k], before[k] + 1, "the new call is counted");
        let roles: u64 = [Role::W, Role::A, Role::G]
            .iter()
            .map(|r| v.calls_above_roles(&[*r])[k])
            .sum();
        assert_eq!(roles, v.calls_above()[k]);
    }
}
