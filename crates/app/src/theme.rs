//! The app's adjustments to egui's two themes, so every text it draws is readable: no text
//! below [`MIN_TEXT_PX`] (at 1× scale) and every text colour at least [`MIN_TEXT_CONTRAST`]
//! against the fills it is drawn on (WCAG AA for text), in both themes. The colours the app
//! gives text itself (verdicts, errors, notices) come from [`TextColours`].

use eframe::egui::{self, Color32, Style};

/// The smallest text size the app draws (points at 1× scale).
pub const MIN_TEXT_PX: f32 = 11.0;

/// The least contrast of any text colour against the fills it is drawn on (WCAG AA).
pub const MIN_TEXT_CONTRAST: f32 = 4.5;

/// Colours the app gives text, per theme.
#[derive(Clone, Copy, Debug)]
pub struct TextColours {
    /// A claim that holds; a field that is fine.
    pub holds: Color32,
    /// A claim that fails; a field error.
    pub fails: Color32,
    /// An inconclusive claim; a warning.
    pub inconclusive: Color32,
    /// A notice (WebGPU missing, …).
    pub notice: Color32,
}

impl TextColours {
    /// The colours for the theme of `visuals`.
    pub fn of(visuals: &egui::Visuals) -> Self {
        if visuals.dark_mode {
            TextColours {
                holds: Color32::from_rgb(110, 200, 110),
                fails: Color32::from_rgb(255, 120, 120),
                inconclusive: Color32::from_rgb(235, 175, 60),
                notice: Color32::from_rgb(235, 160, 60),
            }
        } else {
            TextColours {
                holds: Color32::from_rgb(20, 110, 30),
                fails: Color32::from_rgb(180, 20, 20),
                inconclusive: Color32::from_rgb(140, 80, 0),
                notice: Color32::from_rgb(150, 70, 0),
            }
        }
    }

    /// All of them.
    pub fn all(&self) -> [Color32; 4] {
        [self.holds, self.fails, self.inconclusive, self.notice]
    }
}

/// Adjusts one theme's style: text sizes up to [`MIN_TEXT_PX`], links, weak text, warnings
/// and errors in colours with [`MIN_TEXT_CONTRAST`] against the panels.
pub fn adjust(style: &mut Style) {
    for font in style.text_styles.values_mut() {
        font.size = font.size.max(MIN_TEXT_PX);
    }
    let v = &mut style.visuals;
    // egui's warnings and errors in the app's own colours for them.
    let app = TextColours::of(v);
    v.warn_fg_color = app.inconclusive;
    v.error_fg_color = app.fails;
    if v.dark_mode {
        v.hyperlink_color = Color32::from_rgb(120, 180, 255);
        v.weak_text_color = Some(Color32::from_gray(165));
        // Input fields (near-black on a dark page) and buttons get an outline at ≥ 3:1.
        v.widgets.inactive.bg_stroke = egui::Stroke::new(1.0, Color32::from_gray(110));
    } else {
        v.hyperlink_color = Color32::from_rgb(0, 80, 170);
        v.weak_text_color = Some(Color32::from_gray(85));
        // egui's light input fields are white on a near-white page with no outline: they
        // get one (≥ 3:1 against the page, as a control's edge needs), and so do buttons.
        v.widgets.inactive.bg_stroke = egui::Stroke::new(1.0, Color32::from_gray(135));
    }
}

/// What outlines an idle input field against the page: its border where it has one, else
/// its background.
pub fn input_field_edge(style: &Style) -> Color32 {
    let v = &style.visuals;
    let stroke = v.widgets.inactive.bg_stroke;
    if stroke.width > 0.0 {
        stroke.color
    } else {
        v.text_edit_bg_color()
    }
}

/// A panel's frame without its fill. The panels draw none: each frame is cleared to the panel
/// colour instead ([`clear_color`]), and the plots draw an outline, not a filled background
/// (`charts`). Where the browser has no GPU its software rasterizer spends a frame filling
/// pixels, layer by layer: measured in headless Chromium (SwiftShader, 1280×800, the Loss
/// panel of a `small` run, paused), 6.7 frames/s with the fills, 11.7 without the panels'
/// and 20.3 without the plot's too.
pub fn unfilled(frame: egui::Frame) -> egui::Frame {
    frame.fill(Color32::TRANSPARENT)
}

/// What every frame is cleared to (gamma-space RGBA): the theme's panel colour, which the
/// panels leave unfilled ([`unfilled`]).
pub fn clear_color(visuals: &egui::Visuals) -> [f32; 4] {
    visuals.panel_fill.to_normalized_gamma_f32()
}

/// Applies [`adjust`] to both themes of `ctx`, once per context.
pub fn apply(ctx: &egui::Context) {
    let id = egui::Id::unique("hif8lab-theme-applied");
    if ctx.data(|d| d.get_temp::<bool>(id)).unwrap_or(false) {
        return;
    }
    ctx.all_styles_mut(adjust);
    ctx.data_mut(|d| d.insert_temp(id, true));
}

/// Every text colour of a theme's style after [`adjust`], with what it is: the colours the
/// readability test checks (egui's own text, weak, strong, link, warning and error colours,
/// every widget state's text, and the app's [`TextColours`]).
pub fn text_colours(style: &Style) -> Vec<(&'static str, Color32)> {
    let v = &style.visuals;
    let w = &v.widgets;
    let app = TextColours::of(v);
    vec![
        ("text", v.text_color()),
        ("weak text", v.weak_text_color()),
        ("strong text", v.strong_text_color()),
        ("link", v.hyperlink_color),
        ("warning", v.warn_fg_color),
        ("error", v.error_fg_color),
        ("button text", w.inactive.text_color()),
        ("hovered text", w.hovered.text_color()),
        ("holds", app.holds),
        ("fails", app.fails),
        ("inconclusive", app.inconclusive),
        ("notice", app.notice),
    ]
}

/// The fills text is drawn on in a theme: panels, windows, text fields and plots.
pub fn text_backgrounds(style: &Style) -> [Color32; 3] {
    let v = &style.visuals;
    [v.panel_fill, v.window_fill, v.extreme_bg_color]
}
