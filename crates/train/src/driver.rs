//! The one run driver: the only code that steps a [`Trainer`]. It enqueues steps, polls
//! their reports, runs the probe schedule, takes scheduled checkpoints, reads the final
//! weights back, and obeys run / pause / stop — then hands every result to a [`Sink`] as an
//! [`Event`]. The command line (`train`, `grid`, `lesson`, `bench train`), the app's
//! training thread and the browser's frame loop all drive the same object:
//! - natively, [`Driver::run`] loops until the end (blocking on the device where it must);
//! - in a UI, [`Driver::advance`] works for a time budget and never blocks when `block` is
//!   false (the browser delivers readbacks between frames).
//!
//! Sinks: [`crate::run::folder::RunFolder`] writes a run folder (the only writer of `metrics.jsonl`,
//! `trace.jsonl`, `probes.jsonl`, checkpoints and `summary.json`), [`Memory`] keeps events
//! in memory (lessons, tests), and the app forwards them over its channel.

use std::sync::Arc;
use std::time::Duration;

use web_time::Instant;

use hif8lab_engine::Backend;

use crate::eval::ProbeSet;
use crate::models::checkpoint::Checkpoint;
use crate::trainer::{PendingEval, PendingWeights, ProbeScores, StepReport, TrainError, Trainer};

/// When the driver scores probes, checkpoints and reads weights back.
#[derive(Clone, Default)]
pub struct Schedule {
    /// The probes (none: no scoring).
    pub probes: Option<Arc<ProbeSet>>,
    /// Steps between probe evaluations (0: only after the last step).
    pub eval_every: u64,
    /// Also score the probes before the first step.
    pub eval_at_start: bool,
    /// Steps between checkpoints (0: none on the way); native only.
    pub checkpoint_every: u64,
    /// Checkpoint after the last step and when stopped; native only.
    pub checkpoint_at_end: bool,
    /// Read the final weights back as [`Event::Weights`].
    pub keep_weights: bool,
    /// Steps enqueued ahead of their reports (0: unlimited).
    pub max_in_flight: usize,
    /// When set, fewer steps are kept in flight once steps take long: as many as fit in this
    /// time, at least one and at most `max_in_flight` ([`in_flight_bound`]). A frame drawn
    /// on the device that trains (the browser's WebGPU: the page's frames share its queue)
    /// waits behind the steps enqueued before it, so it waits about this long at most, or
    /// one step where a step takes longer.
    pub frame_wait: Option<Duration>,
}

/// How many steps to keep in flight: `max` (0: unlimited), or with a `frame_wait` and a
/// measured `step` time, as many as fit in the wait — at least one, at most `max`.
pub fn in_flight_bound(max: usize, frame_wait: Option<Duration>, step: Option<Duration>) -> usize {
    match (frame_wait, step) {
        (Some(wait), Some(step)) if !step.is_zero() => {
            let fit = ((wait.as_secs_f64() / step.as_secs_f64()).floor() as usize).max(1);
            if max == 0 { fit } else { fit.min(max) }
        }
        _ => max,
    }
}

/// What the caller wants the driver to do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Train.
    Run,
    /// Deliver what is in flight, enqueue nothing new.
    Pause,
    /// End the run (checkpointing first when the schedule says so).
    Stop,
}

/// What the driver produced.
#[derive(Debug)]
pub enum Event {
    /// A step's report (with every quantizer call).
    Report(Box<StepReport>),
    /// Probe scores.
    Probes(Box<ProbeScores>),
    /// A checkpoint of the state after `step` steps (scheduled, final or on stop).
    Checkpoint {
        /// Steps done.
        step: u64,
        /// The state.
        checkpoint: Box<Checkpoint>,
    },
    /// The final weights ([`Schedule::keep_weights`]).
    Weights(Arc<Checkpoint>),
}

/// Where events go. An error ends the run.
pub trait Sink {
    /// Takes one event.
    fn event(&mut self, event: Event) -> Result<(), TrainError>;

    /// Takes a checkpoint of the state after step `step`, read from `source` as it is
    /// written. By default it is read whole and sent as an [`Event::Checkpoint`]; a run
    /// folder streams it to its file instead.
    fn checkpoint(
        &mut self,
        step: u64,
        source: &dyn crate::models::checkpoint::CheckpointSource,
    ) -> Result<(), TrainError> {
        let checkpoint = crate::models::checkpoint::materialize(source)
            .map_err(|e| TrainError::Checkpoint(e.to_string()))?;
        self.event(Event::Checkpoint {
            step,
            checkpoint: Box::new(checkpoint),
        })
    }
}

impl<F: FnMut(Event) -> Result<(), TrainError>> Sink for F {
    fn event(&mut self, event: Event) -> Result<(), TrainError> {
        self(event)
    }
}

/// A sink in front of another: each event is shown to `see` first (which may read `inner`
/// or give it events of its own), then passed on; checkpoints go to `inner` as it takes
/// them (a run folder streams them to its file).
pub struct Tap<'a, S: Sink, F> {
    /// Where everything goes.
    pub inner: &'a mut S,
    /// What looks at each event on its way.
    pub see: F,
}

impl<S: Sink, F: FnMut(&Event, &mut S) -> Result<(), TrainError>> Sink for Tap<'_, S, F> {
    fn event(&mut self, event: Event) -> Result<(), TrainError> {
        (self.see)(&event, self.inner)?;
        self.inner.event(event)
    }

    fn checkpoint(
        &mut self,
        step: u64,
        source: &dyn crate::models::checkpoint::CheckpointSource,
    ) -> Result<(), TrainError> {
        self.inner.checkpoint(step, source)
    }
}

/// A sink that keeps everything in memory.
#[derive(Debug, Default)]
pub struct Memory {
    /// Every report, in order.
    pub reports: Vec<StepReport>,
    /// Every probe evaluation, in order.
    pub probes: Vec<ProbeScores>,
    /// The final weights, when asked for.
    pub weights: Option<Arc<Checkpoint>>,
}

impl Sink for Memory {
    fn event(&mut self, event: Event) -> Result<(), TrainError> {
        match event {
            Event::Report(r) => self.reports.push(*r),
            Event::Probes(p) => self.probes.push(*p),
            Event::Weights(w) => self.weights = Some(w),
            Event::Checkpoint { .. } => {}
        }
        Ok(())
    }
}

/// Where a call to [`Driver::advance`] left the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Used its time budget; call again.
    Working,
    /// Can only wait for the device (or is paused); call again later.
    Waiting,
    /// Every step done, every result delivered.
    Finished,
    /// Stopped before the end.
    Stopped,
}

/// Drives one [`Trainer`] through its steps and schedule.
pub struct Driver<B: Backend> {
    trainer: Trainer<B>,
    schedule: Schedule,
    next_eval: Option<u64>,
    last_eval: Option<u64>,
    pending_eval: Option<PendingEval>,
    pending_weights: Option<PendingWeights>,
    weights_sent: bool,
    last_checkpoint: Option<u64>,
    host: Duration,
    done: Option<Progress>,
    /// When the last reports arrived (reset by a pause, whose wait is no step's time).
    last_reports: Option<Instant>,
    /// A step's time, between consecutive reports (a moving average).
    step_time: Option<Duration>,
    /// The backend computes as it is asked (the CPU): a step's report is ready as the step
    /// ends, and goes with the slice that ran it.
    synchronous: bool,
}

impl<B: Backend> Driver<B> {
    /// A driver of `trainer` (fresh, restored or loaded with base weights) on `schedule`.
    pub fn new(trainer: Trainer<B>, schedule: Schedule) -> Self {
        let steps = trainer.steps_done();
        let synchronous = trainer.backend().info().kind == "cpu";
        let next_eval = match (
            &schedule.probes,
            schedule.eval_at_start,
            schedule.eval_every,
        ) {
            (None, _, _) => None,
            (Some(_), true, _) => Some(steps),
            (Some(_), false, 0) => None,
            (Some(_), false, n) => Some((steps / n + 1) * n),
        };
        Driver {
            trainer,
            schedule,
            next_eval,
            last_eval: None,
            pending_eval: None,
            pending_weights: None,
            weights_sent: false,
            last_checkpoint: Some(steps),
            host: Duration::ZERO,
            done: None,
            last_reports: None,
            step_time: None,
            synchronous,
        }
    }

    /// A step's time as measured between consecutive reports (a moving average), once two
    /// batches of reports have arrived.
    pub fn step_time(&self) -> Option<Duration> {
        self.step_time
    }

    /// The trainer.
    pub fn trainer(&self) -> &Trainer<B> {
        &self.trainer
    }

    /// The trainer, to change what it measures (histogram choice).
    pub fn trainer_mut(&mut self) -> &mut Trainer<B> {
        &mut self.trainer
    }

    /// Host time spent enqueuing steps (recording and submitting them), so far.
    pub fn host_time(&self) -> Duration {
        self.host
    }

    /// Runs to the end (native): blocks on the device where it must; `stop` is asked
    /// between steps.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run(
        &mut self,
        sink: &mut dyn Sink,
        stop: &dyn Fn() -> bool,
    ) -> Result<Progress, TrainError> {
        loop {
            let control = if stop() { Control::Stop } else { Control::Run };
            match self.advance(control, Duration::from_millis(200), true, sink)? {
                Progress::Working | Progress::Waiting => {}
                end => return Ok(end),
            }
        }
    }

    fn deliver(&mut self, reports: Vec<StepReport>, sink: &mut dyn Sink) -> Result<(), TrainError> {
        if !reports.is_empty() {
            let now = Instant::now();
            if let Some(last) = self.last_reports {
                let each = now.duration_since(last) / reports.len() as u32;
                self.step_time = Some(match self.step_time {
                    Some(t) => (t * 3 + each) / 4,
                    None => each,
                });
            }
            self.last_reports = Some(now);
        }
        for r in reports {
            sink.event(Event::Report(Box::new(r)))?;
        }
        Ok(())
    }

    /// Delivers every step in flight; `false` when that has to wait and `block` is false.
    fn drain(&mut self, block: bool, sink: &mut dyn Sink) -> Result<bool, TrainError> {
        let reports = self.trainer.poll()?;
        self.deliver(reports, sink)?;
        if self.trainer.in_flight() == 0 {
            return Ok(true);
        }
        if !block {
            return Ok(false);
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let reports = self.trainer.finish()?;
            self.deliver(reports, sink)?;
        }
        Ok(self.trainer.in_flight() == 0)
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn checkpoint(&mut self, sink: &mut dyn Sink) -> Result<(), TrainError> {
        let source = self.trainer.checkpoint_source()?;
        sink.checkpoint(self.trainer.steps_done(), &source)
    }

    #[cfg(target_arch = "wasm32")]
    fn checkpoint(&mut self, _: &mut dyn Sink) -> Result<(), TrainError> {
        Ok(())
    }

    /// Stops: the steps in flight delivered and a checkpoint taken when the schedule keeps
    /// one at the end ([`Progress::Waiting`] while the device is not done and `block` is
    /// false).
    fn stop(&mut self, block: bool, sink: &mut dyn Sink) -> Result<Progress, TrainError> {
        if self.schedule.checkpoint_at_end && !self.trainer.finished() {
            if !self.drain(block, sink)? {
                return Ok(Progress::Waiting);
            }
            self.checkpoint(sink)?;
        }
        self.done = Some(Progress::Stopped);
        Ok(Progress::Stopped)
    }

    /// The end of a run whose steps are all enqueued: the last steps delivered, the weights
    /// sent when kept, the final checkpoint. `None`: the weights' read-back was just begun,
    /// go round again.
    fn finish(&mut self, block: bool, sink: &mut dyn Sink) -> Result<Option<Progress>, TrainError> {
        if !self.drain(block, sink)? {
            return Ok(Some(Progress::Waiting));
        }
        if self.schedule.keep_weights && !self.weights_sent {
            match self.pending_weights.take() {
                None => {
                    self.pending_weights = Some(self.trainer.begin_weights());
                    return Ok(None);
                }
                Some(w) if !w.is_ready() && !block => {
                    self.pending_weights = Some(w);
                    return Ok(Some(Progress::Waiting));
                }
                Some(w) => {
                    sink.event(Event::Weights(Arc::new(w.finish(block)?)))?;
                    self.weights_sent = true;
                }
            }
        }
        if self.schedule.checkpoint_at_end {
            self.checkpoint(sink)?;
        }
        self.done = Some(Progress::Finished);
        Ok(Some(Progress::Finished))
    }

    /// Works for about `budget` (at least one step when one can be enqueued). With `block`
    /// false it returns [`Progress::Waiting`] instead of waiting for the device.
    pub fn advance(
        &mut self,
        control: Control,
        budget: Duration,
        block: bool,
        sink: &mut dyn Sink,
    ) -> Result<Progress, TrainError> {
        if let Some(done) = self.done {
            return Ok(done);
        }
        let start = Instant::now();
        loop {
            if control == Control::Stop {
                return self.stop(block, sink);
            }
            let reports = self.trainer.poll()?;
            self.deliver(reports, sink)?;
            if let Some(p) = self.pending_eval.take() {
                if !p.is_ready() && !block {
                    self.pending_eval = Some(p);
                    return Ok(Progress::Waiting);
                }
                sink.event(Event::Probes(Box::new(p.finish(block)?)))?;
            }
            let steps = self.trainer.steps_done();
            let eval_due = self.next_eval.is_some_and(|n| steps >= n)
                || (self.trainer.finished() && self.last_eval != Some(steps));
            if let (Some(probes), true) = (self.schedule.probes.clone(), eval_due) {
                if !self.drain(block, sink)? {
                    return Ok(Progress::Waiting);
                }
                self.pending_eval = Some(self.trainer.begin_evaluate(&probes)?);
                self.last_eval = Some(steps);
                self.next_eval =
                    (self.schedule.eval_every > 0).then(|| steps + self.schedule.eval_every);
                continue;
            }
            let every = self.schedule.checkpoint_every;
            if every > 0
                && steps.is_multiple_of(every)
                && self.last_checkpoint != Some(steps)
                && !self.trainer.finished()
            {
                // Deliver the steps before the checkpoint first, then take it once.
                if !self.drain(block, sink)? {
                    return Ok(Progress::Waiting);
                }
                self.checkpoint(sink)?;
                self.last_checkpoint = Some(steps);
            }
            if self.trainer.finished() {
                match self.finish(block, sink)? {
                    Some(progress) => return Ok(progress),
                    None => continue,
                }
            }
            let max = in_flight_bound(
                self.schedule.max_in_flight,
                self.schedule.frame_wait,
                self.step_time,
            );
            if control == Control::Pause {
                self.last_reports = None;
                if block {
                    self.drain(true, sink)?;
                }
                return Ok(Progress::Waiting);
            }
            if max > 0 && self.trainer.in_flight() >= max {
                if !block {
                    return Ok(Progress::Waiting);
                }
                #[cfg(not(target_arch = "wasm32"))]
                {
                    let r = self.trainer.wait_oldest()?;
                    self.deliver(r, sink)?;
                }
                continue;
            }
            let t = Instant::now();
            self.trainer.step()?;
            self.host += t.elapsed();
            if start.elapsed() >= budget {
                // On the CPU a step's report is ready as the step ends: it goes with this
                // slice, not behind the next step, or a caller that posts events after each
                // slice (the browser's worker) would show every step a step late, and a
                // Pause would be followed by two reports, not one. (On a GPU reports arrive
                // on their own, between frames: the next slice takes them.)
                if self.synchronous {
                    let reports = self.trainer.poll()?;
                    self.deliver(reports, sink)?;
                }
                return Ok(Progress::Working);
            }
        }
    }
}
