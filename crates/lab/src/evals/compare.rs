//! `compare-evals`: what two or more lm-eval runs' tables support.
//!
//! Every run after the first is compared with the first (the base), task by task, on one
//! 0/1 metric per task (`acc_norm` where the task has it, else `acc`, else `exact_match`;
//! `--metric` chooses). The statistic is the **relative drop**, (base − other) / base × 100,
//! the quantity "near-lossless" claims speak of.
//!
//! - **Paired** (both runs logged their documents): the same documents are required (the
//!   same ids and document hashes, the same few-shot count and task version; otherwise the
//!   comparison is refused, naming them). The discordant documents give the exact McNemar
//!   test and the exact paired interval; where the task's documents fall into clusters (a
//!   probe set's entities, HellaSwag's activity labels, MMLU's subjects) and enough of them
//!   differ, a cluster bootstrap decides instead (items of one cluster rise and fall
//!   together). Where lm-eval logged the choices' log-likelihoods, the paired shift of the
//!   right answer's margin (right − best wrong, nats) is shown with its interval: a
//!   continuous measure that sees damage before the 0/1 marks do.
//! - **Unpaired** (accuracies and item counts only): Newcombe's interval for independent
//!   samples, with the narrowest interval a paired test of the same counts could give (all
//!   discordant documents one way), i.e. how much the logs could help at most.
//!
//! The claim per task is equivalence: |relative drop| < margin (TOST, 90 % interval at
//! α = 0.05). Across tasks the "average relative drop" (the mean of the tasks' drops, as
//! benchmark challenges define it) is judged below the margin, with its interval (tasks
//! independent). All claims of a report are judged together with Holm's adjustment.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

mod docs;
mod task_stats;
use docs::{Docs, docs_of, facts, same_counts};
pub use task_stats::{count_of, unpaired_intervals};
use task_stats::{mean_of, other_metric, paired, unpaired};

use super::EvalError;
use super::lm_eval::{EvalRun, TaskResult};
use crate::claims::{Claim, Part, Side, Spread, judge_family};

/// Discordant documents below which the exact paired interval decides even where the task
/// has clusters (the bootstrap of very few discordant documents is degenerate).
pub const FEW_DISCORDANT: usize = 25;

/// Seed of the bootstraps (per task a distinct one, derived from it).
const SEED: u64 = 0x6c6d_6576_616c;

/// What to compare and how.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareOptions {
    /// The equivalence margin on the relative drop, in percent (the paper's: 1).
    pub margin: f64,
    /// The metric per task (`task` → `acc`), or for every task (`*`).
    pub metrics: BTreeMap<String, String>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            margin: 1.0,
            metrics: BTreeMap::new(),
        }
    }
}

/// The paired figures of one task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Paired {
    /// Documents in both runs.
    pub n: usize,
    /// Right only in the base.
    pub only_base: usize,
    /// Right only in the other run.
    pub only_other: usize,
    /// Exact two-sided McNemar p-value (no adjustment).
    pub mcnemar_p: f64,
    /// Exact paired 95 % interval of the relative drop (items independent).
    pub exact_interval: [f64; 2],
    /// Clusters, where the task has them.
    pub clusters: Option<usize>,
    /// What the clusters are: the document field read (`cluster`, `activity_label`,
    /// `subject`, `category`) or `subtask` (a group's subtasks).
    pub clusters_by: Option<String>,
    /// Cluster-bootstrap 95 % interval of the relative drop.
    pub cluster_interval: Option<[f64; 2]>,
    /// Which interval decides: `exact` or `cluster bootstrap`.
    pub decided_by: String,
    /// Mean paired shift of the right answer's log-likelihood margin (other − base, nats).
    pub margin_shift: Option<f64>,
    /// Its 95 % interval (bootstrap over clusters, or documents).
    pub margin_shift_interval: Option<[f64; 2]>,
    /// The task's other 0/1 metric (acc beside acc_norm, or the reverse), described the
    /// same way on the same documents (not a claim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub also: Option<OtherMetric>,
}

/// A second 0/1 metric of a paired task, descriptive.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OtherMetric {
    /// The metric.
    pub metric: String,
    /// The base's score.
    pub base: f64,
    /// The other run's.
    pub other: f64,
    /// Relative drop, %.
    pub drop: f64,
    /// Right only in the base.
    pub only_base: usize,
    /// Right only in the other run.
    pub only_other: usize,
    /// Exact McNemar p-value.
    pub mcnemar_p: f64,
    /// Exact paired 95 % interval of the relative drop.
    pub exact_interval: [f64; 2],
}

/// The unpaired figures of one task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unpaired {
    /// Right answers of the base, from its accuracy and count.
    pub k_base: usize,
    /// Items of the base.
    pub n_base: usize,
    /// Right answers of the other run.
    pub k_other: usize,
    /// Items of the other run.
    pub n_other: usize,
    /// Newcombe 95 % interval of the relative drop.
    pub interval: [f64; 2],
    /// The narrowest 95 % interval a paired test of these counts could give.
    pub best_paired_interval: [f64; 2],
}

/// One task of one comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskComparison {
    /// The task (or group).
    pub task: String,
    /// The metric compared.
    pub metric: String,
    /// Documents (the base's count).
    pub n: usize,
    /// The task's documents where the runs scored only the first `n` of them (`lm_eval
    /// --limit`, the same in both runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_original: Option<u64>,
    /// Few-shot examples.
    pub n_shot: Option<u64>,
    /// The base's score (a fraction).
    pub base: f64,
    /// The other run's score.
    pub other: f64,
    /// Relative drop, %.
    pub drop: f64,
    /// Paired figures, where both runs logged the documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired: Option<Paired>,
    /// Unpaired figures, where they did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unpaired: Option<Unpaired>,
    /// The equivalence claim, judged.
    pub claim: Claim,
}

/// The base against one other run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// The base's model.
    pub base: String,
    /// The other run's model.
    pub other: String,
    /// Per task, sorted by name.
    pub tasks: Vec<TaskComparison>,
    /// The mean of the tasks' relative drops.
    pub average_drop: f64,
    /// "Average relative drop below the margin", judged.
    pub average: Claim,
    /// Tasks of one run the other lacks (not compared).
    pub missing: Vec<String>,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalReport {
    /// The margin (%).
    pub margin: f64,
    /// One per run after the first.
    pub comparisons: Vec<Comparison>,
}

/// The tasks of a run outside any group (groups included).
fn top_level(run: &EvalRun) -> BTreeSet<String> {
    let inside: BTreeSet<&String> = run.groups.values().flatten().collect();
    run.tasks
        .keys()
        .chain(run.groups.keys())
        .filter(|t| !inside.contains(t))
        .cloned()
        .collect()
}

/// What a comparison judges: each task with the leaf tasks it is scored on, and the tasks
/// of one run only. A group is compared over its leaves (pooled, each leaf a cluster); a run
/// that reports a group's leaves without the group (`--tasks mmlu_anatomy,…` against
/// `--tasks mmlu`) is compared as the group too, never a group against nothing. A group that
/// both runs report must have the same leaves in both.
type Plan = (Vec<(String, Vec<String>)>, Vec<String>);

fn tasks_to_compare(base: &EvalRun, other: &EvalRun) -> Result<Plan, EvalError> {
    let tops: BTreeSet<String> = top_level(base)
        .into_iter()
        .chain(top_level(other))
        .collect();
    let both = |l: &String| base.tasks.contains_key(l) && other.tasks.contains_key(l);
    let mut chosen: Vec<(String, Vec<String>)> = Vec::new();
    let mut covered: BTreeSet<String> = BTreeSet::new();
    for t in &tops {
        let (bl, ol) = (
            base.groups.contains_key(t).then(|| base.leaves(t)),
            other.groups.contains_key(t).then(|| other.leaves(t)),
        );
        let leaves = match (bl, ol) {
            (None, None) => continue,
            (Some(b), Some(o)) => {
                let (sb, so): (BTreeSet<&String>, BTreeSet<&String>) =
                    (b.iter().collect(), o.iter().collect());
                if sb != so {
                    let only: Vec<String> = sb
                        .symmetric_difference(&so)
                        .take(5)
                        .map(|s| s.to_string())
                        .collect();
                    return Err(EvalError::new(
                        &other.path,
                        &format!("group_subtasks.{t}"),
                        format!(
                            "the group {t} has other subtasks than in the base (e.g. {} in one run only): a pooled score over other documents is not comparable",
                            only.join(", ")
                        ),
                    ));
                }
                b
            }
            (Some(l), None) | (None, Some(l)) => l,
        };
        if leaves.iter().all(both) {
            covered.extend(leaves.iter().cloned());
            chosen.push((t.clone(), leaves));
        }
    }
    // The tasks outside any group compared (every group was taken or not above).
    for t in &tops {
        let group = base.groups.contains_key(t) || other.groups.contains_key(t);
        if !group && !covered.contains(t) && both(t) {
            chosen.push((t.clone(), vec![t.clone()]));
        }
    }
    chosen.sort();
    let compared: BTreeSet<&String> = chosen.iter().map(|(c, _)| c).collect();
    let missing = tops
        .iter()
        .filter(|t| !covered.contains(*t) && !compared.contains(t))
        .cloned()
        .collect();
    Ok((chosen, missing))
}

/// The metric key (`acc_norm,none`) to compare for the task (or group) `name`, whose
/// metrics `task` reports.
fn metric_key(name: &str, task: &TaskResult, options: &CompareOptions) -> Option<String> {
    let wanted = options
        .metrics
        .get(name)
        .or_else(|| options.metrics.get("*"));
    let keys: Vec<&String> = task.metrics.keys().collect();
    let by_name = |name: &str| {
        keys.iter()
            .find(|k| k.split(',').next() == Some(name))
            .map(|k| k.to_string())
    };
    match wanted {
        Some(m) if m.contains(',') => keys.iter().find(|k| **k == m).map(|k| k.to_string()),
        Some(m) => by_name(m),
        None => by_name("acc_norm")
            .or_else(|| by_name("acc"))
            .or_else(|| by_name("exact_match")),
    }
}

/// The relative drop (%); NaN from a base of 0 (undefined, never "no drop": a task whose
/// base scores 0 is refused before it is compared).
fn drop_of(base: f64, other: f64) -> f64 {
    if base == 0.0 {
        f64::NAN
    } else {
        (base - other) / base * 100.0
    }
}

/// Compares `runs[1..]` with `runs[0]`.
pub fn compare(runs: &[EvalRun], options: &CompareOptions) -> Result<EvalReport, EvalError> {
    let base = &runs[0];
    let mut comparisons = Vec::new();
    let mut seed = SEED;
    for other in &runs[1..] {
        let (chosen, missing) = tasks_to_compare(base, other)?;
        if chosen.is_empty() {
            return Err(EvalError::new(
                &other.path,
                "results",
                format!(
                    "no task in common with the base {} (one run only: {}): nothing to compare",
                    base.path.display(),
                    missing.join(", ")
                ),
            ));
        }
        let mut tasks = Vec::new();
        for (task, leaves) in &chosen {
            seed = seed.wrapping_add(0x9e37_79b9);
            if let Some(t) = compare_task(base, other, task, leaves, options, seed)? {
                tasks.push(t);
            }
        }
        let drops: Vec<f64> = tasks.iter().map(|t| t.drop).collect();
        let average_drop = drops.iter().sum::<f64>() / drops.len().max(1) as f64;
        // Tasks are independent samples: the mean's variance is the sum of the tasks'
        // (each from its decisive 95 % interval) over T².
        let se = tasks
            .iter()
            .map(|t| {
                let [lo, hi] = t.interval95();
                ((hi - lo) / (2.0 * 1.959_964)).powi(2)
            })
            .sum::<f64>()
            .sqrt()
            / tasks.len().max(1) as f64;
        let parts = if tasks.is_empty() {
            vec![]
        } else {
            vec![Part {
                measured: format!(
                    "average relative drop of {} vs {} over {} task(s)",
                    other.model,
                    base.model,
                    tasks.len()
                ),
                unit: "%".into(),
                value: average_drop,
                spread: Spread::Normal { se },
                side: Side::Below,
                threshold: options.margin,
                test: "normal interval of a mean of independent tasks' drops (each task's variance from its own interval)".into(),
                variation: "the documents of each task".into(),
            }]
        };
        let average = Claim::new(
            &format!(
                "the average relative drop of {} vs {} is below {} %",
                other.model,
                base.model,
                trim(options.margin)
            ),
            parts,
            serde_json::json!({ "tasks": drops }),
        );
        comparisons.push(Comparison {
            base: base.model.clone(),
            other: other.model.clone(),
            tasks,
            average_drop,
            average,
            missing,
        });
    }
    // One family: every claim of the report.
    let mut all: Vec<Claim> = Vec::new();
    for c in &comparisons {
        all.extend(c.tasks.iter().map(|t| t.claim.clone()));
        all.push(c.average.clone());
    }
    judge_family(&mut all);
    let mut it = all.into_iter();
    for c in &mut comparisons {
        for t in &mut c.tasks {
            t.claim = it.next().unwrap_or_else(|| t.claim.clone());
        }
        c.average = it.next().unwrap_or_else(|| c.average.clone());
    }
    Ok(EvalReport {
        margin: options.margin,
        comparisons,
    })
}

impl TaskComparison {
    /// The 95 % interval the task's verdict rests on.
    pub fn interval95(&self) -> [f64; 2] {
        match (&self.paired, &self.unpaired) {
            (Some(p), _) if p.decided_by != "exact" => {
                p.cluster_interval.unwrap_or(p.exact_interval)
            }
            (Some(p), _) => p.exact_interval,
            (None, Some(u)) => u.interval,
            (None, None) => [self.drop, self.drop],
        }
    }
}

/// A number without trailing zeros (`1`, `0.5`).
pub(super) fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One task (a group: over `leaves`): paired where both runs logged its documents,
/// unpaired otherwise; `None` when the task has no 0/1 metric both runs report.
fn compare_task(
    base: &EvalRun,
    other: &EvalRun,
    task: &str,
    leaves: &[String],
    options: &CompareOptions,
    seed: u64,
) -> Result<Option<TaskComparison>, EvalError> {
    let (bt, ot) = (base.tasks.get(task), other.tasks.get(task));
    let first_leaf = leaves.first().and_then(|l| base.tasks.get(l));
    let key_task = bt.or(ot).or(first_leaf);
    let Some(key) = key_task.and_then(|t| metric_key(task, t, options)) else {
        // A metric asked for this task by name, and not there: refused, never dropped.
        if let (Some(m), Some(t)) = (options.metrics.get(task), key_task) {
            return Err(EvalError::new(
                &t.file,
                &format!("results.{task}"),
                format!(
                    "--metric {task}={m}: {task} has no metric {m} (it has: {})",
                    t.metrics.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        return Ok(None);
    };
    let (bf, of) = (
        facts(base, task, leaves, &key),
        facts(other, task, leaves, &key),
    );
    let file = bt
        .or(first_leaf)
        .map_or(base.path.clone(), |t| t.file.clone());
    // The few-shot count and version of the task and of every leaf of a group, not the
    // first alone; where a run reports a group's leaves without the group, its leaves.
    let own = |run: &EvalRun, t: &str| run.tasks.get(t).map(|r| (r.n_shot, r.version.clone()));
    let mut checked: Vec<&str> = vec![task];
    checked.extend(leaves.iter().map(String::as_str).filter(|l| *l != task));
    for t in checked {
        let (Some((bshot, bver)), Some((oshot, over))) = (own(base, t), own(other, t)) else {
            continue;
        };
        if bshot != oshot {
            let what = if t == task {
                format!("{task}: the runs")
            } else {
                format!("{task}: its subtask {t}")
            };
            return Err(EvalError::new(
                &file,
                &format!("n-shot.{t}"),
                format!(
                    "{what} used different few-shot counts ({} vs {} in {}): their scores are not comparable",
                    opt(bshot),
                    opt(oshot),
                    other.path.display()
                ),
            ));
        }
        if bver != over {
            return Err(EvalError::new(
                &file,
                &format!("versions.{t}"),
                format!(
                    "{t}: different task versions ({} vs {} in {}): their documents or scoring may differ",
                    bver.as_deref().unwrap_or("none"),
                    over.as_deref().unwrap_or("none"),
                    other.path.display()
                ),
            ));
        }
    }
    same_counts(base, other, task, leaves)?;
    let metric = key.split(',').next().unwrap_or(&key).to_string();
    // A score is a proportion (or a mean of 0/1 marks): out of [0, 1] it is not one; a
    // relative drop from 0 is undefined (every comparison would read "no drop"). Checked on
    // the reported scores first, then on what the logs give.
    let check = |bs: Option<f64>, os: Option<f64>| -> Result<(), EvalError> {
        for (s, run) in [(bs, base), (os, other)] {
            if let Some(s) = s
                && !(0.0..=1.0).contains(&s)
            {
                return Err(EvalError::new(
                    &run.path,
                    &format!("results.{task}.{key}"),
                    format!("{task}: {metric} {s} is not a score in [0, 1]"),
                ));
            }
        }
        if bs == Some(0.0) {
            return Err(EvalError::new(
                &file,
                &format!("results.{task}.{key}"),
                format!(
                    "{task}: the base's {metric} is 0: a relative drop from it is undefined \
                     (compare on another metric, --metric {task}=METRIC, or leave the task out)"
                ),
            ));
        }
        Ok(())
    };
    check(bf.score, of.score)?;
    let (bd, od) = (docs_of(base, leaves, &key)?, docs_of(other, leaves, &key)?);
    let (Some(bs), Some(os)) = (
        bf.score.or_else(|| bd.as_ref().map(mean_of)),
        of.score.or_else(|| od.as_ref().map(mean_of)),
    ) else {
        return Ok(None);
    };
    check(Some(bs), Some(os))?;
    let limited = match (bf.n, bf.n_original) {
        (Some(n), Some(orig)) if n < orig => Some(orig),
        _ => None,
    };
    if let (Some(bd), Some(od)) = (&bd, &od) {
        let mut t = paired(
            task, &metric, bf.n_shot, bd, od, other, options, seed, &file,
        )?;
        t.n_original = limited;
        // The other of acc / acc_norm on the same documents, described beside it (a log
        // that cannot serve it leaves it out: it is not what is judged).
        let filter = key.split_once(',').map_or("none", |(_, f)| f);
        let second = if metric == "acc_norm" {
            "acc"
        } else {
            "acc_norm"
        };
        let key2 = format!("{second},{filter}");
        let lenient = |run: &EvalRun| docs_of(run, leaves, &key2).ok().flatten();
        if let (Some(p), Some(b2), Some(o2)) = (t.paired.as_mut(), lenient(base), lenient(other)) {
            p.also = other_metric(second, &b2, &o2);
        }
        return Ok(Some(t));
    }
    let (Some(nb), Some(no)) = (bf.n, of.n) else {
        return Err(EvalError::new(
            &file,
            &format!("n-samples.{task}"),
            "no document count: an accuracy without its count carries no uncertainty",
        ));
    };
    if nb == 0 || no == 0 {
        return Err(EvalError::new(
            &file,
            &format!("n-samples.{task}.effective"),
            format!(
                "{task}: a run scored 0 documents ({nb} in the base, {no} in the other): no score to compare"
            ),
        ));
    }
    let mut t = unpaired(task, &metric, bf.n_shot, bs, nb, os, no, other, options);
    t.n_original = limited;
    Ok(Some(t))
}

fn opt(v: Option<u64>) -> String {
    v.map_or("none".into(), |v| v.to_string())
}
