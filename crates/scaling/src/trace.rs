//! The JSONL trace: a header line, then one record per quantizer call (schema in
//! docs/reference.md "Trace schema"). Writer and tolerant reader.
//!
//! Non-finite numbers are written as the strings `"nan"`, `"inf"`, `"-inf"` (JSON has no
//! such numbers) and read back exactly; finite f32 values use the shortest digits that
//! parse back to the same bits.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ids::{Module, Role};

/// Version written in the header's `hif8lab_trace` field.
pub const TRACE_VERSION: u32 = 1;

/// Serde of f32 that keeps NaN and ±Inf (as strings).
pub mod json_f32 {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes a number, or `"nan"` / `"inf"` / `"-inf"`.
    pub fn serialize<S: Serializer>(v: &f32, s: S) -> Result<S::Ok, S::Error> {
        if v.is_nan() {
            s.serialize_str("nan")
        } else if v.is_infinite() {
            s.serialize_str(if *v > 0.0 { "inf" } else { "-inf" })
        } else {
            s.serialize_f32(*v)
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumOrText {
        Num(f64),
        Text(String),
    }

    /// Reads a number or one of the three strings.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
        match NumOrText::deserialize(d)? {
            NumOrText::Num(v) => Ok(v as f32),
            NumOrText::Text(t) => match t.as_str() {
                "nan" | "NaN" => Ok(f32::NAN),
                "inf" | "+inf" | "Infinity" => Ok(f32::INFINITY),
                "-inf" | "-Infinity" => Ok(f32::NEG_INFINITY),
                other => Err(serde::de::Error::custom(format!(
                    "expected a number, \"nan\", \"inf\" or \"-inf\", got \"{other}\""
                ))),
            },
        }
    }
}

/// First line of a trace: what produced it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Schema version ([`TRACE_VERSION`]); identifies the line as a header.
    pub hif8lab_trace: u32,
    /// Number format (`hif8`, `e4m3`, `e5m2`).
    pub format: String,
    /// Scaling target.
    #[serde(with = "json_f32")]
    pub target: f32,
    /// Margin (power-of-two headroom).
    #[serde(default)]
    pub margin: i32,
    /// History length in calls.
    pub window: usize,
    /// The active estimator.
    pub estimator: String,
    /// Every estimator in the shadow comparison, in order.
    pub estimators: Vec<String>,
    /// The run configuration (free-form; the trainer writes its resolved config here).
    #[serde(default)]
    pub config: serde_json::Value,
}

/// One estimator's view of one call.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShadowRecord {
    /// Its estimate.
    #[serde(with = "json_f32")]
    pub est: f32,
    /// Elements with |x| > est.
    pub above_est: u64,
    /// Elements that overflow at its scale.
    pub overflow: u64,
}

/// One quantizer call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// Optimizer step.
    pub step: u64,
    /// Micro-batch within the step (gradient accumulation).
    pub micro: u32,
    /// Block index.
    pub block: u32,
    /// Linear layer.
    pub module: Module,
    /// Operand role.
    pub role: Role,
    /// Elements in the tensor.
    pub numel: u64,
    /// max |x| (non-NaN).
    #[serde(with = "json_f32")]
    pub amax: f32,
    /// The active estimator's name.
    pub estimator: String,
    /// The active estimate in effect.
    #[serde(with = "json_f32")]
    pub est: f32,
    /// The scale used.
    #[serde(with = "json_f32")]
    pub scale: f32,
    /// Elements with |x| > est.
    pub above_est: u64,
    /// Elements with |x·scale| ≥ the overflow threshold.
    pub overflow: u64,
    /// Non-zero elements that quantized to zero.
    pub underflow: u64,
    /// NaN/Inf elements.
    pub nonfinite: u64,
    /// Quantization error at the active scale, SQNR in dB (absent in traces written before it
    /// was measured, and for all-zero tensors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sqnr_db: Option<f32>,
    /// Every estimator's view of the same call.
    #[serde(default)]
    pub shadow: BTreeMap<String, ShadowRecord>,
}

impl TraceRecord {
    /// The quantizer of the call.
    pub fn quantizer(&self) -> crate::ids::QuantizerId {
        crate::ids::QuantizerId {
            block: self.block,
            module: self.module,
            role: self.role,
        }
    }

    /// What estimator `name` saw of this call: its shadow column, or the record's own
    /// columns where `name` is the active estimator and the shadows lack it (`None`: the
    /// line holds neither).
    pub fn view(&self, name: &str) -> Option<ShadowRecord> {
        self.shadow.get(name).copied().or_else(|| {
            (name == self.estimator).then_some(ShadowRecord {
                est: self.est,
                above_est: self.above_est,
                overflow: self.overflow,
            })
        })
    }
}

/// Writes a trace line by line (each line whole, newline-terminated).
pub struct TraceWriter<W: Write> {
    out: W,
}

impl<W: Write> TraceWriter<W> {
    /// Starts a trace: writes the header line.
    pub fn new(mut out: W, header: &TraceHeader) -> io::Result<Self> {
        write_json_line(&mut out, header)?;
        Ok(TraceWriter { out })
    }

    /// Continues a trace whose header is already written (appending to an existing file).
    pub fn resume(out: W) -> Self {
        TraceWriter { out }
    }

    /// Appends one record.
    pub fn record(&mut self, record: &TraceRecord) -> io::Result<()> {
        write_json_line(&mut self.out, record)
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Returns the underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Serializes `value` as one JSON line and writes it with a single `write_all`.
pub fn write_json_line<W: Write, T: Serialize>(out: &mut W, value: &T) -> io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)
}

/// A malformed input file: what, where (file, line, field) and why.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be read.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error (shown in the message, not chained: it would print twice).
        error: io::Error,
    },
    /// A line could not be parsed.
    #[error("{}:{line}: field '{field}': {message}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The field (JSON path, CSV column) at fault, or `-` for the whole line.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The file has no usable content.
    #[error("{}: {message}", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
        /// What is missing.
        message: String,
    },
}

/// A parsed trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The header line.
    pub header: TraceHeader,
    /// Records in file order.
    pub records: Vec<TraceRecord>,
    /// Tolerated problems (a torn last line), for the caller to show.
    pub warnings: Vec<String>,
}

/// Reads a whole trace file (see [`parse_trace`]).
pub fn read_trace(path: &Path) -> Result<Trace, InputError> {
    let bytes = std::fs::read(path).map_err(|error| InputError::Io {
        path: path.to_owned(),
        error,
    })?;
    parse_trace(path, &bytes)
}

/// Splits `bytes` into lines, returning each with its 1-based number and whether it is an
/// unterminated last line (possibly torn by a crash mid-write).
pub fn lines_with_tail(bytes: &[u8]) -> Vec<(usize, &[u8], bool)> {
    let mut out = Vec::new();
    let mut rest = bytes;
    let mut n = 0;
    while !rest.is_empty() {
        n += 1;
        match rest.iter().position(|b| *b == b'\n') {
            Some(i) => {
                out.push((n, &rest[..i], false));
                rest = &rest[i + 1..];
            }
            None => {
                out.push((n, rest, true));
                rest = &[];
            }
        }
    }
    out
}

fn parse_line<T: serde::de::DeserializeOwned>(
    path: &Path,
    line_no: usize,
    text: &[u8],
) -> Result<T, InputError> {
    let mut de = serde_json::Deserializer::from_slice(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        InputError::Malformed {
            path: path.to_owned(),
            line: line_no,
            field: if field == "." { "-".into() } else { field },
            message: e.into_inner().to_string(),
        }
    })
}

/// Calls `each(line_no, text, unterminated)` for every line a reader yields, one line in
/// memory at a time: its 1-based number, its bytes without the newline, and whether it is an
/// unterminated last line (possibly torn by a crash mid-write).
pub fn for_each_line<E>(
    path: &Path,
    mut reader: impl BufRead,
    mut each: impl FnMut(usize, &[u8], bool) -> Result<(), E>,
) -> Result<(), E>
where
    E: From<InputError>,
{
    let mut line = Vec::new();
    let mut n = 0;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(|error| {
            E::from(InputError::Io {
                path: path.to_owned(),
                error,
            })
        })?;
        if read == 0 {
            return Ok(());
        }
        n += 1;
        let unterminated = line.last() != Some(&b'\n');
        let text = if unterminated {
            &line[..]
        } else {
            &line[..line.len() - 1]
        };
        each(n, text, unterminated)?;
    }
}

/// Parses a trace. Blank lines are skipped; a last line without a newline that does not
/// parse is taken as torn by an interrupted write and skipped with a warning; any other
/// malformed line is an error naming the file, line and field.
pub fn parse_trace(path: &Path, bytes: &[u8]) -> Result<Trace, InputError> {
    let mut records = Vec::new();
    let (header, warnings) = stream_trace(path, bytes, |r| records.push(r))?;
    Ok(Trace {
        header,
        records,
        warnings,
    })
}

/// [`parse_trace`] from a reader, handing each record to `each` as it is read (a trace of
/// any length in the memory of one line); returns the header and the warnings.
pub fn stream_trace(
    path: &Path,
    reader: impl BufRead,
    mut each: impl FnMut(TraceRecord),
) -> Result<(TraceHeader, Vec<String>), InputError> {
    let mut header: Option<TraceHeader> = None;
    let mut warnings = Vec::new();
    for_each_line(path, reader, |line_no, text, unterminated| {
        if text.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let parsed = if header.is_none() {
            parse_line::<TraceHeader>(path, line_no, text).and_then(|h| {
                if h.hif8lab_trace != TRACE_VERSION {
                    return Err(InputError::Malformed {
                        path: path.to_owned(),
                        line: line_no,
                        field: "hif8lab_trace".into(),
                        message: format!(
                            "trace schema version {} (this hif8lab reads version {TRACE_VERSION})",
                            h.hif8lab_trace
                        ),
                    });
                }
                header = Some(h);
                Ok(())
            })
        } else {
            parse_line::<TraceRecord>(path, line_no, text).map(&mut each)
        };
        match parsed {
            Ok(()) => Ok(()),
            Err(e) if unterminated => {
                warnings.push(format!(
                    "{}:{line_no}: skipped a torn last line ({e})",
                    path.display()
                ));
                Ok(())
            }
            Err(e) => Err(e),
        }
    })?;
    let header = header.ok_or_else(|| InputError::Empty {
        path: path.to_owned(),
        message: "no trace header line (a JSON object with \"hif8lab_trace\")".into(),
    })?;
    Ok((header, warnings))
}

/// Reads JSON lines of any type from a reader with the same tolerance as [`parse_trace`]
/// (used for `metrics.jsonl`).
pub fn read_jsonl<T: serde::de::DeserializeOwned>(
    path: &Path,
    reader: impl BufRead,
) -> Result<(Vec<T>, Vec<String>), InputError> {
    let mut items = Vec::new();
    let mut warnings = Vec::new();
    for_each_line(path, reader, |line_no, text, unterminated| {
        if text.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        match parse_line::<T>(path, line_no, text) {
            Ok(v) => items.push(v),
            Err(e) if unterminated => warnings.push(format!(
                "{}:{line_no}: skipped a torn last line ({e})",
                path.display()
            )),
            Err(e) => return Err(e),
        }
        Ok(())
    })?;
    Ok((items, warnings))
}
