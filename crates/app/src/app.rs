//! The app: its parts, and everything it does (`impl HifApp` lives here and in `app/`:
//! its jobs, its lessons, what it opens).

use crate::*;

mod lessons;
mod open;
mod work;

/// The app.
pub struct HifApp {
    /// The side panel's form: the settings, their check, the page on a narrow window, the
    /// opened model, the run folder path typed.
    pub form: settings::SettingsPanel,
    /// The live run (or the opened one), its matched baseline, earlier runs.
    pub runs: Runs,
    /// Background work: training, pretraining, lesson scenarios.
    pub jobs: jobs::Jobs,
    /// What the user is told: the status line, a standing notice, the last error.
    pub messages: Messages,
    /// What the panels select: tab, quantizer, heatmap mode.
    pub selection: Selection,
    /// What trains: eframe's GPU device, the backend and adapter of the last run.
    pub device: DeviceChoice,
    /// The lessons: the one shown, its base model, its last verdict and runs.
    pub lessons: panels::lessons::LessonsView,
    /// Frame statistics: frames drawn, their times, the layout's overflow.
    pub frames: frames::FrameStats,
    /// PNG exports: the panels' requests and the screenshots that answer them.
    pub png: png::PngExports,
    /// The data panels (each owns what it caches) and the Runs panel.
    pub panels: charts::Panels,
    /// The files shipped with the app (the lessons' base, the real-model runs).
    pub shipped: shipped::Shipped,
    /// The run folder followed live (`--watch`, "Follow"), if any.
    #[cfg(not(target_arch = "wasm32"))]
    pub watch: Option<crate::watch::Watch>,
}

impl HifApp {
    /// A new app (no GPU device: CPU training only).
    pub fn new(options: &Options) -> Self {
        let mut app = HifApp {
            form: settings::SettingsPanel {
                settings: Settings::from_preset(options.preset.as_deref().unwrap_or("smoke")),
                check: None,
                page: false,
                hf_model: None,
                open_path: String::new(),
            },
            runs: Runs::default(),
            jobs: jobs::Jobs::default(),
            messages: Messages {
                status: "Pick a preset and press Start.".into(),
                ..Default::default()
            },
            selection: Selection {
                tab: Tab::Loss,
                quantizer: None,
                heat: HeatValue::AboveEst,
            },
            device: DeviceChoice {
                gpu: None,
                frame_loop: cfg!(target_arch = "wasm32"),
                backend: BackendKind::Cpu,
                adapter: hif8lab_engine::cpu::cpu_name(),
                pace: None,
            },
            lessons: panels::lessons::LessonsView::default(),
            frames: frames::FrameStats::default(),
            png: png::PngExports {
                after: options.png_after.clone(),
                ..Default::default()
            },
            panels: charts::Panels::default(),
            shipped: shipped::Shipped {
                pretrain_base: options.pretrain_base,
                ..Default::default()
            },
            #[cfg(not(target_arch = "wasm32"))]
            watch: None,
        };
        #[cfg(not(target_arch = "wasm32"))]
        app.adopt_shipped_base();
        if let Some(name) = &options.lesson {
            match hif8lab_lab::lesson::lesson(name) {
                Some(l) => {
                    app.lessons.lesson = l;
                    app.selection.tab = Tab::Lessons;
                    app.setup_lesson();
                }
                None => {
                    app.messages.status = format!(
                        "No lesson '{name}' (lessons: {}).",
                        hif8lab_lab::lesson::names()
                    )
                }
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(dir) = &options.init_from {
            app.open_hf_dir(dir);
        }
        if let Some(dir) = &options.open {
            app.form.open_path = dir.display().to_string();
            app.open_run();
        }
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(dir) = &options.watch {
            app.follow(dir.clone());
        }
        if let Some(tab) = options.tab {
            app.selection.tab = tab;
        }
        app.bench_and_trace(options);
        app
    }

    /// `--bench-frames` (a synthetic run to draw) and `--trace` (a trace to replay).
    fn bench_and_trace(&mut self, options: &Options) {
        if let Some(n) = options.bench_frames {
            let mut v = RunView::synthetic(64, 10_000, 1);
            // One histogram, so that panel draws too.
            let x: Vec<f32> = (0..65_536)
                .map(|i| ((i as f32) * 0.37).sin() * 3.0)
                .collect();
            v.histogram = v.calls.keys().next().cloned().map(|id| state::HistView {
                id,
                step: 9_999,
                hist: hif8lab_scaling::stats::Log2Histogram::of(&x, 4.0),
            });
            self.runs.live = Some(v);
            self.frames.bench = Some(FrameBench::new(n));
        }
        if let Some(path) = &options.trace {
            match RunView::from_trace_file(path) {
                Ok(v) => {
                    self.messages.status =
                        format!("Replayed {} ({} quantizers).", v.name, v.calls.len());
                    self.runs.live = Some(v);
                    // Amax first, unless --tab asked for another panel.
                    self.selection.tab = options.tab.unwrap_or(Tab::Amax);
                }
                Err(e) => self.messages.status = format!("Cannot read trace: {e}"),
            }
        }
    }

    /// Opens the run folder in `open_path` (a grid's or a lesson's folder: its runs, see
    /// [`HifApp::open_grid`]).
    pub fn open_run(&mut self) {
        let dir = std::path::PathBuf::from(self.form.open_path.trim());
        #[cfg(not(target_arch = "wasm32"))]
        if !dir.join("runs").is_dir() && dir.join(hif8lab_lab::grid::DATA_FILE).is_file() {
            self.messages.status = match self.open_results(&dir) {
                Ok(words) => words,
                Err(e) => format!("Cannot open: {e}"),
            };
            return;
        }
        #[cfg(not(target_arch = "wasm32"))]
        if dir.join("runs").is_dir() && !hif8lab_train::run::RunDir::new(&dir).has_metrics() {
            self.messages.status = match self.open_grid(&dir) {
                Ok(words) => words,
                Err(e) => format!("Cannot open: {e}"),
            };
            return;
        }
        match RunView::load(&dir) {
            Ok(v) => {
                self.messages.status = format!("Opened {} ({} steps).", v.name, v.loss.len());
                self.set_view(v);
            }
            Err(e) => self.messages.status = format!("Cannot open: {e}"),
        }
    }

    /// Follows the run folder `dir` another process writes: read again whenever it grows.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn follow(&mut self, dir: std::path::PathBuf) {
        self.form.open_path = dir.display().to_string();
        self.messages.status = format!("Following {} (waiting for its first step)…", dir.display());
        self.watch = Some(crate::watch::Watch::new(dir));
    }

    /// Reads the followed folder again when it grew (once a second at most).
    #[cfg(not(target_arch = "wasm32"))]
    fn poll_watch(&mut self, ctx: &egui::Context) {
        let Some(w) = &mut self.watch else { return };
        ctx.request_repaint_after(crate::watch::PERIOD);
        if !w.due(std::time::Instant::now()) {
            return;
        }
        let dir = w.dir.clone();
        match RunView::load(&dir) {
            Ok(v) => {
                self.messages.status = format!(
                    "Following {}: {} steps (read again as it grows).",
                    v.name,
                    v.loss.len()
                );
                if self
                    .runs
                    .live
                    .as_ref()
                    .is_some_and(|old| old.name == v.name)
                {
                    self.runs.live = Some(v);
                    self.panels.clear();
                } else {
                    self.set_view(v);
                }
            }
            // A file caught mid-write parses on the next look (torn last lines are skipped).
            Err(e) => self.messages.status = format!("Following {}: {e}", dir.display()),
        }
    }

    /// Shows `v`, keeping the view it replaces (if it has data) in the Runs list.
    pub fn set_view(&mut self, v: RunView) {
        if let Some(old) = self.runs.live.take() {
            self.keep_run(old);
        }
        self.panels.clear();
        self.runs.live = Some(v);
    }

    /// Makes earlier run `i` the current one (the current one goes to the list), unless a
    /// run is training.
    pub fn make_current(&mut self, i: usize) {
        if self.jobs.running(jobs::JobKind::Run) {
            self.messages.status = "Stop training before switching runs.".into();
            return;
        }
        if i < self.runs.earlier.len() {
            let v = self.runs.earlier.remove(i);
            self.runs.overlay.remove(i);
            self.set_view(v);
        }
    }

    /// Adds a run to the Runs list (dropping the oldest beyond [`MAX_RUNS`]).
    pub fn keep_run(&mut self, mut v: RunView) {
        if v.loss.is_empty() && v.calls.is_empty() {
            return;
        }
        // Names tell runs apart in the Runs panel (and key its widgets): keep them unique.
        let base = v.name.clone();
        let mut n = 2;
        let runs = &mut self.runs;
        while runs.earlier.iter().any(|r| r.name == v.name) {
            v.name = format!("{base} ({n})");
            n += 1;
        }
        runs.earlier.push(v);
        runs.overlay.push(true);
        while runs.earlier.len() > MAX_RUNS {
            runs.earlier.remove(0);
            runs.overlay.remove(0);
        }
    }

    /// Stops any training and clears the current run, the baseline and the form (back to
    /// the preset's values); earlier runs stay in the Runs list.
    pub fn reset(&mut self) {
        self.jobs.stop(jobs::JobKind::Run);
        self.jobs.stop(jobs::JobKind::Baseline);
        if let Some(old) = self.runs.live.take() {
            self.keep_run(old);
        }
        self.runs.baseline = None;
        self.messages.error = None;
        self.panels.clear();
        self.form.settings = self.form.settings.switched_to(&self.form.settings.preset);
        self.messages.status = if self.runs.earlier.is_empty() {
            "Reset: pick a preset and press Start.".into()
        } else {
            "Reset: the last run is kept in Runs (make it current there); pick a preset and press Start."
                .into()
        };
    }

    /// Shows lesson `l` (its scenario's verdict and runs belong to the lesson shown before).
    pub fn select_lesson(&mut self, l: &'static hif8lab_lab::lesson::Lesson) {
        if self.lessons.lesson.id != l.id {
            self.lessons.report = None;
            self.lessons.views.clear();
        }
        self.lessons.lesson = l;
    }

    /// Whether the last frame was narrow (settings as a page of their own).
    fn settings_page_possible(&self) -> bool {
        self.frames.central_rect.width() > 0.0 && self.frames.central_rect.right() < layout::NARROW
    }

    /// The side panel's narrow context: the form to edit, the status line, and what it reads.
    pub fn side_ctx(&mut self) -> panels::SideCtx<'_> {
        let check = self.check_form();
        let run_flops = self.form.check.as_ref().and_then(|c| c.3);
        let frame_ms = self.frame_time();
        panels::SideCtx {
            form: &mut self.form,
            status: &mut self.messages.status,
            notice: self.messages.notice.as_deref(),
            runs: &self.runs,
            jobs: &self.jobs,
            gpu_available: self.device.gpu.is_some(),
            backend: self.device.backend.name(),
            frame_ms,
            pace: self.device.pace,
            run_flops,
            check,
            actions: Vec::new(),
        }
    }

    /// Carries out what the panels asked for this frame, in order.
    pub fn apply(&mut self, ctx: &egui::Context, actions: Vec<panels::Action>) {
        use panels::Action;
        for action in actions {
            let repaint = ctx.clone();
            let wake = move || repaint.request_repaint();
            match action {
                Action::Start => self.start(wake),
                Action::Reset => self.reset(),
                Action::Pause(pause) => self.pause_live(pause),
                Action::Stop => self.stop_live(),
                Action::OpenRun => self.open_run(),
                #[cfg(not(target_arch = "wasm32"))]
                Action::Follow => {
                    self.follow(std::path::PathBuf::from(self.form.open_path.trim()));
                }
                #[cfg(not(target_arch = "wasm32"))]
                Action::OpenModel => {
                    let dir = std::path::PathBuf::from(self.form.open_path.trim());
                    self.open_hf_dir(&dir);
                }
                // The page opens files through its picker, never a typed path.
                #[cfg(target_arch = "wasm32")]
                Action::Follow | Action::OpenModel => {}
                Action::ShowTab(tab) => self.selection.tab = tab,
                Action::SelectLesson(id) => self.select_lesson(id.lesson()),
                Action::LessonLink(tab) => self.lesson_link(tab),
                Action::JudgeRealOutliers => self.judge_real_outliers(),
                Action::StartFromBase => self.start_from_base(wake),
                Action::StartLessonRun => {
                    self.setup_lesson();
                    self.start(wake);
                    self.lessons.live_run = Some(self.lessons.lesson.id);
                }
                #[cfg(not(target_arch = "wasm32"))]
                Action::RunScenario => self.run_lesson_scenario(),
                #[cfg(target_arch = "wasm32")]
                Action::RunScenario => self.run_scenario_in_memory(),
            }
        }
    }

    /// Whether the live run trains in a Web Worker (the browser's CPU runs).
    pub fn trains_in_worker(&self) -> bool {
        self.jobs
            .training(jobs::JobKind::Run)
            .is_some_and(|t| t.in_worker())
    }

    /// Pauses or resumes the live run and its baseline (the run bar's button).
    pub fn pause_live(&mut self, pause: bool) {
        use jobs::JobKind;
        for kind in [JobKind::Run, JobKind::Baseline] {
            if let Some(t) = self.jobs.training(kind) {
                t.set_paused(pause);
            }
        }
        let step = self.runs.live.as_ref().map_or(0, |v| v.loss.len());
        self.messages.status = if pause {
            format!("Paused after step {step}: press Resume to continue.")
        } else {
            format!("Resumed after step {step}: training.")
        };
    }

    /// Stops the live run and its baseline (the run bar's Stop).
    pub fn stop_live(&mut self) {
        use jobs::JobKind;
        for kind in [JobKind::Run, JobKind::Baseline] {
            if let Some(t) = self.jobs.training(kind) {
                t.stop();
            }
        }
    }

    /// Whether the live run is paused.
    pub fn paused(&self) -> bool {
        self.jobs
            .training(jobs::JobKind::Run)
            .is_some_and(|t| t.paused())
    }

    /// What scripts and embedding pages read (the browser's `window.__hif8lab`): backend,
    /// adapter, whether training runs, steps reported, last loss, quantizers seen, last error.
    pub fn snapshot(&self) -> serde_json::Value {
        use crate::jobs::JobKind;
        let view = self.runs.live.as_ref();
        let mut snapshot = serde_json::json!({
            "backend": self.device.backend.name(),
            "adapter": self.device.adapter,
            "running": self.jobs.running(JobKind::Run) && !self.paused(),
            "paused": self.paused(),
            "in_worker": self.trains_in_worker(),
            "view": view.map(|v| v.name.clone()),
            "quantizer": self.selection.quantizer.as_ref().map(|q| q.to_string()),
            "steps": view.map(|v| v.loss.len()).unwrap_or(0),
            "loss": view.and_then(|v| v.loss.last()).map(|p| p[1]),
            "quantizers": view.map(|v| v.calls.len()).unwrap_or(0),
            "calls": view.map(|v| v.calls.values().map(Vec::len).sum::<usize>()).unwrap_or(0),
            "baseline_steps": self.runs.baseline_loss().len(),
            "tab": format!("{:?}", self.selection.tab).to_ascii_lowercase(),
            "lesson": self.lessons.lesson.name,
            "probes": view.map(|v| v.probes.len()).unwrap_or(0),
            "knowledge": view.and_then(|v| v.probes.last()).map(|p| p.knowledge_acc_norm),
            "base_knowledge": self.lessons.base_probes.as_ref().map(|p| p.knowledge_acc_norm),
            "baseline_probes": self.runs.baseline_probes().len(),
            "pretraining": self.jobs.running(JobKind::Base),
            "base_from": self.lessons.base_from,
            "base_fingerprint": self.lessons.base_fingerprint,
            "shipped_base_fingerprint": self.shipped.base.as_ref().map(|b| &b.0),
            "shipped_base_knowledge": self.shipped.base.as_ref().map(|b| b.1),
            "scenario_running": self.jobs.any(&[JobKind::Scenario, JobKind::Lesson]) || self.lessons.scenario_waiting,
            "verdict": self.lessons.report.as_ref().map(|r| serde_json::json!({
                "lesson": r.lesson,
                "holds": r.holds(),
                "verdict": r.verdict(),
                "claims": r.claims.len(),
                "claims_failing": r.claims.iter().filter(|c| c.verdict == hif8lab_lab::stats::Verdict3::Fails).count(),
                "claims_holding": r.claims.iter().filter(|c| c.holds).count(),
                "runs": self.lessons.views.len(),
            })),
            "error": self.messages.error,
            "overflow": self.frames.overflow,
            "frame": self.frames.count,
            "narrow": self.settings_page_possible(),
            "settings_page": self.form.page,
            "preparing": view.is_some_and(|v| v.loss.is_empty()) && self.jobs.running(JobKind::Run),
            "notice": self.messages.notice,
            "status": self.messages.status,
            "hf_model": self.form.hf_model.as_ref().map(|m| serde_json::json!({
                "name": m.name,
                "parameters": m.parameters(),
                "vocab": m.model.vocab,
                "layers": m.model.layers,
            })),
        });
        // What a frame costs (medians of the recent frames, ms): the UI, and the whole frame
        // as eframe measures it (UI, tessellation, the painter's calls).
        snapshot["ui_ms"] = serde_json::json!(self.frame_time());
        snapshot["cpu_ms"] = serde_json::json!(median(&self.frames.cpu_ms));
        snapshot["poll_ms"] = serde_json::json!(self.frames.poll_ms);
        snapshot
    }

    /// Draws the whole app into `ui` (used by eframe and by the UI tests).
    pub fn show(&mut self, ui: &mut egui::Ui) {
        theme::apply(ui.ctx());
        self.take_screenshot(ui.ctx());
        let now = web_time::Instant::now();
        if let Some(t) = self.frames.started.replace(now) {
            self.frames.last_ms =
                now.duration_since(t).as_secs_f32() * 1000.0 - self.frames.poll_ms;
        }
        #[cfg(target_arch = "wasm32")]
        web::take_inputs(self);
        self.poll_jobs(ui.ctx());
        #[cfg(target_arch = "wasm32")]
        web::take_pause(self);
        self.frames.poll_ms = now.elapsed().as_secs_f32() * 1000.0;
        layout::begin(ui.ctx());
        // The UI's own time (in the browser, training's share of the frame is in poll).
        let started = web_time::Instant::now();
        #[cfg(not(target_arch = "wasm32"))]
        self.open_dropped(ui.ctx());
        #[cfg(not(target_arch = "wasm32"))]
        self.poll_watch(ui.ctx());
        let actions = panels::run_bar(&self.jobs, &self.runs, &self.messages.status, ui);
        self.apply(ui.ctx(), actions);
        let mut cx = self.side_ctx();
        panels::side_panel(&mut cx, ui);
        let actions = std::mem::take(&mut cx.actions);
        self.apply(ui.ctx(), actions);
        panels::central(self, ui);
        self.frames.overflow = layout::take(ui.ctx());
        self.frames.count += 1;
        if let Some((name, rect)) = self.png.exports.png.take() {
            self.request_png(ui.ctx(), name, rect);
        }
        use crate::jobs::JobKind;
        let live = [JobKind::Run, JobKind::Baseline];
        // (A run shown, or a lesson's verdict: what there is to save.)
        if !self.jobs.any(&live)
            && (self.runs.live.is_some() || self.lessons.report.is_some())
            && self.png.request.is_none()
            && let Some(name) = self.png.after.take()
        {
            let rect = self.frames.central_rect;
            self.request_png(ui.ctx(), name, rect);
        }
        if self.device.frame_loop
            && self.jobs.any(&[
                JobKind::Run,
                JobKind::Baseline,
                JobKind::Base,
                JobKind::Scenario,
            ])
        {
            // The frame loop is what trains: keep it turning.
            ui.ctx().request_repaint();
        } else if self
            .jobs
            .any(&[JobKind::Run, JobKind::Lesson, JobKind::Base])
            || self.png.request.is_some()
        {
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_millis(50));
        }
        #[cfg(target_arch = "wasm32")]
        web::publish(self);
        let ui_ms = started.elapsed().as_secs_f32() * 1000.0;
        frames::push_recent(&mut self.frames.ui_ms, ui_ms);
        if let Some(b) = &mut self.frames.bench {
            b.record(ui_ms);
            match b.tab() {
                Some(tab) => {
                    self.selection.tab = tab;
                    ui.ctx().request_repaint();
                }
                None => {
                    #[cfg(not(target_arch = "wasm32"))]
                    {
                        let rss = std::fs::read_to_string("/proc/self/status")
                            .ok()
                            .and_then(|s| {
                                s.lines()
                                    .find(|l| l.starts_with("VmRSS"))
                                    .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_owned())
                            })
                            .unwrap_or_default();
                        println!("{}", b.report());
                        println!("resident memory: {rss} kB");
                    }
                    self.frames.bench = None;
                    ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
                }
            }
        }
    }

    /// Asks for a screenshot of `rect` (points) to be saved as `name` (a PNG).
    pub fn request_png(&mut self, ctx: &egui::Context, name: String, rect: egui::Rect) {
        self.png.request = Some((name, rect));
        let slot = self.png.shot.clone();
        let wake = ctx.clone();
        ctx.request_screenshot(move |image| {
            if let Ok(mut s) = slot.lock() {
                *s = Some(image);
            }
            wake.request_repaint();
        });
    }

    /// Saves the screenshot a PNG export asked for, once it arrives.
    fn take_screenshot(&mut self, ctx: &egui::Context) {
        let Some(image) = self.png.shot.lock().ok().and_then(|mut s| s.take()) else {
            return;
        };
        if let Some((name, rect)) = self.png.request.take() {
            let ppp = image.size[0] as f32 / ctx.content_rect().width().max(1.0);
            let crop = png::crop(&image, rect, ppp);
            self.messages.status = match png::encode(&crop) {
                Ok(bytes) => export(&name, &bytes, "image/png"),
                Err(e) => format!("Cannot encode {name}: {e}"),
            };
            #[cfg(not(target_arch = "wasm32"))]
            eprintln!(
                "hif8lab-app: {} ({}x{} px)",
                self.messages.status, crop.size[0], crop.size[1]
            );
        }
    }

    /// Median UI time per frame over the recent frames, in ms.
    pub fn frame_time(&self) -> Option<f32> {
        median(&self.frames.ui_ms)
    }
}

/// The median of recent per-frame figures (ms), or `None` before the first.
fn median(figures: &std::collections::VecDeque<f32>) -> Option<f32> {
    let mut v: Vec<f32> = figures.iter().copied().collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f32::total_cmp);
    Some(v[v.len() / 2])
}

impl eframe::App for HifApp {
    fn clear_color(&self, visuals: &egui::Visuals) -> [f32; 4] {
        theme::clear_color(visuals)
    }

    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        if let Some(s) = frame.info().cpu_usage {
            frames::push_recent(&mut self.frames.cpu_ms, s * 1000.0);
        }
        self.show(ui);
    }
}
