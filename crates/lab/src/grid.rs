//! The paper's experiment grid at laptop scale: pretrain a base model on the knowledge-base
//! corpus, then continue on the bursty web corpus from that base with identical data order
//! under each estimator, learning rate and warmup; score probes; report APE, relative drops,
//! saturation counts and a verdict per claim of the paper.
//!
//! Folder layout: `<out>/base/` (pretraining run, checkpoint, probes), `<out>/runs/<name>/`
//! (one run folder each, plus `probes.jsonl`), `<out>/results.md`, `<out>/results.csv`.
//! A run whose `summary.json` says `finished` is skipped on re-run (resumable).

use hif8lab_format::{Format, Overflow};
use hif8lab_scaling::{EstimatorSpec, ScalingConfig};
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
mod verdicts;

// The results' tests judge whole grids (judge.rs) and read the verdicts' table.
#[cfg(test)]
use verdicts::claims_markdown;

pub use data::{DATA_FILE, GridData, GridDataRun};
pub use results::{
    GridResults, PAIRED_TEST, ResultRow, base_run, compare, drop_stat, forgetting_excess,
};
#[cfg(not(target_arch = "wasm32"))]
pub use runner::{pretrain, recompute, results_of, run_grid, run_grid_from, train_from_base};
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

/// The positive control's run name (its cell's name in [`CellKey::TABLE`]).
pub const CONTROL_RUN: &str = CellKey::TABLE[10].0;

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
    /// The number format of its quantizers.
    pub format: Format,
    /// The positive control ([`ControlPhase`]).
    pub control: bool,
}

/// A grid cell's identity: what makes one run of the grid another run (its name is only a
/// label of it). A run's matched baseline is found by its key, never by comparing names,
/// learning rates or the string "none".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellKey {
    /// The estimator (None: the high-precision baseline).
    pub estimator: Option<EstimatorSpec>,
    /// High or low learning rate.
    pub high_lr: bool,
    /// With the high-precision warmup.
    pub warmup: bool,
    /// The quantizers' number format (HiF8 for the baselines, which quantize nothing).
    pub format: Format,
    /// The positive control (its estimate deliberately too small).
    pub control: bool,
}

impl GridRun {
    /// This run's cell.
    pub fn key(&self) -> CellKey {
        CellKey {
            estimator: self.estimator,
            high_lr: self.high_lr,
            warmup: self.warmup,
            format: self.format,
            control: self.control,
        }
    }

    /// The cell of its matched high-precision baseline.
    pub fn baseline_key(&self) -> CellKey {
        self.key().baseline()
    }
}

/// A cell of the table: an estimator (none: the baseline), the rate, warmup, format, control.
const fn cell(
    estimator: Option<EstimatorSpec>,
    high_lr: bool,
    warmup: bool,
    format: Format,
    control: bool,
) -> CellKey {
    CellKey {
        estimator,
        high_lr,
        warmup,
        format,
        control,
    }
}

const MR: Option<EstimatorSpec> = Some(EstimatorSpec::MostRecent);
const MW: Option<EstimatorSpec> = Some(EstimatorSpec::MaxWindow(Some(64)));
const MW65: Option<EstimatorSpec> = Some(EstimatorSpec::MaxWindow(Some(65)));

impl CellKey {
    /// The high-precision baseline at the high rate.
    pub const BASELINE_HIGH: CellKey = cell(None, true, false, Format::HiF8, false);
    /// The high-precision baseline at the low rate.
    pub const BASELINE_LOW: CellKey = cell(None, false, false, Format::HiF8, false);
    /// most_recent at the high rate.
    pub const MOST_RECENT_HIGH: CellKey = cell(MR, true, false, Format::HiF8, false);
    /// most_recent at the low rate.
    pub const MOST_RECENT_LOW: CellKey = cell(MR, false, false, Format::HiF8, false);
    /// max_window(64) at the high rate.
    pub const MAX_WINDOW_HIGH: CellKey = cell(MW, true, false, Format::HiF8, false);
    /// max_window(64) at the low rate.
    pub const MAX_WINDOW_LOW: CellKey = cell(MW, false, false, Format::HiF8, false);
    /// most_recent with the warmup at the low rate.
    pub const MOST_RECENT_LOW_WARMUP: CellKey = cell(MR, false, true, Format::HiF8, false);
    /// The paper's fix: max_window(64) with the warmup at the low rate.
    pub const MAX_WINDOW_LOW_WARMUP: CellKey = cell(MW, false, true, Format::HiF8, false);
    /// most_recent's E4M3 twin at the low rate.
    pub const MOST_RECENT_LOW_E4M3: CellKey = cell(MR, false, false, Format::E4M3, false);
    /// max_window(64)'s E4M3 twin at the low rate.
    pub const MAX_WINDOW_LOW_E4M3: CellKey = cell(MW, false, false, Format::E4M3, false);
    /// The positive control (max_window(64) at the low rate, its estimate too small).
    pub const CONTROL_LOW: CellKey = cell(MW, false, false, Format::HiF8, true);
    /// The sham: max_window with a window of 65 at the low rate (a change that should not
    /// matter).
    pub const SHAM_LOW: CellKey = cell(MW65, false, false, Format::HiF8, false);

    /// Every cell a grid may hold, with its name: the one table of cell names (runs,
    /// reports, lessons and the app name cells by it, and find them by key).
    pub const TABLE: [(&'static str, CellKey); 12] = [
        ("baseline-high", CellKey::BASELINE_HIGH),
        ("baseline-low", CellKey::BASELINE_LOW),
        ("most_recent-high", CellKey::MOST_RECENT_HIGH),
        ("most_recent-low", CellKey::MOST_RECENT_LOW),
        ("max_window-high", CellKey::MAX_WINDOW_HIGH),
        ("max_window-low", CellKey::MAX_WINDOW_LOW),
        ("most_recent-low-warmup", CellKey::MOST_RECENT_LOW_WARMUP),
        ("max_window-low-warmup", CellKey::MAX_WINDOW_LOW_WARMUP),
        ("most_recent-low-e4m3", CellKey::MOST_RECENT_LOW_E4M3),
        ("max_window-low-e4m3", CellKey::MAX_WINDOW_LOW_E4M3),
        ("control-low", CellKey::CONTROL_LOW),
        ("max_window65-low", CellKey::SHAM_LOW),
    ];

    /// The cell's name in [`Self::TABLE`] (a cell outside it: its fields, spelled out).
    pub fn name(self) -> String {
        match CellKey::TABLE.iter().find(|(_, k)| *k == self) {
            Some((name, _)) => (*name).to_owned(),
            None => format!("{self:?}"),
        }
    }

    /// The cell a name names; an unknown name is an error naming the cells there are.
    pub fn named(name: &str) -> Result<CellKey, hif8lab_format::UnknownName> {
        CellKey::TABLE
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k)
            .ok_or_else(|| hif8lab_format::UnknownName {
                kind: "grid cell",
                given: name.to_owned(),
                expected: CellKey::TABLE.map(|(n, _)| n).join(", "),
            })
    }

    /// The cell of the high-precision baseline matched to this one: the same learning
    /// rate, no estimator, no warmup.
    pub fn baseline(self) -> CellKey {
        CellKey {
            estimator: None,
            high_lr: self.high_lr,
            warmup: false,
            format: Format::HiF8,
            control: false,
        }
    }
}

/// The runs: the paper's cells. Two high-precision baselines, most_recent and
/// max_window(64) at both learning rates without warmup, and both at the low rate with the
/// high-precision warmup. (Exponential smoothing and current scaling are measured on every
/// call of these runs as shadows.) The grid's own rates are `continue.lr_high` and
/// `continue.lr_low`; `paper` names the paper's setting each run stands in for.
pub fn grid_runs() -> Vec<GridRun> {
    [
        (
            CellKey::BASELINE_HIGH,
            "BF16 baseline at the high rate (paper: 1e-4)",
        ),
        (
            CellKey::BASELINE_LOW,
            "BF16 baseline at the low rate (paper: 1e-5)",
        ),
        (
            CellKey::MOST_RECENT_HIGH,
            "HiF8 most-recent, high rate (paper: 1e-4; saturation + forgetting)",
        ),
        (
            CellKey::MOST_RECENT_LOW,
            "HiF8 most-recent, low rate (paper: 1e-5; saturation)",
        ),
        (
            CellKey::MAX_WINDOW_HIGH,
            "HiF8 max-window(64), high rate (paper: 1e-4; forgetting)",
        ),
        (
            CellKey::MAX_WINDOW_LOW,
            "HiF8 max-window(64), low rate (paper: 1e-5), no warmup",
        ),
        (
            CellKey::MOST_RECENT_LOW_WARMUP,
            "HiF8 most-recent + warmup, low rate (paper: 500-step warmup, 1e-5)",
        ),
        (
            CellKey::MAX_WINDOW_LOW_WARMUP,
            "the paper's fix: max-window(64) + warmup, low rate (paper: 1e-5)",
        ),
    ]
    .into_iter()
    .map(|(key, paper)| GridRun::of(key, paper))
    .collect()
}

impl GridRun {
    /// The run of cell `key`, named by the table.
    pub fn of(key: CellKey, paper: &'static str) -> GridRun {
        GridRun {
            name: key.name(),
            estimator: key.estimator,
            high_lr: key.high_lr,
            warmup: key.warmup,
            paper,
            format: key.format,
            control: key.control,
        }
    }
}

/// The E4M3 twins of the low-rate estimator cells (`continue.e4m3`): the same runs with
/// E4M3 quantizers at target 448, clipping above it, so that clipping is seen where HiF8's
/// range absorbs an outlier.
pub fn e4m3_runs() -> Vec<GridRun> {
    vec![
        GridRun::of(
            CellKey::MOST_RECENT_LOW_E4M3,
            "E4M3 most-recent, low rate (clipping where HiF8 absorbs)",
        ),
        GridRun::of(
            CellKey::MAX_WINDOW_LOW_E4M3,
            "E4M3 max-window(64), low rate (clipping where HiF8 absorbs)",
        ),
    ]
}

/// Every run a grid may hold ([`grid_runs`] then [`e4m3_runs`]).
pub fn all_runs() -> Vec<GridRun> {
    let mut runs = grid_runs();
    runs.extend(e4m3_runs());
    runs.push(control_run());
    runs.push(sham_run());
    runs
}

/// The sham (`continue.sham`): max_window-low with a window of 65 calls instead of 64, the
/// only change; its contrast with max_window-low within each data order is a placebo that
/// can fail.
pub fn sham_run() -> GridRun {
    GridRun::of(
        CellKey::SHAM_LOW,
        "sham: max-window(65), low rate, no warmup (a change that should not matter)",
    )
}

/// The positive control ([`ControlPhase`]): max_window(64) at the low rate, no warmup, its
/// estimate too small by the control's margin, overflow clipped.
pub fn control_run() -> GridRun {
    GridRun::of(
        CellKey::CONTROL_LOW,
        "positive control: max-window(64) with its estimate made too small (clipping on purpose)",
    )
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

#[cfg(test)]
mod cell_tests {
    use super::*;

    #[test]
    fn every_run_is_named_by_the_cell_table_and_found_by_its_key() {
        let runs = all_runs();
        assert_eq!(runs.len(), CellKey::TABLE.len());
        for (run, (name, key)) in runs.iter().zip(CellKey::TABLE) {
            assert_eq!(run.name, name);
            assert!(run.key() == key, "{name}");
            assert_eq!(key.name(), name);
            assert!(CellKey::named(name) == Ok(key), "{name}");
        }
        // The table's keys are distinct: a lookup by key finds one cell.
        for (i, (_, a)) in CellKey::TABLE.iter().enumerate() {
            for (_, b) in &CellKey::TABLE[i + 1..] {
                assert!(a != b);
            }
        }
        assert_eq!(CONTROL_RUN, CellKey::CONTROL_LOW.name());
        let e = CellKey::named("max_window-low-wamrup")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown grid cell 'max_window-low-wamrup'")
                && e.contains("max_window-low-warmup"),
            "{e}"
        );
    }
}
