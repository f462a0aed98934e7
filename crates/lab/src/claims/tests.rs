//! Tests of claims: parts, spreads, verdicts, the headline.

use super::*;

#[test]
fn the_headline_counts_every_outcome() {
    let c = |v: Verdict3| {
        let mut c = Claim::new("x", vec![], serde_json::Value::Null);
        c.verdict = v;
        c
    };
    use Verdict3::*;
    let claims = [c(Holds), c(Holds), c(Inconclusive), c(Fails)];
    assert_eq!(
        headline(&claims, Verdict3::as_str),
        "2 hold, 1 inconclusive, 1 fails (of 4 claims)"
    );
    assert_eq!(
        headline(&claims, Verdict3::report_word),
        "2 reproduced, 1 inconclusive, 1 not reproduced (of 4 claims)"
    );
    assert_eq!(
        headline(&[c(Holds)], Verdict3::as_str),
        "1 holds (of 1 claim)"
    );
    assert_eq!(
        headline(&[c(Fails), c(Fails)], Verdict3::as_str),
        "2 fail (of 2 claims)"
    );
}

fn part(value: f64, spread: Spread, side: Side, threshold: f64) -> Part {
    Part {
        measured: "x".into(),
        unit: "%".into(),
        value,
        spread,
        side,
        threshold,
        test: "t".into(),
        variation: "v".into(),
    }
}

#[test]
fn one_threshold_decides_both_outcomes_and_each_is_reachable() {
    let seeds = |m: f64| Spread::Seeds(vec![m - 0.1, m, m + 0.1, m - 0.05, m + 0.05]);
    let v = |m: f64| part(m, seeds(m), Side::AtLeast, 2.0).verdict(ALPHA);
    assert_eq!(v(3.0), Verdict3::Holds);
    assert_eq!(v(1.0), Verdict3::Fails);
    assert_eq!(v(2.0), Verdict3::Inconclusive);
    let eq = |m: f64| part(m, seeds(m), Side::Within, 2.0).verdict(ALPHA);
    assert_eq!(eq(0.5), Verdict3::Holds);
    assert_eq!(eq(3.5), Verdict3::Fails);
    assert_eq!(eq(-3.5), Verdict3::Fails);
    assert_eq!(eq(1.95), Verdict3::Inconclusive);
}

#[test]
fn no_discordant_item_still_gives_an_interval() {
    let p = part(
        0.0,
        Spread::PairedExact {
            b: 0,
            c: 0,
            n: 108,
            scale: 100.0,
            deff: 1.0,
        },
        Side::Within,
        2.0,
    );
    let [lo, hi] = p.interval(0.95);
    assert!(lo < -3.0 && hi > 3.0, "[{lo}, {hi}]");
    // 108 identical items cannot show equivalence within 2 points.
    assert_eq!(p.verdict(ALPHA), Verdict3::Inconclusive);
}

#[test]
fn the_p_value_is_where_the_interval_reaches_the_threshold() {
    let p = part(3.0, Spread::Seeds(vec![2.6, 3.0, 3.4]), Side::AtLeast, 2.0);
    let q = p.p_value().unwrap();
    assert!(q > 0.0 && q < 0.2, "{q}");
    let [lo, _] = p.interval(1.0 - q);
    assert!((lo - 2.0).abs() < 1e-6, "{lo}");
}

#[test]
fn holm_judges_the_strongest_claim_at_alpha_over_m() {
    let strong = part(
        5.0,
        Spread::Seeds(vec![4.9, 5.0, 5.1, 5.0]),
        Side::AtLeast,
        2.0,
    );
    // Holds at 95 % alone, not at 97.5 %.
    let weak = part(
        2.6,
        Spread::Seeds(vec![2.0, 2.5, 3.0, 2.9, 2.6]),
        Side::AtLeast,
        2.0,
    );
    assert_eq!(weak.verdict(0.05), Verdict3::Holds);
    assert_eq!(weak.verdict(0.025), Verdict3::Inconclusive);
    let mut claims = vec![
        Claim::new("weak", vec![weak], serde_json::Value::Null),
        Claim::new("strong", vec![strong], serde_json::Value::Null),
    ];
    assert_eq!(claims[0].verdict, Verdict3::Holds, "alone, at 0.05");
    judge_family(&mut claims);
    assert_eq!(claims[1].verdict, Verdict3::Holds);
    assert!((claims[1].confidence.unwrap() - 0.975).abs() < 1e-12);
    // The weak claim is second in Holm's order: judged at 0.05 / 1.
    assert_eq!(claims[0].verdict, Verdict3::Holds);
    assert!((claims[0].confidence.unwrap() - 0.95).abs() < 1e-12);
    let s = claims[0].sentence();
    assert!(s.starts_with("holds: weak. Measured: x 2.60%"), "{s}");
    // Each interval says why it has its level: the first in Holm's order at half the 5 %.
    let g = claims[1].glance();
    assert!(
        g.contains("97.50 % interval")
            && g.contains("α = 0.025, Holm's share of 0.05 with 2 claims still open"),
        "{g}"
    );
    let g = claims[0].glance();
    assert!(
        g.contains("95 % interval") && g.contains("two-sided at α = 0.05]"),
        "{g}"
    );
    let eq = Claim::new(
        "eq",
        vec![part(
            0.0,
            Spread::Seeds(vec![-0.1, 0.0, 0.1]),
            Side::Within,
            2.0,
        )],
        serde_json::Value::Null,
    );
    let g = eq.glance();
    assert!(
        g.contains("90 % interval")
            && g.contains("an equivalence: two one-sided tests at α = 0.05"),
        "{g}"
    );
}
