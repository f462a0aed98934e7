//! `hif8lab train`: run a configuration headless, writing a run folder and showing a progress
//! bar (step, loss, tokens/s, ETA); `--resume` continues a run folder from its newest valid
//! checkpoint, on the backend it used; `--dry-run` prints the memory estimate only.
//!
//! Signals: Ctrl-C (SIGINT), SIGTERM and SIGHUP all stop at the next step boundary with a
//! checkpoint and a summary, then exit with 128 + the signal number (130, 143, 129).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use hif8lab_engine::gpu::GpuBackend;
use hif8lab_engine::{AnyBackend, Backend, BackendChoice, with_backend};
use hif8lab_train::RunConfig;
use hif8lab_train::driver::{Driver, Event, Progress, Schedule, Tap};
use hif8lab_train::memory::MemoryEstimate;
use hif8lab_train::models::checkpoint::Checkpoint;
use hif8lab_train::open::{OpenRun, Start as Opening, open_run};
use hif8lab_train::run::folder::RunFolder;
use hif8lab_train::run::{self, RunDir, RunStatus, Segment};
use indicatif::{ProgressBar, ProgressStyle};

mod resume;
use resume::*;

/// Arguments of `hif8lab train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// A preset from assets/presets (`smoke`, `small`, `medium`).
    #[arg(long, conflicts_with = "config")]
    preset: Option<String>,
    /// A TOML run configuration.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override a key: `--set train.lr=1e-5 --set qat.scaling.estimator=most_recent`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// `auto` (the GPU when an adapter exists, else the CPU, said so), `cpu`, `gpu` or
    /// `gpu:ADAPTER`. Default: `auto` for a new run; with --resume, the backend the run used.
    #[arg(long)]
    backend: Option<BackendChoice>,
    /// Run folder (default `runs/<preset>-<unix time>`); must not hold a run already.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Optimizer steps (overrides train.steps; with --resume, extends the run).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    steps: Option<u64>,
    /// Continue the run in this folder from its newest valid checkpoint (bit-identical to
    /// never stopping); its config.toml is used, and changes made with --steps / --set are
    /// written back to it and recorded in segments.json.
    #[arg(long, conflicts_with_all = ["preset", "config", "out"])]
    resume: Option<PathBuf>,
    /// Continue training a Hugging Face Llama folder (config.json, safetensors, tokenizer.json)
    /// or a GGUF file: the model comes from it, training, QAT and data from --preset/--config
    /// and --set (model.context: the preset's, at most max_position_embeddings).
    #[arg(long, value_name = "HF_DIR|FILE.gguf", conflicts_with = "resume")]
    init_from: Option<PathBuf>,
    /// Print the parameters and the memory the run needs (per part) and whether it fits,
    /// without training.
    #[arg(long)]
    dry_run: bool,
    /// No progress bar (one line per 10 % instead).
    #[arg(long)]
    quiet: bool,
}

/// Which signal asked to stop (0: none).
fn install_signal_flag() -> Arc<AtomicUsize> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = Arc::new(AtomicUsize::new(0));
    #[cfg(unix)]
    let signals = [SIGINT, SIGTERM, signal_hook::consts::SIGHUP];
    #[cfg(not(unix))]
    let signals = [SIGINT, SIGTERM];
    for signal in signals {
        // A second signal while the checkpoint is written is ignored; the write finishes.
        let _ = signal_hook::flag::register_usize(signal, flag.clone(), signal as usize);
    }
    flag
}

/// What to train: a new run or the continuation of one.
enum Start {
    Fresh,
    /// A new run from a Hugging Face folder's weights.
    Init(Box<Init>),
    Resume {
        /// The checkpoint it continues from; `None`: from step 0 (it failed before its
        /// first checkpoint).
        checkpoint: Option<Checkpoint>,
        path: PathBuf,
        /// The run's segments so far, this one last (its backend filled in once known).
        segments: Vec<Segment>,
    },
}

pub fn run_train(args: TrainArgs) -> Result<()> {
    let stop = install_signal_flag();
    if let Some(dir) = args.resume.clone() {
        return resume(&args, &dir, &stop);
    }
    let (name, text) = match (&args.preset, &args.config) {
        (Some(p), _) => (
            format!("preset '{p}'"),
            RunConfig::preset_text(p)?.to_owned(),
        ),
        (None, Some(path)) => (
            path.display().to_string(),
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        (None, None) => {
            bail!("give --preset NAME or --config FILE (presets: smoke, small, medium)")
        }
    };
    let init = match &args.init_from {
        Some(dir) => Some(init_source(dir, &name, &text)?),
        None => None,
    };
    // The model's settings first, so that --set can still change them (model.context).
    let mut sets = init.as_ref().map(|i| i.sets.clone()).unwrap_or_default();
    sets.extend(args.sets.iter().cloned());
    if let Some(s) = args.steps {
        sets.push(format!("train.steps={s}"));
    }
    let config = RunConfig::parse(&name, &text, &sets).map_err(|mut e| {
        // A value that came from the model's config.json, not from a --set the user typed.
        if let (Some(set), Some(init)) = (&e.set, &init)
            && init.sets.contains(set)
        {
            e.source_name = format!("--init-from {}", init.dir.display());
            e.message = format!("the model's {set} (from its config): {}", e.message);
            e.set = None;
        }
        e
    })?;
    if let Some(why) = config.qat_quantizes_nothing() {
        // Loud even with --quiet: the run's summary will count no quantizer at all.
        eprintln!(
            "warning: {why}. This run trains in high precision and its trace holds no quantizer."
        );
    }
    let stem = args
        .preset
        .clone()
        .or_else(|| {
            args.config
                .as_ref()
                .and_then(|p| p.file_stem())
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "run".into());
    let out = args.out.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from("runs").join(format!("{stem}-{t}"))
    });
    let backend = args.backend.clone().unwrap_or_default();
    let job = Job {
        config,
        out: &out,
        quiet: args.quiet,
        dry_run: args.dry_run,
        stop: &stop,
    };
    let start = match init {
        Some(i) => Start::Init(Box::new(i)),
        None => Start::Fresh,
    };
    dispatch(&backend, None, job, start)
}

/// A Hugging Face folder to start from: its weights, the `--set`s that make the run's model
/// its model, and the files the run folder keeps (`hf/config.json`, `hf/tokenizer.json`).
struct Init {
    weights: Checkpoint,
    sets: Vec<String>,
    keep: Vec<(&'static str, Vec<u8>)>,
    dir: PathBuf,
}

fn init_source(dir: &Path, name: &str, text: &str) -> Result<Init> {
    let source = hif8lab_train::models::source::ModelSource::open(dir)?;
    for n in &source.model.notes {
        eprintln!("note: {n}");
    }
    let preset: RunConfig = RunConfig::parse(name, text, &[])?;
    let sets = source.sets(preset.model.context)?;
    let model = &source.model;
    let mut keep = vec![(
        "hf/config.json",
        serde_json::to_vec_pretty(&model.config.json).unwrap_or_default(),
    )];
    // The source's tokenizer and generation settings travel with the run (`export hf`
    // writes them back).
    if let Some(t) = &model.tokenizer_config {
        keep.push((
            "hf/tokenizer_config.json",
            serde_json::to_vec_pretty(t).unwrap_or_default(),
        ));
    }
    if let Some(g) = &model.generation_config {
        keep.push((
            "hf/generation_config.json",
            serde_json::to_vec_pretty(g).unwrap_or_default(),
        ));
    }
    if let Some(text) = &source.tokenizer_json {
        keep.push(("hf/tokenizer.json", text.clone().into_bytes()));
    }
    Ok(Init {
        weights: source.model.weights,
        sets,
        keep,
        dir: dir.to_owned(),
    })
}

/// What every backend's training loop needs.
struct Job<'a> {
    config: RunConfig,
    out: &'a Path,
    quiet: bool,
    dry_run: bool,
    stop: &'a AtomicUsize,
}

/// Trains on the backend `choice` opens; on a GPU, on the adapter named `adapter` when
/// given and present (a resumed run's own: preferred, not demanded), else on the default.
fn dispatch(
    choice: &BackendChoice,
    adapter: Option<&str>,
    job: Job<'_>,
    start: Start,
) -> Result<()> {
    if let (BackendChoice::Auto | BackendChoice::Gpu { adapter: None }, Some(name)) =
        (choice, adapter)
    {
        match GpuBackend::on_adapter_blocking(Some(name)) {
            Ok(g) => return train_on(g, job, start),
            Err(e) => eprintln!(
                "note: the run's adapter '{name}' is not available ({e}); using the default"
            ),
        }
    }
    let any = AnyBackend::open(choice, &mut |n| eprintln!("note: {n}"))
        .with_context(|| format!("--backend {choice}"))?;
    with_backend!(any, b => train_on(b, job, start))
}

/// `--dry-run`: what the run needs, what the backend has, whether the start's weights fit
/// the model.
fn dry_run_report(
    info: &hif8lab_engine::BackendInfo,
    estimate: &MemoryEstimate,
    config: &RunConfig,
    start: &Start,
) -> Result<()> {
    crate::output::outln!("{estimate}");
    let limit = |b: Option<u64>| {
        b.map_or("unknown".into(), |b| {
            format!("{:.2} GiB", b as f64 / f64::from(1u32 << 30))
        })
    };
    crate::output::outln!(
        "backend: {} '{}' ({}); host memory available {}, device memory {}, largest buffer {}",
        info.kind,
        info.adapter,
        info.device_type,
        limit(info.memory.host_bytes),
        limit(info.memory.device_bytes),
        limit(info.memory.max_tensor_bytes)
    );
    estimate.check(&info.memory, &info.adapter)?;
    // The weights a run starts from must have the model's shapes (the run would refuse).
    if let Start::Init(init) = &start {
        for (name, shape, _) in hif8lab_train::model::param_specs(&config.model) {
            init.weights
                .tensor_of_shape(&name, &shape)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("--init-from {}", init.dir.display()))?;
        }
    }
    crate::output::outln!("fits: yes");
    Ok(())
}

/// Opens the run at `out` from its start, attaching what an `--init-from` start keeps, and
/// says where it starts.
fn open<B: Backend>(
    backend: B,
    config: RunConfig,
    start: &Start,
    out: &Path,
    schedule: Schedule,
) -> Result<(Driver<B>, RunFolder)> {
    let opened = match &start {
        Start::Fresh => open_run(backend, config, Opening::Fresh, out, schedule)?,
        Start::Init(init) => open_run(backend, config, Opening::Base(&init.weights), out, schedule)
            .with_context(|| format!("--init-from {}", init.dir.display()))?,
        Start::Resume {
            checkpoint,
            path,
            segments,
        } => open_run(
            backend,
            config,
            Opening::Resume {
                checkpoint: checkpoint.as_ref(),
                segments: segments.clone(),
            },
            out,
            schedule,
        )
        .with_context(|| format!("resuming {} from {}", out.display(), path.display()))?,
    };
    let OpenRun {
        driver,
        folder,
        notes,
    } = opened;
    match &start {
        Start::Fresh => {}
        Start::Init(init) => {
            for (name, bytes) in &init.keep {
                folder
                    .attach(name, bytes)
                    .with_context(|| format!("writing {}", out.join(name).display()))?;
            }
            eprintln!("starting from the weights of {}", init.dir.display());
        }
        Start::Resume { path, .. } => eprintln!(
            "resuming {} at step {} from {}",
            out.display(),
            driver.trainer().steps_done(),
            path.display()
        ),
    }
    for note in notes {
        eprintln!("note: {note}");
    }
    Ok((driver, folder))
}

fn train_on<B: Backend>(backend: B, job: Job<'_>, start: Start) -> Result<()> {
    let Job {
        config,
        out,
        quiet,
        dry_run,
        stop,
    } = job;
    let info = backend.info();
    let estimate = MemoryEstimate::for_config(&config);
    if dry_run {
        return dry_run_report(&info, &estimate, &config, &start);
    }
    let steps = config.train.steps;
    let schedule = Schedule {
        probes: (config.train.eval_every > 0)
            .then(|| Arc::new(hif8lab_train::eval::ProbeSet::for_data(&config.data))),
        eval_every: config.train.eval_every,
        checkpoint_every: config.train.checkpoint_every,
        checkpoint_at_end: true,
        ..Schedule::default()
    };
    let (mut driver, mut folder) = open(backend, config, &start, out, schedule)?;
    drop(start);
    let quantizers = driver.trainer().quantizers().len();
    let first_step = driver.trainer().steps_done();
    eprintln!(
        "training {} steps on {} '{}' ({}); {} quantizers; {}; run folder {}",
        steps,
        info.kind,
        info.adapter,
        info.api,
        quantizers,
        estimate.summary(),
        out.display()
    );
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(steps)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_position(first_step);
    let clock = Instant::now();
    let result = driver.run(
        &mut Tap {
            inner: &mut folder,
            see: |e: &Event, folder: &mut RunFolder| {
                match e {
                Event::Report(r) => {
                    let tps = folder.tokens_per_s();
                    bar.set_position(r.step + 1);
                    bar.set_message(format!(
                        "loss {:.4} | {:.0} tok/s{}",
                        r.loss,
                        tps,
                        if r.qat_enabled { " | QAT" } else { "" }
                    ));
                    if quiet && (r.step + 1).is_multiple_of((steps / 10).max(1)) {
                        eprintln!("step {} loss {:.4} {:.0} tok/s", r.step + 1, r.loss, tps);
                    }
                }
                Event::Probes(s) => bar.suspend(|| {
                    eprintln!(
                        "probes at step {}: knowledge {:.3}, completion {:.3}, held-out loss {:.4}",
                        s.step, s.knowledge_acc_norm, s.completion_acc_norm, s.heldout_loss
                    )
                }),
                _ => {}
            }
                Ok(())
            },
        },
        &|| stop.load(Ordering::SeqCst) != 0,
    );
    bar.finish_and_clear();
    conclude(&mut folder, result, out, stop, first_step, clock)
}

/// Ends the run's record with how it ended: a full disk leaves it resumable (and says so),
/// a signal exits with 128 + its number after naming the checkpoint to resume from.
fn conclude(
    folder: &mut RunFolder,
    result: Result<Progress, hif8lab_train::TrainError>,
    out: &Path,
    stop: &AtomicUsize,
    first_step: u64,
    clock: Instant,
) -> Result<()> {
    let status = match &result {
        Ok(Progress::Stopped) => RunStatus::Interrupted,
        Ok(_) => RunStatus::Finished,
        Err(_) => RunStatus::Failed,
    };
    let finished = folder.finish(status, result.as_ref().err().map(|e| format!("{e:#}")));
    if let Err(e) = &result {
        // A full disk or a file size limit: what was written up to the last checkpoint
        // stands (torn last lines are dropped on resume), so the run can continue later.
        let message = format!("{e:#}");
        if message.contains("os error 28") || message.contains("os error 27") {
            bail!(
                "{message}\n{} is left resumable: make room, then hif8lab train --resume {}",
                out.display(),
                out.display()
            );
        }
    }
    let summary = finished?;
    let result = result.map(|p| {
        (p == Progress::Stopped).then(|| {
            (
                folder
                    .last_checkpoint()
                    .map(Path::to_owned)
                    .unwrap_or_default(),
                stop.load(Ordering::SeqCst),
            )
        })
    });
    if let Some((path, signal)) = result? {
        eprintln!(
            "stopped by signal {signal}: checkpoint {}; continue with: hif8lab train --resume {}",
            path.display(),
            out.display()
        );
        std::process::exit(128 + signal as i32);
    }
    eprintln!(
        "done: {} steps ({} this time) in {:.1} s, final loss {:.4}; {}",
        summary.steps,
        summary.steps - first_step,
        clock.elapsed().as_secs_f64(),
        summary.final_loss.unwrap_or(f32::NAN),
        out.display()
    );
    Ok(())
}

/// A progress bar on stderr of `total` `unit` (hidden when `quiet`; indicatif draws nothing
/// when stderr is not a terminal).
pub fn progress_bar(total: u64, unit: &str, quiet: bool) -> ProgressBar {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template(&format!("{{bar:30}} {{pos}}/{{len}} {unit} ETA {{eta}}"))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}
