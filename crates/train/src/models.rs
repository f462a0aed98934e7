//! The models a run starts from or writes, and their formats: safetensors checkpoints
//! (`checkpoint`), tokenizers (`tokenizer`), Hugging Face Llama folders (`hf`), GGUF files
//! (`gguf`), and `source`: a model a user brings opened in one place (`ModelSource::open`)
//! and applied to a run's config. Adding a model format touches this folder only: a
//! submodule that reads it into an `HfModel`, and one branch in `source`.

pub mod checkpoint;
pub mod gguf;
pub mod hf;
pub mod source;
pub mod tokenizer;
