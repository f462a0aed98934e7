//! # hif8lab-train
//!
//! A compact Llama-style model trained on any `hif8lab_engine::Backend` (the CPU oracle or
//! the WGSL kernels), with the paper's quantization wired in exactly: W8A8(G8) fake-quantized
//! MLP (optionally attention) projections in the middle blocks, per-tensor delayed scaling
//! through the GPU quantizer bank, every estimator's shadow statistics at every call, a
//! high-precision warmup before quantization switches on.
//!
//! - [`config`]: run configuration (TOML, presets, `--set` overrides);
//! - [`data`]: a run's training text and tokens, the seeded sampler;
//! - [`corpus`]: the generated corpora (the knowledge base's pretraining text, the bursty
//!   continued-training text);
//! - [`model`]: parameters and the explicit forward/backward passes, the QAT placement;
//! - [`trainer`]: one optimizer step, enqueued asynchronously, and its reports;
//! - [`error`]: the errors of training and inference (`TrainError`, `InferError`) and their
//!   exit-code classes;
//! - [`open`]: the one way a run is opened (`open_run`: fresh, from a base, resumed);
//! - [`driver`]: the one run driver (steps, probes, checkpoints, stop) and its sinks;
//! - [`run`]: the run folder (config, metrics, trace, summary) and its sink `run::folder`,
//!   the only writer of run folders;
//! - [`lock`]: the run folder's one-writer lock; [`io`]: atomic writes;
//! - [`memory`]: the memory a config needs, checked before allocating;
//! - [`models`]: the models a run starts from or writes: safetensors checkpoints
//!   (`models::checkpoint`), tokenizers (`models::tokenizer`), Hugging Face Llama folders in
//!   and out (`models::hf`), GGUF files (`models::gguf`), and a model a user brings opened in
//!   one place (`models::source`);
//! - [`infer`]: a model without optimizer state: windowed loss, logits, sampling, probing;
//! - [`eval`]: the probe sets and their lm-eval-style scoring (`eval::probes`), the completion
//!   set of a pretrained model (`eval::regularities`), probe files (`eval::probe_file`), what
//!   an evaluation measured (`eval::scores`) and the cluster bootstrap of its intervals
//!   (`eval::resample`);
//! - [`kb`]: the knowledge base's shape its corpus and probes share;
//! - [`rng`]: the one random generator (splitmix64).
//!
//! The experiments built on the trainer (grid, lessons, claims and their statistics) live in
//! `hif8lab-lab`, the UI in `hif8lab-app`, the command line in `hif8lab-cli`; none is here.

pub mod config;
pub mod corpus;
pub mod data;
pub mod driver;
pub mod error;
pub mod eval;
#[cfg(not(target_arch = "wasm32"))]
pub mod infer;
pub mod io;
pub mod kb;
pub mod lock;
pub mod memory;
pub mod model;
pub mod models;
pub mod open;
pub mod rng;
pub mod run;
pub mod trainer;

pub use config::RunConfig;
pub use trainer::{ProbeScores, StepReport, TrainError, Trainer};
