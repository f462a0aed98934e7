//! The side panel's form: each field with its mark and message, the preset's line, the opened
//! model, and the form's check.

use super::*;

/// A field's label: marked (!) (red for an error, amber for a warning) with the message as its
/// hover; the messages themselves are listed under the form, so a message appearing never
/// moves the fields below it.
fn field_label(
    ui: &mut egui::Ui,
    f: &crate::settings::Field,
    flag: Option<(&str, Color32)>,
) -> egui::Response {
    let help = crate::glossary::explanations(f.label);
    let help = if help.is_empty() {
        f.help.to_owned()
    } else {
        format!("{}\n\n{help}", f.help)
    };
    match flag {
        Some((message, colour)) => ui
            .label(RichText::new(format!("(!) {}", f.label)).color(colour))
            .on_hover_text(format!("{message}\n\n{help}")),
        None => ui.label(f.label).on_hover_text(help),
    }
}

/// One field of the form; a problem marks its label (see [`field_label`]).
pub(super) fn field(
    ui: &mut egui::Ui,
    form: &mut SettingsPanel,
    f: &crate::settings::Field,
    error: Option<&str>,
) {
    let key = f.key;
    let warning = form.settings.field_warning(key);
    let flag = error
        .map(|e| (e, TextColours::of(ui.visuals()).fails))
        .or(warning
            .as_deref()
            .map(|w| (w, TextColours::of(ui.visuals()).inconclusive)));
    match f.kind {
        Kind::Text | Kind::Blocks => {
            ui.horizontal(|ui| {
                let name = field_label(ui, f, flag);
                let mut text = form.settings.get(key).to_owned();
                let edit = egui::TextEdit::singleline(&mut text).desired_width(120.0);
                if ui.add(edit).labelled_by(name.id).changed() {
                    // `key` is a field of FIELDS: it is always known.
                    let _ = form.settings.set(key, &text);
                }
            });
        }
        Kind::Choice(options) => {
            ui.horizontal(|ui| {
                let current = form.settings.get(key).to_owned();
                let name = field_label(ui, f, flag);
                egui::ComboBox::from_id_salt(key)
                    .selected_text(current.clone())
                    .show_ui(ui, |ui| {
                        for o in options {
                            if ui.selectable_label(current == *o, *o).clicked() {
                                let _ = form.settings.set(key, o);
                            }
                        }
                    })
                    .response
                    .labelled_by(name.id);
            });
        }
        Kind::Set(options) => {
            ui.horizontal_wrapped(|ui| {
                field_label(ui, f, flag);
                let current = form.settings.get(key).to_owned();
                for o in options {
                    let mut on = current.split(',').any(|s| s.trim() == *o);
                    if ui.checkbox(&mut on, *o).changed() {
                        form.settings.toggle(key, o, on);
                    }
                }
            });
        }
    }
}

/// What the chosen preset is, in one line, and how long the form's run would take here at the
/// last run's pace.
pub(super) fn preset_line(cx: &SideCtx<'_>, ui: &mut egui::Ui) {
    let preset = &cx.form.settings.preset;
    let about = hif8lab_train::RunConfig::preset_description(preset).unwrap_or("");
    let time = match (cx.run_flops, cx.pace) {
        (Some(flops), Some(pace)) if pace > 0.0 => format!(
            " About {} here, at the last run's pace.",
            crate::words::duration_words(flops / pace)
        ),
        (Some(_), _) => " Its time here is estimated once a first run has taken two steps.".into(),
        (None, _) => String::new(),
    };
    ui.label(RichText::new(format!("{about}{time}")).small());
}

/// The opened Hugging Face or GGUF model, with the button that forgets it.
pub(super) fn hf_model_box(form: &mut SettingsPanel, ui: &mut egui::Ui) {
    if let Some(m) = &form.hf_model {
        let kind = if m.source.ends_with(".gguf") {
            "GGUF"
        } else {
            "Hugging Face"
        };
        let text = format!(
            "Model: {} ({kind}, {:.2} M parameters, {} layers × d_model {}); the preset's \
             model fields do not apply",
            m.name,
            m.parameters() as f64 / 1e6,
            m.model.layers,
            m.model.d_model
        );
        ui.label(RichText::new(text).strong());
        if ui
            .button("Use the preset's model")
            .on_hover_text("forget the opened Hugging Face model")
            .clicked()
        {
            form.hf_model = None;
            form.check = None;
        }
    }
}

/// The form's check: each marked field's message (listed here, not under each field: a message
/// appearing must not move the field the user is about to click), or the memory the run needs;
/// then the fields' warnings.
pub(super) fn form_messages<E: std::fmt::Display, M: std::fmt::Display>(
    form: &SettingsPanel,
    ui: &mut egui::Ui,
    field_errors: &[Option<String>],
    whole: &Result<M, E>,
) {
    let marked: Vec<&String> = field_errors.iter().flatten().collect();
    match whole {
        Err(e) if marked.is_empty() => {
            ui.label(
                RichText::new(format!("Invalid: {e}")).color(TextColours::of(ui.visuals()).fails),
            );
        }
        Err(_) => {
            ui.label(
                RichText::new("Invalid: fix the fields marked (!)")
                    .color(TextColours::of(ui.visuals()).fails),
            );
            for m in marked {
                ui.label(RichText::new(m).color(TextColours::of(ui.visuals()).fails));
            }
        }
        Ok(memory) => {
            ui.label(format!("Memory: {memory}"));
        }
    }
    for f in FIELDS.iter() {
        if let Some(w) = form.settings.field_warning(f.key) {
            ui.label(RichText::new(w).color(TextColours::of(ui.visuals()).inconclusive));
        }
    }
}
