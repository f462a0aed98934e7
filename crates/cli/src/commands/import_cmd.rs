//! `hif8lab import gguf FILE --out DIR`: a GGUF Llama file (llama.cpp's format) written as
//! the Hugging Face folder `transformers` loads with no custom code.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use hif8lab_train::models::hf::{self, ExportDtype};

use crate::output::Outcome;

/// What `import` reads.
#[derive(Subcommand, Debug)]
pub enum ImportCommand {
    /// A GGUF Llama file → a Hugging Face folder (config.json, model.safetensors,
    /// tokenizer.json, tokenizer_config.json, generation_config.json).
    Gguf(GgufArgs),
    /// A training log (`step=N | loss=X | …` lines, JSONL or CSV) → a CSV of its steps.
    Log(crate::commands::evals_cmd::LogArgs),
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
    /// With `--dtype f16`: write weights beyond f16's range as ±inf instead of refusing.
    #[arg(long)]
    allow_overflow: bool,
}

pub fn run(cmd: ImportCommand) -> Result<Outcome> {
    let args = match cmd {
        ImportCommand::Gguf(args) => args,
        ImportCommand::Log(args) => return crate::commands::evals_cmd::run_import_log(args),
    };
    let c = hif8lab_train::models::gguf::read(&args.file)?;
    let weights = c.weight_list();
    let in_file = |message: String| hf::HfError {
        file: args.file.display().to_string(),
        message,
    };
    if args.dtype == ExportDtype::F16 {
        for note in hf::F16Range::of(&weights)
            .check(args.allow_overflow)
            .map_err(|e| in_file(e.to_string()))?
        {
            eprintln!("{note}");
        }
    }
    let tokenizer_json = serde_json::to_string(&c.tokenizer_json)?;
    // The tokenizer as the folder's readers will build it, before anything is written.
    hif8lab_train::models::tokenizer::Tokenizer::from_json("tokenizer.json", &tokenizer_json)
        .map_err(|e| in_file(format!("the converted tokenizer does not load: {e}")))?;
    let parts = c.export_parts(args.dtype, &tokenizer_json);
    let existed = args.out.is_dir();
    let files = hf::write_folder(&args.out, &parts, &weights)?;
    // What was written, loaded back as `eval`, `train --init-from` and the app load it
    // (weights beyond f16's range, allowed, are the one thing it refuses by design).
    let overflow_allowed = args.allow_overflow && args.dtype == ExportDtype::F16;
    let check = if overflow_allowed {
        hf::parse_config(
            &args.out.join("config.json"),
            &std::fs::read_to_string(args.out.join("config.json"))?,
        )
        .map(drop)
    } else {
        hf::load(&args.out).map(drop)
    };
    if let Err(e) = check {
        let _ = std::fs::remove_dir_all(&args.out);
        if existed {
            let _ = std::fs::create_dir_all(&args.out);
        }
        return Err(anyhow::anyhow!(
            "{}: the folder written does not load back ({e}); nothing was kept",
            args.out.display()
        ));
    }
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
