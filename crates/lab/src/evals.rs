//! Evaluations made by other tools, judged with the same claims as the grid's:
//!
//! - [`lm_eval`]: lm-evaluation-harness output folders (results and per-document logs);
//! - [`compare`]: `compare-evals` — two or more runs' accuracies, paired on the same
//!   documents where the logs allow (exact McNemar, exact paired interval, TOST, cluster
//!   bootstrap, log-likelihood margins), unpaired binomial intervals where they do not;
//! - [`train_log`]: training logs (`step=N | loss=X | …` lines, JSONL) as loss series;
//! - [`loss_compare`]: two loss curves judged (APE and the signed difference, with a block
//!   bootstrap for autocorrelation, warmup apart);
//! - [`summary`] and [`paper`]: benchmark summary tables (as the paper's repository writes
//!   them) and the report on the paper's own numbers.

use std::path::{Path, PathBuf};

pub mod compare;
pub mod lm_eval;
pub mod loss_compare;
pub mod paper;
pub mod report;
pub mod summary;
pub mod train_log;

/// Bad input in a file: which file, which field (or line), what is wrong.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}{}{message}", file.display(), if field.is_empty() { ": ".to_string() } else { format!(": {field}: ") })]
pub struct EvalError {
    /// The file (or folder).
    pub file: PathBuf,
    /// The field, key or line (empty: the file as a whole).
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// Whether the input was refused (bad input) rather than unreadable (a system error).
    pub refused: bool,
}

impl EvalError {
    /// Bad input in `file` at `field`.
    pub fn new(file: &Path, field: &str, message: impl Into<String>) -> Self {
        EvalError {
            file: file.to_path_buf(),
            field: field.to_string(),
            message: message.into(),
            refused: true,
        }
    }

    /// `file` could not be read (not a refusal: the system said no).
    pub fn io(file: &Path, e: &std::io::Error) -> Self {
        EvalError {
            file: file.to_path_buf(),
            field: String::new(),
            message: e.to_string(),
            // A file that is not there or not readable is refused input; a failed read of
            // one that is (an I/O error) is a failure on the way.
            refused: matches!(
                e.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::PermissionDenied
                    | std::io::ErrorKind::InvalidData
                    | std::io::ErrorKind::InvalidInput
                    | std::io::ErrorKind::IsADirectory
                    | std::io::ErrorKind::NotADirectory
                    | std::io::ErrorKind::UnexpectedEof
            ),
        }
    }
}
