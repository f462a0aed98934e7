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

mod task_stats;
pub use task_stats::{count_of, unpaired_intervals};
use task_stats::{mean_of, other_metric, paired, unpaired};

use super::EvalError;
use super::lm_eval::{EvalRun, Sample, TaskResult};
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

/// The tasks to compare: groups (their subtasks pooled) and the tasks outside any group.
fn top_level(run: &EvalRun) -> Vec<String> {
    let inside: BTreeSet<&String> = run.groups.values().flatten().collect();
    run.tasks
        .keys()
        .filter(|t| !inside.contains(t))
        .cloned()
        .collect()
}

/// The metric key (`acc_norm,none`) to compare for `task`.
fn metric_key(task: &TaskResult, options: &CompareOptions) -> Option<String> {
    let wanted = options
        .metrics
        .get(&task.name)
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

/// The documents of `task` (pooled over a group's subtasks, the subtask as cluster) for the
/// metric `key`, keyed by (subtask, doc id): (value, doc hash, cluster, margin, what the
/// cluster is).
type Docs = BTreeMap<
    (String, u64),
    (
        f64,
        Option<String>,
        Option<String>,
        Option<f64>,
        Option<&'static str>,
    ),
>;

fn docs_of(run: &EvalRun, task: &str, key: &str) -> Option<Docs> {
    let (metric, filter) = key.split_once(',').unwrap_or((key, "none"));
    let members: Vec<&String> = match run.groups.get(task) {
        Some(subs) => subs.iter().collect(),
        None => vec![],
    };
    let sources: Vec<(&str, bool)> = if members.is_empty() {
        vec![(task, false)]
    } else {
        members.iter().map(|s| (s.as_str(), true)).collect()
    };
    let mut out = Docs::new();
    for (name, grouped) in sources {
        let samples = run.tasks.get(name)?.samples.as_ref()?;
        for s in samples.docs.iter().filter(|s| s.filter == filter) {
            let v = *s.metrics.get(metric)?;
            let (cluster, by) = if grouped {
                (Some(name.to_string()), Some("subtask"))
            } else {
                (s.cluster.clone(), s.cluster_field)
            };
            out.insert(
                (name.to_string(), s.doc_id),
                (v, s.doc_hash.clone(), cluster, loglik_margin(s), by),
            );
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The right answer's log-likelihood minus the best wrong one's.
fn loglik_margin(s: &Sample) -> Option<f64> {
    let (ll, t) = (s.loglik.as_ref()?, s.target?);
    let best_wrong = ll
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != t)
        .map(|(_, v)| *v)
        .fold(f64::NEG_INFINITY, f64::max);
    Some(ll[t] - best_wrong)
}

/// A group's (or task's) count and few-shot setting and version.
fn task_facts(run: &EvalRun, task: &str) -> (Option<u64>, Option<u64>, Option<String>) {
    let t = run.tasks.get(task);
    let mut n = t.and_then(|t| t.n);
    if let Some(subs) = run.groups.get(task) {
        let counts: Option<u64> = subs
            .iter()
            .map(|s| run.tasks.get(s).and_then(|t| t.n))
            .sum();
        n = n.or(counts);
    }
    let shot = t.and_then(|t| t.n_shot).or_else(|| {
        run.groups
            .get(task)
            .and_then(|s| s.first())
            .and_then(|s| run.tasks.get(s))
            .and_then(|t| t.n_shot)
    });
    (n, shot, t.and_then(|t| t.version.clone()))
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
        let base_tasks = top_level(base);
        let other_tasks: BTreeSet<String> = top_level(other).into_iter().collect();
        let mut missing: Vec<String> = base_tasks
            .iter()
            .filter(|t| !other_tasks.contains(*t))
            .cloned()
            .collect();
        missing.extend(
            other_tasks
                .iter()
                .filter(|t| !base_tasks.contains(t))
                .cloned(),
        );
        let mut tasks = Vec::new();
        for task in base_tasks.iter().filter(|t| other_tasks.contains(*t)) {
            seed = seed.wrapping_add(0x9e37_79b9);
            if let Some(t) = compare_task(base, other, task, options, seed)? {
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

/// One task: paired where both runs logged its documents, unpaired otherwise; `None` when
/// the task has no 0/1 metric both runs report.
fn compare_task(
    base: &EvalRun,
    other: &EvalRun,
    task: &str,
    options: &CompareOptions,
    seed: u64,
) -> Result<Option<TaskComparison>, EvalError> {
    let (bt, ot) = (base.tasks.get(task), other.tasks.get(task));
    let key_task = bt.or(ot).or_else(|| {
        base.groups
            .get(task)
            .and_then(|s| s.first())
            .and_then(|s| base.tasks.get(s))
    });
    let Some(key) = key_task.and_then(|t| metric_key(t, options)) else {
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
    let (bn, bshot, bver) = task_facts(base, task);
    let (on, oshot, over) = task_facts(other, task);
    let file = bt.map_or(base.path.clone(), |t| t.file.clone());
    if bshot != oshot {
        return Err(EvalError::new(
            &file,
            &format!("n-shot.{task}"),
            format!(
                "{task}: the runs used different few-shot counts ({} vs {} in {}): their scores are not comparable",
                opt(bshot),
                opt(oshot),
                other.path.display()
            ),
        ));
    }
    // Every subtask of a group, not the first alone.
    for sub in base.groups.get(task).into_iter().flatten() {
        let shot = |run: &EvalRun| run.tasks.get(sub).and_then(|t| t.n_shot);
        if shot(base) != shot(other) {
            return Err(EvalError::new(
                &file,
                &format!("n-shot.{sub}"),
                format!(
                    "{task}: its subtask {sub} used different few-shot counts ({} vs {} in {}): their scores are not comparable",
                    opt(shot(base)),
                    opt(shot(other)),
                    other.path.display()
                ),
            ));
        }
    }
    if bver != over {
        return Err(EvalError::new(
            &file,
            &format!("versions.{task}"),
            format!(
                "{task}: different task versions ({} vs {} in {}): their documents or scoring may differ",
                bver.as_deref().unwrap_or("none"),
                over.as_deref().unwrap_or("none"),
                other.path.display()
            ),
        ));
    }
    let metric = key.split(',').next().unwrap_or(&key).to_string();
    let score = |run: &EvalRun| {
        run.tasks
            .get(task)
            .and_then(|t| t.metrics.get(&key))
            .copied()
    };
    let (bd, od) = (docs_of(base, task, &key), docs_of(other, task, &key));
    let (Some(bs), Some(os)) = (
        score(base).or_else(|| bd.as_ref().map(mean_of)),
        score(other).or_else(|| od.as_ref().map(mean_of)),
    ) else {
        return Ok(None);
    };
    // A score is a proportion (or a mean of 0/1 marks): out of [0, 1] it is not one.
    for (s, run) in [(bs, base), (os, other)] {
        if !(0.0..=1.0).contains(&s) {
            return Err(EvalError::new(
                &run.path,
                &format!("results.{task}.{key}"),
                format!("{task}: {metric} {s} is not a score in [0, 1]"),
            ));
        }
    }
    // A relative drop from 0 is undefined: every comparison would read "no drop".
    if bs == 0.0 {
        return Err(EvalError::new(
            &file,
            &format!("results.{task}.{key}"),
            format!(
                "{task}: the base's {metric} is 0: a relative drop from it is undefined (compare \
                 on another metric, --metric {task}=METRIC, or leave the task out)"
            ),
        ));
    }
    if let (Some(bd), Some(od)) = (&bd, &od) {
        let mut t = paired(task, &metric, bshot, bd, od, other, options, seed, &file)?;
        // The other of acc / acc_norm on the same documents, described beside it.
        let filter = key.split_once(',').map_or("none", |(_, f)| f);
        let second = if metric == "acc_norm" {
            "acc"
        } else {
            "acc_norm"
        };
        let key2 = format!("{second},{filter}");
        if let (Some(p), Some(b2), Some(o2)) = (
            t.paired.as_mut(),
            docs_of(base, task, &key2),
            docs_of(other, task, &key2),
        ) {
            p.also = other_metric(second, &b2, &o2);
        }
        return Ok(Some(t));
    }
    let (Some(nb), Some(no)) = (bn, on) else {
        return Err(EvalError::new(
            &file,
            &format!("n-samples.{task}"),
            "no document count: an accuracy without its count carries no uncertainty",
        ));
    };
    Ok(Some(unpaired(
        task, &metric, bshot, bs, nb, os, no, other, options,
    )))
}

fn opt(v: Option<u64>) -> String {
    v.map_or("none".into(), |v| v.to_string())
}
