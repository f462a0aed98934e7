//! The data behind a grid's report ([`DATA_FILE`]): every run's summary and the base's
//! probe scores, as gzipped JSON lines — what `grid --recompute` and the real-model lesson
//! read (natively from a folder, in the browser from the committed file).

use hif8lab_train::run::RunSummary;
use hif8lab_train::trainer::{ProbeScores, TrainError};

/// The file, next to a grid's report, holding everything the report rests on: per run,
/// data order and pretraining, the run's summary (per-item probe marks and margins, losses,
/// counts); per pretraining, the base's probe scores. Gzipped JSON lines.
pub const DATA_FILE: &str = "runs.jsonl.gz";

/// The data behind a grid's report ([`DATA_FILE`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GridData {
    /// Probe scores of each pretraining of the base.
    pub bases: Vec<ProbeScores>,
    /// Every run, data order and pretraining.
    pub runs: Vec<GridDataRun>,
    /// The real pretrained model the runs continued from (none: a base pretrained here).
    pub base_model: Option<String>,
}

/// One run of [`GridData`].
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GridDataRun {
    /// The grid run (`most_recent-low`, …).
    pub run: String,
    /// Its data order (0-based).
    pub order: usize,
    /// Its pretraining (0-based).
    pub base_seed: usize,
    /// Its summary.
    pub summary: RunSummary,
}

/// A line of [`DATA_FILE`].
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum DataLine {
    Base {
        base_seed: usize,
        probes: Box<ProbeScores>,
        /// The real model the runs continued from (absent: pretrained here).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    Run(Box<GridDataRun>),
}

impl GridData {
    /// The JSON lines (one per pretraining, then one per run, order and pretraining).
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        let mut line = |l: &DataLine| {
            if let Ok(text) = serde_json::to_string(l) {
                out.push_str(&text);
                out.push('\n');
            }
        };
        for (j, b) in self.bases.iter().enumerate() {
            line(&DataLine::Base {
                base_seed: j,
                probes: Box::new(b.clone()),
                model: self.base_model.clone(),
            });
        }
        for r in &self.runs {
            line(&DataLine::Run(Box::new(r.clone())));
        }
        out
    }

    /// The gzipped JSON lines ([`DATA_FILE`]).
    pub fn to_gzip_jsonl(&self) -> Result<Vec<u8>, TrainError> {
        use std::io::Write;
        let io_err = |e: std::io::Error| TrainError::Data(e.to_string());
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(self.to_jsonl().as_bytes()).map_err(io_err)?;
        z.finish().map_err(io_err)
    }

    /// Parses the JSON lines; `source` names them in errors (with the line).
    pub fn from_jsonl(source: &str, text: &str) -> Result<Self, TrainError> {
        let bad = |m: String| TrainError::Data(format!("{source}: {m}"));
        let mut data = GridData::default();
        let mut bases: Vec<(usize, ProbeScores)> = Vec::new();
        for (i, l) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let line: DataLine =
                serde_json::from_str(l).map_err(|e| bad(format!("line {}: {e}", i + 1)))?;
            match line {
                DataLine::Base {
                    base_seed,
                    probes,
                    model,
                } => {
                    data.base_model = data.base_model.take().or(model);
                    bases.push((base_seed, *probes));
                }
                DataLine::Run(r) => data.runs.push(*r),
            }
        }
        bases.sort_by_key(|b| b.0);
        if bases.is_empty() || bases.iter().enumerate().any(|(j, b)| b.0 != j) {
            return Err(bad(
                "the base lines must number the pretrainings 0, 1, … once each".into(),
            ));
        }
        data.bases = bases.into_iter().map(|b| b.1).collect();
        Ok(data)
    }

    /// Parses gzipped JSON lines ([`DATA_FILE`]'s bytes); `source` names them in errors.
    pub fn from_gzip(source: &str, bytes: &[u8]) -> Result<Self, TrainError> {
        use std::io::Read;
        let mut text = String::new();
        flate2::read::GzDecoder::new(bytes)
            .take(1 << 31)
            .read_to_string(&mut text)
            .map_err(|e| {
                TrainError::Data(format!("{source}: not gzipped UTF-8 JSON lines: {e}"))
            })?;
        Self::from_jsonl(source, &text)
    }

    /// Reads [`DATA_FILE`]; errors name the file (and the line).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read(path: &std::path::Path) -> Result<Self, TrainError> {
        let source = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| TrainError::Data(format!("{source}: {e}")))?;
        Self::from_gzip(&source, &bytes)
    }
}
