//! A lesson's judged scenario run in memory: its runs one after another from the pretrained
//! base, stepped from the frame loop, summarized as the grid summarizes its run folders, then
//! judged by `hif8lab_lab::lesson::judge` — how the browser (no threads, no files) runs what
//! `hif8lab lesson run NAME` runs.

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
    current: Option<Current>,
    summaries: Vec<RunSummary>,
    /// The finished runs, for the small multiples.
    pub views: Vec<RunView>,
    started: Instant,
}

impl ScenarioJob {
    /// The scenario of `lesson` from `base` (whose probe scores are `base_probes`; the
    /// sandbox trains `user`'s settings), or `None` for a lesson that trains nothing.
    pub fn new(
        lesson: hif8lab_lab::lesson::LessonId,
        grid: &GridConfig,
        base: Arc<Checkpoint>,
        base_probes: ProbeScores,
        user: Option<&RunConfig>,
    ) -> Option<Self> {
        Some(ScenarioJob {
            lesson,
            runs: hif8lab_lab::lesson::scenario(lesson, grid, user)?,
            base,
            base_probes,
            probes: Arc::new(grid.probes()),
            current: None,
            summaries: Vec::new(),
            views: Vec::new(),
            started: Instant::now(),
        })
    }

    /// Where it is, for the status line and the lesson's panel: run i of M, step n of N, and
    /// the time left at the pace of the steps so far.
    pub fn progress(&self) -> String {
        let i = self.summaries.len();
        let total: u64 = self.runs.iter().map(|(_, c)| c.train.steps).sum();
        let done: u64 = self.runs[..i]
            .iter()
            .map(|(_, c)| c.train.steps)
            .sum::<u64>()
            + self
                .current
                .as_ref()
                .map_or(0, |c| c.view.loss.len() as u64);
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
        match (self.runs.get(i), &self.current) {
            (Some((name, c)), Some(cur)) => format!(
                "Scenario run {} of {}: {name}, step {} of {}{left}",
                i + 1,
                self.runs.len(),
                cur.view.loss.len(),
                c.train.steps
            ),
            _ => format!("Scenario: {i} of {} runs done{left}", self.runs.len()),
        }
    }

    /// Trains for about `budget`; returns the verdict once every run is done.
    pub fn poll(&mut self, budget: Duration) -> Result<Option<LessonReport>, String> {
        let i = self.summaries.len();
        let Some((name, config)) = self.runs.get(i).cloned() else {
            return Ok(Some(hif8lab_lab::lesson::judge(
                self.lesson,
                self.base_probes.clone(),
                &self.runs,
                &self.summaries,
            )));
        };
        let cur = self.current.get_or_insert_with(|| {
            let extras = RunExtras {
                base: Some(self.base.clone()),
                probes: Some(self.probes.clone()),
                // The verdict needs the final scores only (the base's are known).
                eval_every: 0,
                eval_at_start: false,
                keep_weights: false,
            };
            Current {
                training: Training::start_local(config.clone(), Device::Cpu, extras),
                sums: None,
                active: 0,
                quantizers: 0,
                probes: ProbeScores::default(),
                view: RunView::new(&name, Vec::new(), 0, config.qat.scaling.target),
                started: Instant::now(),
            }
        });
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
        if finished && let Some(cur) = self.current.take() {
            let sums = cur.sums.ok_or_else(|| format!("{name}: never started"))?;
            let facts = SummaryFacts {
                config: &config,
                estimators: &cur.view.estimators,
                active: cur.active,
                quantizers: cur.quantizers,
            };
            self.summaries.push(sums.finish(
                &name,
                &facts,
                Some(cur.probes),
                cur.started.elapsed().as_secs_f64(),
            ));
            let mut view = cur.view;
            view.set_config(&config);
            self.views.push(view);
        }
        Ok(None)
    }
}
