//! The placebo of every grid report: one arm against itself in another data order. Nothing
//! differs but the order, so a test that calls it "significant" does not cover the variation
//! between orders — the item-level tests (items and windows as the unit, conditional on the
//! trained models) are shown to be descriptive, and the replicate-level test (the order as the
//! unit) is what a contrast between arms must be read against.

use std::fmt::Write as _;

use super::ResultRow;
use super::verdicts::paired_evidence;
use crate::stats::exact::t_test;
use hif8lab_train::eval::ProbeScore;
use hif8lab_train::run::RunSummary;

/// The arm the placebo uses: the paper's fix without warmup, else the low-rate baseline.
const ARMS: [super::CellKey; 2] = [super::CellKey::MAX_WINDOW_LOW, super::CellKey::BASELINE_LOW];

fn score(s: &RunSummary, what: ProbeScore) -> f64 {
    s.probes.as_ref().map_or(f64::NAN, |p| p.score(what))
}

/// The placebo section of a grid report (`bases` pretrainings; a replicate r is order
/// `first_order` + r / B of pretraining r % B).
pub fn markdown(rows: &[ResultRow], bases: usize, first_order: usize) -> String {
    let mut md = String::new();
    let Some(row) = ARMS
        .iter()
        .find_map(|a| rows.iter().find(|r| r.key == *a && r.seeds.len() >= 2))
    else {
        return md;
    };
    let b = bases.max(1);
    let orders = row.seeds.len() / b;
    let _ = writeln!(
        md,
        "\n## Placebo: {} against itself in another data order\n",
        row.name
    );
    if orders < 2 {
        let _ = writeln!(md, "One data order per pretraining: no placebo.");
        return md;
    }
    let (o0, o1) = (first_order, first_order + 1);
    let _ = writeln!(
        md,
        "Nothing differs but the order of the same text. Item level (orders {o0} and {o1} of the first pretraining; items and windows as the unit, conditional on the two trained models — the tests the verdicts above show as evidence): {}.\n",
        paired_evidence(
            &row.seeds[0..1],
            &row.seeds[b..b + 1],
            &format!("order {o0} (first) vs order {o1} (second)")
        ),
    );
    // Replicate level: disjoint pairs of orders within each pretraining.
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for j in 0..b {
        for k in (0..orders.saturating_sub(1)).step_by(2) {
            pairs.push((k * b + j, (k + 1) * b + j));
        }
    }
    let _ = writeln!(
        md,
        "Replicate level ({} disjoint pair(s) of orders, the order as the unit):\n",
        pairs.len()
    );
    for (what, label, unit) in [
        (
            ProbeScore::KnowledgeMargin,
            "mean knowledge margin",
            " nats/byte",
        ),
        (ProbeScore::HeldoutLoss, "held-out loss", " nats"),
    ] {
        let d: Vec<f64> = pairs
            .iter()
            .map(|(x, y)| score(&row.seeds[*y], what) - score(&row.seeds[*x], what))
            .filter(|v| v.is_finite())
            .collect();
        let Some((m, [lo, hi], p)) = t_test(&d, 0.05) else {
            let _ = writeln!(
                md,
                "- {label}: {} pair: no interval across orders (at least 4 orders are needed)",
                d.len()
            );
            continue;
        };
        let _ = writeln!(
            md,
            "- {label}, second minus first {m:+.4}{unit}, 95 % t interval [{lo:+.4}, {hi:+.4}] (df {}), p = {p:.3}: {}",
            d.len() - 1,
            if p < 0.05 {
                "significant — order-to-order variation exceeds what this test assumes"
            } else {
                "not significant, as a placebo must be"
            }
        );
    }
    md
}
