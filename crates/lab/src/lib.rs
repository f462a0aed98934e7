//! # hif8lab-lab
//!
//! The experiments built on `hif8lab-train`'s trainer, and how their verdicts are reached:
//!
//! - [`grid`]: the paper's experiment grid (pretrain a base, continue under each estimator,
//!   learning rate and warmup, score probes) and its report;
//! - [`lesson`]: the teaching scenarios with their claims, judged from runs;
//! - [`evals`]: evaluations made by other tools (lm-eval-harness folders, training logs,
//!   benchmark summaries) judged with the same claims, and the paper's own numbers;
//! - [`calibrate`]: the probes calibrated without training (the real base's quantized weights
//!   damaged at known sizes, and the dose–response of every probe score);
//! - [`damage`]: a model's quantized weights damaged at a known size (the calibration's and
//!   a perturbed grid base's one function);
//! - [`claims`]: a claim, its statistic, interval and threshold, fixed before the data — the
//!   one type behind grid verdicts and lessons;
//! - [`stats`]: intervals, paired and exact tests, power (with `hif8lab_train::eval::resample`'s
//!   cluster bootstrap, which the probe scorer also uses).
//!
//! Nothing here steps a trainer itself: runs go through `hif8lab_train::driver`.

#[cfg(not(target_arch = "wasm32"))]
pub mod calibrate;
pub mod claims;
pub mod damage;
pub mod evals;
pub mod grid;
pub mod lesson;
#[cfg(not(target_arch = "wasm32"))]
pub mod perturb_study;
pub mod stats;
