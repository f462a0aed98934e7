//! A lesson scenario's side of the jobs: pretraining the lessons' base when none is shipped,
//! the in-memory scenario, its progress on its own thread (in words for its panel), and its
//! runs read back once it is judged.

use super::*;

/// A lesson scenario's progress on its thread, in words for its panel: the phase, step n of
/// N, runs done of M and the time left at the pace so far.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) struct LessonProgress {
    text: std::sync::Arc<std::sync::Mutex<String>>,
    started: std::time::Instant,
    run_started: std::time::Instant,
    name: String,
    index: usize,
    total: usize,
}

#[cfg(not(target_arch = "wasm32"))]
impl LessonProgress {
    /// Progress written into `text`, from now.
    pub(crate) fn new(text: std::sync::Arc<std::sync::Mutex<String>>) -> Self {
        LessonProgress {
            text,
            started: std::time::Instant::now(),
            run_started: std::time::Instant::now(),
            name: String::new(),
            index: 0,
            total: 1,
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl hif8lab_lab::grid::GridProgress for LessonProgress {
    fn start(&mut self, name: &str, index: usize, total: usize, _skipped: bool) {
        (self.name, self.index, self.total) = (name.to_owned(), index, total);
        self.run_started = std::time::Instant::now();
    }

    fn step(&mut self, step: u64, steps: u64, _loss: f32) {
        let done = (step + 1) as f64 / steps.max(1) as f64;
        let phase = if self.name.starts_with("base") {
            "Pretraining the base model (once; reused afterwards)".to_owned()
        } else {
            format!("Run {} of {}: {}", self.index + 1, self.total, self.name)
        };
        let run_s = self.run_started.elapsed().as_secs_f64();
        // The rest of this run, then the runs after it at this run's pace.
        let left = if self.name.starts_with("base") {
            run_s / done - run_s
        } else {
            run_s / done * (self.total - self.index) as f64 - run_s
        };
        if let Ok(mut t) = self.text.lock() {
            *t = format!(
                "{phase}: step {} of {steps}; about {} left ({:.0} s so far).",
                step + 1,
                crate::words::duration_words(left),
                self.started.elapsed().as_secs_f64()
            );
        }
    }

    fn probes(&mut self, _: &hif8lab_train::ProbeScores) {}
}

/// The runs of a headless lesson scenario, read back from their run folders, and the base
/// model's last probe scores (native).
pub(crate) fn lesson_views(
    r: &hif8lab_lab::lesson::LessonReport,
) -> (Vec<RunView>, Option<hif8lab_train::ProbeScores>) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let out = std::path::Path::new(LESSON_OUT);
        let dir = out.join("runs");
        let views = r
            .runs
            .iter()
            .filter_map(|name| RunView::load(&dir.join(name)).ok())
            .collect();
        let base = RunView::load(&out.join("base"))
            .ok()
            .and_then(|v| v.probes.last().cloned());
        (views, base)
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = r;
        (Vec::new(), None)
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::LessonProgress;
    use hif8lab_lab::grid::{CellKey, GridProgress};

    #[test]
    fn lesson_progress_names_phase_step_run_and_time_left() {
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut p = LessonProgress::new(text.clone());
        p.start("base", 0, 1, false);
        p.step(4, 10, 1.0);
        let t = text.lock().unwrap().clone();
        assert!(t.starts_with("Pretraining the base model"), "{t}");
        assert!(t.contains("step 5 of 10") && t.contains("s left"), "{t}");
        p.start(&CellKey::MAX_WINDOW_LOW.name(), 2, 12, false);
        p.step(0, 120, 1.0);
        let t = text.lock().unwrap().clone();
        assert!(
            t.starts_with("Run 3 of 12: max_window-low: step 1 of 120"),
            "{t}"
        );
    }
}
