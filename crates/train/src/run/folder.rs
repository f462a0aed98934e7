//! The run-folder sink of the driver: the only code that writes a run folder's
//! `config.toml`, `metrics.jsonl`, `trace.jsonl`, `probes.jsonl`, `checkpoints/`,
//! `segments.json` and `summary.json` (layout in [`crate::run`]).

use std::path::{Path, PathBuf};

use web_time::Instant;

use crate::config::RunConfig;
use crate::driver::{Event, Sink};
use crate::run::{self, RunStatus, RunSummary, RunWriter, Segment, SummaryFacts};
use crate::trainer::TrainError;

/// A run folder being written from driver events.
pub struct RunFolder {
    writer: RunWriter,
    config: RunConfig,
    estimators: Vec<String>,
    active: usize,
    quantizers: usize,
    segments: Vec<Segment>,
    clock: Instant,
    tokens: u64,
    /// Steps done after the last report of this segment.
    steps_reported: Option<u64>,
    last_checkpoint: Option<PathBuf>,
}

fn io(dir: &Path, what: &str) -> impl Fn(std::io::Error) -> TrainError {
    TrainError::io(format!("{what} in {}", dir.display()))
}

impl RunFolder {
    /// Creates a new run folder (it must not hold a run already) whose first segment runs
    /// on `backend`, its bf16-exact products on `gemm` ([`crate::Trainer::gemm_kernel`]).
    pub fn create(
        dir: &Path,
        config: &RunConfig,
        estimators: &[String],
        active: usize,
        quantizers: usize,
        backend: &hif8lab_engine::BackendInfo,
        gemm: &str,
    ) -> Result<Self, TrainError> {
        let writer = RunWriter::create(dir, config, estimators, active)
            .map_err(io(dir, "creating the run folder"))?;
        let mut segment = Segment::new(0, config.train.steps);
        segment.set_backend(backend, gemm);
        Self::open(
            writer,
            config,
            estimators,
            active,
            quantizers,
            vec![segment],
        )
    }

    /// Reopens a run folder to continue it at `step`; `segments` ends with the new segment.
    pub fn resume(
        dir: &Path,
        config: &RunConfig,
        estimators: &[String],
        active: usize,
        quantizers: usize,
        step: u64,
        segments: Vec<Segment>,
    ) -> Result<Self, TrainError> {
        let writer = RunWriter::resume(dir, config, estimators, active, step)
            .map_err(io(dir, "reopening the run folder"))?;
        Self::open(writer, config, estimators, active, quantizers, segments)
    }

    fn open(
        writer: RunWriter,
        config: &RunConfig,
        estimators: &[String],
        active: usize,
        quantizers: usize,
        segments: Vec<Segment>,
    ) -> Result<Self, TrainError> {
        let dir = writer.dir().to_owned();
        run::write_segments(&dir, &segments).map_err(io(&dir, "writing segments.json"))?;
        Ok(RunFolder {
            writer,
            config: config.clone(),
            estimators: estimators.to_vec(),
            active,
            quantizers,
            segments,
            clock: Instant::now(),
            tokens: 0,
            steps_reported: None,
            last_checkpoint: None,
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        self.writer.dir()
    }

    /// Keeps a copy of what the run started from (`hf/config.json`, `hf/tokenizer.json` of
    /// `train --init-from`) in the folder, written atomically.
    pub fn attach(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let path = self.dir().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        crate::run::write_atomic(&path, bytes)
    }

    /// Segments so far (the last is the current one).
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Throughput of this segment so far.
    pub fn tokens_per_s(&self) -> f64 {
        self.tokens as f64 / self.clock.elapsed().as_secs_f64().max(1e-9)
    }

    /// The newest checkpoint written by this segment.
    pub fn last_checkpoint(&self) -> Option<&Path> {
        self.last_checkpoint.as_deref()
    }

    fn update_segment(&mut self, end_step: u64) {
        let tokens_per_step = self.config.tokens_per_step() as u64;
        let wall = self.clock.elapsed().as_secs_f64();
        if let Some(current) = self.segments.last_mut() {
            current.end_step = end_step;
            current.wall_s = wall;
            current.tokens = (current.end_step - current.start_step) * tokens_per_step;
        }
    }

    /// Ends the segment with `status` and writes `segments.json` and `summary.json`.
    pub fn finish(
        &mut self,
        status: RunStatus,
        error: Option<String>,
    ) -> Result<RunSummary, TrainError> {
        let dir = self.dir().to_owned();
        // Steps reported since the last checkpoint count too (a run without a final
        // checkpoint).
        if let Some(step) = self.steps_reported
            && self.segments.last().is_some_and(|s| step > s.end_step)
        {
            self.update_segment(step);
        }
        if let Some(current) = self.segments.last_mut() {
            current.status = status;
            current.wall_s = self.clock.elapsed().as_secs_f64();
        }
        run::write_segments(&dir, &self.segments).map_err(io(&dir, "writing segments.json"))?;
        self.writer.flush().map_err(io(&dir, "flushing"))?;
        let facts = SummaryFacts {
            config: &self.config,
            estimators: &self.estimators,
            active: self.active,
            quantizers: self.quantizers,
        };
        let summary = RunSummary::from_run(&dir, &facts, &self.segments, status, error);
        self.writer
            .summary(&summary)
            .map_err(io(&dir, "writing summary.json"))?;
        Ok(summary)
    }
}

/// Completes the record of a run folder whose process was killed after its final
/// checkpoint, before its summary: `segments.json` and `summary.json` (status finished).
pub fn complete_finished(
    dir: &Path,
    config: &RunConfig,
    segments: &[Segment],
) -> Result<RunSummary, TrainError> {
    run::write_segments(dir, segments).map_err(io(dir, "writing segments.json"))?;
    let scaling = config.qat.plan()?;
    let estimators = scaling.names();
    let facts = SummaryFacts {
        config,
        estimators: &estimators,
        active: scaling.active_index(),
        quantizers: crate::model::QuantPlan::new(&config.model, &config.qat)
            .ids
            .len(),
    };
    let summary = RunSummary::from_run(dir, &facts, segments, RunStatus::Finished, None);
    summary
        .write(dir)
        .map_err(io(dir, "writing summary.json"))?;
    Ok(summary)
}

impl Sink for RunFolder {
    fn event(&mut self, event: Event) -> Result<(), TrainError> {
        let dir = self.dir().to_owned();
        match event {
            Event::Report(r) => {
                self.tokens += r.tokens;
                self.steps_reported = Some(r.step + 1);
                let tps = self.tokens_per_s();
                let records: Vec<_> = r
                    .calls
                    .iter()
                    .map(|c| c.to_trace(&self.estimators, self.active))
                    .collect();
                self.writer
                    .write(&r, &records, tps)
                    .map_err(io(&dir, "writing metrics/trace"))?;
            }
            Event::Probes(p) => self
                .writer
                .probes(&p)
                .map_err(io(&dir, "writing probes.jsonl"))?,
            Event::Checkpoint { step, checkpoint } => self.checkpoint(step, &*checkpoint)?,
            Event::Weights(_) => {}
        }
        Ok(())
    }

    /// Streams the checkpoint into `checkpoints/step_N.safetensors` tensor by tensor (a
    /// trainer's state is never held whole a second time), keeps the newest ones and
    /// records the segment.
    fn checkpoint(
        &mut self,
        step: u64,
        source: &dyn crate::models::checkpoint::CheckpointSource,
    ) -> Result<(), TrainError> {
        let dir = self.dir().to_owned();
        self.writer.flush().map_err(io(&dir, "flushing"))?;
        let path = RunWriter::save_checkpoint_in(&dir, source, step)
            .map_err(io(&dir, "writing a checkpoint"))?;
        self.last_checkpoint = Some(path);
        // Only the newest `train.keep_checkpoints` stay (a removal that fails is
        // harmless: the file is a valid older checkpoint).
        let keep = self.config.train.keep_checkpoints.max(1);
        for (_, old) in crate::models::checkpoint::list(&dir).into_iter().skip(keep) {
            let _ = std::fs::remove_file(old);
        }
        // A checkpoint also records how far this segment got, so a killed segment
        // keeps its figures in segments.json.
        self.update_segment(step);
        run::write_segments(&dir, &self.segments).map_err(io(&dir, "writing segments.json"))?;
        Ok(())
    }
}
