//! The saturation tab: per role, a block × step heatmap of what each call counted.

use super::*;

fn heat_value(which: HeatValue, active: usize) -> impl Fn(&Call) -> u64 {
    move |c: &Call| match which {
        HeatValue::AboveEst => c.above_est.get(active).copied().unwrap_or(0),
        HeatValue::Overflow => c.overflow.get(active).copied().unwrap_or(0),
        HeatValue::Underflow => c.underflow,
        HeatValue::Sqnr => sqnr_shortfall(c.sqnr_db),
    }
}

/// An SQNR as its shortfall below [`SQNR_TOP_DB`] in hundredths of a dB (0 for none or
/// better): what the SQNR heatmap shows, worst call per cell.
pub fn sqnr_shortfall(db: Option<f32>) -> u64 {
    db.map_or(0, |d| {
        (100.0 * (f64::from(SQNR_TOP_DB) - f64::from(d)).clamp(0.0, f64::from(SQNR_TOP_DB))).round()
            as u64
    })
}

/// The SQNR back from a shortfall.
fn shortfall_db(v: u64) -> f64 {
    f64::from(SQNR_TOP_DB) - v as f64 / 100.0
}

fn heat_colour(v: u64, peak: u64) -> Color32 {
    if v == 0 {
        return Color32::from_gray(28);
    }
    let t = (v as f32 / peak.max(1) as f32).sqrt();
    Color32::from_rgb(
        (60.0 + 195.0 * t) as u8,
        40 + (120.0 * t * t) as u8,
        (90.0 * (1.0 - t)) as u8,
    )
}

/// Height of a heatmap row, in points.
const ROW_H: f32 = 14.0;
/// Width of the row-name column, in points.
const NAMES_W: f32 = 120.0;

/// The Saturation panel: per role, a block × step heatmap of the chosen count.
pub(super) fn saturation(
    st: &mut SaturationPanel,
    cx: &mut PanelCtx<'_>,
    ui: &mut egui::Ui,
    view: &RunView,
) {
    let want = ui
        .horizontal_wrapped(|ui| {
            ui.label("count:");
            ui.radio_value(
                &mut cx.selection.heat,
                HeatValue::AboveEst,
                "above estimate",
            );
            ui.radio_value(&mut cx.selection.heat, HeatValue::Overflow, "overflow");
            ui.radio_value(&mut cx.selection.heat, HeatValue::Underflow, "underflow");
            ui.radio_value(&mut cx.selection.heat, HeatValue::Sqnr, "SQNR")
                .on_hover_text("Quantization error of each call, 10·log10(Σx² / Σ(x − qdq(x))²) in dB at the scale it used; each cell shows its worst call. HiF8 rounds values above the estimate to fewer mantissa bits, so saturation shows here as lost dB.");
            png_button(ui)
        })
        .inner;
    let groups = view.rows_by_role();
    let steps = view.last_step() as usize + 1;
    let columns = steps.min(((ui.available_width() - NAMES_W).max(50.0)) as usize);
    let key = (view.revision, columns, cx.selection.heat);
    let fresh = st.cache.as_ref().is_some_and(|(k, _)| *k == key);
    if !fresh {
        let value = heat_value(cx.selection.heat, view.active);
        let sqnr = cx.selection.heat == HeatValue::Sqnr;
        let maps: Vec<Vec<u64>> = groups
            .iter()
            .map(|(_, rows)| {
                if sqnr {
                    view.heatmap_by(rows, columns, &value, u64::max)
                } else {
                    view.heatmap(rows, columns, &value)
                }
            })
            .collect();
        st.cache = Some((key, maps));
    }
    // Taken out while drawing (put back below), not cloned every frame.
    let (key, maps) = st.cache.take().unwrap_or((key, Vec::new()));
    let peak = maps.iter().flatten().copied().max().unwrap_or(0).max(1);
    let per_col = steps.div_ceil(columns.max(1));
    let sqnr = cx.selection.heat == HeatValue::Sqnr;
    if sqnr {
        ui.label(format!(
            "rows: quantizers (block.module), one map per role; columns: steps{}; colour: the worst SQNR of the cell, brightest = {:.1} dB, dark = {SQNR_TOP_DB} dB or better. Hover for exact values, click a row to open it in Amax.",
            if per_col > 1 { format!(", {per_col} per column (worst call)") } else { String::new() },
            shortfall_db(peak)
        ));
    } else {
        ui.label(format!(
            "rows: quantizers (block.module), one map per role; columns: steps{}; brightest = {peak} elements ({} estimator). Hover for exact values, click a row to open it in Amax.",
            if per_col > 1 { format!(", {per_col} per column (summed)") } else { String::new() },
            view.estimators.get(view.active).map(String::as_str).unwrap_or("active")
        ));
    }
    let top = ui.cursor().min;
    while st.textures.len() < groups.len() {
        let blank = egui::ColorImage::new([1, 1], vec![Color32::BLACK]);
        let name = format!("heatmap-{}", st.textures.len());
        st.textures.push(
            ui.ctx()
                .load_texture(name, blank, egui::TextureOptions::NEAREST),
        );
    }
    egui::ScrollArea::vertical().show(ui, |ui| {
        for (g, ((role, rows), map)) in groups.iter().zip(&maps).enumerate() {
            let role_name = match role.as_str() {
                "W" => "weights (W)",
                "A" => "activations (A)",
                "G" => "gradients (G)",
                _ => "series",
            };
            let head = if sqnr {
                let calls: Vec<f32> = rows
                    .iter()
                    .flat_map(|id| view.calls[id].iter().filter_map(|c| c.sqnr_db))
                    .collect();
                match hif8lab_train::run::SqnrSummary::of(&calls) {
                    Some(s) => format!(
                        "{role_name}: SQNR median {:.1} dB, worst {:.1} dB",
                        s.median_db, s.worst_db
                    ),
                    None => format!("{role_name}: no SQNR recorded"),
                }
            } else {
                format!("{role_name}: {} in all", map.iter().sum::<u64>())
            };
            ui.label(RichText::new(head).strong());
            if !fresh || st.textures[g].size() != [columns, rows.len()] {
                let pixels: Vec<Color32> = map.iter().map(|v| heat_colour(*v, peak)).collect();
                st.textures[g].set(
                    egui::ColorImage::new([columns, rows.len()], pixels),
                    egui::TextureOptions::NEAREST,
                );
            }
            let (rect, response) = ui.allocate_exact_size(
                egui::vec2(ui.available_width(), rows.len() as f32 * ROW_H),
                egui::Sense::click(),
            );
            let painter = ui.painter_at(rect);
            let image_rect =
                egui::Rect::from_min_max(egui::pos2(rect.left() + NAMES_W, rect.top()), rect.max);
            painter.image(
                st.textures[g].id(),
                image_rect,
                egui::Rect::from_min_max(egui::pos2(0.0, 0.0), egui::pos2(1.0, 1.0)),
                Color32::WHITE,
            );
            for (i, id) in rows.iter().enumerate() {
                let short = match id {
                    SeriesKey::Quantizer(q) => format!("block{}.{}", q.block, q.module),
                    SeriesKey::Imported(name) => name.clone(),
                };
                painter.text(
                    egui::pos2(rect.left() + 2.0, rect.top() + (i as f32 + 0.5) * ROW_H),
                    egui::Align2::LEFT_CENTER,
                    short,
                    egui::FontId::monospace(crate::theme::MIN_TEXT_PX),
                    ui.visuals().text_color(),
                );
            }
            if let Some(pos) = response.hover_pos()
                && image_rect.contains(pos)
            {
                let row = ((pos.y - rect.top()) / ROW_H) as usize;
                let col =
                    (((pos.x - image_rect.left()) / image_rect.width()) * columns as f32) as usize;
                if let (Some(id), Some(v)) = (rows.get(row), map.get(row * columns + col)) {
                    let first = col * steps / columns;
                    let last = ((col + 1) * steps / columns).max(first + 1) - 1;
                    let span = if first == last {
                        format!("step {first}")
                    } else {
                        format!("steps {first}–{last}")
                    };
                    let calls = view.calls[id]
                        .iter()
                        .filter(|c| (first as u64..=last as u64).contains(&c.step))
                        .count();
                    let what = if sqnr {
                        format!("worst SQNR {:.2} dB", shortfall_db(*v))
                    } else {
                        format!("{v} elements")
                    };
                    response
                        .clone()
                        .on_hover_text(format!("{id}, {span}: {what} over {calls} calls"));
                    if response.clicked() {
                        cx.selection.quantizer = Some(id.clone());
                        cx.selection.tab = Tab::Amax;
                    }
                }
            }
        }
    });
    if let Some(first) = view.qat_from {
        ui.label(
            RichText::new(format!(
                "columns run from step 0 (left) to step {} (right); quantization from step {first}",
                steps - 1
            ))
            .small(),
        );
    }
    st.cache = Some((key, maps));
    let bottom = ui.min_rect().max;
    save_png(
        cx.exports,
        want,
        &view.name,
        "saturation",
        egui::Rect::from_min_max(top, bottom),
    );
}
