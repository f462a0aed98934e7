//! The paper's experiment grid at laptop scale: pretrain a base model on the knowledge-base
//! corpus, then continue on the bursty web corpus from that base with identical data order
//! under each estimator, learning rate and warmup; score probes; report APE, relative drops,
//! saturation counts and a verdict per claim of the paper.
//!
//! Folder layout: `<out>/base/` (pretraining run, checkpoint, probes), `<out>/runs/<name>/`
//! (one run folder each, plus `probes.jsonl`), `<out>/results.md`, `<out>/results.csv`.
//! A run whose `summary.json` says `finished` is skipped on re-run (resumable).

use hif8lab_format::{Format, Overflow};
use hif8lab_scaling::ScalingConfig;
use serde::{Deserialize, Serialize};

use hif8lab_train::config::{
    ConfigError, DataConfig, ModelConfig, Precision, QatConfig, RunConfig,
};
use hif8lab_train::eval::{ProbeSet, ape, relative_drop};
pub use hif8lab_train::run::{RunSummary, SummaryBuilder};
use hif8lab_train::trainer::ProbeScores;
// What training a grid needs (natively; the browser reads a grid's data only).
#[cfg(not(target_arch = "wasm32"))]
use {
    hif8lab_engine::Backend,
    hif8lab_train::driver::{Event, Schedule, Sink},
    hif8lab_train::models::checkpoint::{self, Checkpoint},
    hif8lab_train::run::folder::RunFolder,
    hif8lab_train::run::{RunStatus, write_atomic},
    hif8lab_train::trainer::TrainError,
    std::path::{Path, PathBuf},
    std::sync::Arc,
};

mod cells;
mod data;
pub mod dose;
mod judge;
pub mod manipulation;
#[cfg(not(target_arch = "wasm32"))]
mod placebo;
pub mod plan;
#[cfg(not(target_arch = "wasm32"))]
mod quantizers;
#[cfg(not(target_arch = "wasm32"))]
pub mod real;
#[cfg(not(target_arch = "wasm32"))]
mod report;
mod results;
#[cfg(not(target_arch = "wasm32"))]
mod runner;
mod saturation;
#[cfg(not(target_arch = "wasm32"))]
pub mod torch;
mod verdicts;

// The results' tests judge whole grids (judge.rs) and read the verdicts' table.
#[cfg(test)]
use verdicts::claims_markdown;

pub use cells::{
    CONTROL_RUN, CellKey, GridRun, all_runs, control_run, e4m3_runs, grid_runs, sham_run,
};
pub use data::{DATA_FILE, GridData, GridDataRun};
pub use results::{
    GridResults, PAIRED_TEST, ResultRow, base_run, compare, drop_stat, forgetting_excess,
};
#[cfg(not(target_arch = "wasm32"))]
pub use runner::{
    Engine, pretrain, recompute, results_of, run_grid, run_grid_from, run_grid_with,
    train_from_base,
};
pub use verdicts::{
    APE_HIDES, APE_LOSSLESS, Design, FORGETTING_MARGIN, KNOWLEDGE_CHANCE, LOSSLESS_MARGIN,
    SATURATION_RATIO, arm_of, discordance, drop_part, forgetting_contrast, forgetting_vs_base,
};

/// The sum of the per-estimator counts of the estimators of the kind `name` names
/// (`max_window` counts `max_window(64)`; matched by the parsed spec, not by spelling).
pub fn count_of_kind(pairs: &[(String, u64)], name: &str) -> u64 {
    let kind = hif8lab_scaling::EstimatorKind::of(name);
    pairs
        .iter()
        .filter(|(n, _)| kind.is_some() && hif8lab_scaling::EstimatorKind::of(n) == kind)
        .map(|(_, v)| *v)
        .sum()
}

/// The folder name of a grid run at seed `k` (seed 0 keeps the run's own name).
pub fn seed_name(name: &str, k: usize) -> String {
    if k == 0 {
        name.to_owned()
    } else {
        format!("{name}-seed{k}")
    }
}

/// The seed of the continued-training text of every grid run and seed (`train.seed` of
/// seed 0, so that seed 0 reads the text it read before seeds were separated).
pub const GRID_CORPUS_SEED: u64 = 7;

/// Grid presets compiled into the binary.
pub const GRID_PRESETS: [(&str, &str); 7] = [
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
    (
        "real-smollm2",
        include_str!("../../../assets/presets/real-smollm2.toml"),
    ),
    (
        "real-smollm2-quick",
        include_str!("../../../assets/presets/real-smollm2-quick.toml"),
    ),
    (
        "real-smollm2-dose",
        include_str!("../../../assets/presets/real-smollm2-dose.toml"),
    ),
    (
        "real-smollm2-perturb",
        include_str!("../../../assets/presets/real-smollm2-perturb.toml"),
    ),
];

/// A real pretrained model as the grid's base, in place of pretraining one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseModel {
    /// A model name of `scripts/get-model.sh` (`smollm2-135m`: the file it puts in the
    /// cache folder) or the path of a GGUF file or a Hugging Face folder.
    pub model: String,
    /// A damage applied to the model's weights once, before the base is probed and any run
    /// continues from it, by the function `hif8lab calibrate-probe` uses
    /// ([`crate::damage::perturb`]: gate, up and down of the quantized blocks):
    /// `hif8:K` (HiF8 per tensor with its scale K× too large) or `noise:F` (Gaussian noise
    /// of F × each tensor's RMS). Absent or `none`: the weights as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perturb: Option<String>,
    /// The seed of a `noise:` damage (a `hif8:` damage draws nothing).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub perturb_seed: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[cfg(not(target_arch = "wasm32"))]
impl BaseModel {
    /// The damage `perturb` names (`None` for none).
    pub fn damage(&self) -> Result<crate::damage::Perturbation, hif8lab_format::UnknownName> {
        self.perturb
            .as_deref()
            .map_or(Ok(crate::damage::Perturbation::None), str::parse)
    }
}

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
    /// Also run the low-rate estimator cells in E4M3 (target 448, saturating), so that
    /// clipping is seen beside HiF8 ([`e4m3_runs`]).
    #[serde(default)]
    pub e4m3: bool,
    /// Also run the sham ([`sham_run`]): max_window-low with a window of 65 calls, a change
    /// that should not matter, for a placebo judged within each data order.
    #[serde(default)]
    pub sham: bool,
}

/// A positive control: max_window(64) at the low rate with its estimate made 2^−`margin`
/// times too small and overflow clipped, for a few steps and data orders — a damage the
/// probes must see, or they cannot answer whether saturation costs knowledge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlPhase {
    /// Steps (probed once, at the end).
    pub steps: u64,
    /// Data orders it runs in (the first ones of the grid's).
    pub orders: usize,
    /// The scaling margin (negative: the scale 2^−margin times too large).
    pub margin: i32,
}

/// A grid configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridConfig {
    /// Model sizes (as in a run config; with a `[base]` model, its shape, checked against
    /// the model's own).
    pub model: ModelConfig,
    /// Pretraining (a grid has this or `[base]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pretrain: Option<PretrainPhase>,
    /// A real pretrained model the runs continue from (no pretraining): its knowledge is
    /// probed with the general-knowledge set ([`hif8lab_train::eval::GENERAL_KNOWLEDGE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseModel>,
    /// Continued training.
    #[serde(rename = "continue")]
    pub cont: ContinuePhase,
    /// Knowledge base size and corpus length.
    #[serde(default)]
    pub data: DataConfig,
    /// Scaling settings shared by every QAT run (the estimator is set per run).
    #[serde(default)]
    pub scaling: ScalingConfig,
    /// A positive control run ([`ControlPhase`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<ControlPhase>,
    /// `train.precision` of the continued-training runs, baselines included: `"f32"` or
    /// `"bf16"` (the paper's BF16 baseline). Written at the top of the file, before the
    /// tables. The report says which its runs used.
    #[serde(default, skip_serializing_if = "is_f32")]
    pub precision: Precision,
}

fn is_f32(p: &Precision) -> bool {
    *p == Precision::F32
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
        match (&config.pretrain, &config.base) {
            (None, None) => {
                return Err(err(
                    "a grid needs [pretrain] (pretrain a base) or [base] (a real model)".into(),
                ));
            }
            (Some(_), Some(_)) => {
                return Err(err(
                    "[pretrain] and [base] exclude each other: a grid continues from a base \
                     it pretrains or from a real model"
                        .into(),
                ));
            }
            (Some(_), None) => config
                .pretrain_config()
                .validate()
                .map_err(|e| err(e.message))?,
            (None, Some(b)) if b.model.trim().is_empty() => {
                return Err(err(
                    "base.model must name a model (smollm2-135m or a path)".into()
                ));
            }
            // (A damage is applied natively only: the browser reads a grid's data.)
            #[cfg(not(target_arch = "wasm32"))]
            (None, Some(b)) => {
                b.damage().map_err(|e| err(format!("base.perturb: {e}")))?;
            }
            #[cfg(target_arch = "wasm32")]
            (None, Some(_)) => {}
        }
        // Validate through the run configs it produces.
        for run in config.runs() {
            config
                .run_config(&run)
                .validate()
                .map_err(|e| err(e.message))?;
        }
        if config.cont.eval_every == 0 {
            return Err(err("continue.eval_every must be at least 1".into()));
        }
        Ok(config)
    }

    fn train(&self, steps: u64, batch: usize, lr: f32) -> hif8lab_train::config::TrainConfig {
        // The rate as a TOML value (`nan` and `inf` spelled as TOML spells them, so that a
        // bad rate reaches validation and is refused by name).
        let lr = toml::Value::Float(f64::from(lr));
        toml::from_str(&format!(
            "steps = {steps}\nbatch = {batch}\nlr = {lr}\nseed = 7\n"
        ))
        .expect("a complete [train] table")
    }

    /// The pretraining phase (none with a `[base]` model: zero steps).
    pub fn pretrain_phase(&self) -> PretrainPhase {
        self.pretrain.clone().unwrap_or(PretrainPhase {
            steps: 0,
            batch: self.cont.batch,
            lr: 0.0,
        })
    }

    /// The runs of this grid: the paper's cells ([`grid_runs`]), and with `continue.e4m3`
    /// their E4M3 twins ([`e4m3_runs`]).
    pub fn runs(&self) -> Vec<GridRun> {
        let mut runs = grid_runs();
        if self.cont.e4m3 {
            runs.extend(e4m3_runs());
        }
        if self.control.is_some() {
            runs.push(control_run());
        }
        if self.cont.sham {
            runs.push(sham_run());
        }
        runs
    }

    /// The pretraining run: knowledge-base corpus, no quantization.
    pub fn pretrain_config(&self) -> RunConfig {
        let p = self.pretrain_phase();
        RunConfig {
            model: self.model.clone(),
            train: self.train(p.steps, p.batch, p.lr),
            qat: QatConfig::default(),
            data: DataConfig {
                corpus: hif8lab_train::config::Corpus::Kb,
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
                scaling: match (run.format, &self.control) {
                    (Format::HiF8, Some(c)) if run.control => ScalingConfig {
                        estimator: est,
                        margin: c.margin,
                        overflow: Overflow::Saturate,
                        ..self.scaling.clone()
                    },
                    (Format::HiF8, _) => ScalingConfig {
                        estimator: est,
                        ..self.scaling.clone()
                    },
                    // E4M3 at its natural target, clipping what lands above its max.
                    (f, _) => ScalingConfig {
                        estimator: est,
                        format: f,
                        target: f.facts().natural_target,
                        overflow: Overflow::Saturate,
                        ..self.scaling.clone()
                    },
                },
                ..QatConfig::default()
            },
        };
        let steps = match &self.control {
            Some(c) if run.control => c.steps,
            _ => self.cont.steps,
        };
        RunConfig {
            model: self.model.clone(),
            train: hif8lab_train::config::TrainConfig {
                precision: self.precision,
                ..self.train(steps, self.cont.batch, lr)
            },
            qat,
            data: DataConfig {
                corpus: hif8lab_train::config::Corpus::Web,
                // One text for every seed: a seed varies the data order alone.
                corpus_seed: Some(self.data.corpus_seed.unwrap_or(GRID_CORPUS_SEED)),
                ..self.data.clone()
            },
        }
    }

    /// The probes (from the same knowledge base as the pretraining corpus).
    pub fn probes(&self) -> ProbeSet {
        ProbeSet::for_data(&self.data)
    }
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
