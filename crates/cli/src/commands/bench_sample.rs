//! `hif8lab bench sample MODEL`: generation speed with the key/value cache: the prompt's
//! tokens per second (processed once), the generated tokens per second (one position per
//! token, greedy), and the process's peak resident memory.

use std::time::Instant;

use anyhow::{Result, bail};
use hif8lab_engine::{Backend, BackendChoice, with_backend};
use hif8lab_train::config::ModelConfig;
use hif8lab_train::infer::Model;
use hif8lab_train::models::checkpoint::Checkpoint;

use crate::commands::model_cmds::{check_memory, on_backend, open_source, window};

/// The prompt text, repeated to the length asked for.
const PROMPT: &str = "The history of science is the study of how people came to understand the \
natural world. Early astronomers tracked the motions of the planets, and physicians recorded the \
course of diseases. ";

/// Arguments of `bench sample`.
#[derive(clap::Args, Debug)]
pub struct BenchSampleArgs {
    /// A run folder, checkpoint, Hugging Face folder or GGUF file.
    model: std::path::PathBuf,
    /// Prompt tokens (a fixed English text, repeated and cut to this many tokens).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    prompt_tokens: u64,
    /// Tokens to generate (greedy).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    tokens: u64,
    /// `cpu`, `gpu`, `gpu:ADAPTER` or `auto` (the GPU when an adapter exists).
    #[arg(long, default_value = "cpu")]
    backend: BackendChoice,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Peak resident memory of this process (VmHWM), in bytes, where the system reports it.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| {
        let kb = l.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?;
        kb.trim().parse::<u64>().ok().map(|kb| kb * 1024)
    })
}

pub fn run(args: BenchSampleArgs) -> Result<()> {
    let mut src = open_source(&args.model, None)?;
    let m = window(&src, None)?;
    let (p, n) = (args.prompt_tokens as usize, args.tokens as usize);
    if p + n > m.context {
        bail!(
            "--prompt-tokens {p} + --tokens {n} exceed the model's context {}",
            m.context
        );
    }
    let once = src.tokenizer.encode(PROMPT).map_err(anyhow::Error::msg)?;
    if once.is_empty() {
        bail!("the model's tokenizer encodes the benchmark prompt as no tokens");
    }
    let ids: Vec<u32> = once.iter().copied().cycle().take(p).collect();
    check_memory(
        "bench sample",
        hif8lab_train::infer::sample_bytes(&m, p, p + n),
        "lower --prompt-tokens or --tokens",
    )?;
    let weights = std::mem::take(&mut src.weights);
    let path = src.path.display().to_string();
    on_backend(
        &args.backend,
        |be| with_backend!(be, b => measure(b, weights, m, &ids, n, &path, args.json)),
    )
}

fn measure<B: Backend>(
    backend: B,
    weights: Checkpoint,
    m: ModelConfig,
    prompt: &[u32],
    n: usize,
    path: &str,
    json: bool,
) -> Result<()> {
    let info = backend.info();
    let mut model = Model::new(backend, m, &weights, 1)?;
    drop(weights);
    // Warm-up (allocations, pipelines), then the timed run: the first token's time is the
    // prompt's (one pass over it), the rest one position each.
    model.sample(prompt, 2, 0.0, 0, 0, &mut |_| true)?;
    let start = Instant::now();
    let mut first: Option<f64> = None;
    let out = model.sample(prompt, n, 0.0, 0, 0, &mut |_| {
        if first.is_none() {
            first = Some(start.elapsed().as_secs_f64());
        }
        true
    })?;
    let total = start.elapsed().as_secs_f64();
    let prompt_s = first.unwrap_or(total);
    let gen_s = (total - prompt_s).max(1e-9);
    let doc = serde_json::json!({
        "model": path,
        "backend": info.kind,
        "adapter": info.adapter,
        "threads": hif8lab_engine::cpu::threads(),
        "prompt_tokens": prompt.len(),
        "generated_tokens": out.len(),
        "prompt_tokens_per_s": prompt.len() as f64 / prompt_s.max(1e-9),
        "generate_tokens_per_s": (out.len().saturating_sub(1)) as f64 / gen_s,
        "prompt_s": prompt_s,
        "generate_s": gen_s,
        "peak_rss_bytes": peak_rss(),
    });
    if json {
        crate::output::print_json(&doc)?;
    } else {
        crate::output::outln!(
            "{path} on {} '{}': prompt {} tokens at {:.1} tokens/s; generation {} tokens at {:.1} tokens/s; peak resident {:.2} GiB",
            info.kind,
            info.adapter,
            prompt.len(),
            doc["prompt_tokens_per_s"].as_f64().unwrap_or(0.0),
            out.len(),
            doc["generate_tokens_per_s"].as_f64().unwrap_or(0.0),
            peak_rss().unwrap_or(0) as f64 / f64::from(1u32 << 30)
        );
    }
    Ok(())
}
