//! Amax sequences from outside: our JSONL traces, CSV (`step,layer,role,amax`) and
//! Transformer Engine debug-tool logs (nvdlfw-inspect `LogTensorStats`), so runs from big
//! clusters can be replayed offline.
//!
//! What an amax value can be: max|x| is ≥ 0 and finite for a finite tensor. A NaN or ±Inf
//! amax (a tensor that held NaN/Inf, or a number beyond f32 such as `1e39`) and a negative
//! amax (impossible for a max of magnitudes) are **not** replayed: they are counted per
//! quantizer ([`AmaxSeries::nonfinite`], [`AmaxSeries::negative`]), reported, and kept out
//! of every history, so they never poison the other figures. A value a log printed as
//! exactly zero because of its fixed decimals (nvdlfw-inspect writes 4: a gradient amax below
//! 5e-5 arrives as `0.0000`) is likewise counted ([`AmaxSeries::rounded_to_zero`]) and kept
//! out, instead of being replayed as a real all-zero tensor.

use std::collections::BTreeMap;
use std::path::Path;

use std::io::{BufReader, Cursor, Read};

use crate::trace::{InputError, TraceRecord, lines_with_tail, stream_trace};

mod te_log;
pub use te_log::parse_te_log;
use te_log::te_log_from_reader;

/// The amax values of one quantizer's calls, in call order.
#[derive(Clone, Debug, PartialEq)]
pub struct AmaxSeries {
    /// Quantizer name (`block3.gate.A`, or the layer and role of an imported trace).
    pub name: String,
    /// Step of each call.
    pub steps: Vec<u64>,
    /// amax of each call (finite and ≥ 0).
    pub amax: Vec<f32>,
    /// Calls whose amax was NaN, ±Inf or beyond f32, left out.
    pub nonfinite: u64,
    /// Calls whose amax was negative (impossible), left out.
    pub negative: u64,
    /// Calls whose amax was printed as 0 by a log with fixed decimals (the true value was
    /// below the last printed digit), left out.
    pub rounded_to_zero: u64,
    /// The SQNR (dB) the run measured on its calls with its own estimator, where the trace
    /// recorded it (hif8lab traces since SQNR was measured; empty otherwise).
    pub sqnr_db: Vec<f32>,
}

impl AmaxSeries {
    /// An empty series called `name`.
    pub fn new(name: String) -> Self {
        AmaxSeries {
            name,
            steps: Vec::new(),
            amax: Vec::new(),
            nonfinite: 0,
            negative: 0,
            rounded_to_zero: 0,
            sqnr_db: Vec::new(),
        }
    }

    /// Calls left out of the replay.
    pub fn left_out(&self) -> u64 {
        self.nonfinite + self.negative + self.rounded_to_zero
    }
}

/// Everything imported from one file.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    /// One series per quantizer, ordered by first appearance.
    pub series: Vec<AmaxSeries>,
    /// Tolerated problems (torn last line, skipped non-amax lines count).
    pub warnings: Vec<String>,
    /// Which reader was used: `trace`, `csv` or `te-log`.
    pub kind: &'static str,
}

#[derive(Default)]
struct SeriesBuilder {
    order: Vec<String>,
    map: BTreeMap<String, AmaxSeries>,
}

impl SeriesBuilder {
    fn entry(&mut self, name: String) -> &mut AmaxSeries {
        self.map.entry(name.clone()).or_insert_with(|| {
            self.order.push(name.clone());
            AmaxSeries::new(name)
        })
    }

    /// Adds a call; impossible values are counted, not kept (see the module docs).
    fn push(&mut self, name: String, step: u64, amax: f32) {
        let entry = self.entry(name);
        if !amax.is_finite() {
            entry.nonfinite += 1;
        } else if amax < 0.0 {
            entry.negative += 1;
        } else {
            entry.steps.push(step);
            entry.amax.push(amax);
        }
    }

    /// Adds a trace record's call (and its SQNR, where measured).
    fn push_record(&mut self, r: &TraceRecord) {
        let name = r.quantizer().to_string();
        if let Some(db) = r.sqnr_db.filter(|d| d.is_finite()) {
            self.entry(name.clone()).sqnr_db.push(db);
        }
        self.push(name, r.step, r.amax);
    }

    /// Adds a call whose value a log printed as zero at its fixed precision.
    fn push_rounded_zero(&mut self, name: String) {
        self.entry(name).rounded_to_zero += 1;
    }

    fn finish(mut self, warnings: &mut Vec<String>) -> Vec<AmaxSeries> {
        let series: Vec<AmaxSeries> = self
            .order
            .iter()
            .filter_map(|n| self.map.remove(n))
            .collect();
        for s in &series {
            let mut what = Vec::new();
            if s.nonfinite > 0 {
                what.push(format!("{} NaN/Inf or beyond f32", s.nonfinite));
            }
            if s.negative > 0 {
                what.push(format!("{} negative", s.negative));
            }
            if s.rounded_to_zero > 0 {
                what.push(format!(
                    "{} printed as 0 (below the log's last decimal)",
                    s.rounded_to_zero
                ));
            }
            if !what.is_empty() {
                warnings.push(format!(
                    "{}: {} amax value(s) left out of the replay: {}",
                    s.name,
                    s.left_out(),
                    what.join(", ")
                ));
            }
        }
        series
    }
}

/// Reads any supported file, choosing the reader from its content: a first non-blank line
/// starting with `{` is a JSONL trace, a first line naming the CSV columns is CSV, anything
/// else is read as a Transformer Engine log. The file is streamed: memory holds the series,
/// not the file.
pub fn import_file(path: &Path) -> Result<Imported, InputError> {
    let file = std::fs::File::open(path).map_err(|error| InputError::Io {
        path: path.to_owned(),
        error,
    })?;
    import_reader(path, file)
}

/// [`import_file`] on contents already read (a browser's file picker); `path` names them in
/// errors.
pub fn import_bytes(path: &Path, bytes: &[u8]) -> Result<Imported, InputError> {
    import_reader(path, bytes)
}

/// How much of a file is looked at to tell its kind (and refuse binary data).
const SNIFF_BYTES: u64 = 1 << 16;

/// [`import_file`] from any reader, read once, front to back.
pub fn import_reader(path: &Path, mut reader: impl Read) -> Result<Imported, InputError> {
    let mut head = Vec::new();
    (&mut reader)
        .take(SNIFF_BYTES)
        .read_to_end(&mut head)
        .map_err(|error| InputError::Io {
            path: path.to_owned(),
            error,
        })?;
    if looks_like_utf16(&head) {
        return Err(InputError::Empty {
            path: path.to_owned(),
            message: "not UTF-8 (looks like UTF-16): save it as UTF-8, e.g. \
                      `iconv -f UTF-16 -t UTF-8 FILE > FILE.utf8`"
                .into(),
        });
    }
    // Binary data (a NUL byte early on) is no trace, CSV or log: refused before any line is
    // split or copied.
    if let Some(at) = head.iter().position(|b| *b == 0) {
        return Err(InputError::Empty {
            path: path.to_owned(),
            message: format!(
                "binary data (a NUL byte at byte {at}): not a trace (JSONL), CSV or \
                 Transformer Engine log"
            ),
        });
    }
    let first = lines_with_tail(&head)
        .into_iter()
        .map(|(_, t, _)| String::from_utf8_lossy(t).trim().to_owned())
        .find(|t| !t.is_empty())
        .unwrap_or_default();
    let stream = BufReader::with_capacity(1 << 16, Cursor::new(head).chain(reader));
    if first.starts_with('{') {
        let mut b = SeriesBuilder::default();
        let (_, mut warnings) = stream_trace(path, stream, |r| b.push_record(&r))?;
        Ok(Imported {
            series: b.finish(&mut warnings),
            warnings,
            kind: "trace",
        })
    } else if looks_like_csv_header(&first) {
        csv_from_reader(path, stream)
    } else {
        te_log_from_reader(path, stream)
    }
}

/// Whether text is UTF-16: a byte-order mark, or a NUL in every other byte of its start
/// (ASCII text in UTF-16).
pub fn looks_like_utf16(bytes: &[u8]) -> bool {
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return true;
    }
    let head = &bytes[..bytes.len().min(64) & !1];
    head.len() >= 8
        && head.iter().any(|b| *b != 0)
        && (head.iter().skip(1).step_by(2).all(|b| *b == 0)
            || head.iter().step_by(2).all(|b| *b == 0))
}

/// Whether a first line names CSV columns of the importer (`step`, `layer`, `role`, `amax`).
fn looks_like_csv_header(line: &str) -> bool {
    split_csv_line(line).is_ok_and(|fields| {
        fields.iter().any(|f| {
            let f = f.trim().to_ascii_lowercase();
            ["step", "layer", "role", "amax"].contains(&f.as_str())
        })
    })
}

/// A CSV line the `csv` crate cannot split (an unterminated quote, …).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct CsvLineError(pub String);

/// Splits one CSV line into fields (RFC 4180 quoting, by the `csv` crate); an unterminated
/// quote is an error.
pub fn split_csv_line(line: &str) -> Result<Vec<String>, CsvLineError> {
    if line.matches('"').count() % 2 == 1 {
        return Err(CsvLineError("unterminated quote".into()));
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(line.as_bytes());
    match reader.records().next() {
        Some(Ok(record)) => Ok(record.iter().map(str::to_owned).collect()),
        Some(Err(e)) => Err(CsvLineError(e.to_string())),
        None => Ok(vec![String::new()]),
    }
}

/// Parses CSV with a header naming at least `step,layer,role,amax` (any order; other
/// columns ignored), with the `csv` crate (RFC 4180 quoting). Series are named
/// `layer.role`. A bad row is an error naming the file, line and column, except a torn
/// last line (no final newline: a writer still at work), which is skipped with a warning.
pub fn parse_csv(path: &Path, bytes: &[u8]) -> Result<Imported, InputError> {
    csv_from_reader(path, bytes)
}

/// A reader that remembers the last byte it gave out (whether a file ends in a newline).
struct LastByte<R> {
    inner: R,
    last: Option<u8>,
}

impl<R: Read> Read for LastByte<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            self.last = Some(buf[n - 1]);
        }
        Ok(n)
    }
}

/// The fields of a CSV row as text, or the row's line if it is not UTF-8.
fn csv_fields(record: &csv::ByteRecord) -> Result<Vec<&str>, ()> {
    record
        .iter()
        .map(|f| std::str::from_utf8(f).map_err(|_| ()))
        .collect()
}

/// One data row: (step, `layer.role`, amax) from the columns `[step, layer, role, amax]`;
/// `bad(field, message)` makes the error naming the row.
fn csv_row(
    fields: &[&str],
    [c_step, c_layer, c_role, c_amax]: [usize; 4],
    bad: &dyn Fn(&str, String) -> InputError,
) -> Result<(u64, String, f32), InputError> {
    let get = |i: usize, name: &str| {
        fields
            .get(i)
            .copied()
            .ok_or_else(|| bad(name, format!("missing (row has {} fields)", fields.len())))
    };
    let step = get(c_step, "step")?;
    let step: u64 = step
        .parse()
        .map_err(|_| bad("step", format!("'{step}' is not a step number")))?;
    let layer = get(c_layer, "layer")?;
    let role = get(c_role, "role")?;
    if role.is_empty() {
        return Err(bad("role", "empty".into()));
    }
    let amax = get(c_amax, "amax")?;
    let amax: f32 = amax
        .parse()
        .map_err(|_| bad("amax", format!("'{amax}' is not a number")))?;
    Ok((step, format!("{layer}.{role}"), amax))
}

/// The header's step, layer, role and amax columns (any case, any order).
fn header_columns(
    fields: &[&str],
    malformed: &dyn Fn(&str, String) -> InputError,
) -> Result<[usize; 4], InputError> {
    let column = |name: &str| {
        fields
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                malformed(
                    name,
                    format!("header lacks column '{name}' (expected step,layer,role,amax)"),
                )
            })
    };
    Ok([
        column("step")?,
        column("layer")?,
        column("role")?,
        column("amax")?,
    ])
}

/// [`parse_csv`] streamed from a reader: one row in memory at a time.
fn csv_from_reader(path: &Path, reader: impl Read) -> Result<Imported, InputError> {
    let malformed = |line: usize, field: &str, message: String| InputError::Malformed {
        path: path.to_owned(),
        line,
        field: field.to_owned(),
        message,
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(LastByte {
            inner: reader,
            last: None,
        });
    let mut columns: Option<[usize; 4]> = None;
    let mut b = SeriesBuilder::default();
    let mut warnings = Vec::new();
    // A bad row is fatal unless it is the file's torn last line: decided when the next row
    // (or the end) arrives.
    let mut pending: Option<InputError> = None;
    let mut record = csv::ByteRecord::new();
    loop {
        let more = reader.read_byte_record(&mut record).map_err(|e| {
            let line = e.position().map_or(0, |p| p.line() as usize);
            match e.kind() {
                csv::ErrorKind::Io(io) => InputError::Io {
                    path: path.to_owned(),
                    error: std::io::Error::new(io.kind(), io.to_string()),
                },
                _ => malformed(line, "-", e.to_string()),
            }
        })?;
        if !more {
            break;
        }
        if record.iter().all(<[u8]>::is_empty) {
            continue; // a blank line
        }
        if let Some(e) = pending.take() {
            return Err(e);
        }
        let line_no = record.position().map_or(0, |p| p.line() as usize);
        let fields =
            csv_fields(&record).map_err(|()| malformed(line_no, "-", "not UTF-8 text".into()))?;
        let Some([c_step, c_layer, c_role, c_amax]) = columns else {
            columns = Some(header_columns(&fields, &|field, message| {
                malformed(line_no, field, message)
            })?);
            continue;
        };
        let row = csv_row(
            &fields,
            [c_step, c_layer, c_role, c_amax],
            &|field, message| malformed(line_no, field, message),
        );
        match row {
            Ok((step, name, amax)) => b.push(name, step, amax),
            Err(e) => pending = Some(e),
        }
    }
    if let Some(e) = pending {
        let torn_tail = reader.get_ref().last != Some(b'\n');
        if !torn_tail {
            return Err(e);
        }
        warnings.push(format!("skipped a torn last line ({e})"));
    }
    if columns.is_none() {
        return Err(InputError::Empty {
            path: path.to_owned(),
            message: "empty CSV (expected a header step,layer,role,amax)".into(),
        });
    }
    let series = b.finish(&mut warnings);
    if series.is_empty() {
        return Err(InputError::Empty {
            path: path.to_owned(),
            message: "CSV has a header but no rows".into(),
        });
    }
    Ok(Imported {
        series,
        warnings,
        kind: "csv",
    })
}

/// Writes series as CSV `step,layer,role,amax` (the importer's format) with the `csv`
/// crate, calls interleaved by step. Series names must end in `.ROLE`.
pub fn series_to_csv(series: &[AmaxSeries]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(["step", "layer", "role", "amax"]);
    let longest = series.iter().map(|s| s.amax.len()).max().unwrap_or(0);
    for i in 0..longest {
        for s in series {
            if let (Some(step), Some(amax)) = (s.steps.get(i), s.amax.get(i)) {
                let (layer, role) = s.name.rsplit_once('.').unwrap_or((&s.name, "A"));
                let _ = w.write_record([&step.to_string(), layer, role, &amax.to_string()]);
            }
        }
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}
