//! PNG plots of a grid (plotters): loss curves, probe curves, and the amax history of the
//! most saturated quantizer with every estimator's estimate.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use hif8lab_lab::grid::RunSummary;
use hif8lab_train::run::RunDir;
use plotters::prelude::*;

/// Where the font for labels comes from (Debian's fonts-dejavu-core).
const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers a sans-serif font once; false when none is installed.
fn font_ready() -> bool {
    static READY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *READY.get_or_init(|| {
        FONT_PATHS.iter().any(|p| {
            std::fs::read(p).ok().is_some_and(|bytes| {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
            })
        })
    })
}

/// The series' colours (matplotlib's ten, then black and a magenta), as 0xRRGGBB.
const COLORS: [u32; 12] = [
    0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd, 0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22,
    0x17becf, 0x000000, 0xff0078,
];

/// Series `i`'s colour.
fn colour(i: usize) -> RGBColor {
    let c = COLORS[i % COLORS.len()];
    RGBColor((c >> 16) as u8, (c >> 8) as u8, c as u8)
}

type Series = (String, Vec<(f64, f64)>);

fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<()> {
    let root = BitMapBackend::new(path, (1100, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let xs = series.iter().flat_map(|s| s.1.iter().map(|p| p.0));
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .filter(|v| v.is_finite())
        .collect();
    let (x0, x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    let (y0, y1) = ys
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
            (a.min(*y), b.max(*y))
        });
    // No point to draw (no series, or none with a finite value): empty axes, not an
    // infinite range (plotters would never finish its ticks).
    let (x0, x1, y0, y1) = if [x0, x1, y0, y1].iter().all(|v| v.is_finite()) {
        (x0, x1, y0, y1)
    } else {
        (0.0, 1.0, 0.0, 1.0)
    };
    let pad = ((y1 - y0) * 0.05).max(1e-6);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1.max(x0 + 1.0), (y0 - pad)..(y1 + pad))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = colour(i);
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    root.present()?;
    Ok(())
}

/// Draws the grid's plots into `<out>/plots/`; returns the files written (empty, with a
/// reason, when no font is installed).
pub fn grid_plots(out: &Path, summaries: &[RunSummary]) -> Result<(Vec<PathBuf>, Option<String>)> {
    if !font_ready() {
        return Ok((
            Vec::new(),
            Some("no DejaVuSans.ttf found (apt-get install fonts-dejavu-core)".into()),
        ));
    }
    let dir = out.join("plots");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files = Vec::new();
    // Loss curves.
    let loss: Vec<Series> = summaries
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                s.losses
                    .iter()
                    .enumerate()
                    .map(|(i, l)| (i as f64, *l))
                    .collect(),
            )
        })
        .collect();
    let p = dir.join("loss.png");
    line_chart(
        &p,
        "Training loss (continued training on the web corpus)",
        "step",
        "loss",
        &loss,
    )?;
    files.push(p);
    // Probe curves, each starting from the base model's score (continued runs start from
    // the base and are not scored again at step 0).
    let base = hif8lab_lab::grid::RunSummary::read(&out.join("base")).map(|s| s.final_probes());
    let probes: Vec<Series> = summaries
        .iter()
        .filter_map(|s| {
            let run = RunDir::new(out.join("runs").join(&s.name));
            let scored: Vec<(f64, f64)> = run
                .probes()
                .ok()?
                .iter()
                .map(|p| (p.step as f64, p.knowledge_acc_norm))
                .collect();
            let start = base
                .as_ref()
                .filter(|_| scored.first().is_none_or(|p| p.0 > 0.0))
                .map(|b| (0.0, b.knowledge_acc_norm));
            Some((s.name.clone(), start.into_iter().chain(scored).collect()))
        })
        .collect();
    let p = dir.join("probes.png");
    line_chart(
        &p,
        "Knowledge probe (acc_norm) during continued training",
        "step",
        "knowledge acc_norm",
        &probes,
    )?;
    files.push(p);
    // amax vs estimates for the most saturated quantizer of the most saturated QAT run
    // (most calls above the active estimate; within it, the largest overshoot).
    let worst = summaries
        .iter()
        .filter(|s| s.estimator != "none")
        .max_by_key(|s| {
            s.shadow_calls()
                .iter()
                .find(|(n, _)| *n == s.estimator)
                .map(|(_, v)| *v)
                .unwrap_or(0)
        });
    if let Some(run) = worst {
        files.extend(amax_plots(out, &dir, run)?);
    }
    Ok((files, None))
}

/// Amax against every estimator's estimate, on a log2 axis, for two quantizers of `run`: the
/// one whose amax overshot its estimate by the largest factor, and the one with the largest
/// amax of all (a real model's outlier channel).
fn amax_plots(out: &Path, dir: &Path, run: &RunSummary) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let trace = RunDir::new(out.join("runs").join(&run.name))
        .trace()
        .map_err(anyhow::Error::msg)?;
    let key = |r: &hif8lab_scaling::trace::TraceRecord| r.quantizer().to_string();
    // The quantizer whose amax overshot its estimate by the largest factor.
    let mut worst_ratio: std::collections::BTreeMap<String, f32> = Default::default();
    for r in &trace.records {
        let ratio = if r.est > 0.0 { r.amax / r.est } else { 0.0 };
        let e = worst_ratio.entry(key(r)).or_insert(0.0);
        *e = e.max(ratio);
    }
    // The quantizer with the largest amax of all: a real model's outlier channel.
    let mut largest: std::collections::BTreeMap<String, f32> = Default::default();
    for r in &trace.records {
        let e = largest.entry(key(r)).or_insert(0.0);
        *e = e.max(r.amax);
    }
    let pick = |m: &std::collections::BTreeMap<String, f32>| {
        m.iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(q, _)| q.clone())
    };
    let plots = [
        (pick(&worst_ratio), "amax.png", "largest amax/estimate"),
        (pick(&largest), "outlier.png", "largest amax: the outlier"),
    ];
    for (q, file, why) in plots {
        let Some(q) = q else { continue };
        let calls: Vec<_> = trace.records.iter().filter(|r| key(r) == q).collect();
        let log2 = |v: f32| f64::from(v.max(1e-30)).log2();
        let mut series: Vec<Series> = Vec::new();
        for name in &trace.header.estimators {
            series.push((
                format!("est: {name}"),
                calls
                    .iter()
                    .enumerate()
                    .filter_map(|(i, r)| r.shadow.get(name).map(|s| (i as f64, log2(s.est))))
                    .collect(),
            ));
        }
        // amax last, so it is drawn on top.
        series.push((
            "amax".into(),
            calls
                .iter()
                .enumerate()
                .map(|(i, r)| (i as f64, log2(r.amax)))
                .collect(),
        ));
        let p = dir.join(file);
        let title = format!("{}: {q} ({why}), log2 amax and estimates", run.name);
        line_chart(&p, &title, "quantizer call", "log2", &series)?;
        files.push(p);
    }
    Ok(files)
}

/// The trade-off chart of `replay --sweep`: per estimator, one point per setting (calls
/// above the estimate in %, mean SQNR loss in dB), joined in the sweep's order.
pub fn trade_off_chart(path: &Path, series: &[Series]) -> Result<()> {
    if !font_ready() {
        anyhow::bail!("no font for the plot's labels (install fonts-dejavu-core)");
    }
    line_chart(
        path,
        "Delayed scaling: exceedances against the cost of headroom",
        "calls above the estimate (%)",
        "mean SQNR loss vs the best scale (dB, modelled)",
        series,
    )
}

/// The probe calibration's dose–response: per damage family, the change in `score` (the
/// estimate and its 95 % bounds) against log10 of the damage's size.
pub fn calibration_chart(
    path: &Path,
    records: &[hif8lab_lab::calibrate::Record],
    score: hif8lab_train::eval::ProbeScore,
    y_label: &str,
) -> Result<()> {
    if !font_ready() {
        anyhow::bail!("no font for the plot's labels (install fonts-dejavu-core)");
    }
    let points = hif8lab_lab::calibrate::curve(records, score);
    let mut series: Vec<Series> = Vec::new();
    for family in ["noise", "hif8"] {
        let mut pts: Vec<_> = points
            .iter()
            .filter(|p| p.perturbation.family() == family && p.relative_rms > 0.0)
            .collect();
        if pts.is_empty() {
            continue;
        }
        pts.sort_by(|a, b| a.relative_rms.total_cmp(&b.relative_rms));
        let line = |f: &dyn Fn(&hif8lab_lab::calibrate::Point) -> f64| {
            pts.iter()
                .map(|p| (p.relative_rms.log10(), f(p)))
                .collect::<Vec<_>>()
        };
        series.push((family.to_owned(), line(&|p| p.change.value)));
        series.push((
            format!("{family}: 95 % low"),
            line(&|p| p.change.interval[0]),
        ));
        series.push((
            format!("{family}: 95 % high"),
            line(&|p| p.change.interval[1]),
        ));
    }
    series.push((
        "no change".into(),
        series
            .iter()
            .flat_map(|s| s.1.iter().map(|p| p.0))
            .fold(Vec::new(), |mut v, x| {
                v.push((x, 0.0));
                v.sort_by(|a: &(f64, f64), b| a.0.total_cmp(&b.0));
                v
            }),
    ));
    line_chart(
        path,
        &format!("Probe calibration: {y_label} against the damage to the MLP weights"),
        "log10 ‖ΔW‖/‖W‖ (damaged gate, up and down weights)",
        y_label,
        &series,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A chart with nothing finite to draw (runs without probes, a NaN loss) is drawn with
    /// empty axes: it once never finished (an infinite range for plotters' ticks).
    #[test]
    fn a_chart_of_no_points_is_drawn_and_ends() {
        if !font_ready() {
            eprintln!("no DejaVuSans.ttf: the chart cannot be drawn here");
            return;
        }
        let dir = std::env::temp_dir().join(format!("hif8lab-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (i, series) in [
            Vec::<Series>::new(),
            vec![("a".into(), Vec::new())],
            vec![("b".into(), vec![(0.0, f64::NAN), (1.0, f64::INFINITY)])],
        ]
        .iter()
        .enumerate()
        {
            let p = dir.join(format!("{i}.png"));
            line_chart(&p, "t", "x", "y", series).unwrap();
            assert!(std::fs::metadata(&p).unwrap().len() > 0);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
