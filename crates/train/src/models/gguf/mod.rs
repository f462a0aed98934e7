//! GGUF files (llama.cpp's model format) in: the container ([`mod@file`]), ggml's element types
//! and their dequantization ([`dequant`]), and the conversion of a Llama file into the parts
//! of a Hugging Face folder ([`convert`]), as `transformers`' GGUF loader does it.
//!
//! No crate on crates.io was used for the container: the maintained readers either do not
//! dequantize the k-quants or bring a whole tensor library; the format is small, and this
//! parser bounds every length by the bytes that remain (it is fuzzed in the test suite).

pub mod convert;
pub mod dequant;
pub mod file;
pub mod tokenizer;
pub mod write;

pub use convert::Converted;
pub use file::{GgufError, GgufFile};

use std::path::Path;

/// Whether `path` is a GGUF file (by its first four bytes).
pub fn is_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    path.is_file()
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && &magic == b"GGUF"
}

/// Reads and converts a GGUF Llama file (errors name the file and the key or tensor).
#[cfg(not(target_arch = "wasm32"))]
pub fn read(path: &Path) -> Result<Converted, crate::models::hf::HfError> {
    let e = |m: String| crate::models::hf::HfError {
        file: path.display().to_string(),
        message: m,
    };
    if path.is_dir() {
        return Err(e("is a folder, not a GGUF file".into()));
    }
    let bytes = crate::models::checkpoint::map_file(path).map_err(|x| e(x.message))?;
    let parsed = GgufFile::parse(&bytes).map_err(|x| e(x.to_string()))?;
    convert::convert(&parsed, &bytes).map_err(|x| e(x.to_string()))
}
