//! The errors of training and inference, and how each maps to an exit code (a failure on
//! the way, or a refused input). A leaf of the crate: it names the errors of the data,
//! models and engine it wraps, and no module it is used by.

use hif8lab_engine::EngineError;

/// Errors of training: engine failures, bad data, non-finite values.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrainError {
    /// A scaling config that cannot be planned: the key (`qat.scaling.window`) and why.
    #[error("data: {field}: {message}")]
    Scaling {
        /// The key.
        field: String,
        /// What is wrong, naming the setting.
        message: String,
    },
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A file the work was given (a grid's data, a run folder's record) says something the
    /// work cannot take: which file, and what.
    #[error("data: {file}: {message}")]
    File {
        /// The file (or folder), as the user named it.
        file: String,
        /// What is wrong with it.
        message: String,
    },
    /// A setting (an option, a config key, a grid's run) the work cannot take: which
    /// (empty when the message names it), and why.
    #[error("data: {}{message}", at_prefix(setting))]
    Setting {
        /// The option or key, with its value where that is what is wrong.
        setting: String,
        /// What is wrong, and what would be right.
        message: String,
    },
    /// A run folder already holds a finished run of another configuration.
    #[error(
        "data: {dir} holds a finished run of another configuration ({}): it is not reused; \
         remove it or choose another --out",
        differences.join("; ")
    )]
    RunFolderTaken {
        /// The folder.
        dir: String,
        /// The settings that differ, `key: recorded vs wanted`.
        differences: Vec<String>,
    },
    /// Inference refused its input or could not compute.
    #[error("data: {0}")]
    Infer(#[from] InferError),
    /// The run's training data (its corpus, tokenizer or sizes) refuses the run.
    #[error("data: {0}")]
    Input(#[from] crate::data::DataError),
    /// A file or folder could not be read or written on the way (the run folder, a grid's
    /// files): where, and the system's error, whose kind tells a failure on the way (a full
    /// disk) from a refusal (a missing folder). The error is shown in the message, not
    /// chained (it would print twice).
    #[error("data: {}{message}", at_prefix(at))]
    Io {
        /// What was being done, and where (empty when the error says it).
        at: String,
        /// The system error's kind.
        kind: std::io::ErrorKind,
        /// The system error's text.
        message: String,
    },
    /// A checkpoint does not fit this run.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// A checkpoint lacks a tensor this run needs, or holds it in another shape.
    #[error("checkpoint: {0}")]
    Tensor(#[from] crate::models::checkpoint::TensorError),
    /// The run cannot fit in the backend's memory (checked before allocating).
    #[error("{0}")]
    DoesNotFit(String),
    /// A loss or quantizer input became NaN/Inf.
    #[error("non-finite values at step {step}: {what}")]
    NonFinite {
        /// The step.
        step: u64,
        /// The first offending op or quantizer.
        what: String,
    },
}

impl From<hif8lab_scaling::ConfigError> for TrainError {
    fn from(e: hif8lab_scaling::ConfigError) -> Self {
        TrainError::Scaling {
            field: e.field,
            message: e.message,
        }
    }
}

/// Why inference refused its input or could not compute.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InferError {
    /// The forward pass produced NaN or Inf: where.
    #[error("the model's forward pass overflows: {0}")]
    Overflow(String),
    /// A token id the model's vocabulary does not hold.
    #[error("token id {id} is outside the model's vocabulary of {vocab}")]
    TokenOutOfVocab {
        /// The id.
        id: u32,
        /// The vocabulary's size.
        vocab: u32,
    },
    /// Scored sequences of several lengths, or of a length the context cannot hold.
    #[error("scored sequences need one length of 2 to {max} tokens (the context + 1)")]
    SequenceLengths {
        /// The longest a sequence may be.
        max: usize,
    },
    /// No activations were allocated for a call's shape (a bug, not an input's fault).
    #[error("inference: activations missing for this call shape")]
    MissingActivations,
    /// A probe's text could not be tokenized.
    #[error("tokenizing the probes: {0}")]
    Tokenize(#[from] crate::models::tokenizer::TokenizerError),
}

impl TrainError {
    /// Whether the work failed on the way (the engine, a divergence, a full disk or a
    /// failed write: exit code 1) rather than refusing its input (a bad file, setting or
    /// size: exit code 2).
    pub fn failed_on_the_way(&self) -> bool {
        match self {
            TrainError::Engine(_) | TrainError::NonFinite { .. } => true,
            TrainError::Io { kind, .. } => io_failed_on_the_way(*kind),
            TrainError::File { .. }
            | TrainError::Setting { .. }
            | TrainError::Scaling { .. }
            | TrainError::RunFolderTaken { .. }
            | TrainError::Infer(_)
            | TrainError::Input(_)
            | TrainError::Checkpoint(_)
            | TrainError::Tensor(_)
            | TrainError::DoesNotFit(_) => false,
        }
    }
}

/// Whether a system error of `kind` means the work failed on the way (a full disk, a failed
/// write), not a refused input (a missing file, a folder in a file's place).
pub fn io_failed_on_the_way(kind: std::io::ErrorKind) -> bool {
    use std::io::ErrorKind;
    !matches!(
        kind,
        ErrorKind::NotFound
            | ErrorKind::PermissionDenied
            | ErrorKind::InvalidData
            | ErrorKind::InvalidInput
            | ErrorKind::AlreadyExists
            | ErrorKind::NotADirectory
            | ErrorKind::IsADirectory
            | ErrorKind::DirectoryNotEmpty
            | ErrorKind::WouldBlock
            | ErrorKind::UnexpectedEof
    )
}

fn at_prefix(at: &str) -> String {
    if at.is_empty() {
        String::new()
    } else {
        format!("{at}: ")
    }
}

impl TrainError {
    /// [`TrainError::Io`] at `at`.
    pub fn io(at: impl Into<String>) -> impl Fn(std::io::Error) -> TrainError {
        let at = at.into();
        move |error| TrainError::Io {
            at: at.clone(),
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}
