//! The error of a scaling setting out of its range (a leaf: the config and the estimators
//! both check ranges).

/// A scaling setting out of its range: the field (`window`, `target`, `margin`, `ema alpha`,
/// `estimator 'ema(2)'` …) and a message that names it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct RangeError {
    /// The field.
    pub field: String,
    /// What is wrong, naming the field.
    pub message: String,
}

impl RangeError {
    /// The error of `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        RangeError {
            field: field.into(),
            message: message.into(),
        }
    }
}
