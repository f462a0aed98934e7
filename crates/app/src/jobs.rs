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
