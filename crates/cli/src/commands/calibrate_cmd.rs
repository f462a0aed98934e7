//! `hif8lab calibrate-probe`: the probes calibrated without training — the real base's
//! quantized MLP weights damaged at known sizes, each damaged model scored, and the
//! dose–response written as a report, its data and plots.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use hif8lab_engine::BackendChoice;
use hif8lab_lab::calibrate::{self, DATA_FILE};
use hif8lab_lab::damage::Perturbation;
use hif8lab_train::TrainError;
use hif8lab_train::eval::ProbeScore;

/// Arguments of `hif8lab calibrate-probe`.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// The grid preset whose base model and probes are calibrated (a `real-smollm2*` preset:
    /// `scripts/get-model.sh smollm2-135m` fetches its model).
    #[arg(long, default_value = "real-smollm2-dose")]
    preset: String,
    /// A grid configuration file with a `[base]` model instead of a preset.
    #[arg(long, conflicts_with = "preset")]
    config: Option<PathBuf>,
    /// Output folder: `calibration.jsonl` (one record per scored model, appended as each
    /// ends: a killed run resumes), `results.md`, `plots/`. Default `runs/probe-calibration`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The damage sizes, comma-separated: `noise:F` (Gaussian noise of F × each tensor's
    /// RMS) and `hif8:K` (HiF8 per tensor with the scale K× too large).
    #[arg(long, default_value = calibrate::DEFAULT_LEVELS)]
    levels: String,
    /// Seeds of each noise size (the HiF8 sizes draw nothing: one each).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=8))]
    seeds: u64,
    /// `cpu` (default), `gpu`, `gpu:ADAPTER` or `auto`.
    #[arg(long, default_value = "cpu")]
    backend: BackendChoice,
    /// Rebuild DIR/results.md and DIR/plots/ from DIR/calibration.jsonl without scoring
    /// anything: the same report, byte for byte.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["config", "out", "levels", "seeds", "backend"])]
    recompute: Option<PathBuf>,
}

/// `hif8lab calibrate-probe`.
pub fn run_calibrate(args: CalibrateArgs) -> Result<crate::output::Outcome> {
    if let Some(dir) = &args.recompute {
        let records = calibrate::read(&dir.join(DATA_FILE))?;
        write_report(dir, &records)?;
        return Ok(crate::output::Outcome::Ok);
    }
    let levels =
        Perturbation::parse_list(&args.levels).map_err(|e| anyhow::anyhow!("--levels: {e}"))?;
    if levels.is_empty() {
        anyhow::bail!("--levels: no size given");
    }
    let grid = crate::commands::grid_cmd::grid_config(&args.preset, args.config.as_ref())?;
    if grid.base.is_none() {
        anyhow::bail!(
            "--preset {}: the grid has no [base] model to calibrate (use a real-smollm2* preset)",
            args.preset
        );
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs/probe-calibration"));
    std::fs::create_dir_all(&out).with_context(|| format!("--out {}", out.display()))?;
    let _lock = hif8lab_train::lock::FolderLock::acquire(&out)
        .with_context(|| format!("--out {}", out.display()))?;
    let start = std::time::Instant::now();
    let mut progress = |line: &str| {
        eprintln!("[{:>5.0} s] {line}", start.elapsed().as_secs_f64());
    };
    let resolved = args.backend.resolve(&mut |n| eprintln!("note: {n}"));
    let records = hif8lab_engine::with_backend_maker!(resolved, make => {
        let make: &dyn Fn() -> Result<_, TrainError> = make;
        calibrate::run(make, &grid, &levels, args.seeds, &out, &mut progress)
    })?;
    write_report(&out, &records)
}

/// Writes `results.md` (through a temporary and a rename) and the plots.
fn write_report(dir: &Path, records: &[calibrate::Record]) -> Result<crate::output::Outcome> {
    let source = records
        .iter()
        .find(|r| r.perturbation == "none")
        .map_or("the base", |_| "SmolLM2-135M-Instruct (Q4_1 GGUF)");
    let text = calibrate::report(records, source);
    let path = dir.join("results.md");
    hif8lab_train::io::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    let plots = dir.join("plots");
    std::fs::create_dir_all(&plots).with_context(|| format!("creating {}", plots.display()))?;
    for (file, score, label) in [
        (
            "calibration.png",
            ProbeScore::KnowledgeAccNorm,
            "knowledge acc_norm drop (% relative)",
        ),
        (
            "calibration-margin.png",
            ProbeScore::KnowledgeMargin,
            "knowledge margin shift (nats/byte)",
        ),
    ] {
        let p = plots.join(file);
        if let Err(e) = crate::commands::plots::calibration_chart(&p, records, score, label) {
            eprintln!("note: {}: no plot ({e:#})", p.display());
        }
    }
    crate::output::outln!("wrote {}", path.display());
    Ok(crate::output::Outcome::Ok)
}
