//! Transformer Engine debug-tool logs (nvdlfw-inspect `LogTensorStats`), read line by line.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use super::{Imported, SeriesBuilder};
use crate::trace::{InputError, for_each_line};

/// Tensor names of nvdlfw-inspect's LogTensorStats.
const TE_TENSORS: [&str; 6] = [
    "activation",
    "gradient",
    "weight",
    "output",
    "wgrad",
    "dgrad",
];

/// Parses Transformer Engine debug-tool logs (nvdlfw-inspect `LogTensorStats`): lines of
/// the form `… <layer>_<tensor>_<stat> … iteration=NNNNNN … value=V`. The stats `amax` and
/// `cur_amax` give an amax directly; `max` and `min` of the same tensor and iteration give
/// amax = max(|max|, |min|). A `max` without its `min` (or the reverse) is counted and left
/// out (its amax is unknown). Values printed as zero with fixed decimals (`0.0000`) are
/// counted as lost to the log's precision, not replayed as zeros. Other lines (other stats,
/// other log output) are skipped. Series are named `layer.tensor`.
pub fn parse_te_log(path: &Path, bytes: &[u8]) -> Result<Imported, InputError> {
    te_log_from_reader(path, bytes)
}

/// A statistic of a Transformer Engine log line.
#[derive(Clone, Copy, PartialEq)]
enum Stat {
    /// `_amax` (`cur` false) or `_cur_amax` (`cur` true).
    Amax {
        cur: bool,
    },
    Max,
    Min,
}

/// One call being assembled from a Transformer Engine log: a direct amax, or a max/min pair
/// of one iteration. Values carry whether the log printed them as zero at its precision.
struct Entry {
    step: u64,
    /// Whether the direct amax came from a `_cur_amax` line.
    cur: bool,
    amax: Option<(f32, bool)>,
    max: Option<(f32, bool)>,
    min: Option<(f32, bool)>,
}

/// The calls of a Transformer Engine log per tensor, in order of first appearance.
#[derive(Default)]
struct TeLines {
    order: Vec<String>,
    entries: BTreeMap<String, Vec<Entry>>,
    warnings: Vec<String>,
    skipped: usize,
}

/// One amax statistic of a log line: tensor (`layer.tensor`), statistic, iteration, value
/// and whether the value was printed as zero at the log's precision.
type TeValue = (String, Stat, u64, f32, bool);

/// One log line's tensor, statistic, iteration and value; `None` for a line without amax
/// statistics.
fn te_line(path: &Path, line_no: usize, line: &str) -> Result<Option<TeValue>, InputError> {
    let malformed = |field: &str, message: String| InputError::Malformed {
        path: path.to_owned(),
        line: line_no,
        field: field.to_owned(),
        message,
    };
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let Some(it_pos) = tokens.iter().position(|t| t.starts_with("iteration=")) else {
        return Ok(None);
    };
    let Some(name) = it_pos.checked_sub(1).map(|i| tokens[i]) else {
        return Ok(None);
    };
    let stat = if let Some(b) = name.strip_suffix("_cur_amax") {
        Some((b, Stat::Amax { cur: true }))
    } else if let Some(b) = name.strip_suffix("_amax") {
        Some((b, Stat::Amax { cur: false }))
    } else if let Some(b) = name.strip_suffix("_max") {
        Some((b, Stat::Max))
    } else {
        name.strip_suffix("_min").map(|b| (b, Stat::Min))
    };
    let Some((base, stat)) = stat else {
        return Ok(None); // another statistic
    };
    let (layer, tensor) = base
        .rsplit_once('_')
        .filter(|(_, t)| TE_TENSORS.contains(t))
        .ok_or_else(|| {
            malformed(
                "name",
                format!(
                    "'{name}' is not <layer>_<tensor>_<amax|max|min> with tensor one of \
                     {TE_TENSORS:?}"
                ),
            )
        })?;
    let iteration = &tokens[it_pos]["iteration=".len()..];
    let step: u64 = iteration
        .parse()
        .map_err(|_| malformed("iteration", format!("'{iteration}' is not a number")))?;
    let value = tokens
        .iter()
        .find_map(|t| t.strip_prefix("value="))
        .ok_or_else(|| malformed("value", "missing value=".into()))?;
    let v: f32 = value
        .parse()
        .map_err(|_| malformed("value", format!("'{value}' is not a number")))?;
    // `0.0000`: zero only as far as the printed decimals go.
    let rounded_zero = v == 0.0 && value.contains('.') && !value.contains(['e', 'E']);
    Ok(Some((
        format!("{layer}.{tensor}"),
        stat,
        step,
        v,
        rounded_zero,
    )))
}

impl TeLines {
    /// Reads a log line by line.
    fn read(path: &Path, reader: impl BufRead) -> Result<TeLines, InputError> {
        let mut t = TeLines::default();
        for_each_line(path, reader, |line_no, raw, unterminated| {
            let line = String::from_utf8_lossy(raw);
            match te_line(path, line_no, &line) {
                Ok(Some((series, stat, step, v, rounded_zero))) => {
                    t.add(series, stat, step, (v, rounded_zero));
                }
                Ok(None) => t.skipped += usize::from(!line.trim().is_empty()),
                Err(e) if unterminated => {
                    t.warnings.push(format!("skipped a torn last line ({e})"));
                }
                Err(e) => return Err(e),
            }
            Ok(())
        })?;
        Ok(t)
    }

    fn add(&mut self, series: String, stat: Stat, step: u64, value: (f32, bool)) {
        let order = &mut self.order;
        let list = self.entries.entry(series.clone()).or_insert_with(|| {
            order.push(series);
            Vec::new()
        });
        let value = Some(value);
        match stat {
            Stat::Amax { cur } => list.push(Entry {
                step,
                cur,
                amax: value,
                max: None,
                min: None,
            }),
            Stat::Max | Stat::Min => {
                let open = list.iter_mut().rev().find(|e| {
                    e.step == step
                        && e.amax.is_none()
                        && if stat == Stat::Max {
                            e.max.is_none()
                        } else {
                            e.min.is_none()
                        }
                });
                let entry = match open {
                    Some(e) => e,
                    None => {
                        list.push(Entry {
                            step,
                            cur: false,
                            amax: None,
                            max: None,
                            min: None,
                        });
                        list.last_mut().expect("just pushed")
                    }
                };
                if stat == Stat::Max {
                    entry.max = value;
                } else {
                    entry.min = value;
                }
            }
        }
    }
}

/// What merging a tensor's lines dropped or could not pair, counted over the whole log.
#[derive(Default)]
struct Tally {
    /// Tensors logged with both `_amax` and `_cur_amax` lines.
    both_kinds: usize,
    /// Lines repeating an iteration already logged for their tensor.
    repeated: usize,
    /// Times the iterations go backwards within a tensor's lines.
    backwards: usize,
    /// Lines without amax statistics, or adding nothing to a direct amax.
    skipped: usize,
    /// Max or min values without their partner.
    unpaired: usize,
}

impl Tally {
    /// One tensor's lines, each iteration once: `_cur_amax` over `_amax` when a tensor has
    /// both, a direct amax over a max/min pair, the first of a repeated iteration.
    fn merge(&mut self, list: &mut Vec<Entry>) {
        // A tensor logged with both `_amax` and `_cur_amax` lines: one call per iteration,
        // from `_cur_amax` (the tensor's own amax at that iteration).
        let has = |cur: bool| list.iter().any(|e| e.amax.is_some() && e.cur == cur);
        if has(true) && has(false) {
            self.both_kinds += 1;
            list.retain(|e| e.amax.is_none() || e.cur);
        }
        // A max/min pair beside a direct amax of the same iteration adds nothing; an
        // iteration logged twice counts once (the first line).
        let direct_steps: std::collections::BTreeSet<u64> = list
            .iter()
            .filter(|e| e.amax.is_some())
            .map(|e| e.step)
            .collect();
        list.retain(|e| {
            let merged = e.amax.is_none() && direct_steps.contains(&e.step);
            self.skipped += usize::from(merged);
            !merged
        });
        let mut seen = std::collections::BTreeSet::new();
        list.retain(|e| {
            let first = seen.insert(e.step);
            self.repeated += usize::from(!first);
            first
        });
        self.backwards += list.windows(2).filter(|w| w[1].step < w[0].step).count();
    }

    /// One tensor's merged lines into `b`, as calls (a max/min pair gives amax = max(|max|,
    /// |min|)).
    fn push(&mut self, b: &mut SeriesBuilder, name: &str, list: Vec<Entry>) {
        let direct: std::collections::BTreeSet<u64> = list
            .iter()
            .filter(|e| e.amax.is_some())
            .map(|e| e.step)
            .collect();
        for e in list {
            let (amax, rounded_zero) = match (e.amax, e.max, e.min) {
                (Some((a, z)), _, _) => (a, z),
                (None, Some((hi, zh)), Some((lo, zl))) => {
                    let a = if hi.is_nan() || lo.is_nan() {
                        f32::NAN
                    } else {
                        hi.abs().max(lo.abs())
                    };
                    (a, zh && zl)
                }
                // A lone max or min beside a direct amax of the same iteration adds nothing.
                _ if direct.contains(&e.step) => {
                    self.skipped += 1;
                    continue;
                }
                _ => {
                    self.unpaired += 1;
                    continue;
                }
            };
            if rounded_zero {
                b.push_rounded_zero(name.to_owned());
            } else {
                b.push(name.to_owned(), e.step, amax);
            }
        }
    }

    /// The warnings of what merging did (before the series are built).
    fn warn(&self, warnings: &mut Vec<String>) {
        let Tally {
            both_kinds,
            repeated,
            backwards,
            unpaired,
            ..
        } = *self;
        if both_kinds > 0 {
            warnings.push(format!(
                "{both_kinds} tensor(s) logged with both _amax and _cur_amax lines: each iteration \
                 counted once, from _cur_amax"
            ));
        }
        if repeated > 0 {
            warnings.push(format!(
                "{repeated} line(s) repeat an iteration already logged for their tensor: ignored \
                 (each tensor and iteration counts once)"
            ));
        }
        if backwards > 0 {
            warnings.push(format!(
                "iterations go backwards {backwards} time(s) within a tensor's lines (logs of two \
                 runs appended?): replayed in file order"
            ));
        }
        if unpaired > 0 {
            warnings.push(format!(
                "{unpaired} max or min value(s) without their partner of the same tensor and \
                 iteration left out (amax needs both: LogTensorStats stats [max, min])"
            ));
        }
    }
}

/// [`parse_te_log`] streamed from a reader.
pub(super) fn te_log_from_reader(
    path: &Path,
    reader: impl BufRead,
) -> Result<Imported, InputError> {
    let TeLines {
        order,
        mut entries,
        mut warnings,
        skipped,
    } = TeLines::read(path, reader)?;
    let mut b = SeriesBuilder::default();
    let mut tally = Tally {
        skipped,
        ..Tally::default()
    };
    for name in &order {
        let mut list = entries.remove(name).unwrap_or_default();
        tally.merge(&mut list);
        tally.push(&mut b, name, list);
    }
    tally.warn(&mut warnings);
    let series = b.finish(&mut warnings);
    if series.is_empty() {
        return Err(InputError::Empty {
            path: path.to_owned(),
            message: "no amax lines found: expected a hif8lab trace (JSONL), CSV with header \
                      step,layer,role,amax, or Transformer Engine LogTensorStats lines \
                      '<layer>_<tensor>_amax … iteration=N … value=V' (or _max and _min)"
                .into(),
        });
    }
    if tally.skipped > 0 {
        warnings.push(format!(
            "{} line(s) without amax statistics skipped",
            tally.skipped
        ));
    }
    Ok(Imported {
        series,
        warnings,
        kind: "te-log",
    })
}
