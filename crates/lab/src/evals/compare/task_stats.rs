//! The statistics of one task's comparison: paired (the same documents: exact McNemar and
//! interval, cluster bootstrap, the log-likelihood margin's shift, a second metric on the
//! same documents) and unpaired (Newcombe's interval from counts), each with its
//! equivalence claim.

use std::collections::BTreeMap;

use super::docs::Doc;
use super::{
    CompareOptions, Docs, FEW_DISCORDANT, OtherMetric, Paired, TaskComparison, Unpaired, drop_of,
    trim,
};
use crate::claims::{Claim, Part, Side, Spread};
use crate::evals::EvalError;
use crate::evals::lm_eval::EvalRun;
use crate::stats::exact::paired_exact;
use crate::stats::{Arm, Groups, RESAMPLES, bootstrap_draws, mcnemar, percentile};

pub(super) fn mean_of(d: &Docs) -> f64 {
    d.values().map(|v| v.value).sum::<f64>() / d.len().max(1) as f64
}

/// A second metric on the same documents (None when the documents differ or a value is
/// not 0/1).
pub(super) fn other_metric(metric: &str, bd: &Docs, od: &Docs) -> Option<OtherMetric> {
    if bd.len() != od.len() || bd.keys().any(|k| !od.contains_key(k)) {
        return None;
    }
    let pairs: Vec<(f64, f64)> = bd.iter().map(|(k, v)| (v.value, od[k].value)).collect();
    if pairs
        .iter()
        .any(|(a, b)| ![0.0, 1.0].contains(a) || ![0.0, 1.0].contains(b))
    {
        return None;
    }
    let n = pairs.len();
    let only_base = pairs.iter().filter(|(a, b)| a > b).count();
    let only_other = pairs.iter().filter(|(a, b)| a < b).count();
    let base = pairs.iter().map(|p| p.0).sum::<f64>() / n as f64;
    let other = pairs.iter().map(|p| p.1).sum::<f64>() / n as f64;
    let scale = if base > 0.0 { -100.0 / base } else { 0.0 };
    let [lo, hi] = paired_exact(only_base, only_other, n, 0.05);
    Some(OtherMetric {
        metric: metric.to_string(),
        base,
        other,
        drop: drop_of(base, other),
        only_base,
        only_other,
        mcnemar_p: mcnemar(only_base, only_other),
        exact_interval: [(scale * lo).min(scale * hi), (scale * lo).max(scale * hi)],
    })
}

/// The same documents (ids and hashes) in both runs, or why not (no paired comparison then).
fn same_documents(
    task: &str,
    bd: &Docs,
    od: &Docs,
    other: &EvalRun,
    file: &std::path::Path,
) -> Result<(), EvalError> {
    let only: Vec<String> = bd
        .keys()
        .filter(|k| !od.contains_key(*k))
        .chain(od.keys().filter(|k| !bd.contains_key(*k)))
        .take(5)
        .map(|(t, id)| format!("{t}#{id}"))
        .collect();
    if !only.is_empty() {
        return Err(EvalError::new(
            file,
            &format!("samples of {task}"),
            format!(
                "the runs scored different documents (e.g. {} in one run only; compare {}): a paired comparison needs the same ones",
                only.join(", "),
                other.path.display()
            ),
        ));
    }
    let changed = differing(bd, od, |d| &d.doc_hash);
    if !changed.is_empty() {
        return Err(EvalError::new(
            file,
            &format!("samples of {task}: doc_hash"),
            format!(
                "the same document ids hold different documents ({}; compare {})",
                first_five(&changed),
                other.path.display()
            ),
        ));
    }
    // The same prompts: lm-eval hashes each document's prompt (few-shot examples, template
    // and chat template included); one run with another prompt is another evaluation.
    let prompts = differing(bd, od, |d| &d.prompt_hash);
    if !prompts.is_empty() {
        return Err(EvalError::new(
            file,
            &format!("samples of {task}: prompt_hash"),
            format!(
                "the runs prompted {} of {} documents differently (e.g. {}; compare {}): another prompt template, chat template (--apply_chat_template) or few-shot sample (--fewshot_seed) is another evaluation, not a pair",
                prompts.len(),
                bd.len(),
                first_five(&prompts),
                other.path.display()
            ),
        ));
    }
    Ok(())
}

/// The documents (`task#id`) whose `hash` both runs logged and that differ.
fn differing(bd: &Docs, od: &Docs, hash: impl Fn(&Doc) -> &Option<String>) -> Vec<String> {
    bd.iter()
        .filter(|(k, v)| matches!((hash(v), hash(&od[*k])), (Some(a), Some(b)) if a != b))
        .map(|((t, id), _)| format!("{t}#{id}"))
        .collect()
}

fn first_five(names: &[String]) -> String {
    names.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
}

/// The clusters of the task's documents, where every document names one (and there are
/// more than one, fewer than documents).
fn cluster_groups(bd: &Docs) -> Option<Groups> {
    let names: Vec<Option<&String>> = bd.values().map(|v| v.cluster.as_ref()).collect();
    if !names.iter().all(Option::is_some) {
        return None;
    }
    let mut ids = BTreeMap::new();
    let id: Vec<u32> = names
        .iter()
        .map(|c| {
            let next = ids.len() as u32;
            *ids.entry(c.cloned().unwrap_or_default()).or_insert(next)
        })
        .collect();
    (ids.len() > 1 && ids.len() < names.len()).then(|| Groups::from_ids(&id))
}

/// The paired shift of the right answer's log-likelihood margin (other − base, nats) with
/// its 95 % bootstrap interval (documents resampled by `groups`, else one by one), where
/// both runs logged the margins.
fn margin_shift(
    bd: &Docs,
    od: &Docs,
    groups: Option<&Groups>,
    seed: u64,
) -> (Option<f64>, Option<[f64; 2]>) {
    let margins: Option<(Vec<f64>, Vec<f64>)> = bd
        .iter()
        .map(|(k, v)| Some((v.margin?, od[k].margin?)))
        .collect::<Option<Vec<(f64, f64)>>>()
        .map(|v| v.into_iter().unzip());
    let Some((mb, mo)) = margins else {
        return (None, None);
    };
    let g = groups
        .cloned()
        .unwrap_or_else(|| Groups::singletons(mb.len()));
    let arms = [Arm { seeds: vec![mb] }, Arm { seeds: vec![mo] }];
    let (v, mut d) = bootstrap_draws(&g, &arms, &|m| m[1] - m[0], RESAMPLES, seed ^ 0x5bd1);
    d.sort_by(f64::total_cmp);
    (
        Some(v),
        Some([percentile(&d, 0.025), percentile(&d, 0.975)]),
    )
}

#[allow(clippy::too_many_arguments)]
pub(super) fn paired(
    task: &str,
    metric: &str,
    n_shot: Option<u64>,
    bd: &Docs,
    od: &Docs,
    other: &EvalRun,
    options: &CompareOptions,
    seed: u64,
    file: &std::path::Path,
) -> Result<TaskComparison, EvalError> {
    same_documents(task, bd, od, other, file)?;
    let values = |d: &Docs| d.values().map(|v| v.value).collect::<Vec<f64>>();
    let (bv, ov) = (values(bd), values(od));
    zero_one(file, &format!("samples of {task}: {metric}"), &bv, &ov)?;
    let n = bv.len();
    let only_base = bv.iter().zip(&ov).filter(|(a, b)| **a > **b).count();
    let only_other = bv.iter().zip(&ov).filter(|(a, b)| **a < **b).count();
    let (bs, os) = (
        bv.iter().sum::<f64>() / n as f64,
        ov.iter().sum::<f64>() / n as f64,
    );
    let drop = drop_of(bs, os);
    let scale = if bs > 0.0 { -100.0 / bs } else { 0.0 };
    let exact = {
        let [lo, hi] = paired_exact(only_base, only_other, n, 0.05);
        let (x, y) = (scale * lo, scale * hi);
        [x.min(y), x.max(y)]
    };
    let groups = cluster_groups(bd);
    let arms = [Arm { seeds: vec![bv] }, Arm { seeds: vec![ov] }];
    let stat = |m: &[f64]| drop_of(m[0], m[1]);
    let cluster_draws = groups.as_ref().map(|g| {
        let (_, mut d) = bootstrap_draws(g, &arms, &stat, RESAMPLES, seed);
        d.sort_by(f64::total_cmp);
        d
    });
    let cluster_interval = cluster_draws
        .as_ref()
        .map(|d| [percentile(d, 0.025), percentile(d, 0.975)]);
    let use_clusters = cluster_draws.is_some() && only_base + only_other >= FEW_DISCORDANT;
    let (margin_shift, margin_shift_interval) = margin_shift(bd, od, groups.as_ref(), seed);
    let (spread, test, variation) = if use_clusters {
        (
            Spread::draws(cluster_draws.unwrap_or_default()),
            "paired cluster bootstrap of the relative drop (clusters resampled)",
            "documents, resampled by cluster",
        )
    } else {
        (
            Spread::PairedExact {
                b: only_base,
                c: only_other,
                n,
                scale,
                deff: 1.0,
            },
            "exact paired interval of the relative drop (discordant documents, items independent)",
            "documents",
        )
    };
    let claim = equivalence_claim(task, metric, other, drop, spread, test, variation, options);
    Ok(TaskComparison {
        task: task.to_string(),
        metric: metric.to_string(),
        n,
        n_original: None,
        n_shot,
        base: bs,
        other: os,
        drop,
        paired: Some(Paired {
            n,
            only_base,
            only_other,
            mcnemar_p: mcnemar(only_base, only_other),
            exact_interval: exact,
            clusters: groups.as_ref().map(Groups::len),
            clusters_by: groups
                .as_ref()
                .and_then(|_| bd.values().find_map(|v| v.cluster_by))
                .map(String::from),
            cluster_interval,
            decided_by: if use_clusters {
                "cluster bootstrap".into()
            } else {
                "exact".into()
            },
            margin_shift,
            margin_shift_interval,
            also: None,
        }),
        unpaired: None,
        claim,
    })
}

/// Per-document values of 0 or 1 only (a paired comparison of proportions); `at` names them.
fn zero_one(file: &std::path::Path, at: &str, a: &[f64], b: &[f64]) -> Result<(), EvalError> {
    match a.iter().chain(b).find(|x| **x != 0.0 && **x != 1.0) {
        Some(x) => Err(EvalError::new(
            file,
            at,
            format!(
                "a per-document value of {x}: a paired comparison of proportions needs 0/1 values (choose a 0/1 metric with --metric)"
            ),
        )),
        None => Ok(()),
    }
}

#[allow(clippy::too_many_arguments)]
fn equivalence_claim(
    task: &str,
    metric: &str,
    other: &EvalRun,
    drop: f64,
    spread: Spread,
    test: &str,
    variation: &str,
    options: &CompareOptions,
) -> Claim {
    Claim::new(
        &format!(
            "{task} ({metric}): {} is within ±{} % (relative) of the base",
            other.model,
            trim(options.margin)
        ),
        vec![Part {
            measured: format!("relative {metric} drop on {task}"),
            unit: "%".into(),
            value: drop,
            spread,
            side: Side::Within,
            threshold: options.margin,
            test: format!("{test}; equivalence by two one-sided tests"),
            variation: variation.into(),
        }],
        serde_json::Value::Null,
    )
}

/// Right answers behind an accuracy reported with its count.
pub fn count_of(score: f64, n: u64) -> usize {
    (score * n as f64).round().max(0.0) as usize
}

#[allow(clippy::too_many_arguments)]
pub(super) fn unpaired(
    task: &str,
    metric: &str,
    n_shot: Option<u64>,
    bs: f64,
    nb: u64,
    os: f64,
    no: u64,
    other: &EvalRun,
    options: &CompareOptions,
) -> TaskComparison {
    let (kb, ko) = (count_of(bs, nb), count_of(os, no));
    let (nb, no) = (nb as usize, no as usize);
    let (spread, interval, best) = unpaired_intervals(kb, nb, ko, no, bs);
    let claim = equivalence_claim(
        task,
        metric,
        other,
        drop_of(bs, os),
        spread,
        "Newcombe's interval for independent samples (no per-document logs: unpaired)",
        "documents (unpaired)",
        options,
    );
    TaskComparison {
        task: task.to_string(),
        metric: metric.to_string(),
        n: nb,
        n_original: None,
        n_shot,
        base: bs,
        other: os,
        drop: drop_of(bs, os),
        paired: None,
        unpaired: Some(Unpaired {
            k_base: kb,
            n_base: nb,
            k_other: ko,
            n_other: no,
            interval,
            best_paired_interval: best,
        }),
        claim,
    }
}

/// The unpaired spread of a relative drop from counts, its 95 % interval, and the narrowest
/// 95 % interval a paired test of the same counts could give (every discordant document one
/// way: |k_base − k_other| of them).
pub fn unpaired_intervals(
    kb: usize,
    nb: usize,
    ko: usize,
    no: usize,
    base_score: f64,
) -> (Spread, [f64; 2], [f64; 2]) {
    let scale = if base_score > 0.0 {
        100.0 / base_score
    } else {
        0.0
    };
    let spread = Spread::Unpaired {
        k_first: kb,
        n_first: nb,
        k_second: ko,
        n_second: no,
        scale,
    };
    let part = Part {
        measured: String::new(),
        unit: String::new(),
        value: 0.0,
        spread: spread.clone(),
        side: Side::Below,
        threshold: 0.0,
        test: String::new(),
        variation: String::new(),
    };
    let interval = part.interval(0.95);
    let (b, c) = (kb.saturating_sub(ko), ko.saturating_sub(kb));
    let [lo, hi] = paired_exact(b, c, nb, 0.05);
    let best = [
        (-scale * hi).min(-scale * lo),
        (-scale * hi).max(-scale * lo),
    ];
    (spread, interval, best)
}
