//! `hif8lab pretrain` and `hif8lab grid`: the paper's protocol at laptop scale.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use hif8lab_engine::BackendChoice;
use hif8lab_lab::grid::{self, GridConfig, GridProgress};
use hif8lab_train::TrainError;

/// Evaluates `$body` with `$make` bound to a maker of the backend `$choice` names (`auto`
/// resolved once: the GPU when there is one).
macro_rules! on_backend {
    ($choice:expr, $make:ident => $body:expr) => {{
        let resolved = $choice.resolve(&mut |n| eprintln!("note: {n}"));
        hif8lab_engine::with_backend_maker!(resolved, $make => {
            let $make: &dyn Fn() -> Result<_, TrainError> = $make;
            $body
        })
    }};
}

/// Which grid and where its runs go: shared by `pretrain`, `grid` and `lesson run`.
#[derive(Args, Debug)]
pub struct GridSource {
    /// Grid preset (`grid-small`, the default of `pretrain` and `grid`; `grid-lesson`, the
    /// default of `lesson run`; `grid-micro`; `real-smollm2` and `real-smollm2-quick`
    /// continue from the real SmolLM2-135M: `scripts/get-model.sh smollm2-135m` fetches it).
    #[arg(long)]
    preset: Option<String>,
    /// A grid configuration file (TOML, laid out as `assets/presets/grid-*.toml`) instead
    /// of a preset.
    #[arg(long, conflicts_with = "preset")]
    config: Option<PathBuf>,
    /// Output folder (default `runs/<preset>`, or `runs/lessons-<preset>` for a lesson);
    /// re-running reuses the base and skips finished runs.
    #[arg(long)]
    out: Option<PathBuf>,
    /// `cpu` (default: fastest here for these small models), `gpu`, `gpu:ADAPTER` or
    /// `auto` (the GPU when an adapter exists).
    #[arg(long, default_value = "cpu")]
    backend: BackendChoice,
}

impl GridSource {
    /// The preset named, or `default`.
    fn preset_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.preset.as_deref().unwrap_or(default)
    }
}

/// Arguments of `pretrain` and `grid`.
#[derive(Args, Debug)]
pub struct GridArgs {
    #[command(flatten)]
    source: GridSource,
    /// `grid` only: repeat every continued-training run (QAT runs and baselines) with this
    /// many data orders; the report gives means, intervals over seeds and items, and
    /// verdicts that use every seed.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=16))]
    seeds: u64,
    /// `grid` only: the first data order of the runs (with `--seeds N`: orders K … K+N−1),
    /// for a study that must not reuse the orders an earlier study saw (fresh orders). The
    /// report names the orders it ran.
    #[arg(long, value_name = "K", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1000))]
    first_order: u64,
    /// `grid` only: pretrain the base this many times (seeds of the pretraining) and
    /// continue every run from each; intervals then cover the pretraining too.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=8))]
    base_seeds: u64,
    /// `grid` only: rebuild DIR/results.md and results.csv from DIR/runs.jsonl.gz (the data
    /// a grid writes next to its report) without training: the same report, byte for byte.
    /// Every other flag of a run (the data file says what was run) is refused with it.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["config", "out", "runs", "seeds", "first_order", "base_seeds", "preset", "backend", "nproc", "python", "faithful", "micro_batch", "data", "torch_arg"])]
    recompute: Option<PathBuf>,
    /// `grid` only: do just these runs (comma-separated names, e.g.
    /// `baseline-low,most_recent-low,max_window-low`); verdicts that need others come out
    /// inconclusive.
    #[arg(long, value_delimiter = ',')]
    runs: Vec<String>,
    /// `grid` only: damage the real base's weights once before it is probed and any run
    /// continues from it (`[base] perturb`): `hif8:K` (HiF8 per tensor with its scale K×
    /// too large) or `noise:F` (Gaussian noise of F × each tensor's RMS), on gate, up and
    /// down of the quantized blocks, as `calibrate-probe` does; `none` for the weights as
    /// they are. Replaces the grid's own setting.
    #[arg(long, value_name = "DAMAGE", conflicts_with = "recompute")]
    perturb: Option<String>,
    /// `grid` only: print what would run and what each claim can reach with this design
    /// (best-case intervals), then stop: nothing is trained.
    #[arg(long, conflicts_with = "recompute")]
    plan: bool,
    /// `grid` only: which trainer trains the continued runs: `lab` (this program's, on
    /// `--backend`) or `torch` (`python -m hif8lab.torch.train`, under torchrun with
    /// `--nproc` above 1; a real base only). Either way the lab scores every run with the
    /// same probes and writes the same data and report, which names the engine.
    #[arg(long, value_enum, default_value_t = Engine::Lab, conflicts_with = "recompute")]
    engine: Engine,
    /// `--engine torch`: processes per run (torchrun's `--nproc-per-node`; each takes an
    /// equal share of the micro-batch, which they must divide).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    nproc: u64,
    /// `--engine torch`: the Python interpreter that has `hif8lab` with PyTorch installed
    /// (default: `$HIF8LAB_PYTHON`, else `python3`).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// `--engine torch`: the authors' settings (`hif8lab.torch.train --faithful`: bf16
    /// weights and AdamW moments, weight decay on every parameter, their repository's
    /// fallback quantizer) instead of the lab's exact ones.
    #[arg(long)]
    faithful: bool,
    /// `--engine torch`: sequences per process per micro-batch (default: the grid's batch ÷
    /// `--nproc`); the grid's batch is the global batch, the rest is gradient accumulation.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536))]
    micro_batch: Option<u64>,
    /// `--engine torch`: train on this text instead of the grid's generated corpus (a shard
    /// folder of `python -m hif8lab.torch.tokenize`, or a text or JSONL file); the report
    /// names it.
    #[arg(long, value_name = "PATH")]
    data: Option<PathBuf>,
    /// `--engine torch`: a flag for `hif8lab.torch.train`, passed as given (repeat it:
    /// `--torch-arg=--parallel --torch-arg=fsdp --torch-arg=--activation-checkpointing`); the
    /// report names them. Flags the engine sets from the grid are refused.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    torch_arg: Vec<String>,
}

/// `grid --engine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// The lab's own trainer.
    Lab,
    /// `python -m hif8lab.torch.train`.
    Torch,
}

/// The grid folder's lock (one writer) and the progress printer of its runs.
fn writer(out: &std::path::Path) -> Result<(hif8lab_train::lock::FolderLock, Printer)> {
    let lock = hif8lab_train::lock::FolderLock::acquire(out)
        .with_context(|| format!("--out {}", out.display()))?;
    let p = Printer {
        start: Instant::now(),
        name: String::new(),
    };
    Ok((lock, p))
}

mod torch_engine;

/// The flags that only `--engine torch` reads.
const TORCH_OPTIONS: &str = "--nproc, --python, --faithful, --micro-batch, --data and --torch-arg";

impl GridArgs {
    /// The preset named, or `grid-small`.
    fn preset(&self) -> &str {
        self.source.preset_or("grid-small")
    }
}

impl LessonArgs {
    /// The preset named, or `grid-lesson`.
    fn preset(&self) -> &str {
        self.source.preset_or("grid-lesson")
    }
}

struct Printer {
    start: Instant,
    name: String,
}

impl GridProgress for Printer {
    fn start(&mut self, name: &str, index: usize, total: usize, skipped: bool) {
        self.name = name.to_owned();
        if skipped {
            eprintln!(
                "[{}/{}] {name}: finished earlier, skipped",
                index + 1,
                total
            );
        } else {
            eprintln!(
                "[{}/{}] {name} … ({:.0} s elapsed)",
                index + 1,
                total,
                self.start.elapsed().as_secs_f64()
            );
        }
    }

    fn probes(&mut self, p: &hif8lab_train::ProbeScores) {
        eprintln!(
            "    {} probes at step {}: knowledge {:.3}, completion {:.3}, held-out loss {:.4}",
            self.name, p.step, p.knowledge_acc_norm, p.completion_acc_norm, p.heldout_loss
        );
    }

    fn step(&mut self, step: u64, steps: u64, loss: f32) {
        if (step + 1).is_multiple_of((steps / 4).max(1)) {
            eprintln!("    {} step {}/{steps} loss {loss:.4}", self.name, step + 1);
        }
    }
}

/// The grid configuration of `--config FILE` or `--preset NAME`.
pub(crate) fn grid_config(preset: &str, config: Option<&PathBuf>) -> Result<GridConfig> {
    Ok(match config {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| hif8lab_train::config::ConfigError {
                    set: None,
                    source_name: path.display().to_string(),
                    message: format!("cannot read it: {e}"),
                })?;
            GridConfig::parse(&text, &path.display().to_string())?
        }
        None => GridConfig::preset(preset)?,
    })
}

fn out_dir(args: &GridArgs) -> PathBuf {
    let name = args
        .source
        .config
        .as_ref()
        .and_then(|p| p.file_stem())
        .map_or(args.preset().to_owned(), |s| {
            s.to_string_lossy().into_owned()
        });
    args.source
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(name))
}

/// An option of `grid` given to `pretrain`, refused rather than ignored.
fn grid_only(flag: &str, what: &str) -> anyhow::Error {
    hif8lab_train::config::ConfigError {
        set: None,
        source_name: flag.into(),
        message: format!(
            "is an option of `hif8lab grid` ({what}); `pretrain` only pretrains the base"
        ),
    }
    .into()
}

/// `hif8lab pretrain`.
pub fn run_pretrain(args: GridArgs) -> Result<()> {
    if let Some(dir) = &args.recompute {
        return Err(grid_only(
            "--recompute",
            &format!("hif8lab grid --recompute {}", dir.display()),
        ));
    }
    if !args.runs.is_empty() {
        return Err(grid_only("--runs", "the continued-training runs to do"));
    }
    if args.perturb.is_some() {
        return Err(grid_only("--perturb", "a damage of the real base"));
    }
    if args.engine != Engine::Lab || args.torch_options_given() {
        return Err(grid_only(
            &format!("--engine, {TORCH_OPTIONS}"),
            "the trainer of the continued runs",
        ));
    }
    if args.seeds != 1 || args.base_seeds != 1 || args.first_order != 0 {
        return Err(grid_only(
            if args.seeds != 1 {
                "--seeds"
            } else if args.first_order != 0 {
                "--first-order"
            } else {
                "--base-seeds"
            },
            "replicates of the runs",
        ));
    }
    let config = grid_config(args.preset(), args.source.config.as_ref())?;
    if let Some(b) = &config.base {
        anyhow::bail!(
            "{}: this grid continues from a real model (base.model = \"{}\"): there is \
             nothing to pretrain; run `hif8lab grid` with it",
            args.source
                .config
                .as_ref()
                .map_or(format!("--preset {}", args.preset()), |c| c
                    .display()
                    .to_string()),
            b.model
        );
    }
    let out = out_dir(&args);
    // One writer per grid folder (its runs lock their own folders too).
    let (_lock, mut p) = writer(&out)?;
    let (path, probes) = on_backend!(&args.source.backend, make => {
        grid::pretrain(make, &config, &out, &mut p)?
    });
    eprintln!(
        "base checkpoint {} ({:.0} s); knowledge acc_norm {:.3}, completion acc_norm {:.3}, held-out loss {:.4}",
        path.display(),
        p.start.elapsed().as_secs_f64(),
        probes.knowledge_acc_norm,
        probes.completion_acc_norm,
        probes.heldout_loss
    );
    Ok(())
}

/// The report's plots: the grid's plot files present in `out/plots`, in a fixed order, or
/// why they were not drawn.
fn plots_section(out: &std::path::Path, skipped: Option<String>) -> String {
    let mut md = String::from("\n## Plots\n\n");
    if let Some(reason) = skipped {
        md.push_str(&format!("Not drawn: {reason}.\n"));
        return md;
    }
    let files: Vec<String> = ["loss", "probes", "amax", "outlier"]
        .iter()
        .map(|n| format!("plots/{n}.png"))
        .filter(|rel| out.join(rel).is_file())
        .collect();
    if files.is_empty() {
        md.push_str("Not drawn: no plots in the folder.\n");
    }
    for rel in files {
        md.push_str(&format!("![{rel}]({rel})\n\n"));
    }
    md
}

/// The file of a grid's folder whose corrections go at the top of its report, under the
/// title, above the text the data give (kept as generated, so it stays auditable).
pub const ERRATA_FILE: &str = "errata.md";

/// `md` with the folder's [`ERRATA_FILE`] (when there is one) after its title line.
fn with_errata(dir: &std::path::Path, md: String) -> Result<String> {
    let path = dir.join(ERRATA_FILE);
    let errata = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(md),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let (title, rest) = md.split_once("\n\n").unwrap_or((&md, ""));
    Ok(format!("{title}\n\n{}\n\n{rest}", errata.trim_end()))
}

/// `hif8lab grid --recompute DIR`: the report again from the data beside it.
fn recompute(dir: &std::path::Path) -> Result<()> {
    // Checked before the lock, which would create the folder.
    let refuse = |message: String| -> anyhow::Error {
        hif8lab_train::config::ConfigError {
            set: None,
            source_name: format!("--recompute {}", dir.display()),
            message,
        }
        .into()
    };
    if dir.is_file() {
        return Err(refuse(format!(
            "is a file: give the grid's folder, the one holding {} and results.md",
            grid::DATA_FILE
        )));
    }
    if !dir.is_dir() {
        return Err(refuse("no such folder".into()));
    }
    if !dir.join(grid::DATA_FILE).is_file() {
        return Err(refuse(format!(
            "holds no {}: not the folder of a grid (it is written beside results.md)",
            grid::DATA_FILE
        )));
    }
    let _lock = hif8lab_train::lock::FolderLock::acquire(dir)
        .with_context(|| format!("--recompute {}", dir.display()))?;
    let results = grid::recompute(dir)?;
    let mut md = with_errata(dir, results.markdown())?;
    md.push_str(&plots_section(dir, None));
    hif8lab_train::run::write_atomic(&dir.join("results.csv"), results.csv().as_bytes())?;
    hif8lab_train::run::write_atomic(&dir.join("results.md"), md.as_bytes())?;
    crate::output::outln!("{md}");
    eprintln!(
        "recomputed {}/results.md and results.csv from {}",
        dir.display(),
        grid::DATA_FILE
    );
    Ok(())
}

/// `hif8lab grid`.
pub fn run_grid(args: GridArgs) -> Result<()> {
    if let Some(dir) = &args.recompute {
        return recompute(dir);
    }
    let mut config = grid_config(args.preset(), args.source.config.as_ref())?;
    if let Some(damage) = &args.perturb {
        let Some(base) = config.base.as_mut() else {
            anyhow::bail!(
                "--perturb {damage}: this grid pretrains its base; only a real base \
                 ([base] model) is damaged"
            );
        };
        base.perturb = (damage != "none").then(|| damage.clone());
        base.damage()
            .map_err(|e| anyhow::anyhow!("--perturb {damage}: {e}"))?;
    }
    let known: Vec<String> = config.runs().into_iter().map(|r| r.name).collect();
    // An unknown run is refused before anything is planned or run.
    if let Some(bad) = args.runs.iter().find(|n| !known.contains(n)) {
        return Err(hif8lab_train::config::ConfigError {
            set: None,
            source_name: "--runs".into(),
            message: format!("no grid run '{bad}' (runs: {})", known.join(", ")),
        }
        .into());
    }
    if args.plan {
        crate::output::out!(
            "{}",
            grid::plan::plan(&config, args.seeds as usize, &args.runs)
        );
        return Ok(());
    }
    let engine = args.engine()?;
    let out = out_dir(&args);
    // One writer per grid folder (its runs lock their own folders too).
    let (_lock, mut p) = writer(&out)?;
    let (seeds, base_seeds) = (args.seeds as usize, args.base_seeds as usize);
    let first = args.first_order as usize;
    let results = on_backend!(&args.source.backend, make => {
        grid::run_grid_with(make, &config, &out, first, seeds, base_seeds, &args.runs, &engine, &mut p)?
    });
    let summaries: Vec<_> = results.rows.iter().map(|r| r.summary.clone()).collect();
    let (_, skipped) = crate::commands::plots::grid_plots(&out, &summaries)?;
    let mut md = with_errata(&out, results.markdown())?;
    md.push_str(&plots_section(&out, skipped));
    hif8lab_train::run::write_atomic(&out.join("results.md"), md.as_bytes())?;
    crate::output::outln!("{md}");
    eprintln!(
        "grid done in {:.0} s: {}/results.md and results.csv",
        p.start.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}

/// `hif8lab lesson …`.
#[derive(clap::Subcommand, Debug)]
pub enum LessonCommand {
    /// Run a lesson's scenario headless and judge its claims (exit 0 when all hold, 1 when
    /// one fails, 3 when none fails but some are inconclusive).
    Run(LessonArgs),
    /// List the lessons.
    List,
    /// Pretrain the lessons' base (`grid-lesson`, CPU backend, in memory) and write it as the
    /// file the app ships (`assets/lessons/base.safetensors`); with `--check`, compare it with
    /// the shipped file instead (exit 1 when the bits differ).
    Base(LessonBaseArgs),
}

/// Arguments of `lesson base`.
#[derive(Args, Debug)]
pub struct LessonBaseArgs {
    /// Where to write the base (safetensors).
    #[arg(long, default_value = hif8lab_lab::lesson::base::FILE)]
    out: PathBuf,
    /// Compare with the shipped base instead of writing (nothing is written: `--out` is
    /// refused beside it).
    #[arg(long, conflicts_with = "out")]
    check: bool,
}

/// Arguments of `lesson run`.
#[derive(Args, Debug)]
pub struct LessonArgs {
    /// Lesson: saturation, forgetting, fixes, sandbox.
    name: String,
    /// Print the verdict as JSON (`{"lesson":..,"claims":[{"claim","holds","verdict","test",
    /// "statistic","interval","p_value","evidence"}],..}`).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    source: GridSource,
    /// The `outliers` lesson: the grid folder whose `runs.jsonl.gz` it judges (default: the
    /// committed real-smollm2 grid's, shipped with the program).
    #[arg(long)]
    from: Option<PathBuf>,
    /// The `sandbox` lesson: a setting of its run, as `hif8lab train --set` takes it
    /// (`--set qat.scaling.estimator=most_recent --set train.lr=1e-3`); the rest is the
    /// lessons' fixed run (max_window-low-warmup).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
}

/// `hif8lab lesson base`.
fn lesson_base(args: &LessonBaseArgs) -> Result<crate::output::Outcome> {
    use hif8lab_lab::lesson::base;
    let grid = GridConfig::preset("grid-lesson")?;
    let start = Instant::now();
    let fresh = base::pretrain(hif8lab_engine::cpu::CpuBackend::new(), &grid)?;
    let seconds = start.elapsed().as_secs_f64();
    if args.check {
        let Some(shipped) = base::shipped(&grid) else {
            eprintln!(
                "error: {}: not pretrained with grid-lesson's current pretraining (run `hif8lab lesson base`)",
                base::FILE
            );
            return Ok(crate::output::Outcome::Differs);
        };
        let (a, b) = (shipped.fingerprint(), fresh.fingerprint());
        crate::output::outln!("shipped {a}, pretrained now {b} ({seconds:.1} s)");
        let now = fresh.to_checkpoint(&grid.pretrain_config()).to_bytes();
        return Ok(if now == base::shipped_bytes() {
            crate::output::Outcome::Ok
        } else {
            eprintln!(
                "error: {}: the shipped base differs from what pretraining gives now (weights or probe scores)",
                base::FILE
            );
            crate::output::Outcome::Differs
        });
    }
    let bytes = fresh.to_checkpoint(&grid.pretrain_config()).to_bytes();
    hif8lab_train::io::write_atomic(&args.out, &bytes)
        .with_context(|| format!("--out {}", args.out.display()))?;
    crate::output::outln!(
        "{}: the lessons' base, {} steps in {seconds:.1} s, fingerprint {}, knowledge {:.3}",
        args.out.display(),
        grid.pretrain_phase().steps,
        fresh.fingerprint(),
        fresh.probes.knowledge_acc_norm
    );
    Ok(crate::output::Outcome::Ok)
}

/// `hif8lab lesson`.
pub fn run_lesson(cmd: LessonCommand) -> Result<crate::output::Outcome> {
    use hif8lab_lab::lesson;
    let args = match cmd {
        LessonCommand::List => {
            for l in lesson::LESSONS {
                crate::output::outln!("{:<11} {}\n            {}", l.name, l.title, l.predict);
            }
            return Ok(crate::output::Outcome::Ok);
        }
        LessonCommand::Base(args) => return lesson_base(&args),
        LessonCommand::Run(args) => args,
    };
    let id: lesson::LessonId = match args.name.parse() {
        Ok(id) => id,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(crate::output::Outcome::BadInput);
        }
    };
    if id == lesson::LessonId::Outliers {
        return judge_outliers(&args);
    }
    if args.from.is_some() {
        anyhow::bail!("--from: only the outliers lesson reads a grid's data (the others train)");
    }
    let config = grid_config(args.preset(), args.source.config.as_ref())?;
    if config.base.is_some() {
        anyhow::bail!(
            "the lessons pretrain their own small base; a grid with a real [base] model is run \
             with `hif8lab grid`"
        );
    }
    let out = args
        .source
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(format!("lessons-{}", args.preset())));
    let user = sandbox_settings(id, &config, &args.sets)?;
    let (_lock, mut p) = writer(&out)?;
    let report = on_backend!(&args.source.backend, make => {
        lesson::run_lesson(&args.name, make, &config, &out, &mut p, user.as_ref())?
    });
    print_lesson(&report, p.start.elapsed().as_secs_f64(), args.json)
}

/// The sandbox's settings: the lessons' fixed run with `sets` applied (none without them);
/// `--set` is refused for the other lessons, which train fixed scenarios.
fn sandbox_settings(
    id: hif8lab_lab::lesson::LessonId,
    grid: &GridConfig,
    sets: &[String],
) -> Result<Option<hif8lab_train::RunConfig>> {
    if sets.is_empty() {
        return Ok(None);
    }
    if id != hif8lab_lab::lesson::LessonId::Sandbox {
        anyhow::bail!("--set: only the sandbox lesson trains settings of one's own");
    }
    let keys = hif8lab_lab::lesson::SANDBOX_KEYS;
    for set in sets {
        let key = set.split_once('=').map_or(set.as_str(), |(k, _)| k).trim();
        if !keys.contains(&key) {
            anyhow::bail!(
                "--set {set}: the sandbox trains the lessons' model and data with your choice of \
                 {} only; '{key}' is not one of them",
                keys.join(", ")
            );
        }
    }
    let fixed = hif8lab_lab::lesson::scenario(id, grid, None)
        .and_then(|runs| runs.into_iter().next())
        .map(|(_, c)| c)
        .ok_or_else(|| anyhow::anyhow!("the sandbox lesson has no run"))?;
    let name = "the sandbox lesson's run";
    Ok(Some(hif8lab_train::RunConfig::parse(
        name,
        &fixed.to_toml(),
        sets,
    )?))
}

/// Prints a lesson's verdict (JSON with `--json`) and gives the exit outcome.
fn print_lesson(
    report: &hif8lab_lab::lesson::LessonReport,
    seconds: f64,
    json: bool,
) -> Result<crate::output::Outcome> {
    if json {
        let mut v = serde_json::to_value(report)?;
        v["seconds"] = serde_json::json!(seconds);
        v["holds"] = serde_json::json!(report.holds());
        v["verdict"] = serde_json::json!(report.verdict());
        crate::output::outln!("{v}");
    } else {
        crate::output::outln!("lesson {} ({seconds:.0} s)", report.lesson);
        crate::output::outln!(
            "  {}",
            hif8lab_lab::claims::headline(&report.claims, hif8lab_lab::stats::Verdict3::as_str)
        );
        for c in &report.claims {
            // The same words as the app and the reports.
            crate::output::outln!(
                "  [{}] {}\n        Measured: {}.",
                c.verdict.as_str(),
                c.claim,
                c.measured_words()
            );
            for part in &c.parts {
                crate::output::outln!("        Also: {part}.");
            }
            match &c.evidence {
                serde_json::Value::Null => {}
                serde_json::Value::String(s) if s.is_empty() => {}
                serde_json::Value::String(s) => crate::output::outln!("        {s}"),
                v => crate::output::outln!("        {v}"),
            }
        }
        crate::output::outln!("  what happened: {}", report.summary);
    }
    Ok(match report.verdict() {
        hif8lab_lab::stats::Verdict3::Holds => crate::output::Outcome::Ok,
        hif8lab_lab::stats::Verdict3::Fails => crate::output::Outcome::ClaimsFail,
        hif8lab_lab::stats::Verdict3::Inconclusive
        | hif8lab_lab::stats::Verdict3::NotJudged
        | hif8lab_lab::stats::Verdict3::NotTested => crate::output::Outcome::Inconclusive,
    })
}

/// `hif8lab lesson run outliers [--from DIR]`: judged from a grid's data, nothing trained.
fn judge_outliers(args: &LessonArgs) -> Result<crate::output::Outcome> {
    use hif8lab_lab::lesson::outliers;
    let start = Instant::now();
    let (source, data) = match &args.from {
        Some(dir) => {
            let path = dir.join(grid::DATA_FILE);
            (path.display().to_string(), grid::GridData::read(&path)?)
        }
        None => (
            outliers::COMMITTED_FILE.to_owned(),
            outliers::committed().map_err(anyhow::Error::msg)?,
        ),
    };
    let report = outliers::judge(&source, &data).map_err(anyhow::Error::msg)?;
    print_lesson(&report, start.elapsed().as_secs_f64(), args.json)
}
