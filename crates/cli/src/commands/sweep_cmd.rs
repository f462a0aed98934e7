//! `hif8lab replay --sweep KEY=V1,V2,…`: the delayed-scaling trade-off over a recorded trace
//! (see `hif8lab_scaling::sweep`), as a table, JSON or a PNG.

use std::path::Path;

use anyhow::{Context, Result, bail};
use hif8lab_scaling::import::Imported;
use hif8lab_scaling::sweep::{REFERENCE_ELEMENTS, SweepRow, sweep};
use hif8lab_scaling::{EstimatorSpec, ScalingConfig, ScalingPlan};

use crate::output::{Outcome, outln};

/// Splits a comma-separated list at top-level commas (commas inside parentheses stay).
pub fn split_top_level(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

/// The settings of `--sweep KEY=LIST`: the replay's config `base` with one setting varied,
/// each planned (the plan's range check is the only one; its error names the value).
pub fn settings(
    text: &str,
    base: &ScalingConfig,
    given: &[EstimatorSpec],
) -> Result<Vec<ScalingPlan>> {
    let (key, list) = text.split_once('=').with_context(|| {
        format!("--sweep {text:?}: expected KEY=V1,V2,… (window, estimators, target or margin)")
    })?;
    let values = split_top_level(list);
    if values.is_empty() || values.iter().any(|v| v.trim().is_empty()) {
        bail!("--sweep {text:?}: an empty value");
    }
    // At most this many settings: each replays the whole trace.
    const MOST: usize = 256;
    if values.len() > MOST {
        bail!(
            "--sweep {}: {} values, at most {MOST} (each replays the whole trace)",
            key.trim(),
            values.len()
        );
    }
    let first = given
        .first()
        .copied()
        .unwrap_or(EstimatorSpec::MaxWindow(None));
    let key = key.trim();
    let number = |v: &str| -> Result<f64> {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .with_context(|| format!("--sweep {key}: {v:?} is not a number"))
    };
    let configs: Vec<(String, ScalingConfig)> = match key {
        "window" | "windows" => {
            let estimators: Vec<EstimatorSpec> = if given.is_empty() {
                vec![
                    EstimatorSpec::MaxWindow(None),
                    EstimatorSpec::MeanWindow(None),
                ]
            } else {
                given.to_vec()
            };
            let windows = values
                .iter()
                .map(|v| match v.trim().parse::<usize>() {
                    Ok(w) => Ok((v.clone(), w)),
                    Err(_) => bail!("--sweep window: {v:?} is not a window length"),
                })
                .collect::<Result<Vec<_>>>()?;
            estimators
                .iter()
                .flat_map(|e| {
                    windows.iter().map(move |(v, w)| {
                        (
                            v.clone(),
                            ScalingConfig {
                                window: *w,
                                ..base.clone().comparing(&[*e])
                            },
                        )
                    })
                })
                .collect()
        }
        "estimator" | "estimators" => values
            .iter()
            .map(|v| {
                let e = v
                    .trim()
                    .parse::<EstimatorSpec>()
                    .with_context(|| format!("--sweep estimators: {v:?}"))?;
                Ok((v.clone(), base.clone().comparing(&[e])))
            })
            .collect::<Result<Vec<_>>>()?,
        "target" => values
            .iter()
            .map(|v| {
                let target = number(v)? as f32;
                Ok((
                    v.clone(),
                    ScalingConfig {
                        target,
                        ..base.clone().comparing(&[first])
                    },
                ))
            })
            .collect::<Result<Vec<_>>>()?,
        "margin" => values
            .iter()
            .map(|v| {
                let margin = v
                    .trim()
                    .parse::<i32>()
                    .with_context(|| format!("--sweep margin: {v:?} is not a whole number"))?;
                Ok((
                    v.clone(),
                    ScalingConfig {
                        margin,
                        ..base.clone().comparing(&[first])
                    },
                ))
            })
            .collect::<Result<Vec<_>>>()?,
        other => bail!("--sweep {other:?}: unknown setting (window, estimators, target or margin)"),
    };
    configs
        .into_iter()
        .map(|(v, c)| {
            c.plan()
                .map_err(|e| anyhow::anyhow!("--sweep {key}: {v:?}: {e}"))
        })
        .collect()
}

/// What the sweep prints: the trace it read, and how.
pub struct SweepOutput<'a> {
    /// The trace, as named.
    pub trace: &'a Path,
    /// One JSON array instead of the table.
    pub json: bool,
    /// Where to draw the trade-off (PNG), if anywhere.
    pub plot: Option<&'a Path>,
}

/// Runs the sweep and prints it.
pub fn run(output: &SweepOutput, imported: &Imported, settings: &[ScalingPlan]) -> Result<Outcome> {
    let rows = sweep(&imported.series, settings);
    if let Some(path) = output.plot {
        plot(path, &rows)?;
    }
    if output.json {
        outln!("{}", serde_json::to_string(&rows)?);
        return Ok(Outcome::Ok);
    }
    outln!(
        "sweep over {} ({}, {} quantizer(s)); format {}",
        output.trace.display(),
        imported.kind,
        imported.series.len(),
        settings
            .first()
            .map_or_else(|| "hif8".to_string(), |p| p.format().to_string())
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
