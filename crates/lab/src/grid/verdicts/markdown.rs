//! The verdicts section of a grid report.

/// The verdicts section of a report: the rules, one table row and one sentence per claim.
pub fn claims_markdown(claims: &[crate::claims::Claim]) -> String {
    use crate::claims::number;
    use std::fmt::Write as _;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## Verdicts: {}\n\nEach claim, its threshold and the reason for the threshold were fixed before the data (docs/results/claims.md). A claim is **reproduced** when the interval of its statistic lies on the claim's side of the threshold, **not reproduced** when it lies wholly on the other side (the same threshold decides both), and **inconclusive** otherwise. Claims are judged together with Holm's step-down adjustment at a family-wise 5 %: the claim with the smallest p-value is judged on its 1 − 0.05/{} interval, the next on 1 − 0.05/{}, …; equivalence claims (\"within\") use two one-sided tests, i.e. the interval at 1 − 2α. p-values are against the threshold and Holm-adjusted. \"Detectable\" is the smallest distance from the threshold the claim's statistic would detect with 80 % power.\n\n| claim | verdict | statistic | interval | threshold | p (Holm) | detectable | test |\n|---|---|---|---|---|---|---|---|",
        crate::claims::headline(claims, crate::stats::Verdict3::report_word),
        claims.len(),
        claims.len().saturating_sub(1).max(1)
    );
    let not_judged = claims
        .iter()
        .filter(|c| c.verdict == crate::stats::Verdict3::NotJudged)
        .count();
    let not_tested = claims
        .iter()
        .filter(|c| c.verdict == crate::stats::Verdict3::NotTested)
        .count();
    if not_tested > 0 {
        let table_head = md.rfind("\n\n| claim |").unwrap_or(md.len());
        md.insert_str(
            table_head,
            &format!(
                " {not_tested} claim(s) are **not tested at this scale**: the manipulation check \
                 (above) finds that the arms they compare do not differ in what the claim is \
                 about, so there is nothing for them to test; their statistic is shown, not judged."
            ),
        );
    }
    if not_judged > 0 {
        // Said above the table's rows only when it applies (a grid of every run has none).
        let table_head = md.rfind("\n\n| claim |").unwrap_or(md.len());
        md.insert_str(
            table_head,
            &format!(
                " {not_judged} claim(s) are **not judged**: the runs they need are missing, so \
                 there is no data behind them and no verdict."
            ),
        );
    }
    for c in claims {
        let interval = if c.confidence.is_none() {
            "– (one run: no interval)".to_string()
        } else if c.verdict == crate::stats::Verdict3::NotTested {
            "– (not tested)".to_string()
        } else if c.interval.iter().any(|v| v.is_nan()) {
            "– (not judged)".to_string()
        } else {
            format!(
                "[{}, {}] ({:.2} %)",
                number(c.interval[0], &c.unit),
                number(c.interval[1], &c.unit),
                c.confidence.unwrap_or(f64::NAN) * 100.0
            )
        };
        let _ = writeln!(
            md,
            "| {} | **{}** | {}: {} | {} | {} | {} | {} | {} |",
            c.claim,
            c.verdict.report_word(),
            c.measured,
            number(c.statistic, &c.unit),
            interval,
            c.threshold,
            c.p_value.map_or("–".into(), |p| c.p_text(p)),
            c.detectable.map_or("–".into(), |d| number(d, &c.unit)),
            c.test
        );
    }
    md.push('\n');
    for c in claims {
        let evidence = match &c.evidence {
            serde_json::Value::String(s) if !s.is_empty() => format!(" {s}"),
            serde_json::Value::String(_) | serde_json::Value::Null => String::new(),
            v => format!(" {v}"),
        };
        if matches!(
            c.verdict,
            crate::stats::Verdict3::NotJudged | crate::stats::Verdict3::NotTested
        ) {
            // No statistic to state, only why ([`missing`]: "not judged: …").
            let _ = writeln!(md, "- **{}** — {}", c.claim, evidence.trim());
            continue;
        }
        let _ = writeln!(
            md,
            "- **{}** — {}. {}.{evidence}",
            c.claim,
            c.verdict.report_word(),
            std::iter::once(c.measured_words())
                .chain(c.parts.iter().cloned())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    md
}
