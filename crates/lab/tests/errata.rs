//! The errata of a committed report are checked against its data: every number the dose
//! study's `errata.md` gives is recomputed here from the committed `runs.jsonl.gz` files (the
//! study's and, for the schedule-matched comparator, the `real-smollm2` grid's) and must
//! appear in the text as written.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::io::Read;
use std::path::PathBuf;

use hif8lab_lab::stats::exact::{student_t_quantile, t_interval};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn records(study: &str) -> Vec<Value> {
    let path = root()
        .join("docs/results")
        .join(study)
        .join("runs.jsonl.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The probes of run `name` in data order `order` (its final ones).
fn probes<'a>(data: &'a [Value], name: &str, order: u64) -> &'a Value {
    let r = data
        .iter()
        .find(|r| r["kind"] == "run" && r["run"] == name && r["order"] == order)
        .unwrap_or_else(|| panic!("no run {name} order {order}"));
    &r["summary"]["probes"]
}

fn values(p: &Value, field: &str) -> Vec<f64> {
    p["marks"][field]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The smallest uniform shift of every margin (in 1e-4 steps: margins are kept to 4
/// decimals) that makes at least `relative` of the items right by margin wrong: the
/// pre-registration's definition of δ₂.
fn shift_costing(margins: &[f64], relative: f64) -> f64 {
    let right = margins.iter().filter(|m| **m > 0.0).count() as f64;
    (0..100_000)
        .map(|i| f64::from(i) * 1e-4)
        .find(|d| margins.iter().filter(|m| **m > *d).count() as f64 <= right * (1.0 - relative))
        .unwrap()
}

/// The relative acc_norm drop (%) a uniform shift of `d` causes.
fn cost_of_shift(margins: &[f64], d: f64) -> f64 {
    let right = margins.iter().filter(|m| **m > 0.0).count() as f64;
    let after = margins.iter().filter(|m| **m > d).count() as f64;
    100.0 * (right - after) / right
}

/// Per data order at the last dose, mean `field` of max_window-low minus most_recent-low's.
fn contrast(dose: &[Value], field: &str) -> Vec<f64> {
    (0..4)
        .map(|o| {
            mean(&values(probes(dose, "max_window-low", o), field))
                - mean(&values(probes(dose, "most_recent-low", o), field))
        })
        .collect()
}

/// `values` written by `f`, joined with commas.
fn joined(values: &[f64], f: &dyn Fn(f64) -> String) -> String {
    values.iter().map(|v| f(*v)).collect::<Vec<_>>().join(", ")
}

#[test]
fn the_dose_errata_follow_from_the_committed_data() {
    // (Lines wrap anywhere: compared with every run of white space as one space.)
    let errata =
        std::fs::read_to_string(root().join("docs/results/real-smollm2-dose/errata.md")).unwrap();
    let errata = errata.split_whitespace().collect::<Vec<_>>().join(" ");
    let says = |text: String| {
        assert!(errata.contains(&text), "errata.md does not say `{text}`");
    };
    let dose = records("real-smollm2-dose");
    let grid = records("real-smollm2");
    let base = &dose.iter().find(|r| r["kind"] == "base").unwrap()["probes"];

    // 1. The control against the schedule-matched comparator (the grid's 160-step runs).
    for order in [0, 1] {
        let control = probes(&dose, "control-low", order);
        let matched = probes(&grid, "max_window-low", order);
        assert_eq!(
            probes(&grid, "max_window-low", order)["step"],
            control["step"],
            "the comparator ends where the control does"
        );
        let c =
            mean(&values(matched, "knowledge_margin")) - mean(&values(control, "knowledge_margin"));
        says(format!("**{c:+.4}** (order {order})").replace("**+", "**"));
        let held =
            control["heldout_loss"].as_f64().unwrap() - matched["heldout_loss"].as_f64().unwrap();
        says(format!("**{held:+.4}**"));
        // What the report compared it with: the 480-step run at step 160.
        let unmatched = dose
            .iter()
            .find(|r| r["kind"] == "run" && r["run"] == "max_window-low" && r["order"] == order)
            .unwrap()["summary"]["earlier_probes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["step"] == 160)
            .unwrap();
        let old = mean(&values(unmatched, "knowledge_margin"))
            - mean(&values(control, "knowledge_margin"));
        says(format!("{old:+.4}"));
    }

    // 3. δ₂ on the base, and at the operating point (max_window-low at 480 steps).
    let base_delta = shift_costing(&values(base, "knowledge_margin"), 0.02);
    assert!(
        (base_delta - 0.0183).abs() < 1e-9,
        "δ₂ on the base: {base_delta}"
    );
    let at_480: Vec<Vec<f64>> = (0..4)
        .map(|o| values(probes(&dose, "max_window-low", o), "knowledge_margin"))
        .collect();
    let deltas: Vec<f64> = at_480.iter().map(|m| shift_costing(m, 0.02)).collect();
    says(format!("**{:.4}** nats/byte", mean(&deltas)));
    says(format!(
        "(per order {})",
        joined(&deltas, &|d| format!("{d:.4}"))
    ));
    let costs: Vec<f64> = at_480.iter().map(|m| cost_of_shift(m, 0.0183)).collect();
    says(format!("**{:.1} %**", mean(&costs)));
    says(format!(
        "(per order {} %)",
        joined(&costs, &|c| format!("{c:.1}"))
    ));

    // The contrast d per order at 480 steps and its 90 % and 95 % t intervals (df 3).
    let d = contrast(&dose, "knowledge_margin");
    let i90 = t_interval(&d, 0.10);
    let i95 = t_interval(&d, 0.05);
    says(format!("({:+.4} to {:+.4})", i90[0], i90[1]).replace("(+", "("));
    says(format!("({:+.4} to {:+.4})", i95[0], i95[1]).replace("(+", "("));
    let pm = mean(&deltas);
    assert!(
        i90[1] > pm && i95[1] > pm,
        "neither interval inside ±{pm}: inconclusive"
    );
    // 4. TOST at ±δ₀.₄ on the 90 % interval: neither inside nor wholly outside.
    let inside = i90[0] > -0.0025 && i90[1] < 0.0025;
    let outside = i90[0] > 0.0025 || i90[1] < -0.0025;
    assert!(
        !inside && !outside,
        "TOST at ±δ₀.₄ is inconclusive: {i90:?}"
    );
    says(
        format!("interval {:+.4} to {:+.4} lies neither", i90[0], i90[1])
            .replace("interval +", "interval "),
    );
    // The completion-margin contrast.
    let dc = contrast(&dose, "completion_margin");
    says(format!(
        "per order {}",
        joined(&dc, &|v| format!("{v:+.4}"))
    ));
    says(format!("mean **{:+.4}**", mean(&dc)));
    let ic = t_interval(&dc, 0.05);
    says(format!(
        "95 % t interval {:+.4} to {:+.4} (df 3)",
        ic[0], ic[1]
    ));

    // 5. The placebo's df 1: its critical t and half-width against δ₂.
    let t = student_t_quantile(0.975, 1.0);
    says(format!("critical t is {t:.2}"));
    let placebo: Vec<f64> = [(0, 2), (1, 3)]
        .iter()
        .map(|(a, b)| {
            mean(&values(
                probes(&dose, "max_window-low", *a),
                "knowledge_margin",
            )) - mean(&values(
                probes(&dose, "max_window-low", *b),
                "knowledge_margin",
            ))
        })
        .collect();
    let ip = t_interval(&placebo, 0.05);
    let half = (ip[1] - ip[0]) / 2.0;
    says(format!(
        "half-width **{half:.4}** nats/byte, {:.1} δ₂",
        half / 0.0183
    ));
}
