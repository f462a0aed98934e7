//! A run folder: `config.toml` (fully resolved), `metrics.jsonl` (one line per step),
//! `trace.jsonl` (one line per quantizer call, the scaling crate's schema, decimated by
//! `trace_every`), `summary.json` (at the end). Files are appended line by line (each line
//! one `write_all`); `config.toml` and `summary.json` are written to a temporary file and
//! renamed, so a reader never sees half a file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use hif8lab_scaling::trace::{TRACE_VERSION, TraceHeader, TraceWriter, write_json_line};
use serde::{Deserialize, Serialize};

use crate::config::RunConfig;
use crate::trainer::StepReport;

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
}

/// Writes `bytes` through a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The files of a run being written.
pub struct RunWriter {
    dir: PathBuf,
    metrics: File,
    trace: TraceWriter<File>,
    trace_every: u64,
    active: usize,
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
        if dir.join("metrics.jsonl").exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} already holds a run (metrics.jsonl exists); choose another --out",
                    dir.display()
                ),
            ));
        }
        fs::create_dir_all(dir.join("checkpoints"))?;
        write_atomic(&dir.join("config.toml"), config.to_toml().as_bytes())?;
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
            dir: dir.to_owned(),
            metrics: open("metrics.jsonl")?,
            trace: TraceWriter::new(open("trace.jsonl")?, &header)?,
            trace_every: config.train.trace_every,
            active,
        })
    }

    /// Reopens a run folder to continue it from a checkpoint at `step`: lines of
    /// `metrics.jsonl` and `probes.jsonl` and records of `trace.jsonl` from `step` on (written after the
    /// checkpoint, and about to be redone) are dropped first (each file rewritten atomically).
    pub fn resume(dir: &Path, config: &RunConfig, active: usize, step: u64) -> io::Result<Self> {
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
        keep("metrics.jsonl", &|_| false, &|s| s < step)?;
        if dir.join("probes.jsonl").exists() {
            keep("probes.jsonl", &|_| false, &|s| s <= step)?;
        }
        keep(
            "trace.jsonl",
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
            dir: dir.to_owned(),
            metrics: open("metrics.jsonl")?,
            trace: TraceWriter::resume(open("trace.jsonl")?),
            trace_every: config.train.trace_every,
            active,
        })
    }

    /// Writes a checkpoint as `<dir>/checkpoints/step_N.safetensors` (atomically); returns
    /// its path.
    pub fn save_checkpoint_in(
        dir: &Path,
        ck: &crate::checkpoint::Checkpoint,
        step: u64,
    ) -> io::Result<PathBuf> {
        let path = dir
            .join("checkpoints")
            .join(format!("step_{step}.safetensors"));
        ck.save(&path)?;
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
        let line = MetricsLine {
            step: report.step,
            loss: report.loss,
            lr: report.lr,
            grad_norm: report.grad_norm,
            tokens_per_s,
            qat_enabled: report.qat_enabled,
            calls_above_est: report
                .calls
                .iter()
                .filter(|c| c.above_est[self.active] > 0)
                .count() as u64,
            overflow: report.calls.iter().map(|c| c.overflow[self.active]).sum(),
        };
        write_json_line(&mut self.metrics, &line)?;
        if report.step.is_multiple_of(self.trace_every) {
            for r in records {
                self.trace.record(r)?;
            }
        }
        Ok(line)
    }

    /// Writes `summary.json`.
    pub fn summary(&mut self, summary: &serde_json::Value) -> io::Result<()> {
        self.metrics.flush()?;
        self.trace.flush()?;
        let text = serde_json::to_string_pretty(summary).map_err(io::Error::other)?;
        write_atomic(&self.dir.join("summary.json"), text.as_bytes())
    }
}
