//! The saturation tab: per role, a block × step heatmap of what each call counted.

use super::*;
use hif8lab_scaling::Role;

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

/// A heatmap cell's colour: none (0) in a grey apart from both the page and the scale's
/// darkest end in either theme, then dark violet through red to yellow.
pub fn heat_colour(v: u64, peak: u64, dark: bool) -> Color32 {
    if v == 0 {
        return zero_cell(dark);
    }
    let t = (v as f32 / peak.max(1) as f32).sqrt();
    Color32::from_rgb(
        (60.0 + 195.0 * t) as u8,
        40 + (120.0 * t * t) as u8,
        (90.0 * (1.0 - t)) as u8,
    )
}

/// The colour of a cell with nothing counted: lighter than the dark theme's page, darker
/// than the light theme's.
pub fn zero_cell(dark: bool) -> Color32 {
    if dark {
        Color32::from_gray(70)
    } else {
        Color32::from_gray(192)
    }
}

/// Least height of a heatmap row, in points (its name at 11 px); rows grow to fill the
/// panel's height, up to [`ROW_H_MAX`].
const ROW_H: f32 = 14.0;
/// Most height of a heatmap row.
const ROW_H_MAX: f32 = 36.0;
/// Width of the row-name column, in points.
const NAMES_W: f32 = 120.0;

/// The Saturation panel: per role, a block × step heatmap of the chosen count.
pub(super) fn saturation(
    st: &mut SaturationPanel,
    cx: &mut PanelCtx<'_>,
    ui: &mut egui::Ui,
    view: &RunView,
) {
    let want = count_choice(cx, ui);
    let groups = view.rows_by_role();
    let steps = view.last_step() as usize + 1;
    let columns = steps.min(((ui.available_width() - NAMES_W).max(50.0)) as usize);
    let key = (view.revision, columns, cx.selection.heat);
    let fresh = st.cache.as_ref().is_some_and(|(k, _)| *k == key);
    if !fresh {
        st.cache = Some((key, heat_maps(view, &groups, columns, cx.selection.heat)));
    }
    // Taken out while drawing (put back below), not cloned every frame.
    let (key, maps) = st.cache.take().unwrap_or((key, Vec::new()));
    let peak = maps.iter().flatten().copied().max().unwrap_or(0).max(1);
    let dark = ui.visuals().dark_mode;
    let per_col = steps.div_ceil(columns.max(1));
    let sqnr = cx.selection.heat == HeatValue::Sqnr;
    caption(ui, cx, view, &groups, peak, per_col);
    let top = ui.cursor().min;
    // Rows share the height left (each role's caption and step ticks take about 40 points).
    let all_rows: usize = groups.iter().map(|(_, r)| r.len()).sum();
    let row_h = ((ui.available_height() - 40.0 * groups.len() as f32 - 30.0)
        / all_rows.max(1) as f32)
        .clamp(ROW_H, ROW_H_MAX);
    ensure_textures(st, ui, groups.len());
    egui::ScrollArea::vertical().show(ui, |ui| {
        for (g, ((role, rows), map)) in groups.iter().zip(&maps).enumerate() {
            let role_name = match role {
                Some(Role::W) => "weights (W)",
                Some(Role::A) => "activations (A)",
                Some(Role::G) => "gradients (G)",
                None => "series",
            };
            let head = role_head(view, role_name, rows, map, sqnr);
            ui.label(RichText::new(head).strong());
            if !fresh || st.textures[g].size() != [columns, rows.len()] || st.dark != dark {
                let pixels: Vec<Color32> =
                    map.iter().map(|v| heat_colour(*v, peak, dark)).collect();
                st.textures[g].set(
                    egui::ColorImage::new([columns, rows.len()], pixels),
                    egui::TextureOptions::NEAREST,
                );
            }
            let (rect, response) = ui.allocate_exact_size(
                egui::vec2(ui.available_width(), rows.len() as f32 * row_h),
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
            row_names(ui, &painter, rect, row_h, rows);
            outline_selected(st, cx, ui, &painter, rect, row_h, rows);
            step_ticks(ui, image_rect, steps);
            let cell = Cell {
                rect,
                image_rect,
                row_h,
                columns,
                steps,
                sqnr,
            };
            hover_cell(cx, view, &response, &cell, rows, map);
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
    st.dark = dark;
    let bottom = ui.min_rect().max;
    save_png(
        cx.exports,
        want,
        &view.name,
        "saturation",
        egui::Rect::from_min_max(top, bottom),
    );
}

/// The count the maps show, chosen; whether a PNG was asked for.
fn count_choice(cx: &mut PanelCtx<'_>, ui: &mut egui::Ui) -> bool {
    ui
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
        .inner
}

/// A role's caption: its total count, or its SQNR median and worst call.
fn role_head(
    view: &RunView,
    role_name: &str,
    rows: &[SeriesKey],
    map: &[u64],
    sqnr: bool,
) -> String {
    if sqnr {
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
    }
}

/// The quantizers' names down a map's left edge.
fn row_names(
    ui: &egui::Ui,
    painter: &egui::Painter,
    rect: egui::Rect,
    row_h: f32,
    rows: &[SeriesKey],
) {
    for (i, id) in rows.iter().enumerate() {
        let short = match id {
            SeriesKey::Quantizer(q) => format!("block{}.{}", q.block, q.module),
            SeriesKey::Imported(name) => name.clone(),
        };
        painter.text(
            egui::pos2(rect.left() + 2.0, rect.top() + (i as f32 + 0.5) * row_h),
            egui::Align2::LEFT_CENTER,
            short,
            egui::FontId::monospace(crate::theme::MIN_TEXT_PX),
            ui.visuals().text_color(),
        );
    }
}

/// The quantizer open in Amax (a grid's outlier when one was opened): outlined, and
/// scrolled into view once per choice.
fn outline_selected(
    st: &mut SaturationPanel,
    cx: &PanelCtx<'_>,
    ui: &egui::Ui,
    painter: &egui::Painter,
    rect: egui::Rect,
    row_h: f32,
    rows: &[SeriesKey],
) {
    if let Some(i) = rows
        .iter()
        .position(|id| cx.selection.quantizer.as_ref() == Some(id))
    {
        let y = rect.top() + i as f32 * row_h;
        let row = egui::Rect::from_min_max(
            egui::pos2(rect.left() + 1.0, y),
            egui::pos2(rect.right() - 1.0, y + row_h),
        );
        painter.rect_stroke(
            row,
            0.0,
            egui::Stroke::new(2.0, super::AMAX),
            egui::StrokeKind::Inside,
        );
        // Scrolled into view once per choice (a grid's outlier can sit maps below).
        if st.shown.as_ref() != Some(&rows[i]) {
            ui.scroll_to_rect(row, Some(egui::Align::Center));
            st.shown = Some(rows[i].clone());
        }
    }
}

/// Where a map lies and how its cells divide it.
struct Cell {
    rect: egui::Rect,
    image_rect: egui::Rect,
    row_h: f32,
    columns: usize,
    steps: usize,
    sqnr: bool,
}

/// The hovered cell's exact value; a click opens its quantizer in Amax.
fn hover_cell(
    cx: &mut PanelCtx<'_>,
    view: &RunView,
    response: &egui::Response,
    cell: &Cell,
    rows: &[SeriesKey],
    map: &[u64],
) {
    let (rect, image_rect, row_h) = (cell.rect, cell.image_rect, cell.row_h);
    let (columns, steps, sqnr) = (cell.columns, cell.steps, cell.sqnr);
    if let Some(pos) = response.hover_pos()
        && image_rect.contains(pos)
    {
        let row = ((pos.y - rect.top()) / row_h) as usize;
        let col = (((pos.x - image_rect.left()) / image_rect.width()) * columns as f32) as usize;
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
                count_words(*v, "element")
            };
            // At the pointer: the map is large, and a tooltip below it would be far away.
            response.clone().on_hover_text_at_pointer(format!(
                "{id}, {span}: {what} over {}",
                count_words(calls as u64, "call")
            ));
            if response.clicked() {
                cx.selection.quantizer = Some(id.clone());
                cx.selection.tab = Tab::Amax;
            }
        }
    }
}

/// `n` things: `1 call`, `3 calls`.
fn count_words(n: u64, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// The colour scale of the heatmaps, with numbers: dark for none, then the colours up to the
/// brightest cell (square-root scale, so small counts stay visible).
fn colour_scale(ui: &mut egui::Ui, peak: u64, sqnr: bool) {
    ui.horizontal_wrapped(|ui| {
        let label = |v: u64| {
            if sqnr {
                format!("{:.1} dB", shortfall_db(v))
            } else {
                v.to_string()
            }
        };
        ui.label("colour scale:");
        ui.label(if sqnr {
            format!("{SQNR_TOP_DB:.0} dB or better")
        } else {
            "0".to_owned()
        });
        let (rect, _) = ui.allocate_exact_size(egui::vec2(160.0, 14.0), egui::Sense::hover());
        let painter = ui.painter_at(rect);
        let dark = ui.visuals().dark_mode;
        let n = 32;
        for i in 0..n {
            let v = (peak as f64 * ((i as f64 + 0.5) / n as f64).powi(2)).round() as u64;
            let x0 = rect.left() + rect.width() * i as f32 / n as f32;
            let x1 = rect.left() + rect.width() * (i + 1) as f32 / n as f32;
            painter.rect_filled(
                egui::Rect::from_min_max(egui::pos2(x0, rect.top()), egui::pos2(x1, rect.bottom())),
                0.0,
                if i == 0 {
                    heat_colour(0, peak, dark)
                } else {
                    heat_colour(v.max(1), peak, dark)
                },
            );
        }
        ui.label(format!("{} (middle: {})", label(peak), label(peak / 4)));
    });
}

/// Which blocks the maps show, and why: the run's quantized blocks, with the rule when the
/// config leaves them to it ("auto").
fn blocks_caption(ui: &mut egui::Ui, view: &RunView) {
    let Some(c) = &view.config else {
        return;
    };
    let layers = c.model.layers;
    let blocks = c.qat.blocks_for(layers);
    let list = match (blocks.first(), blocks.last()) {
        (Some(a), Some(b)) if blocks.len() as u32 == b - a + 1 && blocks.len() > 2 => {
            format!("blocks {a}–{b}")
        }
        _ => format!(
            "blocks {}",
            blocks
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let why = if c.qat.blocks.is_some() {
        "as the config sets them".to_owned()
    } else {
        let (first, last) = hif8lab_train::config::QatConfig::high_precision_ends(layers);
        format!(
            "blocks auto: the first {first} and the last {last} stay in high precision, like the paper's 3 and 2 of 26"
        )
    };
    ui.label(format!(
        "Shown: every quantized block, {list} of {layers} ({why})."
    ));
}

/// Step numbers under a heatmap: five ticks from the first step to the last.
fn step_ticks(ui: &mut egui::Ui, image: egui::Rect, steps: usize) {
    let (row, _) =
        ui.allocate_exact_size(egui::vec2(ui.available_width(), 16.0), egui::Sense::hover());
    let last = steps.saturating_sub(1);
    // As many as fit without overlapping (70 points each), at most five.
    let fit = ((image.width() / 80.0) as usize + 1).clamp(2, 5);
    let ticks = (last + 1).min(fit);
    for k in 0..ticks {
        let step = if ticks == 1 {
            0
        } else {
            last * k / (ticks - 1)
        };
        let x = image.left() + image.width() * (step as f32 + 0.5) / steps.max(1) as f32;
        let w = 70.0;
        let left = (x - w / 2.0).clamp(image.left(), (image.right() - w).max(image.left()));
        let rect =
            egui::Rect::from_min_size(egui::pos2(left, row.top()), egui::vec2(w, row.height()));
        let align = if k == 0 {
            egui::Align::Min
        } else if k + 1 == ticks {
            egui::Align::Max
        } else {
            egui::Align::Center
        };
        ui.put(
            rect,
            egui::Label::new(RichText::new(format!("step {step}")).small()).halign(align),
        );
        ui.painter().vline(
            x,
            image.bottom()..=row.top() + 2.0,
            egui::Stroke::new(1.0, ui.visuals().weak_text_color()),
        );
    }
}

/// What the maps show (rows, columns, colour with its scale), the model's blocks, and the
/// quantizer outlined.
fn caption(
    ui: &mut egui::Ui,
    cx: &PanelCtx<'_>,
    view: &RunView,
    groups: &[(Option<Role>, Vec<SeriesKey>)],
    peak: u64,
    per_col: usize,
) {
    let sqnr = cx.selection.heat == HeatValue::Sqnr;
    if sqnr {
        ui.label(format!(
            "rows: quantizers (block.module), one map per role; columns: steps{}; colour: the worst SQNR of the cell, brightest = {:.1} dB, dark = {SQNR_TOP_DB} dB or better. Point at a cell for its exact values; click or tap a row to open it in Amax.",
            if per_col > 1 { format!(", {per_col} per column (worst call)") } else { String::new() },
            shortfall_db(peak)
        ));
    } else {
        ui.label(format!(
            "rows: quantizers (block.module), one map per role; columns: steps{}; brightest = {peak} element{} ({} estimator). Point at a cell for its exact values; click or tap a row to open it in Amax.",
            if per_col > 1 { format!(", {per_col} per column (summed)") } else { String::new() },
            if peak == 1 { "" } else { "s" },
            view.estimators.get(view.active).map(String::as_str).unwrap_or("active")
        ));
    }
    colour_scale(ui, peak, sqnr);
    blocks_caption(ui, view);
    if let Some(q) = cx
        .selection
        .quantizer
        .as_ref()
        .filter(|q| groups.iter().any(|(_, rows)| rows.contains(q)))
    {
        ui.label(format!("Outlined: {q}, the quantizer open in Amax."));
    }
}

/// Each role's map of the chosen count, `columns` wide.
fn heat_maps(
    view: &RunView,
    groups: &[(Option<Role>, Vec<SeriesKey>)],
    columns: usize,
    heat: HeatValue,
) -> Vec<Vec<u64>> {
    let value = heat_value(heat, view.active);
    let sqnr = heat == HeatValue::Sqnr;
    groups
        .iter()
        .map(|(_, rows)| {
            if sqnr {
                view.heatmap_by(rows, columns, &value, u64::max)
            } else {
                view.heatmap(rows, columns, &value)
            }
        })
        .collect()
}

/// One texture per role's map (a blank one until it is drawn).
fn ensure_textures(st: &mut SaturationPanel, ui: &egui::Ui, n: usize) {
    while st.textures.len() < n {
        let blank = egui::ColorImage::new([1, 1], vec![Color32::BLACK]);
        let name = format!("heatmap-{}", st.textures.len());
        st.textures.push(
            ui.ctx()
                .load_texture(name, blank, egui::TextureOptions::NEAREST),
        );
    }
}
