//! `train --resume DIR`: the run's config with this resume's changes, its newest valid
//! checkpoint, the backend it used; a finished run is left as it is.

use super::*;

/// The newest valid checkpoint of the run in `dir` and the checkpoints skipped on the way
/// (`None`: the run starts over, having stopped before its first checkpoint).
pub(crate) fn resume_point(
    dir: &Path,
    recorded: &RunConfig,
) -> Result<(
    Option<hif8lab_train::models::checkpoint::ValidCheckpoint>,
    Vec<String>,
)> {
    let (found, skipped) =
        hif8lab_train::models::checkpoint::newest_valid(dir, &recorded.continuation_fingerprint());
    for s in &skipped {
        eprintln!("--resume: skipping {s}");
    }
    let found = match found {
        Some(f) => Some(f),
        // A run that stopped before its first checkpoint (a full disk, a kill) starts over
        // from step 0: the same config and seed give the same run.
        None if recorded.train.init_from.is_none() && skipped.is_empty() => {
            eprintln!(
                "--resume: {} has no checkpoint yet: the run starts over from step 0",
                dir.display()
            );
            None
        }
        None => bail!(
            "--resume: no valid checkpoints/step_N.safetensors in {}{}",
            dir.display(),
            if skipped.is_empty() {
                String::new()
            } else {
                format!(" ({})", skipped.join("; "))
            }
        ),
    };
    Ok((found, skipped))
}

/// The backend a resumed run trains on (`--backend`, else the one the run used) and, on
/// the GPU, the adapter it used.
pub(crate) fn resume_backend(
    args: &TrainArgs,
    run: &RunDir,
    segments: &[Segment],
) -> (BackendChoice, Option<String>) {
    let previous = segments.last().cloned().or_else(|| legacy_segment(run));
    // The same adapter as before, unless told otherwise (--backend or WGPU_ADAPTER_NAME).
    let adapter = previous
        .as_ref()
        .filter(|p| p.backend == "gpu" && !p.adapter.is_empty())
        .filter(|_| std::env::var_os("WGPU_ADAPTER_NAME").is_none_or(|v| v.is_empty()))
        .map(|p| p.adapter.clone());
    let used = previous.as_ref().and_then(|p| match p.backend.parse() {
        Ok(b @ (BackendChoice::Cpu | BackendChoice::Gpu { .. })) => Some(b),
        _ => None,
    });
    let backend = match (&args.backend, used) {
        (Some(b), _) => b.clone(),
        (None, Some(b)) => {
            eprintln!("resuming on the {b} backend, as the run used (--backend to choose another)");
            b
        }
        (None, None) => BackendChoice::Auto,
    };
    (backend, adapter)
}

/// `--resume DIR`: the run's config with this resume's changes, the newest valid
/// checkpoint, the backend the run used; a finished run is left as it is.
pub(crate) fn resume(args: &TrainArgs, dir: &Path, stop: &AtomicUsize) -> Result<()> {
    let run = RunDir::new(dir);
    let path = run.file(RunDir::CONFIG);
    check_folder(&run, dir)?;
    let (recorded, config) = wanted_config(args, &run, dir)?;
    let changes = recorded.differences(&config);
    let mut segments = run
        .segments()
        .with_context(|| format!("--resume: reading {}", run.file(RunDir::SEGMENTS).display()))?;
    let mut notes = Vec::new();
    for removed in run::remove_stale_temporaries(dir) {
        notes.push(format!(
            "removed {} (left by a killed process)",
            removed.display()
        ));
    }
    for s in segments
        .iter_mut()
        .filter(|s| s.status == RunStatus::Running)
    {
        s.status = RunStatus::Killed;
    }
    let (found, skipped) = resume_point(dir, &recorded)?;
    let at = found.as_ref().map_or(0, |f| f.step);
    let target = config.train.steps;
    if target < at {
        bail!(
            "--resume {}: train.steps {target} is below step {at}, where its newest valid \
             checkpoint is; a run cannot be shortened (give --steps ≥ {at})",
            dir.display()
        );
    }
    if target == at {
        return already_finished(args, &run, &config, &segments);
    }
    let (backend, adapter) = resume_backend(args, &run, &segments);
    if args.dry_run {
        let job = Job {
            config,
            out: dir,
            quiet: args.quiet,
            dry_run: true,
            stop,
        };
        return dispatch(&backend, adapter.as_deref(), job, Start::Fresh);
    }
    if !changes.is_empty() {
        run::write_atomic(&path, config.to_toml().as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("config.toml updated: {}", changes.join("; "));
    }
    segments.push(Segment {
        from_checkpoint: found.as_ref().map(|f| f.path.display().to_string()),
        skipped_checkpoints: skipped,
        changes,
        notes,
        ..Segment::new(at, target)
    });
    let job = Job {
        config,
        out: dir,
        quiet: args.quiet,
        dry_run: false,
        stop,
    };
    let (checkpoint, path) = match found {
        Some(f) => (Some(f.checkpoint), f.path),
        None => (None, dir.to_owned()),
    };
    let start = Start::Resume {
        checkpoint,
        path,
        segments,
    };
    dispatch(&backend, adapter.as_deref(), job, start)
}

/// Refuses a folder that is not a run of `hif8lab train`, or one still being written.
fn check_folder(run: &RunDir, dir: &Path) -> Result<()> {
    let path = run.file(RunDir::CONFIG);
    if !path.is_file() {
        bail!("--resume: reading {}: no such file", path.display());
    }
    if !run.has_metrics() {
        bail!(
            "--resume: {} holds no metrics.jsonl: not a run folder of `hif8lab train`",
            dir.display()
        );
    }
    // A run still being written is not resumed (checked first, so the answer names its
    // writer rather than what the folder lacks yet; the writer's own lock holds it after).
    if dir.join(hif8lab_train::lock::LOCK_FILE).exists() {
        drop(hif8lab_train::lock::FolderLock::acquire(dir).context("--resume")?);
    }
    Ok(())
}

/// The run's recorded config, and the config with this resume's changes (refused when it
/// changes what a continuing run cannot).
fn wanted_config(args: &TrainArgs, run: &RunDir, dir: &Path) -> Result<(RunConfig, RunConfig)> {
    let recorded = run.config().map_err(anyhow::Error::msg)?;
    let mut sets = args.sets.clone();
    if let Some(s) = args.steps {
        sets.push(format!("train.steps={s}"));
    }
    let config = run.config_with(&sets).map_err(anyhow::Error::msg)?;
    let forbidden = recorded.continuation_differences(&config);
    if !forbidden.is_empty() {
        bail!(
            "--resume {}: these settings cannot change when a run continues (its checkpoints \
             were made with them): {}; start a new run with --out instead",
            dir.display(),
            forbidden.join("; ")
        );
    }
    Ok((recorded, config))
}

/// A run already at its target: its record completed if a kill cut it short, nothing else.
fn already_finished(
    args: &TrainArgs,
    run: &RunDir,
    config: &RunConfig,
    segments: &[Segment],
) -> Result<()> {
    let dir = run.path();
    let (at, target) = (config.train.steps, config.train.steps);
    let recorded_finished = run
        .summary()
        .is_some_and(|s| s.status == RunStatus::Finished && s.steps == at);
    if !recorded_finished && !args.dry_run {
        // Killed after its final checkpoint, before its summary: complete the record.
        hif8lab_train::run::folder::complete_finished(dir, config, segments)?;
    }
    eprintln!(
        "{} already finished: {at} of {target} steps done{}; nothing else changed. Give \
         --steps N with N > {at} to extend it.",
        dir.display(),
        if recorded_finished {
            ""
        } else {
            " (its summary, missing after a kill, was written now)"
        }
    );
    Ok(())
}

/// The backend of a run folder written before `segments.json` existed (its summary).
pub(crate) fn legacy_segment(run: &RunDir) -> Option<Segment> {
    let (backend, adapter) = run.summary_backend()?;
    Some(Segment {
        status: RunStatus::Unknown,
        backend,
        adapter,
        ..Segment::new(0, 0)
    })
}
