//! The Lessons tab: a lesson's text, its controls and buttons, the reading of its live run,
//! its scenario's progress and verdict, and the scenario's runs as small multiples.

use super::*;
use crate::charts::ShowFramed as _;
use hif8lab_lab::lesson::LessonId;
use std::sync::Arc;

use crate::state::RunView;

/// What the Lessons tab owns: the lesson shown, the pretrained base its runs continue from,
/// its scenario's verdict and runs, and the live run that is one of its runs.
pub struct LessonsView {
    /// The lesson shown.
    pub lesson: &'static hif8lab_lab::lesson::Lesson,
    /// The pretrained base model of the lessons (continued training starts from it).
    pub base: Option<Arc<hif8lab_train::models::checkpoint::Checkpoint>>,
    /// The base model's probe scores.
    pub base_probes: Option<hif8lab_train::ProbeScores>,
    /// Where [`LessonsView::base`] came from: `"shipped"`, `"pretrained"` here, or `""`
    /// (none yet).
    pub base_from: &'static str,
    /// The fingerprint of the base's weights (`hif8lab_lab::lesson::base::fingerprint`),
    /// taken once when the base is set (the browser's page reads it every frame).
    pub base_fingerprint: Option<String>,
    /// Start the continued run of the forgetting lesson once the base is ready.
    pub after_base: bool,
    /// Start the in-memory scenario once the base is ready.
    pub scenario_waiting: bool,
    /// The forgetting lesson's learning rate.
    pub lr: f32,
    /// Whether the forgetting lesson's run quantizes.
    pub qat: bool,
    /// The last verdict of a lesson scenario.
    pub report: Option<hif8lab_lab::lesson::LessonReport>,
    /// The runs of the last lesson scenario, as recorded (for its small multiples).
    pub views: Vec<RunView>,
    /// The lesson whose live run the current run is (its "What just happened" reads it).
    pub live_run: Option<LessonId>,
}

impl Default for LessonsView {
    fn default() -> Self {
        LessonsView {
            lesson: &hif8lab_lab::lesson::LESSONS[0],
            base: None,
            base_probes: None,
            base_from: "",
            base_fingerprint: None,
            after_base: false,
            scenario_waiting: false,
            lr: 3e-3,
            qat: true,
            report: None,
            views: Vec::new(),
            live_run: None,
        }
    }
}

/// What the Lessons tab reads and changes: the lessons' own state is its to change; the
/// runs and jobs it only reads. What it wants done goes into `actions`.
pub struct LessonsCtx<'a> {
    /// The lessons' state.
    pub lessons: &'a mut LessonsView,
    /// The runs (the live one is read by "What just happened").
    pub runs: &'a crate::Runs,
    /// What is running.
    pub jobs: &'a crate::jobs::Jobs,
    /// What the tab asks of the app.
    pub actions: Vec<Action>,
}

/// The Lessons panel: what to predict, what to look at, the controls that matter, a live
/// "what just happened" from the current run's numbers, and (natively) the lesson's headless
/// scenario with its judged claims.
/// The row of lessons to choose from: drawn above the lesson's scrolling text, so it stays
/// in view however far the text is scrolled.
pub(super) fn lesson_row(cx: &mut LessonsCtx<'_>, ui: &mut egui::Ui) {
    ui.horizontal_wrapped(|ui| {
        for l in &hif8lab_lab::lesson::LESSONS {
            if ui
                .selectable_label(cx.lessons.lesson.id == l.id, l.title)
                .clicked()
            {
                cx.actions.push(Action::SelectLesson(l.id));
            }
        }
    });
    ui.separator();
}

pub(super) fn lessons(cx: &mut LessonsCtx<'_>, ui: &mut egui::Ui) {
    let l = cx.lessons.lesson;
    ui.heading(l.title);
    ui.label(RichText::new("Predict").strong());
    crate::glossary::label(ui, l.predict);
    ui.label(RichText::new("Look at").strong());
    crate::glossary::label(ui, l.look);
    // The panels the lesson points at, one click away.
    ui.horizontal_wrapped(|ui| {
        for (tab, name) in TABS {
            if tab != Tab::Lessons
                && l.look.contains(name)
                && ui
                    .link(format!("Open {name} »"))
                    .on_hover_text(format!("show the {name} panel of the current run"))
                    .clicked()
            {
                cx.actions.push(Action::LessonLink(tab));
            }
        }
    });
    crate::glossary::label(
        ui,
        format!("Controls that matter: {}.", l.controls.join(", ")),
    );
    let running = cx.jobs.any(&[JobKind::Run, JobKind::Base]);
    if l.id == LessonId::Forgetting {
        forgetting_controls(cx, ui, running);
    }
    if l.id == LessonId::Outliers {
        // Nothing trains here: the verdict comes from the committed real-model runs.
        if ui
            .button("Judge the committed SmolLM2-135M runs")
            .on_hover_text("the claims of lesson 1 on the real model's outlier quantizer, from docs/results/real-smollm2 (hif8lab lesson run outliers)")
            .clicked()
        {
            cx.actions.push(Action::JudgeRealOutliers);
        }
    } else {
        scenario_buttons(cx, ui, running);
    }
    // The scenario's progress right under its button, where the user looks after pressing.
    if let Some(p) = cx.jobs.lesson_progress() {
        ui.label(RichText::new(p).strong());
    }
    ui.separator();
    if l.id != LessonId::Outliers {
        ui.label(RichText::new("What just happened (this lesson's live run)").strong());
        crate::glossary::label(ui, live_reading(cx.lessons, cx.runs));
    }
    if let Some(r) = &cx.lessons.report
        && r.lesson == l.name
    {
        ui.label(
            RichText::new("The lesson's scenario (its runs, judged from their numbers)").strong(),
        );
        // Every outcome counted, as a heading: an inconclusive claim is not hidden in "2 of 3".
        ui.heading(hif8lab_lab::claims::headline(
            &r.claims,
            hif8lab_lab::stats::Verdict3::as_str,
        ));
        for c in &r.claims {
            use hif8lab_lab::stats::Verdict3;
            let t = TextColours::of(ui.visuals());
            let colour = match c.verdict {
                Verdict3::Holds => t.holds,
                Verdict3::Fails => t.fails,
                Verdict3::Inconclusive | Verdict3::NotJudged | Verdict3::NotTested => {
                    t.inconclusive
                }
            };
            // At a glance: the verdict, the claim, its statistic against the threshold; how it
            // was tested and the claim's data folded (the same words as the command line).
            ui.label(RichText::new(format!("{}: {}", c.verdict.as_str(), c.claim)).color(colour));
            ui.label(format!("Measured: {}.", c.glance()));
            egui::CollapsingHeader::new("how it was tested")
                .id_salt(("method", &c.claim))
                .show(ui, |ui| {
                    ui.label(format!("{}.", c.method_words()));
                    for part in &c.parts {
                        ui.label(format!("Also: {part}."));
                    }
                });
            egui::CollapsingHeader::new("details (the claim's data)")
                .id_salt(("claim", &c.claim))
                .show(ui, |ui| evidence_table(ui, &c.claim, &c.evidence));
        }
        ui.label(&r.summary);
        small_multiples(cx.lessons, ui);
    }
}

/// A claim's data as a table of names and values (nested values by their dotted names,
/// numbers as written: a count whole, a measure to four decimals).
fn evidence_table(ui: &mut egui::Ui, salt: &str, evidence: &serde_json::Value) {
    let mut rows = Vec::new();
    flatten_evidence("", evidence, &mut rows);
    if rows.is_empty() {
        ui.label("(no data beyond the statistic above)");
        return;
    }
    egui::Grid::new(("evidence", salt))
        .striped(true)
        .show(ui, |ui| {
            for (name, value) in rows {
                ui.label(RichText::new(name.replace('_', " ")).small());
                ui.label(RichText::new(value).small().monospace());
                ui.end_row();
            }
        });
}

fn flatten_evidence(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    let name = |k: &str| {
        if prefix.is_empty() {
            k.to_owned()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                flatten_evidence(&name(k), x, out);
            }
        }
        serde_json::Value::Null => {}
        serde_json::Value::Number(n) => out.push((
            prefix.to_owned(),
            match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => i.to_string(),
                (None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
                (None, Some(f)) => format!("{:.4}", f)
                    .trim_end_matches('0')
                    .trim_end_matches('.')
                    .to_owned(),
                _ => n.to_string(),
            },
        )),
        serde_json::Value::String(s) => out.push((prefix.to_owned(), s.clone())),
        serde_json::Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => {
            let items: Vec<String> = a
                .iter()
                .map(|x| match x {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            out.push((prefix.to_owned(), items.join(", ")));
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten_evidence(&name(&i.to_string()), x, out);
            }
        }
        other => out.push((prefix.to_owned(), other.to_string())),
    }
}

/// The forgetting lesson's controls: the learning rate (log slider), QAT on/off, and the
/// run from the pretrained base.
fn forgetting_controls(cx: &mut LessonsCtx<'_>, ui: &mut egui::Ui, running: bool) {
    ui.horizontal_wrapped(|ui| {
        ui.add(
            egui::Slider::new(&mut cx.lessons.lr, 1e-5..=1e-2)
                .logarithmic(true)
                .text("learning rate")
                .custom_formatter(|v, _| format!("{v:.0e}")),
        );
        ui.checkbox(&mut cx.lessons.qat, "HiF8 QAT (max_window(64), warmup)");
    });
    {
        let label = if cx.lessons.base.is_some() {
            "Continue training the base at this rate"
        } else {
            "Pretrain the base, then continue at this rate"
        };
        if ui.add_enabled(!running, egui::Button::new(label)).clicked() {
            cx.actions.push(Action::StartFromBase);
        }
        if let Some(b) = &cx.lessons.base_probes {
            let from = match cx.lessons.base_from {
                "shipped" => {
                    " Shipped with the app: the weights the desktop app's pretraining gives, bit for bit (a browser's own pretraining rounds its products differently)."
                }
                "pretrained" => " Pretrained here.",
                _ => "",
            };
            ui.label(format!(
                "Base model: knowledge {:.1} %, completion {:.1} % (probes of the facts it was pretrained on).{from}",
                100.0 * b.knowledge_acc_norm,
                100.0 * b.completion_acc_norm
            ));
        }
    }
}

/// A scenario run's knowledge before → after as its claim measures it: from the base model
/// (what every run continued from) to the run's last evaluation, with the relative drop the
/// claims use and the same change in points.
pub fn knowledge_caption(base: Option<&hif8lab_train::ProbeScores>, v: &RunView) -> String {
    let (Some(base), Some(end)) = (base, v.probes.last()) else {
        return String::new();
    };
    let (b, e) = (base.knowledge_acc_norm, end.knowledge_acc_norm);
    let drop = hif8lab_train::eval::relative_drop(b, e);
    format!(
        "knowledge {:.1} % (base) to {:.1} %: {} {:.1} % relative ({:+.1} points)",
        100.0 * b,
        100.0 * e,
        if drop >= 0.0 { "dropped" } else { "rose" },
        drop.abs(),
        100.0 * (e - b)
    )
}

/// The lesson scenario's runs as small multiples: each run's loss with its numbers.
fn small_multiples(lessons: &LessonsView, ui: &mut egui::Ui) {
    let views = &lessons.views;
    if views.is_empty() {
        return;
    }
    ui.label(RichText::new("The scenario's runs").strong());
    let top = views
        .iter()
        .flat_map(|v| v.loss.iter().map(|p| p[1]))
        .fold(0.0f64, f64::max);
    // As many columns as fit at 200 points or more (one on a phone).
    let columns = ((ui.available_width() / 210.0).floor() as usize).clamp(1, 4);
    let width = (ui.available_width() / columns as f32 - 12.0).max(120.0);
    egui::Grid::new("multiples").show(ui, |ui| {
        for (i, v) in views.iter().enumerate() {
            ui.vertical(|ui| {
                ui.set_width(width);
                // The lessons' bases: activation and gradient calls (where spikes hit, as
                // the lesson's text counts them) and the final loss as its summary states it.
                let above = v
                    .calls_above_roles(&[Role::A, Role::G])
                    .get(v.active)
                    .copied()
                    .unwrap_or(0);
                let losses: Vec<f64> = v.loss.iter().map(|p| p[1]).collect();
                ui.add(egui::Label::new(RichText::new(&v.name).strong().small()).wrap());
                crate::glossary::label(
                    ui,
                    format!(
                        "final loss {:.3} (mean of the last fifth of the steps); {above} activation and gradient calls above the estimate; {}",
                        hif8lab_lab::lesson::final_loss(&losses),
                        knowledge_caption(lessons.base_probes.as_ref(), v)
                    ),
                );
                egui_plot::Plot::new(format!("multiple-{i}"))
                    .height(110.0)
                    .width(width)
                    .x_axis_label("step")
                    .y_axis_label("loss")
                    .include_y(0.0)
                    .include_y(top)
                    .allow_drag(false)
                    .allow_zoom(false)
                    .allow_scroll(false)
                    .show_framed(ui, |p| {
                        p.line(
                            egui_plot::Line::new("loss", v.loss.clone())
                                .color(crate::charts::series(0)),
                        );
                    });
            });
            if i % columns == columns - 1 {
                ui.end_row();
            }
        }
    });
}

/// A reading of the live run for the lesson, from its numbers.
fn live_reading(lessons: &LessonsView, runs: &crate::Runs) -> String {
    let start = if lessons.lesson.id == LessonId::Forgetting {
        if lessons.base.is_some() {
            "“Continue training the base at this rate”"
        } else {
            "“Pretrain the base, then continue at this rate”"
        }
    } else {
        "“Set up and start a live run”"
    };
    let Some(view) = runs
        .live
        .as_ref()
        .filter(|_| lessons.live_run == Some(lessons.lesson.id))
    else {
        if lessons
            .report
            .as_ref()
            .is_some_and(|r| r.lesson == lessons.lesson.name)
        {
            return format!(
                "The scenario's runs are judged below. For a live run of your own, press {start}."
            );
        }
        return format!("No run of this lesson yet: press {start}.");
    };
    if view.loss.is_empty() {
        return format!("Starting {}: preparing the first step…", view.name);
    }
    if lessons.lesson.id == LessonId::Forgetting
        && let (Some(base), Some(now)) = (&lessons.base_probes, view.probes.last())
    {
        let drop =
            hif8lab_train::eval::relative_drop(base.knowledge_acc_norm, now.knowledge_acc_norm);
        let first = view.loss.first().map(|p| p[1]).unwrap_or(f64::NAN);
        let last = view.loss.last().map(|p| p[1]).unwrap_or(f64::NAN);
        let lr = view
            .config
            .as_ref()
            .map(|c| c.train.lr.to_string())
            .unwrap_or_default();
        return format!(
            "{} steps at lr {lr}: knowledge accuracy {:.1} % to {:.1} % (a drop of {drop:.1} % relative to the base) while the training loss went from {first:.3} to {last:.3}. {}",
            view.loss.len(),
            100.0 * base.knowledge_acc_norm,
            100.0 * now.knowledge_acc_norm,
            match (drop >= 10.0, view_lr(view) >= 1e-3) {
                (true, true) =>
                    "The model forgot facts while its loss looked fine: try a rate 30x lower.",
                (true, false) => "The model forgot facts even at this low rate.",
                (false, true) =>
                    "The facts survived so far at this high rate: watch the next evaluations.",
                (false, false) => "The facts survived at this low rate: try a rate 30x higher.",
            }
        );
    }
    let ag = view.calls_above_roles(&[Role::A, Role::G]);
    let w = view.calls_above_roles(&[Role::W]);
    let of = |counts: &[u64], name: &str| {
        hif8lab_scaling::EstimatorKind::of(name)
            .and_then(|kind| kind.position_in(&view.estimators))
            .and_then(|k| counts.get(k).copied())
            .unwrap_or(0)
    };
    let ape = runs
        .baseline
        .as_ref()
        .and_then(|b| crate::state::ape(view, b))
        .map(|a| format!(" The loss is within {a:.3} % (APE) of the matched baseline."))
        .unwrap_or_default();
    format!(
        "{} steps. On activations and gradients, amax exceeded most_recent's estimate on {} calls and max_window(64)'s on {}; on weights (drifting slowly) {} and {}.{ape}",
        view.loss.len(),
        of(&ag, "most_recent"),
        of(&ag, "max_window"),
        of(&w, "most_recent"),
        of(&w, "max_window"),
    )
}

/// The learning rate `view` trains at (NaN when unknown).
fn view_lr(view: &RunView) -> f64 {
    view.config
        .as_ref()
        .map_or(f64::NAN, |c| f64::from(c.train.lr))
}

/// A lesson's two buttons: a live run set up for it, and its judged scenario.
fn scenario_buttons(cx: &mut LessonsCtx<'_>, ui: &mut egui::Ui, running: bool) {
    let l = cx.lessons.lesson;
    ui.horizontal_wrapped(|ui| {
        if l.name != "forgetting"
            && ui
                .add_enabled(!running, egui::Button::new("Set up and start a live run"))
                .clicked()
        {
            cx.actions.push(Action::StartLessonRun);
        }
        let busy = cx.jobs.any(&[JobKind::Lesson, JobKind::Scenario]) || cx.lessons.scenario_waiting;
        if ui
            .add_enabled(!busy, egui::Button::new("Run the lesson's scenario"))
            .on_hover_text("pretrained base + the lesson's runs, judged from their numbers (hif8lab lesson run)")
            .clicked()
        {
            cx.actions.push(Action::RunScenario);
        }
    });
}
