//! The grid's results: APE, relative drops, shadow counts, the CSV and Markdown reports and
//! a three-valued verdict per claim of the paper, each with its test, statistic and interval.
//!
//! Probe scores and drops carry 95 % intervals from a cluster bootstrap over probe items
//! (knowledge items by entity) and, with `--seeds N`, over the seeds ([`crate::stats`]); a
//! comparison of two runs on the same items is a paired bootstrap with its p-value.

use super::*;
use crate::stats::{Arm, Estimate, Verdict3, bootstrap, mean_sd};
use crate::trainer::PROBE_SCORES;

/// One row of the results: a run of the grid, over its seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultRow {
    /// The run.
    pub name: String,
    /// Its paper counterpart.
    pub paper: String,
    /// The summary of its first seed.
    pub summary: RunSummary,
    /// The summaries of every seed (the first is `summary`).
    pub seeds: Vec<RunSummary>,
    /// APE over all steps vs the matched baseline (%, mean over seeds; NaN for baselines).
    pub ape_all: f64,
    /// Standard deviation of `ape_all` across seeds.
    pub ape_all_sd: f64,
    /// APE over the last 10 % of steps (%, mean over seeds).
    pub ape_last: f64,
    /// Standard deviation of `ape_last` across seeds.
    pub ape_last_sd: f64,
    /// Relative drop of knowledge acc_norm vs the matched baseline (QAT runs) or the base
    /// model (baselines), with its interval and paired p-value.
    pub knowledge: Estimate,
    /// The same for completion acc_norm.
    pub completion: Estimate,
    /// Every probe score ([`PROBE_SCORES`]): mean over seeds with its 95 % interval.
    pub scores: Vec<(String, Estimate)>,
}

impl ResultRow {
    /// Relative drop of knowledge acc_norm (%).
    pub fn knowledge_drop(&self) -> f64 {
        self.knowledge.value
    }

    /// A probe score by name ([`PROBE_SCORES`]).
    pub fn score(&self, name: &str) -> Option<&Estimate> {
        self.scores.iter().find(|(n, _)| n == name).map(|(_, e)| e)
    }
}

/// A verdict on one claim of the paper.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// The claim.
    pub claim: String,
    /// Whether the data show it holds (`verdict == holds`).
    pub holds: bool,
    /// holds / fails / inconclusive.
    pub verdict: Verdict3,
    /// The test behind the verdict.
    pub test: String,
    /// The statistic the verdict rests on.
    pub statistic: f64,
    /// Its 95 % interval.
    pub interval: [f64; 2],
    /// Two-sided p-value, where the claim compares runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// The threshold the interval is held against.
    pub threshold: String,
    /// The numbers it rests on, in words.
    pub evidence: String,
}

impl Verdict {
    fn new(claim: &str, verdict: Verdict3, test: &str, e: Estimate, p: bool) -> Self {
        Verdict {
            claim: claim.into(),
            holds: verdict == Verdict3::Holds,
            verdict,
            test: test.into(),
            statistic: e.value,
            interval: e.interval,
            p_value: p.then_some(e.p_value),
            threshold: String::new(),
            evidence: String::new(),
        }
    }

    fn with(mut self, threshold: &str, evidence: String) -> Self {
        self.threshold = threshold.into();
        self.evidence = evidence;
        self
    }
}

/// The grid's results.
#[derive(Clone, Debug, PartialEq)]
pub struct GridResults {
    /// Probe scores of the base model.
    pub base: ProbeScores,
    /// Seeds per run.
    pub seeds: usize,
    /// One row per run.
    pub rows: Vec<ResultRow>,
    /// One verdict per claim.
    pub verdicts: Vec<Verdict>,
    /// The knowledge probe's power on the grid's paired comparisons.
    pub power: Option<Power>,
}

/// How small a difference the knowledge probe can detect between a QAT run and its matched
/// baseline (same seed: same data order), from the discordance the runs showed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Power {
    /// Knowledge items.
    pub items: usize,
    /// Mean fraction of items a QAT run and its matched baseline disagree on.
    pub discordant: f64,
    /// Smallest difference (points of acc_norm, as a fraction) a paired test detects at
    /// α = 0.05 with 80 % power, at that discordance (independent items).
    pub detectable: f64,
    /// Items needed to detect a 2-point difference at that discordance.
    pub needed_for_2_points: usize,
    /// The same between two seeds of one setting (data order alone).
    pub seed_discordant: Option<f64>,
}

fn power(rows: &[ResultRow]) -> Option<Power> {
    let marks = |s: &RunSummary| -> Option<Vec<f64>> {
        s.probes.as_ref()?.item_values("knowledge_acc_norm")
    };
    let disc = |a: &[f64], b: &[f64]| {
        let n = a.len().min(b.len());
        (n > 0).then(|| a.iter().zip(b).filter(|(x, y)| x != y).count() as f64 / n as f64)
    };
    let mut fractions = Vec::new();
    let mut items = 0;
    for r in rows.iter().filter(|r| r.summary.estimator != "none") {
        let Some(b) = rows
            .iter()
            .find(|b| b.summary.estimator == "none" && b.summary.lr == r.summary.lr)
        else {
            continue;
        };
        for (q, base) in r.seeds.iter().zip(&b.seeds) {
            if let (Some(x), Some(y)) = (marks(q), marks(base)) {
                items = x.len();
                fractions.extend(disc(&x, &y));
            }
        }
    }
    let seed_discordant = rows
        .iter()
        .filter(|r| r.seeds.len() > 1)
        .filter_map(|r| disc(&marks(&r.seeds[0])?, &marks(&r.seeds[1])?))
        .reduce(f64::max);
    if fractions.is_empty() || items == 0 {
        return None;
    }
    let d = mean_sd(&fractions).0;
    Some(Power {
        items,
        discordant: d,
        detectable: crate::stats::detectable_difference(items, d),
        needed_for_2_points: crate::stats::items_needed(0.02, d),
        seed_discordant,
    })
}

#[cfg(not(target_arch = "wasm32"))]
fn shadow(s: &RunSummary, name: &str) -> u64 {
    s.estimators
        .iter()
        .position(|e| e == name)
        .and_then(|k| s.counts.estimators.get(k))
        .map_or(0, |e| e.calls_above_est)
}

/// The test name of probe comparisons.
pub const PAIRED_TEST: &str = "paired cluster bootstrap over probe items (knowledge items resampled by entity; seeds resampled too), 2000 resamples";

/// One arm per run: the final probe marks of a score, per seed (`None` where a record
/// predates marks).
fn arm(runs: &[RunSummary], score: &str) -> Option<Arm> {
    let seeds: Option<Vec<Vec<f64>>> = runs
        .iter()
        .map(|s| s.probes.as_ref().and_then(|p| p.item_values(score)))
        .collect();
    seeds.filter(|s| !s.is_empty()).map(|seeds| Arm { seeds })
}

/// A statistic of the final probe scores of several runs (each over its seeds), bootstrapped
/// jointly; falls back to the point value with no interval when marks are missing.
pub fn compare(runs: &[&[RunSummary]], score: &str, stat: &dyn Fn(&[f64]) -> f64) -> Estimate {
    let arms: Option<Vec<Arm>> = runs.iter().map(|r| arm(r, score)).collect();
    let first = runs
        .first()
        .and_then(|r| r.first())
        .and_then(|s| s.probes.as_ref());
    match (arms, first) {
        (Some(arms), Some(p)) => bootstrap(&p.groups(score), &arms, stat),
        _ => {
            let means: Vec<f64> = runs
                .iter()
                .map(|r| {
                    mean_sd(
                        &r.iter()
                            .map(|s| s.final_probes().score(score))
                            .collect::<Vec<_>>(),
                    )
                    .0
                })
                .collect();
            Estimate {
                value: stat(&means),
                interval: [f64::NAN; 2],
                p_value: f64::NAN,
            }
        }
    }
}

/// Relative drop (%) of the second arm's mean against the first's.
pub fn drop_stat(m: &[f64]) -> f64 {
    relative_drop(m[0], m[1])
}

/// How much more the high-rate arm forgot than twice the low-rate arm, both as relative
/// drops from the base arm: arms (base, high, low); ≥ 0 when the high rate forgets ≥ 2×.
pub fn forgetting_excess(m: &[f64]) -> f64 {
    relative_drop(m[0], m[1]) - 2.0 * relative_drop(m[0], m[2]).max(0.0)
}

/// The base model as a one-seed "run" (an arm of [`compare`]).
pub fn base_run(base: &ProbeScores) -> RunSummary {
    RunSummary {
        probes: Some(base.clone()),
        ..RunSummary::default()
    }
}

impl GridResults {
    /// Computes APE, drops, intervals and verdicts from the runs' summaries: `summaries[i]`
    /// holds run `i`'s seeds (at least one).
    pub fn compute(runs: &[GridRun], summaries: &[Vec<RunSummary>], base: ProbeScores) -> Self {
        let base_seeds = vec![base_run(&base)];
        let by_name = |n: &str| {
            runs.iter()
                .position(|r| r.name == n)
                .and_then(|i| summaries.get(i))
        };
        let seeds = summaries.iter().map(Vec::len).max().unwrap_or(1);
        let rows: Vec<ResultRow> = runs
            .iter()
            .zip(summaries)
            .filter(|(_, s)| !s.is_empty())
            .map(|(run, s)| {
                let matched = by_name(if run.high_lr {
                    "baseline-high"
                } else {
                    "baseline-low"
                })
                .filter(|_| run.estimator.is_some());
                let apes: Vec<(f64, f64)> = match matched {
                    Some(b) => s
                        .iter()
                        .enumerate()
                        .map(|(k, q)| {
                            let b = &b[k.min(b.len() - 1)];
                            let n = q.losses.len().min(b.losses.len());
                            let tail = (n / 10).max(1).min(n);
                            (
                                ape(&q.losses[..n], &b.losses[..n]),
                                ape(&q.losses[n - tail..n], &b.losses[n - tail..n]),
                            )
                        })
                        .collect(),
                    None => vec![(f64::NAN, f64::NAN)],
                };
                let (ape_all, ape_all_sd) = mean_sd(&apes.iter().map(|a| a.0).collect::<Vec<_>>());
                let (ape_last, ape_last_sd) =
                    mean_sd(&apes.iter().map(|a| a.1).collect::<Vec<_>>());
                let reference: &[RunSummary] = matched.map_or(&base_seeds, |b| b.as_slice());
                let drop = |score: &str| compare(&[reference, s], score, &drop_stat);
                ResultRow {
                    name: run.name.clone(),
                    paper: run.paper.into(),
                    summary: s[0].clone(),
                    seeds: s.clone(),
                    ape_all,
                    ape_all_sd,
                    ape_last,
                    ape_last_sd,
                    knowledge: drop("knowledge_acc_norm"),
                    completion: drop("completion_acc_norm"),
                    scores: PROBE_SCORES
                        .iter()
                        .map(|n| (n.to_string(), compare(&[s], n, &|m| m[0])))
                        .collect(),
                }
            })
            .collect();
        let verdicts = verdicts(&rows, &base_seeds);
        GridResults {
            base,
            seeds,
            power: power(&rows),
            rows,
            verdicts,
        }
    }

    /// `results.csv`: one line per run (means over seeds), each probe score with its
    /// `_lo`/`_hi` 95 % interval. (Native only: the browser writes no reports.)
    #[cfg(not(target_arch = "wasm32"))]
    pub fn csv(&self) -> String {
        let mut out = csv::Writer::from_writer(Vec::new());
        let mut header: Vec<String> = "run,lr,estimator,warmup,seeds,final_loss,ape_all_pct,ape_all_sd,ape_last10_pct,ape_last10_sd"
            .split(',')
            .map(String::from)
            .collect();
        for s in PROBE_SCORES {
            header.extend([s.to_string(), format!("{s}_lo"), format!("{s}_hi")]);
        }
        header.extend(
            "knowledge_drop_pct,knowledge_drop_lo,knowledge_drop_hi,knowledge_drop_p,completion_drop_pct,completion_drop_lo,completion_drop_hi,completion_drop_p,calls_above_est_active,calls_above_most_recent,calls_above_ema,calls_above_mean_window,calls_above_max_window,calls_above_current,overflow_active,sqnr_A_median_db,sqnr_A_worst_db,sqnr_W_median_db,sqnr_W_worst_db,sqnr_G_median_db,sqnr_G_worst_db,wall_s"
                .split(',')
                .map(String::from),
        );
        let _ = out.write_record(&header);
        for r in &self.rows {
            let s = &r.summary;
            let total = |pairs: &dyn Fn(&RunSummary) -> Vec<(String, u64)>, prefix: &str| {
                r.seeds
                    .iter()
                    .map(|x| count_prefix(&pairs(x), prefix))
                    .sum::<u64>()
            };
            let calls = |p: &str| total(&|x| x.shadow_calls(), p).to_string();
            let active = if s.estimator == "none" {
                0
            } else {
                total(&|x| x.shadow_calls(), &s.estimator)
            };
            let ov = if s.estimator == "none" {
                0
            } else {
                total(&|x| x.shadow_overflow(), &s.estimator)
            };
            let mean_loss = mean_sd(
                &r.seeds
                    .iter()
                    .map(|x| x.losses.last().copied().unwrap_or(f64::NAN))
                    .collect::<Vec<_>>(),
            )
            .0;
            let mut rec = vec![
                r.name.clone(),
                format!("{:e}", s.lr),
                s.estimator.to_string(),
                s.warmup.to_string(),
                r.seeds.len().to_string(),
                format!("{mean_loss:.4}"),
                format!("{:.3}", r.ape_all),
                format!("{:.3}", r.ape_all_sd),
                format!("{:.3}", r.ape_last),
                format!("{:.3}", r.ape_last_sd),
            ];
            for (name, e) in &r.scores {
                let d = if name == "heldout_loss" { 4 } else { 3 };
                rec.extend([
                    format!("{:.d$}", e.value),
                    format!("{:.d$}", e.interval[0]),
                    format!("{:.d$}", e.interval[1]),
                ]);
            }
            for e in [&r.knowledge, &r.completion] {
                rec.extend([
                    format!("{:.2}", e.value),
                    format!("{:.2}", e.interval[0]),
                    format!("{:.2}", e.interval[1]),
                    format!("{:.4}", e.p_value),
                ]);
            }
            rec.extend([
                active.to_string(),
                calls("most_recent"),
                calls("ema"),
                calls("mean_window"),
                calls("max_window"),
                calls("current"),
                ov.to_string(),
            ]);
            for role in SQNR_ROLES {
                match sqnr_of(r, role) {
                    Some((m, w)) => rec.extend([format!("{m:.2}"), format!("{w:.2}")]),
                    None => rec.extend([String::new(), String::new()]),
                }
            }
            rec.push(format!(
                "{:.1}",
                r.seeds.iter().map(|x| x.wall_s).sum::<f64>()
            ));
            let _ = out.write_record(&rec);
        }
        String::from_utf8(out.into_inner().unwrap_or_default()).unwrap_or_default()
    }

    /// `results.md`: the table, the shadow comparison, and the verdict table. (Native only.)
    #[cfg(not(target_arch = "wasm32"))]
    pub fn markdown(&self) -> String {
        let mut md = String::from("# hif8lab grid results\n\n");
        let b = &self.base;
        let ci = |name: &str, d: usize| {
            let [lo, hi] = b.interval(name);
            format!("{:.d$} [{lo:.d$}, {hi:.d$}]", b.score(name))
        };
        let _ = writeln!(
            md,
            "Base model (after pretraining): knowledge acc_norm {}, completion acc_norm {}, held-out loss {} ({} knowledge items over {} entities, {} completion items; 95 % intervals in brackets).\n",
            ci("knowledge_acc_norm", 3),
            ci("completion_acc_norm", 3),
            ci("heldout_loss", 4),
            b.knowledge_items,
            b.knowledge_items / crate::corpus::KNOWLEDGE_PER_ENTITY,
            b.completion_items,
        );
        let _ = writeln!(
            md,
            "{} seed(s) per run (seeds vary the data order of the continued training; the base model is shared). Scores are means over seeds with 95 % intervals from a cluster bootstrap (knowledge items resampled by entity, seeds resampled too). Drops are relative to the matched high-precision baseline (same learning rate, same seeds) or, for the baselines, to the base model, with a paired bootstrap p-value. APE is mean ± standard deviation across seeds. Probes are scored in high precision with the trained weights.\n",
            self.seeds
        );
        if let Some(p) = &self.power {
            let _ = writeln!(
                md,
                "Power: a QAT run and its matched baseline disagreed on {:.1} % of the {} knowledge items on average, so a paired test detects a difference of {:.1} points of acc_norm (α = 0.05, 80 % power; items treated as independent, the intervals below resample entities) and a 2-point difference needs {} items.{}\n",
                100.0 * p.discordant,
                p.items,
                100.0 * p.detectable,
                p.needed_for_2_points,
                p.seed_discordant.map_or(String::new(), |d| format!(
                    " Two seeds of one setting (data order alone) disagree on up to {:.1} % of items: comparisons across data orders need {} items for 2 points.",
                    100.0 * d,
                    crate::stats::items_needed(0.02, d)
                ))
            );
        }
        md.push_str("| run | paper setting | final loss | APE all % | APE last 10 % | knowledge acc_norm [95 %] | drop % [95 %] (p) | completion acc_norm [95 %] | drop % [95 %] (p) | held-out loss [95 %] | calls above est (active) | overflow |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        let fmt_est = |e: Option<&Estimate>, d: usize| match e {
            Some(e) => format!(
                "{:.d$} [{:.d$}, {:.d$}]",
                e.value, e.interval[0], e.interval[1]
            ),
            None => "–".into(),
        };
        let fmt_drop = |e: &Estimate| {
            format!(
                "{:.1} [{:.1}, {:.1}] ({})",
                e.value,
                e.interval[0],
                e.interval[1],
                fmt_p(e.p_value)
            )
        };
        for r in &self.rows {
            let s = &r.summary;
            let sum = |f: &dyn Fn(&RunSummary) -> u64| r.seeds.iter().map(f).sum::<u64>();
            let active = sum(&|x| shadow(x, &x.estimator));
            let ov = sum(&|x| {
                x.shadow_overflow()
                    .iter()
                    .find(|(n, _)| *n == x.estimator)
                    .map(|(_, v)| *v)
                    .unwrap_or(0)
            });
            let loss = mean_sd(
                &r.seeds
                    .iter()
                    .map(|x| x.losses.last().copied().unwrap_or(f64::NAN))
                    .collect::<Vec<_>>(),
            )
            .0;
            let _ = writeln!(
                md,
                "| {} | {} | {:.4} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.name,
                r.paper,
                loss,
                fmt_pm(r.ape_all, r.ape_all_sd),
                fmt_pm(r.ape_last, r.ape_last_sd),
                fmt_est(r.score("knowledge_acc_norm"), 3),
                fmt_drop(&r.knowledge),
                fmt_est(r.score("completion_acc_norm"), 3),
                fmt_drop(&r.completion),
                fmt_est(r.score("heldout_loss"), 4),
                if s.estimator == "none" {
                    "–".into()
                } else {
                    active.to_string()
                },
                ov
            );
        }
        let _ = writeln!(
            md,
            "\n## Shadow comparison (every estimator on the same calls of each QAT run)\n\nCalls whose amax exceeded the estimator's estimate, summed over {} seed(s):\n",
            self.seeds
        );
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
            let _ = writeln!(md, "| run | {} |", names.join(" | "));
            let _ = writeln!(md, "|---|{}", "---|".repeat(names.len()));
            for r in self
                .rows
                .iter()
                .filter(|r| !r.summary.shadow_calls().is_empty())
            {
                let vals: Vec<String> = names
                    .iter()
                    .map(|n| {
                        r.seeds
                            .iter()
                            .map(|x| count_prefix(&x.shadow_calls(), n))
                            .sum::<u64>()
                            .to_string()
                    })
                    .collect();
                let _ = writeln!(md, "| {} | {} |", r.name, vals.join(" | "));
            }
        }
        md.push_str("\n## Quantization error (SQNR, dB)\n\nSQNR of each quantizer call at the scale it used, 10·log10(Σx² / Σ(x − qdq(x))²), per operand role: median over the run's calls (median of the seeds' medians) and the worst call (over every seed). HiF8 rounds values above the estimate to fewer mantissa bits instead of clipping them, so the worst calls show where saturation costs precision.\n\n| run | A median | A worst | W median | W worst | G median | G worst |\n|---|---|---|---|---|---|---|\n");
        for r in self.rows.iter().filter(|r| !r.summary.sqnr.is_empty()) {
            let cells: Vec<String> = SQNR_ROLES
                .iter()
                .flat_map(|role| match sqnr_of(r, *role) {
                    Some((m, w)) => [format!("{m:.2}"), format!("{w:.2}")],
                    None => ["–".into(), "–".into()],
                })
                .collect();
            let _ = writeln!(md, "| {} | {} |", r.name, cells.join(" | "));
        }
        md.push_str("\n## Verdicts\n\nA claim is **reproduced** when the 95 % interval of its statistic lies on the claim's side of the threshold, **not reproduced** when it lies wholly on the other side, and **inconclusive** when the interval straddles the threshold.\n\n| claim | verdict | statistic | 95 % interval | p | threshold | test |\n|---|---|---|---|---|---|---|\n");
        for v in &self.verdicts {
            let _ = writeln!(
                md,
                "| {} | **{}** | {:.3} | [{:.3}, {:.3}] | {} | {} | {} |",
                v.claim,
                v.verdict.report_word(),
                v.statistic,
                v.interval[0],
                v.interval[1],
                v.p_value.map_or("–".into(), fmt_p),
                v.threshold,
                v.test
            );
        }
        md.push('\n');
        for v in &self.verdicts {
            let _ = writeln!(
                md,
                "- **{}** — {}. {}",
                v.claim,
                v.verdict.report_word(),
                v.evidence
            );
        }
        md
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn fmt_pm(v: f64, sd: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else {
        format!("{v:.3} ± {sd:.3}")
    }
}

fn fmt_p(p: f64) -> String {
    if p.is_nan() {
        "–".into()
    } else if p < 0.001 {
        "p < 0.001".into()
    } else {
        format!("p = {p:.3}")
    }
}

#[cfg(not(target_arch = "wasm32"))]
/// A run's SQNR for one role over its seeds: (median of the seeds' medians, worst of all).
fn sqnr_of(r: &ResultRow, role: hif8lab_scaling::Role) -> Option<(f32, f32)> {
    let per: Vec<_> = r.seeds.iter().filter_map(|s| s.sqnr.get(&role)).collect();
    if per.is_empty() {
        return None;
    }
    let mut med: Vec<f32> = per.iter().map(|x| x.median_db).collect();
    med.sort_by(f32::total_cmp);
    let worst = per.iter().map(|x| x.worst_db).fold(f32::INFINITY, f32::min);
    Some((med[med.len() / 2], worst))
}

#[cfg(not(target_arch = "wasm32"))]
const SQNR_ROLES: [hif8lab_scaling::Role; 3] = [
    hif8lab_scaling::Role::A,
    hif8lab_scaling::Role::W,
    hif8lab_scaling::Role::G,
];

/// The sum of the per-estimator counts of estimators whose name starts with `prefix`
/// (`max_window` matches `max_window(64)`).
pub fn count_prefix(pairs: &[(String, u64)], prefix: &str) -> u64 {
    pairs
        .iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|(_, v)| *v)
        .sum()
}

/// Verdict from a per-seed check of exact counts: holds when every seed holds, fails when
/// none does; the interval is the range of the statistic across seeds.
fn per_seed(values: &[(f64, bool)]) -> (Verdict3, Estimate) {
    let stats: Vec<f64> = values.iter().map(|v| v.0).collect();
    let lo = stats.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = stats.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let verdict = if values.is_empty() {
        Verdict3::Inconclusive
    } else if values.iter().all(|v| v.1) {
        Verdict3::Holds
    } else if values.iter().all(|v| !v.1) {
        Verdict3::Fails
    } else {
        Verdict3::Inconclusive
    };
    (
        verdict,
        Estimate {
            value: mean_sd(&stats).0,
            interval: [lo, hi],
            p_value: f64::NAN,
        },
    )
}

fn verdicts(rows: &[ResultRow], base: &[RunSummary]) -> Vec<Verdict> {
    let row = |n: &str| rows.iter().find(|r| r.name == n);
    let seeds_of = |n: &str| row(n).map_or(&[][..], |r| r.seeds.as_slice());
    let seeds = rows.iter().map(|r| r.seeds.len()).max().unwrap_or(1);
    let mut out = Vec::new();
    // 1. most_recent saturates: exact shadow counts on the same calls, per seed.
    let qat_rows: Vec<&ResultRow> = rows
        .iter()
        .filter(|r| !r.summary.shadow_calls().is_empty())
        .collect();
    let sum_at = |k: usize, prefix: &str| -> u64 {
        qat_rows
            .iter()
            .filter_map(|r| r.seeds.get(k))
            .map(|s| count_prefix(&s.shadow_calls(), prefix))
            .sum()
    };
    // No QAT run, no data: an empty list judges inconclusive.
    let judged = if qat_rows.is_empty() { 0 } else { seeds };
    let per: Vec<(f64, bool)> = (0..judged)
        .map(|k| {
            let (mr, mw) = (sum_at(k, "most_recent"), sum_at(k, "max_window"));
            (mr as f64 / mw.max(1) as f64, mr > 0 && mr >= 3 * mw.max(1))
        })
        .collect();
    let (v, e) = per_seed(&per);
    let (mr, mw): (u64, u64) = (0..seeds).fold((0, 0), |(a, b), k| {
        (a + sum_at(k, "most_recent"), b + sum_at(k, "max_window"))
    });
    out.push(
        Verdict::new(
            "most_recent saturates (amax exceeds its estimate far more often than max_window's)",
            v,
            "exact shadow counts on the same calls, at every seed (interval: range across seeds)",
            e,
            false,
        )
        .with(
            "ratio ≥ 3 at every seed",
            format!("Summed over the QAT runs and {seeds} seed(s), calls above the estimate: most_recent {mr}, max_window {mw}."),
        ),
    );
    // 2. Saturation damage where it would show: most_recent vs max_window at the low LR,
    //    paired on the same probe items.
    let k = "knowledge_acc_norm";
    let (mr_low, mw_low, b_low) = (
        seeds_of("most_recent-low"),
        seeds_of("max_window-low"),
        seeds_of("baseline-low"),
    );
    let dmg = compare(&[b_low, mr_low], k, &drop_stat);
    let vs_mw = compare(&[mw_low, mr_low], k, &|m| (m[0] - m[1]) * 100.0);
    let held = compare(&[b_low, mr_low], "heldout_loss", &|m| m[1] - m[0]);
    let held_mw = compare(&[b_low, mw_low], "heldout_loss", &|m| m[1] - m[0]);
    let verdict = if dmg.interval[0] > 0.0 {
        Verdict3::Holds
    } else if dmg.interval[1] < 2.0 {
        Verdict3::Fails
    } else {
        Verdict3::Inconclusive
    };
    out.push(
        Verdict::new(
            "saturation costs knowledge: most_recent at the low lr drops knowledge vs its baseline",
            verdict,
            PAIRED_TEST,
            dmg,
            true,
        )
        .with(
            "holds: interval > 0; fails: interval < 2 % (no drop of 2 % or more)",
            format!(
                "Relative knowledge acc_norm drop of most_recent-low vs baseline-low {:.2} % [{:.2}, {:.2}] ({}); most_recent-low vs max_window-low {:.2} points [{:.2}, {:.2}] ({}); held-out loss of most_recent-low minus baseline-low {:+.4} [{:+.4}, {:+.4}] ({}, paired over held-out windows; max_window-low minus baseline-low {:+.4} [{:+.4}, {:+.4}], {}).",
                dmg.value, dmg.interval[0], dmg.interval[1], fmt_p(dmg.p_value),
                vs_mw.value, vs_mw.interval[0], vs_mw.interval[1], fmt_p(vs_mw.p_value),
                held.value, held.interval[0], held.interval[1], fmt_p(held.p_value),
                held_mw.value, held_mw.interval[0], held_mw.interval[1], fmt_p(held_mw.p_value)
            ),
        ),
    );
    // 3. High LR forgets, with or without QAT: drop_high ≥ 10 % and ≥ 2× drop_low.
    let forget = |hi: &str, lo: &str| {
        let (h, l) = (seeds_of(hi), seeds_of(lo));
        let high = compare(&[base, h], k, &drop_stat);
        let excess = compare(&[base, h, l], k, &forgetting_excess);
        (high, excess)
    };
    let (bh, bx) = forget("baseline-high", "baseline-low");
    let (qh, qx) = forget("max_window-high", "max_window-low");
    let v = Verdict3::all(&[
        Verdict3::judge(bh.interval, 10.0, true),
        Verdict3::judge(bx.interval, 0.0, true),
        Verdict3::judge(qh.interval, 10.0, true),
        Verdict3::judge(qx.interval, 0.0, true),
    ]);
    out.push(
        Verdict::new(
            "a high learning rate forgets, with or without QAT",
            v,
            PAIRED_TEST,
            bx,
            true,
        )
        .with(
            "drop_high ≥ 10 % and drop_high − 2·drop_low ≥ 0, with and without QAT (all four intervals)",
            format!(
                "Knowledge acc_norm drop vs the base model: baseline-high {:.1} % [{:.1}, {:.1}], baseline-high − 2·baseline-low {:.1} [{:.1}, {:.1}]; max_window-high {:.1} % [{:.1}, {:.1}], max_window-high − 2·max_window-low {:.1} [{:.1}, {:.1}]. The statistic shown is the first excess.",
                bh.value, bh.interval[0], bh.interval[1], bx.value, bx.interval[0], bx.interval[1],
                qh.value, qh.interval[0], qh.interval[1], qx.value, qx.interval[0], qx.interval[1]
            ),
        ),
    );
    // 4. Loss APE stays small, at every seed.
    let per: Vec<(f64, bool)> = (0..judged)
        .map(|k| {
            let m = qat_rows
                .iter()
                .filter_map(|r| {
                    let b = rows
                        .iter()
                        .find(|b| b.summary.estimator == "none" && b.summary.lr == r.summary.lr)?;
                    let (q, b) = (r.seeds.get(k)?, b.seeds.get(k)?);
                    let n = q.losses.len().min(b.losses.len());
                    Some(ape(&q.losses[..n], &b.losses[..n]))
                })
                .fold(0.0f64, f64::max);
            (m, m < 2.0)
        })
        .collect();
    let (v, e) = per_seed(&per);
    out.push(
        Verdict::new(
            "the training loss hides it: APE stays small for every QAT run",
            v,
            "largest APE over the QAT runs, at every seed (interval: range across seeds)",
            e,
            false,
        )
        .with(
            "< 2 % at every seed",
            format!(
                "Largest APE over all steps among QAT runs: {:.3} % (mean over seeds).",
                e.value
            ),
        ),
    );
    // 5. The fix: drops vs baseline-low within 2 %, APE < 1 %.
    let fix = seeds_of("max_window-low-warmup");
    let fk = compare(&[b_low, fix], k, &drop_stat);
    let fc = compare(&[b_low, fix], "completion_acc_norm", &drop_stat);
    let fa = row("max_window-low-warmup").map_or(f64::NAN, |r| r.ape_all);
    let v = Verdict3::all(&[
        Verdict3::judge(fk.interval, 2.0, false),
        Verdict3::judge(fc.interval, 2.0, false),
        if fa.is_nan() {
            Verdict3::Inconclusive // the run is missing
        } else if fa < 1.0 {
            Verdict3::Holds
        } else {
            Verdict3::Fails
        },
    ]);
    out.push(
        Verdict::new(
            "max_window(64) + warmup + low lr is near-lossless",
            v,
            PAIRED_TEST,
            fk,
            true,
        )
        .with(
            "knowledge and completion drop intervals < 2 %, APE < 1 %",
            format!(
                "Relative drops vs baseline-low: knowledge {:.2} % [{:.2}, {:.2}] ({}), completion {:.2} % [{:.2}, {:.2}] ({}); APE {fa:.3} %.",
                fk.value, fk.interval[0], fk.interval[1], fmt_p(fk.p_value),
                fc.value, fc.interval[0], fc.interval[1], fmt_p(fc.p_value)
            ),
        ),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::pack_marks;
    use crate::trainer::ProbeMarks;

    /// A run whose final probes get `right(i)` on each of 600 knowledge items (100 entities)
    /// and every completion item, with a flat loss curve.
    fn run(name: &str, lr: f32, estimator: &str, right: &dyn Fn(usize) -> bool) -> RunSummary {
        let k: Vec<bool> = (0..600).map(right).collect();
        let c = vec![true; 40];
        let frac = |m: &[bool]| m.iter().filter(|b| **b).count() as f64 / m.len() as f64;
        RunSummary {
            name: name.into(),
            lr,
            estimator: estimator.into(),
            losses: vec![2.0; 50],
            probes: Some(ProbeScores {
                step: 50,
                knowledge_acc: frac(&k),
                knowledge_acc_norm: frac(&k),
                completion_acc: 1.0,
                completion_acc_norm: 1.0,
                heldout_loss: 1.0,
                knowledge_items: 600,
                completion_items: 40,
                intervals: None,
                marks: Some(ProbeMarks {
                    knowledge_acc: pack_marks(&k),
                    knowledge_acc_norm: pack_marks(&k),
                    completion_acc: pack_marks(&c),
                    completion_acc_norm: pack_marks(&c),
                    heldout: vec![1.0; 8],
                }),
            }),
            ..RunSummary::default()
        }
    }

    /// The grid's runs with `high(i)` for the high-LR runs and `low(i)` for the low ones.
    fn grid(high: &dyn Fn(usize) -> bool, low: &dyn Fn(usize) -> bool) -> GridResults {
        let runs = grid_runs();
        let summaries: Vec<Vec<RunSummary>> = runs
            .iter()
            .map(|r| {
                let (lr, f) = if r.high_lr { (1e-3, high) } else { (1e-4, low) };
                let est = r.estimator.map_or("none".to_string(), |e| e.to_string());
                vec![run(&r.name, lr, &est, f)]
            })
            .collect();
        let base = run("base", 0.0, "none", &|_| true).probes.unwrap();
        GridResults::compute(&runs, &summaries, base)
    }

    /// A fixed pseudo-random draw in 0..m for item i.
    fn draw(i: usize, m: usize) -> usize {
        ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize % m
    }

    fn verdict(g: &GridResults, starts: &str) -> Verdict3 {
        g.verdicts
            .iter()
            .find(|v| v.claim.starts_with(starts))
            .unwrap()
            .verdict
    }

    #[test]
    fn verdicts_follow_the_intervals() {
        // High LR loses half the items, low LR 4 %: forgetting reproduced, clearly.
        let g = grid(&|i| draw(i, 2) == 0, &|i| draw(i, 25) != 0);
        assert_eq!(verdict(&g, "a high learning rate"), Verdict3::Holds);
        // The QAT runs score as their baselines on the very same items: the fix is
        // near-lossless with an interval of width zero, and saturation cost nothing.
        assert_eq!(verdict(&g, "max_window(64) + warmup"), Verdict3::Holds);
        assert_eq!(verdict(&g, "saturation costs knowledge"), Verdict3::Fails);
        let row = g.rows.iter().find(|r| r.name == "baseline-high").unwrap();
        assert!(
            (row.knowledge.value - 50.0).abs() < 6.0,
            "{:?}",
            row.knowledge
        );
        assert!(row.knowledge.interval[0] < 50.0 && row.knowledge.interval[1] > 50.0);
        assert!(row.knowledge.p_value < 0.01);
        // High LR loses 10 % (the threshold) give or take the sampling: inconclusive.
        let g = grid(&|i| draw(i, 10) != 3, &|_| true);
        assert_eq!(verdict(&g, "a high learning rate"), Verdict3::Inconclusive);
        // High LR loses 2 %: not reproduced.
        let g = grid(&|i| draw(i, 50) != 3, &|_| true);
        assert_eq!(verdict(&g, "a high learning rate"), Verdict3::Fails);
        // Without the runs a verdict needs, it is inconclusive, never "not reproduced".
        let runs = grid_runs();
        let partial: Vec<Vec<RunSummary>> = runs
            .iter()
            .map(|r| {
                if r.name == "baseline-low" {
                    vec![run(&r.name, 1e-4, "none", &|_| true)]
                } else {
                    Vec::new()
                }
            })
            .collect();
        let base = run("base", 0.0, "none", &|_| true).probes.unwrap();
        let g = GridResults::compute(&runs, &partial, base);
        for v in &g.verdicts {
            assert_eq!(v.verdict, Verdict3::Inconclusive, "{}", v.claim);
        }
    }
}
