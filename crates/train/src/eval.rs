//! Evaluation: the probe sets and their scoring ([`probes`], [`probe_file`], the completion
//! set of pretrained models in [`regularities`]), what probing a
//! model measured ([`scores`]), and the resampling that gives the scores their intervals
//! ([`resample`]). The corpus states the knowledge the probes ask about; nothing here is
//! imported by the corpus.

pub mod probe_file;
pub mod probes;
pub mod regularities;
pub mod resample;
pub mod scores;

pub use probe_file::{GENERAL_KNOWLEDGE, ProbeFileError, items_from_tsv};
pub use probes::{
    COMPLETION_ITEMS, McItem, ProbeSet, ape, mc_accuracy, mc_marks, mc_scores, relative_drop,
    score_probes,
};
pub use regularities::{PRETRAINED_COMPLETION_ITEMS, pretrained_completion};
pub use scores::{PROBE_SCORES, ProbeIntervals, ProbeMarks, ProbeScore, ProbeScores};
