//! The grid's results computed in one place: the rows (APE, drops and intervals per run,
//! [`super::results`]), then the verdicts on them ([`super::verdicts`]). The one module that
//! reads both, so neither reads the other.

use super::*;
use crate::stats::{Estimate, mean_sd};
use hif8lab_train::trainer::{PROBE_SCORES, ProbeScore};

impl GridResults {
    /// Computes APE, drops, intervals and verdicts from the runs' summaries: `summaries[i]`
    /// holds run `i`'s seeds (at least one).
    pub fn compute(runs: &[GridRun], summaries: &[Vec<RunSummary>], base: ProbeScores) -> Self {
        Self::compute_with_bases(runs, summaries, vec![base])
    }

    /// [`Self::compute`] over several pretrainings: replicate `r` of a run continued from
    /// base `r % bases.len()` (data order `r / bases.len()`), so that every comparison with
    /// the base pairs a run with its own base.
    pub fn compute_with_bases(
        runs: &[GridRun],
        summaries: &[Vec<RunSummary>],
        bases: Vec<ProbeScores>,
    ) -> Self {
        let base = bases.first().cloned().unwrap_or_default();
        let base_seeds: Vec<RunSummary> = bases.iter().map(base_run).collect();
        let by_key = |k: CellKey| {
            runs.iter()
                .position(|r| r.key() == k)
                .and_then(|i| summaries.get(i))
        };
        let seeds = summaries.iter().map(Vec::len).max().unwrap_or(1);
        let rows: Vec<ResultRow> = runs
            .iter()
            .zip(summaries)
            .filter(|(_, s)| !s.is_empty())
            .map(|(run, s)| {
                let matched = by_key(run.baseline_key()).filter(|_| run.estimator.is_some());
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
                let drop = |score: ProbeScore| drop_estimate(reference, s, score);
                ResultRow {
                    name: run.name.clone(),
                    key: run.key(),
                    paper: run.paper.into(),
                    summary: s[0].clone(),
                    seeds: s.clone(),
                    ape_all,
                    ape_all_sd,
                    ape_last,
                    ape_last_sd,
                    knowledge: drop(ProbeScore::KnowledgeAccNorm),
                    completion: drop(ProbeScore::CompletionAccNorm),
                    scores: PROBE_SCORES
                        .iter()
                        .map(|n| (*n, compare(&[s], *n, &|m| m[0])))
                        .collect(),
                }
            })
            .collect();
        let design = super::verdicts::Design {
            orders: seeds.div_ceil(bases.len().max(1)),
            bases: bases.len().max(1),
        };
        let verdicts = super::verdicts::verdicts(&rows, &base_seeds, design);
        GridResults {
            base,
            bases,
            seeds,
            rows,
            verdicts,
            first_order: 0,
            base_model: None,
            dose: None,
        }
    }
}

/// The relative drop (%) of `runs`' score against `reference`'s with its 95 % interval (the
/// exact paired one when few items differ) and its two-sided p-value against no drop.
fn drop_estimate(reference: &[RunSummary], runs: &[RunSummary], score: ProbeScore) -> Estimate {
    use crate::claims::Side;
    let design = super::verdicts::Design {
        orders: runs.len(),
        bases: 1,
    };
    match super::verdicts::drop_part(
        design,
        reference,
        runs,
        score,
        String::new(),
        Side::AtLeast,
        0.0,
    ) {
        Some(p) => Estimate {
            value: p.value,
            interval: p.interval(0.95),
            p_value: p.p_value().unwrap_or(f64::NAN),
        },
        None => compare(&[reference, runs], score, &drop_stat),
    }
}
