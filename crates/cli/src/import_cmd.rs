//! `hif8lab import gguf FILE --out DIR`: a GGUF Llama file (llama.cpp's format) written as
//! the Hugging Face folder `transformers` loads with no custom code.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use hif8lab_train::hf::{self, ExportDtype};

use crate::Outcome;

/// What `import` reads.
#[derive(Subcommand, Debug)]
pub enum ImportCommand {
    /// A GGUF Llama file → a Hugging Face folder (config.json, model.safetensors,
    /// tokenizer.json, tokenizer_config.json, generation_config.json).
    Gguf(GgufArgs),
}

/// Arguments of `import gguf`.
#[derive(Args, Debug)]
pub struct GgufArgs {
    /// The `.gguf` file.
    file: PathBuf,
    /// The folder to write (must not exist, or be empty).
    #[arg(long)]
    out: PathBuf,
    /// Weight element type of model.safetensors: f32 (the dequantized values exactly), bf16
    /// or f16.
    #[arg(long, default_value = "f32")]
    dtype: ExportDtype,
}

pub fn run(cmd: ImportCommand) -> Result<Outcome> {
    let ImportCommand::Gguf(args) = cmd;
    let c = hif8lab_train::gguf::read(&args.file)?;
    let weights = c.weight_list();
    let parts = c.export_parts(args.dtype, &serde_json::to_string(&c.tokenizer_json)?);
    let files = hf::write_folder(&args.out, &parts, &weights)?;
    let params: usize = weights.iter().map(|w| w.2.len()).sum();
    let types: Vec<String> = c
        .tensor_types
        .iter()
        .map(|(t, n)| format!("{n} {t}"))
        .collect();
    eprintln!(
        "wrote {} ({}) from {}: {} parameters, {} layers, d_model {}, vocab {}{}; tensors: {}",
        args.out.display(),
        files.join(", "),
        args.file.display(),
        params,
        c.model.layers,
        c.model.d_model,
        c.model.vocab,
        if c.model.tie_embeddings { ", tied" } else { "" },
        types.join(", ")
    );
    Ok(Outcome::Ok)
}
