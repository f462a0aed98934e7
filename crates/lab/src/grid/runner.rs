//! Running the grid: pretraining, continued training of each run through the run driver
//! into its own run folder, skipping runs already finished.

use super::*;
use hif8lab_train::open::{Start, open_run};
use hif8lab_train::run::RunDir;

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
    let recorded = RunDir::new(dir).config().map_err(|e| TrainError::File {
        file: dir.display().to_string(),
        message: e.to_string(),
    })?;
    let differences = recorded.differences(config);
    if differences.is_empty() {
        return Ok(Some(summary));
    }
    Err(TrainError::RunFolderTaken {
        dir: dir.display().to_string(),
        differences,
    })
}

#[cfg(not(target_arch = "wasm32"))]
/// A finished run is compared with its base on the same items: one scored on another probe
/// set (an earlier version's, with fewer completion items) is refused by name, not mixed in.
fn same_probe_items(dir: &Path, run: &RunSummary, base: &ProbeScores) -> Result<(), TrainError> {
    let Some(p) = run.probes.as_ref() else {
        return Ok(());
    };
    if (p.knowledge_items, p.completion_items) == (base.knowledge_items, base.completion_items) {
        return Ok(());
    }
    Err(TrainError::File {
        file: dir.display().to_string(),
        message: format!(
            "scored on another probe set ({} knowledge and {} completion items; the base now has {} and {}): remove the folder to train it again, or use another --out",
            p.knowledge_items, p.completion_items, base.knowledge_items, base.completion_items
        ),
    })
}

#[cfg(not(target_arch = "wasm32"))]
fn io_err(error: std::io::Error) -> TrainError {
    TrainError::io("")(error)
}

/// How a grid's runs are probed: by the trainer on its schedule (a base the grid
/// pretrains), or once on the final weights by a scorer (a real base: short unpadded
/// sequences in the model's own tokenizer, [`real::score`]).
#[cfg(not(target_arch = "wasm32"))]
enum Probing<'a> {
    Trainer(Arc<ProbeSet>),
    Final(&'a dyn Fn(&Checkpoint, u64) -> Result<hif8lab_train::trainer::ProbeScores, TrainError>),
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
    probes: &Probing<'_>,
    eval_every: u64,
    checkpoint_at_end: bool,
    dir: &Path,
    progress: &mut dyn GridProgress,
) -> Result<(RunSummary, Option<PathBuf>), TrainError> {
    let _ = std::fs::remove_dir_all(dir); // an unfinished run starts over
    let schedule = match probes {
        Probing::Trainer(p) => Schedule {
            probes: Some(p.clone()),
            eval_every: eval_every.max(1),
            // A continued run starts from the base, whose probes are scored once in
            // pretraining.
            eval_at_start: base.is_none(),
            checkpoint_at_end,
            ..Schedule::default()
        },
        // The final weights come back and are scored by the caller's scorer; with
        // `eval_every` below the run's length, so are the states at each earlier multiple
        // (a dose study), taken from the checkpoints, which are then not written.
        Probing::Final(_) => Schedule {
            checkpoint_at_end,
            checkpoint_every: if eval_every < config.train.steps {
                eval_every
            } else {
                0
            },
            keep_weights: true,
            ..Schedule::default()
        },
    };
    let steps = config.train.steps;
    let start = base.map_or(Start::Fresh, Start::Base);
    let opened = open_run(backend, config, start, dir, schedule)?;
    let (mut driver, mut folder) = (opened.driver, opened.folder);
    let tap = hif8lab_train::driver::Tap {
        inner: &mut folder,
        see: |e: &Event, folder: &mut RunFolder| {
            match e {
                Event::Report(r) => progress.step(r.step, steps, r.loss),
                Event::Probes(p) => progress.probes(p),
                Event::Weights(w) => {
                    if let Probing::Final(score) = probes {
                        let p = score(w, steps)?;
                        progress.probes(&p);
                        folder.event(Event::Probes(Box::new(p)))?;
                    }
                }
                _ => {}
            }
            Ok(())
        },
    };
    let result = match probes {
        Probing::Final(score) => driver.run(
            &mut EarlierDoses {
                inner: tap,
                score: *score,
                steps,
            },
            &|| false,
        ),
        Probing::Trainer(_) => driver.run(&mut { tap }, &|| false),
    };
    let (status, error) = match &result {
        Ok(_) => (RunStatus::Finished, None),
        Err(e) => (RunStatus::Failed, Some(e.to_string())),
    };
    let summary = folder.finish(status, error)?;
    result?;
    Ok((summary, folder.last_checkpoint().map(Path::to_owned)))
}

/// A sink that scores the state at each checkpoint before the run's last step with a
/// final-weights scorer (a dose study's earlier doses) instead of writing the checkpoint,
/// and passes everything else on.
#[cfg(not(target_arch = "wasm32"))]
struct EarlierDoses<'a, S: hif8lab_train::driver::Sink> {
    inner: S,
    score: &'a dyn Fn(&Checkpoint, u64) -> Result<hif8lab_train::trainer::ProbeScores, TrainError>,
    steps: u64,
}

#[cfg(not(target_arch = "wasm32"))]
impl<S: hif8lab_train::driver::Sink> hif8lab_train::driver::Sink for EarlierDoses<'_, S> {
    fn event(&mut self, event: Event) -> Result<(), TrainError> {
        self.inner.event(event)
    }

    fn checkpoint(
        &mut self,
        step: u64,
        source: &dyn hif8lab_train::models::checkpoint::CheckpointSource,
    ) -> Result<(), TrainError> {
        if step >= self.steps {
            return self.inner.checkpoint(step, source);
        }
        let state = hif8lab_train::models::checkpoint::materialize(source)
            .map_err(|e| TrainError::Checkpoint(e.to_string()))?;
        let p = (self.score)(&state, step)?;
        self.inner.event(Event::Probes(Box::new(p)))
    }
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
    pretrain_seed(make, grid, out, 0, progress)
}

/// The folder of pretraining `j` (`base`, then `base-seed1`, …).
#[cfg(not(target_arch = "wasm32"))]
fn base_dir(out: &Path, j: usize) -> PathBuf {
    out.join(if j == 0 {
        "base".to_string()
    } else {
        format!("base-seed{j}")
    })
}

#[cfg(not(target_arch = "wasm32"))]
/// Pretraining `j` of the base: `train.seed = 7 + j` (initialization, data order and the
/// sampled text of the same knowledge base).
fn pretrain_seed<B: Backend>(
    make: &dyn Fn() -> Result<B, TrainError>,
    grid: &GridConfig,
    out: &Path,
    j: usize,
    progress: &mut dyn GridProgress,
) -> Result<(PathBuf, ProbeScores), TrainError> {
    let dir = base_dir(out, j);
    let mut config = grid.pretrain_config();
    config.train.seed += j as u64;
    let name = dir
        .file_name()
        .map_or("base".into(), |n| n.to_string_lossy().into_owned());
    if let (Some(s), Some(ck)) = (reusable(&dir, &config)?, checkpoint::latest(&dir)) {
        progress.start(&name, 0, 1, true);
        return Ok((ck, s.final_probes()));
    }
    progress.start(&name, 0, 1, false);
    let (summary, path) = train_run(
        make()?,
        config,
        None,
        &Probing::Trainer(Arc::new(grid.probes())),
        grid.pretrain_phase().steps.max(1),
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
    train_from_base_seed(make, grid, out, 0, runs, None, &Engine::Lab, progress)
}

/// Which trainer trains a grid's continued runs.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Engine {
    /// The lab's own trainer on the grid's backend.
    #[default]
    Lab,
    /// `python -m hif8lab.torch.train` (a real base only): [`super::torch`].
    Torch(super::torch::TorchEngine),
}

#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
fn train_from_base_seed<B: Backend>(
    make: &dyn Fn() -> Result<B, TrainError>,
    grid: &GridConfig,
    out: &Path,
    j: usize,
    runs: &[(String, RunConfig)],
    real: Option<&real::RealBase>,
    engine: &Engine,
    progress: &mut dyn GridProgress,
) -> Result<(ProbeScores, Vec<RunSummary>), TrainError> {
    let pretrained;
    let real_probes;
    let scorer;
    let (base, base_probes, probing) = match real {
        None => {
            let (base_path, base_probes) = pretrain_seed(make, grid, out, j, progress)?;
            pretrained =
                Checkpoint::load(&base_path).map_err(|e| TrainError::Checkpoint(e.to_string()))?;
            let probing = Probing::Trainer(Arc::new(grid.probes()));
            (&pretrained, base_probes, probing)
        }
        Some(r) => {
            progress.start("base", 0, 1, out.join("base").join("probes.json").is_file());
            real_probes = real::probe_set(&r.grid);
            let base_probes = real::base_scores(make, r, &real_probes, out)?;
            progress.probes(&base_probes);
            scorer = |w: &Checkpoint, step: u64| {
                real::score(make()?, &r.grid.model, w, &r.tokenizer, &real_probes, step)
            };
            (&r.weights, base_probes, Probing::Final(&scorer))
        }
    };
    let mut summaries = Vec::new();
    for (i, (name, config)) in runs.iter().enumerate() {
        let dir = out.join("runs").join(name);
        let mut s = if let Some(s) = reusable(&dir, config)? {
            same_probe_items(&dir, &s, &base_probes)?;
            progress.start(name, i, runs.len(), true);
            s
        } else {
            progress.start(name, i, runs.len(), false);
            match (engine, real, &probing) {
                (Engine::Torch(torch), Some(r), Probing::Final(score)) => {
                    super::torch::train_run(torch, config, &r.source, out, &dir, *score, progress)?
                }
                _ => {
                    train_run(
                        make()?,
                        config.clone(),
                        Some(base),
                        &probing,
                        grid.cont.eval_every,
                        false,
                        &dir,
                        progress,
                    )?
                    .0
                }
            }
        };
        s.per_quantizer = hif8lab_train::run::quantizer_table(&dir, &s.estimators);
        summaries.push(s);
    }
    Ok((base_probes, summaries))
}

#[cfg(not(target_arch = "wasm32"))]
/// Runs the whole grid (pretraining first if needed), every run at `seeds` data orders
/// (order `k`: `train.seed = 7 + k`, the text fixed) from each of `base_seeds` pretrainings
/// of the base, and writes the results and the data they rest on ([`DATA_FILE`]). `only`
/// (when not empty) names the runs to do (verdicts whose runs are missing come out
/// inconclusive).
pub fn run_grid<B: Backend>(
    make: &dyn Fn() -> Result<B, TrainError>,
    grid: &GridConfig,
    out: &Path,
    seeds: usize,
    base_seeds: usize,
    only: &[String],
    progress: &mut dyn GridProgress,
) -> Result<GridResults, TrainError> {
    run_grid_from(make, grid, out, 0, seeds, base_seeds, only, progress)
}

#[cfg(not(target_arch = "wasm32"))]
/// [`run_grid_with`] on the lab's own trainer.
#[allow(clippy::too_many_arguments)]
pub fn run_grid_from<B: Backend>(
    make: &dyn Fn() -> Result<B, TrainError>,
    grid: &GridConfig,
    out: &Path,
    first_order: usize,
    seeds: usize,
    base_seeds: usize,
    only: &[String],
    progress: &mut dyn GridProgress,
) -> Result<GridResults, TrainError> {
    run_grid_with(
        make,
        grid,
        out,
        first_order,
        seeds,
        base_seeds,
        only,
        &Engine::Lab,
        progress,
    )
}

#[cfg(not(target_arch = "wasm32"))]
/// [`run_grid`] at the data orders `first_order` … `first_order + seeds − 1` (fresh orders
/// for a study that must not reuse the orders an earlier one saw: `grid --first-order`),
/// its continued runs trained by `engine` (the grid's backend still scores the probes).
#[allow(clippy::too_many_arguments)]
pub fn run_grid_with<B: Backend>(
    make: &dyn Fn() -> Result<B, TrainError>,
    grid: &GridConfig,
    out: &Path,
    first_order: usize,
    seeds: usize,
    base_seeds: usize,
    only: &[String],
    engine: &Engine,
    progress: &mut dyn GridProgress,
) -> Result<GridResults, TrainError> {
    let known: Vec<String> = grid.runs().into_iter().map(|r| r.name).collect();
    if let Some(bad) = only.iter().find(|n| !known.contains(n)) {
        return Err(TrainError::Setting {
            setting: "--runs".into(),
            message: format!("no grid run '{bad}' (runs: {})", known.join(", ")),
        });
    }
    let runs: Vec<GridRun> = grid
        .runs()
        .into_iter()
        .filter(|r| only.is_empty() || only.contains(&r.name))
        .collect();
    let (seeds, base_seeds) = (seeds.max(1), base_seeds.max(1));
    if let Engine::Torch(_) = engine {
        super::torch::check_grid(grid)?;
    }
    let real = match &grid.base {
        Some(_) if base_seeds > 1 => {
            return Err(TrainError::Setting {
                setting: "--base-seeds".into(),
                message: "a real base is one model (it is not pretrained): give 1".into(),
            });
        }
        Some(_) => Some(real::load(grid)?),
        None => None,
    };
    let grid = real.as_ref().map_or(grid, |r| &r.grid);
    let mut data = GridData {
        // The model's file name, and the damage applied to it (`[base] perturb`) if any.
        base_model: real.as_ref().map(|r| {
            let name = r
                .source
                .file_name()
                .map_or(r.source.display().to_string(), |n| {
                    n.to_string_lossy().into_owned()
                });
            match &r.damage {
                None => name,
                Some(d) => format!("{name}, damaged before any run by {d}"),
            }
        }),
        ..GridData::default()
    };
    for j in 0..base_seeds {
        let mut configs: Vec<(String, RunConfig)> = Vec::new();
        let mut placed: Vec<(usize, usize)> = Vec::new();
        for k in first_order..first_order + seeds {
            for (i, r) in runs.iter().enumerate() {
                // The positive control runs in its first data orders only.
                if r.control && grid.control.as_ref().is_some_and(|c| k >= c.orders) {
                    continue;
                }
                placed.push((k, i));
                let mut c = grid.run_config(r);
                c.train.seed += k as u64;
                if let Some(real) = &real {
                    c.train.init_from = Some(real.source.display().to_string());
                }
                let name = seed_name(&r.name, k);
                let name = if j == 0 {
                    name
                } else {
                    format!("{name}-base{j}")
                };
                if let Some(why) = c.qat_quantizes_nothing() {
                    return Err(TrainError::Setting {
                        setting: format!("grid run {name}"),
                        message: format!(
                            "{why}; the paper's claims cannot be judged from a QAT run that \
                             quantizes nothing"
                        ),
                    });
                }
                configs.push((name, c));
            }
        }
        let (base_probes, flat) = train_from_base_seed(
            make,
            grid,
            out,
            j,
            &configs,
            real.as_ref(),
            engine,
            progress,
        )?;
        data.bases.push(base_probes);
        for ((k, i), summary) in placed.iter().zip(flat) {
            data.runs.push(GridDataRun {
                run: runs[*i].name.clone(),
                order: *k,
                base_seed: j,
                summary,
            });
        }
    }
    // The report is computed from the data as written, so that `--recompute` gives it back
    // byte for byte.
    let path = out.join(DATA_FILE);
    write_atomic(&path, &data.to_gzip_jsonl()?).map_err(io_err)?;
    let results = recompute(out)?;
    write_atomic(&out.join("results.csv"), results.csv().as_bytes()).map_err(io_err)?;
    write_atomic(&out.join("results.md"), results.markdown().as_bytes()).map_err(io_err)?;
    Ok(results)
}

/// Rebuilds a grid's results from its [`DATA_FILE`] alone (no training): the report the
/// grid wrote, byte for byte.
pub fn recompute(dir: &Path) -> Result<GridResults, TrainError> {
    let path = dir.join(DATA_FILE);
    results_of(&path.display().to_string(), GridData::read(&path)?)
}

/// The results of grid data; `source` names the data in errors.
pub fn results_of(source: &str, data: GridData) -> Result<GridResults, TrainError> {
    let b = data.bases.len();
    let all = all_runs();
    if let Some(d) = data
        .runs
        .iter()
        .find(|d| !all.iter().any(|r| r.name == d.run))
    {
        return Err(TrainError::File {
            file: source.to_owned(),
            message: format!(
                "no grid run '{}' (runs: {})",
                d.run,
                all.iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    if let Some(d) = data
        .runs
        .iter()
        .find(|d| d.order >= 1 << 16 || d.base_seed >= b)
    {
        return Err(TrainError::File {
            file: source.to_owned(),
            message: format!(
                "run {} has data order {} and pretraining {} (there are {b} pretrainings)",
                d.run, d.order, d.base_seed
            ),
        });
    }
    // Every run at the same data orders, from the first one the data hold (0 unless the grid
    // ran fresh orders).
    let first_order = data.runs.iter().map(|d| d.order).min().unwrap_or(0);
    // The positive control is the dose study's, not a cell of the paper's claims.
    let runs: Vec<GridRun> = all
        .into_iter()
        .filter(|r| !r.control && data.runs.iter().any(|d| d.run == r.name))
        .collect();
    let mut summaries = Vec::new();
    for r in &runs {
        let mut mine: Vec<&GridDataRun> = data.runs.iter().filter(|d| d.run == r.name).collect();
        // Replicate order k·B + j: replicate r continues from base r % B.
        mine.sort_by_key(|d| (d.order, d.base_seed));
        let orders = mine
            .iter()
            .map(|d| d.order)
            .max()
            .map_or(0, |m| m + 1 - first_order);
        if mine.len() != orders * b
            || mine
                .iter()
                .enumerate()
                .any(|(i, d)| d.order != first_order + i / b || d.base_seed != i % b)
        {
            return Err(TrainError::File {
                file: source.to_owned(),
                message: format!(
                    "run {} lacks some data order × pretraining (has {} of {} × {b})",
                    r.name,
                    mine.len(),
                    orders
                ),
            });
        }
        summaries.push(mine.into_iter().map(|d| d.summary.clone()).collect());
    }
    let mut results = GridResults::compute_with_bases(&runs, &summaries, data.bases);
    results.base_model = data.base_model;
    results.first_order = first_order;
    results.dose = super::dose::analyse(&data.runs);
    Ok(results)
}
