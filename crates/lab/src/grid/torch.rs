//! The torch engine (`grid --engine torch`): each continued run of a real-base grid trained
//! by `python -m hif8lab.torch.train` (under torchrun when it runs several processes) instead
//! of the lab's own trainer, then read back into the lab's run summary and its final weights
//! scored by the lab's probes, so the report and its verdicts are the same functions of the
//! data whichever engine trained.
//!
//! One run, in `<out>/runs/NAME/`:
//! 1. the torch trainer writes its run folder there (`metrics.jsonl`, rank 0's `trace.jsonl`
//!    with every call traced, `run.json`, `checkpoints/`) and its final model as a Hugging
//!    Face folder in `<out>/torch/hf-NAME`;
//! 2. the lab summarizes it: losses from `metrics.jsonl`, every estimator's counts and the
//!    SQNR from the trace ([`hif8lab_train::run::trace_counts`]), the per-quantizer table as
//!    for its own runs;
//! 3. scores the exported model with the grid's probes, removes the export, and writes
//!    `probes.jsonl`, `config.toml` (the run's lab configuration, which a later grid compares
//!    before it reuses the run) and `summary.json` last. A folder the torch trainer began
//!    but the lab did not finish resumes from its newest checkpoint (`--resume`).
//!
//! What the torch trainer cannot express is refused by name before anything runs: explicit
//! block lists with gaps, the clipped STE, AdamW settings other than its own, a batch that
//! the processes do not divide, probes at earlier doses (`continue.eval_every` below the
//! run's steps: the engine scores the final weights only).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hif8lab_format::Overflow;
use hif8lab_train::config::{Precision, RunConfig};
use hif8lab_train::models::checkpoint::Checkpoint;
use hif8lab_train::run::{MetricsLine, RunDir, RunStatus, RunSummary, Segment, SummaryFacts};
use hif8lab_train::trainer::{ProbeScores, TrainError};

use super::GridProgress;

/// How `grid --engine torch` runs the torch trainer.
#[derive(Clone, Debug, PartialEq)]
pub struct TorchEngine {
    /// The Python interpreter that has `hif8lab` (with its torch extra) installed.
    pub python: PathBuf,
    /// Processes per run (torchrun's `--nproc-per-node`; 1: one plain process).
    pub nproc: usize,
    /// The authors' settings (`--faithful`: bf16 weights and AdamW moments, weight decay on
    /// every parameter, their repository's fallback quantizer).
    pub faithful: bool,
    /// The hif8lab binary (the torch trainer imports a GGUF base through it).
    pub hif8lab: Option<PathBuf>,
    /// Sequences per process per micro-batch (default: the grid's batch ÷ `nproc`, one
    /// micro-batch a step); the grid's batch (its global batch) must be a multiple of it ×
    /// `nproc`, the rest is gradient accumulation.
    pub micro_batch: Option<usize>,
    /// The text to train on instead of the grid's generated corpus: a shard folder of
    /// `python -m hif8lab.torch.tokenize`, or a text or JSONL file (the paper's scale). Its
    /// sequences are then not the lab engine's.
    pub data: Option<PathBuf>,
    /// More flags for the torch trainer, passed as given (`--parallel fsdp`,
    /// `--activation-checkpointing`, …); a flag the engine sets itself is refused.
    pub extra: Vec<String>,
}

/// A refusal of the torch engine, naming the setting.
fn refuse(setting: &str, message: impl Into<String>) -> TrainError {
    TrainError::Setting {
        setting: setting.into(),
        message: message.into(),
    }
}

impl TorchEngine {
    /// How reports and summaries name the engine (the summary's `adapter` of its runs).
    pub fn describe(&self) -> String {
        let procs = if self.nproc == 1 {
            "1 process".to_owned()
        } else {
            format!("torchrun, {} processes (DDP)", self.nproc)
        };
        let fidelity = if self.faithful {
            "the authors' settings (--faithful: bf16 weights and AdamW, decay on every parameter, their fallback quantizer)"
        } else {
            "the lab's exact settings (f32 weights and AdamW, HiF8 as defined)"
        };
        let mut d = format!("hif8lab.torch, {procs}, {fidelity}");
        if let Some(data) = &self.data {
            d.push_str(&format!(
                ", trained on {} (not the grid's corpus)",
                data.display()
            ));
        }
        if !self.extra.is_empty() {
            d.push_str(&format!(", with {}", self.extra.join(" ")));
        }
        d
    }

    /// The command line (program, then arguments) that trains `config` from the model at
    /// `model` into `dir`, on the text `corpus`, exporting the final model to `hf`.
    pub fn command(
        &self,
        config: &RunConfig,
        model: &Path,
        corpus: &Path,
        dir: &Path,
        hf: &Path,
    ) -> Result<Vec<String>, TrainError> {
        let t = &config.train;
        // The torch trainer's AdamW: (0.9, 0.95), ε 1e-8 (hif8lab.torch.train).
        if (t.beta1, t.beta2, t.eps) != (0.9, 0.95, 1e-8) {
            return Err(refuse(
                "train.beta1/beta2/eps",
                format!(
                    "the torch engine's AdamW uses β = (0.9, 0.95) and ε = 1e-8; this run has ({}, {}) and {}",
                    t.beta1, t.beta2, t.eps
                ),
            ));
        }
        let global = t.batch * t.grad_accum.max(1);
        let micro = match self.micro_batch {
            Some(m) => m,
            None if self.nproc > 0 && t.batch.is_multiple_of(self.nproc) => t.batch / self.nproc,
            None => {
                return Err(refuse(
                    "--nproc",
                    format!(
                        "{} processes do not divide the micro-batch of {} sequences (or give --micro-batch)",
                        self.nproc, t.batch
                    ),
                ));
            }
        };
        if micro == 0 || !global.is_multiple_of(micro * self.nproc) {
            return Err(refuse(
                "--micro-batch",
                format!(
                    "the global batch of {global} sequences is not a multiple of {micro} sequences × {} processes",
                    self.nproc
                ),
            ));
        }
        let mut a: Vec<String> = vec![self.python.display().to_string()];
        if self.nproc > 1 {
            a.extend([
                "-m".into(),
                "torch.distributed.run".into(),
                "--standalone".into(),
                format!("--nproc-per-node={}", self.nproc),
            ]);
        }
        a.extend(["-m".into(), "hif8lab.torch.train".into()]);
        let mut flag = |k: &str, v: String| {
            a.push(format!("--{k}"));
            a.push(v);
        };
        flag("model", model.display().to_string());
        flag(
            "data",
            self.data.as_deref().unwrap_or(corpus).display().to_string(),
        );
        flag("tokenizer", "auto".into());
        flag("out", dir.display().to_string());
        flag("out-hf", hf.display().to_string());
        flag("steps", t.steps.to_string());
        flag("lr", format!("{:e}", t.lr));
        flag("lr-warmup-frac", t.warmup_frac.to_string());
        flag("weight-decay", t.weight_decay.to_string());
        flag("grad-clip", t.grad_clip.to_string());
        flag("context", config.model.context.to_string());
        flag("micro-batch", micro.to_string());
        flag("global-batch", global.to_string());
        flag("seed", t.seed.to_string());
        flag(
            "dtype",
            match t.precision() {
                Precision::F32 => "f32".into(),
                Precision::Bf16 => "bf16".into(),
            },
        );
        // Checkpoints as the grid's runs write them (at the end only unless it says), for
        // a resume; `--torch-arg=--checkpoint-every …` sets another period.
        let every = if t.checkpoint_every > 0 {
            t.checkpoint_every
        } else {
            t.steps.max(1)
        };
        if !self
            .extra
            .iter()
            .any(|e| e.starts_with("--checkpoint-every"))
        {
            flag("checkpoint-every", every.to_string());
        }
        if let Some(bin) = &self.hif8lab {
            flag("hif8lab", bin.display().to_string());
        }
        // The grid's text tokenized as the lab tokenizes it: the same sequences in the same
        // order.
        if self.data.is_none() {
            a.push("--lab-stream".into());
        }
        let q = &config.qat;
        if !q.enabled {
            a.push("--no-qat".into());
            return self.with_fidelity(a);
        }
        if q.clipped_ste {
            return Err(refuse(
                "qat.clipped_ste",
                "the torch trainer has the identity STE only",
            ));
        }
        let blocks = q.blocks_for(config.model.layers);
        let (Some(&first), Some(&last)) = (blocks.iter().min(), blocks.iter().max()) else {
            return Err(refuse("qat.blocks", "no block is quantized"));
        };
        if blocks.len() != (last - first + 1) as usize {
            return Err(refuse(
                "qat.blocks",
                "the torch trainer quantizes one contiguous range of blocks (--skip-first/--skip-last)",
            ));
        }
        let mut flag = |k: &str, v: String| {
            a.push(format!("--{k}"));
            a.push(v);
        };
        flag("skip-first", first.to_string());
        flag(
            "skip-last",
            (config.model.layers as u32 - 1 - last).to_string(),
        );
        flag(
            "modules",
            q.modules
                .iter()
                .map(|m| format!("{}_proj", m.name()))
                .collect::<Vec<_>>()
                .join(","),
        );
        flag("roles", joined(&q.roles));
        flag("warmup-steps", q.warmup_steps.to_string());
        let s = &q.scaling;
        flag("estimator", s.estimator.to_string());
        flag("window", s.window.to_string());
        flag("target", s.target.to_string());
        flag("margin", s.margin.to_string());
        flag("cold-start", s.cold_start.name().into());
        flag("shadow", joined(&s.shadow));
        flag("format", s.format.name().into());
        // Every call traced: the report counts each estimator over every call.
        flag("trace-every", "1".into());
        if s.overflow == Overflow::Saturate {
            a.push("--saturate".into());
        }
        self.with_fidelity(a)
    }

    fn with_fidelity(&self, mut a: Vec<String>) -> Result<Vec<String>, TrainError> {
        if self.faithful {
            a.push("--faithful".into());
        }
        for e in &self.extra {
            let name = e.split('=').next().unwrap_or(e);
            if name.starts_with("--") && a.iter().any(|x| x == name) {
                return Err(refuse(
                    "--torch-arg",
                    format!("{e}: the engine sets {name} from the grid itself"),
                ));
            }
        }
        a.extend(self.extra.iter().cloned());
        Ok(a)
    }
}

/// `items` as the torch trainer's list flags take them (`A,W,G`).
fn joined<T: ToString>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// What the torch engine needs of a grid, checked before anything is loaded or run: a real
/// base taken as it is, and probes at each run's end only.
pub fn check_grid(grid: &super::GridConfig) -> Result<(), TrainError> {
    let Some(base) = &grid.base else {
        return Err(refuse(
            "--engine torch",
            "this grid pretrains its base with the lab's trainer; the torch engine continues from a real base ([base] model)",
        ));
    };
    let damage = base
        .damage()
        .map_err(|e| refuse("base.perturb", e.to_string()))?;
    if damage != crate::damage::Perturbation::None {
        return Err(refuse(
            "base.perturb",
            "the torch engine trains from the model's file as it is; a damaged base runs on the lab's engine",
        ));
    }
    let control = grid.control.as_ref().map_or(grid.cont.steps, |c| c.steps);
    let (shortest, longest) = (grid.cont.steps.min(control), grid.cont.steps.max(control));
    if grid.cont.eval_every > 0 && grid.cont.eval_every < shortest.max(1) {
        return Err(refuse(
            "continue.eval_every",
            format!(
                "{} is below a run's {shortest} steps, but the torch engine scores the final weights only: set it to {longest} or more",
                grid.cont.eval_every
            ),
        ));
    }
    Ok(())
}

/// The grid's training text written once as `<out>/torch/corpus.txt` (what the lab's trainer
/// draws its sequences from: the same text, so the same sequences in the same order).
pub fn corpus_file(config: &RunConfig, out: &Path) -> Result<PathBuf, TrainError> {
    let text =
        hif8lab_train::data::run_text(config).map_err(|e| refuse("data.corpus", e.to_string()))?;
    let path = out.join("torch").join("corpus.txt");
    if std::fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
        let io = TrainError::io(path.display().to_string());
        std::fs::create_dir_all(out.join("torch")).map_err(&io)?;
        hif8lab_train::io::write_atomic(&path, text.as_bytes()).map_err(io)?;
    }
    Ok(path)
}

/// Trains one run with the torch engine into `dir` (see the module's steps) and returns its
/// summary; `score` scores the final weights (the grid's probes at the run's last step).
pub fn train_run(
    engine: &TorchEngine,
    config: &RunConfig,
    model: &Path,
    out: &Path,
    dir: &Path,
    score: &dyn Fn(&Checkpoint, u64) -> Result<ProbeScores, TrainError>,
    progress: &mut dyn GridProgress,
) -> Result<RunSummary, TrainError> {
    let name = RunDir::new(dir).name();
    let io = |p: &Path| TrainError::io(p.display().to_string());
    // A run the torch trainer began (its run.json) and the lab did not finish (no
    // summary.json) resumes from its newest checkpoint; the trainer refuses a resume whose
    // run-defining flags changed, naming them. Anything else there starts over.
    let resume = dir.join("run.json").is_file() && !dir.join(RunDir::SUMMARY).is_file();
    if !resume {
        let _ = std::fs::remove_dir_all(dir);
    }
    std::fs::create_dir_all(dir.parent().unwrap_or(dir)).map_err(io(dir))?;
    let corpus = match &engine.data {
        Some(d) => d.clone(),
        None => corpus_file(config, out)?,
    };
    let hf = out.join("torch").join(format!("hf-{name}"));
    if hf.join(".hif8lab-out-hf").is_file() {
        let _ = std::fs::remove_dir_all(&hf); // an earlier attempt's export
    }
    let mut argv = engine.command(config, model, &corpus, dir, &hf)?;
    if resume {
        argv.push("--resume".into());
    }
    let steps = config.train.steps;
    let started = std::time::Instant::now();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .env("PYTHONUNBUFFERED", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            refuse(
                "--python",
                format!(
                    "{}: {e} (give the interpreter that has hif8lab.torch)",
                    argv[0]
                ),
            )
        })?;
    // Progress from the trainer's step lines (`step N: loss X …`, rank 0); anything else
    // it prints goes to stderr as it comes.
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            match step_line(&line) {
                Some((step, loss)) => progress.step(step, steps, loss),
                None => eprintln!("{line}"),
            }
        }
    }
    let status = child.wait().map_err(io(dir))?;
    let wall_s = started.elapsed().as_secs_f64();
    if !status.success() {
        return Err(TrainError::Setting {
            setting: format!("grid run {name} (--engine torch)"),
            message: format!(
                "python -m hif8lab.torch.train ended with {status} (its messages above); the command: {}",
                argv.join(" ")
            ),
        });
    }
    let run = RunDir::new(dir);
    let lines: Vec<MetricsLine> = run.metrics().map_err(|e| TrainError::File {
        file: run.file(RunDir::METRICS).display().to_string(),
        message: e.to_string(),
    })?;
    if lines.len() as u64 != steps {
        return Err(TrainError::File {
            file: run.file(RunDir::METRICS).display().to_string(),
            message: format!("{} steps recorded, the run has {steps}", lines.len()),
        });
    }
    let quantizers = run_json_quantizers(dir)?;
    let plan = config
        .qat
        .plan()
        .map_err(|e| refuse("qat.scaling", e.to_string()))?;
    let estimators = plan.names();
    let facts = SummaryFacts {
        config,
        estimators: &estimators,
        active: plan.active_index(),
        quantizers,
    };
    let segment = Segment {
        end_step: steps,
        status: RunStatus::Finished,
        backend: "torch".into(),
        adapter: engine.describe(),
        device_type: "Cpu".into(),
        wall_s,
        tokens: steps
            * (config.train.batch * config.train.grad_accum.max(1)) as u64
            * config.model.context as u64,
        ..Segment::new(0, steps)
    };
    // The final weights, scored by the lab's probes; the export is removed after.
    let opened =
        hif8lab_train::models::source::ModelSource::open(&hf).map_err(|e| TrainError::File {
            file: hf.display().to_string(),
            message: e.to_string(),
        })?;
    let probes = score(&opened.model.weights, steps)?;
    progress.probes(&probes);
    let _ = std::fs::remove_dir_all(&hf);
    let mut summary = RunSummary::from_lines(
        &name,
        &facts,
        &lines,
        Some(probes),
        std::slice::from_ref(&segment),
        RunStatus::Finished,
        None,
    );
    if config.qat.enabled {
        (summary.counts, summary.sqnr) = hif8lab_train::run::trace_counts(dir, &estimators)
            .map_err(|message| TrainError::File {
                file: run.file(RunDir::TRACE).display().to_string(),
                message,
            })?;
    }
    // The scores as the lab's own runs keep them (`probes.jsonl`), then the configuration
    // and the summary, which mark the run finished.
    if let Some(p) = &summary.probes {
        let path = run.file(RunDir::PROBES);
        let line = serde_json::to_string(p).map_err(|e| TrainError::File {
            file: path.display().to_string(),
            message: e.to_string(),
        })? + "\n";
        hif8lab_train::io::write_atomic(&path, line.as_bytes()).map_err(io(&path))?;
    }
    let config_path = run.file(RunDir::CONFIG);
    hif8lab_train::io::write_atomic(&config_path, config.to_toml().as_bytes())
        .map_err(io(&config_path))?;
    summary.write(dir).map_err(io(&run.file(RunDir::SUMMARY)))?;
    Ok(summary)
}

/// A step line of the torch trainer's log (`step 3: loss 5.1234 lr …`): (step, loss).
fn step_line(line: &str) -> Option<(u64, f32)> {
    let rest = line.strip_prefix("step ")?;
    let (step, rest) = rest.split_once(": loss ")?;
    let loss = rest.split_whitespace().next()?;
    Some((step.parse().ok()?, loss.parse().ok()?))
}

/// The number of quantizers the torch trainer placed (`run.json`'s `quantizers`).
fn run_json_quantizers(dir: &Path) -> Result<usize, TrainError> {
    let path = dir.join("run.json");
    let bad = |message: String| TrainError::File {
        file: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    v.get("quantizers")
        .and_then(serde_json::Value::as_array)
        .map(Vec::len)
        .ok_or_else(|| bad("field 'quantizers': missing or not a list".into()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::grid::{CellKey, GridConfig, GridRun};

    /// The engine's command for `c`, with placeholder paths.
    fn cmd(e: &TorchEngine, c: &RunConfig) -> Result<Vec<String>, TrainError> {
        e.command(
            c,
            Path::new("m"),
            Path::new("c"),
            Path::new("d"),
            Path::new("h"),
        )
    }

    fn engine(nproc: usize) -> TorchEngine {
        TorchEngine {
            python: "py".into(),
            nproc,
            faithful: false,
            hif8lab: None,
            micro_batch: None,
            data: None,
            extra: Vec::new(),
        }
    }

    fn argv_of(key: CellKey, nproc: usize) -> Result<Vec<String>, TrainError> {
        let grid = GridConfig::preset("real-smollm2-quick").unwrap();
        let run = GridRun::of(key, "");
        let c = grid.run_config(&run);
        cmd(&engine(nproc), &c)
    }

    fn value<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
        argv.iter()
            .position(|a| a == flag)
            .map(|i| argv[i + 1].as_str())
    }

    #[test]
    fn a_cell_becomes_the_torch_trainer_s_flags() {
        let a = argv_of(CellKey::MAX_WINDOW_LOW_WARMUP, 2).unwrap();
        assert_eq!(
            &a[..5],
            [
                "py",
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc-per-node=2"
            ]
        );
        assert_eq!(value(&a, "--estimator"), Some("max_window(64)"));
        assert_eq!(value(&a, "--warmup-steps"), Some("2"));
        assert_eq!(value(&a, "--lr"), Some("1e-5"));
        assert_eq!(value(&a, "--micro-batch"), Some("1"));
        assert_eq!(value(&a, "--global-batch"), Some("2"));
        assert_eq!(value(&a, "--seed"), Some("7"));
        assert_eq!(value(&a, "--dtype"), Some("bf16"));
        assert_eq!(value(&a, "--trace-every"), Some("1"));
        assert_eq!(value(&a, "--modules"), Some("gate_proj,up_proj,down_proj"));
        assert_eq!(value(&a, "--roles"), Some("A,W,G"));
        // SmolLM2's 30 blocks: the lab keeps its high-precision ends.
        let (first, last) = hif8lab_train::config::QatConfig::high_precision_ends(30);
        assert_eq!(value(&a, "--skip-first"), Some(first.to_string().as_str()));
        assert_eq!(value(&a, "--skip-last"), Some(last.to_string().as_str()));
        assert!(!a.contains(&"--saturate".to_owned()) && !a.contains(&"--no-qat".to_owned()));
        // The baseline trains without quantizers; one process runs without torchrun.
        let b = argv_of(CellKey::BASELINE_LOW, 1).unwrap();
        assert_eq!(&b[..3], ["py", "-m", "hif8lab.torch.train"]);
        assert!(b.contains(&"--no-qat".to_owned()) && value(&b, "--estimator").is_none());
        // The sham's window and most_recent's name travel as the lab spells them.
        let s = argv_of(CellKey::SHAM_LOW, 1).unwrap();
        assert_eq!(value(&s, "--estimator"), Some("max_window(65)"));
        let m = argv_of(CellKey::MOST_RECENT_LOW, 1).unwrap();
        assert_eq!(value(&m, "--estimator"), Some("most_recent"));
    }

    #[test]
    fn the_trainer_s_step_lines_are_its_progress() {
        assert_eq!(
            step_line("step 3: loss 5.1234 lr 1e-05 grad_norm 0.9"),
            Some((3, 5.1234))
        );
        assert_eq!(step_line("step x: loss 1"), None);
        assert_eq!(step_line("warning: resuming"), None);
    }

    #[test]
    fn what_the_torch_trainer_cannot_do_is_refused_by_name() {
        let e = argv_of(CellKey::BASELINE_LOW, 3).unwrap_err().to_string();
        assert!(e.contains("--nproc") && e.contains("3 processes"), "{e}");
        let grid = GridConfig::preset("real-smollm2-quick").unwrap();
        let mut c = grid.run_config(&GridRun::of(CellKey::MAX_WINDOW_LOW, ""));
        c.qat.blocks = Some(vec![3, 5]);
        let e = cmd(&engine(1), &c).unwrap_err().to_string();
        assert!(e.contains("qat.blocks") && e.contains("contiguous"), "{e}");
        c.qat.blocks = None;
        c.train.beta2 = 0.999;
        let e = cmd(&engine(1), &c).unwrap_err().to_string();
        assert!(e.contains("AdamW") && e.contains("0.999"), "{e}");
        c.train.beta2 = 0.95;
        let mut faithful = engine(1);
        faithful.faithful = true;
        let a = cmd(&faithful, &c).unwrap();
        assert_eq!(a.last().map(String::as_str), Some("--faithful"));
        assert!(faithful.describe().contains("authors' settings"));
        // Gradient accumulation from --micro-batch, another text, flags passed through (not
        // those the engine sets).
        let mut scale = engine(2);
        scale.micro_batch = Some(1);
        scale.data = Some("shards".into());
        scale.extra = vec!["--parallel".into(), "fsdp".into()];
        c.train.batch = 8;
        let a = cmd(&scale, &c).unwrap();
        assert_eq!(value(&a, "--micro-batch"), Some("1"));
        assert_eq!(value(&a, "--global-batch"), Some("8"));
        assert_eq!(value(&a, "--data"), Some("shards"));
        assert!(!a.contains(&"--lab-stream".to_owned()));
        assert_eq!(a[a.len() - 2..], ["--parallel", "fsdp"]);
        assert!(
            scale.describe().contains("trained on shards")
                && scale.describe().contains("--parallel fsdp")
        );
        scale.micro_batch = Some(3);
        let e = cmd(&scale, &c).unwrap_err().to_string();
        assert!(
            e.contains("--micro-batch") && e.contains("3 sequences × 2"),
            "{e}"
        );
        scale.micro_batch = Some(1);
        scale.extra = vec!["--lr=1e-3".into()];
        let e = cmd(&scale, &c).unwrap_err().to_string();
        assert!(e.contains("--lr=1e-3") && e.contains("sets --lr"), "{e}");
    }
}
