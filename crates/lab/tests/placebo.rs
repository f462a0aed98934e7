//! Every grid report carries its placebo (one arm against itself in another data order), at
//! item level (descriptive) and with the order as the unit, computed from the committed data.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::PathBuf;

use hif8lab_lab::grid;

fn report(name: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/results")
        .join(name);
    grid::recompute(&dir).unwrap().markdown()
}

#[test]
fn the_placebo_is_in_every_report_at_both_levels() {
    let small = report("grid-small");
    let placebo = small.split("## Placebo").nth(1).expect("a placebo section");
    // 5 orders × 3 pretrainings: 2 disjoint pairs of orders in each pretraining.
    assert!(
        placebo.contains("Replicate level (6 disjoint pair(s)"),
        "{placebo}"
    );
    assert_eq!(
        placebo
            .matches("not significant, as a placebo must be")
            .count(),
        2,
        "{placebo}"
    );
    // At item level the same placebo's held-out loss comes out "significant" (exact
    // sign-flip over 8 window blocks): those tests condition on the trained models.
    assert!(
        placebo.contains("8 clusters, exact: all 256 sign patterns: p = 0.023"),
        "{placebo}"
    );
    // Two orders: no replicate-level test, said so.
    let real = report("real-smollm2");
    assert!(real.contains("at least 4 orders are needed"), "{real}");
}
