//! Continuing training from a Hugging Face Llama folder: natively a folder path (typed,
//! dropped on the window, or `--init-from DIR`); in the browser the folder's files from the
//! file picker (config.json, the .safetensors files, tokenizer.json). The model replaces the
//! preset's `[model]`; training, quantization and data settings stay the form's.
//!
//! In the browser everything is held in wasm memory (32-bit: at most 4 GiB, in practice
//! about 2): the files, their f32 copy, and the training state (weights, gradients and two
//! AdamW moments, 16 bytes per parameter), so models up to about 50 M parameters; and only
//! the byte tokenizer (other tokenizers need the desktop app).

use std::sync::Arc;

use hif8lab_train::RunConfig;
use hif8lab_train::config::ModelConfig;
use hif8lab_train::models::checkpoint::Checkpoint;

/// A Hugging Face model to continue training from.
#[derive(Clone)]
pub struct HfStart {
    /// Shown name (the folder's).
    pub name: String,
    /// Where it came from (`train.init_from`).
    pub source: String,
    /// The model (its `context` is max_position_embeddings).
    pub model: ModelConfig,
    /// Its weights.
    pub weights: Arc<Checkpoint>,
    /// `data.tokenizer`: `bytes` or the path of its tokenizer.json.
    pub tokenizer: String,
}

impl HfStart {
    /// Parameters of the model.
    pub fn parameters(&self) -> usize {
        hif8lab_train::model::param_specs(&self.model)
            .iter()
            .map(|(_, s, _)| s.iter().product::<usize>())
            .sum()
    }

    /// `config` with this model: its `[model]` (the form's context, at most the model's),
    /// its tokenizer, and where it started from.
    pub fn apply(&self, mut config: RunConfig) -> Result<RunConfig, String> {
        hif8lab_train::models::source::apply_model(
            &mut config,
            &self.model,
            &self.tokenizer,
            &self.source,
        );
        config.validate().map_err(|e| e.message)?;
        Ok(config)
    }
}

/// Whether dropped or picked files are a Hugging Face model (a config.json and weights).
pub fn is_hf_files(files: &[(String, Vec<u8>)]) -> bool {
    files.iter().any(|(n, _)| base(n) == "config.json")
        && files.iter().any(|(n, _)| n.ends_with(".safetensors"))
}

/// The file name of a picked or dropped file's path.
pub(crate) fn base(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}
