//! `eval`, `sample` and `export hf`: a model from a run folder, a checkpoint or a Hugging Face
//! Llama folder; its loss on a text, text sampled from it, and its weights out in the form
//! `transformers` loads.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use hif8lab_engine::{AnyBackend, Backend, BackendChoice, with_backend};
use hif8lab_train::config::ModelConfig;
use hif8lab_train::infer::Model;
use hif8lab_train::models::checkpoint::Checkpoint;
use hif8lab_train::models::hf::{self, ExportDtype, ExportParts};
use hif8lab_train::models::tokenizer::Tokenizer;
use hif8lab_train::run::RunDir;
use hif8lab_train::{RunConfig, model};

use crate::output::Outcome;

/// A model to run: its sizes, weights, tokenizer, and (from a run) the run's config and the
/// checkpoint with its quantizer state.
pub struct Source {
    /// What was opened.
    pub path: PathBuf,
    /// Model sizes (`context`: the window).
    pub model: ModelConfig,
    /// The weights (model tensors under their names).
    pub weights: Checkpoint,
    /// Its tokenizer.
    pub tokenizer: Tokenizer,
    /// The run config, for a run folder or an hif8lab checkpoint.
    pub run: Option<RunConfig>,
    /// The Hugging Face `config.json` it came from, if any (kept by export).
    pub hf_config: Option<serde_json::Value>,
    /// The `tokenizer.json` text, when the tokenizer is not the byte tokenizer.
    pub tokenizer_json: Option<String>,
    /// The source's `tokenizer_config.json` (chat template, special tokens), kept by export.
    pub tokenizer_config: Option<serde_json::Value>,
    /// The source's `generation_config.json`, kept by export.
    pub generation_config: Option<serde_json::Value>,
    /// The element type the source's weights were stored in (export's default).
    pub dtype: Option<ExportDtype>,
}

/// An error of a command over the model at `path`, naming that model when the error does
/// not already (each thing said once).
pub fn naming(path: &Path) -> impl Fn(anyhow::Error) -> anyhow::Error + '_ {
    move |e| {
        let shown = path.display().to_string();
        if format!("{e:#}").contains(&shown) {
            e
        } else {
            e.context(shown)
        }
    }
}

/// Opens `RUN_DIR` (its newest valid checkpoint, or `step_N` with `step`), a checkpoint
/// file, a Hugging Face folder or a GGUF file.
pub fn open_source(path: &Path, step: Option<u64>) -> Result<Source> {
    let dir = RunDir::new(path);
    if path.is_dir() && dir.has_config() {
        let run = dir.config().map_err(anyhow::Error::msg)?;
        let ck_path = match step {
            Some(n) => {
                let p = path
                    .join("checkpoints")
                    .join(format!("step_{n}.safetensors"));
                if !p.is_file() {
                    let have: Vec<String> = hif8lab_train::models::checkpoint::list(path)
                        .iter()
                        .map(|(s, _)| s.to_string())
                        .collect();
                    bail!(
                        "--step {n}: {} does not exist (checkpoints of this run: {})",
                        p.display(),
                        if have.is_empty() {
                            "none".into()
                        } else {
                            have.join(", ")
                        }
                    );
                }
                p
            }
            None => {
                let (found, skipped) = hif8lab_train::models::checkpoint::newest_valid(
                    path,
                    &run.continuation_fingerprint(),
                );
                for s in skipped {
                    eprintln!("skipping {s}");
                }
                found.map(|f| f.path).with_context(|| {
                    format!(
                        "{}: no valid checkpoints/step_N.safetensors",
                        path.display()
                    )
                })?
            }
        };
        let weights = Checkpoint::load(&ck_path)?;
        return from_run(path, path, run, weights);
    }
    if hif8lab_train::models::source::is_model_path(path) {
        let s = hif8lab_train::models::source::ModelSource::open(path)?;
        for n in &s.model.notes {
            eprintln!("note: {n}");
        }
        let m = s.model;
        return Ok(Source {
            path: path.to_owned(),
            model: m.config.model.clone(),
            weights: m.weights,
            tokenizer: s.tokenizer,
            run: None,
            hf_config: Some(m.config.json),
            tokenizer_json: s.tokenizer_json,
            tokenizer_config: m.tokenizer_config,
            generation_config: m.generation_config,
            dtype: m.dtype,
        });
    }
    if path.is_file() {
        let weights = Checkpoint::load(path)?;
        let Some(text) = weights.metadata.get("config") else {
            bail!(
                "{}: not an hif8lab checkpoint (no 'config' in its metadata); for a Hugging Face \
                 model give its folder",
                path.display()
            );
        };
        let run = RunConfig::parse(
            &format!("{} (metadata 'config')", path.display()),
            text,
            &[],
        )?;
        let dir = path
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."))
            .to_owned();
        return from_run(path, &dir, run, weights);
    }
    bail!(
        "{}: not a run folder (config.toml), a Hugging Face folder (config.json), a GGUF file or \
         a checkpoint file",
        path.display()
    )
}

/// A run's model: its tokenizer (the copy the run folder keeps, else `data.tokenizer`) and
/// the `config.json` it started from, when it did.
fn from_run(path: &Path, dir: &Path, run: RunConfig, weights: Checkpoint) -> Result<Source> {
    let kept = dir.join("hf").join("tokenizer.json");
    let tokenizer_file = if kept.is_file() {
        Some(kept)
    } else if run.data.tokenizer != hif8lab_train::config::BYTE_TOKENIZER {
        Some(PathBuf::from(&run.data.tokenizer))
    } else {
        None
    };
    let (tokenizer, tokenizer_json) = match tokenizer_file {
        Some(p) => {
            let (t, text) = Tokenizer::read(&p).map_err(anyhow::Error::msg)?;
            (t, Some(text))
        }
        None => (Tokenizer::Bytes, None),
    };
    let kept_json = |name: &str| -> Result<Option<serde_json::Value>> {
        let p = dir.join("hf").join(name);
        match std::fs::read_to_string(&p) {
            Ok(t) => Ok(Some(
                serde_json::from_str(&t).with_context(|| format!("{}: not JSON", p.display()))?,
            )),
            Err(_) => Ok(None),
        }
    };
    let hf_config = kept_json("config.json")?;
    let dtype = hf_config.as_ref().and_then(hf::config_dtype);
    Ok(Source {
        path: path.to_owned(),
        model: run.model.clone(),
        weights,
        tokenizer,
        run: Some(run),
        hf_config,
        tokenizer_json,
        tokenizer_config: kept_json("tokenizer_config.json")?,
        generation_config: kept_json("generation_config.json")?,
        dtype,
    })
}

/// Arguments of `hif8lab eval`.
#[derive(Args, Debug)]
pub struct EvalArgs {
    /// A run folder, a checkpoint (`.safetensors` of a run), a Hugging Face Llama folder or
    /// a GGUF file.
    model: PathBuf,
    /// The UTF-8 text to score.
    #[arg(long)]
    text: PathBuf,
    /// `auto` (the GPU when an adapter exists, else the CPU, said so), `cpu`, `gpu` or
    /// `gpu:ADAPTER` (the adapter whose name contains ADAPTER).
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
    /// With the run's fake quantization and its saved quantizer state.
    #[arg(long)]
    quantized: bool,
    /// Window length (default: the run's context; a Hugging Face model's
    /// max_position_embeddings, at most 2048; never longer than the text).
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    context: Option<u64>,
    /// Windows per forward pass (default: as many as make up to 8,192 tokens, at most 4;
    /// never more than the text's windows).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    batch: Option<u64>,
    /// Encode the text without the tokenizer's special tokens (by default the text is
    /// encoded as `tokenizer(text)` does: BOS where the tokenizer adds it).
    #[arg(long)]
    no_special_tokens: bool,
    /// One JSON document: {"tokens", "loss", "perplexity", "bits_per_byte", "backend", …}.
    #[arg(long)]
    json: bool,
}

/// Arguments of `hif8lab sample`.
#[derive(Args, Debug)]
pub struct SampleArgs {
    /// A run folder, a checkpoint, a Hugging Face Llama folder or a GGUF file.
    model: PathBuf,
    /// Text to continue.
    #[arg(long, default_value = "")]
    prompt: String,
    /// Tokens to generate.
    #[arg(long, default_value_t = 200)]
    tokens: usize,
    /// Softmax temperature (0: always the most likely token).
    #[arg(long, default_value_t = 0.8)]
    temperature: f32,
    /// Sample among the K most likely tokens (0: all).
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    /// Seed of the draws (same seed, same text).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// `auto` (the GPU when an adapter exists, else the CPU, said so), `cpu`, `gpu` or
    /// `gpu:ADAPTER` (the adapter whose name contains ADAPTER).
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
    /// Window length (default as for `eval`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    context: Option<u64>,
    /// Encode the prompt without the tokenizer's special tokens.
    #[arg(long)]
    no_special_tokens: bool,
}

/// `hif8lab export hf RUN_DIR [--step N] --out DIR`.
#[derive(Args, Debug)]
pub struct ExportHfArgs {
    /// The run folder.
    run: PathBuf,
    /// The checkpoint `checkpoints/step_N.safetensors` (default: the newest valid one).
    #[arg(long)]
    step: Option<u64>,
    /// The folder to write (must not exist, or be empty).
    #[arg(long)]
    out: PathBuf,
    /// Weight element type: f32 (exact), bf16 or f16 (default: the source model's dtype when
    /// the run started from a Hugging Face model, else f32).
    #[arg(long)]
    dtype: Option<ExportDtype>,
    /// Write f16 weights even where values lie beyond f16's range (they become ±inf).
    #[arg(long)]
    allow_overflow: bool,
}

pub(crate) fn window(src: &Source, context: Option<u64>) -> Result<ModelConfig> {
    let mut m = src.model.clone();
    if src.run.is_none() {
        m.context = m.context.min(2048);
    }
    if let Some(c) = context {
        let c = c as usize;
        if let Some(max) = m.max_positions.filter(|max| c > *max) {
            bail!("--context {c} is longer than the model's max_position_embeddings {max}");
        }
        m.context = c;
    }
    Ok(m)
}

/// Runs `job` on the backend `choice` opens ([`AnyBackend::open`]: `auto` is the GPU when
/// there is one).
pub(crate) fn on_backend<T>(
    choice: &BackendChoice,
    job: impl FnOnce(AnyBackend) -> Result<T>,
) -> Result<T> {
    let any = AnyBackend::open(choice, &mut |n| eprintln!("note: {n}"))
        .with_context(|| format!("--backend {choice}"))?;
    job(any)
}

/// The token ids of `text` as the model's tokenizer encodes it for inference: with the
/// tokenizer's special tokens (its post-processor: BOS where it adds one) unless `plain`.
fn encode(src: &Source, text: &str, plain: bool) -> Result<Vec<u32>> {
    src.tokenizer
        .encode_with(text, !plain)
        .map_err(anyhow::Error::msg)
}

/// Refuses a job whose memory estimate exceeds the memory available now (as `train
/// --dry-run` checks a run), naming what it needs and what to change.
pub(crate) fn check_memory(what: &str, bytes: u64, hint: &str) -> Result<()> {
    if let Some(avail) = hif8lab_engine::host_memory_available()
        && bytes > avail
    {
        return Err(hif8lab_train::memory::DoesNotFit(format!(
            "{what} needs about {:.2} GiB, {:.2} GiB are available: {hint}",
            bytes as f64 / f64::from(1u32 << 30),
            avail as f64 / f64::from(1u32 << 30)
        ))
        .into());
    }
    Ok(())
}

pub fn run_eval(args: EvalArgs) -> Result<Outcome> {
    let opened = std::time::Instant::now();
    let mut src = open_source(&args.model, None)?;
    let text = std::fs::read(&args.text)
        .with_context(|| format!("--text: reading {}", args.text.display()))?;
    let text = hif8lab_train::data::corpus_text(&args.text, text).map_err(anyhow::Error::msg)?;
    let ids = if text.len() > 4 << 20 {
        // A long text: tokenized in pieces (the same ids) with a progress bar in MB.
        let bar = crate::commands::train_cmd::progress_bar(
            (text.len() >> 20) as u64,
            "MB tokenized",
            args.json,
        );
        let ids = src
            .tokenizer
            .encode_in_pieces(&text, !args.no_special_tokens, 1 << 20, &mut |done| {
                bar.set_position((done >> 20) as u64)
            })
            .map_err(anyhow::Error::msg)?;
        bar.finish_and_clear();
        ids
    } else {
        encode(&src, &text, args.no_special_tokens)?
    };
    if ids.len() < 2 {
        bail!(
            "--text {}: fewer than 2 tokens, nothing to predict",
            args.text.display()
        );
    }
    let mut m = window(&src, args.context)?;
    // Not longer than the text: a window of the whole text when it is shorter (windows are
    // never padded, so a longer context changes nothing but the memory it would take).
    m.context = m.context.min(ids.len() - 1).max(1);
    let windows = hif8lab_train::infer::windows(ids.len(), m.context).len();
    let batch = match args.batch {
        Some(b) => (b as usize).min(windows),
        None => (8192 / m.context).clamp(1, 4).min(windows),
    }
    .max(1);
    check_memory(
        &format!("eval (context {}, batch {batch})", m.context),
        hif8lab_train::infer::eval_bytes(&m, ids.len(), batch),
        "lower --context or --batch",
    )?;
    let special = !args.no_special_tokens;
    let first_bytes = src.tokenizer.decode(&ids[..1]).len();
    let bytes = text.len().saturating_sub(first_bytes).max(1);
    let how = EvalHow {
        batch,
        context_given: args.context.is_some(),
        quantized: args.quantized,
        bytes,
        json: args.json,
        special,
        opened,
    };
    // The weights move to the backend; the host copy is not kept.
    let weights = std::mem::take(&mut src.weights);
    on_backend(
        &args.backend,
        |be| with_backend!(be, b => eval_on(b, &src, weights, m, &ids, &how)),
    )
    .map_err(naming(&src.path))?;
    Ok(Outcome::Ok)
}

/// How `eval` runs and reports.
struct EvalHow {
    batch: usize,
    /// Whether the context was given (`--context`), not chosen.
    context_given: bool,
    quantized: bool,
    /// Bytes of text scored (for bits per byte).
    bytes: usize,
    json: bool,
    /// Whether the text was encoded with the tokenizer's special tokens.
    special: bool,
    /// When reading the model began (the load time reported).
    opened: std::time::Instant,
}

fn eval_on<B: Backend>(
    backend: B,
    src: &Source,
    weights: Checkpoint,
    mut m: ModelConfig,
    ids: &[u32],
    how: &EvalHow,
) -> Result<()> {
    let info = backend.info();
    // A device's largest buffer bounds the rows of logits one pass holds (a 49,152-token
    // vocabulary: 683 rows in 128 MiB): windows and batches are sized to fit it.
    let mut batch = how.batch;
    if let Some(max) = info.memory.max_tensor_bytes {
        let rows = (max / (m.vocab as u64 * 4).max(1)) as usize;
        if m.context > rows {
            if how.context_given {
                bail!(
                    "--context {}: the logits of one window ({} × {} f32) exceed the largest \
                     buffer of '{}' ({:.0} MiB); give --context {rows} or less, or --backend cpu",
                    m.context,
                    m.context,
                    m.vocab,
                    info.adapter,
                    max as f64 / f64::from(1u32 << 20)
                );
            }
            eprintln!(
                "note: windows of {rows} tokens (the logits of a longer one exceed the largest \
                 buffer of '{}')",
                info.adapter
            );
            m.context = rows.max(2);
        }
        batch = batch.min((rows / m.context).max(1));
    }
    let context = m.context;
    let mut model = Model::new(backend, m, &weights, batch)?;
    if how.quantized {
        let Some(run) = &src.run else {
            bail!(
                "--quantized needs a run folder or checkpoint (a Hugging Face folder has no quantizer state)"
            );
        };
        model = model.quantized(&run.qat, &weights)?;
    }
    drop(weights);
    let load_s = how.opened.elapsed().as_secs_f64();
    let clock = std::time::Instant::now();
    let targets = (ids.len() - 1) as u64;
    let bar = crate::commands::train_cmd::progress_bar(targets, "tokens", how.json);
    let r = model.eval_with(ids, &mut |done| bar.set_position(done))?;
    bar.finish_and_clear();
    let seconds = clock.elapsed().as_secs_f64();
    let loss = r.loss();
    let doc = serde_json::json!({
        "tokens": r.tokens,
        "loss": loss,
        "perplexity": loss.exp(),
        "bits_per_byte": r.loss_sum / std::f64::consts::LN_2 / how.bytes as f64,
        "backend": info.kind,
        "adapter": info.adapter,
        "context": context,
        "batch": batch,
        "add_special_tokens": how.special,
        "quantized": how.quantized,
        "model": src.path.display().to_string(),
        "tokens_per_s": r.tokens as f64 / seconds.max(1e-9),
        "load_s": load_s,
    });
    if how.json {
        crate::output::print_json(&doc)?;
    } else {
        crate::output::outln!(
            "{}: {} tokens, loss {:.4} nats/token, perplexity {:.3}, {:.4} bits/byte{} ({} '{}', \
             context {context}, {:.0} tokens/s)",
            src.path.display(),
            r.tokens,
            loss,
            loss.exp(),
            doc["bits_per_byte"].as_f64().unwrap_or(f64::NAN),
            if how.quantized { ", quantized" } else { "" },
            info.kind,
            info.adapter,
            doc["tokens_per_s"].as_f64().unwrap_or(0.0)
        );
    }
    Ok(())
}

pub fn run_sample(args: SampleArgs) -> Result<Outcome> {
    if !(args.temperature.is_finite() && args.temperature >= 0.0) {
        bail!(
            "--temperature must be a number ≥ 0, got {}",
            args.temperature
        );
    }
    let mut src = open_source(&args.model, None)?;
    let m = window(&src, args.context)?;
    let prompt = encode(&src, &args.prompt, args.no_special_tokens)?;
    if let Some(bad) = prompt.iter().find(|t| **t as usize >= m.vocab) {
        bail!(
            "--prompt: token id {bad} is outside the model's vocabulary {}",
            m.vocab
        );
    }
    let capacity = m
        .context
        .min(prompt.len().max(1).saturating_add(args.tokens))
        .max(1);
    // The positions generation can reach: the RoPE table and caches need no more.
    let mut m = m;
    m.context = capacity;
    check_memory(
        &format!("sample (context {capacity})"),
        hif8lab_train::infer::sample_bytes(&m, prompt.len().min(capacity), capacity),
        "lower --context or --tokens",
    )?;
    let weights = std::mem::take(&mut src.weights);
    on_backend(
        &args.backend,
        |be| with_backend!(be, b => sample_on(b, &src, weights, m, &prompt, &args)),
    )
    .map_err(naming(&src.path))?;
    Ok(Outcome::Ok)
}

fn sample_on<B: Backend>(
    backend: B,
    src: &Source,
    weights: Checkpoint,
    m: ModelConfig,
    prompt: &[u32],
    args: &SampleArgs,
) -> Result<()> {
    let mut model = Model::new(backend, m, &weights, 1)?;
    drop(weights);
    let mut out = std::io::stdout().lock();
    let mut failed: Option<std::io::Error> = None;
    let mut so_far: Vec<u32> = Vec::new();
    let mut shown = 0usize;
    let tokenizer = &src.tokenizer;
    // The first failed write is kept (and generation stops); later text is not written.
    fn write(out: &mut std::io::StdoutLock<'_>, failed: &mut Option<std::io::Error>, text: &str) {
        if failed.is_none()
            && let Err(e) = write!(out, "{text}").and_then(|()| out.flush())
        {
            *failed = Some(e);
        }
    }
    write(&mut out, &mut failed, &args.prompt);
    let result = model.sample(
        prompt,
        args.tokens,
        args.temperature,
        args.top_k,
        args.seed,
        &mut |t| {
            // Print what decodes completely so far (multi-byte characters arrive whole).
            so_far.push(t);
            let text = tokenizer.decode(&so_far);
            let complete = text.trim_end_matches('\u{FFFD}');
            if complete.len() > shown {
                write(&mut out, &mut failed, &complete[shown..]);
                shown = complete.len();
            }
            failed.is_none()
        },
    );
    result?;
    let text = tokenizer.decode(&so_far);
    if text.len() > shown {
        write(&mut out, &mut failed, &text[shown..]);
    }
    write(&mut out, &mut failed, "\n");
    if let Some(e) = failed {
        return Err(crate::output::output_error(e));
    }
    Ok(())
}

pub fn run_export_hf(args: ExportHfArgs) -> Result<Outcome> {
    if !RunDir::new(&args.run).has_config() {
        bail!("{}: not a run folder (no config.toml)", args.run.display());
    }
    let src = open_source(&args.run, args.step)?;
    let weights: Vec<(String, Vec<usize>, Vec<f32>)> = model::param_specs(&src.model)
        .into_iter()
        .map(|(name, shape, _)| {
            let data = src
                .weights
                .tensor_of_shape(&name, &shape)
                .map_err(anyhow::Error::msg)?
                .to_vec();
            Ok((name, shape, data))
        })
        .collect::<Result<_>>()?;
    let dtype = args.dtype.or(src.dtype).unwrap_or(ExportDtype::F32);
    if dtype == ExportDtype::F16 {
        for note in hf::F16Range::of(&weights)
            .check(args.allow_overflow)
            .map_err(anyhow::Error::msg)?
        {
            eprintln!("{note}");
        }
    }
    let parts = ExportParts {
        model: &src.model,
        base_config: src.hf_config.as_ref(),
        tokenizer_json: src.tokenizer_json.clone(),
        dtype,
        tokenizer_config: src.tokenizer_config.as_ref(),
        generation_config: src.generation_config.as_ref(),
    };
    let files = hf::write_folder(&args.out, &parts, &weights)?;
    let step = src
        .weights
        .metadata
        .get("step")
        .cloned()
        .unwrap_or_default();
    eprintln!(
        "wrote {} ({}) from step {step} of {}",
        args.out.display(),
        files.join(", "),
        args.run.display()
    );
    Ok(Outcome::Ok)
}
