//! The lessons' scenario run in memory (the browser's way; natively a thread runs it).

use crate::jobs::*;
use crate::*;

impl HifApp {
    /// Pretrains the lessons' base (once) on the CPU, scoring its probes and keeping its
    /// weights (`after_base` / `scenario_waiting` say what starts once it is ready); returns
    /// whether pretraining runs.
    pub(super) fn pretrain_base(
        &mut self,
        grid: &hif8lab_lab::grid::GridConfig,
        wake: impl Fn() + Send + 'static,
    ) -> bool {
        if self.jobs.running(JobKind::Base) {
            return true;
        }
        let extras = RunExtras {
            probes: Some(Arc::new(grid.probes())),
            keep_weights: true,
            ..Default::default()
        };
        match self.launch(grid.pretrain_config(), Device::Cpu, extras, wake) {
            Ok(t) => {
                self.jobs.start(JobKind::Base, Work::Training(t));
                self.messages.status = format!(
                    "Pretraining the base model ({} steps, once)…",
                    grid.pretrain_phase().steps
                );
                true
            }
            Err(e) => {
                self.messages.status = format!("Cannot pretrain: {e}");
                false
            }
        }
    }

    /// Runs the current lesson's judged scenario in memory, stepped from the frame loop (the
    /// browser's way; natively [`HifApp::run_lesson_scenario`] runs it on a thread with run
    /// folders). Pretrains the base first if needed.
    pub fn run_scenario_in_memory(&mut self) {
        let grid = match hif8lab_lab::grid::GridConfig::preset("grid-lesson") {
            Ok(g) => g,
            Err(e) => {
                self.messages.status = e.to_string();
                return;
            }
        };
        if self.awaits_shipped_base() {
            self.lessons.scenario_waiting = true;
            return;
        }
        let (Some(base), Some(probes)) =
            (self.lessons.base.clone(), self.lessons.base_probes.clone())
        else {
            // Stepped from the frame loop, which keeps repainting while it runs.
            self.lessons.scenario_waiting = self.pretrain_base(&grid, || {});
            return;
        };
        self.lessons.report = None;
        self.lessons.views.clear();
        let user = self.sandbox_settings();
        if let Some(job) = scenario::ScenarioJob::new(
            self.lessons.lesson.id,
            &grid,
            base,
            probes,
            user.as_ref(),
            scenario::parallel_runs(),
        ) {
            self.jobs
                .start(JobKind::Scenario, Work::Scenario(Box::new(job)));
        }
    }
}
