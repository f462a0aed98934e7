//! What a comparison reads of each run: the documents of a task (a group pooled over its
//! leaves), its count, few-shot setting and score — and the checks that the results file and
//! the per-document logs tell one story before anything is judged on them.

use std::collections::BTreeMap;

use super::super::EvalError;
use super::super::lm_eval::{EvalRun, Sample, TaskResult};

/// One document's record for the metric compared.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Doc {
    /// The metric's value (0/1 for the metrics compared).
    pub value: f64,
    /// lm-eval's hash of the document.
    pub doc_hash: Option<String>,
    /// lm-eval's hash of the prompt (few-shot context and template included).
    pub prompt_hash: Option<String>,
    /// The cluster (a group's subtask, or the document's own cluster field).
    pub cluster: Option<String>,
    /// What the cluster is (`subtask` or the document field read).
    pub cluster_by: Option<&'static str>,
    /// The right answer's log-likelihood minus the best wrong one's, where logged.
    pub margin: Option<f64>,
}

/// A task's documents keyed by (leaf task, doc id).
pub(crate) type Docs = BTreeMap<(String, u64), Doc>;

/// The documents of the leaf tasks `leaves` (a task, or a group's leaves with the leaf as
/// cluster) for the metric `key` (`acc_norm,none`). `Ok(None)` where a leaf has no
/// per-document log (the comparison is then unpaired). A log that is there but cannot serve
/// is refused, never passed over: no document for the filter (an empty file), a document
/// without a finite value of the metric, fewer or more documents than `n-samples` says were
/// scored, or a mean that is not the score the results file reports.
pub(crate) fn docs_of(
    run: &EvalRun,
    leaves: &[String],
    key: &str,
) -> Result<Option<Docs>, EvalError> {
    let (metric, filter) = key.split_once(',').unwrap_or((key, "none"));
    // (A leaf is never a group: one leaf is the task itself, its documents' own clusters.)
    let grouped = leaves.len() > 1;
    let mut out = Docs::new();
    for name in leaves {
        let Some(task) = run.tasks.get(name) else {
            return Ok(None);
        };
        let Some(samples) = task.samples.as_ref() else {
            return Ok(None);
        };
        let docs: Vec<&Sample> = samples.docs.iter().filter(|s| s.filter == filter).collect();
        if docs.is_empty() {
            return Err(EvalError::new(
                &samples.file,
                &format!("filter {filter}"),
                format!(
                    "the per-document log of {name} holds no document for the filter {filter}: \
                     an empty or foreign log cannot pair the comparison (remove it to compare unpaired)"
                ),
            ));
        }
        let mut values = Vec::with_capacity(docs.len());
        for s in &docs {
            let Some(v) = s.metrics.get(metric).copied() else {
                return Err(EvalError::new(
                    &samples.file,
                    &format!("doc_id {}: {metric}", s.doc_id),
                    format!(
                        "{name}: the document has no finite {metric} (missing, NaN or not a number): \
                         a paired comparison needs every document's mark"
                    ),
                ));
            };
            values.push(v);
            let (cluster, cluster_by) = if grouped {
                (Some(name.clone()), Some("subtask"))
            } else {
                (s.cluster.clone(), s.cluster_field)
            };
            out.insert(
                (name.clone(), s.doc_id),
                Doc {
                    value: v,
                    doc_hash: s.doc_hash.clone(),
                    prompt_hash: s.prompt_hash.clone(),
                    cluster,
                    cluster_by,
                    margin: loglik_margin(s),
                },
            );
        }
        if let Some(n) = task.n
            && n != docs.len() as u64
        {
            return Err(EvalError::new(
                &task.file,
                &format!("n-samples.{name}.effective"),
                format!(
                    "{n} documents scored, but {} logs {} for the filter {filter}: the log is \
                     incomplete or belongs to another run",
                    samples.file.display(),
                    docs.len()
                ),
            ));
        }
        // The reported score is the mean of the logged marks (for 0/1 marks; other metrics
        // are refused later by name).
        if let Some(reported) = task.metrics.get(key)
            && values.iter().all(|v| *v == 0.0 || *v == 1.0)
        {
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            if (reported - mean).abs() > 1e-6 {
                return Err(EvalError::new(
                    &task.file,
                    &format!("results.{name}.{key}"),
                    format!(
                        "reports {reported}, but the {} logged documents of {} give {mean} \
                         ({} right): the results and the log disagree (another run's log?)",
                        values.len(),
                        samples.file.display(),
                        values.iter().filter(|v| **v == 1.0).count()
                    ),
                ));
            }
        }
    }
    Ok((!out.is_empty()).then_some(out))
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

/// What a run says of a task (a group: of its leaves, pooled).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Facts {
    /// Documents scored (`n-samples.effective`, summed over a group's leaves).
    pub n: Option<u64>,
    /// Documents in the task (`n-samples.original`, summed likewise).
    pub n_original: Option<u64>,
    /// Few-shot examples (a group: its first leaf's; every leaf is checked apart).
    pub n_shot: Option<u64>,
    /// The score: a group's is its leaves' scores pooled by their counts (the proportion
    /// over all its documents, what the paired path computes), where every leaf reports
    /// both; else what the results report for the task itself.
    pub score: Option<f64>,
}

/// The facts of `task` in `run` over `leaves`, for the metric `key`.
pub(crate) fn facts(run: &EvalRun, task: &str, leaves: &[String], key: &str) -> Facts {
    let own = run.tasks.get(task);
    let leaf = |l: &String| run.tasks.get(l);
    let sum = |f: &dyn Fn(&TaskResult) -> Option<u64>| -> Option<u64> {
        leaves.iter().map(|l| leaf(l).and_then(f)).sum()
    };
    let is_group = leaves.len() > 1 || leaves.first().is_some_and(|l| l != task);
    if !is_group {
        return Facts {
            n: own.and_then(|t| t.n),
            n_original: own.and_then(|t| t.n_original),
            n_shot: own.and_then(|t| t.n_shot),
            score: own.and_then(|t| t.metrics.get(key).copied()),
        };
    }
    let n = sum(&|t| t.n);
    let pooled = leaves
        .iter()
        .map(|l| {
            let t = leaf(l)?;
            Some((t.metrics.get(key).copied()?, t.n? as f64))
        })
        .collect::<Option<Vec<(f64, f64)>>>()
        .filter(|v| v.iter().map(|x| x.1).sum::<f64>() > 0.0)
        .map(|v| v.iter().map(|(s, n)| s * n).sum::<f64>() / v.iter().map(|x| x.1).sum::<f64>());
    Facts {
        n: n.or_else(|| own.and_then(|t| t.n)),
        n_original: sum(&|t| t.n_original),
        n_shot: own
            .and_then(|t| t.n_shot)
            .or_else(|| leaves.first().and_then(leaf).and_then(|t| t.n_shot)),
        score: pooled.or_else(|| own.and_then(|t| t.metrics.get(key).copied())),
    }
}

/// The runs scored the same documents of each leaf: the same task size (`original`) and,
/// where either ran on part of it (`lm_eval --limit`), the same part.
pub(crate) fn same_counts(
    base: &EvalRun,
    other: &EvalRun,
    task: &str,
    leaves: &[String],
) -> Result<(), EvalError> {
    for leaf in leaves {
        let (Some(b), Some(o)) = (base.tasks.get(leaf), other.tasks.get(leaf)) else {
            continue;
        };
        if let (Some(x), Some(y)) = (b.n_original, o.n_original)
            && x != y
        {
            return Err(EvalError::new(
                &b.file,
                &format!("n-samples.{leaf}.original"),
                format!(
                    "{task}: {leaf} has {x} documents in the base and {y} in {}: another version \
                     of its data, not comparable",
                    other.path.display()
                ),
            ));
        }
        if let (Some(x), Some(y)) = (b.n, o.n)
            && x != y
        {
            let of = |t: &TaskResult| match t.n_original {
                Some(orig) if orig != t.n.unwrap_or(orig) => {
                    format!(" of {orig} (lm_eval --limit)")
                }
                _ => String::new(),
            };
            return Err(EvalError::new(
                &b.file,
                &format!("n-samples.{leaf}.effective"),
                format!(
                    "{task}: the base scored {x} documents of {leaf}{}, {} scored {y}{}: a score \
                     on part of a task is not comparable with one on another part or the whole \
                     (rerun both with the same --limit, or none)",
                    of(b),
                    other.path.display(),
                    of(o)
                ),
            ));
        }
    }
    Ok(())
}
