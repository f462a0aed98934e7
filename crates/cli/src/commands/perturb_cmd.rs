//! `hif8lab perturb-study`: the pre-registered perturb-then-train study, analysed as its
//! pre-registration says (`hif8lab_lab::perturb_study`), from the grids that ran its arms.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use hif8lab_lab::grid::{DATA_FILE as GRID_DATA, GridData};
use hif8lab_lab::perturb_study::{self, DATA_FILE, StudyData};

/// Arguments of `hif8lab perturb-study`.
#[derive(Args, Debug)]
pub struct PerturbStudyArgs {
    /// The dose study's folder (its `runs.jsonl.gz` holds U, max_window-low from the
    /// undamaged base, and most_recent-low).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "docs/results/real-smollm2-dose"
    )]
    dose: PathBuf,
    /// The grid folder of P (`grid --preset real-smollm2-perturb --perturb hif8:1024 --runs
    /// max_window-low`).
    #[arg(long, value_name = "DIR", requires = "sham")]
    damaged: Option<PathBuf>,
    /// The grid folder of S (`--runs max_window65-low`).
    #[arg(long, value_name = "DIR", requires = "damaged")]
    sham: Option<PathBuf>,
    /// The grid folder of U's order 0 rerun (the reproducibility check).
    #[arg(long, value_name = "DIR", requires = "damaged")]
    rerun: Option<PathBuf>,
    /// The study's folder: `runs.jsonl.gz` (the new arms' data, gathered from the grid
    /// folders) and `results.md`. Default `runs/real-smollm2-perturb`.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Rebuild DIR/results.md from DIR/runs.jsonl.gz and the dose study's data: the same
    /// report, byte for byte.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["damaged", "sham", "rerun", "out"])]
    recompute: Option<PathBuf>,
}

/// `hif8lab perturb-study`.
pub fn run(args: PerturbStudyArgs) -> Result<crate::output::Outcome> {
    let out = args
        .recompute
        .clone()
        .or(args.out.clone())
        .unwrap_or_else(|| PathBuf::from("runs/real-smollm2-perturb"));
    let dose = GridData::read(&args.dose.join(GRID_DATA))?;
    let data_path = out.join(DATA_FILE);
    if let (Some(damaged), Some(sham)) = (&args.damaged, &args.sham) {
        let read = |dir: &PathBuf| GridData::read(&dir.join(GRID_DATA));
        let data = StudyData {
            damaged: read(damaged)?,
            sham: read(sham)?,
            rerun: args.rerun.as_ref().map(read).transpose()?,
        };
        std::fs::create_dir_all(&out).with_context(|| format!("--out {}", out.display()))?;
        hif8lab_train::io::write_atomic(&data_path, &data.to_gzip_jsonl()?)
            .with_context(|| format!("writing {}", data_path.display()))?;
    } else if args.recompute.is_none() && !data_path.is_file() {
        anyhow::bail!(
            "{}: no study data; give --damaged and --sham (the grid folders of its arms)",
            data_path.display()
        );
    }
    let data = StudyData::read(&data_path)?;
    let study = perturb_study::analyse(&dose, &data)?;
    let path = out.join("results.md");
    hif8lab_train::io::write_atomic(&path, study.markdown().as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    crate::output::outln!("{}", study.markdown());
    eprintln!("wrote {}", path.display());
    Ok(crate::output::Outcome::Ok)
}
