//! The grid's claims, posed before the data (docs/results/claims.md states each threshold
//! and its reason) and judged together ([`crate::claims::judge_family`]).

use super::saturation::{
    QUANTIZER_BOOTSTRAP, null_ratio, ratio_draws_over_quantizers, ratio_per_seed,
};
use super::*;
use crate::claims::{Claim, Part, Side, Spread};
use crate::stats::Verdict3;
use crate::stats::exact::sign_flip;
use crate::stats::{Arm, bootstrap_draws, bootstrap_draws_nested, cluster_totals, mean_sd};
use hif8lab_train::eval::ProbeScore;

/// Bootstrap resamples behind a claim (the smallest p-value they can show is 1/10,001,
/// below the smallest α Holm uses over five claims, 0.01).
pub const CLAIM_RESAMPLES: usize = 10_000;
const CLAIM_SEED: u64 = 0xC1A1_5EED;

/// Fewer discordant items than this (pooled over seeds): a paired 0/1 comparison gets the
/// exact interval instead of the bootstrap's (which is liberal with few discordant items).
pub const FEW_DISCORDANT: usize = 25;

/// Chance accuracy of a knowledge item (four choices).
pub const KNOWLEDGE_CHANCE: f64 = 0.25;

/// The near-lossless margin: a relative drop below 2 % (about 3.5× the largest drop the paper
/// calls near-lossless, 0.58 % on HellaSwag); the same margin decides whether saturation
/// "costs" knowledge.
pub const LOSSLESS_MARGIN: f64 = 2.0;

/// Forgetting: the high rate loses at least this many more points of the base model's
/// above-chance knowledge than the low rate.
pub const FORGETTING_MARGIN: f64 = 10.0;

/// "Far more often": most_recent's estimate exceeded at least 3× as often as max_window's.
pub const SATURATION_RATIO: f64 = 3.0;

/// "The loss hides it": APE below 2 % (the near-lossless margin applied to the loss).
pub const APE_HIDES: f64 = 2.0;

/// APE of the fix below 1 % (about 9× the paper's 0.11 %).
pub const APE_LOSSLESS: f64 = 1.0;

/// The test of a paired comparison of probe scores.
pub const PAIRED_BOOTSTRAP: &str = "paired cluster bootstrap (knowledge items by entity, completion items by family, held-out windows in blocks of 4; seeds resampled), 10,000 resamples; percentile interval";

/// The test of a paired comparison of 0/1 marks with few discordant items.
pub const PAIRED_EXACT: &str = "exact paired interval (Clopper–Pearson bounds on the discordant share and its direction, pooled over seeds; items taken as independent)";

/// [`PAIRED_EXACT`] where some cluster holds several discordant pairs, in words.
pub fn paired_exact_clustered_words(deff: f64) -> String {
    format!(
        "exact paired interval (Clopper–Pearson bounds on the discordant share and its direction, pooled over seeds), the counts divided by the design effect {deff:.2} of clusters holding several discordant pairs (an item across seeds, the items of one probe cluster: Durkalski's clustered McNemar)"
    )
}

/// The replicates of each grid run: data orders × pretrainings of the base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Design {
    /// Data orders of the continued training (with the text fixed).
    pub orders: usize,
    /// Pretrainings of the base (seeds of the pretraining).
    pub bases: usize,
}

impl Design {
    /// What an interval over items and replicates covers, in words.
    pub fn variation(self) -> String {
        let bases = if self.bases > 1 {
            format!(
                "{} pretrainings of the base (the unit: resampled first, then the orders within each)",
                self.bases
            )
        } else {
            "not the pretraining (one base)".into()
        };
        format!(
            "covers the probe items (by cluster), {} data order(s) and {bases}",
            self.orders
        )
    }
}

/// One arm per run: the final per-item values of a score, per seed.
pub fn arm_of(runs: &[RunSummary], score: ProbeScore) -> Option<Arm> {
    let seeds: Option<Vec<Vec<f64>>> = runs
        .iter()
        .map(|s| s.probes.as_ref().and_then(|p| p.item_values(score)))
        .collect();
    seeds.filter(|s| !s.is_empty()).map(|seeds| Arm { seeds })
}

/// The resampling clusters of a score, from the first run that has marks.
fn groups_of(runs: &[&[RunSummary]], score: ProbeScore) -> Option<crate::stats::Groups> {
    runs.iter()
        .flat_map(|r| r.iter())
        .find_map(|s| s.probes.as_ref().filter(|p| p.marks.is_some()))
        .map(|p| p.groups(score))
}

/// Discordant items of a paired 0/1 comparison, pooled over seeds: (right only in `first`,
/// right only in `second`, pairs).
pub fn discordance(first: &Arm, second: &Arm) -> (usize, usize, usize) {
    let (mut b, mut c, mut n) = (0, 0, 0);
    for (k, y) in second.seeds.iter().enumerate() {
        let x = &first.seeds[k % first.seeds.len().max(1)];
        for (a, z) in x.iter().zip(y) {
            b += usize::from(*a > 0.5 && *z < 0.5);
            c += usize::from(*a < 0.5 && *z > 0.5);
            n += 1;
        }
    }
    (b, c, n)
}

/// A statistic of the runs' final probe scores on the data and its `resamples` bootstrap
/// draws over item clusters and replicates, the replicates resampled by pretraining first
/// when the design has several (the pretraining is the unit: its orders are not
/// independent); `None` when a run lacks per-item marks.
fn statistic_and_draws(
    design: Design,
    runs: &[&[RunSummary]],
    score: ProbeScore,
    stat: &dyn Fn(&[f64]) -> f64,
    resamples: usize,
) -> Option<(f64, Vec<f64>)> {
    let arms: Vec<Arm> = runs
        .iter()
        .map(|r| arm_of(r, score))
        .collect::<Option<_>>()?;
    let groups = groups_of(runs, score)?;
    Some(bootstrap_draws_nested(
        &groups,
        &arms,
        stat,
        resamples,
        CLAIM_SEED,
        design.bases,
    ))
}

/// A statistic of the runs' final probe scores as a claim part (bootstrap draws over
/// clusters and seeds). `None` when a run lacks per-item marks.
#[allow(clippy::too_many_arguments)]
fn probe_part(
    design: Design,
    runs: &[&[RunSummary]],
    score: ProbeScore,
    stat: &dyn Fn(&[f64]) -> f64,
    measured: String,
    unit: &str,
    side: Side,
    threshold: f64,
) -> Option<Part> {
    let (value, draws) = statistic_and_draws(design, runs, score, stat, CLAIM_RESAMPLES)?;
    Some(Part {
        measured,
        unit: unit.into(),
        value,
        spread: Spread::draws(draws),
        side,
        threshold,
        test: PAIRED_BOOTSTRAP.into(),
        variation: design.variation(),
    })
}

/// The relative drop (%) of `other`'s 0/1 score against `reference`'s on the same items: a
/// bootstrap part, or the exact paired interval when fewer than `FEW_DISCORDANT` (25) items
/// differ (never of zero width).
pub fn drop_part(
    design: Design,
    reference: &[RunSummary],
    other: &[RunSummary],
    score: ProbeScore,
    measured: String,
    side: Side,
    threshold: f64,
) -> Option<Part> {
    let runs = [reference, other];
    let continuous = matches!(
        score,
        ProbeScore::HeldoutLoss | ProbeScore::KnowledgeMargin | ProbeScore::CompletionMargin
    );
    if !continuous {
        let (a, b) = (arm_of(reference, score)?, arm_of(other, score)?);
        let (nb, nc, n) = discordance(&a, &b);
        let ref_mean =
            a.seeds.iter().flatten().sum::<f64>() / a.seeds.iter().flatten().count().max(1) as f64;
        if nb + nc < FEW_DISCORDANT && ref_mean > 0.0 {
            // Exact: the statistic on the data, no resampling; pairs in one cluster (an
            // item's pairs across seeds, the items of a probe cluster) that moved together
            // count as fewer independent ones.
            let (value, _) = statistic_and_draws(design, &runs, score, &drop_stat, 0)?;
            let deff = groups_of(&runs, score).map_or(1.0, |g| {
                crate::stats::exact::design_effect(&cluster_totals(&g, &a, &b), nb + nc)
            });
            return Some(Part {
                measured,
                unit: "%".into(),
                value,
                spread: Spread::PairedExact {
                    b: nb,
                    c: nc,
                    n,
                    scale: -100.0 / ref_mean,
                    deff,
                },
                side,
                threshold,
                test: if deff > 1.0 {
                    paired_exact_clustered_words(deff)
                } else {
                    PAIRED_EXACT.into()
                },
                variation: design.variation(),
            });
        }
    }
    probe_part(
        design, &runs, score, &drop_stat, measured, "%", side, threshold,
    )
}

/// Exact McNemar on the pooled discordant items and the cluster sign-flip test of the mean
/// log-likelihood margin: the continuous statistic beside the 0/1 marks, in words.
///
/// With several replicates (data orders) per arm the intervals resample the replicates too,
/// while the McNemar and sign-flip tests take the items pooled over them as the unit: their
/// p-values are of another level and are not printed (an item-level p-value appears only
/// beside an interval of the same level, one replicate against one).
pub(super) fn paired_evidence(first: &[RunSummary], second: &[RunSummary], what: &str) -> String {
    let mut out = Vec::new();
    let replicated = first.len() > 1 || second.len() > 1;
    if let (Some(a), Some(b)) = (
        arm_of(first, ProbeScore::KnowledgeAccNorm),
        arm_of(second, ProbeScore::KnowledgeAccNorm),
    ) {
        let (nb, nc, n) = discordance(&a, &b);
        if replicated {
            out.push(format!(
                "{what}: {nb} knowledge items right only in the first, {nc} only in the second, of {n} paired (pooled over seeds; no item-level p-value: the replicates, not the items, are this design's unit)"
            ));
        } else {
            let p = crate::stats::mcnemar(nb, nc);
            out.push(format!(
                "{what}: {nb} knowledge items right only in the first, {nc} only in the second, of {n} paired (exact McNemar, two-sided: p = {p:.3})"
            ));
        }
    }
    for (score, unit, label) in [
        (
            ProbeScore::KnowledgeMargin,
            "",
            "mean log-likelihood margin of the right choice (per byte)",
        ),
        (ProbeScore::HeldoutLoss, " nats", "held-out loss"),
    ] {
        let (Some(a), Some(b)) = (arm_of(first, score), arm_of(second, score)) else {
            continue;
        };
        let Some(groups) = groups_of(&[first, second], score) else {
            continue;
        };
        let (value, mut draws) = bootstrap_draws(
            &groups,
            &[a.clone(), b.clone()],
            &|m| m[1] - m[0],
            CLAIM_RESAMPLES,
            CLAIM_SEED,
        );
        draws.sort_by(f64::total_cmp);
        let q = |p: f64| crate::stats::percentile(&draws, p);
        if replicated {
            out.push(format!(
                "{label}, second minus first {value:+.4}{unit} [95 %: {:+.4}, {:+.4}] (paired cluster bootstrap, replicates resampled too)",
                q(0.025),
                q(0.975),
            ));
            continue;
        }
        let totals = cluster_totals(&groups, &a, &b);
        // Each test its own resamples: the seed follows from what it compares.
        let seed = crate::stats::exact::seed_for(CLAIM_SEED, &format!("{what} {label}"));
        let (ge, le) = sign_flip(&totals, seed);
        let p = (2.0 * ge.min(le)).min(1.0);
        out.push(format!(
            "{label}, second minus first {value:+.4}{unit} [95 %: {:+.4}, {:+.4}] (cluster sign-flip test, two-sided, {} clusters, {}: {})",
            q(0.025),
            q(0.975),
            totals.len(),
            crate::stats::exact::sign_flip_method(totals.len()),
            crate::claims::p_words(p)
        ));
    }
    out.join("; ")
}

/// Forgetting in points of the base's above-chance knowledge: (base − after) / (base −
/// chance) × 100; undefined (NaN) when the base knows next to nothing above chance (< 2
/// points of accuracy).
pub fn chance_corrected(base: f64, after: f64) -> f64 {
    let above = base - KNOWLEDGE_CHANCE;
    if above < 0.02 {
        f64::NAN
    } else {
        (base - after) / above * 100.0
    }
}

/// How much more of the base model's above-chance knowledge the `hi` runs forgot than the
/// `lo` runs, in points: forgetting = (base − after) / (base − chance) × 100 (0 = none, 100 =
/// down to chance), a part "≥ [`FORGETTING_MARGIN`]".
pub fn forgetting_contrast(
    design: Design,
    base: &[RunSummary],
    (hi, hi_runs): (&str, &[RunSummary]),
    (lo, lo_runs): (&str, &[RunSummary]),
) -> Option<Part> {
    probe_part(
        design,
        &[base, hi_runs, lo_runs],
        ProbeScore::KnowledgeAccNorm,
        &|m| chance_corrected(m[0], m[1]) - chance_corrected(m[0], m[2]),
        format!(
            "forgetting of {hi} minus {lo}, in points of the base's above-chance knowledge ((base − after) / (base − 0.25))"
        ),
        " points",
        Side::AtLeast,
        FORGETTING_MARGIN,
    )
}

/// The chance-corrected forgetting of `runs` against the base model, in points, as a part
/// "≥ [`FORGETTING_MARGIN`]".
pub fn forgetting_vs_base(
    design: Design,
    base: &[RunSummary],
    name: &str,
    runs: &[RunSummary],
) -> Option<Part> {
    probe_part(
        design,
        &[base, runs],
        ProbeScore::KnowledgeAccNorm,
        &|m| chance_corrected(m[0], m[1]),
        format!("forgetting of {name} vs the base model, in points of its above-chance knowledge"),
        " points",
        Side::AtLeast,
        FORGETTING_MARGIN,
    )
}

/// Per seed, the largest APE over `runs` against their matched baselines.
fn ape_per_seed(rows: &[ResultRow], runs: &[&ResultRow]) -> Vec<f64> {
    let seeds = runs.iter().map(|r| r.seeds.len()).min().unwrap_or(0);
    (0..seeds)
        .map(|k| {
            runs.iter()
                .filter_map(|r| {
                    let b = rows.iter().find(|b| b.key == r.key.baseline())?;
                    let (q, b) = (r.seeds.get(k)?, b.seeds.get(k)?);
                    let n = q.losses.len().min(b.losses.len());
                    Some(ape(&q.losses[..n], &b.losses[..n]))
                })
                .fold(f64::NAN, f64::max)
        })
        .collect()
}

/// A part on one exact value per seed: a t interval across seeds (one seed: the exact value
/// of one run, judged as such).
fn seeds_part(
    design: Design,
    measured: &str,
    unit: &str,
    values: Vec<f64>,
    side: Side,
    threshold: f64,
) -> Part {
    let n = values.len();
    let (value, _) = mean_sd(&values);
    if n < 2 {
        return Part::exact(measured, unit, value, side, threshold);
    }
    // Several pretrainings: replicates of one pretraining are not independent (for the
    // saturation ratio the pretraining explains most of the variance). The unit is then the
    // pretraining: its replicates' mean (replicate r belongs to pretraining r % B), a t
    // interval across those means — a random pretraining effect, balanced design.
    let b = design.bases;
    if b > 1 && n.is_multiple_of(b) && n > b {
        let means: Vec<f64> = (0..b)
            .map(|j| {
                let of: Vec<f64> = values.iter().skip(j).step_by(b).copied().collect();
                mean_sd(&of).0
            })
            .collect();
        return Part {
            measured: measured.into(),
            unit: unit.into(),
            value,
            spread: Spread::Seeds(means),
            side,
            threshold,
            test: format!(
                "t interval across the {b} pretrainings' means (each over its {} data orders): the pretraining as a random effect",
                n / b
            ),
            variation: format!(
                "covers the {b} pretrainings and, within each, {} data order(s) (the value within a run is exact)",
                n / b
            ),
        };
    }
    Part {
        measured: measured.into(),
        unit: unit.into(),
        value,
        spread: Spread::Seeds(values),
        side,
        threshold,
        test: "t interval across replicates of each replicate's exact value".into(),
        variation: format!(
            "covers the {n} replicates ({} data order(s) × {} pretraining(s); the value within a run is exact)",
            design.orders, design.bases
        ),
    }
}

/// A claim whose data are missing: inconclusive, saying what is missing.
fn missing(claim: &str, what: &str) -> Claim {
    Claim::new(
        claim,
        Vec::new(),
        serde_json::Value::String(format!("not judged: {what}")),
    )
}

/// The grid's five claims, judged together.
pub fn verdicts(rows: &[ResultRow], base: &[RunSummary], design: Design) -> Vec<Claim> {
    use claims::{
        claim_costs_knowledge, claim_forgetting, claim_loss_hides, claim_near_lossless,
        claim_saturates,
    };
    let mut out = vec![
        claim_saturates(rows, design),
        claim_costs_knowledge(rows, design),
        claim_forgetting(rows, base, design),
        claim_loss_hides(rows, design),
        claim_near_lossless(rows, design),
    ];
    // The manipulation check: what saturation costs is judged only when the arms differ in
    // saturation (docs/results/claims.md); otherwise claim 2 is not tested, its statistic
    // shown but outside the family.
    crate::claims::judge_family(&mut out);
    let untested = super::manipulation::check(rows)
        .filter(|c| !c.differs && out[1].verdict != Verdict3::NotJudged)
        .map(|c| {
            let measured = std::iter::once(out[1].measured_words())
                .chain(out[1].parts.iter().cloned())
                .collect::<Vec<_>>()
                .join("; ");
            not_tested(
                &out[1].claim,
                &format!(
                    "not tested at this scale: the arms do not differ in saturation ({}). Measured, not judged: {measured}.",
                    c.why
                ),
            )
        });
    let original = out[1].clone();
    if let Some(claim) = untested {
        out[1] = claim;
        judge(&mut out, &original);
    }
    // "The loss hides it" speaks of a damage: without one found (neither saturation costing
    // knowledge nor forgetting reproduced) there is nothing to hide, and the claim is not
    // judged — never "reproduced" by default.
    if out[1].verdict != Verdict3::Holds && out[2].verdict != Verdict3::Holds {
        let (two, three) = (out[1].verdict.report_word(), out[2].verdict.report_word());
        out[3] = missing(
            &out[3].claim,
            &format!(
                "no damage was found (claim 2 {two}, claim 3 {three}): there is nothing for the loss to hide"
            ),
        );
        judge(&mut out, &original);
    }
    out
}

/// Judges the family; a claim [`not_tested`] made (no parts: outside the family, which would
/// call it "not judged") is then marked not tested and shows `original`'s statistic (what was
/// measured, not judged: no interval, no p).
fn judge(out: &mut [Claim], original: &Claim) {
    crate::claims::judge_family(out);
    for c in out.iter_mut().filter(|c| untested_claim(c)) {
        c.verdict = Verdict3::NotTested;
        c.measured.clone_from(&original.measured);
        c.statistic = original.statistic;
        c.unit.clone_from(&original.unit);
        c.threshold.clone_from(&original.threshold);
        c.test.clone_from(&original.test);
    }
}

/// The evidence prefix of a claim [`not_tested`] made.
const NOT_TESTED: &str = "not tested at this scale:";

/// A claim whose data do not contain what it is about: no parts (outside the family), its
/// verdict set to [`Verdict3::NotTested`] once the family is judged.
fn not_tested(claim: &str, why: &str) -> Claim {
    debug_assert!(why.starts_with(NOT_TESTED));
    Claim::new(claim, Vec::new(), serde_json::Value::String(why.to_owned()))
}

fn untested_claim(c: &Claim) -> bool {
    c.parts.is_empty()
        && matches!(&c.evidence, serde_json::Value::String(s) if s.starts_with(NOT_TESTED))
}

/// The replicates of cell `key` (none when the grid lacks it: the claim is then not judged).
fn seeds_of(rows: &[ResultRow], key: CellKey) -> &[RunSummary] {
    rows.iter()
        .find(|r| r.key == key)
        .map_or(&[][..], |r| r.seeds.as_slice())
}

mod claims;
#[cfg(not(target_arch = "wasm32"))]
mod markdown;
#[cfg(not(target_arch = "wasm32"))]
pub use markdown::claims_markdown;
