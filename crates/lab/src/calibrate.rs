//! The probe calibrated without training: the real base's quantized MLP weights (gate, up and
//! down of the blocks QAT quantizes) damaged at known sizes, each damaged model scored on the
//! grid's probes, and the dose–response of every probe score against the undamaged base.
//!
//! Two kinds of damage, each at several sizes ([`Perturbation`], from [`crate::damage`]):
//!
//! - `noise:F` — Gaussian noise of F × the tensor's RMS added to every element (seeded);
//! - `hif8:K` — each tensor fake-quantized to HiF8 per tensor with its scale K× too large
//!   (an estimate K× below the tensor's amax): K = 1 is plain W8 quantization, larger K pushes
//!   the largest values into HiF8's coarser tiers (what an underestimated scale does), and
//!   beyond 2,730 (the overflow threshold ÷ the target 15) the largest clip.
//!
//! Every record keeps the full per-item probe marks and margins, so the report
//! ([`report`]) is rebuilt from `calibration.jsonl` byte for byte. The rule that calls a size
//! *detected* is fixed here, before any data: the 95 % cluster-bootstrap interval of the
//! score's change against the base lies wholly on the damage side of 0.

use std::fmt::Write as _;
use std::path::Path;

use hif8lab_train::TrainError;
use hif8lab_train::eval::resample::{Arm, Estimate, bootstrap};
use hif8lab_train::eval::{ProbeScore, ProbeScores};
use serde::{Deserialize, Serialize};

use crate::damage::{Change, Perturbation, perturb};

/// The file a calibration writes its records to (one JSON object per line).
pub const DATA_FILE: &str = "calibration.jsonl";

/// The sizes a calibration scores unless told otherwise.
pub const DEFAULT_LEVELS: &str = "noise:0.003,noise:0.01,noise:0.03,noise:0.1,noise:0.3,hif8:1,hif8:64,hif8:1024,hif8:8192,hif8:65536";

/// One scored model: the base (`none`) or a damaged one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// [`Perturbation::name`].
    pub perturbation: String,
    /// The damage's seed (0 where it draws nothing).
    pub seed: u64,
    /// What it did to the weights.
    pub change: Change,
    /// The probes' scores, with per-item marks and margins.
    pub probes: ProbeScores,
}

impl Record {
    /// The damage (`none` when the name does not parse, which [`read`] refuses).
    pub fn perturbation(&self) -> Perturbation {
        self.perturbation.parse().unwrap_or(Perturbation::None)
    }
}

/// Reads `calibration.jsonl`; errors name the file and line.
pub fn read(path: &Path) -> Result<Vec<Record>, TrainError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(TrainError::io(file.clone()))?;
    parse(&file, &text)
}

/// Parses the text of a `calibration.jsonl` (see [`read`]).
pub fn parse(file: &str, text: &str) -> Result<Vec<Record>, TrainError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |message: String| TrainError::File {
            file: format!("{file}:{}", i + 1),
            message,
        };
        let r: Record = serde_json::from_str(line).map_err(|e| err(e.to_string()))?;
        r.perturbation
            .parse::<Perturbation>()
            .map_err(|e| err(format!("perturbation {e}")))?;
        let p = &r.probes;
        for s in [ProbeScore::KnowledgeAccNorm, ProbeScore::KnowledgeMargin] {
            if p.item_values(s)
                .is_none_or(|v| v.len() != p.knowledge_items)
            {
                return Err(err(format!(
                    "probes: no per-item {s} for its {} knowledge items",
                    p.knowledge_items
                )));
            }
        }
        out.push(r);
    }
    if !out.iter().any(|r| r.perturbation == "none") {
        return Err(TrainError::File {
            file: file.to_owned(),
            message: "no record of the undamaged base (perturbation \"none\")".into(),
        });
    }
    Ok(out)
}

/// Appends `record` to the folder's data file, whole or not at all (the file is rewritten
/// through a temporary and a rename).
pub fn append(out: &Path, record: &Record) -> Result<(), TrainError> {
    let path = out.join(DATA_FILE);
    let io = TrainError::io(path.display().to_string());
    let mut text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io(e)),
    };
    let line = serde_json::to_string(record).map_err(|e| TrainError::File {
        file: path.display().to_string(),
        message: e.to_string(),
    })?;
    text.push_str(&line);
    text.push('\n');
    hif8lab_train::io::write_atomic(&path, text.as_bytes()).map_err(io)
}

/// Scores the base and every size of `levels` (`seeds` seeds for the seeded ones) of the
/// grid's real base on its probes, appending each record to `out/calibration.jsonl` as it is
/// made; a record already there (same size and seed) is kept, not scored again, so a killed
/// calibration resumes. Returns every record, base first. The caller holds the folder's lock.
pub fn run<B: hif8lab_engine::Backend>(
    make: &dyn Fn() -> Result<B, TrainError>,
    grid: &crate::grid::GridConfig,
    levels: &[Perturbation],
    seeds: u64,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Record>, TrainError> {
    use crate::grid::real;
    std::fs::create_dir_all(out).map_err(TrainError::io(out.display().to_string()))?;
    let path = out.join(DATA_FILE);
    let mut records = if path.exists() {
        let text =
            std::fs::read_to_string(&path).map_err(TrainError::io(path.display().to_string()))?;
        // (Resuming: a file without its base record yet is fine here.)
        let mut kept = Vec::new();
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            kept.push(
                serde_json::from_str::<Record>(line).map_err(|e| TrainError::File {
                    file: format!("{}:{}", path.display(), i + 1),
                    message: e.to_string(),
                })?,
            );
        }
        kept
    } else {
        Vec::new()
    };
    let base = real::load(grid)?;
    if base.damage.is_some() {
        return Err(TrainError::Setting {
            setting: "base.perturb".into(),
            message: "calibrate-probe damages the undamaged base itself: give it a grid \
                      without base.perturb"
                .into(),
        });
    }
    let probes = real::probe_set(&base.grid);
    let target = base.grid.scaling.target;
    let mut wanted = vec![(Perturbation::None, 0)];
    for p in levels {
        let n = if p.seeded() { seeds.max(1) } else { 1 };
        wanted.extend((0..n).map(|seed| (*p, seed)));
    }
    let total = wanted.len();
    for (i, (p, seed)) in wanted.into_iter().enumerate() {
        let name = p.name();
        if records
            .iter()
            .any(|r| r.perturbation == name && r.seed == seed)
        {
            progress(&format!(
                "[{}/{total}] {name} seed {seed}: scored earlier, kept",
                i + 1
            ));
            continue;
        }
        let clock = std::time::Instant::now();
        let (weights, change) = perturb(&base.weights, &base.grid.model, p, target, seed)?;
        let scores = real::score(
            make()?,
            &base.grid.model,
            &weights,
            &base.tokenizer,
            &probes,
            0,
        )?;
        let record = Record {
            perturbation: name.clone(),
            seed,
            change,
            probes: scores,
        };
        append(out, &record)?;
        progress(&format!(
            "[{}/{total}] {name} seed {seed}: ‖ΔW‖/‖W‖ {:.4}, knowledge acc_norm {:.3}, margin {:+.4}, held-out loss {:.4} ({:.0} s)",
            i + 1,
            record.change.relative_rms,
            record.probes.knowledge_acc_norm,
            record.probes.score(ProbeScore::KnowledgeMargin),
            record.probes.heldout_loss,
            clock.elapsed().as_secs_f64()
        ));
        records.push(record);
    }
    Ok(records)
}

/// The scores a calibration compares, with how each reads: (score, label, unit, whether a
/// rise is damage).
const SCORES: [(ProbeScore, &str, &str, bool); 5] = [
    (
        ProbeScore::KnowledgeAccNorm,
        "knowledge acc_norm drop",
        "% relative",
        false,
    ),
    (
        ProbeScore::KnowledgeMargin,
        "knowledge margin shift",
        "nats/byte",
        false,
    ),
    (
        ProbeScore::CompletionAccNorm,
        "completion acc_norm drop",
        "% relative",
        false,
    ),
    (
        ProbeScore::CompletionMargin,
        "completion margin shift",
        "nats/byte",
        false,
    ),
    (ProbeScore::HeldoutLoss, "held-out loss rise", "nats", true),
];

/// A damage size's change in one score against the base: seeds pooled (per item, the mean
/// over the size's seeds), cluster bootstrap over the base's items.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// The damage.
    pub perturbation: Perturbation,
    /// Its measured size (mean ‖ΔW‖/‖W‖ over its seeds).
    pub relative_rms: f64,
    /// The change: a relative drop in % for acc_norm (positive = worse), base − damaged
    /// for a margin (positive = smaller margin), damaged − base for the held-out loss.
    pub change: Estimate,
    /// Whether the interval lies wholly above 0 (the damage side): the size is detected.
    pub detected: bool,
}

/// The change in `score` at each damage size, in the order of the records.
pub fn curve(records: &[Record], score: ProbeScore) -> Vec<Point> {
    let Some(base) = records.iter().find(|r| r.perturbation == "none") else {
        return Vec::new();
    };
    let Some(base_values) = base.probes.item_values(score) else {
        return Vec::new();
    };
    let groups = base.probes.groups(score);
    let relative = matches!(
        score,
        ProbeScore::KnowledgeAccNorm
            | ProbeScore::CompletionAccNorm
            | ProbeScore::KnowledgeAcc
            | ProbeScore::CompletionAcc
    );
    let mut sizes: Vec<String> = Vec::new();
    for r in records {
        if r.perturbation != "none" && !sizes.contains(&r.perturbation) {
            sizes.push(r.perturbation.clone());
        }
    }
    sizes
        .iter()
        .filter_map(|name| {
            let runs: Vec<&Record> = records.iter().filter(|r| &r.perturbation == name).collect();
            let values: Vec<Vec<f64>> = runs
                .iter()
                .filter_map(|r| r.probes.item_values(score))
                .filter(|v| v.len() == base_values.len())
                .collect();
            if values.is_empty() {
                return None;
            }
            let pooled: Vec<f64> = (0..base_values.len())
                .map(|i| values.iter().map(|v| v[i]).sum::<f64>() / values.len() as f64)
                .collect();
            let arms = [
                Arm {
                    seeds: vec![base_values.clone()],
                },
                Arm {
                    seeds: vec![pooled],
                },
            ];
            let change = bootstrap(&groups, &arms, &|m| {
                if relative {
                    100.0 * (m[0] - m[1]) / m[0]
                } else if score == ProbeScore::HeldoutLoss {
                    m[1] - m[0]
                } else {
                    m[0] - m[1]
                }
            });
            let relative_rms =
                runs.iter().map(|r| r.change.relative_rms).sum::<f64>() / runs.len() as f64;
            Some(Point {
                perturbation: runs[0].perturbation(),
                relative_rms,
                change,
                detected: change.interval[0] > 0.0,
            })
        })
        .collect()
}

fn fmt_change(e: &Estimate, digits: usize) -> String {
    format!(
        "{:+.d$} [{:+.d$}, {:+.d$}]",
        e.value,
        e.interval[0],
        e.interval[1],
        d = digits
    )
}

/// The report of a calibration: the base, a table per damage family, and for each score the
/// smallest size detected. Rebuilt from the records alone (byte for byte).
pub fn report(records: &[Record], source: &str) -> String {
    let mut s = String::new();
    let Some(base) = records.iter().find(|r| r.perturbation == "none") else {
        return "# Probe calibration\n\nNo record of the undamaged base.\n".into();
    };
    let b = &base.probes;
    let _ = writeln!(
        s,
        "# Probe calibration: how large a damage the probes see\n"
    );
    let _ = writeln!(
        s,
        "Base model: {source}: knowledge acc_norm {:.3} [{:.3}, {:.3}] on {} items, completion acc_norm {:.3} [{:.3}, {:.3}] on {} items, held-out loss {:.4}, mean knowledge margin {:+.4} nats/byte. The probes are the grid's (`real-smollm2*` presets), scored as the grid scores them.\n",
        b.knowledge_acc_norm,
        b.interval(ProbeScore::KnowledgeAccNorm)[0],
        b.interval(ProbeScore::KnowledgeAccNorm)[1],
        b.knowledge_items,
        b.completion_acc_norm,
        b.interval(ProbeScore::CompletionAccNorm)[0],
        b.interval(ProbeScore::CompletionAccNorm)[1],
        b.completion_items,
        b.heldout_loss,
        b.score(ProbeScore::KnowledgeMargin),
    );
    let _ = writeln!(
        s,
        "No training: the base's quantized MLP weights (gate, up and down of the blocks QAT quantizes) are damaged at known sizes and the damaged model is scored. `noise:F` adds Gaussian noise of F × each tensor's RMS (seeded; seeds pooled per item); `hif8:K` fake-quantizes each tensor to HiF8 per tensor with its scale K× too large, as an estimate K× below the amax would: K = 1 is plain W8 quantization, larger K moves the largest values into HiF8's coarser tiers, and K above 2,730 clips the largest at the overflow threshold. Size: ‖W′ − W‖ / ‖W‖ over the damaged tensors, measured.\n"
    );
    let _ = writeln!(
        s,
        "Each change is against the base on the same items: acc_norm as a relative drop in % (positive = worse), a margin as base − damaged (positive = the right answers' margin shrank), the held-out loss as damaged − base. Intervals: 95 % cluster bootstrap over the probe items (knowledge by entity, completion by family, held-out windows in blocks), with the base's per-item scores paired to the damaged model's; a noise size's seeds are pooled per item (the mean of their 0/1 marks and margins), so its interval covers the items, not the draw of the noise — the per-seed accuracies beside it show how much the draw moves. A size is **detected** by a score when its interval lies wholly above 0 — the rule was fixed in the code before any data.\n"
    );
    let curves: Vec<(usize, Vec<Point>)> = SCORES
        .iter()
        .enumerate()
        .map(|(i, (score, ..))| (i, curve(records, *score)))
        .collect();
    for family in ["noise", "hif8"] {
        let mut rows: Vec<usize> = curves[0]
            .1
            .iter()
            .enumerate()
            .filter(|(_, p)| p.perturbation.family() == family)
            .map(|(i, _)| i)
            .collect();
        rows.sort_by(|a, b| {
            curves[0].1[*a]
                .relative_rms
                .total_cmp(&curves[0].1[*b].relative_rms)
        });
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "## {}\n",
            if family == "noise" {
                "Gaussian noise"
            } else {
                "HiF8 with the scale too large (coarser tiers, then clipping)"
            }
        );
        let _ = write!(
            s,
            "| damage | seeds | ‖ΔW‖/‖W‖ | knowledge acc_norm by seed |"
        );
        if family == "hif8" {
            let _ = write!(s, " clipped |");
        }
        for (_, label, unit, _) in SCORES {
            let _ = write!(s, " {label} ({unit}) [95 %] |");
        }
        let _ = writeln!(s);
        let cols = SCORES.len() + 4 + usize::from(family == "hif8");
        let _ = writeln!(s, "|{}", "---|".repeat(cols));
        for i in rows {
            let p = curves[0].1[i];
            let name = p.perturbation.name();
            let runs: Vec<&Record> = records.iter().filter(|r| r.perturbation == name).collect();
            let by_seed = runs
                .iter()
                .map(|r| format!("{:.3}", r.probes.knowledge_acc_norm))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = write!(
                s,
                "| {name} | {} | {:.4} | {by_seed} |",
                runs.len(),
                p.relative_rms
            );
            if family == "hif8" {
                let _ = write!(s, " {} |", runs[0].change.clipped);
            }
            for (k, (score, ..)) in SCORES.iter().enumerate() {
                let q = curves[k].1.get(i).copied();
                let cell = q.map_or("–".into(), |q| {
                    let digits = if matches!(
                        score,
                        ProbeScore::KnowledgeAccNorm | ProbeScore::CompletionAccNorm
                    ) {
                        2
                    } else {
                        4
                    };
                    let text = fmt_change(&q.change, digits);
                    if q.detected {
                        format!("**{text}**")
                    } else {
                        text
                    }
                });
                let _ = write!(s, " {cell} |");
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## The smallest damage each score detects\n");
    let _ = writeln!(
        s,
        "Per family, the smallest size (by ‖ΔW‖/‖W‖) whose interval lies above 0, and the relative knowledge acc_norm drop at that size (its 95 % interval): what a study on these probes can hope to see. Sizes below it were not detected; a larger one detected says nothing about the sizes between.\n"
    );
    for (k, (_, label, unit, _)) in SCORES.iter().enumerate() {
        for family in ["noise", "hif8"] {
            let mut pts: Vec<(usize, Point)> = curves[k]
                .1
                .iter()
                .copied()
                .enumerate()
                .filter(|(_, p)| p.perturbation.family() == family)
                .collect();
            if pts.is_empty() {
                continue;
            }
            pts.sort_by(|a, b| a.1.relative_rms.total_cmp(&b.1.relative_rms));
            let line = match pts.iter().find(|(_, p)| p.detected) {
                Some((i, p)) => {
                    let knowledge = curves[0].1[*i].change;
                    let digits = if unit.starts_with('%') { 2 } else { 4 };
                    let there = if k == 0 {
                        String::new()
                    } else {
                        format!(
                            "; knowledge acc_norm drop there {:+.2} % [{:+.2}, {:+.2}]",
                            knowledge.value, knowledge.interval[0], knowledge.interval[1]
                        )
                    };
                    format!(
                        "{} (‖ΔW‖/‖W‖ {:.4}): {label} {} {unit}{there}",
                        p.perturbation.name(),
                        p.relative_rms,
                        fmt_change(&p.change, digits),
                    )
                }
                None => format!(
                    "none of the {} sizes (up to ‖ΔW‖/‖W‖ {:.4})",
                    pts.len(),
                    pts.last().map_or(0.0, |(_, p)| p.relative_rms)
                ),
            };
            let _ = writeln!(s, "- **{label}**, {family}: {line}");
        }
    }
    let _ = writeln!(
        s,
        "\n## Plots\n\n![plots/calibration.png](plots/calibration.png)\n\n![plots/calibration-margin.png](plots/calibration-margin.png)"
    );
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_damage_the_probe_sees_is_detected_and_none_is_not() {
        use hif8lab_train::eval::ProbeMarks;
        use hif8lab_train::eval::resample::pack_marks;
        let n = 400;
        let scores = |right: usize, margin: f32| {
            let marks: Vec<bool> = (0..n).map(|i| i < right).collect();
            ProbeScores {
                knowledge_items: n,
                knowledge_acc_norm: right as f64 / n as f64,
                completion_items: 0,
                marks: Some(ProbeMarks {
                    knowledge_acc_norm: pack_marks(&marks),
                    knowledge_acc: pack_marks(&marks),
                    knowledge_margin: (0..n).map(|i| margin + (i % 7) as f32 * 0.01).collect(),
                    ..ProbeMarks::default()
                }),
                ..ProbeScores::default()
            }
        };
        let rec = |p: &str, right, margin| Record {
            perturbation: p.into(),
            seed: 0,
            change: Change::default(),
            probes: scores(right, margin),
        };
        let records = vec![
            rec("none", 300, 0.5),
            rec("noise:0.01", 300, 0.5),
            rec("noise:0.1", 200, 0.3),
        ];
        let text: String = records
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        let back = parse("c.jsonl", &text).unwrap();
        assert_eq!(back, records);
        let k = curve(&back, ProbeScore::KnowledgeAccNorm);
        assert_eq!(k.len(), 2);
        assert!(!k[0].detected && k[0].change.value == 0.0);
        assert!(k[1].detected && (k[1].change.value - 100.0 / 3.0).abs() < 1e-9);
        let margin = curve(&back, ProbeScore::KnowledgeMargin);
        assert!(margin[1].detected && (margin[1].change.value - 0.2).abs() < 1e-6);
        let r = report(&back, "test");
        assert!(
            r.contains("**knowledge acc_norm drop**, noise: noise:0.1"),
            "{r}"
        );
        assert_eq!(
            report(&back, "test"),
            r,
            "the report is a function of the records"
        );
        // A file without the base, or with a bad name, is refused with its line.
        let e = parse("c.jsonl", text.lines().nth(1).unwrap()).unwrap_err();
        assert!(e.to_string().contains("undamaged base"), "{e}");
        let e = parse("c.jsonl", &text.replace("noise:0.1", "blur:2")).unwrap_err();
        assert!(e.to_string().contains("c.jsonl:3"), "{e}");
    }
}
