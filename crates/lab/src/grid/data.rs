//! The data behind a grid's report ([`DATA_FILE`]): every run's summary and the base's
//! probe scores, as gzipped JSON lines — what `grid --recompute` and the real-model lesson
//! read (natively from a folder, in the browser from the committed file).

use hif8lab_train::run::{RunStatus, RunSummary};
use hif8lab_train::trainer::{ProbeScores, TrainError};

/// The file, next to a grid's report, holding everything the report rests on: per run,
/// data order and pretraining, the run's summary (per-item probe marks and margins, losses,
/// counts); per pretraining, the base's probe scores. Gzipped JSON lines.
pub const DATA_FILE: &str = "runs.jsonl.gz";

/// The data behind a grid's report ([`DATA_FILE`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GridData {
    /// Probe scores of each pretraining of the base.
    pub bases: Vec<ProbeScores>,
    /// Every run, data order and pretraining.
    pub runs: Vec<GridDataRun>,
    /// The real pretrained model the runs continued from (none: a base pretrained here).
    pub base_model: Option<String>,
}

/// One run of [`GridData`].
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GridDataRun {
    /// The grid run (`most_recent-low`, …).
    pub run: String,
    /// Its data order (0-based).
    pub order: usize,
    /// Its pretraining (0-based).
    pub base_seed: usize,
    /// Its summary.
    pub summary: RunSummary,
}

/// A line of [`DATA_FILE`].
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum DataLine {
    Base {
        base_seed: usize,
        probes: Box<ProbeScores>,
        /// The real model the runs continued from (absent: pretrained here).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    Run(Box<GridDataRun>),
}

impl GridData {
    /// The JSON lines (one per pretraining, then one per run, order and pretraining).
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        let mut line = |l: &DataLine| {
            if let Ok(text) = serde_json::to_string(l) {
                out.push_str(&text);
                out.push('\n');
            }
        };
        for (j, b) in self.bases.iter().enumerate() {
            line(&DataLine::Base {
                base_seed: j,
                probes: Box::new(b.clone()),
                model: self.base_model.clone(),
            });
        }
        for r in &self.runs {
            line(&DataLine::Run(Box::new(r.clone())));
        }
        out
    }

    /// The gzipped JSON lines ([`DATA_FILE`]).
    pub fn to_gzip_jsonl(&self) -> Result<Vec<u8>, TrainError> {
        use std::io::Write;
        let io_err = TrainError::io("");
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(self.to_jsonl().as_bytes()).map_err(&io_err)?;
        z.finish().map_err(io_err)
    }

    /// Parses the JSON lines; `source` names them in errors (with the line).
    pub fn from_jsonl(source: &str, text: &str) -> Result<Self, TrainError> {
        let bad = |message: String| TrainError::File {
            file: source.to_owned(),
            message,
        };
        let mut data = GridData::default();
        let mut bases: Vec<(usize, ProbeScores)> = Vec::new();
        for (i, l) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let line: DataLine =
                serde_json::from_str(l).map_err(|e| bad(format!("line {}: {e}", i + 1)))?;
            match line {
                DataLine::Base {
                    base_seed,
                    probes,
                    model,
                } => {
                    data.base_model = data.base_model.take().or(model);
                    bases.push((base_seed, *probes));
                }
                DataLine::Run(r) => data.runs.push(*r),
            }
        }
        bases.sort_by_key(|b| b.0);
        if bases.is_empty() || bases.iter().enumerate().any(|(j, b)| b.0 != j) {
            return Err(bad(
                "the base lines must number the pretrainings 0, 1, … once each".into(),
            ));
        }
        data.bases = bases.into_iter().map(|b| b.1).collect();
        data.check_design().map_err(bad)?;
        Ok(data)
    }

    /// Every record against the grid's own design: each run once, complete, scored on the
    /// same probe items as the base, and every QAT run counting the same estimators — a
    /// report over records that differ in any of these would compare unlike things.
    fn check_design(&self) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for r in &self.runs {
            if !seen.insert((&r.run, r.order, r.base_seed)) {
                return Err(format!(
                    "run {} (data order {}, pretraining {}) is given twice",
                    r.run, r.order, r.base_seed
                ));
            }
        }
        let Some(reference) = self.bases.first() else {
            return Ok(());
        };
        for (j, b) in self.bases.iter().enumerate() {
            same_items(reference, b).map_err(|e| format!("base {j}: {e}"))?;
        }
        let mut estimators: Option<&GridDataRun> = None;
        for r in &self.runs {
            let at = format!("run {} (data order {})", r.run, r.order);
            let s = &r.summary;
            check_complete(&at, s)?;
            let probes = s.probes.as_ref().ok_or_else(|| {
                format!("{at}: field 'summary.probes' is missing (the base has probe scores)")
            })?;
            same_items(reference, probes).map_err(|e| format!("{at}: {e}"))?;
            if !s.quantized() {
                continue;
            }
            check_counts(&at, s)?;
            match estimators {
                Some(first) => same_shadows(&at, first, s)?,
                None => estimators = Some(r),
            }
        }
        Ok(())
    }

    /// Parses gzipped JSON lines ([`DATA_FILE`]'s bytes: one gzip member, nothing after it);
    /// `source` names them in errors.
    pub fn from_gzip(source: &str, bytes: &[u8]) -> Result<Self, TrainError> {
        use std::io::Read;
        let mut text = String::new();
        let mut z = flate2::bufread::GzDecoder::new(bytes);
        (&mut z)
            .take(1 << 31)
            .read_to_string(&mut text)
            .map_err(|e| TrainError::File {
                file: source.to_owned(),
                message: format!("not gzipped UTF-8 JSON lines: {e}"),
            })?;
        // A second member (`cat a.gz b.gz`) or junk after the first would never be read:
        // refused rather than a report over part of the file.
        let rest = z.into_inner().len();
        if rest > 0 {
            return Err(TrainError::File {
                file: source.to_owned(),
                message: format!(
                    "{rest} bytes follow the gzip stream (a second gzip member or trailing \
                     data); the file must be one gzip stream"
                ),
            });
        }
        Self::from_jsonl(source, &text)
    }

    /// Reads [`DATA_FILE`]; errors name the file (and the line).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read(path: &std::path::Path) -> Result<Self, TrainError> {
        let source = path.display().to_string();
        let bytes = std::fs::read(path).map_err(TrainError::io(&source))?;
        Self::from_gzip(&source, &bytes)
    }
}

/// A finished, complete run (`at` names it in errors).
fn check_complete(at: &str, s: &RunSummary) -> Result<(), String> {
    if s.status != RunStatus::Finished || s.error.is_some() {
        return Err(format!(
            "{at}: field 'summary.status' is {:?}{}: only finished runs make a report",
            s.status,
            s.error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
    }
    if !(s.lr.is_finite() && s.lr > 0.0) {
        return Err(format!(
            "{at}: field 'summary.lr' is {}: a learning rate is a finite number > 0",
            s.lr
        ));
    }
    if s.steps != s.target_steps || s.losses.len() as u64 != s.steps {
        return Err(format!(
            "{at}: field 'summary.steps' is {} of {} target steps with {} losses: the \
             run is not complete",
            s.steps,
            s.target_steps,
            s.losses.len()
        ));
    }
    Ok(())
}

/// A QAT run's counts: something quantized, one count per estimator everywhere, its
/// estimator among those counted.
fn check_counts(at: &str, s: &RunSummary) -> Result<(), String> {
    if s.quantizers == 0 {
        return Err(format!(
            "{at}: field 'summary.quantizers' is 0: a QAT run ({}) that quantized \
             nothing gives no data for a claim",
            s.estimator
        ));
    }
    let k = s.estimators.len();
    let role_lengths_ok = s.counts.calls_above_by_role.values().all(|v| v.len() == k);
    if k == 0 || s.counts.estimators.len() != k || !role_lengths_ok {
        return Err(format!(
            "{at}: field 'summary.counts' holds {} estimators' counts for the {k} of \
             'summary.estimators' ({}): a missing count is not a zero",
            s.counts.estimators.len(),
            s.estimators.join(", ")
        ));
    }
    // An amax is a largest magnitude: finite, at least 0, its minimum at most its maximum.
    if let Some(q) = s.per_quantizer.iter().find(|q| {
        !(q.amax_min.is_finite()
            && q.amax_max.is_finite()
            && q.amax_min >= 0.0
            && q.amax_min <= q.amax_max)
    }) {
        return Err(format!(
            "{at}: field 'summary.per_quantizer' of {} has amax {} to {}: an amax is a \
             largest magnitude, finite and ≥ 0, its minimum at most its maximum",
            q.quantizer, q.amax_min, q.amax_max
        ));
    }
    // The exceeded calls' record: a ratio above 1 (or 0: none), at most the bins a ratio can
    // fill, as many calls binned as sorted by tier.
    if let Some(q) = s.per_quantizer.iter().find(|q| {
        let binned: u64 = q.excess_hist.iter().map(|c| u64::from(*c)).sum();
        let tiered: u64 = q.excess_tiers.iter().sum();
        let none = binned == 0 && q.excess_max == 0.0;
        !(q.excess_max.is_finite()
            && (none || q.excess_max >= 1.0)
            && q.excess_hist.len() <= hif8lab_train::run::excess_bin(f32::MAX) + 1
            && binned == tiered)
    }) {
        return Err(format!(
            "{at}: field 'summary.per_quantizer' of {} has excess_max {}, {} excess_hist              bins holding {} calls and excess_tiers {:?}: the ratio is 0 or at least 1,              the bins as many calls as the tiers",
            q.quantizer,
            q.excess_max,
            q.excess_hist.len(),
            q.excess_hist.iter().map(|c| u64::from(*c)).sum::<u64>(),
            q.excess_tiers
        ));
    }
    if let Some(q) = s
        .per_quantizer
        .iter()
        .find(|q| q.calls_above.len() != k || q.overflow.len() != k)
    {
        return Err(format!(
            "{at}: field 'summary.per_quantizer' of {} counts {} and {} estimators for \
             the {k} of 'summary.estimators'",
            q.quantizer,
            q.calls_above.len(),
            q.overflow.len()
        ));
    }
    if !s.estimators.contains(&s.estimator) {
        return Err(format!(
            "{at}: field 'summary.estimator' is '{}', not one of 'summary.estimators' ({})",
            s.estimator,
            s.estimators.join(", ")
        ));
    }
    Ok(())
}

/// A QAT run shadows the same estimators, counted over the same roles, as the grid's `first`.
fn same_shadows(at: &str, first: &GridDataRun, s: &RunSummary) -> Result<(), String> {
    if first.summary.estimators != s.estimators {
        return Err(format!(
            "{at}: field 'summary.estimators' is [{}], run {} (data order {}) has \
             [{}]: every QAT run of a grid shadows the same estimators",
            s.estimators.join(", "),
            first.run,
            first.order,
            first.summary.estimators.join(", ")
        ));
    }
    if !first
        .summary
        .counts
        .calls_above_by_role
        .keys()
        .eq(s.counts.calls_above_by_role.keys())
    {
        return Err(format!(
            "{at}: field 'summary.counts.calls_above_by_role' counts the roles [{}], \
             run {} (data order {}) the roles [{}]",
            roles(s),
            first.run,
            first.order,
            roles(&first.summary)
        ));
    }
    Ok(())
}

/// `b` scored on the items `reference` was: the same counts, marks and held-out windows.
fn same_items(reference: &ProbeScores, b: &ProbeScores) -> Result<(), String> {
    let field = |name: &str, want: usize, got: usize| {
        if want == got {
            Ok(())
        } else {
            Err(format!(
                "field 'probes.{name}' is {got}, the base's is {want}: scores on other items \
                 cannot be paired"
            ))
        }
    };
    field(
        "knowledge_items",
        reference.knowledge_items,
        b.knowledge_items,
    )?;
    field(
        "completion_items",
        reference.completion_items,
        b.completion_items,
    )?;
    // Packed 0/1 marks are hex digits: any other character would unpack to nothing, and
    // the paired comparisons would quietly lose the run.
    if let Some(m) = &b.marks {
        for (name, text) in [
            ("knowledge_acc", &m.knowledge_acc),
            ("knowledge_acc_norm", &m.knowledge_acc_norm),
            ("completion_acc", &m.completion_acc),
            ("completion_acc_norm", &m.completion_acc_norm),
        ] {
            if let Some(c) = text.chars().find(|c| !c.is_ascii_hexdigit()) {
                return Err(format!(
                    "field 'probes.marks.{name}' holds {c:?}: packed marks are hex digits"
                ));
            }
        }
    }
    match (&reference.marks, &b.marks) {
        (Some(r), Some(m)) => {
            let lengths = [
                (
                    "marks.knowledge_acc (characters)",
                    r.knowledge_acc.len(),
                    m.knowledge_acc.len(),
                ),
                (
                    "marks.knowledge_acc_norm (characters)",
                    r.knowledge_acc_norm.len(),
                    m.knowledge_acc_norm.len(),
                ),
                (
                    "marks.completion_acc (characters)",
                    r.completion_acc.len(),
                    m.completion_acc.len(),
                ),
                (
                    "marks.completion_acc_norm (characters)",
                    r.completion_acc_norm.len(),
                    m.completion_acc_norm.len(),
                ),
                ("marks.heldout (windows)", r.heldout.len(), m.heldout.len()),
                (
                    "marks.knowledge_margin (items)",
                    r.knowledge_margin.len(),
                    m.knowledge_margin.len(),
                ),
                (
                    "marks.completion_margin (items)",
                    r.completion_margin.len(),
                    m.completion_margin.len(),
                ),
            ];
            lengths
                .into_iter()
                .try_for_each(|(name, want, got)| field(name, want, got))
        }
        (Some(_), None) => Err("field 'probes.marks' is missing (the base has them)".into()),
        (None, _) => Ok(()),
    }
}

fn roles(s: &RunSummary) -> String {
    s.counts
        .calls_above_by_role
        .keys()
        .map(|r| format!("{r:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod hostile_tests {
    use super::*;

    /// The committed small grid's data, as JSON lines.
    fn committed() -> String {
        use std::io::Read;
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/results/grid-small/runs.jsonl.gz"
        );
        let bytes = std::fs::read(path).expect("the committed grid data");
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .expect("gzip");
        text
    }

    #[test]
    fn marks_that_are_not_hex_impossible_rates_and_negative_amax_are_refused() {
        let text = committed();
        GridData::from_jsonl("runs.jsonl", &text).expect("the committed data read");
        // A run line (not the first, the header of the bases): its marks and its rate.
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        let i = lines
            .iter()
            .position(|l| l.contains("\"knowledge_acc\":\"") && l.contains("\"run\""))
            .expect("a run with marks");
        let mut v: serde_json::Value = serde_json::from_str(&lines[i]).unwrap();
        let marks = &mut v["summary"]["probes"]["marks"]["knowledge_acc"];
        let mut m = marks.as_str().unwrap().to_string();
        m.replace_range(0..1, "z");
        *marks = serde_json::Value::String(m);
        let bad = lines.clone();
        let mut bad_marks = bad;
        bad_marks[i] = v.to_string();
        let e = GridData::from_jsonl("runs.jsonl", &bad_marks.join("\n")).unwrap_err();
        assert!(e.to_string().contains("packed marks are hex digits"), "{e}");
        // A negative amax (or one that is not a number) is refused, naming the quantizer;
        // the same entry with a proper amax is read.
        let q = lines
            .iter()
            .position(|l| l.contains("\"estimator\":\"most_recent\""))
            .expect("a QAT run");
        let with_amax = |amax: serde_json::Value| {
            let mut v: serde_json::Value = serde_json::from_str(&lines[q]).unwrap();
            let k = v["summary"]["estimators"].as_array().unwrap().len();
            v["summary"]["per_quantizer"] = serde_json::json!([{
                "quantizer": "block1.gate.A", "calls": 3, "amax_min": 0.5, "amax_max": amax,
                "calls_above": vec![0; k], "overflow": vec![0; k],
            }]);
            let mut bad = lines.clone();
            bad[q] = v.to_string();
            GridData::from_jsonl("runs.jsonl", &bad.join("\n"))
        };
        with_amax(serde_json::json!(2.0)).expect("an amax of 0.5 to 2 is read");
        // The exceeded calls' record: consistent is read, a ratio below 1 or bins that do not
        // add up to the tiers refused by name.
        let with_excess = |max: serde_json::Value, hist: serde_json::Value| {
            let mut v: serde_json::Value = serde_json::from_str(&lines[q]).unwrap();
            let k = v["summary"]["estimators"].as_array().unwrap().len();
            v["summary"]["per_quantizer"] = serde_json::json!([{
                "quantizer": "block1.gate.A", "calls": 3, "amax_min": 0.5, "amax_max": 2.0,
                "calls_above": vec![0; k], "overflow": vec![0; k],
                "excess_max": max, "excess_hist": hist, "excess_tiers": [1, 1, 0, 0],
            }]);
            let mut bad = lines.clone();
            bad[q] = v.to_string();
            GridData::from_jsonl("runs.jsonl", &bad.join("\n"))
        };
        with_excess(serde_json::json!(3.0), serde_json::json!([1, 0, 1]))
            .expect("a consistent excess record is read");
        for (max, hist) in [
            (serde_json::json!(0.5), serde_json::json!([1, 0, 1])),
            (serde_json::json!(3.0), serde_json::json!([1, 0, 5])),
        ] {
            let e = with_excess(max, hist).unwrap_err();
            assert!(
                e.to_string()
                    .contains("field 'summary.per_quantizer' of block1.gate.A has excess_max"),
                "{e}"
            );
        }
        for amax in [serde_json::json!(-2.5), serde_json::json!(0.25)] {
            let e = with_amax(amax.clone()).unwrap_err();
            assert!(
                e.to_string()
                    .contains("field 'summary.per_quantizer' of block1.gate.A has amax"),
                "{amax}: {e}"
            );
        }
        let mut v: serde_json::Value = serde_json::from_str(&lines[i]).unwrap();
        v["summary"]["lr"] = serde_json::json!(-1e-4);
        lines[i] = v.to_string();
        let e = GridData::from_jsonl("runs.jsonl", &lines.join("\n")).unwrap_err();
        assert!(
            e.to_string().contains("field 'summary.lr' is -0.0001"),
            "{e}"
        );
    }
}
