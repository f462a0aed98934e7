//! `hif8lab train`: run a configuration headless, writing a run folder and showing a progress
//! bar (step, loss, tokens/s, ETA).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use hif8lab_engine::Backend;
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::gpu::GpuBackend;
use hif8lab_train::checkpoint::Checkpoint;
use hif8lab_train::run::RunWriter;
use hif8lab_train::{RunConfig, StepReport, Trainer};
use indicatif::{ProgressBar, ProgressStyle};

/// Arguments of `hif8lab train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// A preset from assets/presets (`smoke`, `small`).
    #[arg(long, conflicts_with = "config")]
    preset: Option<String>,
    /// A TOML run configuration.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override a key: `--set train.lr=1e-5 --set qat.scaling.estimator=most_recent`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// `gpu`, `cpu`, or `auto` (the GPU when an adapter exists, else the CPU, said so).
    #[arg(long, default_value = "auto", value_parser = ["auto", "gpu", "cpu"])]
    backend: String,
    /// Run folder (default runs/<preset>-<unix time>); must not hold a run already.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Optimizer steps (overrides train.steps; with --resume, extends the run).
    #[arg(long)]
    steps: Option<u64>,
    /// Continue the run in this folder from its newest checkpoint (bit-identical to never
    /// stopping); its config.toml is used.
    #[arg(long, conflicts_with_all = ["preset", "config", "out"])]
    resume: Option<PathBuf>,
    /// No progress bar (one line per 10 % instead).
    #[arg(long)]
    quiet: bool,
}

pub fn run_train(args: TrainArgs) -> Result<()> {
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        // A second Ctrl-C while the checkpoint is written is ignored; the write finishes.
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    if let Some(dir) = &args.resume {
        let path = dir.join("config.toml");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("--resume: reading {}", path.display()))?;
        let mut sets = args.sets.clone();
        if let Some(s) = args.steps {
            sets.push(format!("train.steps={s}"));
        }
        let config = RunConfig::parse(&path.display().to_string(), &text, &sets)?;
        let ck_path = hif8lab_train::checkpoint::latest(dir).with_context(|| {
            format!(
                "--resume: no checkpoints/step_N.safetensors in {}",
                dir.display()
            )
        })?;
        let ck = Checkpoint::load(&ck_path)?;
        let start = Start::Resume(ck, ck_path);
        return dispatch(&args.backend, config, dir, args.quiet, start, &interrupted);
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
        (None, None) => bail!("give --preset NAME or --config FILE (presets: smoke, small)"),
    };
    let mut sets = args.sets.clone();
    if let Some(s) = args.steps {
        sets.push(format!("train.steps={s}"));
    }
    let config = RunConfig::parse(&name, &text, &sets)?;
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
    dispatch(
        &args.backend,
        config,
        &out,
        args.quiet,
        Start::Fresh,
        &interrupted,
    )
}

/// A fresh run or the continuation of one.
enum Start {
    Fresh,
    Resume(Checkpoint, PathBuf),
}

fn dispatch(
    backend: &str,
    config: RunConfig,
    out: &Path,
    quiet: bool,
    start: Start,
    stop: &AtomicBool,
) -> Result<()> {
    match backend {
        "cpu" => train_on(CpuBackend::new(), config, out, quiet, start, stop),
        "gpu" => train_on(
            GpuBackend::new_blocking().context("--backend gpu")?,
            config,
            out,
            quiet,
            start,
            stop,
        ),
        _ => match GpuBackend::new_blocking() {
            Ok(g) => train_on(g, config, out, quiet, start, stop),
            Err(e) => {
                eprintln!("note: no GPU adapter ({e}); training on the CPU backend");
                train_on(CpuBackend::new(), config, out, quiet, start, stop)
            }
        },
    }
}

fn train_on<B: Backend>(
    backend: B,
    config: RunConfig,
    out: &Path,
    quiet: bool,
    start: Start,
    stop: &AtomicBool,
) -> Result<()> {
    let info = backend.info();
    let steps = config.train.steps;
    let mut trainer = Trainer::new(backend, config.clone())?;
    let mut writer = match &start {
        Start::Fresh => RunWriter::create(
            out,
            &config,
            trainer.estimator_names(),
            trainer.active_estimator(),
        )
        .with_context(|| format!("creating run folder {}", out.display()))?,
        Start::Resume(ck, path) => {
            trainer
                .restore(ck)
                .with_context(|| format!("resuming from {}", path.display()))?;
            eprintln!(
                "resuming {} at step {} from {}",
                out.display(),
                trainer.steps_done(),
                path.display()
            );
            RunWriter::resume(
                out,
                &config,
                trainer.active_estimator(),
                trainer.steps_done(),
            )
            .with_context(|| format!("reopening run folder {}", out.display()))?
        }
    };
    let every = config.train.checkpoint_every;
    let eval_every = config.train.eval_every;
    let probes = (eval_every > 0).then(|| hif8lab_train::corpus::ProbeSet::for_data(&config.data));
    let probes_path = out.join("probes.jsonl");
    eprintln!(
        "training {} steps on {} '{}' ({}); {} quantizers; run folder {}",
        steps,
        info.kind,
        info.adapter,
        info.api,
        trainer.quantizers().len(),
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
    let start = Instant::now();
    let mut tokens = 0u64;
    let mut last: Option<StepReport> = None;
    let mut above_total = 0u64;
    let mut write = |r: StepReport, trainer: &Trainer<B>| -> Result<()> {
        tokens += r.tokens;
        let tps = tokens as f64 / start.elapsed().as_secs_f64().max(1e-9);
        let line = writer.write(&r, &trainer.trace_records(&r), tps)?;
        above_total += line.calls_above_est;
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
        last = Some(r);
        Ok(())
    };
    let checkpoint_at = |trainer: &mut Trainer<B>,
                         write_reports: &mut dyn FnMut(StepReport, &Trainer<B>) -> Result<()>|
     -> Result<PathBuf> {
        for r in trainer.finish()? {
            write_reports(r, trainer)?;
        }
        let ck = trainer.checkpoint()?;
        Ok(RunWriter::save_checkpoint_in(
            out,
            &ck,
            trainer.steps_done(),
        )?)
    };
    let result = (|| -> Result<Option<PathBuf>> {
        while !trainer.finished() {
            if stop.load(Ordering::SeqCst) {
                return checkpoint_at(&mut trainer, &mut write).map(Some);
            }
            trainer.step()?;
            for r in trainer.poll()? {
                write(r, &trainer)?;
            }
            if every > 0 && trainer.steps_done().is_multiple_of(every) && !trainer.finished() {
                checkpoint_at(&mut trainer, &mut write)?;
            }
            if let Some(p) = &probes
                && (trainer.steps_done().is_multiple_of(eval_every) || trainer.finished())
            {
                for r in trainer.finish()? {
                    write(r, &trainer)?;
                }
                let s = trainer.evaluate(p)?;
                bar.suspend(|| {
                    eprintln!(
                        "probes at step {}: knowledge {:.3}, completion {:.3}, held-out loss {:.4}",
                        s.step, s.knowledge_acc_norm, s.completion_acc_norm, s.heldout_loss
                    )
                });
                let mut line = serde_json::to_vec(&s)?;
                line.push(b'\n');
                use std::io::Write as _;
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&probes_path)?
                    .write_all(&line)?;
            }
        }
        checkpoint_at(&mut trainer, &mut write)?;
        Ok(None)
    })();
    bar.finish_and_clear();
    let wall = start.elapsed().as_secs_f64();
    let summary = serde_json::json!({
        "status": match &result { Ok(None) => "finished", Ok(Some(_)) => "interrupted", Err(_) => "failed" },
        "error": result.as_ref().err().map(|e| format!("{e:#}")),
        "steps": last.as_ref().map(|r| r.step + 1).unwrap_or(0),
        "final_loss": last.as_ref().map(|r| r.loss),
        "wall_s": wall,
        "tokens_per_s": tokens as f64 / wall.max(1e-9),
        "backend": info.kind,
        "adapter": info.adapter,
        "quantizers": trainer.quantizers().len(),
        "calls_above_est": above_total,
    });
    writer.summary(&summary)?;
    if let Some(path) = result? {
        eprintln!(
            "interrupted: checkpoint {}; continue with: hif8lab train --resume {}",
            path.display(),
            out.display()
        );
        std::process::exit(130);
    }
    eprintln!(
        "done: {} steps in {:.1} s, final loss {:.4}; {}",
        steps,
        wall,
        last.map(|r| r.loss).unwrap_or(f32::NAN),
        out.display()
    );
    Ok(())
}
