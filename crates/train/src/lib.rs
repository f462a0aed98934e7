//! # hif8lab-train
//!
//! A compact Llama-style model trained on any `hif8lab_engine::Backend` (the CPU oracle or
//! the WGSL kernels), with the paper's quantization wired in exactly: W8A8(G8) fake-quantized
//! MLP (optionally attention) projections in the middle blocks, per-tensor delayed scaling
//! through the GPU quantizer bank, every estimator's shadow statistics at every call, a
//! high-precision warmup before quantization switches on.
//!
//! - [`config`]: run configuration (TOML, presets, `--set` overrides);
//! - [`data`]: byte tokenizer, a run's training text, seeded sampler;
//! - [`corpus`]: the knowledge base, the bursty continued-training corpus, the probes;
//! - [`model`]: parameters and the explicit forward/backward passes;
//! - [`trainer`]: one optimizer step, enqueued asynchronously, and its reports;
//! - [`open`]: the one way a run is opened (`open_run`: fresh, from a base, resumed);
//! - [`driver`]: the one run driver (steps, probes, checkpoints, stop) and its sinks;
//! - [`folder`]: the run-folder sink, the only writer of run folders;
//! - [`run`]: the run folder (config, metrics, trace, summary);
//! - [`memory`]: the memory a config needs, checked before allocating;
//! - [`checkpoint`]: safetensors checkpoints with optimizer and quantizer state;
//! - [`hf`]: Hugging Face Llama folders in (`--init-from`, `eval`) and out (`export hf`);
//! - [`infer`]: a model without optimizer state: windowed loss, logits, sampling;
//! - [`tokenizer`]: the byte tokenizer and Hugging Face `tokenizer.json` files;
//! - [`resample`]: the cluster bootstrap behind each probe score's interval;
//! - [`eval`]: what a probe evaluation measured (scores, intervals, per-item marks);
//! - [`kb`]: the knowledge base's shape its corpus and probes share;
//! - [`rng`]: the one random generator (splitmix64);
//! - [`source`]: a model a user brings (Hugging Face folder or GGUF file), opened in one place.
//!
//! The experiments built on the trainer (grid, lessons, claims and their statistics) live in
//! `hif8lab-lab`, the UI in `hif8lab-app`, the command line in `hif8lab-cli`; none is here.

pub mod config;
pub mod corpus;
pub mod data;
pub mod driver;
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
