//! Training logs as loss series: one record per step, read by a named pattern.
//!
//! - **`kv`**: lines holding `key=value` fields, among them `step=N` (or `step=N/TOTAL`) and
//!   `loss=X`, separated by `|`, commas or spaces, anywhere in the line (a logger's time and
//!   level before them are skipped). Other fields are kept as text (`lr=1e-5`, `quant=ON`).
//!   Lines without both keys are not records (warnings, tracebacks). This is what many
//!   trainers print, the paper's among them:
//!   `2026-05-06 02:18:14,897 [INFO] step=501/10000 | loss=5.2820 | lr=9.99e-06 | quant=ON | …`
//! - **`jsonl`**: one JSON object per line with numeric `step` and `loss` (hif8lab's and
//!   hif8lab.torch's `metrics.jsonl`, many loggers' JSON output); other fields kept.
//!
//! - **`csv`**: a header naming `step` and `loss` among its columns, one row per step (what
//!   `hif8lab import log` writes).
//!
//! `auto` picks `csv` when the first line is a header with `step` and `loss` columns,
//! `jsonl` when the first record-like line is a JSON object, else `kv`. A step
//! that appears twice (a resumed run logs the steps after its checkpoint again) keeps its last
//! record, counted. A record whose loss is not a finite number is refused with its line.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::EvalError;

/// How the log is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogPattern {
    /// `jsonl` when the first record-like line is JSON, else `kv`.
    Auto,
    /// `key=value` fields with `step` and `loss`.
    KeyValue,
    /// One JSON object per line.
    Jsonl,
    /// A CSV table with `step` and `loss` columns (what `import log` writes).
    Csv,
}

impl std::str::FromStr for LogPattern {
    type Err = hif8lab_format::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(LogPattern::Auto),
            "kv" => Ok(LogPattern::KeyValue),
            "jsonl" => Ok(LogPattern::Jsonl),
            "csv" => Ok(LogPattern::Csv),
            other => Err(hif8lab_format::UnknownName {
                kind: "log pattern",
                given: other.to_owned(),
                expected: "auto, kv, jsonl, csv".into(),
            }),
        }
    }
}

impl LogPattern {
    /// The pattern's name.
    pub fn name(self) -> &'static str {
        match self {
            LogPattern::Auto => "auto",
            LogPattern::KeyValue => "kv",
            LogPattern::Jsonl => "jsonl",
            LogPattern::Csv => "csv",
        }
    }
}

/// One step of a log.
#[derive(Clone, Debug, PartialEq)]
pub struct StepRecord {
    /// The step.
    pub step: u64,
    /// The loss.
    pub loss: f64,
    /// The other fields, as text.
    pub fields: BTreeMap<String, String>,
}

/// A log read.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainLog {
    /// The pattern that read it (never `Auto`).
    pub pattern: LogPattern,
    /// Records by step, ascending, one per step.
    pub records: Vec<StepRecord>,
    /// Steps logged more than once (the last record kept).
    pub repeated_steps: u64,
    /// Lines that were not records.
    pub other_lines: u64,
}

impl TrainLog {
    /// The steps.
    pub fn steps(&self) -> Vec<u64> {
        self.records.iter().map(|r| r.step).collect()
    }

    /// The field `key` of every record (None where a record lacks it).
    pub fn field(&self, key: &str) -> Vec<Option<&str>> {
        self.records
            .iter()
            .map(|r| r.fields.get(key).map(String::as_str))
            .collect()
    }
}

/// Reads the log at `path`.
/// Only a regular file of at most [`super::lm_eval::MAX_INPUT_BYTES`] is read.
pub fn read_log(path: &Path, pattern: LogPattern) -> Result<TrainLog, EvalError> {
    let bytes = super::lm_eval::read_input(path, false)?;
    parse_log(path, &bytes, pattern)
}

/// The most step records a log may hold (a run of 10⁶ optimizer steps logged at every step);
/// beyond, the log is refused by name before its records fill memory (10⁷ lines once took 8
/// GB).
pub const MAX_LOG_RECORDS: usize = 1_000_000;

/// Parses a log's bytes (`path` names it in errors). Invalid UTF-8 in lines that are not
/// records is tolerated (logs mix in tool output); a record line must be text.
pub fn parse_log(path: &Path, bytes: &[u8], pattern: LogPattern) -> Result<TrainLog, EvalError> {
    parse_log_capped(path, bytes, pattern, MAX_LOG_RECORDS)
}

/// [`parse_log`] refusing more than `cap` step records.
fn parse_log_capped(
    path: &Path,
    bytes: &[u8],
    pattern: LogPattern,
    cap: usize,
) -> Result<TrainLog, EvalError> {
    let text = String::from_utf8_lossy(bytes);
    let first = text.lines().next().unwrap_or("");
    let is_csv_header = |l: &str| {
        let cols: Vec<&str> = l.split(',').map(str::trim).collect();
        cols.contains(&"step") && cols.contains(&"loss")
    };
    let pattern = match pattern {
        LogPattern::Auto if is_csv_header(first) => LogPattern::Csv,
        LogPattern::Auto => text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with('{') || (l.contains("step=") && l.contains("loss=")))
            .map_or(LogPattern::KeyValue, |l| {
                if l.starts_with('{') {
                    LogPattern::Jsonl
                } else {
                    LogPattern::KeyValue
                }
            }),
        p => p,
    };
    let mut by_step: BTreeMap<u64, StepRecord> = BTreeMap::new();
    let (mut repeated, mut other) = (0u64, 0u64);
    let columns: Vec<String> = if pattern == LogPattern::Csv {
        if !is_csv_header(first) {
            return Err(EvalError::new(
                path,
                "line 1",
                "a CSV log needs a header with step and loss columns",
            ));
        }
        first.split(',').map(|c| c.trim().to_string()).collect()
    } else {
        Vec::new()
    };
    let mut last_step: Option<u64> = None;
    for (i, line) in text.lines().enumerate() {
        let at = format!("line {}", i + 1);
        let rec = match pattern {
            LogPattern::Jsonl => jsonl_record(path, &at, line)?,
            LogPattern::Csv if i == 0 => None,
            LogPattern::Csv => csv_record(path, &at, line, &columns)?,
            _ => kv_record(path, &at, line)?,
        };
        match rec {
            Some(r) => {
                // Steps that start over (step 1 after step 3,000): a second run appended to
                // the same log, never merged into the first.
                if let Some(last) = last_step
                    && (r.step + RESTART_GAP < last || (r.step <= 1 && last >= 10))
                {
                    return Err(EvalError::new(
                        path,
                        &at,
                        format!(
                            "step {} after step {last}: the log holds more than one run (split it)",
                            r.step
                        ),
                    ));
                }
                last_step = Some(last_step.map_or(r.step, |l| l.max(r.step)));
                if by_step.insert(r.step, r).is_some() {
                    repeated += 1;
                } else if by_step.len() > cap {
                    return Err(EvalError::new(
                        path,
                        &at,
                        format!(
                            "more than {cap} step records: too many to hold (keep every n-th step, or split the log)"
                        ),
                    ));
                }
            }
            None => other += 1,
        }
    }
    if by_step.is_empty() {
        return Err(EvalError::new(
            path,
            "",
            format!(
                "no training step records (pattern {}: lines with step=N and loss=X{})",
                pattern.name(),
                if pattern == LogPattern::Jsonl {
                    " as JSON fields"
                } else {
                    ""
                }
            ),
        ));
    }
    Ok(TrainLog {
        pattern,
        records: by_step.into_values().collect(),
        repeated_steps: repeated,
        other_lines: other,
    })
}

/// How far a step may fall back before the log is taken for two runs: a resumed trainer
/// repeats the steps since its last checkpoint (counted as repeated), a new run starts over
/// (so a step of 0 or 1 after step 10 or later is a second run too).
const RESTART_GAP: u64 = 1000;

/// A `key=value` line's record (None when the line lacks `step=` or `loss=`).
fn kv_record(path: &Path, at: &str, line: &str) -> Result<Option<StepRecord>, EvalError> {
    if !(line.contains("step=") && line.contains("loss=")) {
        return Ok(None);
    }
    let mut fields = BTreeMap::new();
    for token in line.split(['|', ',', ' ', '\t']) {
        if let Some((k, v)) = token.split_once('=') {
            let k = k.trim();
            // The first of a key wins: a later `loss=` on the line (an eval loss printed
            // after the training loss) never replaces the step's training loss.
            if !k.is_empty()
                && k.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '/')
            {
                fields
                    .entry(k.to_string())
                    .or_insert_with(|| v.trim().to_string());
            }
        }
    }
    // A comma inside a number (samples=1,024) splits it: only step and loss are parsed here,
    // and neither is written with thousands separators by the trainers this reads.
    let (Some(step), Some(loss)) = (fields.remove("step"), fields.remove("loss")) else {
        return Ok(None);
    };
    let step_text = step.split('/').next().unwrap_or("");
    let step: u64 = step_text.parse().map_err(|_| {
        EvalError::new(
            path,
            &format!("{at}: step"),
            format!("{step:?} is not a whole number"),
        )
    })?;
    let loss = finite(path, at, &loss)?;
    Ok(Some(StepRecord { step, loss, fields }))
}

fn csv_record(
    path: &Path,
    at: &str,
    line: &str,
    columns: &[String],
) -> Result<Option<StepRecord>, EvalError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let cells: Vec<&str> = line.split(',').map(str::trim).collect();
    if cells.len() != columns.len() {
        return Err(EvalError::new(
            path,
            at,
            format!("{} cells, the header has {}", cells.len(), columns.len()),
        ));
    }
    let mut fields: BTreeMap<String, String> = columns
        .iter()
        .cloned()
        .zip(cells.iter().map(|c| c.to_string()))
        .collect();
    let step = fields.remove("step").unwrap_or_default();
    let loss = fields.remove("loss").unwrap_or_default();
    let step: u64 = step.parse().map_err(|_| {
        EvalError::new(
            path,
            &format!("{at}: step"),
            format!("{step:?} is not a whole number"),
        )
    })?;
    let loss = finite(path, at, &loss)?;
    fields.retain(|_, v| !v.is_empty());
    Ok(Some(StepRecord { step, loss, fields }))
}

/// A loss: a finite number ≥ 0 (a cross-entropy is never negative; a negative one would
/// flip the sign of every relative difference).
fn finite(path: &Path, at: &str, text: &str) -> Result<f64, EvalError> {
    text.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| {
            EvalError::new(
                path,
                &format!("{at}: loss"),
                format!("{text:?} is not a finite number ≥ 0"),
            )
        })
}

fn jsonl_record(path: &Path, at: &str, line: &str) -> Result<Option<StepRecord>, EvalError> {
    let line = line.trim();
    if !line.starts_with('{') {
        return Ok(None);
    }
    let v: Value = serde_json::from_str(line)
        .map_err(|e| EvalError::new(path, at, format!("not JSON ({e})")))?;
    let Some(obj) = v.as_object() else {
        return Ok(None);
    };
    let (Some(step), Some(loss)) = (obj.get("step"), obj.get("loss")) else {
        return Ok(None);
    };
    let step = step
        .as_u64()
        .ok_or_else(|| EvalError::new(path, &format!("{at}: step"), "not a whole number"))?;
    let loss = match loss {
        Value::Number(n) => n.as_f64().filter(|x| x.is_finite() && *x >= 0.0),
        _ => None,
    }
    .ok_or_else(|| EvalError::new(path, &format!("{at}: loss"), "not a finite number ≥ 0"))?;
    let fields = obj
        .iter()
        .filter(|(k, _)| *k != "step" && *k != "loss")
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), text)
        })
        .collect();
    Ok(Some(StepRecord { step, loss, fields }))
}

/// The records as CSV (`step,loss,<fields…>`), the fields named in `keep` in that order.
pub fn to_csv(log: &TrainLog, keep: &[&str]) -> String {
    let mut out = String::from("step,loss");
    for k in keep {
        out.push(',');
        out.push_str(k);
    }
    out.push('\n');
    for r in &log.records {
        out.push_str(&format!("{},{}", r.step, r.loss));
        for k in keep {
            out.push(',');
            if let Some(v) = r.fields.get(*k) {
                out.push_str(&v.replace([',', '\n', '"'], " "));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "2026-05-06 02:18:14,897 [INFO] step=501/10000 | loss=5.2820 | lr=9.99e-06 | quant=ON | hif8_alg=max | samples=513,024";

    #[test]
    fn a_log_of_too_many_steps_is_refused_before_it_fills_memory() {
        let text: String = (1..=1001).map(|i| format!("step={i} loss=1.5\n")).collect();
        let e = parse_log_capped(
            Path::new("big.log"),
            text.as_bytes(),
            LogPattern::Auto,
            1000,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("big.log") && e.contains("line 1001") && e.contains("more than 1000"),
            "{e}"
        );
        // At the bound it is read.
        let log =
            parse_log_capped(Path::new("ok.log"), text.as_bytes(), LogPattern::Auto, 1001).unwrap();
        assert_eq!(log.records.len(), 1001);
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_refused_not_read() {
        let dir = std::env::temp_dir().join(format!("hif8lab-log-dev-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let zero = dir.join("train.log");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let e = read_log(&zero, LogPattern::Auto).unwrap_err().to_string();
        assert!(
            e.contains("train.log") && e.contains("not a regular file"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reads_the_key_value_pattern() {
        let text = format!("W0506 warning\n{LINE}\ntraceback\nstep=2 loss=4.5 quant=OFF\n");
        let log = parse_log(Path::new("t.log"), text.as_bytes(), LogPattern::Auto).unwrap();
        assert_eq!(log.pattern, LogPattern::KeyValue);
        assert_eq!(log.steps(), vec![2, 501]);
        assert_eq!(log.records[1].loss, 5.282);
        assert_eq!(log.records[1].fields["quant"], "ON");
        assert_eq!(log.records[1].fields["lr"], "9.99e-06");
        assert_eq!(log.other_lines, 2);
    }

    #[test]
    fn reads_jsonl_and_keeps_the_last_of_a_repeated_step() {
        let text = "{\"step\":1,\"loss\":3.5}\n{\"step\":2,\"loss\":3.0,\"lr\":0.1}\n{\"step\":2,\"loss\":2.9}\n";
        let log = parse_log(Path::new("m.jsonl"), text.as_bytes(), LogPattern::Auto).unwrap();
        assert_eq!(log.pattern, LogPattern::Jsonl);
        assert_eq!(log.records.len(), 2);
        assert_eq!(log.records[1].loss, 2.9);
        assert_eq!(log.repeated_steps, 1);
    }

    #[test]
    fn csv_round_trips() {
        let text = format!("{LINE}\nstep=502 loss=5.1 | lr=1e-5 | quant=ON\n");
        let log = parse_log(Path::new("t.log"), text.as_bytes(), LogPattern::Auto).unwrap();
        let csv = to_csv(&log, &["lr", "quant"]);
        let back = parse_log(Path::new("t.csv"), csv.as_bytes(), LogPattern::Auto).unwrap();
        assert_eq!(back.pattern, LogPattern::Csv);
        assert_eq!(
            back.records,
            log.records
                .iter()
                .map(|r| StepRecord {
                    step: r.step,
                    loss: r.loss,
                    fields: r
                        .fields
                        .iter()
                        .filter(|(k, _)| *k == "lr" || *k == "quant")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                })
                .collect::<Vec<_>>()
        );
        let e = parse_log(Path::new("t.csv"), b"step,loss\n1,2,3\n", LogPattern::Auto).unwrap_err();
        assert!(e.to_string().contains("t.csv: line 2"), "{e}");
    }

    #[test]
    fn refuses_bad_records_naming_the_line() {
        let e = parse_log(
            Path::new("t.log"),
            b"a\nstep=3 loss=nan\n",
            LogPattern::KeyValue,
        )
        .unwrap_err();
        assert!(e.to_string().contains("t.log: line 2: loss"), "{e}");
        let e =
            parse_log(Path::new("t.log"), b"step=x loss=1\n", LogPattern::KeyValue).unwrap_err();
        assert!(e.to_string().contains("line 1: step"), "{e}");
        let e = parse_log(Path::new("t.log"), b"nothing here\n", LogPattern::Auto).unwrap_err();
        assert!(e.to_string().contains("no training step records"), "{e}");
        let e = parse_log(
            Path::new("m.jsonl"),
            b"{\"step\":1,\"loss\":\"x\"}\n",
            LogPattern::Jsonl,
        )
        .unwrap_err();
        assert!(e.to_string().contains("line 1: loss"), "{e}");
    }

    #[test]
    fn fuzzed_logs_never_panic() {
        let mut rng = hif8lab_train::rng::Rng::new(5);
        let base = format!(
            "step,loss,lr\n1,2.5,0.1\n{LINE}\n{{\"step\":3,\"loss\":1.5}}\nstep=4 loss=2\n"
        );
        for _ in 0..3000 {
            let mut b = base.clone().into_bytes();
            for _ in 0..1 + rng.below(6) {
                let i = rng.below(b.len());
                match rng.below(3) {
                    0 => b[i] = rng.below(256) as u8,
                    1 => {
                        b.remove(i);
                    }
                    _ => b.insert(i, b"=|{}\"0.e-\n"[rng.below(10)]),
                }
            }
            for p in [
                LogPattern::Auto,
                LogPattern::KeyValue,
                LogPattern::Jsonl,
                LogPattern::Csv,
            ] {
                if let Ok(log) = parse_log(Path::new("f.log"), &b, p) {
                    assert!(log.records.iter().all(|r| r.loss.is_finite()));
                    assert!(log.records.windows(2).all(|w| w[0].step < w[1].step));
                }
            }
        }
    }
}
