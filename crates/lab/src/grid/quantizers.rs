//! The report's per-quantizer section: where the outliers are, how each estimator fares on
//! the same calls there, what overflowed or was clipped, and the quantization error there.
//! Drawn from the runs' per-quantizer figures ([`hif8lab_train::run::QuantizerSummary`]); absent
//! from reports whose data has none.

use std::fmt::Write as _;

use super::ResultRow;
use hif8lab_train::run::QuantizerSummary;

/// Quantizers listed, largest amax first.
pub const OUTLIERS_LISTED: usize = 8;

/// Outlier quantizers followed run by run.
pub const OUTLIERS_FOLLOWED: usize = 3;

fn first_replicate(r: &ResultRow) -> Option<&hif8lab_train::run::RunSummary> {
    r.seeds.first().filter(|s| !s.per_quantizer.is_empty())
}

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    match v.len() {
        0 => f32::NAN,
        n => v[n / 2],
    }
}

fn db(v: Option<f32>) -> String {
    v.map_or("–".into(), |d| format!("{d:.1}"))
}

/// The run whose first replicate names the outliers (most_recent-low, else max_window-low,
/// else the first with per-quantizer figures) and its quantizers, largest amax first.
fn lead(
    rows: &[ResultRow],
) -> Option<(
    &str,
    &hif8lab_train::run::RunSummary,
    Vec<&QuantizerSummary>,
)> {
    let (name, lead) = [
        super::CellKey::MOST_RECENT_LOW,
        super::CellKey::MAX_WINDOW_LOW,
    ]
    .iter()
    .filter_map(|k| rows.iter().find(|r| r.key == *k))
    .chain(rows)
    .find_map(|r| first_replicate(r).map(|s| (r.name.as_str(), s)))?;
    let mut by_amax: Vec<&QuantizerSummary> = lead.per_quantizer.iter().collect();
    by_amax.sort_by(|a, b| b.amax_max.total_cmp(&a.amax_max));
    Some((name, lead, by_amax))
}

/// The `n` outlier quantizers the report follows (largest amax first; none without
/// per-quantizer figures).
pub fn outlier_names(rows: &[ResultRow], n: usize) -> Vec<String> {
    lead(rows).map_or_else(Vec::new, |(_, _, by_amax)| {
        by_amax
            .iter()
            .take(n)
            .map(|q| q.quantizer.clone())
            .collect()
    })
}

/// The section (empty when no run has per-quantizer figures).
pub fn markdown(rows: &[ResultRow]) -> String {
    let Some((lead_name, lead, by_amax)) = lead(rows) else {
        return String::new();
    };
    let mut md = String::new();
    let typical = median(lead.per_quantizer.iter().map(|q| q.amax_max).collect());
    let _ = writeln!(
        md,
        "\n## Quantizers: where the outliers are\n\nThe {OUTLIERS_LISTED} quantizers with the largest amax in {lead_name} (first replicate, every traced call), against the median quantizer's largest amax ({typical:.3}); calls whose amax exceeded each estimator's estimate on the same calls:\n"
    );
    let names = &lead.estimators;
    let _ = writeln!(
        md,
        "| quantizer | calls | amax min | amax max | × median | {} |",
        names
            .iter()
            .map(|n| format!("above {n}"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(md, "|---|---|---|---|---|{}", "---|".repeat(names.len()));
    for q in by_amax.iter().take(OUTLIERS_LISTED) {
        let _ = writeln!(
            md,
            "| {} | {} | {:.3} | {:.3} | {:.1} | {} |",
            q.quantizer,
            q.calls,
            q.amax_min,
            q.amax_max,
            q.amax_max / typical,
            q.calls_above
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    let followed: Vec<&str> = by_amax
        .iter()
        .take(OUTLIERS_FOLLOWED)
        .map(|q| q.quantizer.as_str())
        .collect();
    let _ = writeln!(
        md,
        "\nThe {} largest ({}) in every QAT run (first replicate): calls above the run's own estimate / elements overflowed (HiF8: at or beyond its overflow threshold; E4M3: clipped to 448) / worst SQNR (dB); then the run's worst SQNR over all its quantizers:\n",
        followed.len(),
        followed.join(", ")
    );
    let _ = writeln!(md, "| run | {} | all: worst SQNR |", followed.join(" | "));
    let _ = writeln!(md, "|---|{}---|", "---|".repeat(followed.len()));
    for r in rows {
        let Some(s) = first_replicate(r) else {
            continue;
        };
        let active = s.estimators.iter().position(|e| *e == s.estimator);
        let cells: Vec<String> = followed
            .iter()
            .map(
                |name| match s.per_quantizer.iter().find(|q| q.quantizer == *name) {
                    Some(q) => {
                        let at = |v: &[u64]| active.and_then(|k| v.get(k)).copied().unwrap_or(0);
                        format!(
                            "{} / {} / {}",
                            at(&q.calls_above),
                            at(&q.overflow),
                            db(q.sqnr_worst_db)
                        )
                    }
                    None => "–".into(),
                },
            )
            .collect();
        let worst = s
            .per_quantizer
            .iter()
            .filter_map(|q| q.sqnr_worst_db)
            .min_by(f32::total_cmp);
        let _ = writeln!(md, "| {} | {} | {} |", r.name, cells.join(" | "), db(worst));
    }
    md
}
