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

use hif8lab_train::checkpoint::Checkpoint;
use hif8lab_train::config::ModelConfig;
use hif8lab_train::{RunConfig, hf};

use crate::HifApp;
#[cfg(not(target_arch = "wasm32"))]
use crate::egui;

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
        let context = config
            .model
            .context
            .min(self.model.max_positions.unwrap_or(self.model.context));
        config.model = ModelConfig {
            context,
            ..self.model.clone()
        };
        config.data.tokenizer = self.tokenizer.clone();
        config.train.init_from = Some(self.source.clone());
        config.validate()?;
        Ok(config)
    }
}

impl HifApp {
    /// Opens a Hugging Face folder or a GGUF file (natively).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_hf_dir(&mut self, dir: &std::path::Path) {
        let result = hf::load_any(dir).map_err(|e| e.to_string()).and_then(|m| {
            let tokenizer = match &m.tokenizer {
                Some(p) => hif8lab_train::tokenizer::Tokenizer::read(p)?.0.setting(p),
                None if m.config.model.vocab == 256 => "bytes".into(),
                None => return Err(format!("{}: no tokenizer.json", dir.display())),
            };
            Ok(HfStart {
                name: dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| dir.display().to_string()),
                source: std::fs::canonicalize(dir)
                    .unwrap_or_else(|_| dir.to_owned())
                    .display()
                    .to_string(),
                model: m.config.model,
                weights: Arc::new(m.weights),
                tokenizer,
            })
        });
        self.set_hf(result);
    }

    /// Opens a Hugging Face model from its files (the browser's file picker): `config.json`,
    /// every `.safetensors` file, and `tokenizer.json` (the byte tokenizer in the browser).
    pub fn open_hf_files(&mut self, files: &[(String, Vec<u8>)]) {
        let result = (|| {
            let (_, config) = files
                .iter()
                .find(|(n, _)| base(n) == "config.json")
                .ok_or("no config.json among the files")?;
            let config = hf::parse_config(
                std::path::Path::new("config.json"),
                &String::from_utf8_lossy(config),
            )
            .map_err(|e| e.to_string())?;
            let mut tensors = Vec::new();
            for (name, bytes) in files.iter().filter(|(n, _)| n.ends_with(".safetensors")) {
                let ck = Checkpoint::from_bytes(name, bytes).map_err(|e| e.to_string())?;
                tensors.extend(
                    ck.tensors
                        .into_iter()
                        .map(|t| (std::path::PathBuf::from(base(name)), t)),
                );
            }
            if tensors.is_empty() {
                return Err("no .safetensors files among the files".to_owned());
            }
            let weights = hf::select_weights(
                std::path::Path::new("(the chosen files)"),
                &config.model,
                tensors,
            )
            .map_err(|e| e.to_string())?;
            let tokenizer = match files.iter().find(|(n, _)| base(n) == "tokenizer.json") {
                Some((name, bytes)) => {
                    match hif8lab_train::tokenizer::Tokenizer::from_json(
                        name,
                        &String::from_utf8_lossy(bytes),
                    )? {
                        hif8lab_train::tokenizer::Tokenizer::Bytes => "bytes".to_owned(),
                        #[allow(unreachable_patterns)]
                        _ => {
                            return Err(format!(
                                "{name}: open the folder in the desktop app for this tokenizer \
                                 (from files, only the byte tokenizer)"
                            ));
                        }
                    }
                }
                None if config.model.vocab == 256 => "bytes".into(),
                None => return Err("no tokenizer.json among the files".into()),
            };
            Ok(HfStart {
                name: "Hugging Face model".into(),
                source: "(files)".into(),
                model: config.model,
                weights: Arc::new(weights),
                tokenizer,
            })
        })();
        self.set_hf(result);
    }

    /// Opens what was dropped on the window (natively; the browser page uses its file
    /// picker): a folder as a Hugging Face model or a run folder, files as a run or trace.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_dropped(&mut self, ctx: &egui::Context) {
        let (dirs, files): (Vec<std::path::PathBuf>, Vec<(String, Vec<u8>)>) = ctx.input(|i| {
            let dirs = i
                .raw
                .dropped_files
                .iter()
                .map(|f| f.path().to_path_buf())
                // A GGUF file is a model, opened like a Hugging Face folder.
                .filter(|p| p.is_dir() || hif8lab_train::gguf::is_gguf(p))
                .collect();
            let files = i
                .raw
                .dropped_files
                .iter()
                .filter(|f| !hif8lab_train::gguf::is_gguf(f.path()))
                .filter_map(|f| Some((f.path().display().to_string(), f.bytes().ok()?)))
                .collect();
            (dirs, files)
        });
        for dir in dirs {
            if hf::is_model_path(&dir) {
                self.open_hf_dir(&dir);
            } else {
                self.form.open_path = dir.display().to_string();
                self.open_run();
            }
        }
        if !files.is_empty() {
            self.open_files(&files);
        }
    }

    fn set_hf(&mut self, result: Result<HfStart, String>) {
        match result {
            Ok(m) => {
                self.messages.status = format!(
                    "Opened {} ({:.2} M parameters, {} layers, d_model {}): Start continues \
                     training it with the settings below.",
                    m.name,
                    m.parameters() as f64 / 1e6,
                    m.model.layers,
                    m.model.d_model
                );
                self.form.hf_model = Some(m);
                self.form.check = None;
            }
            Err(e) => self.messages.status = format!("Cannot open the model: {e}"),
        }
    }

    /// The run the form describes: the preset with its fields, and the opened Hugging Face
    /// model, if any.
    pub fn run_config(&self) -> Result<RunConfig, String> {
        let config = self.form.settings.config()?;
        match &self.form.hf_model {
            Some(m) => m.apply(config),
            None => Ok(config),
        }
    }
}

/// Whether dropped or picked files are a Hugging Face model (a config.json and weights).
pub fn is_hf_files(files: &[(String, Vec<u8>)]) -> bool {
    files.iter().any(|(n, _)| base(n) == "config.json")
        && files.iter().any(|(n, _)| n.ends_with(".safetensors"))
}

/// The file name of a picked or dropped file's path.
fn base(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}
