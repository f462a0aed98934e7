//! The commands, one module each (`train_cmd` with its `--resume`), and what several share:
//! opening a model and a backend (`model_cmds`), plots (`plots`), benchmark helpers.

pub mod bench;
pub mod bench_gemm;
pub mod bench_kernels;
pub mod bench_sample;
pub mod bench_train;
pub mod calibrate_cmd;
pub mod codec;
pub mod evals_cmd;
pub mod grid_cmd;
pub mod import_cmd;
pub mod model_cmds;
pub mod perturb_cmd;
pub mod plots;
pub mod probe_cmd;
pub mod scaling_cmds;
pub mod sweep_cmd;
pub mod train_cmd;
