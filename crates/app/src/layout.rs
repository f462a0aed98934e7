//! Layout at every screen size: the width below which the settings fold away, regions that
//! scroll instead of running off the window, legends drawn above their plots (never over
//! the data), and what the app knows about overflow — every region whose content was laid
//! out beyond the space it was given, collected each frame ([`FrameStats::overflow`], the page's
//! `window.__hif8lab.overflow`) so tests can fail on it instead of guessing from pixels.
//!
//! [`FrameStats::overflow`]: crate::frames::FrameStats::overflow

use eframe::egui::{self, Color32, Id, Rect, RichText};

/// Below this window width (points) the settings are not a side panel but a page of their
/// own, opened from the tab row.
pub const NARROW: f32 = 720.0;

/// Slack (points) before content counts as overflowing: rounding, a stroke's half width.
const SLACK: f32 = 1.5;

fn key() -> Id {
    Id::unique("hif8lab-overflow")
}

/// Forgets the last frame's overflow reports (called when a frame begins).
pub fn begin(ctx: &egui::Context) {
    ctx.data_mut(|d| d.remove_temp::<Vec<String>>(key()));
}

/// This frame's overflow reports: one line per region, naming it and by how much its content
/// ran over.
pub fn take(ctx: &egui::Context) -> Vec<String> {
    ctx.data_mut(|d| d.remove_temp::<Vec<String>>(key()).unwrap_or_default())
}

/// Reports `region` when `content` reaches beyond `visible` (right or, when
/// `check_bottom`, below).
pub fn report(ctx: &egui::Context, region: &str, visible: Rect, content: Rect, check_bottom: bool) {
    let right = content.right() - visible.right();
    let bottom = if check_bottom {
        content.bottom() - visible.bottom()
    } else {
        0.0
    };
    let left = visible.left() - content.left();
    if right > SLACK || bottom > SLACK || left > SLACK {
        let line = format!(
            "{region}: content {:.0}×{:.0} beyond its {:.0}×{:.0} space (right {right:.0}, bottom {bottom:.0})",
            content.width(),
            content.height(),
            visible.width(),
            visible.height()
        );
        ctx.data_mut(|d| d.get_temp_mut_or_default::<Vec<String>>(key()).push(line));
    }
}

/// Lays `add` out in `ui` and reports `region` if what it laid out does not fit the space
/// `ui` had (right or bottom).
pub fn fitted<R>(ui: &mut egui::Ui, region: &str, add: impl FnOnce(&mut egui::Ui) -> R) -> R {
    let visible = ui.max_rect();
    let r = add(ui);
    report(ui.ctx(), region, visible, ui.min_rect(), true);
    r
}

/// A vertically scrolling region (`id` keeps its scroll position): tall content scrolls,
/// content wider than the region is reported (nothing scrolls sideways).
pub fn scroll<R>(ui: &mut egui::Ui, id: &str, add: impl FnOnce(&mut egui::Ui) -> R) -> R {
    egui::ScrollArea::vertical()
        .id_salt(id)
        .auto_shrink([false, false])
        .show(ui, |ui| {
            let visible = ui.max_rect();
            let r = add(ui);
            report(ui.ctx(), id, visible, ui.min_rect(), false);
            follow_focus(ui, id);
            r
        })
        .inner
}

/// Scrolls the keyboard focus into view when it moves onto a widget of this region (Tab):
/// egui leaves a focused widget where it is, possibly out of sight, where Enter would press
/// a button the user cannot see. Only when the focus moves, so the user can scroll away.
fn follow_focus(ui: &mut egui::Ui, region: &str) {
    let ctx = ui.ctx().clone();
    let key = Id::unique(("follow-focus", region));
    let focused = ctx.memory(|m| m.focused());
    let last = ui.data(|d| d.get_temp::<Option<Id>>(key)).flatten();
    if focused == last {
        return;
    }
    let Some(id) = focused else {
        ui.data_mut(|d| d.insert_temp::<Option<Id>>(key, None));
        return;
    };
    // This frame's rect of the focused widget, if it is in this region's content.
    let Some(r) = ctx.read_response(id) else {
        return;
    };
    if !ui.min_rect().expand(SLACK).contains_rect(r.rect) {
        return;
    }
    ui.scroll_to_rect(r.rect.expand(4.0), None);
    ui.data_mut(|d| d.insert_temp(key, Some(id)));
}

/// Whether the window is narrow (phone-sized): settings on a page of their own.
pub fn narrow(ctx: &egui::Context) -> bool {
    ctx.content_rect().width() < NARROW
}

/// Which series of a [`legend`] are shown.
pub struct Shown(Vec<(String, bool)>);

impl Shown {
    /// Whether the series named `name` is shown.
    pub fn on(&self, name: &str) -> bool {
        self.0.iter().any(|(n, s)| n == name && *s)
    }
}

/// A legend row above a plot: each series' colour and name, wrapping with the width; click a
/// name to hide or show its series. Returns which are shown.
pub fn legend(ui: &mut egui::Ui, id: &str, items: &[(String, Color32)]) -> Shown {
    let key = Id::unique(("legend-hidden", id));
    let mut hidden: Vec<String> = ui.data(|d| d.get_temp(key)).unwrap_or_default();
    let mut changed = false;
    ui.horizontal_wrapped(|ui| {
        ui.spacing_mut().item_spacing.x = 14.0;
        for (name, colour) in items {
            let off = hidden.contains(name);
            // One unbreakable item each (it moves to the next row whole); a hidden series
            // greyed and struck through.
            let text = if off {
                RichText::new(format!("• {name}"))
                    .color(Color32::GRAY)
                    .strikethrough()
            } else {
                RichText::new(format!("• {name}")).color(*colour).strong()
            };
            if ui
                .add({
                    // Short names move to the next row whole; a long one (a run's name) wraps.
                    let label = egui::Label::new(text).sense(egui::Sense::click());
                    if name.chars().count() > 40 {
                        label.wrap()
                    } else {
                        label.extend()
                    }
                })
                .on_hover_text("click to hide or show this line")
                .clicked()
            {
                if off {
                    hidden.retain(|h| h != name);
                } else {
                    hidden.push(name.clone());
                }
                changed = true;
            }
        }
    });
    if changed {
        ui.data_mut(|d| d.insert_temp(key, hidden.clone()));
    }
    Shown(
        items
            .iter()
            .map(|(n, _)| (n.clone(), !hidden.contains(n)))
            .collect(),
    )
}
