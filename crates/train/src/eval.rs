//! Evaluation records: what probing a model measured ([`scores`]), independent of how the
//! probe sets are made or run, so the corpus, the trainer, inference and the lab's reports
//! all read one type.

pub mod resample;
pub mod scores;

pub use scores::{PROBE_SCORES, ProbeIntervals, ProbeMarks, ProbeScore, ProbeScores};
