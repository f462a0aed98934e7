//! `grid --engine`: the engine the grid's flags name.

use std::path::PathBuf;

use anyhow::Result;
use hif8lab_lab::grid;

use super::{Engine, GridArgs, TORCH_OPTIONS};

impl GridArgs {
    /// Whether a flag of [`TORCH_OPTIONS`] is given.
    pub(super) fn torch_options_given(&self) -> bool {
        self.nproc != 1
            || self.python.is_some()
            || self.faithful
            || self.micro_batch.is_some()
            || self.data.is_some()
            || !self.torch_arg.is_empty()
    }

    /// The engine `--engine` names, with its options; those options without `--engine
    /// torch` are refused (they would be ignored).
    pub(super) fn engine(&self) -> Result<grid::Engine> {
        Ok(match self.engine {
            Engine::Lab if self.torch_options_given() => {
                anyhow::bail!("{TORCH_OPTIONS} are options of --engine torch")
            }
            Engine::Lab => grid::Engine::Lab,
            Engine::Torch => grid::Engine::Torch(grid::torch::TorchEngine {
                python: self
                    .python
                    .clone()
                    .or_else(|| std::env::var_os("HIF8LAB_PYTHON").map(PathBuf::from))
                    .unwrap_or_else(|| "python3".into()),
                nproc: self.nproc as usize,
                faithful: self.faithful,
                hif8lab: std::env::current_exe().ok(),
                micro_batch: self.micro_batch.map(|m| m as usize),
                data: self.data.clone(),
                extra: self.torch_arg.clone(),
            }),
        })
    }
}
