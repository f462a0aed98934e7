//! The paper's experiment grid at laptop scale: pretrain a base model on the knowledge-base
//! corpus, then continue on the bursty web corpus from that base with identical data order
//! under each estimator, learning rate and warmup; score probes; report APE, relative drops,
//! saturation counts and a verdict per claim of the paper.
//!
//! Folder layout: `<out>/base/` (pretraining run, checkpoint, probes), `<out>/runs/<name>/`
//! (one run folder each, plus `probes.jsonl`), `<out>/results.md`, `<out>/results.csv`.
//! A run whose `summary.json` says `finished` is skipped on re-run (resumable).

#[cfg(not(target_arch = "wasm32"))]
use std::fmt::Write as _;
#[cfg(not(target_arch = "wasm32"))]
use std::path::{Path, PathBuf};

#[cfg(not(target_arch = "wasm32"))]
use hif8lab_engine::Backend;
use hif8lab_scaling::{EstimatorSpec, ScalingConfig};
use serde::{Deserialize, Serialize};

#[cfg(not(target_arch = "wasm32"))]
use crate::checkpoint::{self, Checkpoint};
use crate::config::{ConfigError, DataConfig, ModelConfig, QatConfig, RunConfig};
use crate::corpus::{ProbeSet, ape, relative_drop};
#[cfg(not(target_arch = "wasm32"))]
use crate::driver::{Driver, Event, Schedule, Sink};
#[cfg(not(target_arch = "wasm32"))]
use crate::folder::RunFolder;
#[cfg(not(target_arch = "wasm32"))]
use crate::run::{RunStatus, write_atomic};
pub use crate::run::{RunSummary, SummaryBuilder};
use crate::trainer::ProbeScores;
#[cfg(not(target_arch = "wasm32"))]
use crate::trainer::{TrainError, Trainer};
#[cfg(not(target_arch = "wasm32"))]
use std::sync::Arc;

mod results;
#[cfg(not(target_arch = "wasm32"))]
mod runner;

pub use results::{
    GridResults, PAIRED_TEST, ResultRow, Verdict, base_run, compare, count_prefix, drop_stat,
    forgetting_excess,
};
#[cfg(not(target_arch = "wasm32"))]
pub use runner::{pretrain, run_grid, train_from_base};

/// The folder name of a grid run at seed `k` (seed 0 keeps the run's own name).
pub fn seed_name(name: &str, k: usize) -> String {
    if k == 0 {
        name.to_owned()
    } else {
        format!("{name}-seed{k}")
    }
}

/// Grid presets compiled into the binary.
pub const GRID_PRESETS: [(&str, &str); 3] = [
    (
        "grid-small",
        include_str!("../../../assets/presets/grid-small.toml"),
    ),
    (
        "grid-micro",
        include_str!("../../../assets/presets/grid-micro.toml"),
    ),
    (
        "grid-lesson",
        include_str!("../../../assets/presets/grid-lesson.toml"),
    ),
];

/// Pretraining phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PretrainPhase {
    /// Steps.
    pub steps: u64,
    /// Sequences per step.
    pub batch: usize,
    /// Peak learning rate.
    pub lr: f32,
}

/// Continued-training phase (the grid's runs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContinuePhase {
    /// Steps of every run.
    pub steps: u64,
    /// Sequences per step.
    pub batch: usize,
    /// The high learning rate (the paper's 1e-4: forgets).
    pub lr_high: f32,
    /// The low learning rate (the paper's 1e-5).
    pub lr_low: f32,
    /// High-precision warmup of the runs "with warmup" (the paper's 500 of 10,000 steps).
    pub qat_warmup_steps: u64,
    /// Probe every this many steps.
    pub eval_every: u64,
}

/// A grid configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridConfig {
    /// Model sizes (as in a run config).
    pub model: ModelConfig,
    /// Pretraining.
    pub pretrain: PretrainPhase,
    /// Continued training.
    #[serde(rename = "continue")]
    pub cont: ContinuePhase,
    /// Knowledge base size and corpus length.
    #[serde(default)]
    pub data: DataConfig,
    /// Scaling settings shared by every QAT run (the estimator is set per run).
    #[serde(default)]
    pub scaling: ScalingConfig,
}

impl GridConfig {
    /// Parses a grid preset by name.
    pub fn preset(name: &str) -> Result<Self, ConfigError> {
        let text = GRID_PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .ok_or_else(|| ConfigError {
                set: None,
                source_name: format!("grid preset '{name}'"),
                message: format!(
                    "no such grid preset (available: {})",
                    GRID_PRESETS.map(|(n, _)| n).join(", ")
                ),
            })?;
        Self::parse(text, &format!("grid preset '{name}'"))
    }

    /// Parses and validates a grid configuration (TOML, the presets' layout); errors name
    /// `source_name` and the field.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, ConfigError> {
        let err = |message: String| ConfigError {
            set: None,
            source_name: source_name.to_owned(),
            message,
        };
        let config: GridConfig = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        // Validate through the run configs it produces.
        config.pretrain_config().validate().map_err(err)?;
        for run in grid_runs() {
            config.run_config(&run).validate().map_err(err)?;
        }
        if config.cont.eval_every == 0 {
            return Err(err("continue.eval_every must be at least 1".into()));
        }
        Ok(config)
    }

    fn train(&self, steps: u64, batch: usize, lr: f32) -> crate::config::TrainConfig {
        // The rate as a TOML value (`nan` and `inf` spelled as TOML spells them, so that a
        // bad rate reaches validation and is refused by name).
        let lr = toml::Value::Float(f64::from(lr));
        toml::from_str(&format!(
            "steps = {steps}\nbatch = {batch}\nlr = {lr}\nseed = 7\n"
        ))
        .expect("a complete [train] table")
    }

    /// The pretraining run: knowledge-base corpus, no quantization.
    pub fn pretrain_config(&self) -> RunConfig {
        RunConfig {
            model: self.model.clone(),
            train: self.train(self.pretrain.steps, self.pretrain.batch, self.pretrain.lr),
            qat: QatConfig::default(),
            data: DataConfig {
                corpus: "kb".into(),
                ..self.data.clone()
            },
        }
    }

    /// The configuration of one grid run.
    pub fn run_config(&self, run: &GridRun) -> RunConfig {
        let lr = if run.high_lr {
            self.cont.lr_high
        } else {
            self.cont.lr_low
        };
        let qat = match run.estimator {
            None => QatConfig::default(),
            Some(est) => QatConfig {
                enabled: true,
                warmup_steps: if run.warmup {
                    self.cont.qat_warmup_steps
                } else {
                    0
                },
                scaling: ScalingConfig {
                    estimator: est,
                    ..self.scaling.clone()
                },
                ..QatConfig::default()
            },
        };
        RunConfig {
            model: self.model.clone(),
            train: self.train(self.cont.steps, self.cont.batch, lr),
            qat,
            data: DataConfig {
                corpus: "web".into(),
                ..self.data.clone()
            },
        }
    }

    /// The probes (from the same knowledge base as the pretraining corpus).
    pub fn probes(&self) -> ProbeSet {
        ProbeSet::for_data(&self.data)
    }
}

/// One run of the grid.
#[derive(Clone, Debug, PartialEq)]
pub struct GridRun {
    /// Folder name.
    pub name: String,
    /// The estimator (None: the high-precision baseline).
    pub estimator: Option<EstimatorSpec>,
    /// High or low learning rate.
    pub high_lr: bool,
    /// With the high-precision warmup.
    pub warmup: bool,
    /// Which setting of the paper it stands for.
    pub paper: &'static str,
}

/// The runs: two baselines, four estimators at both learning rates without warmup, and the
/// two that matter with warmup at the low learning rate.
pub fn grid_runs() -> Vec<GridRun> {
    let est = |s: &str| Some(s.parse::<EstimatorSpec>().expect("known estimator"));
    let mut runs = vec![
        GridRun {
            name: "baseline-high".into(),
            estimator: None,
            high_lr: true,
            warmup: false,
            paper: "BF16 baseline, lr 1e-4",
        },
        GridRun {
            name: "baseline-low".into(),
            estimator: None,
            high_lr: false,
            warmup: false,
            paper: "BF16 baseline, lr 1e-5",
        },
    ];
    for (short, spec, paper_hi, paper_lo) in [
        (
            "most_recent",
            "most_recent",
            "HiF8 most-recent, lr 1e-4 (saturation + forgetting)",
            "HiF8 most-recent, lr 1e-5 (saturation)",
        ),
        (
            "ema",
            "ema(0.1)",
            "HiF8 exponential smoothing, lr 1e-4",
            "HiF8 exponential smoothing, lr 1e-5",
        ),
        (
            "max_window",
            "max_window(64)",
            "HiF8 max-window(64), lr 1e-4 (forgetting)",
            "HiF8 max-window(64), lr 1e-5, no warmup",
        ),
        (
            "current",
            "current",
            "HiF8 current-tensor scaling, lr 1e-4",
            "HiF8 current-tensor scaling, lr 1e-5",
        ),
    ] {
        runs.push(GridRun {
            name: format!("{short}-high"),
            estimator: est(spec),
            high_lr: true,
            warmup: false,
            paper: paper_hi,
        });
        runs.push(GridRun {
            name: format!("{short}-low"),
            estimator: est(spec),
            high_lr: false,
            warmup: false,
            paper: paper_lo,
        });
    }
    runs.push(GridRun {
        name: "most_recent-low-warmup".into(),
        estimator: est("most_recent"),
        high_lr: false,
        warmup: true,
        paper: "HiF8 most-recent + 500-step warmup, lr 1e-5",
    });
    runs.push(GridRun {
        name: "max_window-low-warmup".into(),
        estimator: est("max_window(64)"),
        high_lr: false,
        warmup: true,
        paper: "the paper's fix: max-window(64) + warmup + lr 1e-5",
    });
    runs
}

/// Progress of the grid, for the caller to show.
pub trait GridProgress {
    /// A phase started (`base` or a run name), `index` of `total`.
    fn start(&mut self, name: &str, index: usize, total: usize, skipped: bool);
    /// A step finished.
    fn step(&mut self, step: u64, steps: u64, loss: f32);
    /// The probes ran.
    fn probes(&mut self, scores: &ProbeScores);
}

/// No progress output (`&mut ()`): for callers that only want the result.
impl GridProgress for () {
    fn start(&mut self, _: &str, _: usize, _: usize, _: bool) {}
    fn step(&mut self, _: u64, _: u64, _: f32) {}
    fn probes(&mut self, _: &ProbeScores) {}
}
