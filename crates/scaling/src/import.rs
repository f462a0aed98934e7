//! Amax sequences from outside: our JSONL traces, CSV (`step,layer,role,amax`) and
//! Transformer Engine debug-tool logs (nvdlfw-inspect `LogTensorStats`), so runs from big
//! clusters can be replayed offline.

use std::collections::BTreeMap;
use std::path::Path;

use crate::trace::{InputError, Trace, lines_with_tail, parse_trace};

/// The amax values of one quantizer's calls, in call order.
#[derive(Clone, Debug, PartialEq)]
pub struct AmaxSeries {
    /// Quantizer name (`block3.gate.A`, or the layer and role of an imported trace).
    pub name: String,
    /// Step of each call.
    pub steps: Vec<u64>,
    /// amax of each call.
    pub amax: Vec<f32>,
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
    fn push(&mut self, name: String, step: u64, amax: f32) {
        let entry = self.map.entry(name.clone()).or_insert_with(|| {
            self.order.push(name.clone());
            AmaxSeries {
                name,
                steps: Vec::new(),
                amax: Vec::new(),
            }
        });
        entry.steps.push(step);
        entry.amax.push(amax);
    }

    fn finish(mut self) -> Vec<AmaxSeries> {
        self.order
            .iter()
            .filter_map(|n| self.map.remove(n))
            .collect()
    }
}

/// Series of a parsed JSONL trace, one per (block, module, role).
pub fn series_from_trace(trace: &Trace) -> Vec<AmaxSeries> {
    let mut b = SeriesBuilder::default();
    for r in &trace.records {
        let name = format!("block{}.{}.{}", r.block, r.module, r.role);
        b.push(name, r.step, r.amax);
    }
    b.finish()
}

/// Reads any supported file, choosing the reader from its content: a first non-blank line
/// starting with `{` is a JSONL trace, a first line naming the CSV columns is CSV, anything
/// else is read as a Transformer Engine log.
pub fn import_file(path: &Path) -> Result<Imported, InputError> {
    let bytes = std::fs::read(path).map_err(|source| InputError::Io {
        path: path.to_owned(),
        source,
    })?;
    import_bytes(path, &bytes)
}

/// [`import_file`] on contents already read (a browser's file picker); `path` names them in
/// errors.
pub fn import_bytes(path: &Path, bytes: &[u8]) -> Result<Imported, InputError> {
    let first = lines_with_tail(bytes)
        .into_iter()
        .map(|(_, t, _)| String::from_utf8_lossy(t).trim().to_owned())
        .find(|t| !t.is_empty())
        .unwrap_or_default();
    if first.starts_with('{') {
        let trace = parse_trace(path, bytes)?;
        Ok(Imported {
            series: series_from_trace(&trace),
            warnings: trace.warnings,
            kind: "trace",
        })
    } else if looks_like_csv_header(&first) {
        parse_csv(path, bytes)
    } else {
        parse_te_log(path, bytes)
    }
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

/// Splits one CSV line into fields (RFC 4180 quoting, no line breaks inside fields).
pub fn split_csv_line(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut at_start = true;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (false, '"') if at_start => {
                quoted = true;
                at_start = false;
            }
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => {
                quoted = false;
                if !matches!(chars.peek(), None | Some(',')) {
                    return Err("text after a closing quote".into());
                }
            }
            (false, ',') => {
                fields.push(std::mem::take(&mut field));
                at_start = true;
            }
            (_, c) => {
                field.push(c);
                at_start = false;
            }
        }
    }
    if quoted {
        return Err("unterminated quote".into());
    }
    fields.push(field);
    Ok(fields)
}

/// Parses CSV with a header naming at least `step,layer,role,amax` (any order; other
/// columns ignored). Series are named `layer.role`.
pub fn parse_csv(path: &Path, bytes: &[u8]) -> Result<Imported, InputError> {
    let text = std::str::from_utf8(bytes).map_err(|e| InputError::Malformed {
        path: path.to_owned(),
        line: 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count(),
        field: "-".into(),
        message: "not UTF-8 text".into(),
    })?;
    let malformed = |line: usize, field: &str, message: String| InputError::Malformed {
        path: path.to_owned(),
        line,
        field: field.to_owned(),
        message,
    };
    let mut lines = lines_with_tail(text.as_bytes())
        .into_iter()
        .filter(|(_, t, _)| !t.iter().all(u8::is_ascii_whitespace));
    let (header_no, header, _) = lines.next().ok_or_else(|| InputError::Empty {
        path: path.to_owned(),
        message: "empty CSV (expected a header step,layer,role,amax)".into(),
    })?;
    let header = split_csv_line(
        std::str::from_utf8(header)
            .unwrap_or_default()
            .trim_end_matches('\r'),
    )
    .map_err(|m| malformed(header_no, "-", m))?;
    let column = |name: &str| {
        header
            .iter()
            .position(|h| h.trim().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                malformed(
                    header_no,
                    name,
                    format!("header lacks column '{name}' (expected step,layer,role,amax)"),
                )
            })
    };
    let (c_step, c_layer, c_role, c_amax) = (
        column("step")?,
        column("layer")?,
        column("role")?,
        column("amax")?,
    );
    let mut b = SeriesBuilder::default();
    let mut warnings = Vec::new();
    for (line_no, raw, unterminated) in lines {
        let line = std::str::from_utf8(raw)
            .unwrap_or_default()
            .trim_end_matches('\r');
        let row = (|| {
            let f = split_csv_line(line).map_err(|m| malformed(line_no, "-", m))?;
            let get = |i: usize, name: &str| {
                f.get(i).map(|s| s.trim()).ok_or_else(|| {
                    malformed(
                        line_no,
                        name,
                        format!("missing (row has {} fields)", f.len()),
                    )
                })
            };
            let step = get(c_step, "step")?;
            let step: u64 = step.parse().map_err(|_| {
                malformed(line_no, "step", format!("'{step}' is not a step number"))
            })?;
            let layer = get(c_layer, "layer")?.to_owned();
            let role = get(c_role, "role")?.to_owned();
            if role.is_empty() {
                return Err(malformed(line_no, "role", "empty".into()));
            }
            let amax = get(c_amax, "amax")?;
            let amax: f32 = amax
                .parse()
                .map_err(|_| malformed(line_no, "amax", format!("'{amax}' is not a number")))?;
            Ok((step, format!("{layer}.{role}"), amax))
        })();
        match row {
            Ok((step, name, amax)) => b.push(name, step, amax),
            Err(e) if unterminated => {
                warnings.push(format!("skipped a torn last line ({e})"));
            }
            Err(e) => return Err(e),
        }
    }
    let series = b.finish();
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

/// Tensor names of nvdlfw-inspect's LogTensorStats.
const TE_TENSORS: [&str; 6] = [
    "activation",
    "gradient",
    "weight",
    "output",
    "wgrad",
    "dgrad",
];

/// Parses Transformer Engine debug-tool logs: lines of the form
/// `… <layer>_<tensor>_<stat> … iteration=NNNNNN … value=V`, keeping the stats `amax` and
/// `cur_amax`. Other lines (other stats, other log output) are skipped. Series are named
/// `layer.tensor`.
pub fn parse_te_log(path: &Path, bytes: &[u8]) -> Result<Imported, InputError> {
    let text = String::from_utf8_lossy(bytes);
    let malformed = |line: usize, field: &str, message: String| InputError::Malformed {
        path: path.to_owned(),
        line,
        field: field.to_owned(),
        message,
    };
    let mut b = SeriesBuilder::default();
    let mut warnings = Vec::new();
    let mut skipped = 0usize;
    for (line_no, raw, unterminated) in lines_with_tail(text.as_bytes()) {
        let line = String::from_utf8_lossy(raw);
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let Some(it_pos) = tokens.iter().position(|t| t.starts_with("iteration=")) else {
            skipped += usize::from(!line.trim().is_empty());
            continue;
        };
        let Some(name) = it_pos.checked_sub(1).map(|i| tokens[i]) else {
            skipped += 1;
            continue;
        };
        let base = name
            .strip_suffix("_cur_amax")
            .or_else(|| name.strip_suffix("_amax"));
        let Some(base) = base else {
            skipped += 1; // another statistic
            continue;
        };
        let row = (|| {
            let (layer, tensor) = base
                .rsplit_once('_')
                .filter(|(_, t)| TE_TENSORS.contains(t))
                .ok_or_else(|| {
                    malformed(
                        line_no,
                        "name",
                        format!("'{name}' is not <layer>_<tensor>_amax with tensor one of {TE_TENSORS:?}"),
                    )
                })?;
            let iteration = &tokens[it_pos]["iteration=".len()..];
            let step: u64 = iteration.parse().map_err(|_| {
                malformed(
                    line_no,
                    "iteration",
                    format!("'{iteration}' is not a number"),
                )
            })?;
            let value = tokens
                .iter()
                .find_map(|t| t.strip_prefix("value="))
                .ok_or_else(|| malformed(line_no, "value", "missing value=".into()))?;
            let amax: f32 = value
                .parse()
                .map_err(|_| malformed(line_no, "value", format!("'{value}' is not a number")))?;
            Ok((format!("{layer}.{tensor}"), step, amax))
        })();
        match row {
            Ok((name, step, amax)) => b.push(name, step, amax),
            Err(e) if unterminated => warnings.push(format!("skipped a torn last line ({e})")),
            Err(e) => return Err(e),
        }
    }
    let series = b.finish();
    if series.is_empty() {
        return Err(InputError::Empty {
            path: path.to_owned(),
            message: "no amax lines found: expected a hif8lab trace (JSONL), CSV with header \
                      step,layer,role,amax, or Transformer Engine LogTensorStats lines \
                      '<layer>_<tensor>_amax … iteration=N … value=V'"
                .into(),
        });
    }
    if skipped > 0 {
        warnings.push(format!("{skipped} line(s) without amax statistics skipped"));
    }
    Ok(Imported {
        series,
        warnings,
        kind: "te-log",
    })
}
