//! A run folder: `config.toml` (fully resolved), `metrics.jsonl` (one line per step),
//! `trace.jsonl` (one line per quantizer call, the scaling crate's schema, decimated by
//! `trace_every`), `probes.jsonl`, `checkpoints/step_N.safetensors`, `segments.json` (one
//! entry per stretch of training: the start and every resume, with its backend, the config
//! changes it made and how it ended) and `summary.json` (the whole run, rebuilt from
//! `metrics.jsonl` and `segments.json` whenever a segment ends). Files are appended line by
//! line (each line one `write_all`); `config.toml`, `segments.json`, `summary.json` and
//! checkpoints are written to a temporary file and renamed, so a reader never sees half a
//! file; temporaries a killed process left behind are removed on the next start.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use hif8lab_scaling::trace::{TRACE_VERSION, TraceHeader, TraceWriter, write_json_line};
use std::collections::BTreeMap;

use hif8lab_scaling::{CallCounts, EstimatorCounts, Role};
use serde::{Deserialize, Serialize};

use crate::config::RunConfig;

pub mod folder;
mod quantizers;
use crate::trainer::{ProbeScores, StepReport};
pub use quantizers::{
    EXCESS_BINS_PER_OCTAVE, EXCESS_TIERS, QuantizerSummary, excess_bin, excess_tier,
    quantizer_table, trace_counts,
};

mod summary;
pub use summary::*;

mod dir;
pub use dir::{RunDir, RunDirError};

/// One line of `metrics.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricsLine {
    /// Step (from 0).
    pub step: u64,
    /// Mean training loss.
    pub loss: f32,
    /// Learning rate.
    pub lr: f32,
    /// Gradient norm before clipping.
    pub grad_norm: f32,
    /// Training throughput.
    pub tokens_per_s: f64,
    /// Whether quantization was on.
    pub qat_enabled: bool,
    /// Quantizer calls with values above the active estimate in this step.
    #[serde(default)]
    pub calls_above_est: u64,
    /// Elements that overflowed at the active scale in this step.
    #[serde(default)]
    pub overflow: u64,
    /// Every estimator's counts over this step's calls (absent without calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<CallCounts>,
    /// Per role (`A`, `W`, `G`), the SQNR (dB, to 0.01) of each of this step's calls, in
    /// call order (absent without calls or in lines written before SQNR was measured).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sqnr_db: BTreeMap<Role, Vec<f32>>,
}

/// A role's quantization error over a run: the SQNR of its calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SqnrSummary {
    /// Calls with an SQNR.
    pub calls: u64,
    /// Median SQNR (dB).
    pub median_db: f32,
    /// Worst (lowest) SQNR (dB).
    pub worst_db: f32,
}

impl SqnrSummary {
    /// The median and worst of `values` (`None` when empty).
    pub fn of(values: &[f32]) -> Option<Self> {
        let mut v: Vec<f32> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f32::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            0.5 * (v[n / 2 - 1] + v[n / 2])
        };
        Some(SqnrSummary {
            calls: n as u64,
            median_db: median,
            worst_db: v[0],
        })
    }

    /// Per role, [`Self::of`] its calls' values (a role without a finite one left out).
    pub fn per_role(all: BTreeMap<Role, Vec<f32>>) -> BTreeMap<Role, Self> {
        all.into_iter()
            .filter_map(|(r, v)| Some((r, Self::of(&v)?)))
            .collect()
    }
}

impl MetricsLine {
    /// The line of a step report: its calls counted once into [`CallCounts`] (`estimators`
    /// of them; the active one's figures also in the line's own fields).
    pub fn of(report: &StepReport, estimators: usize, active: usize, tokens_per_s: f64) -> Self {
        let counts = (!report.calls.is_empty()).then(|| {
            let mut counts = CallCounts::new(estimators);
            for c in &report.calls {
                counts.add(c);
            }
            counts
        });
        let of_active = |f: fn(&EstimatorCounts) -> u64| {
            counts
                .as_ref()
                .and_then(|c| c.estimators.get(active))
                .map_or(0, f)
        };
        MetricsLine {
            step: report.step,
            loss: report.loss,
            lr: report.lr,
            grad_norm: report.grad_norm,
            tokens_per_s,
            qat_enabled: report.qat_enabled,
            calls_above_est: of_active(|e| e.calls_above_est),
            overflow: of_active(|e| e.overflow),
            counts,
            sqnr_db: {
                let mut by_role: BTreeMap<Role, Vec<f32>> = BTreeMap::new();
                for c in &report.calls {
                    if let Some(db) = c.sqnr_db {
                        by_role
                            .entry(c.id.role)
                            .or_default()
                            .push((db * 100.0).round() / 100.0);
                    }
                }
                by_role
            },
        }
    }
}

/// How a segment (and, for the last one, the run) stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Training (or killed without a chance to say so).
    Running,
    /// Reached its target steps.
    Finished,
    /// Stopped by a signal, with a checkpoint.
    Interrupted,
    /// Ended by an error.
    Failed,
    /// Found still `running` by a later resume: the process was killed.
    Killed,
    /// Of a run folder written before segments were recorded.
    #[default]
    Unknown,
}

/// One stretch of training: the first start or a resume, until it finished, was
/// interrupted, failed or was killed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// Steps done when it started.
    pub start_step: u64,
    /// Steps done at its last checkpoint (or its end).
    pub end_step: u64,
    /// `train.steps` it aimed for.
    pub target_steps: u64,
    /// How it stands or ended.
    pub status: RunStatus,
    /// `cpu` or `gpu`.
    pub backend: String,
    /// Adapter or CPU name.
    pub adapter: String,
    /// Device type (`Cpu`, `DiscreteGpu`, …).
    pub device_type: String,
    /// The checkpoint it continued from.
    #[serde(default)]
    pub from_checkpoint: Option<String>,
    /// The kernel of its CPU products whose operands are exact in bf16 (`train.gemm`): `f32`
    /// `avx512-bf16` or `amx-bf16`; empty in segments written before it was recorded (they used `f32`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub gemm: String,
    /// Newer checkpoints it could not use, and why.
    #[serde(default)]
    pub skipped_checkpoints: Vec<String>,
    /// Config keys it changed (`key: old → new`).
    #[serde(default)]
    pub changes: Vec<String>,
    /// Notes (a backend change, a stale temporary removed, …).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Seconds of training, up to its last checkpoint or end.
    #[serde(default)]
    pub wall_s: f64,
    /// Tokens trained, up to its last checkpoint or end.
    #[serde(default)]
    pub tokens: u64,
}

impl Segment {
    /// A segment about to run from `start_step` to `target_steps` (backend filled in once
    /// it is known).
    pub fn new(start_step: u64, target_steps: u64) -> Self {
        Segment {
            start_step,
            end_step: start_step,
            target_steps,
            status: RunStatus::Running,
            backend: String::new(),
            adapter: String::new(),
            device_type: String::new(),
            gemm: String::new(),
            from_checkpoint: None,
            skipped_checkpoints: Vec::new(),
            changes: Vec::new(),
            notes: Vec::new(),
            wall_s: 0.0,
            tokens: 0,
        }
    }

    /// Records the backend this segment runs on and the kernel of its bf16-exact products
    /// ([`crate::Trainer::gemm_kernel`]).
    pub fn set_backend(&mut self, info: &hif8lab_engine::BackendInfo, gemm: &str) {
        self.gemm = gemm.to_owned();
        self.backend = info.kind.to_owned();
        self.adapter = info.adapter.clone();
        self.device_type = info.device_type.clone();
    }
}

/// The segments of a run folder (`segments.json`; empty when absent).
pub fn read_segments(dir: &Path) -> io::Result<Vec<Segment>> {
    let path = dir.join(RunDir::SEGMENTS);
    match fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Writes `segments.json` atomically.
pub fn write_segments(dir: &Path, segments: &[Segment]) -> io::Result<()> {
    let text = serde_json::to_string_pretty(segments).map_err(io::Error::other)?;
    write_atomic(&dir.join(RunDir::SEGMENTS), text.as_bytes())
}

/// Removes `*.tmp-PID` files a killed process left in `dir` and `dir/checkpoints` (those of
/// a process still alive are kept); returns what was removed.
pub fn remove_stale_temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for folder in [dir.to_owned(), dir.join("checkpoints")] {
        let Ok(entries) = fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = crate::io::temporary_pid(&name) else {
                continue;
            };
            let alive = pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists();
            if !alive && fs::remove_file(entry.path()).is_ok() {
                removed.push(entry.path());
            }
        }
    }
    removed
}

pub use crate::io::write_atomic;

/// The files of a run being written.
pub struct RunWriter {
    /// One writer per run folder, for as long as this writer lives.
    _lock: crate::lock::FolderLock,
    dir: PathBuf,
    metrics: File,
    trace: TraceWriter<File>,
    trace_every: u64,
    active: usize,
    estimators: usize,
}

impl RunWriter {
    /// Creates `dir` (it must not hold a run already) and writes `config.toml` and the trace
    /// header.
    pub fn create(
        dir: &Path,
        config: &RunConfig,
        estimators: &[String],
        active: usize,
    ) -> io::Result<Self> {
        let lock = crate::lock::FolderLock::acquire(dir)?;
        if dir.join(RunDir::METRICS).exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} already holds a run (metrics.jsonl exists); choose another --out",
                    dir.display()
                ),
            ));
        }
        if let Some((_, old)) = crate::models::checkpoint::list(dir).first() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} holds checkpoints of an earlier run ({}) but no metrics.jsonl; a new run \
                     there would be mixed with them on resume: choose another --out or remove \
                     the folder",
                    dir.display(),
                    old.display()
                ),
            ));
        }
        remove_stale_temporaries(dir);
        fs::create_dir_all(dir.join("checkpoints"))?;
        write_atomic(&dir.join(RunDir::CONFIG), config.to_toml().as_bytes())?;
        let open = |name: &str| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(name))
        };
        let scaling = &config.qat.scaling;
        let header = TraceHeader {
            hif8lab_trace: TRACE_VERSION,
            format: scaling.format.name().into(),
            target: scaling.target,
            margin: scaling.margin,
            window: scaling.window,
            estimator: estimators.get(active).cloned().unwrap_or_default(),
            estimators: estimators.to_vec(),
            config: serde_json::to_value(config).unwrap_or_default(),
        };
        Ok(RunWriter {
            _lock: lock,
            dir: dir.to_owned(),
            metrics: open(RunDir::METRICS)?,
            trace: TraceWriter::new(open(RunDir::TRACE)?, &header)?,
            trace_every: config.train.trace_every,
            active,
            estimators: estimators.len(),
        })
    }

    /// Reopens a run folder to continue it from a checkpoint at `step`: lines of
    /// `metrics.jsonl` and `probes.jsonl` and records of `trace.jsonl` from `step` on (written after the
    /// checkpoint, and about to be redone) are dropped first (each file rewritten atomically).
    pub fn resume(
        dir: &Path,
        config: &RunConfig,
        estimators: &[String],
        active: usize,
        step: u64,
    ) -> io::Result<Self> {
        let lock = crate::lock::FolderLock::acquire(dir)?;
        // `past` says which step numbers belong before the checkpoint: metrics and trace
        // number steps from 0 (0..step−1 are done), probes record the steps completed.
        let keep = |name: &str,
                    is_header: &dyn Fn(&str) -> bool,
                    past: &dyn Fn(u64) -> bool|
         -> io::Result<()> {
            let path = dir.join(name);
            let text = fs::read_to_string(&path).unwrap_or_default();
            let mut out = String::new();
            for line in text.lines() {
                let step_of = serde_json::from_str::<serde_json::Value>(line)
                    .ok()
                    .and_then(|v| v.get("step").and_then(serde_json::Value::as_u64));
                let keep = is_header(line) || step_of.is_some_and(past);
                if keep {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            write_atomic(&path, out.as_bytes())
        };
        keep(RunDir::METRICS, &|_| false, &|s| s < step)?;
        if dir.join(RunDir::PROBES).exists() {
            keep(RunDir::PROBES, &|_| false, &|s| s <= step)?;
        }
        keep(
            RunDir::TRACE,
            &|l: &str| l.contains("\"hif8lab_trace\""),
            &|s| s < step,
        )?;
        let open = |name: &str| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(name))
        };
        Ok(RunWriter {
            _lock: lock,
            dir: dir.to_owned(),
            metrics: open(RunDir::METRICS)?,
            trace: TraceWriter::resume(open(RunDir::TRACE)?),
            trace_every: config.train.trace_every,
            active,
            estimators: estimators.len(),
        })
    }

    /// Writes a checkpoint as `<dir>/checkpoints/step_N.safetensors` (atomically); returns
    /// its path.
    pub fn save_checkpoint_in(
        dir: &Path,
        ck: &dyn crate::models::checkpoint::CheckpointSource,
        step: u64,
    ) -> io::Result<PathBuf> {
        let path = dir
            .join("checkpoints")
            .join(format!("step_{step}.safetensors"));
        crate::models::checkpoint::save_source(&path, ck)?;
        Ok(path)
    }

    /// The run folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends a step's metrics line and (every `trace_every` steps) its trace records.
    pub fn write(
        &mut self,
        report: &StepReport,
        records: &[hif8lab_scaling::trace::TraceRecord],
        tokens_per_s: f64,
    ) -> io::Result<MetricsLine> {
        let line = MetricsLine::of(report, self.estimators, self.active, tokens_per_s);
        write_json_line(&mut self.metrics, &line)?;
        if report.step.is_multiple_of(self.trace_every) {
            for r in records {
                self.trace.record(r)?;
            }
        }
        Ok(line)
    }

    /// Appends one line of probe scores to `probes.jsonl`.
    pub fn probes(&mut self, scores: &ProbeScores) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(RunDir::PROBES))?;
        write_json_line(&mut f, scores)
    }

    /// Writes `summary.json`.
    pub fn summary(&mut self, summary: &RunSummary) -> io::Result<()> {
        self.flush()?;
        summary.write(&self.dir)
    }

    /// Flushes `metrics.jsonl` and `trace.jsonl`.
    pub fn flush(&mut self) -> io::Result<()> {
        self.metrics.flush()?;
        self.trace.flush()
    }
}
