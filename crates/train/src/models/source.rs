//! A model a user brings, opened in one place: a Hugging Face folder ([`crate::models::hf`]) or a
//! GGUF file ([`crate::models::gguf`], converted in memory, its tokenizer kept in a cache folder so
//! runs can name it). Depends on both formats; neither depends on it.

use std::path::{Path, PathBuf};

#[cfg(not(target_arch = "wasm32"))]
use crate::models::hf::{ExportDtype, HfError, HfModel, parse_config};

#[cfg(not(target_arch = "wasm32"))]
fn err(file: &Path, message: impl Into<String>) -> HfError {
    HfError {
        file: file.display().to_string(),
        message: message.into(),
    }
}

/// Whether `path` is a model this project opens as a Hugging Face model: a folder with
/// `config.json`, a GGUF file, or anything named `.gguf` (read as one, so that a damaged
/// magic or a folder of that name is said as a GGUF problem).
pub fn is_model_path(path: &Path) -> bool {
    (path.is_dir() && crate::models::hf::is_hf_dir(path)) || is_gguf_path(path)
}

/// A GGUF file by its magic, or anything named `.gguf` that is not a Hugging Face folder.
fn is_gguf_path(path: &Path) -> bool {
    let named = path
        .extension()
        .is_some_and(|x| x.eq_ignore_ascii_case("gguf"));
    crate::models::gguf::is_gguf(path)
        || (named && !(path.is_dir() && crate::models::hf::is_hf_dir(path)))
}

/// The folder where converted GGUF tokenizers are kept (`HIF8LAB_CACHE`, else
/// `$XDG_CACHE_HOME/hif8lab`, else `~/.cache/hif8lab`).
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("HIF8LAB_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("hif8lab");
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache").join("hif8lab"))
        .unwrap_or_else(|| std::env::temp_dir().join("hif8lab-cache"))
}

/// Reads a model a user brings: a Hugging Face folder ([`crate::models::hf::load`]) or a GGUF file (converted
/// in memory; its tokenizer files written to [`cache_dir`] under a name from their contents).
#[cfg(not(target_arch = "wasm32"))]
pub fn load_any(path: &Path) -> Result<HfModel, HfError> {
    if !is_gguf_path(path) {
        if path.is_dir() {
            return crate::models::hf::load(path);
        }
        return Err(err(
            path,
            "not a Hugging Face folder (config.json) or a GGUF file",
        ));
    }
    let c = crate::models::gguf::read(path)?;
    let text = serde_json::to_string(&c.tokenizer_json).unwrap_or_default();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    let tok = cached_tokenizer(path, &stem, &text)?;
    let parse_config = parse_config(path, &c.config_json.to_string())?;
    Ok(HfModel {
        dir: path.to_owned(),
        config: parse_config,
        weights: c.weights,
        tokenizer: Some(tok),
        tokenizer_config: Some(c.tokenizer_config),
        generation_config: Some(c.generation_config),
        dtype: Some(ExportDtype::F32),
        notes: Vec::new(),
    })
}

/// The converted tokenizer `text` of the GGUF file `gguf` as a file runs can name: in
/// [`cache_dir`] under a name from the content (checksum and length), its content checked
/// on every use (a stale or damaged copy is written again), and where the cache cannot be
/// written, in the temporary folder instead (a read-only cache never stops a command).
#[cfg(not(target_arch = "wasm32"))]
fn cached_tokenizer(gguf: &Path, stem: &str, text: &str) -> Result<PathBuf, HfError> {
    let name = format!(
        "{stem}-{:08x}-{}",
        crc32fast::hash(text.as_bytes()),
        text.len()
    );
    let place = |root: PathBuf| -> Result<PathBuf, String> {
        let dir = root.join("gguf-tokenizers").join(&name);
        let tok = dir.join("tokenizer.json");
        if std::fs::read(&tok).is_ok_and(|have| have == text.as_bytes()) {
            return Ok(tok);
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        crate::io::write_atomic(&tok, text.as_bytes())
            .map_err(|e| format!("{}: {e}", tok.display()))?;
        Ok(tok)
    };
    place(cache_dir()).or_else(|cache_error| {
        place(std::env::temp_dir().join("hif8lab-cache")).map_err(|tmp_error| {
            err(
                gguf,
                format!(
                    "its converted tokenizer could be written neither to the cache \
                     ({cache_error}) nor to the temporary folder ({tmp_error})"
                ),
            )
        })
    })
}

/// A model a user brings, opened once with its tokenizer: what the CLI's commands,
/// `train --init-from`, the app and the real-model grid open, and how a run is made to train
/// it ([`ModelSource::apply_to`], or [`ModelSource::sets`] where a run records `--set`s).
#[cfg(not(target_arch = "wasm32"))]
pub struct ModelSource {
    /// The path as given.
    pub path: PathBuf,
    /// The model: config, weights, the files an export keeps.
    pub model: HfModel,
    /// Its tokenizer (the byte tokenizer for a vocabulary of 256 without tokenizer.json).
    pub tokenizer: crate::models::tokenizer::Tokenizer,
    /// The `tokenizer.json` text, when it has one.
    pub tokenizer_json: Option<String>,
}

#[cfg(not(target_arch = "wasm32"))]
impl ModelSource {
    /// Opens a Hugging Face folder or a GGUF file ([`load_any`]) and reads its tokenizer; a
    /// model without `tokenizer.json` is refused unless its vocabulary is the byte
    /// tokenizer's 256.
    pub fn open(path: &Path) -> Result<ModelSource, HfError> {
        let model = load_any(path)?;
        let vocab = model.config.model.vocab;
        let (tokenizer, tokenizer_json) = match &model.tokenizer {
            Some(p) => {
                // Its errors name the file already.
                let (t, text) =
                    crate::models::tokenizer::Tokenizer::read(p).map_err(|e| HfError {
                        file: p.display().to_string(),
                        message: e.to_string(),
                    })?;
                (t, Some(text))
            }
            None if vocab == 256 => (crate::models::tokenizer::Tokenizer::Bytes, None),
            None => {
                return Err(err(
                    path,
                    format!(
                        "no tokenizer.json (the model's vocabulary is {vocab}; only the byte \
                         tokenizer, 256, needs none)"
                    ),
                ));
            }
        };
        Ok(ModelSource {
            path: path.to_owned(),
            model,
            tokenizer,
            tokenizer_json,
        })
    }

    /// Its `data.tokenizer`: `bytes`, or the absolute path of its tokenizer.json.
    pub fn tokenizer_setting(&self) -> String {
        match &self.model.tokenizer {
            Some(p) => self.tokenizer.setting(p),
            None => crate::config::BYTE_TOKENIZER.into(),
        }
    }

    /// Its absolute path (`train.init_from`).
    pub fn init_from(&self) -> String {
        std::fs::canonicalize(&self.path)
            .unwrap_or_else(|_| self.path.clone())
            .display()
            .to_string()
    }

    /// Makes `config` train this model ([`apply_model`]); then checks the tokenizer fits
    /// the vocabulary.
    pub fn apply_to(&self, config: &mut crate::RunConfig) -> Result<(), HfError> {
        self.check_vocab()?;
        apply_model(
            config,
            &self.model.config.model,
            &self.tokenizer_setting(),
            &self.init_from(),
        );
        Ok(())
    }

    /// The `--set`s that make a run of context `context` train this model (what
    /// `train --init-from` records): the same settings as [`ModelSource::apply_to`].
    pub fn sets(&self, context: usize) -> Result<Vec<String>, HfError> {
        self.check_vocab()?;
        let m = &self.model.config.model;
        let toml_string = |s: &str| toml::Value::String(s.to_owned()).to_string();
        let mut sets = vec![
            format!("model.vocab={}", m.vocab),
            format!("model.d_model={}", m.d_model),
            format!("model.layers={}", m.layers),
            format!("model.heads={}", m.heads),
            format!("model.kv_heads={}", m.kv_heads),
            format!("model.d_ff={}", m.d_ff),
            format!("model.context={}", model_context(context, m)),
            format!("model.norm_eps={:e}", m.norm_eps),
            format!("model.rope_theta={:?}", m.rope_theta),
            format!("model.tie_embeddings={}", m.tie_embeddings),
            format!(
                "model.max_positions={}",
                m.max_positions.unwrap_or(m.context)
            ),
            format!("train.init_from={}", toml_string(&self.init_from())),
        ];
        if let Some(r) = m.rope_scaling {
            sets.push(format!(
                "model.rope_scaling={{factor={:?}, low_freq_factor={:?}, high_freq_factor={:?}, \
                 original_max_positions={}}}",
                r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_positions
            ));
        }
        let setting = self.tokenizer_setting();
        if setting != crate::config::BYTE_TOKENIZER {
            sets.push(format!("data.tokenizer={}", toml_string(&setting)));
        }
        Ok(sets)
    }

    fn check_vocab(&self) -> Result<(), HfError> {
        let vocab = self.model.config.model.vocab;
        match &self.model.tokenizer {
            Some(p) if self.tokenizer.vocab_size() > vocab => Err(err(
                p,
                format!(
                    "the tokenizer has {} tokens, config.json's vocab_size is {vocab}",
                    self.tokenizer.vocab_size()
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// The window of a run of context `context` on `model`: at most its positions.
pub fn model_context(context: usize, model: &crate::config::ModelConfig) -> usize {
    context.min(model.max_positions.unwrap_or(model.context))
}

/// `config` made to train a brought `model`: its `[model]` (the config's context, at most the
/// model's positions; `max_positions` stated), `data.tokenizer` and `train.init_from`.
/// Training, quantization and data settings stay the config's. (The browser's file picker
/// applies models this way too.)
pub fn apply_model(
    config: &mut crate::RunConfig,
    model: &crate::config::ModelConfig,
    tokenizer: &str,
    init_from: &str,
) {
    config.model = crate::config::ModelConfig {
        context: model_context(config.model.context, model),
        max_positions: Some(model.max_positions.unwrap_or(model.context)),
        ..model.clone()
    };
    config.data.tokenizer = tokenizer.to_owned();
    config.train.init_from = Some(init_from.to_owned());
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::RunConfig;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures")
            .join(name)
    }

    /// `apply_to` (the app, the grid) and `sets` (what `train --init-from` records) make the
    /// same run, for a Hugging Face folder (rope scaling, a BPE tokenizer) and a GGUF file.
    #[test]
    fn apply_to_and_sets_make_the_same_run() {
        for (name, context) in [
            ("hf/tiny-llama3-rope-f32", 32),
            ("hf/tiny-gqa-tied-bf16", 4096),
            ("gguf/tiny-llama.gguf", 16),
        ] {
            let source = ModelSource::open(&fixture(name)).unwrap();
            let text = crate::config::PRESETS[0].1;
            let mut applied = RunConfig::parse("smoke", text, &[]).unwrap();
            applied.model.context = context;
            source.apply_to(&mut applied).unwrap();
            let sets = source.sets(context).unwrap();
            let recorded = RunConfig::parse("smoke", text, &sets).unwrap();
            assert_eq!(applied, recorded, "{name}");
            assert_eq!(applied.model.vocab, source.model.config.model.vocab);
            assert!(applied.model.context <= context);
            assert_eq!(
                applied.train.init_from.as_deref(),
                Some(source.init_from().as_str())
            );
        }
    }

    #[test]
    fn a_model_without_a_tokenizer_is_refused_unless_bytes() {
        let dir = std::env::temp_dir().join(format!("hif8lab-source-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let from = fixture("hf/tiny-llama3-rope-f32");
        for e in std::fs::read_dir(&from).unwrap() {
            let e = e.unwrap();
            if e.file_name() != "tokenizer.json" {
                std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
            }
        }
        let vocab = crate::models::hf::load(&dir).unwrap().config.model.vocab;
        match ModelSource::open(&dir) {
            Ok(s) => {
                assert_eq!(vocab, 256);
                assert_eq!(s.tokenizer_setting(), crate::config::BYTE_TOKENIZER);
            }
            Err(e) => {
                assert_ne!(vocab, 256);
                assert!(e.to_string().contains("no tokenizer.json"), "{e}");
                assert!(e.to_string().contains(&dir.display().to_string()), "{e}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
