//! The lesson "a real model's outliers": lesson 1's claims asked of a real pretrained model
//! (SmolLM2-135M-Instruct, continued with HiF8 QAT on the MLP projections of its middle
//! blocks by `hif8lab grid --preset real-smollm2`), on the quantizer where its outlier
//! channel lives. Nothing is trained: the claims are judged from a grid's data file
//! ([`GridData`]) — the committed one (`docs/results/real-smollm2/runs.jsonl.gz`, shipped
//! with the program, so the browser shows it too) or a grid folder's own.
//!
//! The outlier quantizer is found in the data (the largest amax of the first data order's
//! most_recent run), never named here. Claims use the first data order; the second one's
//! figures go into the evidence as a replication.

use super::{Claim, LessonReport};
use crate::claims::{Part, Side};
use crate::grid::{CellKey, GridData, GridDataRun};
use hif8lab_train::run::QuantizerSummary;

/// The committed real-model grid's data file.
pub const COMMITTED_FILE: &str = "docs/results/real-smollm2/runs.jsonl.gz";

/// Compiled into native builds; the browser fetches it from beside its page
/// (`lessons/real-smollm2.jsonl.gz`) and hands it to [`committed_from`].
#[cfg(not(target_arch = "wasm32"))]
static COMMITTED: &[u8] = include_bytes!("../../../../docs/results/real-smollm2/runs.jsonl.gz");

/// The committed real-model grid's data.
#[cfg(not(target_arch = "wasm32"))]
pub fn committed() -> Result<GridData, super::LessonDataError> {
    committed_from(COMMITTED)
}

/// The committed real-model grid's data, from the file's `bytes`.
pub fn committed_from(bytes: &[u8]) -> Result<GridData, super::LessonDataError> {
    GridData::from_gzip(COMMITTED_FILE, bytes)
        .map_err(|e| super::LessonDataError::new(COMMITTED_FILE, e.to_string()))
}

/// The runs the lesson reads, by their grid names.
const MR: CellKey = CellKey::MOST_RECENT_LOW;
const MW: CellKey = CellKey::MAX_WINDOW_LOW;
const E4: CellKey = CellKey::MOST_RECENT_LOW_E4M3;

fn run(data: &GridData, key: CellKey, order: usize) -> Option<&GridDataRun> {
    let name = key.name();
    data.runs
        .iter()
        .find(|r| r.run == name && r.order == order && r.base_seed == 0)
}

/// The index of the run's first estimator of the kind `name` names.
fn estimator(r: &GridDataRun, name: &str) -> Option<usize> {
    hif8lab_scaling::EstimatorKind::of(name)?.position_in(&r.summary.estimators)
}

/// The quantizer with the largest amax, its amax and the median over the quantizers of
/// each one's largest amax.
pub fn outlier(table: &[QuantizerSummary]) -> Option<(&QuantizerSummary, f64)> {
    let top = table
        .iter()
        .max_by(|a, b| a.amax_max.total_cmp(&b.amax_max))?;
    let maxima: Vec<f32> = table.iter().map(|q| q.amax_max).collect();
    Some((top, f64::from(hif8lab_scaling::replay::median(&maxima))))
}

/// One run's figures on quantizer `q`: calls above the estimate and overflowed elements of
/// the estimator named `prefix…`.
struct Figures {
    calls_above: u64,
    overflow: u64,
    amax_max: f64,
}

fn figures(source: &str, r: &GridDataRun, q: &str, prefix: &str) -> Result<Figures, String> {
    let at = format!("{source}: run {} (data order {})", r.run, r.order);
    let k = estimator(r, prefix).ok_or_else(|| {
        format!(
            "{at}: field 'summary.estimators' ({}) has no estimator {prefix}",
            r.summary.estimators.join(", ")
        )
    })?;
    let s = r
        .summary
        .per_quantizer
        .iter()
        .find(|s| s.quantizer == q)
        .ok_or_else(|| format!("{at}: field 'summary.per_quantizer' has no quantizer {q}"))?;
    let count = |v: &[u64], field: &str| {
        v.get(k).copied().ok_or_else(|| {
            format!("{at}: field 'summary.per_quantizer.{field}' of {q} lacks {prefix}'s count")
        })
    };
    Ok(Figures {
        calls_above: count(&s.calls_above, "calls_above")?,
        overflow: count(&s.overflow, "overflow")?,
        amax_max: f64::from(s.amax_max),
    })
}

/// Judges the lesson's claims from `data` (`source` names it in errors): it needs the
/// grid's most_recent-low, max_window-low and most_recent-low-e4m3 runs with their
/// per-quantizer figures (a grid with `continue.e4m3 = true`).
pub fn judge(source: &str, data: &GridData) -> Result<LessonReport, super::LessonDataError> {
    let err = |m: String| super::LessonDataError::new(source, m);
    let need = |key: CellKey| {
        run(data, key, 0).ok_or_else(|| {
            err(format!("{source}: no run {} (the lesson needs a grid with continue.e4m3 = true, like real-smollm2)", key.name()))
        })
    };
    let (mr, mw, e4) = (need(MR)?, need(MW)?, need(E4)?);
    // Each run's outlier once: the quantizer, its largest amax ÷ the median quantizer's.
    let [o_mr, o_mw] = [mr, mw].map(|r| outlier(&r.summary.per_quantizer));
    let (top, median) = o_mr.ok_or_else(|| {
        err(format!(
            "{source}: run {} has no per-quantizer figures (written by `hif8lab grid`)",
            MR.name()
        ))
    })?;
    let q = top.quantizer.clone();
    let ratio = |o: Option<(&QuantizerSummary, f64)>| {
        o.map_or(f64::NAN, |(t, m)| {
            f64::from(t.amax_max) / m.max(f64::MIN_POSITIVE)
        })
    };
    let ratios = [ratio(o_mr), ratio(o_mw)];
    let tops = [o_mr, o_mw].map(|o| o.map(|(t, _)| t.quantizer.clone()));
    let same_top = tops
        .iter()
        .filter(|t| t.as_deref() == Some(q.as_str()))
        .count();
    let f_mr = figures(source, mr, &q, "most_recent").map_err(err)?;
    let f_mw = figures(source, mw, &q, "max_window").map_err(err)?;
    let f_mw_in_mr = figures(source, mr, &q, "max_window").map_err(err)?;
    let f_e4 = figures(source, e4, &q, "most_recent").map_err(err)?;
    let f_mw_e4 = run(data, CellKey::MAX_WINDOW_LOW_E4M3, 0)
        .map(|r| figures(source, r, &q, "max_window"))
        .transpose()
        .map_err(err)?;
    // The second data order, as a replication (evidence only).
    let second = |key: CellKey, prefix: &str| {
        run(data, key, 1)
            .and_then(|r| figures(source, r, &q, prefix).ok())
            .map(|f| serde_json::json!({"calls_above_est": f.calls_above, "overflow": f.overflow, "amax_max": f.amax_max}))
    };
    let model = data
        .base_model
        .clone()
        .unwrap_or_else(|| "a base pretrained here".into());
    let second_order = serde_json::json!({"most_recent": second(MR, "most_recent"), "max_window": second(MW, "max_window")});
    let mut claims = vec![
        stands_out_claim(&q, (top, median), ratios, (same_top, &tops)),
        exceeded_claim(&q, [&f_mr, &f_mw, &f_mw_in_mr], second_order),
    ];
    let summary = format!(
        "In {model}, continued with HiF8 QAT, {q}'s input reached amax {:.0}, {:.0}× the median quantizer's largest ({median:.1}). There most_recent was exceeded on {} calls, max_window(64) on {} (on the same calls of the most_recent run: {}); HiF8 let none overflow ({} and {} elements); E4M3 at target 448 clipped {} elements under most_recent{}.",
        top.amax_max,
        f64::from(top.amax_max) / median.max(f64::MIN_POSITIVE),
        f_mr.calls_above,
        f_mw.calls_above,
        f_mw_in_mr.calls_above,
        f_mr.overflow,
        f_mw.overflow,
        f_e4.overflow,
        f_mw_e4.as_ref().map_or(String::new(), |f| format!(
            " and {} under max_window(64)",
            f.overflow
        )),
    );
    claims.extend(format_claims(&q, &f_mr, &f_mw, &f_e4, f_mw_e4.as_ref()));
    crate::claims::judge_family(&mut claims);
    Ok(LessonReport {
        lesson: "outliers".into(),
        claims,
        summary,
        runs: Vec::new(),
    })
}

/// Claim 1: one quantizer's input stands out in both runs.
fn stands_out_claim(
    q: &str,
    (top, median): (&QuantizerSummary, f64),
    ratios: [f64; 2],
    (same_top, tops): (usize, &[Option<String>; 2]),
) -> Claim {
    let stand_out = ratios[0].min(ratios[1]);
    Claim::new(
        &format!(
            "one quantizer's input stands out: {q}'s largest amax is at least 100× the median quantizer's, in the most_recent and the max_window(64) run alike"
        ),
        vec![
            Part::exact(
                "largest amax ÷ the median quantizer's largest amax (the smaller of the two runs)",
                "×",
                stand_out,
                Side::AtLeast,
                100.0,
            ),
            Part::exact(
                &format!("runs whose largest amax is {q}'s"),
                " runs",
                same_top as f64,
                Side::AtLeast,
                2.0,
            ),
        ],
        serde_json::json!({"quantizer": q, "amax_max": top.amax_max, "median_of_maxima": median,
            "ratio": {"most_recent": ratios[0], "max_window": ratios[1]}, "tops": tops}),
    )
}

/// Claim 2: on the outlier, most_recent's estimate is exceeded far more often than
/// max_window(64)'s; `second_order` is the replication's evidence.
fn exceeded_claim(
    q: &str,
    [f_mr, f_mw, f_mw_in_mr]: [&Figures; 3],
    second_order: serde_json::Value,
) -> Claim {
    Claim::new(
        &format!(
            "on {q}, most_recent's estimate is exceeded on at least 4× as many calls as max_window(64)'s (and on at least 10)"
        ),
        vec![
            Part::exact(
                &format!("calls above the estimate on {q}, most_recent ÷ max_window(64)"),
                "×",
                f_mr.calls_above as f64 / f_mw.calls_above.max(1) as f64,
                Side::AtLeast,
                4.0,
            ),
            Part::exact(
                &format!("most_recent's calls above its estimate on {q}"),
                " calls",
                f_mr.calls_above as f64,
                Side::AtLeast,
                10.0,
            ),
        ],
        serde_json::json!({"most_recent_calls_above_est": f_mr.calls_above, "max_window_calls_above_est": f_mw.calls_above,
            "same_calls_shadow": {"max_window_in_most_recent_run": f_mw_in_mr.calls_above},
            "second_data_order": second_order}),
    )
}

/// What each format does with the outlier's excursions: HiF8 (target 15) lets none overflow,
/// E4M3 (target 448, saturating) clips.
fn format_claims(
    q: &str,
    f_mr: &Figures,
    f_mw: &Figures,
    f_e4: &Figures,
    f_mw_e4: Option<&Figures>,
) -> Vec<Claim> {
    vec![
        Claim::new(
            &format!(
                "HiF8 (target 15) keeps {q}'s excursions: none of its elements overflowed under either estimator"
            ),
            vec![
                Part::exact(
                    &format!("most_recent's calls above its estimate on {q}"),
                    " calls",
                    f_mr.calls_above as f64,
                    Side::AtLeast,
                    1.0,
                ),
                Part::exact(
                    &format!("elements of {q} that overflowed (both HiF8 runs)"),
                    " elements",
                    (f_mr.overflow + f_mw.overflow) as f64,
                    Side::Below,
                    1.0,
                ),
            ],
            serde_json::json!({"overflow": {"most_recent": f_mr.overflow, "max_window": f_mw.overflow}}),
        ),
        Claim::new(
            &format!(
                "E4M3 (target = max, 448, saturating) clips {q}'s excursions under most_recent (clipped elements > 0)"
            ),
            vec![Part::exact(
                &format!("E4M3 elements of {q} clipped"),
                " elements",
                f_e4.overflow as f64,
                Side::AtLeast,
                1.0,
            )],
            serde_json::json!({"clipped": {"most_recent": f_e4.overflow, "max_window": f_mw_e4.map(|f| f.overflow)},
            "calls_above_est": f_e4.calls_above}),
        ),
    ]
}
