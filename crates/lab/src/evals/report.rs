//! `compare-evals`' report as Markdown and CSV (the JSON is the report's serialization).

use std::fmt::Write as _;

use super::compare::{EvalReport, TaskComparison, trim};
use crate::claims::{Claim, number};

/// A number with four significant digits (at least two decimals below 100) and its unit:
/// enough to tell an interval's ends apart where the claims' two-digit form would not.
fn sig(x: f64, unit: &str) -> String {
    if !x.is_finite() {
        return number(x, unit);
    }
    let digits = if x == 0.0 {
        2
    } else {
        (3 - x.abs().log10().floor() as i32).clamp(2, 6) as usize
    };
    format!("{x:.digits$}{unit}")
}

/// A percentage with two decimals, signed where asked.
fn pct(x: f64) -> String {
    format!("{:.2}", x * 100.0)
}

fn interval(i: [f64; 2]) -> String {
    format!("[{:.2}, {:.2}]", i[0], i[1])
}

fn p_text(p: f64) -> String {
    if p < 1e-4 {
        "< 0.0001".into()
    } else {
        format!("{p:.4}")
    }
}

/// One line per claim: the verdict word, the statistic in its unit with the interval it was
/// judged on, the threshold and the (Holm-adjusted) p-value.
pub fn claim_line(c: &Claim) -> String {
    // A claim with nothing measured (too little data to judge) says why, not empty fields.
    if c.measured.is_empty() {
        let why = c.evidence.as_str().unwrap_or("nothing measured");
        return format!("**{}**: {} — {why}", c.verdict.as_str(), c.claim);
    }
    let mut s = format!(
        "**{}**: {} — {} {}",
        c.verdict.as_str(),
        c.claim,
        c.measured,
        sig(c.statistic, &c.unit)
    );
    if let Some(conf) = c.confidence {
        let _ = write!(
            s,
            ", {:.1} % interval {} to {}",
            conf * 100.0,
            sig(c.interval[0], &c.unit),
            sig(c.interval[1], &c.unit)
        );
    }
    let _ = write!(s, "; threshold {}", c.threshold);
    if let Some(p) = c.p_value {
        let _ = write!(s, "; {}", c.p_text(p));
    }
    s
}

impl EvalReport {
    /// The report in Markdown.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# Evaluations compared\n");
        let _ = writeln!(
            out,
            "Relative drop = (base − other) / base × 100, per task on one 0/1 metric. Claim per task: the drop lies within ±{m} % (equivalence, two one-sided tests: judged on the 90 % interval at the claim's α). Across tasks: the mean of the tasks' drops below {m} %. All claims judged together with Holm's adjustment. Intervals in the table are 95 %; p-values in the table are McNemar's, unadjusted (descriptive).\n",
            m = trim(self.margin)
        );
        for c in &self.comparisons {
            let _ = writeln!(out, "## {} vs {} (base)\n", c.other, c.base);
            let _ = writeln!(
                out,
                "| task | metric | n | shots | base % | other % | drop % | 95 % interval | paired | McNemar p | margin shift (nats) | verdict |"
            );
            let _ = writeln!(
                out,
                "|---|---|---:|---:|---:|---:|---:|---|---|---:|---|---|"
            );
            for t in &c.tasks {
                let _ = writeln!(out, "{}", row(t));
            }
            for t in &c.tasks {
                if let Some(a) = t.paired.as_ref().and_then(|p| p.also.as_ref()) {
                    let _ = writeln!(
                        out,
                        "\n{} also on {}: {} → {} ({:+.2} % relative, exact 95 % interval {}), {} / {} discordant, McNemar p {} (descriptive).",
                        t.task,
                        a.metric,
                        pct(a.base),
                        pct(a.other),
                        a.drop,
                        interval(a.exact_interval),
                        a.only_base,
                        a.only_other,
                        p_text(a.mcnemar_p)
                    );
                }
            }
            if !c.missing.is_empty() {
                let _ = writeln!(
                    out,
                    "\nIn one run only (not compared): {}.",
                    c.missing.join(", ")
                );
            }
            let _ = writeln!(out, "\n### Claims\n");
            for t in &c.tasks {
                let _ = writeln!(out, "- {}", claim_line(&t.claim));
            }
            let _ = writeln!(out, "- {}", claim_line(&c.average));
            let unpaired: Vec<&TaskComparison> =
                c.tasks.iter().filter(|t| t.unpaired.is_some()).collect();
            if !unpaired.is_empty() {
                let _ = writeln!(
                    out,
                    "\nWithout per-document logs the intervals are unpaired (Newcombe). The same documents scored twice are positively correlated, so a paired test would be tighter; at most (all discordant documents one way) it would give:\n"
                );
                for t in unpaired {
                    if let Some(u) = &t.unpaired {
                        let w = u.interval[1] - u.interval[0];
                        let b = u.best_paired_interval[1] - u.best_paired_interval[0];
                        let _ = writeln!(
                            out,
                            "- {}: unpaired {} ({} of {} vs {} of {}), best paired {} — {:.0} % of the width",
                            t.task,
                            interval(u.interval),
                            u.k_base,
                            u.n_base,
                            u.k_other,
                            u.n_other,
                            interval(u.best_paired_interval),
                            100.0 * b / w.max(1e-300)
                        );
                    }
                }
            }
            let _ = writeln!(out);
        }
        out
    }

    /// One CSV row per (comparison, task).
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "base,other,task,metric,n,n_shot,base_score,other_score,relative_drop_pct,interval_lo,interval_hi,paired,only_base,only_other,mcnemar_p,margin_shift,verdict\n",
        );
        for c in &self.comparisons {
            for t in &c.tasks {
                let [lo, hi] = t.interval95();
                let (ob, oo, p, ms) = match &t.paired {
                    Some(p) => (
                        p.only_base.to_string(),
                        p.only_other.to_string(),
                        format!("{}", p.mcnemar_p),
                        p.margin_shift.map_or(String::new(), |m| format!("{m}")),
                    ),
                    None => Default::default(),
                };
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    csv_field(&c.base),
                    csv_field(&c.other),
                    csv_field(&t.task),
                    t.metric,
                    t.n,
                    t.n_shot.map_or(String::new(), |s| s.to_string()),
                    t.base,
                    t.other,
                    t.drop,
                    lo,
                    hi,
                    t.paired.is_some(),
                    ob,
                    oo,
                    p,
                    ms,
                    t.claim.verdict.as_str()
                );
            }
        }
        out
    }
}

fn row(t: &TaskComparison) -> String {
    let (paired, p, shift) = match &t.paired {
        Some(p) => (
            format!(
                "{} / {} discordant{}",
                p.only_base,
                p.only_other,
                p.clusters.map_or(String::new(), |c| format!(
                    ", {c} clusters ({})",
                    p.clusters_by.as_deref().unwrap_or("?")
                ))
            ),
            p_text(p.mcnemar_p),
            match (p.margin_shift, p.margin_shift_interval) {
                (Some(m), Some(i)) => format!("{m:+.3} [{:+.3}, {:+.3}]", i[0], i[1]),
                _ => "—".into(),
            },
        ),
        None => ("unpaired".into(), "—".into(), "—".into()),
    };
    format!(
        "| {} | {} | {} | {} | {} | {} | {:+.2} | {} | {} | {} | {} | {} |",
        t.task,
        t.metric,
        t.n_original
            .map_or(t.n.to_string(), |o| format!("{} of {o} (--limit)", t.n)),
        t.n_shot.map_or("—".into(), |s| s.to_string()),
        pct(t.base),
        pct(t.other),
        t.drop,
        interval(t.interval95()),
        paired,
        p,
        shift,
        t.claim.verdict.as_str()
    )
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
