//! A model a user brings, opened in one place: a Hugging Face folder ([`crate::hf`]) or a
//! GGUF file ([`crate::gguf`], converted in memory, its tokenizer kept in a cache folder so
//! runs can name it). Depends on both formats; neither depends on it.

use std::path::{Path, PathBuf};

#[cfg(not(target_arch = "wasm32"))]
use crate::hf::{ExportDtype, HfError, HfModel, parse_config};

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
    (path.is_dir() && crate::hf::is_hf_dir(path)) || is_gguf_path(path)
}

/// A GGUF file by its magic, or anything named `.gguf` that is not a Hugging Face folder.
fn is_gguf_path(path: &Path) -> bool {
    let named = path
        .extension()
        .is_some_and(|x| x.eq_ignore_ascii_case("gguf"));
    crate::gguf::is_gguf(path) || (named && !(path.is_dir() && crate::hf::is_hf_dir(path)))
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

/// Reads a model a user brings: a Hugging Face folder ([`load`]) or a GGUF file (converted
/// in memory; its tokenizer files written to [`cache_dir`] under a name from their contents).
#[cfg(not(target_arch = "wasm32"))]
pub fn load_any(path: &Path) -> Result<HfModel, HfError> {
    if !is_gguf_path(path) {
        if path.is_dir() {
            return crate::hf::load(path);
        }
        return Err(err(
            path,
            "not a Hugging Face folder (config.json) or a GGUF file",
        ));
    }
    let c = crate::gguf::read(path)?;
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
