//! What every command shares at the edge: writing its result to standard output (a closed
//! pipe ends quietly, a full disk is an error), how it ended ([`Outcome`]) and the one rule
//! that turns an error into an exit code ([`exit_code_of`]). `main.rs` only parses and
//! dispatches; nothing imports it.

/// `println!` for a command's result: a failed write returns an error from the enclosing
/// function ([`output_error`]: a closed pipe ends quietly, a full disk is an error) instead
/// of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err($crate::output::output_error)?
    }};
}

/// `print!` for a command's result (see [`outln!`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        write!(stdout, $($arg)*)
            .and_then(|()| stdout.flush())
            .map_err($crate::output::output_error)?
    }};
}

/// Standard output was closed by its reader (`… | head`): the program ends quietly with the
/// conventional status of a closed pipe (128 + SIGPIPE).
#[derive(Debug)]
pub struct ClosedPipe;

impl std::fmt::Display for ClosedPipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for ClosedPipe {}

/// The error of a failed write of a command's result: a closed pipe ends quietly
/// ([`ClosedPipe`]), anything else (a full disk) is an error naming standard output.
pub fn output_error(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        anyhow::Error::new(ClosedPipe)
    } else {
        anyhow::anyhow!("writing the result to standard output: {e}")
    }
}

/// Prints a JSON document (pretty, one trailing newline) on standard output; a failed write
/// is an error ([`output_error`]).
pub fn print_json(doc: &serde_json::Value) -> anyhow::Result<()> {
    use std::io::Write;
    let text = serde_json::to_string_pretty(doc)? + "\n";
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(output_error)
}

/// How a command ended, mapped to the process exit code.
pub enum Outcome {
    /// Everything succeeded.
    Ok,
    /// Some input was rejected (reported on stderr); exit code 2.
    BadInput,
    /// A lesson ran and some claim failed; exit code 1.
    ClaimsFail,
    /// A lesson ran, no claim failed, but some were inconclusive; exit code 3.
    Inconclusive,
    /// A check found a difference (reported on stderr); exit code 1.
    Differs,
}

pub(crate) use {out, outln};

/// The exit code of a command that ended in `err` (docs/usage.md, "Exit codes"): 1 when the
/// work started and failed on the way — the disk filled, a write failed, the GPU failed,
/// training diverged — and 2 for everything else, which is input the command refused before
/// doing its work: arguments, configs, models, checkpoints, corpora, probe sets, traces and
/// grid data that are wrong, missing or inconsistent, and runs too big for this machine.
pub fn exit_code_of(err: &anyhow::Error) -> u8 {
    // Errors other crates carry as text keep the system's code in the message.
    const RUNTIME_OS_ERRORS: [&str; 4] =
        ["os error 28", "os error 27", "os error 5)", "os error 122"];
    let runtime = err.chain().any(|e| {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return hif8lab_train::trainer::io_failed_on_the_way(io.kind());
        }
        if let Some(eval) = e.downcast_ref::<hif8lab_lab::evals::EvalError>() {
            return !eval.refused;
        }
        e.is::<hif8lab_engine::EngineError>()
            || e.downcast_ref::<hif8lab_train::TrainError>()
                .is_some_and(hif8lab_train::TrainError::failed_on_the_way)
    }) || {
        let text = format!("{err:#}");
        RUNTIME_OS_ERRORS.iter().any(|code| text.contains(code))
    };
    if runtime { 1 } else { 2 }
}

#[cfg(test)]
mod tests {
    use super::exit_code_of;
    use hif8lab_train::TrainError;
    use std::io::ErrorKind;

    /// A run folder's write error is classified by the system error's kind, not its text:
    /// a full disk failed on the way (1), a missing folder refused the input (2); the message
    /// reads as it always did.
    #[test]
    fn train_io_errors_are_classified_by_kind() {
        let full = TrainError::io("writing summary.json in runs/x")(std::io::Error::new(
            ErrorKind::StorageFull,
            "the disk is full",
        ));
        assert_eq!(
            full.to_string(),
            "data: writing summary.json in runs/x: the disk is full"
        );
        assert_eq!(exit_code_of(&anyhow::Error::new(full)), 1);
        let missing = TrainError::io("")(std::io::Error::new(ErrorKind::NotFound, "no folder"));
        assert_eq!(missing.to_string(), "data: no folder");
        assert_eq!(
            exit_code_of(&anyhow::Error::new(missing).context("grid")),
            2
        );
        let data = TrainError::File {
            file: "corpus.txt".into(),
            message: "3 tokens".into(),
        };
        assert_eq!(exit_code_of(&anyhow::Error::new(data)), 2);
    }
}
