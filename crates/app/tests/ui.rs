//! UI tests of the real app (egui_kittest): choose smoke, start, wait for reports, check every
//! panel has data; invalid input shows the inline error and disables Start; a saved run opens.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use hif8lab_app::jobs::JobKind;
use hif8lab_app::{HifApp, Options, Tab};

fn harness(options: Options) -> Harness<'static, HifApp> {
    Harness::builder()
        .with_size(egui::vec2(1280.0, 800.0))
        .build_ui_state(|ui, app: &mut HifApp| app.show(ui), HifApp::new(&options))
}

use hif8lab_app::egui;

/// Steps frames until `done` holds (the training thread runs meanwhile), at most 60 s.
fn until(h: &mut Harness<'static, HifApp>, done: impl Fn(&HifApp) -> bool) {
    let start = std::time::Instant::now();
    while !done(h.state()) {
        assert!(
            start.elapsed().as_secs() < 180,
            "timed out; status: {}",
            h.state().messages.status
        );
        h.step();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    h.step();
}

#[test]
fn smoke_run_fills_every_panel() {
    let mut h = harness(Options {
        preset: Some("smoke".into()),
        ..Default::default()
    });
    h.state_mut()
        .form
        .settings
        .set("train.steps", "10")
        .unwrap();
    h.state_mut()
        .form
        .settings
        .set("qat.warmup_steps", "2")
        .unwrap();
    h.run_steps(2);
    // The preset says what it is; its time here is unknown before a first run.
    h.get_by_label_contains("the smallest run that exercises everything");
    h.get_by_label_contains("estimated once a first run has taken two steps");
    h.get_by_label("Start").click();
    until(&mut h, |app| {
        !app.jobs.running(JobKind::Run)
            && !app.jobs.running(JobKind::Baseline)
            && app.runs.live.as_ref().is_some_and(|v| v.loss.len() == 10)
    });
    // After it, the time a run of the form takes here, at the measured pace.
    assert!(h.state().device.pace.is_some_and(|p| p > 0.0));
    h.run_steps(2);
    h.get_by_label_contains("here, at the last run's pace.");
    let view = h.state().runs.live.clone().unwrap();
    assert_eq!(view.estimators.len(), 5);
    assert!(!view.calls.is_empty());
    for calls in view.calls.values() {
        assert_eq!(calls.len(), 8, "steps 2..10 quantized");
        assert!(calls.iter().all(|c| c.est.len() == 5 && c.amax > 0.0));
    }
    assert!(
        h.state().messages.status.contains("finished"),
        "{}",
        h.state().messages.status
    );
    // Loss panel, with the matched baseline: identical during the high-precision warmup.
    let baseline = h.state().runs.baseline_loss().to_vec();
    assert_eq!(baseline.len(), 10);
    assert_eq!(
        &baseline[..2],
        &view.loss[..2],
        "same data, quantizers still off"
    );
    assert_ne!(&baseline[2..], &view.loss[2..]);
    let ape = h.state().ape().unwrap();
    assert!(ape > 0.0 && ape < 10.0, "{ape}");
    assert_eq!(view.name, "smoke max_window lr=0.003 hif8");
    h.get_by_label_contains(
        "smoke max_window lr=0.003 hif8: 10 steps; APE vs the matched baseline",
    );
    // Amax panel: a quantizer is selected and the explanation names the call count.
    h.get_by_label("Amax").click();
    h.run_steps(2);
    assert_eq!(h.state().selection.tab, Tab::Amax);
    h.get_by_label_contains("8 calls. log2 axis");
    // Every call carries its quantization error (SQNR at the scale it used).
    for calls in view.calls.values() {
        for c in calls {
            let db = c.sqnr_db.expect("SQNR measured");
            assert!(db > 5.0 && db < 60.0, "{db}");
        }
    }
    // Saturation panel, then its SQNR map: the worst call of each cell, per role.
    h.get_by_label("Saturation").click();
    h.run_steps(2);
    h.get_by_label_contains("rows: quantizers");
    // Readable without hovering: a colour scale with numbers, the blocks shown and why
    // (smoke: 4 layers, auto), step numbers under each map.
    h.get_by_label("colour scale:");
    h.get_by_label("0");
    h.get_by_label_contains(
        "Shown: every quantized block, blocks 1, 2 of 4 (blocks auto: the first 1 and the last 1 stay in high precision",
    );
    assert!(
        h.query_all_by_label("step 0").count() >= 3,
        "one tick row per role"
    );
    assert!(h.query_all_by_label("step 9").count() >= 3);
    h.get_by_label("SQNR").click();
    h.run_steps(2);
    h.get_by_label_contains("colour: the worst SQNR of the cell");
    h.get_by_label_contains("activations (A): SQNR median");
    // Estimators panel: the reading is computed from the counts.
    h.get_by_label("Estimators").click();
    h.run_steps(2);
    let reading = view.reading();
    assert!(
        reading.contains("most_recent on") && reading.contains("current on 0"),
        "{reading}"
    );
    h.get_by_label_contains("amax exceeded the estimate of");
    h.get_by_label_contains("(active: bold)");
    h.get_by_label_contains("Cumulative calls whose amax exceeded");
    // Histogram panel: the selected quantizer's input at the last step, every element binned.
    let hist = view
        .histogram
        .clone()
        .expect("a live run bins the selected quantizer");
    assert_eq!(Some(&hist.id), h.state().selection.quantizer.as_ref());
    assert_eq!(hist.step, 9);
    let numel = 4 * 32 * {
        // W of up/gate: d_ff × d_model; A: rows × d_model; G: rows × d_ff (smoke: 64, 176).
        let q = hist.id.quantizer().expect("a run's quantizer");
        match q.role {
            hif8lab_scaling::Role::W => 176 * 64 / (4 * 32),
            _ if q.module == hif8lab_scaling::Module::Down => 176,
            _ => 64,
        }
    };
    assert_eq!(hist.hist.total(), numel as u64, "{}", hist.id);
    h.get_by_label("Histogram").click();
    h.run_steps(2);
    h.get_by_label_contains(&format!("{} at step 9: {numel} elements", hist.id));
    h.get_by_label_contains("coloured by hif8 tier: ");
    // With the estimate mapped to 15, the bulk of the values lands in the 3-bit tier.
    let three: u64 = hist
        .hist
        .bins
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            let mid = (hif8lab_scaling::stats::Log2Histogram::lower_log2(*i) + 0.125).exp2();
            hif8lab_app::charts::tier_of(hif8lab_format::Format::HiF8, mid as f32).0 == "3-bit"
        })
        .map(|(_, c)| c)
        .sum();
    assert!(
        three * 2 > numel as u64,
        "{three} of {numel} in the 3-bit tier"
    );
    // Runs panel: the current run listed; nothing to overlay yet.
    h.get_by_label("Runs").click();
    h.run_steps(2);
    h.get_by_label_contains("The current run and 0 earlier ones");
}

#[test]
fn runs_overlay_and_config_diff_after_reset() {
    let mut h = harness(Options {
        preset: Some("smoke".into()),
        ..Default::default()
    });
    let run = |h: &mut Harness<'static, HifApp>, lr: &str| {
        h.state_mut().form.settings.set("train.steps", "3").unwrap();
        h.state_mut()
            .form
            .settings
            .set("qat.warmup_steps", "1")
            .unwrap();
        h.state_mut().form.settings.set("train.lr", lr).unwrap();
        h.state_mut().form.settings.baseline = false;
        h.run_steps(1);
        h.get_by_label("Start").click();
        h.run_steps(1); // the click starts the run (until would see the last one finished)
        until(h, |app| {
            !app.jobs.running(JobKind::Run)
                && app.runs.live.as_ref().is_some_and(|v| v.loss.len() == 3)
        });
    };
    run(&mut h, "1e-3");
    // Reset keeps the run for comparison and restores the preset's values.
    h.get_by_label("Reset").click();
    h.run_steps(1);
    assert!(h.state().runs.live.is_none());
    assert_eq!(h.state().runs.earlier.len(), 1);
    assert_eq!(h.state().form.settings.get("train.steps"), "40");
    run(&mut h, "2e-3");
    assert_eq!(
        h.state().runs.earlier.len(),
        1,
        "the reset run, not an empty view"
    );
    h.get_by_label("Runs").click();
    h.run_steps(2);
    h.get_by_label_contains("The current run and 1 earlier ones");
    h.get_by_label("Config diff: current vs smoke max_window lr=0.001 hif8");
    // Only the learning rate differs.
    h.get_by_label("train.lr");
    h.get_by_label("0.002");
    h.get_by_label("0.001");
    assert!(h.query_by_label("train.steps").is_none());
    // Making the earlier run current swaps them.
    h.get_by_label("make current").click();
    h.run_steps(1);
    assert_eq!(
        h.state().runs.live.as_ref().unwrap().name,
        "smoke max_window lr=0.001 hif8"
    );
    assert_eq!(
        h.state().runs.earlier[0].name,
        "smoke max_window lr=0.002 hif8"
    );
}

#[test]
fn field_errors_show_under_their_field() {
    let mut h = harness(Options::default());
    h.state_mut().form.settings.set("model.heads", "5").unwrap();
    h.run_steps(2);
    // The Model group is collapsed by default; the message still names the key.
    h.get_by_label_contains("Invalid: fix the fields marked (!)");
    assert!(h.get_by_label("Start").accesskit_node().is_disabled());
    let (fields, whole) = h.state_mut().check_form();
    let heads = hif8lab_app::settings::FIELDS
        .iter()
        .position(|f| f.key == "model.heads")
        .unwrap();
    assert!(
        fields[heads].as_deref().unwrap().contains("heads"),
        "{fields:?}"
    );
    assert_eq!(fields.iter().filter(|f| f.is_some()).count(), 1);
    assert!(whole.is_err());
    h.state_mut().form.settings.set("model.heads", "4").unwrap();
    h.state_mut().form.settings.set("qat.roles", "").unwrap();
    h.run_steps(2);
    h.get_by_label("roles: choose at least one");
    h.state_mut().form.settings.toggle("qat.roles", "A", true);
    h.run_steps(2);
    assert!(!h.get_by_label("Start").accesskit_node().is_disabled());
}

#[test]
fn invalid_input_shows_an_error_and_disables_start() {
    let mut h = harness(Options::default());
    h.state_mut().form.settings.set("train.lr", "fast").unwrap();
    h.run_steps(2);
    h.get_by_label_contains("Invalid:");
    assert!(h.get_by_label("Start").accesskit_node().is_disabled());
    h.state_mut().form.settings.set("train.lr", "1e-3").unwrap();
    h.state_mut()
        .form
        .settings
        .set("qat.scaling.estimator", "median")
        .unwrap();
    h.run_steps(2);
    h.get_by_label_contains("\"median\" is not an estimator. Write one of: most_recent");
    h.state_mut()
        .form
        .settings
        .set("qat.scaling.estimator", "max_window")
        .unwrap();
    h.run_steps(2);
    assert!(!h.get_by_label("Start").accesskit_node().is_disabled());
}

/// A 6-step smoke run (QAT from step 1) on the CPU and the writer of its run folder `dir`,
/// for tests that write a run as the trainer would.
fn smoke_run_writer(
    dir: &std::path::Path,
) -> (
    hif8lab_train::Trainer<hif8lab_engine::cpu::CpuBackend>,
    hif8lab_train::run::RunWriter,
) {
    let config = hif8lab_train::RunConfig::parse(
        "smoke",
        hif8lab_train::config::PRESETS[0].1,
        &["train.steps=6".into(), "qat.warmup_steps=1".into()],
    )
    .unwrap();
    let t =
        hif8lab_train::Trainer::from_config(hif8lab_engine::cpu::CpuBackend::new(), config.clone())
            .unwrap();
    let w = hif8lab_train::run::RunWriter::create(
        dir,
        &config,
        t.estimator_names(),
        t.active_estimator(),
    )
    .unwrap();
    (t, w)
}

#[test]
fn a_saved_run_opens_with_its_curves() {
    let dir = std::env::temp_dir().join(format!("hif8lab-app-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut t, mut w) = smoke_run_writer(&dir);
    while !t.finished() {
        t.step().unwrap();
    }
    for r in t.finish().unwrap() {
        w.write(&r, &t.trace_records(&r), 0.0).unwrap();
    }
    let mut h = harness(Options {
        open: Some(dir.clone()),
        ..Default::default()
    });
    h.run_steps(2);
    let view = h.state().runs.live.clone().expect("opened");
    assert_eq!(view.loss.len(), 6);
    assert_eq!(view.qat_from, Some(1));
    assert!(view.calls.values().all(|c| c.len() == 5));
    h.get_by_label_contains("Opened");
    // A folder that is not a run says why.
    let mut h = harness(Options {
        open: Some(dir.join("nope")),
        ..Default::default()
    });
    h.run_steps(1);
    h.get_by_label_contains("Cannot open");
}

#[test]
fn a_trace_is_replayed_with_every_estimator() {
    let path = std::env::temp_dir().join(format!("hif8lab-app-trace-{}.csv", std::process::id()));
    let series = hif8lab_scaling::synth::synth(hif8lab_scaling::synth::Pattern::Spike, 400, 2);
    std::fs::write(&path, hif8lab_scaling::synth::to_csv(&series)).unwrap();
    let mut h = harness(Options {
        trace: Some(path.clone()),
        ..Default::default()
    });
    h.run_steps(2);
    assert_eq!(h.state().selection.tab, Tab::Amax);
    let view = h.state().runs.live.clone().expect("replayed");
    assert_eq!(view.calls.len(), 3);
    let counts = view.calls_above();
    let name = |n: &str| {
        view.estimators
            .iter()
            .position(|e| e.starts_with(n))
            .unwrap()
    };
    assert!(
        counts[name("most_recent")] > 5 * counts[name("max_window")],
        "{counts:?}"
    );
    assert_eq!(counts[name("current")], 0);
    h.get_by_label_contains("400 calls. log2 axis");
    h.get_by_label("Estimators").click();
    h.run_steps(2);
    h.get_by_label("median\nheadroom");
}

/// The browser's way of training (no threads): steps driven from the frame loop with a time
/// budget per frame, readbacks collected on later frames; the same reports as the thread.
#[test]
fn frame_loop_training_matches_the_thread() {
    let run = |frame_loop: bool| {
        let mut h = harness(Options {
            preset: Some("smoke".into()),
            ..Default::default()
        });
        h.state_mut().device.frame_loop = frame_loop;
        h.state_mut().form.settings.set("train.steps", "6").unwrap();
        h.state_mut()
            .form
            .settings
            .set("qat.warmup_steps", "2")
            .unwrap();
        h.state_mut().form.settings.baseline = false;
        h.run_steps(1);
        h.get_by_label("Start").click();
        until(&mut h, |app| {
            !app.jobs.running(JobKind::Run)
                && app.runs.live.as_ref().is_some_and(|v| v.loss.len() == 6)
        });
        let snap = h.state().snapshot();
        assert_eq!(snap["steps"], 6);
        assert_eq!(snap["backend"], "cpu");
        assert_eq!(snap["running"], false);
        assert!(snap["quantizers"].as_u64().unwrap() > 0);
        h.state().runs.live.clone().unwrap()
    };
    let local = run(true);
    let threaded = run(false);
    assert_eq!(
        local.loss, threaded.loss,
        "same data, same steps, same losses"
    );
    assert_eq!(local.calls, threaded.calls);
}

/// Exports: the calls CSV has a header naming each estimator's columns and a row per call.
#[test]
fn calls_csv_has_a_row_per_call() {
    let mut h = harness(Options {
        preset: Some("smoke".into()),
        ..Default::default()
    });
    h.state_mut().form.settings.set("train.steps", "4").unwrap();
    h.state_mut()
        .form
        .settings
        .set("qat.warmup_steps", "1")
        .unwrap();
    h.state_mut().form.settings.baseline = false;
    h.run_steps(1);
    h.get_by_label("Start").click();
    until(&mut h, |app| {
        !app.jobs.running(JobKind::Run) && app.runs.live.as_ref().is_some_and(|v| v.loss.len() == 4)
    });
    let view = h.state().runs.live.clone().unwrap();
    let csv = view.calls_csv();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(&header[..4], ["step", "quantizer", "amax", "underflow"]);
    assert_eq!(header.len(), 4 + 3 * view.estimators.len());
    let rows: Vec<&str> = lines.collect();
    let calls: usize = view.calls.values().map(Vec::len).sum();
    assert_eq!(rows.len(), calls);
    assert!(rows.iter().all(|r| r.split(',').count() == header.len()));
    let jsonl = view.loss_jsonl();
    assert_eq!(jsonl.lines().count(), 4);
    let first: serde_json::Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert_eq!(first["qat_enabled"], false);
}

/// The saturation lesson: opened by name, its live run set up (most_recent active, the
/// baseline alongside), the reading computed from the run, and its judged scenario.
#[test]
fn saturation_lesson_live_and_judged() {
    let mut h = harness(Options {
        lesson: Some("saturation".into()),
        ..Default::default()
    });
    assert_eq!(h.state().selection.tab, Tab::Lessons);
    assert_eq!(h.state().lessons.lesson.name, "saturation");
    h.run_steps(1);
    assert_eq!(
        h.query_all_by_label("1. Amax saturation").count(),
        2,
        "tab and heading"
    );
    h.get_by_label("Set up and start a live run").click();
    h.run_steps(1);
    assert_eq!(
        h.state().form.settings.get("qat.scaling.estimator"),
        "most_recent"
    );
    assert!(h.state().form.settings.baseline);
    until(&mut h, |app| {
        !app.jobs.running(JobKind::Run)
            && !app.jobs.running(JobKind::Baseline)
            && app.runs.live.as_ref().is_some_and(|v| v.loss.len() == 40)
    });
    let view = h.state().runs.live.clone().unwrap();
    let ag = view.calls_above_roles(&[hif8lab_scaling::Role::A, hif8lab_scaling::Role::G]);
    let mr = view
        .estimators
        .iter()
        .position(|e| e == "most_recent")
        .unwrap();
    // The reading quotes the run's own count.
    h.get_by_label_contains(&format!(
        "40 steps. On activations and gradients, amax exceeded most_recent's estimate on {} calls",
        ag[mr]
    ));
    h.get_by_label("Run the lesson's scenario").click();
    until(&mut h, |app| app.lessons.report.is_some());
    let report = h.state().lessons.report.clone().unwrap();
    assert_eq!(report.lesson, "saturation");
    assert!(report.holds(), "{report:?}");
    h.get_by_label_contains("holds: on activations and gradients");
    // Each claim reads as a sentence with rounded numbers; its raw data is folded away.
    assert_eq!(
        h.query_all_by_label_contains("Measured: ").count(),
        report.claims.len()
    );
    assert_eq!(
        h.query_all_by_label("details (the claim's data)").count(),
        report.claims.len()
    );
    assert_eq!(
        h.query_all_by_label("how it was tested").count(),
        report.claims.len()
    );
    // The data unfold as a table of names and values, not as JSON.
    h.query_all_by_label("details (the claim's data)")
        .next()
        .unwrap()
        .click();
    h.run_steps(2);
    assert_eq!(
        h.query_all_by_label_contains("{\"").count(),
        0,
        "no raw JSON"
    );
}

/// The forgetting lesson live: the base is pretrained once in the app (asked to, instead of
/// starting from the shipped one — and it gives the shipped bits), then continued at the
/// slider's rate with QAT and the matched baseline; probes are scored and the reading quotes
/// them.
#[test]
fn forgetting_lesson_continues_from_the_base_with_probes() {
    let mut h = harness(Options {
        lesson: Some("forgetting".into()),
        pretrain_base: true,
        ..Default::default()
    });
    assert!(h.state().lessons.base.is_none());
    h.state_mut().lessons.lr = 3e-3;
    h.run_steps(1);
    h.get_by_label("Pretrain the base, then continue at this rate")
        .click();
    h.run_steps(1);
    assert!(h.state().jobs.running(JobKind::Base));
    until(&mut h, |app| {
        app.lessons.base.is_some()
            && !app.jobs.running(JobKind::Run)
            && !app.jobs.running(JobKind::Baseline)
            && app.runs.live.as_ref().is_some_and(|v| v.loss.len() == 100)
    });
    let app = h.state();
    let base = app.lessons.base_probes.clone().expect("base scored");
    // Pretrained here, on the app's training thread: the shipped base's bits and scores.
    assert_eq!(app.lessons.base_from, "pretrained");
    let grid = hif8lab_lab::grid::GridConfig::preset("grid-lesson").unwrap();
    let shipped = hif8lab_lab::lesson::base::shipped(&grid).unwrap();
    assert_eq!(
        hif8lab_lab::lesson::base::fingerprint(app.lessons.base.as_ref().unwrap()),
        shipped.fingerprint()
    );
    assert_eq!(app.lessons.base_fingerprint, Some(shipped.fingerprint()));
    assert_eq!(
        base.knowledge_acc_norm.to_bits(),
        shipped.probes.knowledge_acc_norm.to_bits()
    );
    assert_eq!(base.marks, shipped.probes.marks);
    h.get_by_label_contains("(probes of the facts it was pretrained on). Pretrained here.");
    let view = app.runs.live.clone().unwrap();
    // Named after what it ran (not the form's preset), and read as this lesson's run.
    assert_eq!(view.name, "forgetting lesson lr=3e-3 QAT max_window(64)");
    assert_eq!(
        app.lessons.live_run,
        Some(hif8lab_lab::lesson::LessonId::Forgetting)
    );
    // Before the first step (= the base), every 25 steps, after the last.
    let steps: Vec<u64> = view.probes.iter().map(|p| p.step).collect();
    assert_eq!(steps, [0, 25, 50, 75, 100]);
    assert_eq!(
        view.probes[0].knowledge_acc_norm, base.knowledge_acc_norm,
        "starts from the base"
    );
    assert_eq!(app.runs.baseline_probes().len(), 5);
    assert!(view.qat_from.is_some(), "QAT on");
    let drop = hif8lab_train::eval::relative_drop(
        base.knowledge_acc_norm,
        view.probes[4].knowledge_acc_norm,
    );
    h.get_by_label_contains(&format!("(a drop of {drop:.1} % relative to the base)"));
    h.get_by_label("Loss").click();
    h.run_steps(2);
    h.get_by_label_contains("Knowledge probes (accuracy, per-byte likelihood)");
    // Each evaluation carries its 95 % interval: stated beside the score and drawn as a
    // band around the curve.
    let last = view.probes.last().unwrap();
    let [lo, hi] = last.interval(hif8lab_train::eval::ProbeScore::KnowledgeAccNorm);
    assert!(lo <= last.knowledge_acc_norm && last.knowledge_acc_norm <= hi && lo < hi);
    h.get_by_label_contains(&format!(
        "[95 %: {:.1}–{:.1}, {} items]",
        100.0 * lo,
        100.0 * hi,
        last.knowledge_items
    ));
    let band = hif8lab_app::charts::interval_band(&view.probes).unwrap();
    assert_eq!(band.len(), 2 * view.probes.len());
    for (i, p) in view.probes.iter().enumerate() {
        let (low, high) = (band[i], band[band.len() - 1 - i]);
        assert_eq!((low[0], high[0]), (p.step as f64, p.step as f64));
        assert!(low[1] <= 100.0 * p.knowledge_acc_norm && 100.0 * p.knowledge_acc_norm <= high[1]);
    }
}

/// `hif8lab lesson run NAME` at the lessons' size into a fresh folder `dir` (the sandbox
/// with `user`'s settings).
fn headless_lesson(
    name: &str,
    dir: &std::path::Path,
    user: Option<&hif8lab_train::RunConfig>,
) -> hif8lab_lab::lesson::LessonReport {
    let _ = std::fs::remove_dir_all(dir);
    hif8lab_lab::lesson::run_lesson(
        name,
        &|| Ok(hif8lab_engine::cpu::CpuBackend::new()),
        &hif8lab_lab::grid::GridConfig::preset("grid-lesson").unwrap(),
        dir,
        &mut (),
        user,
    )
    .unwrap()
}

/// Several runs of a scenario trained at once (the browser trains one per core, each in its
/// own worker) reach the verdict one at a time does, numbers and all, with the runs and their
/// views in the scenario's order whatever order they finish in.
#[test]
fn a_scenario_trained_several_runs_at_once_is_judged_as_one_at_a_time() {
    use hif8lab_app::scenario::ScenarioJob;
    use hif8lab_lab::lesson::LessonId;
    let mut h = harness(Options {
        lesson: Some("forgetting".into()),
        ..Default::default()
    });
    h.run_steps(1);
    let lessons = &h.state().lessons;
    assert_eq!(lessons.base_from, "shipped");
    let (base, probes) = (
        lessons.base.clone().unwrap(),
        lessons.base_probes.clone().unwrap(),
    );
    let mut grid = hif8lab_lab::grid::GridConfig::preset("grid-lesson").unwrap();
    // A quarter of the lesson's steps: what is compared is the bookkeeping of runs trained
    // side by side, not the lesson's point.
    grid.cont.steps /= 4;
    let judge = |parallel: usize| {
        let mut job = ScenarioJob::new(
            LessonId::Forgetting,
            &grid,
            base.clone(),
            probes.clone(),
            None,
            parallel,
        )
        .unwrap();
        let mut said = Vec::new();
        loop {
            if let Some(report) = job.poll(std::time::Duration::from_millis(5)).unwrap() {
                let views: Vec<(String, usize)> = job
                    .views
                    .iter()
                    .map(|v| (v.name.clone(), v.loss.len()))
                    .collect();
                return (report, views, said);
            }
            said.push(job.progress());
        }
    };
    let (one, views_one, _) = judge(1);
    let (three, views_three, said) = judge(3);
    assert_eq!(one, three, "the same verdict and numbers");
    assert_eq!(views_one, views_three);
    assert_eq!(views_one.len(), 4);
    assert!(
        said.iter().any(
            |p| p.starts_with("Scenario runs 1 to 3 of 4 (3 at once, 0 done): step ")
                && p.contains(" in all; about ")
        ),
        "{:?}",
        &said[..said.len().min(5)]
    );
}

/// The browser's way of running a lesson's judged scenario (in memory, stepped from the frame
/// loop, no files, from the shipped base) reaches the same verdict, numbers and all, as
/// `hif8lab lesson run` (which pretrains its base into its folder).
#[test]
fn in_memory_scenario_matches_the_headless_lesson() {
    let mut h = harness(Options {
        lesson: Some("sandbox".into()),
        ..Default::default()
    });
    h.state_mut().device.frame_loop = true;
    h.run_steps(1);
    assert_eq!(h.state().lessons.base_from, "shipped");
    // The sandbox trains the user's settings, not a fixed run.
    h.state_mut()
        .form
        .settings
        .set("qat.scaling.estimator", "most_recent")
        .unwrap();
    h.state_mut()
        .form
        .settings
        .set("train.steps", "60")
        .unwrap();
    let user = h
        .state()
        .sandbox_settings()
        .expect("the sandbox takes the form's settings");
    h.state_mut().run_scenario_in_memory();
    assert!(
        !h.state().lessons.scenario_waiting && h.state().jobs.running(JobKind::Scenario),
        "starts at once from the shipped base"
    );
    // Its progress, in its panel: run i of M, step n of N, the time left.
    until(&mut h, |app| {
        app.jobs
            .lesson_progress()
            .is_some_and(|p| p.contains("s left"))
    });
    let p = h.state().jobs.lesson_progress().unwrap();
    assert!(p.starts_with("Scenario run 1 of 1: "), "{p}");
    assert!(p.contains(" of 60; about "), "{p}");
    h.run_steps(2);
    // Under the lesson's button, and in the status line.
    assert!(
        h.query_all_by_label_contains("Scenario run 1 of 1: ")
            .count()
            >= 2,
        "the progress is not in the lesson's panel"
    );
    until(&mut h, |app| {
        app.lessons.report.is_some() || app.messages.error.is_some()
    });
    let app = h.state();
    assert_eq!(app.messages.error, None);
    let in_memory = app.lessons.report.clone().unwrap();
    assert_eq!(app.lessons.views.len(), 1);
    assert_eq!(app.lessons.views[0].loss.len(), 60);
    assert!(
        in_memory.runs[0].starts_with("sandbox-most_recent-"),
        "{:?}",
        in_memory.runs
    );
    h.get_by_label("The scenario's runs");
    // The thumbnail says what the claims measure: base → end, the drop relative (and in
    // points), the same numbers the lessons compute.
    let base = app.lessons.base_probes.clone().unwrap();
    let end = app.lessons.views[0]
        .probes
        .last()
        .unwrap()
        .knowledge_acc_norm;
    let drop = hif8lab_train::eval::relative_drop(base.knowledge_acc_norm, end);
    let caption = hif8lab_app::panels::knowledge_caption(Some(&base), &app.lessons.views[0]);
    assert!(
        caption.contains(&format!(
            "knowledge {:.1} % (base) to {:.1} %: {} {:.1} % relative ({:+.1} points)",
            100.0 * base.knowledge_acc_norm,
            100.0 * end,
            if drop >= 0.0 { "dropped" } else { "rose" },
            drop.abs(),
            100.0 * (end - base.knowledge_acc_norm)
        )),
        "{caption}"
    );
    h.get_by_label_contains(&caption);
    let dir = std::env::temp_dir().join(format!("hif8lab-app-lesson-{}", std::process::id()));
    let headless = headless_lesson("sandbox", &dir, Some(&user));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(in_memory, headless);
    // Its claim is decided by the numbers (a share of calls against 1 %), never by
    // construction: the verdict follows the share either way.
    let c = &in_memory.claims[0];
    assert!(
        c.claim.starts_with("your estimator (most_recent)"),
        "{}",
        c.claim
    );
    assert_eq!(c.holds, c.statistic < 5.0, "{c:?}");
}

/// Runs keep names of their own in the Runs list (they label and key its rows).
#[test]
fn kept_runs_get_unique_names() {
    let mut app = HifApp::new(&Options::default());
    let view = hif8lab_app::state::RunView::synthetic(2, 5, 1);
    for _ in 0..3 {
        app.keep_run(view.clone());
    }
    let names: Vec<&str> = app.runs.earlier.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["synthetic 2x5", "synthetic 2x5 (2)", "synthetic 2x5 (3)"]
    );
    // An empty view is not kept; the list is bounded.
    app.keep_run(hif8lab_app::state::RunView::default());
    assert_eq!(app.runs.earlier.len(), 3);
    for _ in 0..10 {
        app.keep_run(view.clone());
    }
    assert_eq!(app.runs.earlier.len(), hif8lab_app::MAX_RUNS);
    assert_eq!(app.runs.overlay.len(), hif8lab_app::MAX_RUNS);
}

/// The config editor shows what a run needs in memory, and refuses (Start disabled, the
/// estimate and the limit named) a run this machine cannot hold, before allocating anything.
#[test]
fn memory_estimate_beside_the_form_and_huge_runs_refused() {
    let mut h = harness(Options::default());
    h.run_steps(2);
    h.get_by_label_contains("Memory: 0.22 M parameters");
    assert!(!h.get_by_label("Start").accesskit_node().is_disabled());
    h.state_mut()
        .form
        .settings
        .set("model.context", "100000")
        .unwrap();
    h.run_steps(2);
    let (_, whole) = h.state_mut().check_form();
    let e = whole.unwrap_err();
    assert!(e.contains("needs about") && e.contains("available"), "{e}");
    h.get_by_label_contains("needs about");
    assert!(h.get_by_label("Start").accesskit_node().is_disabled());
}

/// A GGUF file opens like a Hugging Face folder: its converted model and tokenizer.
#[test]
fn a_gguf_file_opens_as_a_model() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/gguf/tiny-llama.gguf");
    let mut h = harness(Options {
        preset: Some("smoke".into()),
        init_from: Some(file),
        backend: Some(hif8lab_engine::BackendChoice::Cpu),
        ..Default::default()
    });
    h.run_steps(2);
    h.get_by_label_contains("Model: tiny-llama.gguf (GGUF, ");
    let config = h.state().run_config().unwrap();
    assert_eq!((config.model.vocab, config.model.d_model), (320, 256));
    assert!(!config.model.tie_embeddings);
    assert!(config.data.tokenizer.ends_with("tokenizer.json"));
}

#[test]
fn a_hugging_face_folder_continues_training_with_the_dashboard_live() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hf/tiny-gqa-tied-bf16");
    let mut h = harness(Options {
        preset: Some("smoke".into()),
        init_from: Some(dir.clone()),
        backend: Some(hif8lab_engine::BackendChoice::Cpu),
        ..Default::default()
    });
    h.state_mut().form.settings.set("train.steps", "6").unwrap();
    h.state_mut()
        .form
        .settings
        .set("qat.warmup_steps", "1")
        .unwrap();
    h.state_mut()
        .form
        .settings
        .set("qat.blocks", "0,1")
        .unwrap();
    h.run_steps(2);
    h.get_by_label_contains("Model: tiny-gqa-tied-bf16 (Hugging Face, ");
    let config = h.state().run_config().unwrap();
    assert_eq!(config.model.vocab, 384);
    assert!(config.model.tie_embeddings);
    assert_eq!(
        config.model.context, 32,
        "the preset's 32, within the model's 32"
    );
    assert!(config.data.tokenizer.ends_with("tokenizer.json"));
    h.get_by_label("Start").click();
    until(&mut h, |app| {
        !app.jobs.running(JobKind::Run)
            && !app.jobs.running(JobKind::Baseline)
            && app.runs.live.as_ref().is_some_and(|v| v.loss.len() == 6)
    });
    let view = h.state().runs.live.clone().unwrap();
    assert!(
        view.name.starts_with("tiny-gqa-tied-bf16 "),
        "{}",
        view.name
    );
    // The folder's weights, not a fresh initialization: the first loss is the model's (a
    // random 384-token model: near ln 384 = 5.95), and QAT calls were recorded live.
    assert!((view.loss[0][1] - 5.95).abs() < 0.3, "{:?}", view.loss[0]);
    assert_eq!(
        view.calls.len(),
        2 * 3 * 3,
        "2 blocks × 3 MLP modules × A, W, G"
    );
    // Back to the preset's model.
    h.get_by_label("Use the preset's model").click();
    h.run_steps(2);
    assert!(h.state().form.hf_model.is_none());
    assert_eq!(h.state().run_config().unwrap().model.vocab, 256);
    // A folder that is not a model says why.
    h.state_mut().open_hf_dir(&dir.join("nope"));
    h.run_steps(1);
    h.get_by_label_contains("Cannot open the model");
}

/// The status says what happened: Pause says paused (and `running` turns false for
/// scripts), Stop before the last step says where it stopped, not "finished".
#[test]
fn pause_and_stop_tell_the_truth() {
    let mut h = harness(Options {
        preset: Some("smoke".into()),
        ..Default::default()
    });
    h.state_mut()
        .form
        .settings
        .set("train.steps", "400")
        .unwrap();
    h.run_steps(2);
    h.get_by_label("Start").click();
    until(&mut h, |app| {
        app.runs.live.as_ref().is_some_and(|v| v.loss.len() >= 3)
    });
    h.get_by_label("Pause").click();
    h.run_steps(2);
    assert!(
        h.state().messages.status.starts_with("Paused after step"),
        "{}",
        h.state().messages.status
    );
    let snap = h.state().snapshot();
    assert_eq!(snap["paused"], true);
    assert_eq!(snap["running"], false, "{snap}");
    h.get_by_label("Resume").click();
    h.run_steps(2);
    assert!(
        h.state().messages.status.starts_with("Resumed"),
        "{}",
        h.state().messages.status
    );
    assert_eq!(h.state().snapshot()["running"], true);
    h.get_by_label("Stop").click();
    until(&mut h, |app| !app.jobs.running(JobKind::Run));
    let steps = h.state().runs.live.as_ref().unwrap().loss.len();
    assert!(steps < 400);
    assert_eq!(
        h.state().messages.status,
        format!("Training stopped at step {steps} of 400."),
    );
}

/// Every data series (the palette, the amax line, the format's tiers and lines) contrasts at
/// least 3:1 with the plot background of both themes (the amax line was white, invisible on
/// the light theme).
#[test]
fn series_colours_contrast_in_both_themes() {
    use hif8lab_app::charts::{AMAX, SERIES, contrast};
    for (theme, v) in [
        ("dark", egui::Visuals::dark()),
        ("light", egui::Visuals::light()),
    ] {
        for bg in [v.extreme_bg_color, v.panel_fill] {
            let tiers = hif8lab_format::Format::ALL
                .into_iter()
                .flat_map(hif8lab_app::charts::tier_groups)
                .map(|g| g.colour);
            let lines = [hif8lab_app::charts::LANDMARK];
            for c in SERIES
                .iter()
                .copied()
                .chain([AMAX])
                .chain(tiers)
                .chain(lines)
            {
                let r = contrast(c, bg);
                assert!(r >= 3.0, "{c:?} on the {theme} theme's {bg:?}: {r:.2}:1");
            }
        }
    }
    for bg in [egui::Visuals::dark(), egui::Visuals::light()].map(|v| v.panel_fill) {
        assert!(contrast(hif8lab_app::charts::QAT_ON, bg) >= 3.0);
    }
    // The Saturation heatmap's empty cells stand apart from the page and from the scale's
    // darkest end (a count of 1 against a peak of a million) in both themes.
    {
        use hif8lab_app::charts::{delta_e2000, heat_colour, lab, zero_cell};
        for v in [egui::Visuals::dark(), egui::Visuals::light()] {
            let zero = zero_cell(v.dark_mode);
            assert_eq!(heat_colour(0, 10, v.dark_mode), zero);
            for other in [
                v.panel_fill,
                v.extreme_bg_color,
                heat_colour(1, 1_000_000, v.dark_mode),
            ] {
                let d = delta_e2000(lab(zero), lab(other));
                assert!(d >= 10.0, "empty cell {zero:?} vs {other:?}: ΔE {d:.1}");
            }
        }
    }
    // The measure itself: black on white is 21:1, a colour on itself 1:1.
    assert!((contrast(egui::Color32::BLACK, egui::Color32::WHITE) - 21.0).abs() < 0.01);
    assert!((contrast(AMAX, AMAX) - 1.0).abs() < 1e-6);
}

/// Validation speaks the user's words under the field, and a target that makes every call
/// overflow is warned about (it is valid, so Start stays enabled).
#[test]
fn validation_in_plain_words_and_overflow_warning() {
    let mut h = harness(Options {
        preset: Some("smoke".into()),
        ..Default::default()
    });
    h.state_mut()
        .form
        .settings
        .set("train.steps", "40abc")
        .unwrap();
    h.run_steps(2);
    h.get_by_label("steps: a whole number (0, 1, 2, …), not \"40abc\"");
    h.state_mut()
        .form
        .settings
        .set("train.steps", "40")
        .unwrap();
    h.state_mut()
        .form
        .settings
        .set("qat.scaling.target", "100000")
        .unwrap();
    h.run_steps(2);
    h.get_by_label_contains("the largest values of every call will overflow");
    let (errors, whole) = h.state_mut().check_form();
    assert!(errors.iter().all(Option::is_none) && whole.is_ok());
}

/// The app filled with everything a panel can show (a synthetic run with loss, probes, a
/// baseline, a histogram and earlier runs; a judged lesson with its runs), for layout checks.
fn full_app() -> HifApp {
    use hif8lab_app::state::{HistView, RunView};
    let mut app = HifApp::new(&Options::default());
    let config = hif8lab_train::RunConfig::parse(
        "smoke",
        hif8lab_train::RunConfig::preset_text("smoke").unwrap(),
        &[],
    )
    .unwrap();
    let probes = |k: f64| -> Vec<hif8lab_train::ProbeScores> {
        (0..5u64)
            .map(|i| hif8lab_train::ProbeScores {
                step: i * 100,
                knowledge_acc_norm: k - 0.05 * i as f64,
                completion_acc_norm: 0.5,
                knowledge_items: 144,
                ..Default::default()
            })
            .collect()
    };
    let mut view = RunView::synthetic(24, 400, 3);
    view.name = "smoke max_window lr=0.002 hif8 (a long run name to wrap)".into();
    view.set_config(&config);
    view.probes = probes(0.6);
    view.qat_from = Some(10);
    let x: Vec<f32> = (0..65_536)
        .map(|i| ((i as f32) * 0.37).sin() * 3.0)
        .collect();
    view.histogram = view.calls.keys().next().cloned().map(|id| HistView {
        id,
        step: 399,
        hist: hif8lab_scaling::stats::Log2Histogram::of(&x, 4.0),
    });
    let mut baseline = RunView::synthetic(1, 400, 4);
    baseline.probes = probes(0.62);
    for i in 0..3 {
        let mut earlier = RunView::synthetic(6, 300, 10 + i);
        let mut c = config.clone();
        c.train.lr = 1e-3 * (i + 1) as f32;
        earlier.set_config(&c);
        app.keep_run(earlier);
    }
    app.runs.live = Some(view.clone());
    app.runs.baseline = Some(baseline);
    app.lessons.base_probes = Some(probes(0.64)[0].clone());
    app.lessons.lesson = hif8lab_lab::lesson::lesson("forgetting").unwrap();
    app.lessons.report = Some(hif8lab_lab::lesson::LessonReport {
        lesson: "forgetting".into(),
        claims: vec![hif8lab_lab::lesson::Claim::new(
            "without QAT, the high learning rate forgets: it loses ≥ 10 points more of the base's above-chance knowledge than the low rate",
            vec![hif8lab_lab::claims::Part {
                measured: "forgetting of baseline-high minus baseline-low".into(),
                unit: " points".into(),
                value: 21.5,
                spread: hif8lab_lab::claims::Spread::Seeds(vec![18.0, 21.5, 25.0]),
                side: hif8lab_lab::claims::Side::AtLeast,
                threshold: 10.0,
                test: "paired cluster bootstrap".into(),
                variation: "covers the probe items".into(),
            }],
            serde_json::json!({"forgetting_high_points": 37.5}),
        )],
        summary: "Against the base model, knowledge accuracy fell 37.5 %.".into(),
        runs: Vec::new(),
    });
    app.lessons.views = (0..4)
        .map(|i| {
            let mut v = RunView::synthetic(3, 100, 20 + i);
            v.name = format!("max_window-high-seed{i}");
            v.probes = probes(0.5);
            v
        })
        .collect();
    app
}

/// The window sizes the layout is checked at (points) and their scale: phones (360×640,
/// 390×844), a tablet (768×1024), laptops (1024×700, 1280×800, 1366×768), a desktop
/// (1920×1080) and 1280×800 pixels at 150 % (853×533 points at 1.5).
const SIZES: [([f32; 2], f32); 8] = [
    ([360.0, 640.0], 1.0),
    ([390.0, 844.0], 1.0),
    ([768.0, 1024.0], 1.0),
    ([1024.0, 700.0], 1.0),
    ([1280.0, 800.0], 1.0),
    ([1366.0, 768.0], 1.0),
    ([1920.0, 1080.0], 1.0),
    ([1280.0 / 1.5, 800.0 / 1.5], 1.5),
];

/// A fresh app in a window of `size` points at `scale`.
fn at_size(size: [f32; 2], scale: f32) -> Harness<'static, HifApp> {
    Harness::builder()
        .with_size(egui::vec2(size[0], size[1]))
        .with_pixels_per_point(scale)
        .build_ui_state(
            |ui, app: &mut HifApp| app.show(ui),
            HifApp::new(&Options::default()),
        )
}

/// Every tab — and the welcome screen, and on a phone the settings page — fits the window at
/// every size of [`SIZES`] in both themes: nothing is laid out beyond the space its region
/// has (tall content scrolls; nothing may run off to the right).
#[test]
fn every_tab_fits_at_every_size_in_both_themes() {
    use hif8lab_app::panels::TABS;
    let mut checked = 0;
    let mut expected = 0;
    for (size, scale) in SIZES {
        let narrow = size[0] < hif8lab_app::layout::NARROW;
        expected += 2 * 2 * (TABS.len() + usize::from(narrow));
        for theme in [egui::Theme::Dark, egui::Theme::Light] {
            for filled in [false, true] {
                let app = if filled {
                    full_app()
                } else {
                    HifApp::new(&Options::default())
                };
                let mut h = Harness::builder()
                    .with_size(egui::vec2(size[0], size[1]))
                    .with_pixels_per_point(scale)
                    .with_theme(theme)
                    .build_ui_state(|ui, app: &mut HifApp| app.show(ui), app);
                let pages = TABS
                    .iter()
                    .map(|(t, n)| (Some(*t), *n))
                    .chain(narrow.then_some((None, "Settings")));
                for (tab, name) in pages {
                    match tab {
                        Some(t) => {
                            h.state_mut().selection.tab = t;
                            h.state_mut().form.page = false;
                        }
                        None => h.state_mut().form.page = true,
                    }
                    h.run_steps(3);
                    let app = h.state();
                    assert!(
                        app.frames.overflow.is_empty(),
                        "{}×{} {theme:?} {name} ({}): {:?}",
                        size[0],
                        size[1],
                        if filled { "with a run" } else { "first run" },
                        app.frames.overflow
                    );
                    // The side panel folds away on a phone (and the page says so).
                    assert_eq!(app.snapshot()["narrow"], narrow);
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, expected);
}

/// While a run trains, its controls and progress stay in view at every size: the run bar
/// across the top holds Pause and Stop (once each), "step n of N" and the status, on a phone
/// too with the settings folded away, and it fits; Pause there pauses the run.
#[test]
fn the_run_bar_keeps_a_running_run_in_reach_at_every_size() {
    for (size, scale) in SIZES {
        let mut h = at_size(size, scale);
        h.state_mut()
            .form
            .settings
            .set("train.steps", "400")
            .unwrap();
        h.state_mut().selection.tab = Tab::Loss;
        h.run_steps(2);
        assert_eq!(
            h.query_all_by_label("Pause").count(),
            0,
            "no bar before a run"
        );
        let ctx = h.ctx.clone();
        h.state_mut().start(move || ctx.request_repaint());
        until(&mut h, |app| {
            app.runs.live.as_ref().is_some_and(|v| !v.loss.is_empty())
        });
        h.state_mut().form.page = false;
        h.run_steps(3);
        let at = format!("{}×{} at {scale}", size[0], size[1]);
        assert_eq!(h.query_all_by_label("Pause").count(), 1, "{at}");
        assert_eq!(h.query_all_by_label("Stop").count(), 1, "{at}");
        assert!(
            h.query_all_by_label_contains("of 400").count() >= 1,
            "{at}: the progress names the run's steps"
        );
        assert!(
            h.state().frames.overflow.is_empty(),
            "{at}: {:?}",
            h.state().frames.overflow
        );
        h.get_by_label("Pause").click();
        h.run_steps(2);
        assert!(h.state().paused(), "{at}");
        h.get_by_label("Stop").click();
        until(&mut h, |app| !app.jobs.running(JobKind::Run));
        h.run_steps(2);
        assert_eq!(
            h.query_all_by_label("Stop").count(),
            0,
            "{at}: the bar goes"
        );
    }
}

/// Start is a few Tab presses from the top of the settings (side panel, or a phone's
/// settings page) at every size, and the keyboard focus scrolls into view: tabbing on to the
/// last control of the settings brings it into the window, where Enter would press it.
#[test]
fn start_is_near_in_tab_order_and_focus_scrolls_into_view() {
    for (size, scale) in SIZES {
        let mut h = at_size(size, scale);
        let at = format!("{}×{} at {scale}", size[0], size[1]);
        h.state_mut().selection.tab = Tab::Loss;
        h.state_mut().form.page = size[0] < hif8lab_app::layout::NARROW;
        h.run_steps(2);
        let screen = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(size[0], size[1]));
        let mut presses = 0;
        while !h.get_by_label("Start").is_focused() {
            assert!(presses < 40, "{at}: Start not reached in 40 Tab presses");
            h.key_press(egui::Key::Tab);
            h.run_steps(2);
            presses += 1;
        }
        assert!(presses <= 12, "{at}: Start is {presses} Tab presses away");
        let start = h.get_by_label("Start").rect();
        assert!(screen.contains_rect(start), "{at}: Start at {start:?}");
        // On to the end of the settings (the last checkbox), which starts out of view on
        // short windows: each focused control is scrolled into the window.
        let last = "train the matched baseline alongside";
        let mut more = 0;
        while !h.get_by_label(last).is_focused() {
            assert!(more < 80, "{at}: '{last}' not reached in 80 Tab presses");
            h.key_press(egui::Key::Tab);
            h.run_steps(3);
            more += 1;
        }
        h.run_steps(4);
        let r = h.get_by_label(last).rect();
        assert!(
            screen.contains_rect(r),
            "{at}: the focused '{last}' at {r:?} is outside the window {screen:?}"
        );
    }
}

/// A grid's (here a lesson's) folder opens whole: its runs into the Runs list, overlaid,
/// most_recent-low current, and the quantizer with the largest amax chosen on Amax and
/// outlined on Saturation, the status saying which and by how much it stands out.
#[test]
fn a_grid_folder_opens_with_its_largest_amax_chosen() {
    let dir = std::env::temp_dir().join(format!("hif8lab-app-grid-{}", std::process::id()));
    headless_lesson("saturation", &dir, None);
    let mut h = harness(Options {
        open: Some(dir.clone()),
        ..Default::default()
    });
    h.run_steps(2);
    let app = h.state();
    let live = app.runs.live.clone().expect("a run shown");
    assert_eq!(live.name, "most_recent-low");
    let mut others: Vec<&str> = app.runs.earlier.iter().map(|v| v.name.as_str()).collect();
    others.sort();
    assert_eq!(
        others,
        [
            "baseline-low",
            "e4m3-saturate-most_recent-low",
            "max_window-low"
        ]
    );
    assert!(app.runs.overlay.iter().all(|o| *o));
    // The largest amax, found here independently.
    let (key, top) = live
        .calls
        .iter()
        .map(|(k, c)| (k.clone(), c.iter().map(|c| c.amax).fold(f32::MIN, f32::max)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert_eq!(app.selection.quantizer, Some(key.clone()));
    assert_eq!(app.selection.tab, Tab::Amax);
    assert!(
        app.messages
            .status
            .contains(&format!("the largest amax is {key}'s, {top:.4e}")),
        "{}",
        app.messages.status
    );
    h.state_mut().selection.tab = Tab::Saturation;
    h.run_steps(2);
    h.get_by_label(&format!("Outlined: {key}, the quantizer open in Amax."));
    // A folder without runs says so.
    let empty = dir.join("empty");
    std::fs::create_dir_all(empty.join("runs")).unwrap();
    h.state_mut().form.open_path = empty.display().to_string();
    h.state_mut().open_run();
    assert!(
        h.state().messages.status.starts_with("Cannot open: "),
        "{}",
        h.state().messages.status
    );
    assert!(h.state().messages.status.contains("no run folders"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The real model's lesson trains nothing: its button (and `?lesson=outliers&autostart=1`)
/// judges the committed SmolLM2-135M runs; the verdict, its headline and the quantizer it
/// found show in the panel, and the live-run reading (there is no live run) does not.
#[test]
fn the_real_model_lesson_judges_committed_runs() {
    let mut h = harness(Options {
        lesson: Some("outliers".into()),
        ..Default::default()
    });
    h.run_steps(2);
    assert_eq!(
        h.query_all_by_label_contains("What just happened (this lesson's live run)")
            .count(),
        0
    );
    h.get_by_label("Judge the committed SmolLM2-135M runs")
        .click();
    h.run_steps(3);
    let r = h.state().lessons.report.clone().expect("judged");
    assert_eq!(r.lesson, "outliers");
    assert_eq!(r.claims.len(), 4);
    // The headline in the panel (and the status line) counts every outcome.
    let headline = hif8lab_lab::claims::headline(&r.claims, hif8lab_lab::stats::Verdict3::as_str);
    let counted: usize = headline
        .split(" (of")
        .next()
        .unwrap()
        .split(", ")
        .map(|p| p.split(' ').next().unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(counted, 4, "{headline}");
    assert!(
        h.query_all_by_label_contains(&headline).count() >= 2,
        "{headline}"
    );
    let q = r.claims[0].evidence["quantizer"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(h.query_all_by_label_contains(&q).count() >= 1);
    // Autostart judges it too (what the browser's ?lesson=outliers&autostart=1 does).
    let mut h = harness(Options {
        lesson: Some("outliers".into()),
        ..Default::default()
    });
    h.run_steps(1);
    h.state_mut().autostart(|| {});
    h.run_steps(3);
    assert_eq!(h.state().lessons.report.as_ref(), Some(&r));
    assert!(!h.state().jobs.running(JobKind::Run), "nothing trains");
}

/// Lesson 4's links open the real model's outlier quantizers (their committed per-call
/// trace), the ~1,700× one chosen: its amax history against every estimator on Amax, its
/// calls above the estimates on Saturation — never the empty panels of a run not made.
#[test]
fn the_real_model_lesson_opens_the_outlier_on_its_panels() {
    use hif8lab_app::state::SeriesKey;
    let mut h = harness(Options {
        lesson: Some("outliers".into()),
        ..Default::default()
    });
    h.run_steps(2);
    for (link, tab) in [
        ("Open Amax »", Tab::Amax),
        ("Open Saturation »", Tab::Saturation),
    ] {
        h.state_mut().selection.tab = Tab::Lessons;
        h.run_steps(2);
        h.get_by_label(link).click();
        h.run_steps(3);
        let app = h.state();
        assert_eq!(app.selection.tab, tab, "{link}");
        let key = SeriesKey::parse("block11.down.A");
        assert_eq!(app.selection.quantizer.as_ref(), Some(&key), "{link}");
        let view = app.runs.live.as_ref().expect("a view opened");
        assert!(view.name.contains("SmolLM2-135M outliers"), "{}", view.name);
        assert_eq!(view.calls.len(), 3, "three outlier quantizers");
        let calls = &view.calls[&key];
        let n: u32 = calls.iter().map(|c| c.calls).sum();
        assert_eq!(n, 480, "every call of the 480 steps");
        // The outlier: amax in the thousands, exceeding most_recent's estimate far more
        // often than max_window(64)'s.
        let top = calls.iter().map(|c| c.amax).fold(0.0f32, f32::max);
        assert!(top > 1000.0, "{top}");
        let names = &view.estimators;
        let k = |n: &str| names.iter().position(|e| e == n).unwrap();
        let above = |i: usize| calls.iter().map(|c| c.calls_above[i]).sum::<u32>();
        assert!(
            above(k("most_recent")) > 2 * above(k("max_window(64)")),
            "{} vs {}",
            above(k("most_recent")),
            above(k("max_window(64)"))
        );
    }
    h.get_by_label_contains("block11.down.A chosen");
}

/// The overflow check itself: a row wider than its window is reported, naming the region.
#[test]
fn overflow_is_reported() {
    let mut h = Harness::builder()
        .with_size(egui::vec2(390.0, 300.0))
        .build_ui_state(
            |ui, seen: &mut Vec<String>| {
                hif8lab_app::layout::begin(ui.ctx());
                hif8lab_app::layout::scroll(ui, "test row", |ui| {
                    ui.horizontal(|ui| {
                        for i in 0..20 {
                            let _ = ui.button(format!("button {i}"));
                        }
                    });
                });
                *seen = hif8lab_app::layout::take(ui.ctx());
            },
            Vec::new(),
        );
    h.run_steps(2);
    assert_eq!(h.state().len(), 1, "{:?}", h.state());
    assert!(
        h.state()[0].starts_with("test row: content"),
        "{:?}",
        h.state()
    );
}

/// Lessons: switching clears the other lesson's verdict and runs and its "What just
/// happened"; a lesson links to the panels it says to look at; before the first step the
/// reading says it is starting (no "NaN"); the thumbnails say base → end.
#[test]
fn lessons_switch_cleanly_and_link_to_their_panels() {
    use hif8lab_app::state::RunView;
    let mut app = full_app();
    app.selection.tab = Tab::Lessons;
    app.lessons.live_run = Some(hif8lab_lab::lesson::LessonId::Forgetting);
    let mut h = Harness::builder()
        .with_size(egui::vec2(1280.0, 800.0))
        .build_ui_state(|ui, app: &mut HifApp| app.show(ui), app);
    h.run_steps(2);
    let base = h.state().lessons.base_probes.clone().unwrap();
    let caption = hif8lab_app::panels::knowledge_caption(Some(&base), &h.state().lessons.views[0]);
    assert!(
        caption.contains("(base) to") && caption.contains("relative"),
        "{caption}"
    );
    assert_eq!(h.query_all_by_label_contains(&caption).count(), 4);
    // The forgetting lesson's live run before its first step.
    let mut empty = RunView::new(
        "forgetting lesson lr=3e-3 QAT max_window(64)",
        Vec::new(),
        0,
        15.0,
    );
    empty.name = "forgetting lesson lr=3e-3 QAT max_window(64)".into();
    h.state_mut().runs.live = Some(empty);
    h.run_steps(2);
    h.get_by_label(
        "Starting forgetting lesson lr=3e-3 QAT max_window(64): preparing the first step…",
    );
    assert_eq!(h.query_all_by_label_contains("NaN").count(), 0);
    // Without a live run, the reading points at the verdict below instead of saying that
    // nothing ran.
    h.state_mut().runs.live = None;
    h.run_steps(2);
    h.get_by_label_contains("The scenario's runs are judged below");
    // A scenario running on its thread shows where it is in the lesson's own panel.
    let (_tx, rx) = std::sync::mpsc::channel();
    let text = std::sync::Arc::new(std::sync::Mutex::new(
        "Run 3 of 12: max_window-low: step 40 of 120; about 31 s left (9 s so far).".to_owned(),
    ));
    h.state_mut().jobs.start(
        JobKind::Lesson,
        hif8lab_app::jobs::Work::Lesson(rx, text.clone()),
    );
    h.run_steps(2);
    h.get_by_label("Run 3 of 12: max_window-low: step 40 of 120; about 31 s left (9 s so far).");
    *text.lock().unwrap() =
        "Run 4 of 12: most_recent-low: step 1 of 120; about 40 s left (13 s so far).".into();
    h.run_steps(2);
    h.get_by_label_contains("Run 4 of 12");
    h.state_mut().jobs.stop(JobKind::Lesson);
    h.run_steps(2);
    // Switch: the verdict, the runs and the reading of the other lesson go.
    h.get_by_label("1. Amax saturation").click();
    h.run_steps(2);
    assert_eq!(h.state().lessons.lesson.name, "saturation");
    assert!(h.state().lessons.report.is_none() && h.state().lessons.views.is_empty());
    h.get_by_label("No run of this lesson yet: press “Set up and start a live run”.");
    assert_eq!(h.query_all_by_label("The scenario's runs").count(), 0);
    // Its links open the panels it names.
    for (link, tab) in [
        ("Open Estimators »", Tab::Estimators),
        ("Open Saturation »", Tab::Saturation),
        ("Open Loss »", Tab::Loss),
    ] {
        h.state_mut().selection.tab = Tab::Lessons;
        h.run_steps(2);
        h.get_by_label(link).click();
        h.run_steps(2);
        assert_eq!(h.state().selection.tab, tab, "{link}");
    }
}

/// The first screen says what this is and where to begin; its buttons open the lessons and
/// start a first run; the terms it uses are explained.
#[test]
fn first_screen_offers_lessons_and_a_first_run() {
    let mut h = harness(Options::default());
    h.run_steps(2);
    h.get_by_label("Why does 8-bit training silently break?");
    for (term, _) in hif8lab_app::glossary::TERMS {
        assert!(h.query_all_by_label(term).count() >= 1, "{term}");
    }
    h.get_by_label("The lessons »").click();
    h.run_steps(2);
    assert_eq!(h.state().selection.tab, Tab::Lessons);
    h.state_mut().selection.tab = Tab::Loss;
    h.state_mut()
        .form
        .settings
        .set("train.steps", "400")
        .unwrap();
    h.run_steps(2);
    h.get_by_label("A first run »").click();
    h.run_steps(2);
    assert!(h.state().jobs.running(JobKind::Run));
    // While it runs, the side panel says what runs (from the run's own config).
    h.get_by_label_contains("Running: smoke");
    h.get_by_label_contains("400 steps at lr");
    h.get_by_label("Stop").click();
    until(&mut h, |app| !app.jobs.running(JobKind::Run));
}

/// Colours shown together look different: every two series colours and the amax line are at
/// least 20 apart in CIEDE2000 ΔE, and so is the "QAT on" marker from what it is drawn with
/// (the Amax panel's five estimators and amax; the Loss panel's run and baseline). The ΔE
/// itself matches Sharma, Wu and Dalal's published test pairs.
#[test]
fn colours_shown_together_are_distinct() {
    use hif8lab_app::charts::{AMAX, QAT_ON, SERIES, delta_e2000, lab};
    for (p, q, want) in [
        ([50.0, 2.6772, -79.7751], [50.0, 0.0, -82.7485], 2.0425),
        ([50.0, 2.5, 0.0], [73.0, 25.0, -18.0], 27.1492),
        ([50.0, 2.5, 0.0], [50.0, 0.0, -2.5], 4.3065),
        (
            [60.2574, -34.0099, 36.2677],
            [60.4626, -34.1751, 39.4387],
            1.2644,
        ),
    ] {
        let got = delta_e2000(p, q);
        assert!((got - want).abs() < 1e-4, "{p:?} {q:?}: {got} vs {want}");
    }
    let together: Vec<egui::Color32> = SERIES.iter().copied().chain([AMAX]).collect();
    for (i, a) in together.iter().enumerate() {
        for b in &together[i + 1..] {
            let d = delta_e2000(lab(*a), lab(*b));
            assert!(d >= 20.0, "{a:?} vs {b:?}: ΔE {d:.1}");
        }
    }
    for c in SERIES[..5].iter().chain([&AMAX]) {
        let d = delta_e2000(lab(QAT_ON), lab(*c));
        assert!(d >= 20.0, "QAT on vs {c:?}: ΔE {d:.1}");
    }
    // The Amax panel's format lines (one colour, named on the plot) against what they are
    // drawn with.
    for c in SERIES[..5].iter().chain([&AMAX, &QAT_ON]) {
        let d = delta_e2000(lab(hif8lab_app::charts::LANDMARK), lab(*c));
        assert!(d >= 25.0, "format lines vs {c:?}: ΔE {d:.1}");
    }
    // The amax line stands further apart from the five estimates it is read against (the
    // ochre of ema once came within 22).
    for c in &SERIES[..5] {
        let d = delta_e2000(lab(AMAX), lab(*c));
        assert!(d >= 25.0, "amax vs {c:?}: ΔE {d:.1}");
    }
    // The Histogram: one legend entry per tier (bars and the lines where it begins share its
    // colour), plus the target line; every two ≥ 20 apart, every bar's tier one of them in
    // its colour, every line in its tier's colour.
    for format in hif8lab_format::Format::ALL {
        let groups = hif8lab_app::charts::tier_groups(format);
        let shown: Vec<(&str, egui::Color32)> = groups
            .iter()
            .map(|g| (g.name, g.colour))
            .chain([("target", AMAX)])
            .collect();
        for (i, (na, a)) in shown.iter().enumerate() {
            for (nb, b) in &shown[i + 1..] {
                assert_ne!(na, nb, "{format}: {na} twice");
                let d = delta_e2000(lab(*a), lab(*b));
                assert!(d >= 20.0, "{format}: {na} vs {nb}: ΔE {d:.1}");
            }
        }
        let lines = hif8lab_app::charts::landmarks(format);
        assert_eq!(
            lines.len(),
            groups.iter().map(|g| g.lines.len()).sum::<usize>()
        );
        assert!(lines.iter().any(|l| l.0 == "overflow"));
        for e in -40..=20 {
            for frac in [0.1f64, 0.5, 0.9] {
                let v = (f64::from(e) + frac).exp2() as f32;
                let (tier, colour) = hif8lab_app::charts::tier_of(format, v);
                let g = groups.iter().find(|g| g.name == tier);
                assert!(
                    g.is_some_and(|g| g.colour == colour),
                    "{format}: {v} in '{tier}', not a legend entry in its colour"
                );
            }
        }
    }
}

/// Every text the app draws is readable in both themes: no text style below 11 px at 1×
/// scale, and every text colour (egui's own after the app's adjustments, and the app's
/// verdict, error and notice colours) at least 4.5:1 against the fills text is drawn on. The
/// running app has the adjusted styles.
#[test]
fn every_text_is_readable_in_both_themes() {
    use hif8lab_app::charts::contrast;
    use hif8lab_app::theme::{
        MIN_TEXT_CONTRAST, MIN_TEXT_PX, adjust, text_backgrounds, text_colours,
    };
    for (theme, visuals) in [
        ("dark", egui::Visuals::dark()),
        ("light", egui::Visuals::light()),
    ] {
        let mut style = egui::Style {
            visuals,
            ..egui::Style::default()
        };
        adjust(&mut style);
        for (ts, font) in &style.text_styles {
            assert!(
                font.size >= MIN_TEXT_PX,
                "{theme}: {ts:?} is {} px",
                font.size
            );
        }
        // An input field is visible on the page: its edge at 3:1 at least (WCAG's contrast
        // for a control's boundary).
        let edge = hif8lab_app::theme::input_field_edge(&style);
        let r = contrast(edge, style.visuals.panel_fill);
        assert!(
            r >= 3.0,
            "{theme}: input field edge {edge:?} on the page is {r:.2}:1"
        );
        for (what, c) in text_colours(&style) {
            for bg in text_backgrounds(&style) {
                let r = contrast(c, bg);
                assert!(
                    r >= MIN_TEXT_CONTRAST,
                    "{theme}: {what} {c:?} on {bg:?} is {r:.2}:1"
                );
            }
        }
    }
    let mut h = harness(Options::default());
    h.run_steps(3);
    for theme in [egui::Theme::Dark, egui::Theme::Light] {
        let style = h.ctx.style_of(theme);
        let small = &style.text_styles[&egui::TextStyle::Small];
        assert!(small.size >= MIN_TEXT_PX, "{theme:?}: {}", small.size);
        assert!(
            style.visuals.weak_text_color.is_some(),
            "{theme:?}: the app's weak text colour is set"
        );
    }
}

/// The Amax plot's log2 axis keeps labelled marks at every height: for ranges from half a
/// binade to 40 and plot heights from 40 to 800 points, some mark lies in the range with its
/// step at least 20 points apart (egui_plot's threshold for painting a tick label), and the
/// marks are never so dense that none of them is labelled. Its labels are round values
/// (two significant digits at most: 1.5, 2, 3, 250), not exponents.
#[test]
fn amax_axis_keeps_numbers_at_every_height() {
    use hif8lab_app::charts::log2_marks;
    for lo in [-12.3, -8.6, -1.0, 3.2] {
        for width in [0.5, 2.0, 4.1, 15.0, 40.0] {
            for height in [40.0, 60.0, 100.0, 140.0, 300.0, 800.0] {
                let per_point = width / height;
                // egui_plot's own input: its minimal grid spacing (8 points) in plot units.
                let marks = log2_marks(egui_plot::GridInput {
                    bounds: (lo, lo + width),
                    base_step_size: per_point * 8.0,
                });
                let labelled: Vec<_> = marks
                    .iter()
                    .filter(|m| m.value >= lo && m.value <= lo + width)
                    .filter(|m| m.step_size / per_point >= 20.0)
                    .collect();
                assert!(
                    !labelled.is_empty() || width / per_point < 20.0,
                    "range {lo}..{} at {height} points: {marks:?}",
                    lo + width
                );
                assert!(marks.len() <= 1 + (height / 8.0) as usize * 2, "{marks:?}");
                // The labels are the values themselves, round ones (1.5, 2, 3, 250 …),
                // never fractional exponents, wherever such a value lies in the range.
                if width >= 0.5 {
                    for m in &labelled {
                        let x = 2f64.powf(m.value);
                        let text = hif8lab_app::charts::value_label(m.value);
                        if (1e-3..1e5).contains(&x) {
                            let back: f64 = text.parse().unwrap_or_else(|_| panic!("{text}"));
                            assert!((back / x - 1.0).abs() < 1e-9, "{text} for {x}");
                            let digits = text.trim_start_matches("0.").replace('.', "");
                            let significant = digits.trim_start_matches('0').trim_end_matches('0');
                            assert!(significant.len() <= 2, "{text}");
                        }
                    }
                }
            }
        }
    }
    assert_eq!(hif8lab_app::charts::value_label(11.0), "2048");
    assert_eq!(hif8lab_app::charts::value_label(-2.0), "0.25");
    assert_eq!(hif8lab_app::charts::value_label(1.5f64.log2()), "1.5");
    assert_eq!(hif8lab_app::charts::value_label(3000f64.log2()), "3000");
    assert_eq!(hif8lab_app::charts::value_label(-20.0), "2^-20");
}

/// The SQNR subplot's linear axis keeps three or more labelled values at its height (160
/// points) for any range of dB, all marks one round step apart, labelled with the decimals
/// the step needs.
#[test]
fn sqnr_axis_keeps_numbers() {
    use hif8lab_app::charts::{linear_label, linear_marks};
    for (lo, hi) in [
        (30.5, 32.3),
        (0.0, 60.0),
        (-3.0, 41.0),
        (25.01, 25.2),
        (12.0, 12.5),
    ] {
        for height in [120.0, 160.0, 400.0] {
            let per_point = (hi - lo) / height;
            let marks = linear_marks(egui_plot::GridInput {
                bounds: (lo, hi),
                base_step_size: per_point * 8.0,
            });
            assert!(marks.len() >= 3, "{lo}..{hi} at {height}: {marks:?}");
            for m in &marks {
                assert!((lo..=hi).contains(&m.value), "{m:?}");
                assert!(m.step_size / per_point >= 20.0, "{m:?} at {height}");
                assert_eq!(m.step_size, marks[0].step_size);
                let text = linear_label(m);
                let back: f64 = text.parse().unwrap_or_else(|_| panic!("{text}"));
                assert!(
                    (back - m.value).abs() < 1e-9 * (1.0 + m.value.abs()),
                    "{text}"
                );
            }
        }
    }
}

#[test]
fn a_torch_run_folder_opens() {
    // Written by `hif8lab.torch.train` under torchrun (tests/fixtures/gen_torch_fixtures.sh):
    // 6 steps, QAT from step 2, blocks 1-2's MLP projections, roles A/W/G.
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/torch/run");
    let mut h = harness(Options {
        open: Some(dir),
        ..Default::default()
    });
    h.run_steps(2);
    let view = h.state().runs.live.clone().expect("opened");
    assert_eq!(view.loss.len(), 6);
    assert_eq!(view.qat_from, Some(2));
    assert_eq!(
        view.calls.len(),
        2 * 3 * 3,
        "blocks 1-2 × gate/up/down × A/W/G"
    );
    // 4 QAT steps × 1 micro-batch of rank 0 (global batch 4 = 2 rows × 2 processes)
    assert!(view.calls.values().all(|c| c.len() == 4));
    assert_eq!(view.estimators.len(), 5);
    h.get_by_label_contains("Opened");
    // Which window? The sweep over this run's amax, opened on demand.
    h.get_by_label("Estimators").click();
    h.run_steps(2);
    h.get_by_label("Which window?").click();
    h.run_steps(2);
    h.get_by_label("max_window(1)");
    h.get_by_label("mean_window(1024)");
    h.get_by_label_contains("Calls above the estimate are exact");
}

#[test]
fn watch_follows_a_run_folder_as_it_grows() {
    let dir = std::env::temp_dir().join(format!("hif8lab-app-watch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut h = harness(Options {
        watch: Some(dir.clone()),
        ..Default::default()
    });
    h.run_steps(2);
    h.get_by_label_contains("waiting for its first step");
    assert!(h.state().runs.live.is_none());
    // Another process writes the run: three steps, then three more.
    let (mut t, mut w) = smoke_run_writer(&dir);
    let mut written = 0;
    for wanted in [3usize, 6] {
        while written < wanted {
            t.step().unwrap();
            for r in t.finish().unwrap() {
                w.write(&r, &t.trace_records(&r), 0.0).unwrap();
                written += 1;
            }
        }
        until(&mut h, |app| {
            app.runs
                .live
                .as_ref()
                .is_some_and(|v| v.loss.len() == wanted)
        });
    }
    let view = h.state().runs.live.clone().unwrap();
    assert!(view.calls.values().all(|c| c.len() == 5));
    h.get_by_label_contains("Following");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `hif8lab-app --help` names every flag the parser accepts, each with what it does.
#[test]
fn help_names_every_flag() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hif8lab-app"))
        .arg("--help")
        .output()
        .expect("run hif8lab-app --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let main = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/main.rs"),
    )
    .unwrap();
    // Every `"--flag" =>` arm of the parser appears in the help, followed by words.
    let flags: Vec<&str> = main
        .split('"')
        .filter(|s| s.starts_with("--") && s.len() > 2 && !s.contains(' '))
        .collect();
    assert!(flags.len() >= 13, "{flags:?}");
    for f in flags {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(f) || l.contains(&format!(", {f}")))
            .unwrap_or_else(|| panic!("--help lacks {f}:\n{help}"));
        assert!(
            line.len() > f.len() + 10 || help.contains(&format!("{f} ")),
            "{line}"
        );
    }
}

/// A committed results folder (`docs/results/real-smollm2`: results.md beside runs.jsonl.gz,
/// no run folders) opens: every run of the first data order with its loss curve and probes,
/// in Runs, and the status says what such a folder lacks (per-call traces).
#[test]
fn a_committed_results_folder_opens() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/real-smollm2");
    let mut h = harness(Options {
        open: Some(dir),
        ..Default::default()
    });
    h.run_steps(2);
    let app = h.state();
    let live = app.runs.live.clone().expect("a run shown");
    assert_eq!(live.loss.len(), 160);
    assert_eq!(live.probes.len(), 1);
    assert_eq!(app.runs.earlier.len() + 1, 10, "8 cells and 2 E4M3 twins");
    assert_eq!(app.selection.tab, hif8lab_app::Tab::Runs);
    h.get_by_label_contains("Per-call amax traces are not kept in a results folder");
}

/// The row of lessons stays in view when a long lesson is scrolled to its end (on a phone
/// held sideways, where the text runs below the fold).
#[test]
fn the_lesson_row_stays_when_the_lesson_scrolls() {
    let size = [360.0, 400.0];
    let mut h = at_size(size, 1.0);
    h.state_mut().selection.tab = Tab::Lessons;
    h.state_mut().lessons.lesson = hif8lab_lab::lesson::lesson("fixes").unwrap();
    h.run_steps(3);
    let screen = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(size[0], size[1]));
    let before = h.get_by_label("5. Sandbox").rect();
    assert!(h.get_by_label("Predict").rect().top() > before.bottom());
    // Scroll the lesson's text to its end (the scenario's button, below the fold).
    let end = h.get_by_label("Run the lesson's scenario").rect();
    assert!(
        end.bottom() > size[1],
        "the lesson fits the window: nothing to scroll ({end:?})"
    );
    h.get_by_label("Run the lesson's scenario").scroll_to_me();
    h.run_steps(6);
    // The lesson's text (its "Predict" heading, below the row at first) scrolled up past
    // the row.
    let predict = h.get_by_label("Predict").rect();
    assert!(
        predict.top() < before.bottom(),
        "the text did not scroll: Predict at {predict:?}"
    );
    let after = h.get_by_label("5. Sandbox").rect();
    assert!(
        screen.contains_rect(after),
        "the lesson row left the window: {after:?}"
    );
    assert!(
        (after.top() - before.top()).abs() < 1.0,
        "the row moved from {before:?} to {after:?}"
    );
}

/// The summed area of every triangle a frame tessellates to, in windows of `size`, less the
/// harness's own background (kittest draws a panel-coloured rectangle inside an 8-point
/// margin under what it shows; eframe draws none).
fn filled_windows(h: &Harness<'static, HifApp>, size: egui::Vec2) -> f64 {
    let out = h.output();
    let prims = h.ctx.tessellate(out.shapes.clone(), out.pixels_per_point);
    let mut area = 0.0f64;
    for p in &prims {
        if let egui::epaint::Primitive::Mesh(m) = &p.primitive {
            for t in m.indices.chunks(3) {
                let [a, b, c] = [t[0], t[1], t[2]].map(|i| m.vertices[i as usize].pos);
                area +=
                    f64::from(((b.x - a.x) * (c.y - a.y) - (c.x - a.x) * (b.y - a.y)).abs()) / 2.0;
            }
        }
    }
    let harness = f64::from((size.x - 16.0) * (size.y - 16.0));
    (area - harness) / f64::from(size.x * size.y)
}

/// A frame fills each pixel about once: the panels leave their fill to the frame's clear (the
/// panel colour) and the plots draw an outline, not a background. Where the browser has no
/// GPU its software rasterizer spends a frame filling pixels; measured in headless Chromium,
/// the Loss panel went from 6.7 to 20.3 frames/s. On every data panel at 1280×800 the
/// triangles cover at most 0.6 windows beyond the clear (the Saturation heatmap's cells are
/// the most, about 0.5); the panels' fills back would add about one, a plot's background
/// half (checked: Loss 0.21 → 0.71).
#[test]
fn a_frame_fills_each_pixel_about_once() {
    let size = egui::vec2(1280.0, 800.0);
    let mut h = Harness::builder()
        .with_size(size)
        .build_ui_state(|ui, app: &mut HifApp| app.show(ui), full_app());
    let mut seen = Vec::new();
    for tab in hif8lab_app::BENCH_TABS {
        h.state_mut().selection.tab = tab;
        h.step();
        h.step();
        let filled = filled_windows(&h, size);
        seen.push(format!("{tab:?} {filled:.2}"));
        assert!(filled > 0.0, "{tab:?}: nothing drawn");
        assert!(
            filled <= 0.6,
            "{tab:?} fills {filled:.2} windows beyond the clear (all: {seen:?})"
        );
    }
    println!("filled beyond the clear: {}", seen.join(", "));
}
