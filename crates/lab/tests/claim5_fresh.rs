//! The claim-5 studies' "reported, not judged" figures, recomputed from their committed data:
//! the completion part split into the old 108 items and the 189 added ones, and how many items
//! were discordant in more than one data order (the dependence the clustered interval handles).
//! The first look's figures are known (its README); the fresh study's README must say its own
//! as this test formats them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::collections::BTreeMap;
use std::path::PathBuf;

use hif8lab_lab::grid::{DATA_FILE, GridData};
use hif8lab_train::eval::ProbeScore;

const BASELINE: &str = "baseline-low";
const FIX: &str = "max_window-low-warmup";
/// The completion items of the first set (the rest were added before the first look).
const OLD_ITEMS: usize = 108;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn data(study: &str) -> Option<GridData> {
    let path = root().join("docs/results").join(study).join(DATA_FILE);
    path.is_file().then(|| GridData::read(&path).unwrap())
}

/// Per order: (the baseline's marks, the fix's marks) of `score`.
fn pairs(d: &GridData, score: ProbeScore) -> BTreeMap<usize, (Vec<f64>, Vec<f64>)> {
    let mut out: BTreeMap<usize, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for r in &d.runs {
        let Some(v) = r.summary.probes.as_ref().and_then(|p| p.item_values(score)) else {
            continue;
        };
        let e = out.entry(r.order).or_default();
        if r.run == BASELINE {
            e.0 = v;
        } else if r.run == FIX {
            e.1 = v;
        }
    }
    out
}

/// Pairs right only in the baseline, only in the fix, and all pairs, over items `items`.
fn split(
    p: &BTreeMap<usize, (Vec<f64>, Vec<f64>)>,
    items: std::ops::Range<usize>,
) -> (usize, usize, usize) {
    let (mut b, mut c, mut n) = (0, 0, 0);
    for (x, y) in p.values() {
        for i in items.clone() {
            b += usize::from(x[i] > 0.5 && y[i] < 0.5);
            c += usize::from(x[i] < 0.5 && y[i] > 0.5);
            n += 1;
        }
    }
    (b, c, n)
}

/// Items discordant in at least one order, and those discordant in more than one.
fn recurring(p: &BTreeMap<usize, (Vec<f64>, Vec<f64>)>) -> (usize, usize) {
    let items = p.values().next().map_or(0, |(x, _)| x.len());
    let per_item: Vec<usize> = (0..items)
        .map(|i| {
            p.values()
                .filter(|(x, y)| (x[i] > 0.5) != (y[i] > 0.5))
                .count()
        })
        .collect();
    (
        per_item.iter().filter(|k| **k > 0).count(),
        per_item.iter().filter(|k| **k > 1).count(),
    )
}

/// Per order, mean margin of the fix minus the baseline's; its mean and 95 % t interval.
fn margin_contrast(d: &GridData, score: ProbeScore, label: &str) -> String {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let diffs: Vec<f64> = pairs(d, score)
        .values()
        .map(|(x, y)| mean(y) - mean(x))
        .collect();
    let [lo, hi] = hif8lab_lab::stats::exact::t_interval(&diffs, 0.05);
    format!(
        "{label} margin, fix minus baseline, mean over {} orders {:+.4} nats/byte, 95 % t interval [{lo:+.4}, {hi:+.4}]",
        diffs.len(),
        mean(&diffs)
    )
}

fn said(d: &GridData) -> Vec<String> {
    let c = pairs(d, ProbeScore::CompletionAccNorm);
    let k = pairs(d, ProbeScore::KnowledgeAccNorm);
    let items = c.values().next().unwrap().0.len();
    let (ob, oc, on) = split(&c, 0..OLD_ITEMS);
    let (nb, nc, nn) = split(&c, OLD_ITEMS..items);
    let (kd, kr) = recurring(&k);
    let (cd, cr) = recurring(&c);
    vec![
        format!(
            "first {OLD_ITEMS} items: {ob} right only in the baseline, {oc} only in the fix, of {on} pairs"
        ),
        format!(
            "{} new items: {nb} right only in the baseline, {nc} only in the fix, of {nn} pairs",
            items - OLD_ITEMS
        ),
        format!("knowledge: {kd} items discordant in some order, {kr} of them in more than one"),
        format!("completion: {cd} items discordant in some order, {cr} of them in more than one"),
        margin_contrast(d, ProbeScore::KnowledgeMargin, "knowledge"),
        margin_contrast(d, ProbeScore::CompletionMargin, "completion"),
    ]
}

#[test]
fn the_first_look_s_figures_are_recomputed() {
    let d = data("real-smollm2-claim5").expect("the first look's data are committed");
    let s = said(&d);
    // Its README: "on the first 108 items … 1 item right only in the baseline, 0 only in the
    // fix, of 216 pairs …; on the 189 new items 2 and 0 of 378", one item in both orders.
    assert_eq!(
        s[0],
        "first 108 items: 1 right only in the baseline, 0 only in the fix, of 216 pairs"
    );
    assert_eq!(
        s[1],
        "189 new items: 2 right only in the baseline, 0 only in the fix, of 378 pairs"
    );
    assert_eq!(
        s[3],
        "completion: 2 items discordant in some order, 1 of them in more than one"
    );
}

#[test]
fn the_fresh_study_s_readme_says_its_figures() {
    let d = data("real-smollm2-claim5-fresh").expect("the fresh study's data are committed");
    for run in [BASELINE, FIX] {
        let mut orders: Vec<usize> = d
            .runs
            .iter()
            .filter(|r| r.run == run)
            .map(|r| r.order)
            .collect();
        orders.sort_unstable();
        assert_eq!(
            orders,
            (2..=7).collect::<Vec<_>>(),
            "{run}: the registered orders"
        );
    }
    let readme =
        std::fs::read_to_string(root().join("docs/results/real-smollm2-claim5-fresh/README.md"))
            .unwrap();
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    for phrase in said(&d) {
        assert!(flat.contains(&phrase), "the README does not say `{phrase}`");
    }
}
