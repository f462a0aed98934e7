//! A lesson's judged scenario run in memory: its runs from the pretrained base, summarized as
//! the grid summarizes its run folders, then judged by `hif8lab_lab::lesson::judge` — how the
//! browser (no threads, no files) runs what `hif8lab lesson run NAME` runs.
//!
//! In the browser each CPU run trains in a Web Worker of its own, and as many runs train at
//! once as the browser reports cores ([`parallel_runs`]): the fixes lesson's eight runs take
//! about half the time on two cores. The runs are independent, so the verdict is the same
//! whatever order they finish in (summaries and views are kept in the scenario's order).
//! Where runs are stepped from the frame loop (natively, or with no worker), one at a time.

use std::sync::Arc;

use hif8lab_lab::grid::GridConfig;
use hif8lab_lab::lesson::LessonReport;
use hif8lab_train::eval::ProbeSet;
use hif8lab_train::models::checkpoint::Checkpoint;
use hif8lab_train::run::{RunSummary, SummaryBuilder, SummaryFacts};
use hif8lab_train::{ProbeScores, RunConfig};
use web_time::{Duration, Instant};

use crate::state::RunView;
use crate::training::{Device, Msg, RunExtras, Training};

/// The run in progress.
struct Current {
    training: Training,
    sums: Option<SummaryBuilder>,
    active: usize,
    quantizers: usize,
    probes: ProbeScores,
    view: RunView,
    started: Instant,
}

/// A lesson scenario being trained in memory.
pub struct ScenarioJob {
    /// The lesson.
    pub lesson: hif8lab_lab::lesson::LessonId,
    runs: Vec<(String, RunConfig)>,
    base: Arc<Checkpoint>,
    base_probes: ProbeScores,
    probes: Arc<ProbeSet>,
    /// The runs in training, by their index in `runs`.
    current: Vec<(usize, Current)>,
    /// The next run to start.
    next: usize,
    /// Runs trained at once.
    parallel: usize,
    /// Per run, once finished: its summary and its view.
    finished: Vec<Option<(RunSummary, RunView)>>,
    /// The finished runs, for the small multiples (in the scenario's order, once judged).
    pub views: Vec<RunView>,
    started: Instant,
}

/// Runs a scenario trains at once: in the browser, one per core it reports
/// (`navigator.hardwareConcurrency`, at most 8: each run has a worker and a model of its own);
/// elsewhere one (frame-loop runs share the frame's time).
pub fn parallel_runs() -> usize {
    #[cfg(target_arch = "wasm32")]
    {
        let cores = js_sys::Reflect::get(&js_sys::global(), &"navigator".into())
            .and_then(|n| js_sys::Reflect::get(&n, &"hardwareConcurrency".into()))
            .ok()
            .and_then(|c| c.as_f64())
            .unwrap_or(1.0);
        (cores as usize).clamp(1, 8)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        1
    }
}

impl ScenarioJob {
    /// The scenario of `lesson` from `base` (whose probe scores are `base_probes`; the
    /// sandbox trains `user`'s settings), or `None` for a lesson that trains nothing.
    /// `parallel` runs train at once ([`parallel_runs`]).
    pub fn new(
        lesson: hif8lab_lab::lesson::LessonId,
        grid: &GridConfig,
        base: Arc<Checkpoint>,
        base_probes: ProbeScores,
        user: Option<&RunConfig>,
        parallel: usize,
    ) -> Option<Self> {
        let runs = hif8lab_lab::lesson::scenario(lesson, grid, user)?;
        Some(ScenarioJob {
            lesson,
            finished: vec![None; runs.len()],
            runs,
            base,
            base_probes,
            probes: Arc::new(grid.probes()),
            current: Vec::new(),
            next: 0,
            parallel: parallel.max(1),
            views: Vec::new(),
            started: Instant::now(),
        })
    }

    /// Where it is, for the status line and the lesson's panel: run i of M, step n of N, and
    /// the time left at the pace of the steps so far (runs i to j of M where several train).
    pub fn progress(&self) -> String {
        let steps = |i: usize| self.runs[i].1.train.steps;
        let total: u64 = (0..self.runs.len()).map(steps).sum();
        let done_runs = self.finished.iter().flatten().count();
        let done: u64 = (0..self.runs.len())
            .filter(|i| self.finished[*i].is_some())
            .map(steps)
            .sum::<u64>()
            + self
                .current
                .iter()
                .map(|(_, c)| c.view.loss.len() as u64)
                .sum::<u64>();
        let elapsed = self.started.elapsed().as_secs_f64();
        let left = if done > 0 {
            format!(
                "; about {} left ({elapsed:.0} s so far)",
                crate::words::duration_words(
                    elapsed / done as f64 * (total - done.min(total)) as f64
                )
            )
        } else {
            String::new()
        };
        match self.current.as_slice() {
            [(i, cur)] => format!(
                "Scenario run {} of {}: {}, step {} of {}{left}",
                i + 1,
                self.runs.len(),
                self.runs[*i].0,
                cur.view.loss.len(),
                steps(*i)
            ),
            [(first, _), .., (last, _)] => format!(
                "Scenario runs {} to {} of {} ({} at once, {done_runs} done): step {done} of \
                 {total} in all{left}",
                first + 1,
                last + 1,
                self.runs.len(),
                self.current.len()
            ),
            [] => format!(
                "Scenario: {done_runs} of {} runs done{left}",
                self.runs.len()
            ),
        }
    }

    /// Trains for about `budget`; returns the verdict once every run is done.
    pub fn poll(&mut self, budget: Duration) -> Result<Option<LessonReport>, String> {
        // Start runs up to the parallel count.
        while self.current.len() < self.parallel && self.next < self.runs.len() {
            let i = self.next;
            self.next += 1;
            let (name, config) = &self.runs[i];
            let extras = RunExtras {
                base: Some(self.base.clone()),
                probes: Some(self.probes.clone()),
                // The verdict needs the final scores only (the base's are known).
                eval_every: 0,
                eval_at_start: false,
                keep_weights: false,
            };
            self.current.push((
                i,
                Current {
                    training: Training::start_local(config.clone(), Device::Cpu, extras),
                    sums: None,
                    active: 0,
                    quantizers: 0,
                    probes: ProbeScores::default(),
                    view: RunView::new(name, Vec::new(), 0, config.qat.scaling.target),
                    started: Instant::now(),
                },
            ));
        }
        if self.current.is_empty() {
            let (summaries, views): (Vec<RunSummary>, Vec<RunView>) =
                self.finished.iter_mut().filter_map(Option::take).unzip();
            self.views = views;
            return Ok(Some(hif8lab_lab::lesson::judge(
                self.lesson,
                self.base_probes.clone(),
                &self.runs,
                &summaries,
            )));
        }
        // Frame-loop runs share the budget; worker runs only hand over their messages.
        let share = budget / self.current.len() as u32;
        let mut k = 0;
        while k < self.current.len() {
            let i = self.current[k].0;
            if self.drain_one(k, share)? {
                let (_, cur) = self.current.remove(k);
                self.finish(i, cur)?;
            } else {
                k += 1;
            }
        }
        Ok(None)
    }

    /// Hands run `k`'s messages to its summary and view; true once it finished.
    fn drain_one(&mut self, k: usize, budget: Duration) -> Result<bool, String> {
        let (i, cur) = &mut self.current[k];
        let name = &self.runs[*i].0;
        let mut finished = false;
        for msg in cur.training.drain(budget) {
            match msg {
                Msg::Started {
                    estimators,
                    active,
                    quantizers,
                    ..
                } => {
                    cur.quantizers = quantizers.len();
                    cur.sums = Some(SummaryBuilder::new(&estimators));
                    cur.active = active;
                    cur.view.estimators = estimators;
                    cur.view.active = active;
                }
                Msg::Report(r) => {
                    if let Some(s) = &mut cur.sums {
                        s.add(&r, cur.active);
                    }
                    cur.view.push_report(&r);
                }
                Msg::Probes(p) => {
                    cur.probes = (*p).clone();
                    cur.view.probes.push(*p);
                }
                Msg::Error(e) => return Err(format!("{name}: {e}")),
                Msg::Preparing { .. } => {}
                Msg::Weights(_) => {}
                Msg::Finished => finished = true,
            }
        }
        Ok(finished)
    }

    /// Run `i`'s summary and view, kept in its place.
    fn finish(&mut self, i: usize, cur: Current) -> Result<(), String> {
        let (name, config) = &self.runs[i];
        let sums = cur.sums.ok_or_else(|| format!("{name}: never started"))?;
        let facts = SummaryFacts {
            config,
            estimators: &cur.view.estimators,
            active: cur.active,
            quantizers: cur.quantizers,
        };
        let summary = sums.finish(
            name,
            &facts,
            Some(cur.probes),
            cur.started.elapsed().as_secs_f64(),
        );
        let mut view = cur.view;
        view.set_config(config);
        self.finished[i] = Some((summary, view));
        Ok(())
    }
}
