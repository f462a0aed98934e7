//! The grid's results: APE, relative drops, shadow counts, the CSV and Markdown reports and
//! a verdict per claim of the paper.

use super::*;

/// One row of the results.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultRow {
    /// The run.
    pub name: String,
    /// Its paper counterpart.
    pub paper: String,
    /// The run's summary.
    pub summary: RunSummary,
    /// APE over all steps vs the matched baseline (%; NaN for baselines).
    pub ape_all: f64,
    /// APE over the last 10 % of steps (%).
    pub ape_last: f64,
    /// Relative drop of knowledge acc_norm vs the matched baseline (%).
    pub knowledge_drop: f64,
    /// Relative drop of completion acc_norm vs the matched baseline (%).
    pub completion_drop: f64,
}

/// A verdict on one claim of the paper.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The claim.
    pub claim: String,
    /// Whether this run of the grid reproduces it.
    pub holds: bool,
    /// The numbers it rests on.
    pub evidence: String,
}

/// The grid's results.
#[derive(Clone, Debug, PartialEq)]
pub struct GridResults {
    /// Probe scores of the base model.
    pub base: ProbeScores,
    /// One row per run.
    pub rows: Vec<ResultRow>,
    /// One verdict per claim.
    pub verdicts: Vec<Verdict>,
}

fn shadow(s: &RunSummary, name: &str) -> u64 {
    s.estimators
        .iter()
        .position(|e| e == name)
        .and_then(|k| s.counts.estimators.get(k))
        .map_or(0, |e| e.calls_above_est)
}

impl GridResults {
    /// Computes APE, drops and verdicts from the runs' summaries.
    pub fn compute(runs: &[GridRun], summaries: &[RunSummary], base: ProbeScores) -> Self {
        let baseline = |high: bool| {
            summaries.iter().find(|s| {
                s.name
                    == if high {
                        "baseline-high"
                    } else {
                        "baseline-low"
                    }
            })
        };
        let rows: Vec<ResultRow> = runs
            .iter()
            .zip(summaries)
            .map(|(run, s)| {
                let b = baseline(run.high_lr).filter(|_| run.estimator.is_some());
                let (ape_all, ape_last, kd, cd) = match b {
                    Some(b) => {
                        let n = s.losses.len().min(b.losses.len());
                        let tail = (n / 10).max(1);
                        (
                            ape(&s.losses[..n], &b.losses[..n]),
                            ape(&s.losses[n - tail..n], &b.losses[n - tail..n]),
                            relative_drop(
                                b.final_probes().knowledge_acc_norm,
                                s.final_probes().knowledge_acc_norm,
                            ),
                            relative_drop(
                                b.final_probes().completion_acc_norm,
                                s.final_probes().completion_acc_norm,
                            ),
                        )
                    }
                    None => (
                        f64::NAN,
                        f64::NAN,
                        relative_drop(base.knowledge_acc_norm, s.final_probes().knowledge_acc_norm),
                        relative_drop(
                            base.completion_acc_norm,
                            s.final_probes().completion_acc_norm,
                        ),
                    ),
                };
                ResultRow {
                    name: run.name.clone(),
                    paper: run.paper.into(),
                    summary: s.clone(),
                    ape_all,
                    ape_last,
                    knowledge_drop: kd,
                    completion_drop: cd,
                }
            })
            .collect();
        let verdicts = verdicts(&rows, base);
        GridResults {
            base,
            rows,
            verdicts,
        }
    }

    /// `results.csv`.
    pub fn csv(&self) -> String {
        let mut out = csv::Writer::from_writer(Vec::new());
        let header = String::from(
            "run,lr,estimator,warmup,final_loss,ape_all_pct,ape_last10_pct,knowledge_acc,knowledge_acc_norm,completion_acc,completion_acc_norm,heldout_loss,knowledge_drop_pct,completion_drop_pct,calls_above_est_active,calls_above_most_recent,calls_above_ema,calls_above_mean_window,calls_above_max_window,calls_above_current,overflow_active,wall_s",
        );
        let _ = out.write_record(header.split(','));
        for r in &self.rows {
            let s = &r.summary;
            let active = s
                .shadow_calls()
                .iter()
                .find(|(n, _)| *n == s.estimator)
                .map(|(_, v)| *v)
                .unwrap_or(0);
            let ov = s
                .shadow_overflow()
                .iter()
                .find(|(n, _)| *n == s.estimator)
                .map(|(_, v)| *v)
                .unwrap_or(0);
            let find = |prefix: &str| {
                s.shadow_calls()
                    .iter()
                    .find(|(n, _)| n.starts_with(prefix))
                    .map(|(_, v)| v.to_string())
                    .unwrap_or_default()
            };
            let _ = out.write_record([
                r.name.clone(),
                format!("{:e}", s.lr),
                s.estimator.to_string(),
                s.warmup.to_string(),
                format!("{:.4}", s.losses.last().copied().unwrap_or(f64::NAN)),
                format!("{:.3}", r.ape_all),
                format!("{:.3}", r.ape_last),
                format!("{:.3}", s.final_probes().knowledge_acc),
                format!("{:.3}", s.final_probes().knowledge_acc_norm),
                format!("{:.3}", s.final_probes().completion_acc),
                format!("{:.3}", s.final_probes().completion_acc_norm),
                format!("{:.4}", s.final_probes().heldout_loss),
                format!("{:.2}", r.knowledge_drop),
                format!("{:.2}", r.completion_drop),
                active.to_string(),
                find("most_recent"),
                find("ema"),
                find("mean_window"),
                find("max_window"),
                find("current"),
                ov.to_string(),
                format!("{:.1}", s.wall_s),
            ]);
        }
        String::from_utf8(out.into_inner().unwrap_or_default()).unwrap_or_default()
    }

    /// `results.md`: the table, the shadow comparison, and the verdicts.
    pub fn markdown(&self) -> String {
        let mut md = String::from("# hif8lab grid results\n\n");
        let _ = writeln!(
            md,
            "Base model (after pretraining): knowledge acc_norm {:.3}, completion acc_norm {:.3}, held-out loss {:.4}.\n",
            self.base.knowledge_acc_norm, self.base.completion_acc_norm, self.base.heldout_loss
        );
        md.push_str("APE and relative drops are against the matched high-precision baseline (same learning rate); for the baselines, drops are against the base model. Probes are scored in high precision with the trained weights.\n\n");
        md.push_str("| run | paper setting | final loss | APE all % | APE last 10 % | knowledge acc_norm | drop % | completion acc_norm | drop % | held-out loss | calls above est (active) | overflow |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            let s = &r.summary;
            let active = shadow(s, &s.estimator);
            let ov = s
                .shadow_overflow()
                .iter()
                .find(|(n, _)| *n == s.estimator)
                .map(|(_, v)| *v)
                .unwrap_or(0);
            let _ = writeln!(
                md,
                "| {} | {} | {:.4} | {} | {} | {:.3} | {:.1} | {:.3} | {:.1} | {:.4} | {} | {} |",
                r.name,
                r.paper,
                s.losses.last().copied().unwrap_or(f64::NAN),
                fmt_pct(r.ape_all),
                fmt_pct(r.ape_last),
                s.final_probes().knowledge_acc_norm,
                r.knowledge_drop,
                s.final_probes().completion_acc_norm,
                r.completion_drop,
                s.final_probes().heldout_loss,
                if s.estimator == "none" {
                    "–".into()
                } else {
                    active.to_string()
                },
                ov
            );
        }
        md.push_str("\n## Shadow comparison (every estimator on the same calls of each QAT run)\n\nCalls whose amax exceeded the estimator's estimate:\n\n");
        if let Some(first) = self
            .rows
            .iter()
            .find(|r| !r.summary.shadow_calls().is_empty())
        {
            let names: Vec<String> = first
                .summary
                .shadow_calls()
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            let _ = writeln!(
                md,
                "| run | {} |",
                names
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
            let _ = writeln!(md, "|---|{}", "---|".repeat(names.len()));
            for r in self
                .rows
                .iter()
                .filter(|r| !r.summary.shadow_calls().is_empty())
            {
                let vals: Vec<String> = r
                    .summary
                    .shadow_calls()
                    .iter()
                    .map(|(_, v)| v.to_string())
                    .collect();
                let _ = writeln!(md, "| {} | {} |", r.name, vals.join(" | "));
            }
        }
        md.push_str("\n## Verdicts\n\n");
        for v in &self.verdicts {
            let _ = writeln!(
                md,
                "- **{}** — {}. {}",
                v.claim,
                if v.holds {
                    "reproduced"
                } else {
                    "not reproduced"
                },
                v.evidence
            );
        }
        md
    }
}

fn fmt_pct(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else {
        format!("{v:.3}")
    }
}

/// The sum of the per-estimator counts of estimators whose name starts with `prefix`
/// (`max_window` matches `max_window(64)`).
pub fn count_prefix(pairs: &[(String, u64)], prefix: &str) -> u64 {
    pairs
        .iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|(_, v)| *v)
        .sum()
}

fn verdicts(rows: &[ResultRow], base: ProbeScores) -> Vec<Verdict> {
    let row = |n: &str| rows.iter().find(|r| r.name == n);
    let mut out = Vec::new();
    // 1. most_recent saturates (shadow counts on the same calls, summed over QAT runs).
    let qat_rows: Vec<&ResultRow> = rows
        .iter()
        .filter(|r| !r.summary.shadow_calls().is_empty())
        .collect();
    let sum = |prefix: &str| -> u64 {
        qat_rows
            .iter()
            .map(|r| count_prefix(&r.summary.shadow_calls(), prefix))
            .sum()
    };
    let (mr, mw) = (sum("most_recent"), sum("max_window"));
    let kd = |n: &str| row(n).map(|r| r.knowledge_drop).unwrap_or(f64::NAN);
    out.push(Verdict {
        claim: "most_recent saturates (amax exceeds its estimate far more often than max_window's)".into(),
        holds: mr > 0 && mr >= 3 * mw.max(1),
        evidence: format!(
            "Summed over the QAT runs, calls above the estimate: most_recent {mr}, max_window {mw} (threshold: ≥ 3×). Knowledge drop at the low lr: most_recent {:.1} %, max_window {:.1} %.",
            kd("most_recent-low"), kd("max_window-low")
        ),
    });
    // 2. High LR forgets, with or without QAT.
    let vs_base = |n: &str| {
        row(n)
            .map(|r| {
                relative_drop(
                    base.knowledge_acc_norm,
                    r.summary.final_probes().knowledge_acc_norm,
                )
            })
            .unwrap_or(f64::NAN)
    };
    let (bh, bl, qh) = (
        vs_base("baseline-high"),
        vs_base("baseline-low"),
        vs_base("max_window-high"),
    );
    out.push(Verdict {
        claim: "a high learning rate forgets, with or without QAT".into(),
        holds: bh >= 10.0 && bh >= 2.0 * bl.max(0.0) && qh >= 10.0,
        evidence: format!(
            "Knowledge acc_norm drop vs the base model: baseline-high {bh:.1} %, baseline-low {bl:.1} %, max_window-high {qh:.1} % (threshold: high ≥ 10 % and ≥ 2× low, with and without QAT)."
        ),
    });
    // 3. Loss APE stays small.
    let max_ape = qat_rows.iter().map(|r| r.ape_all).fold(0.0f64, f64::max);
    out.push(Verdict {
        claim: "the training loss hides it: APE stays small for every QAT run".into(),
        holds: max_ape < 2.0,
        evidence: format!(
            "Largest APE over all steps among QAT runs: {max_ape:.3} % (threshold: < 2 %)."
        ),
    });
    // 4. The fix.
    let fix = row("max_window-low-warmup");
    let (fk, fc, fa) = fix
        .map(|r| (r.knowledge_drop, r.completion_drop, r.ape_all))
        .unwrap_or((f64::NAN, f64::NAN, f64::NAN));
    out.push(Verdict {
        claim: "max_window(64) + warmup + low lr is near-lossless".into(),
        holds: fk < 2.0 && fc < 2.0 && fa < 1.0,
        evidence: format!("Relative drops vs baseline-low: knowledge {fk:.2} %, completion {fc:.2} %; APE {fa:.3} % (thresholds: drops < 2 %, APE < 1 %)."),
    });
    out
}
