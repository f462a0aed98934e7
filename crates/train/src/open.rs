//! The one way a run is opened: a trainer for its config, its weights from where the run
//! starts, its run folder created or reopened ([`open_run`]: `train`, `--resume`,
//! `--init-from`, the grid's runs) or none ([`open_in_memory`]: the app's runs, native and
//! in the browser, the lessons' base, `bench train`), and the driver that steps it.

use std::path::Path;

use hif8lab_engine::Backend;

use crate::RunConfig;
use crate::driver::{Driver, Schedule};
use crate::models::checkpoint::Checkpoint;
use crate::run::Segment;
use crate::run::folder::RunFolder;
use crate::trainer::{TrainError, Trainer};

/// Where a run's weights come from.
pub enum Start<'a> {
    /// Initialized from the config's seed.
    Fresh,
    /// A pretrained model's weights (`--init-from`, a grid's or a lesson's base): the
    /// optimizer, the quantizers, the step and the data order start fresh.
    Base(&'a Checkpoint),
    /// The same run continued (`--resume`): from its newest valid checkpoint (weights,
    /// moments, quantizers, step and data position), or from step 0 when it stopped before
    /// its first; `segments` are the folder's segments with the new one last.
    Resume {
        /// The checkpoint, if the run wrote one.
        checkpoint: Option<&'a Checkpoint>,
        /// The run's segments, the one this resume begins last.
        segments: Vec<Segment>,
    },
}

/// An opened run: its driver, its folder and what opening it noted.
pub struct OpenRun<B: Backend> {
    /// The driver, with the trainer in it.
    pub driver: Driver<B>,
    /// The run folder, created (or reopened for [`Start::Resume`]).
    pub folder: RunFolder,
    /// Notes for the user (also recorded in the folder's segment), e.g. a changed backend.
    pub notes: Vec<String>,
}

/// Opens a run of `config` on `backend` into its folder `out`: builds the trainer
/// ([`Trainer::from_config`]), loads its start, creates (or, resuming, reopens) the folder,
/// and hands the trainer to a [`Driver`] with `schedule`.
pub fn open_run<B: Backend>(
    backend: B,
    config: RunConfig,
    start: Start<'_>,
    out: &Path,
    schedule: Schedule,
) -> Result<OpenRun<B>, TrainError> {
    let info = backend.info();
    let mut trainer = Trainer::from_config(backend, config.clone())?;
    let mut notes = Vec::new();
    let segments = match start {
        Start::Fresh => None,
        Start::Base(weights) => {
            trainer.load_weights(weights)?;
            None
        }
        Start::Resume {
            checkpoint,
            mut segments,
        } => {
            if let Some(checkpoint) = checkpoint {
                trainer.restore(checkpoint)?;
            }
            if let [.., previous, current] = segments.as_mut_slice()
                && (previous.backend != info.kind || previous.adapter != info.adapter)
            {
                let note = format!(
                    "backend changed: {} '{}' → {} '{}' (results are not bit-identical to an \
                     uninterrupted run)",
                    previous.backend, previous.adapter, info.kind, info.adapter
                );
                current.notes.push(note.clone());
                notes.push(note);
            }
            let gemm = trainer.gemm_kernel();
            if let [.., previous, current] = segments.as_mut_slice() {
                // Segments written before the kernel was recorded used the f32 GEMM.
                let before = if previous.gemm.is_empty() {
                    "f32"
                } else {
                    &previous.gemm
                };
                if previous.backend == "cpu" && info.kind == "cpu" && before != gemm {
                    let note = format!(
                        "GEMM kernel changed: {before} → {gemm} (the same products, another \
                         order of f32 accumulation: results are not bit-identical to an \
                         uninterrupted run; train.gemm picks it)"
                    );
                    current.notes.push(note.clone());
                    notes.push(note);
                }
            }
            if let Some(current) = segments.last_mut() {
                current.set_backend(&info, gemm);
            }
            Some(segments)
        }
    };
    let (estimators, active) = (trainer.estimator_names(), trainer.active_estimator());
    let quantizers = trainer.quantizers().len();
    let folder = match segments {
        None => {
            let gemm = trainer.gemm_kernel();
            RunFolder::create(out, &config, estimators, active, quantizers, &info, gemm)?
        }
        Some(segments) => {
            let step = trainer.steps_done();
            RunFolder::resume(out, &config, estimators, active, quantizers, step, segments)?
        }
    };
    Ok(OpenRun {
        driver: Driver::new(trainer, schedule),
        folder,
        notes,
    })
}

/// Opens a run that writes no folder (the app's runs, the lessons' base, benchmarks): its
/// trainer for `config`, started from `base`'s weights when given, in a [`Driver`].
pub fn open_in_memory<B: Backend>(
    backend: B,
    config: RunConfig,
    base: Option<&Checkpoint>,
    schedule: Schedule,
) -> Result<Driver<B>, TrainError> {
    let mut trainer = Trainer::from_config(backend, config)?;
    if let Some(weights) = base {
        trainer.load_weights(weights)?;
    }
    Ok(Driver::new(trainer, schedule))
}
