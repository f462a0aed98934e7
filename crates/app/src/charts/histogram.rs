//! The histogram tab: log2|x·scale| of one quantizer call against the format's tiers.

use super::ShowFramed as _;
use super::*;

/// The histogram as CSV: `log2_lower,log2_upper,count,tier`, then the counts outside the bins.
pub fn histogram_csv(h: &HistView, format: Format) -> String {
    let mut out = csv::Writer::from_writer(format!("# {} step {}\n", h.id, h.step).into_bytes());
    let _ = out.write_record(["log2_lower", "log2_upper", "count", "tier"]);
    for (i, c) in h.hist.bins.iter().enumerate() {
        let lo = Log2Histogram::lower_log2(i);
        let (tier, _) = tier_of(format, (lo + 0.125).exp2() as f32);
        let _ = out.write_record([
            lo.to_string(),
            (lo + 0.25).to_string(),
            c.to_string(),
            tier.to_string(),
        ]);
    }
    for (name, v) in [
        ("zeros", h.hist.zeros),
        ("below", h.hist.below),
        ("above", h.hist.above),
        ("nonfinite", h.hist.nonfinite),
    ] {
        let _ = out.write_record(["", "", &v.to_string(), name]);
    }
    crate::state::csv_text(out)
}

/// The Histogram panel: log2|x·scale| of the chosen quantizer's input at the latest step.
pub(super) fn histogram(cx: &mut PanelCtx<'_>, ui: &mut egui::Ui, view: &RunView) {
    let ids: Vec<SeriesKey> = view.calls.keys().cloned().collect();
    let want = ui
        .horizontal_wrapped(|ui| {
            if !ids.is_empty() {
                choose_quantizer(cx, ui, &ids);
            }
            png_button(ui)
        })
        .inner;
    let Some(h) = &view.histogram else {
        ui.label(
            "No histogram yet: a live run bins the chosen quantizer's input at every step once quantization is on (saved runs keep only their statistics).",
        );
        return;
    };
    if let Some(s) = cx.selection.quantizer.as_ref().filter(|s| **s != h.id)
        && cx.live
    {
        ui.label(format!("Switching to {s}: the next step bins it."));
    }
    let by_tier = bars_by_tier(view.format, h);
    caption(ui, view, h, &by_tier);
    let target = f64::from(view.target).log2();
    let target_name = format!("target {} (the estimate lands here)", view.target);
    // One entry per tier (its bars and the lines where it begins share its colour), then the
    // target line: no colour stands for two things.
    let groups = tier_groups(view.format);
    let mut items: Vec<(String, Color32)> = groups
        .iter()
        .map(|g| (g.name.to_owned(), g.colour))
        .collect();
    items.push((target_name.clone(), AMAX));
    let shown = legend(ui, "histogram", &items);
    let on = |name: &str| shown.on(name);
    let r = plot("histogram")
        .height((ui.available_height() - 4.0).max(160.0))
        .x_axis_label("log2 |x·scale|")
        .y_axis_label("elements")
        .x_axis_formatter(|m, _| pow2_label(m.value))
        .show_framed(ui, |p| {
            for (tier, colour, _, bars) in by_tier {
                if on(tier) {
                    p.bar_chart(BarChart::new(tier, bars).color(colour));
                }
            }
            for g in &groups {
                if on(g.name) {
                    for (label, at) in &g.lines {
                        p.vline(VLine::new(*label, *at).color(g.colour));
                    }
                }
            }
            if on(&target_name) {
                p.vline(VLine::new(target_name.clone(), target).color(AMAX));
            }
            if view.format == Format::HiF8 {
                p.span(
                    Span::new("3-bit tier", three_bit_tier())
                        .axis(Axis::X)
                        .fill(super::tiers::GREEN.gamma_multiply(0.1)),
                );
            }
        });
    save_png(
        cx.exports,
        want,
        &view.name,
        &format!("histogram-{}", h.id),
        r.response.rect,
    );
}

/// A tier's bars: its name, colour, element count and bars.
type TierBars = (&'static str, Color32, u64, Vec<Bar>);

/// The histogram's bars grouped by the tier of `format` each bin falls in.
fn bars_by_tier(format: Format, h: &HistView) -> Vec<TierBars> {
    let mut by_tier: Vec<TierBars> = Vec::new();
    for (i, c) in h.hist.bins.iter().enumerate() {
        if *c == 0 {
            continue;
        }
        let lo = Log2Histogram::lower_log2(i);
        let (tier, colour) = tier_of(format, (lo + 0.125).exp2() as f32);
        let bar = Bar::new(lo + 0.125, *c as f64).width(0.25);
        match by_tier.iter_mut().find(|t| t.0 == tier) {
            Some(t) => {
                t.2 += c;
                t.3.push(bar);
            }
            None => by_tier.push((tier, colour, *c, vec![bar])),
        }
    }
    by_tier
}

/// What the histogram shows, in words: each tier's share, the binned range and what fell
/// outside it.
fn caption(ui: &mut egui::Ui, view: &RunView, h: &HistView, by_tier: &[TierBars]) {
    let total = h.hist.total();
    let share = |n: u64| 100.0 * n as f64 / total.max(1) as f64;
    let mut parts: Vec<String> = by_tier
        .iter()
        .map(|(t, _, n, _)| format!("{t} {:.2} %", share(*n)))
        .collect();
    if h.hist.zeros > 0 {
        parts.push(format!("exact zeros {:.2} %", share(h.hist.zeros)));
    }
    crate::glossary::label(
        ui,
        format!(
            "{} at step {}: {total} elements, log2|x·scale| in quarter binades, coloured by {} tier: {}.",
            h.id,
            h.step,
            view.format,
            parts.join(", ")
        ),
    );
    let binned = HIST_BINS / HIST_PER_BINADE;
    ui.label(
        RichText::new(format!(
            "Binned: 2^{} … 2^{} ({binned} binades); below {}, above {}, non-finite {}.",
            hif8lab_scaling::stats::HIST_LO,
            hif8lab_scaling::stats::HIST_HI,
            h.hist.below,
            h.hist.above,
            h.hist.nonfinite
        ))
        .small(),
    );
}

/// The binades of HiF8's 3-bit tier, from the format crate: log2 from its start to its top.
fn three_bit_tier() -> std::ops::RangeInclusive<f64> {
    let edges = hif8::tier_boundaries();
    let start = edges
        .iter()
        .position(|(_, t)| *t == hif8::Tier::Mantissa(3))
        .unwrap_or(0);
    let from = edges.get(start).map_or(-3, |e| e.0);
    let to = edges.get(start + 1).map_or(4, |e| e.0);
    f64::from(from)..=f64::from(to)
}
