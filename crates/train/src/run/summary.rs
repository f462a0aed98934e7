//! A run's `summary.json`: status, counts per estimator and role, final probes; built from the
//! step reports as they arrive.

use super::*;
use hif8lab_scaling::EstimatorKind;

/// The whole run as `summary.json` describes it: one schema for every command that makes a
/// run (`train`, `grid`, `lesson`), rebuilt from `metrics.jsonl`, `probes.jsonl` and
/// `segments.json` whenever a segment ends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Of the last segment: `finished`, `interrupted`, `failed`.
    pub status: RunStatus,
    /// The error that ended it, if any.
    pub error: Option<String>,
    /// Run name (the folder's name).
    pub name: String,
    /// Steps done (lines of `metrics.jsonl`).
    pub steps: u64,
    /// `train.steps` of the run's config.
    pub target_steps: u64,
    /// Loss of the last step.
    pub final_loss: Option<f32>,
    /// Loss per step.
    pub losses: Vec<f64>,
    /// Seconds of training over all segments.
    pub wall_s: f64,
    /// Throughput of the last segment.
    pub tokens_per_s: f64,
    /// Backend of the last segment.
    pub backend: String,
    /// Adapter of the last segment.
    pub adapter: String,
    /// Quantizers in the bank.
    pub quantizers: usize,
    /// Segments (1 + resumes).
    pub segments: usize,
    /// Peak learning rate.
    pub lr: f32,
    /// The active estimator, or `none` without quantization.
    pub estimator: String,
    /// With a high-precision warmup.
    pub warmup: bool,
    /// Quantizer calls above the active estimate, over the whole run.
    pub calls_above_est: u64,
    /// Elements that overflowed at the active scale, over the whole run.
    pub overflow: u64,
    /// The last probe scores, when probes ran.
    pub probes: Option<ProbeScores>,
    /// The probe scores before the last, in order (a run probed at several doses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_probes: Vec<ProbeScores>,
    /// Every estimator of the shadow comparison, in order.
    pub estimators: Vec<String>,
    /// Every estimator's counts over the whole run (same order), per role too.
    pub counts: CallCounts,
    /// Per role, the SQNR of its calls over the run (median and worst); empty without
    /// quantization or in summaries written before SQNR was measured.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sqnr: BTreeMap<Role, SqnrSummary>,
    /// Per quantizer, from the trace ([`quantizer_table`]); filled by the grid for its data
    /// file, not written to `summary.json`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_quantizer: Vec<QuantizerSummary>,
    /// `train.precision` of the run (`f32` or `bf16`); empty in summaries written before it
    /// was recorded (their runs were `f32`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub precision: String,
    /// The kernels its bf16-exact CPU products ran on, over its segments (`f32`,
    /// `avx512-bf16`, `amx-bf16`, or two joined by `+`); empty where not recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub gemm: String,
}

/// What a summary needs to know besides the run folder's files.
#[derive(Clone, Debug)]
pub struct SummaryFacts<'a> {
    /// The run's config.
    pub config: &'a RunConfig,
    /// Estimator names.
    pub estimators: &'a [String],
    /// Index of the active estimator.
    pub active: usize,
    /// Quantizers in the bank.
    pub quantizers: usize,
}

impl RunSummary {
    /// The `estimator` of a run without quantization (the high-precision baselines), as
    /// summaries spell it.
    pub const NO_ESTIMATOR: &'static str = "none";

    /// Whether the run quantized (it has an active estimator).
    pub fn quantized(&self) -> bool {
        self.estimator != Self::NO_ESTIMATOR
    }

    /// The summary of the run in `dir`: its `metrics.jsonl`, `probes.jsonl` and `segments`
    /// (as written to `segments.json`).
    pub fn from_run(
        dir: &Path,
        facts: &SummaryFacts<'_>,
        segments: &[Segment],
        status: RunStatus,
        error: Option<String>,
    ) -> Self {
        let text = fs::read_to_string(dir.join(RunDir::METRICS)).unwrap_or_default();
        let lines: Vec<MetricsLine> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let mut all: Vec<ProbeScores> = fs::read_to_string(dir.join(RunDir::PROBES))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<ProbeScores>(l).ok())
            .collect();
        let probes = all.pop();
        let name = RunDir::new(dir).name();
        let mut summary = Self::from_lines(&name, facts, &lines, probes, segments, status, error);
        summary.earlier_probes = all;
        summary
    }

    /// The summary of a run's metrics lines (as `metrics.jsonl` holds them), its last probe
    /// scores and its segments: what both a run folder and an in-memory run summarize.
    pub fn from_lines(
        name: &str,
        facts: &SummaryFacts<'_>,
        lines: &[MetricsLine],
        probes: Option<ProbeScores>,
        segments: &[Segment],
        status: RunStatus,
        error: Option<String>,
    ) -> Self {
        let mut counts = CallCounts::new(facts.estimators.len());
        for c in lines.iter().filter_map(|l| l.counts.as_ref()) {
            counts.merge(c);
        }
        let last = segments.last();
        let qat = facts.config.qat.enabled;
        RunSummary {
            status,
            error,
            name: name.to_owned(),
            steps: lines.last().map_or(0, |l| l.step + 1),
            target_steps: facts.config.train.steps,
            final_loss: lines.last().map(|l| l.loss),
            losses: lines.iter().map(|l| f64::from(l.loss)).collect(),
            wall_s: segments.iter().map(|s| s.wall_s).sum(),
            tokens_per_s: last.map_or(0.0, |s| s.tokens as f64 / s.wall_s.max(1e-9)),
            backend: last.map(|s| s.backend.clone()).unwrap_or_default(),
            adapter: last.map(|s| s.adapter.clone()).unwrap_or_default(),
            quantizers: facts.quantizers,
            segments: segments.len(),
            lr: facts.config.train.lr,
            estimator: if qat {
                facts
                    .estimators
                    .get(facts.active)
                    .cloned()
                    .unwrap_or_default()
            } else {
                Self::NO_ESTIMATOR.into()
            },
            warmup: facts.config.qat.warmup_steps > 0,
            calls_above_est: lines.iter().map(|l| l.calls_above_est).sum(),
            overflow: lines.iter().map(|l| l.overflow).sum(),
            probes,
            earlier_probes: Vec::new(),
            estimators: facts.estimators.to_vec(),
            counts,
            sqnr: {
                let mut all: BTreeMap<Role, Vec<f32>> = BTreeMap::new();
                for l in lines {
                    for (role, v) in &l.sqnr_db {
                        all.entry(*role).or_default().extend_from_slice(v);
                    }
                }
                SqnrSummary::per_role(all)
            },
            per_quantizer: Vec::new(),
            precision: facts.config.train.precision().name().to_owned(),
            gemm: {
                let mut kernels: Vec<&str> = Vec::new();
                for s in segments.iter().filter(|s| s.backend == "cpu") {
                    let k = if s.gemm.is_empty() { "f32" } else { &s.gemm };
                    if !kernels.contains(&k) {
                        kernels.push(k);
                    }
                }
                kernels.join("+")
            },
        }
    }

    /// Writes `<dir>/summary.json` (atomically).
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(io::Error::other)?;
        write_atomic(&dir.join(RunDir::SUMMARY), text.as_bytes())
    }

    /// Reads `<dir>/summary.json`.
    pub fn read(dir: &Path) -> Option<Self> {
        let text = fs::read_to_string(dir.join(RunDir::SUMMARY)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The counts of the run's first estimator of the kind `name` names (`max_window`
    /// finds `max_window(64)`; matched by the parsed spec, not by spelling).
    pub fn shadow(&self, name: &str) -> Option<&EstimatorCounts> {
        let k = EstimatorKind::of(name)?.position_in(&self.estimators)?;
        self.counts.estimators.get(k)
    }

    /// Calls above the estimate of the run's first estimator of `kind`, on quantizers of
    /// `roles` (0 when the run has no such estimator).
    pub fn calls_above_roles(&self, kind: EstimatorKind, roles: &[hif8lab_scaling::Role]) -> u64 {
        kind.position_in(&self.estimators)
            .and_then(|k| self.counts.calls_above_roles(roles).get(k).copied())
            .unwrap_or(0)
    }

    /// Calls above the active estimator's estimate (the one that quantized), on quantizers of
    /// `roles` (0 without quantization).
    pub fn active_calls_above_roles(&self, roles: &[hif8lab_scaling::Role]) -> u64 {
        self.estimators
            .iter()
            .position(|e| *e == self.estimator)
            .and_then(|k| self.counts.calls_above_roles(roles).get(k).copied())
            .unwrap_or(0)
    }

    pub(crate) fn pairs(&self, f: impl Fn(&EstimatorCounts) -> u64) -> Vec<(String, u64)> {
        if !self.quantized() {
            return Vec::new();
        }
        self.estimators
            .iter()
            .cloned()
            .zip(self.counts.estimators.iter().map(f))
            .collect()
    }

    /// Per estimator (empty without quantization): calls above its estimate.
    pub fn shadow_calls(&self) -> Vec<(String, u64)> {
        self.pairs(|e| e.calls_above_est)
    }

    /// Per estimator (empty without quantization): elements above its estimate.
    pub fn shadow_elements(&self) -> Vec<(String, u64)> {
        self.pairs(|e| e.elements_above_est)
    }

    /// Per estimator (empty without quantization): elements overflowing at its scale.
    pub fn shadow_overflow(&self) -> Vec<(String, u64)> {
        self.pairs(|e| e.overflow)
    }

    /// Per role (`A`, `W`, `G`), per estimator: calls above its estimate.
    pub fn shadow_calls_by_role(&self) -> Vec<(String, Vec<(String, u64)>)> {
        if !self.quantized() {
            return Vec::new();
        }
        self.counts
            .calls_above_by_role
            .iter()
            .map(|(role, v)| {
                (
                    role.to_string(),
                    self.estimators
                        .iter()
                        .cloned()
                        .zip(v.iter().copied())
                        .collect(),
                )
            })
            .collect()
    }

    /// The last probe scores (zeros when the probes never ran).
    pub fn final_probes(&self) -> ProbeScores {
        self.probes.clone().unwrap_or_default()
    }
}

/// Builds a [`RunSummary`] in memory from step reports as they arrive (runs without a
/// folder: the browser's lesson scenarios): the same metrics lines a run folder writes,
/// summarized the same way.
#[derive(Clone, Debug, Default)]
pub struct SummaryBuilder {
    estimators: usize,
    lines: Vec<MetricsLine>,
}

impl SummaryBuilder {
    /// A builder for a run with these estimators (shadow order).
    pub fn new(estimators: &[String]) -> Self {
        SummaryBuilder {
            estimators: estimators.len(),
            lines: Vec::new(),
        }
    }

    /// Counts one step (`active`: the active estimator's index).
    pub fn add(&mut self, r: &StepReport, active: usize) {
        self.lines
            .push(MetricsLine::of(r, self.estimators, active, 0.0));
    }

    /// The summary of the finished run.
    pub fn finish(
        self,
        name: &str,
        facts: &SummaryFacts<'_>,
        probes: Option<ProbeScores>,
        wall_s: f64,
    ) -> RunSummary {
        let mut segment = Segment::new(0, facts.config.train.steps);
        segment.end_step = self.lines.len() as u64;
        segment.status = RunStatus::Finished;
        segment.wall_s = wall_s;
        RunSummary::from_lines(
            name,
            facts,
            &self.lines,
            probes,
            &[segment],
            RunStatus::Finished,
            None,
        )
    }
}
