//! Running the grid: pretraining, continued training of each run through the run driver
//! into its own run folder, skipping runs already finished.

use super::*;

#[cfg(not(target_arch = "wasm32"))]
fn read_summary(dir: &Path) -> Option<RunSummary> {
    RunSummary::read(dir).filter(|s| s.status == RunStatus::Finished)
}

#[cfg(not(target_arch = "wasm32"))]
/// The summary of a run finished earlier in `dir` — only when it ran `config`: a finished
/// run of another configuration is refused naming the keys that differ (its results would
/// be reported as this configuration's).
fn reusable(dir: &Path, config: &RunConfig) -> Result<Option<RunSummary>, TrainError> {
    let Some(summary) = read_summary(dir) else {
        return Ok(None);
    };
    let path = dir.join("config.toml");
    let recorded = std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|t| {
            RunConfig::parse(&path.display().to_string(), &t, &[]).map_err(|e| e.to_string())
        })
        .map_err(|e| TrainError::Data(format!("{}: {e}", dir.display())))?;
    let differences = recorded.differences(config);
    if differences.is_empty() {
        return Ok(Some(summary));
    }
    Err(TrainError::Data(format!(
        "{} holds a finished run of another configuration ({}): it is not reused; remove it \
         or choose another --out",
        dir.display(),
        differences.join("; ")
    )))
}

#[cfg(not(target_arch = "wasm32"))]
fn io_err(e: std::io::Error) -> TrainError {
    TrainError::Data(e.to_string())
}

#[cfg(not(target_arch = "wasm32"))]
/// Trains one configuration into `dir` (optionally from base weights) through the run
/// driver, probing before the first step (pretraining only: a continued run starts from the
/// base, scored already) and every `eval_every` steps; returns its summary
/// and, with `checkpoint_at_end`, the path of its final checkpoint.
#[allow(clippy::too_many_arguments)]
fn train_run<B: Backend>(
    backend: B,
    config: RunConfig,
    base: Option<&Checkpoint>,
    probes: &Arc<ProbeSet>,
    eval_every: u64,
    checkpoint_at_end: bool,
    dir: &Path,
    progress: &mut dyn GridProgress,
) -> Result<(RunSummary, Option<PathBuf>), TrainError> {
    let _ = std::fs::remove_dir_all(dir); // an unfinished run starts over
    let info = backend.info();
    let mut t = Trainer::new(backend, config.clone())?;
    if let Some(ck) = base {
        t.load_weights(ck)?;
    }
    let mut folder = RunFolder::create(
        dir,
        &config,
        t.estimator_names(),
        t.active_estimator(),
        t.quantizers().len(),
        &info,
    )?;
    let schedule = Schedule {
        probes: Some(probes.clone()),
        eval_every: eval_every.max(1),
        // A continued run starts from the base, whose probes are scored once in pretraining.
        eval_at_start: base.is_none(),
        checkpoint_at_end,
        ..Schedule::default()
    };
    let steps = config.train.steps;
    let mut driver = Driver::new(t, schedule);
    let result = driver.run(
        &mut |e: Event| {
            match &e {
                Event::Report(r) => progress.step(r.step, steps, r.loss),
                Event::Probes(p) => progress.probes(p),
                _ => {}
            }
            folder.event(e)
        },
        &|| false,
    );
    let (status, error) = match &result {
        Ok(_) => (RunStatus::Finished, None),
        Err(e) => (RunStatus::Failed, Some(e.to_string())),
    };
    let summary = folder.finish(status, error)?;
    result?;
    Ok((summary, folder.last_checkpoint().map(Path::to_owned)))
}

#[cfg(not(target_arch = "wasm32"))]
/// Pretrains the base model into `<out>/base` (skipped when its checkpoint exists); returns
/// the checkpoint path and the base model's probe scores.
pub fn pretrain<B: Backend>(
    make: &dyn Fn() -> Result<B, TrainError>,
    grid: &GridConfig,
    out: &Path,
    progress: &mut dyn GridProgress,
) -> Result<(PathBuf, ProbeScores), TrainError> {
    let dir = out.join("base");
    let config = grid.pretrain_config();
    if let (Some(s), Some(ck)) = (reusable(&dir, &config)?, checkpoint::latest(&dir)) {
        progress.start("base", 0, 1, true);
        return Ok((ck, s.final_probes()));
    }
    progress.start("base", 0, 1, false);
    let (summary, path) = train_run(
        make()?,
        config,
        None,
        &Arc::new(grid.probes()),
        grid.pretrain.steps.max(1),
        true,
        &dir,
        progress,
    )?;
    let path = path.ok_or_else(|| TrainError::Checkpoint("pretraining wrote none".into()))?;
    Ok((path, summary.final_probes()))
}

#[cfg(not(target_arch = "wasm32"))]
/// Continued training of each `(name, config)` from the pretrained base (pretraining first
/// if needed) into `<out>/runs/NAME`; a run that already finished is read back, not redone.
/// Returns the base's probe scores and the runs' summaries, in order.
pub fn train_from_base<B: Backend>(
    make: &dyn Fn() -> Result<B, TrainError>,
    grid: &GridConfig,
    out: &Path,
    runs: &[(String, RunConfig)],
    progress: &mut dyn GridProgress,
) -> Result<(ProbeScores, Vec<RunSummary>), TrainError> {
    let (base_path, base_probes) = pretrain(make, grid, out, progress)?;
    let base = Checkpoint::load(&base_path).map_err(|e| TrainError::Checkpoint(e.to_string()))?;
    let probes = Arc::new(grid.probes());
    let mut summaries = Vec::new();
    for (i, (name, config)) in runs.iter().enumerate() {
        let dir = out.join("runs").join(name);
        if let Some(s) = reusable(&dir, config)? {
            progress.start(name, i, runs.len(), true);
            summaries.push(s);
            continue;
        }
        progress.start(name, i, runs.len(), false);
        let (s, _) = train_run(
            make()?,
            config.clone(),
            Some(&base),
            &probes,
            grid.cont.eval_every,
            false,
            &dir,
            progress,
        )?;
        summaries.push(s);
    }
    Ok((base_probes, summaries))
}

#[cfg(not(target_arch = "wasm32"))]
/// Runs the whole grid (pretraining first if needed), every run at `seeds` seeds (seed `k`
/// changes the continued training's data order: `train.seed = 7 + k`), and writes the
/// results. `only` (when not empty) names the runs to do (verdicts whose runs are missing
/// come out inconclusive).
pub fn run_grid<B: Backend>(
    make: &dyn Fn() -> Result<B, TrainError>,
    grid: &GridConfig,
    out: &Path,
    seeds: usize,
    only: &[String],
    progress: &mut dyn GridProgress,
) -> Result<GridResults, TrainError> {
    let known: Vec<String> = grid_runs().into_iter().map(|r| r.name).collect();
    if let Some(bad) = only.iter().find(|n| !known.contains(n)) {
        return Err(TrainError::Data(format!(
            "--runs: no grid run '{bad}' (runs: {})",
            known.join(", ")
        )));
    }
    let runs: Vec<GridRun> = grid_runs()
        .into_iter()
        .filter(|r| only.is_empty() || only.contains(&r.name))
        .collect();
    let seeds = seeds.max(1);
    let mut configs: Vec<(String, RunConfig)> = Vec::new();
    for k in 0..seeds {
        for r in &runs {
            let mut c = grid.run_config(r);
            c.train.seed += k as u64;
            configs.push((seed_name(&r.name, k), c));
        }
    }
    let (base_probes, flat) = train_from_base(make, grid, out, &configs, progress)?;
    let summaries: Vec<Vec<RunSummary>> = (0..runs.len())
        .map(|i| {
            (0..seeds)
                .map(|k| flat[k * runs.len() + i].clone())
                .collect()
        })
        .collect();
    let results = GridResults::compute(&runs, &summaries, base_probes);
    write_atomic(&out.join("results.csv"), results.csv().as_bytes()).map_err(io_err)?;
    write_atomic(&out.join("results.md"), results.markdown().as_bytes()).map_err(io_err)?;
    Ok(results)
}
