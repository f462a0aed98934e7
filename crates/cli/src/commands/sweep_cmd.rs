//! `hif8lab replay --sweep KEY=V1,V2,…`: the delayed-scaling trade-off over a recorded trace
//! (see `hif8lab_scaling::sweep`), as a table, JSON or a PNG.

use std::path::Path;

use anyhow::{Context, Result, bail};
use hif8lab_scaling::EstimatorSpec;
use hif8lab_scaling::config::{MARGIN_RANGE, WINDOW_MAX};
use hif8lab_scaling::import::Imported;
use hif8lab_scaling::replay::ReplayOptions;
use hif8lab_scaling::sweep::{REFERENCE_ELEMENTS, SweepRow, SweepSetting, sweep};

use crate::commands::scaling_cmds::{ReplayArgs, split_top_level};
use crate::output::{Outcome, outln};

/// The settings of `--sweep KEY=LIST`.
pub fn settings(
    text: &str,
    args: &ReplayArgs,
    given: &[EstimatorSpec],
) -> Result<Vec<SweepSetting>> {
    let (key, list) = text.split_once('=').with_context(|| {
        format!("--sweep {text:?}: expected KEY=V1,V2,… (window, estimators, target or margin)")
    })?;
    let values = split_top_level(list);
    if values.is_empty() || values.iter().any(|v| v.trim().is_empty()) {
        bail!("--sweep {text:?}: an empty value");
    }
    let at = |estimator, window, target, margin| SweepSetting {
        estimator,
        window,
        target,
        margin,
    };
    let first = given
        .first()
        .copied()
        .unwrap_or(EstimatorSpec::MaxWindow(None));
    let out = match key.trim() {
        "window" | "windows" => {
            let windows = values
                .iter()
                .map(|v| match v.trim().parse::<usize>() {
                    Ok(w) if (1..=WINDOW_MAX).contains(&w) => Ok(w),
                    _ => bail!("--sweep window: {v:?} is not a window in 1..={WINDOW_MAX}"),
                })
                .collect::<Result<Vec<_>>>()?;
            let estimators: Vec<EstimatorSpec> = if given.is_empty() {
                vec![
                    EstimatorSpec::MaxWindow(None),
                    EstimatorSpec::MeanWindow(None),
                ]
            } else {
                given.to_vec()
            };
            estimators
                .iter()
                .flat_map(|e| {
                    windows
                        .iter()
                        .map(move |w| at(*e, *w, args.target, args.margin))
                })
                .collect()
        }
        "estimator" | "estimators" => values
            .iter()
            .map(|v| {
                v.trim()
                    .parse::<EstimatorSpec>()
                    .map(|e| at(e, args.window, args.target, args.margin))
                    .with_context(|| format!("--sweep estimators: {v:?}"))
            })
            .collect::<Result<Vec<_>>>()?,
        "target" => values
            .iter()
            .map(|v| match v.trim().parse::<f32>() {
                Ok(t) if t.is_finite() && t > 0.0 => Ok(at(first, args.window, t, args.margin)),
                _ => bail!("--sweep target: {v:?} is not a finite number > 0"),
            })
            .collect::<Result<Vec<_>>>()?,
        "margin" => values
            .iter()
            .map(|v| match v.trim().parse::<i32>() {
                Ok(m) if MARGIN_RANGE.contains(&m) => Ok(at(first, args.window, args.target, m)),
                _ => bail!(
                    "--sweep margin: {v:?} is not a margin in {}..={}",
                    MARGIN_RANGE.start(),
                    MARGIN_RANGE.end()
                ),
            })
            .collect::<Result<Vec<_>>>()?,
        other => bail!("--sweep {other:?}: unknown setting (window, estimators, target or margin)"),
    };
    Ok(out)
}

/// Runs the sweep and prints it.
pub fn run(
    args: &ReplayArgs,
    imported: &Imported,
    options: &ReplayOptions,
    settings: &[SweepSetting],
) -> Result<Outcome> {
    let rows = sweep(&imported.series, options, settings);
    if let Some(path) = &args.plot {
        plot(path, &rows)?;
    }
    if args.json {
        outln!("{}", serde_json::to_string(&rows)?);
        return Ok(Outcome::Ok);
    }
    outln!(
        "sweep over {} ({}, {} quantizer(s)); format {}",
        args.trace.display(),
        imported.kind,
        imported.series.len(),
        options.format
    );
    outln!(
        "calls above: amax > estimate; overflowing calls: amax·scale ≥ the overflow threshold (exact). Modelled on a {REFERENCE_ELEMENTS}-element normal tensor with the call's amax (the trace holds no tensors): overflowed elements per million, SQNR loss vs the best scale (mean, worst). headroom: median estimate ÷ amax.\n"
    );
    outln!(
        "  {:<18} {:>6} {:>8} {:>6} {:>8} {:>12} {:>11} {:>9} {:>10} {:>9} {:>9}",
        "estimator",
        "window",
        "target",
        "margin",
        "calls",
        "calls above",
        "% of calls",
        "overflow",
        "ppm (mod)",
        "SQNR dB",
        "worst dB"
    );
    for r in &rows {
        outln!(
            "  {:<18} {:>6} {:>8} {:>6} {:>8} {:>12} {:>10.2}% {:>9} {:>10.1} {:>9.3} {:>9.2}   headroom {:.2}",
            r.estimator,
            r.window,
            r.target,
            r.margin,
            r.calls,
            r.calls_above_est,
            100.0 * r.calls_above_est as f64 / r.calls.max(1) as f64,
            r.overflowing_calls,
            r.overflow_ppm_modelled,
            r.sqnr_loss_mean_db,
            r.sqnr_loss_worst_db,
            r.median_headroom
        );
    }
    Ok(Outcome::Ok)
}

/// The trade-off: per estimator, calls above the estimate (%) against the mean SQNR loss.
fn plot(path: &Path, rows: &[SweepRow]) -> Result<()> {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in rows {
        let family = r
            .estimator
            .split('(')
            .next()
            .unwrap_or(&r.estimator)
            .to_string();
        let point = (
            100.0 * r.calls_above_est as f64 / r.calls.max(1) as f64,
            r.sqnr_loss_mean_db,
        );
        match series.iter_mut().find(|s| s.0 == family) {
            Some(s) => s.1.push(point),
            None => series.push((family, vec![point])),
        }
    }
    crate::commands::plots::trade_off_chart(path, &series)
        .with_context(|| format!("--plot {}", path.display()))
}
