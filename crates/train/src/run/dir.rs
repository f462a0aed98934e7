//! Reading a run folder: the one typed reader of what [`super::RunWriter`] and the run
//! folder sink write (config, metrics, trace, probes, segments, summary). Every error names
//! the file.

use std::path::{Path, PathBuf};

use hif8lab_scaling::trace::Trace;

use super::{MetricsLine, RunSummary, Segment};
use crate::RunConfig;
use crate::trainer::ProbeScores;

/// A run folder's file that cannot be read: every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    /// The file cannot be read, or is not UTF-8 text.
    #[error("{file}: {message}")]
    Read {
        /// The file.
        file: String,
        /// The system's (or the decoder's) error.
        message: String,
    },
    /// `config.toml` is not a configuration this version reads.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A JSON-lines file (metrics, trace, probes) is malformed.
    #[error(transparent)]
    Lines(#[from] hif8lab_scaling::trace::InputError),
}

fn read_error(path: &Path, message: impl std::fmt::Display) -> RunDirError {
    RunDirError::Read {
        file: path.display().to_string(),
        message: message.to_string(),
    }
}

/// A run folder, for reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// `config.toml`: the run's configuration (resumes may extend `train.steps`).
    pub const CONFIG: &'static str = "config.toml";
    /// `metrics.jsonl`: one [`MetricsLine`] per step.
    pub const METRICS: &'static str = "metrics.jsonl";
    /// `trace.jsonl`: the header, then one record per quantizer call traced.
    pub const TRACE: &'static str = "trace.jsonl";
    /// `probes.jsonl`: one [`ProbeScores`] per evaluation.
    pub const PROBES: &'static str = "probes.jsonl";
    /// `segments.json`: each start and resume of the run.
    pub const SEGMENTS: &'static str = "segments.json";
    /// `summary.json`: the run's [`RunSummary`].
    pub const SUMMARY: &'static str = "summary.json";

    /// The folder at `path` (nothing is read yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        RunDir { path: path.into() }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of one of its files.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The folder's name (the run's name).
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Whether it holds a run's metrics (a run folder, possibly unfinished).
    pub fn has_metrics(&self) -> bool {
        self.file(Self::METRICS).is_file()
    }

    /// Whether it holds a run's configuration.
    pub fn has_config(&self) -> bool {
        self.file(Self::CONFIG).is_file()
    }

    /// The bytes of one of its files; the error names the file.
    fn bytes(&self, name: &str) -> Result<Vec<u8>, RunDirError> {
        let p = self.file(name);
        std::fs::read(&p).map_err(|e| read_error(&p, e))
    }

    /// `config.toml`, parsed (with `overrides` applied) and checked.
    pub fn config_with(&self, overrides: &[String]) -> Result<RunConfig, RunDirError> {
        let p = self.file(Self::CONFIG);
        let bytes = self.bytes(Self::CONFIG)?;
        let text = std::str::from_utf8(&bytes).map_err(|e| read_error(&p, e))?;
        Ok(RunConfig::parse(&p.display().to_string(), text, overrides)?)
    }

    /// `config.toml`, parsed and checked.
    pub fn config(&self) -> Result<RunConfig, RunDirError> {
        self.config_with(&[])
    }

    /// `metrics.jsonl` (a torn last line, left by a kill, is dropped).
    pub fn metrics(&self) -> Result<Vec<MetricsLine>, RunDirError> {
        self.jsonl(Self::METRICS)
    }

    /// `trace.jsonl`.
    pub fn trace(&self) -> Result<Trace, RunDirError> {
        Ok(hif8lab_scaling::trace::read_trace(&self.file(Self::TRACE))?)
    }

    /// `probes.jsonl` (none when the run was not probed).
    pub fn probes(&self) -> Result<Vec<ProbeScores>, RunDirError> {
        if !self.file(Self::PROBES).exists() {
            return Ok(Vec::new());
        }
        self.jsonl(Self::PROBES)
    }

    /// One of its JSON-lines files, streamed (a torn last line is dropped).
    fn jsonl<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<Vec<T>, RunDirError> {
        let p = self.file(name);
        let file = std::fs::File::open(&p).map_err(|e| read_error(&p, e))?;
        Ok(
            hif8lab_scaling::trace::read_jsonl(&p, std::io::BufReader::new(file))
                .map(|(items, _)| items)?,
        )
    }

    /// `segments.json` (none in a folder written before segments were recorded).
    pub fn segments(&self) -> std::io::Result<Vec<Segment>> {
        super::read_segments(&self.path)
    }

    /// `summary.json`, when present and readable.
    pub fn summary(&self) -> Option<RunSummary> {
        RunSummary::read(&self.path)
    }

    /// The backend and adapter `summary.json` names, read leniently: a folder written before
    /// `segments.json` existed records its backend only there, in a summary of an older form.
    pub fn summary_backend(&self) -> Option<(String, String)> {
        let text = std::fs::read_to_string(self.file(Self::SUMMARY)).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        let backend = v.get("backend")?.as_str()?.to_owned();
        let adapter = v
            .get("adapter")
            .and_then(|a| a.as_str())
            .unwrap_or_default();
        Some((backend, adapter.to_owned()))
    }
}
