//! The app's background work as one list of jobs — the live run, its matched baseline, the
//! lessons' pretrained base, an in-memory lesson scenario, a headless lesson scenario — each
//! with a status, polled by one dispatch every frame ([`HifApp::poll_jobs`]); and the
//! actions that start them.

use super::*;

pub(crate) mod lesson;
#[cfg(not(target_arch = "wasm32"))]
pub(crate) use lesson::LessonProgress;
pub(crate) use lesson::lesson_views;

/// What a background job is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    /// The live (QAT or plain) run the panels show.
    Run,
    /// Its matched high-precision baseline.
    Baseline,
    /// Pretraining the lessons' base model.
    Base,
    /// A lesson scenario trained in memory, stepped from the frame loop.
    Scenario,
    /// A lesson scenario run headless on a thread with run folders (native).
    Lesson,
}

/// How a job stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobStatus {
    /// Working.
    Running,
    /// Done.
    Finished,
    /// Ended by an error.
    Failed(String),
}

/// What a job runs.
pub enum Work {
    /// A training run (thread or frame loop).
    Training(Training),
    /// An in-memory scenario.
    Scenario(Box<scenario::ScenarioJob>),
    /// A headless scenario's verdict on its way, and where it is meanwhile.
    Lesson(
        std::sync::mpsc::Receiver<Result<hif8lab_lab::lesson::LessonReport, String>>,
        std::sync::Arc<std::sync::Mutex<String>>,
    ),
}

/// One background job.
pub struct Job {
    /// What it is for.
    pub kind: JobKind,
    /// How it stands.
    pub status: JobStatus,
    /// What runs.
    pub work: Work,
}

/// The app's background jobs (at most one of each kind).
#[derive(Default)]
pub struct Jobs {
    pub(crate) list: Vec<Job>,
}

impl Jobs {
    /// Starts `work` as the job of `kind`, stopping the one it replaces.
    pub fn start(&mut self, kind: JobKind, work: Work) {
        self.stop(kind);
        self.list.push(Job {
            kind,
            status: JobStatus::Running,
            work,
        });
    }

    /// Stops and drops the job of `kind`.
    pub fn stop(&mut self, kind: JobKind) {
        for j in self.list.iter().filter(|j| j.kind == kind) {
            if let Work::Training(t) = &j.work {
                t.stop();
            }
        }
        self.list.retain(|j| j.kind != kind);
    }

    /// Whether a job of `kind` runs.
    pub fn running(&self, kind: JobKind) -> bool {
        self.list.iter().any(|j| j.kind == kind)
    }

    /// Whether any of `kinds` runs.
    pub fn any(&self, kinds: &[JobKind]) -> bool {
        kinds.iter().any(|k| self.running(*k))
    }

    /// The training of the job of `kind`, if it is one.
    pub fn training(&self, kind: JobKind) -> Option<&Training> {
        self.list
            .iter()
            .find_map(|j| match (&j.work, j.kind == kind) {
                (Work::Training(t), true) => Some(t),
                _ => None,
            })
    }

    /// Where the running lesson scenario is, in words (its thread's progress natively, the
    /// in-memory scenario's in the browser).
    pub fn lesson_progress(&self) -> Option<String> {
        self.list.iter().find_map(|j| match &j.work {
            Work::Lesson(_, text) => text.lock().ok().map(|t| t.clone()),
            Work::Scenario(s) => Some(s.progress()),
            Work::Training(_) => None,
        })
    }

    /// The in-memory scenario, while it runs.
    pub fn scenario(&self) -> Option<&scenario::ScenarioJob> {
        self.list.iter().find_map(|j| match &j.work {
            Work::Scenario(s) => Some(&**s),
            _ => None,
        })
    }
}

/// The time a run has left at the pace so far (`elapsed_s` since Start, `done` of `n`
/// steps), in words; None before the second step (the first holds the start-up) or when
/// paused at the end.
pub fn time_left(elapsed_s: f64, done: usize, n: usize) -> Option<String> {
    if done < 2 || done >= n || !elapsed_s.is_finite() {
        return None;
    }
    Some(duration_words(elapsed_s / done as f64 * (n - done) as f64))
}

/// A duration in words: `45 s`, `3 min 05 s`, `2 h 10 min`.
pub fn duration_words(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod time_tests {
    use super::*;

    #[test]
    fn time_left_reads_as_words_at_the_pace_so_far() {
        // 10 of 100 steps in 20 s: 180 s to go.
        assert_eq!(time_left(20.0, 10, 100).as_deref(), Some("3 min 00 s"));
        assert_eq!(time_left(5.0, 10, 20).as_deref(), Some("5 s"));
        assert_eq!(time_left(3600.0, 10, 30).as_deref(), Some("2 h 00 min"));
        // Before the second step, at the end, and with no clock: nothing said.
        assert_eq!(time_left(20.0, 1, 100), None);
        assert_eq!(time_left(20.0, 100, 100), None);
        assert_eq!(time_left(f64::NAN, 10, 100), None);
        assert_eq!(duration_words(-3.0), "0 s");
        assert_eq!(duration_words(61.4), "1 min 01 s");
    }
}
