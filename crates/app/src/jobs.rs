//! The app's background work: training runs (with their baseline), the pretrained base of
//! the lessons, lesson scenarios, and polling them each frame.

use super::*;

impl HifApp {
    /// Puts the side panel in the state the current lesson starts from (a live run on the
    /// smoke model with the matched baseline alongside).
    pub fn setup_lesson(&mut self) {
        let mut s = Settings::from_preset("smoke");
        s.baseline = true;
        s.gpu = self.settings.gpu;
        match self.lesson.name {
            // Active most_recent; max_window(64) and the rest shadow it on the same calls.
            "saturation" => s.set("qat.scaling.estimator", "most_recent"),
            // From scratch a high rate has nothing to forget: the scenario runs headless.
            "forgetting" | "fixes" => {}
            _ => {}
        }
        self.settings = s;
    }

    /// Runs the current lesson's scenario headless on a thread (native; a few seconds on the
    /// CPU at the lessons' size) and shows its verdict when done.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run_lesson_scenario(&mut self) {
        let name = self.lesson.name;
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("hif8lab-lesson".into())
            .spawn(move || {
                let result = hif8lab_train::grid::GridConfig::preset("grid-lesson")
                    .map_err(|e| e.to_string())
                    .and_then(|grid| {
                        hif8lab_train::lesson::run_lesson(
                            name,
                            &|| Ok(hif8lab_engine::cpu::CpuBackend::new()),
                            &grid,
                            std::path::Path::new(LESSON_OUT),
                            &mut (),
                        )
                        .map_err(|e| e.to_string())
                    });
                let _ = tx.send(result);
            });
        match spawned {
            Ok(_) => {
                self.lesson_job = Some(rx);
                self.lesson_report = None;
            }
            Err(e) => self.status = format!("Cannot run the lesson: {e}"),
        }
    }

    /// Opens files handed in together (dropped, or from the browser's file picker).
    pub fn open_files(&mut self, files: &[(String, Vec<u8>)]) {
        match RunView::from_files(files) {
            Ok(v) => {
                self.status = format!("Opened {} ({} quantizers).", v.name, v.calls.len());
                self.selected = v.calls.keys().next().cloned();
                self.set_view(v);
            }
            Err(e) => self.status = format!("Cannot open: {e}"),
        }
    }

    /// Starts training with the current settings (no-op while they are invalid). Natively
    /// the knowledge probes are scored before, during (every quarter) and after the run.
    pub fn start(&mut self, wake: impl Fn() + Send + Sync + 'static) {
        let Ok(config) = self.settings.config() else {
            return;
        };
        // Probes cost a few forward passes per evaluation: natively on the training thread;
        // in the browser's frame loop only the lessons that need them ask for them.
        let extras = RunExtras {
            probes: (!self.frame_loop)
                .then(|| Arc::new(hif8lab_train::corpus::ProbeSet::for_data(&config.data))),
            eval_every: (config.train.steps / 4).max(1),
            eval_at_start: true,
            ..Default::default()
        };
        self.start_run(config, extras, wake);
    }

    /// Starts `config` (and its matched baseline when the settings ask for one).
    pub fn start_run(
        &mut self,
        config: RunConfig,
        extras: RunExtras,
        wake: impl Fn() + Send + Sync + 'static,
    ) {
        let device = match (&self.gpu, self.settings.gpu) {
            (Some(d), true) => d.clone(),
            _ => Device::Cpu,
        };
        (self.backend, self.adapter) = match &device {
            Device::Gpu(g) if g.2.backend == wgpu::Backend::BrowserWebGpu => {
                let i = &g.2;
                let name = [&i.name, &i.driver, &i.driver_info]
                    .into_iter()
                    .find(|s| !s.is_empty())
                    .cloned()
                    .unwrap_or_else(|| "WebGPU adapter (unnamed by the browser)".into());
                ("webgpu", name)
            }
            Device::Gpu(g) => ("gpu", g.2.name.clone()),
            Device::Cpu => ("cpu", hif8lab_engine::cpu::cpu_name()),
        };
        self.error = None;
        let mut baseline_config = config.clone();
        baseline_config.qat.enabled = false;
        let wake = std::sync::Arc::new(wake);
        let w = wake.clone();
        let mut view = RunView::new(&self.run_name(&config), Vec::new(), 0, 0.0);
        view.set_config(&config);
        match self.launch(config, device.clone(), extras.clone(), move || w()) {
            Ok(t) => {
                self.set_view(view);
                self.training = Some(t);
                self.status = "Starting…".into();
            }
            Err(e) => self.status = format!("Cannot start training: {e}"),
        }
        self.baseline.clear();
        self.baseline_probes.clear();
        self.baseline_training = None;
        if self.settings.baseline && self.training.is_some() {
            self.baseline_training = self
                .launch(baseline_config, device, extras, move || wake())
                .ok();
        }
    }

    /// Each field's message and the whole form's (Ok: the memory the run needs, checked
    /// against this machine's memory before anything is allocated), recomputed only when the
    /// settings change.
    pub fn check_form(&mut self) -> (Vec<Option<String>>, Result<String, String>) {
        if self
            .form_check
            .as_ref()
            .is_none_or(|(s, _, _)| *s != self.settings)
        {
            let fields = settings::FIELDS
                .iter()
                .map(|f| self.settings.field_error(f.key))
                .collect();
            let (limits, adapter) = match &self.gpu {
                Some(training::Device::Gpu(g)) if self.settings.gpu => (
                    hif8lab_engine::MemoryLimits::of_gpu(&g.0.limits(), g.2.device_type),
                    g.2.name.clone(),
                ),
                _ => (hif8lab_engine::MemoryLimits::host(), "this machine".into()),
            };
            let whole = self.settings.config().and_then(|config| {
                let estimate = hif8lab_train::memory::MemoryEstimate::for_config(&config);
                estimate.check(&limits, &adapter).map_err(|e| e.0)?;
                Ok(estimate.summary())
            });
            self.form_check = Some((self.settings.clone(), fields, whole));
        }
        match &self.form_check {
            Some((_, f, w)) => (f.clone(), w.clone()),
            None => (Vec::new(), Ok(String::new())),
        }
    }

    /// A short name for a live run: preset, active estimator, lr, format.
    fn run_name(&self, c: &RunConfig) -> String {
        format!(
            "{} {} lr={} {}",
            self.settings.preset, c.qat.scaling.estimator, c.train.lr, c.qat.scaling.format
        )
    }

    /// What `--autostart` / `?autostart=1` starts: with a lesson open, its live run (for
    /// forgetting: from the pretrained base) and natively its judged scenario; otherwise the
    /// settings' run.
    pub fn autostart(&mut self, wake: impl Fn() + Send + Sync + Clone + 'static) {
        if self.tab != Tab::Lessons {
            return self.start(wake);
        }
        match self.lesson.name {
            "forgetting" => self.start_from_base(wake),
            // The grid is the lesson: in the browser its scenario is what starts.
            "fixes" if self.frame_loop => self.run_scenario_in_memory(),
            _ => self.start(wake),
        }
        // Natively a lesson also runs its judged scenario (headless runs, a few seconds).
        #[cfg(not(target_arch = "wasm32"))]
        if !self.frame_loop {
            self.run_lesson_scenario();
        }
    }

    /// Starts one run: stepped from the frame loop, or on a thread that calls `wake`.
    fn launch(
        &self,
        config: RunConfig,
        device: Device,
        extras: RunExtras,
        wake: impl Fn() + Send + 'static,
    ) -> std::io::Result<Training> {
        if self.frame_loop {
            Ok(Training::start_local(config, device, extras))
        } else {
            Training::start(config, device, extras, wake)
        }
    }

    /// The forgetting lesson's live run: continued training from the pretrained base at
    /// `lesson_lr`, with (max_window(64), warmup) or without QAT, the matched baseline
    /// alongside, probes every 25 steps. Pretrains the base first (once, a few seconds).
    pub fn start_from_base(&mut self, wake: impl Fn() + Send + Sync + Clone + 'static) {
        let grid = match hif8lab_train::grid::GridConfig::preset("grid-lesson") {
            Ok(g) => g,
            Err(e) => {
                self.status = e.to_string();
                return;
            }
        };
        let probes = Arc::new(grid.probes());
        let Some(base) = self.base.clone() else {
            self.after_base = self.pretrain_base(&grid, wake);
            return;
        };
        let run = hif8lab_train::grid::GridRun {
            name: "lesson".into(),
            estimator: self
                .lesson_qat
                .then_some(hif8lab_scaling::EstimatorSpec::MaxWindow(None)),
            high_lr: false,
            warmup: true,
            paper: "",
        };
        let mut config = grid.run_config(&run);
        config.train.lr = self.lesson_lr;
        self.settings.baseline = self.lesson_qat;
        let extras = RunExtras {
            base: Some(base),
            probes: Some(probes),
            eval_every: 25,
            eval_at_start: true,
            keep_weights: false,
        };
        self.start_run(config, extras, wake);
    }

    /// Collects the pretraining of the base; starts the waiting lesson run once it is ready.
    pub(crate) fn poll_base(&mut self, ctx: &egui::Context) {
        let budget = self.background_budget();
        let Some(t) = &mut self.base_training else {
            return;
        };
        let mut done = false;
        for msg in t.drain(budget) {
            match msg {
                Msg::Weights(w) => self.base = Some(w),
                Msg::Probes(p) => self.base_probes = Some(p),
                Msg::Error(e) => self.status = format!("Pretraining stopped: {e}"),
                Msg::Report(r) => {
                    self.status = format!("Pretraining the base model: step {}…", r.step + 1)
                }
                Msg::Finished => done = true,
                Msg::Started { .. } => {}
            }
        }
        if done {
            self.base_training = None;
            if self.base.is_some() && std::mem::take(&mut self.after_base) {
                let ctx = ctx.clone();
                self.start_from_base(move || ctx.request_repaint());
            }
            if self.base.is_some() && std::mem::take(&mut self.scenario_waiting) {
                self.run_scenario_in_memory();
            }
        }
    }

    /// Pretrains the lessons' base (once) on the CPU, scoring its probes and keeping its
    /// weights (`after_base` / `scenario_waiting` say what starts once it is ready); returns
    /// whether pretraining runs.
    fn pretrain_base(
        &mut self,
        grid: &hif8lab_train::grid::GridConfig,
        wake: impl Fn() + Send + 'static,
    ) -> bool {
        if self.base_training.is_some() {
            return true;
        }
        let extras = RunExtras {
            probes: Some(Arc::new(grid.probes())),
            keep_weights: true,
            ..Default::default()
        };
        match self.launch(grid.pretrain_config(), Device::Cpu, extras, wake) {
            Ok(t) => {
                self.base_training = Some(t);
                self.status = format!(
                    "Pretraining the base model ({} steps, once)…",
                    grid.pretrain.steps
                );
                true
            }
            Err(e) => {
                self.status = format!("Cannot pretrain: {e}");
                false
            }
        }
    }

    /// Runs the current lesson's judged scenario in memory, stepped from the frame loop (the
    /// browser's way; natively [`HifApp::run_lesson_scenario`] runs it on a thread with run
    /// folders). Pretrains the base first if needed.
    pub fn run_scenario_in_memory(&mut self) {
        let grid = match hif8lab_train::grid::GridConfig::preset("grid-lesson") {
            Ok(g) => g,
            Err(e) => {
                self.status = e.to_string();
                return;
            }
        };
        let (Some(base), Some(probes)) = (self.base.clone(), self.base_probes) else {
            // Stepped from the frame loop, which keeps repainting while it runs.
            self.scenario_waiting = self.pretrain_base(&grid, || {});
            return;
        };
        self.lesson_report = None;
        self.lesson_views.clear();
        self.scenario = scenario::ScenarioJob::new(self.lesson.name, &grid, base, probes);
    }

    /// The frame-loop time given to pretraining or a scenario: 12 ms beside a live run (which
    /// gets its own 12 ms), 14 ms alone — what a 60 Hz frame can spare and still draw.
    fn background_budget(&self) -> std::time::Duration {
        let live = self.training.is_some() || self.baseline_training.is_some();
        std::time::Duration::from_millis(if live { 12 } else { 14 })
    }

    /// Advances an in-memory scenario for a slice of the frame.
    pub(crate) fn poll_scenario(&mut self) {
        if self.scenario.is_none() {
            return;
        }
        let budget = self.background_budget();
        let Some(job) = &mut self.scenario else {
            return;
        };
        match job.poll(budget) {
            Ok(Some(report)) => {
                self.status = format!("Scenario of {} judged.", report.lesson);
                self.lesson_views = std::mem::take(&mut job.views);
                self.lesson_report = Some(report);
                self.scenario = None;
            }
            Ok(None) => self.status = job.progress(),
            Err(e) => {
                self.status = format!("Lesson scenario failed: {e}");
                self.error = Some(e);
                self.scenario = None;
            }
        }
    }

    /// Average percentage error of the loss against the matched baseline over the steps
    /// both have reached (SPEC.md §6), if a baseline runs.
    pub fn ape(&self) -> Option<f64> {
        self.ape_of(self.view.as_ref()?)
    }

    /// [`HifApp::ape`] of `view` (the panels hold the view while drawing).
    pub fn ape_of(&self, view: &RunView) -> Option<f64> {
        let n = view.loss.len().min(self.baseline.len());
        (n > 0).then(|| {
            let q: Vec<f64> = view.loss[..n].iter().map(|p| p[1]).collect();
            let b: Vec<f64> = self.baseline[..n].iter().map(|p| p[1]).collect();
            hif8lab_train::corpus::ape(&q, &b)
        })
    }

    /// Drains what training reported (never waits for it). A frame-loop run also trains
    /// here for a few milliseconds, split between the QAT run and its baseline.
    pub fn poll(&mut self) {
        let budget = std::time::Duration::from_millis(12);
        let both = self.training.is_some() && self.baseline_training.is_some();
        let share = if both { budget / 2 } else { budget };
        if let Some(t) = &mut self.baseline_training {
            let mut done = false;
            for msg in t.drain(share) {
                match msg {
                    Msg::Report(r) => self.baseline.push([r.step as f64, f64::from(r.loss)]),
                    Msg::Probes(p) => self.baseline_probes.push(p),
                    Msg::Finished => done = true,
                    Msg::Started { .. } | Msg::Error(_) | Msg::Weights(_) => {}
                }
            }
            if done {
                self.baseline_training = None;
            }
        }
        let Some(t) = &mut self.training else { return };
        // Bin the input of the quantizer the Amax / Histogram panels show.
        t.set_histogram(
            self.selected
                .as_ref()
                .and_then(|s| s.quantizer())
                .and_then(|s| self.quantizers.iter().position(|q| *q == s)),
        );
        let mut finished = false;
        for msg in t.drain(share) {
            match msg {
                Msg::Started {
                    estimators,
                    active,
                    backend,
                    quantizers,
                } => {
                    self.quantizers = quantizers;
                    if let Some(v) = &mut self.view {
                        v.estimators = estimators;
                        v.active = active;
                    }
                    self.status = if self.backend == "webgpu" {
                        format!("Training on WebGPU ({}).", self.adapter)
                    } else {
                        format!("Training on {backend}.")
                    };
                }
                Msg::Report(r) => {
                    if let Some(v) = &mut self.view {
                        v.push_report(&r);
                        if self.selected.is_none() {
                            self.selected = r.calls.first().map(|c| c.id.into());
                        }
                    }
                }
                Msg::Probes(p) => {
                    if let Some(v) = &mut self.view {
                        v.probes.push(p);
                    }
                }
                Msg::Weights(_) => {}
                Msg::Error(e) => {
                    self.status = format!("Training stopped: {e}");
                    self.error = Some(e);
                }
                Msg::Finished => finished = true,
            }
        }
        if finished {
            self.training = None;
            if !self.status.starts_with("Training stopped") {
                self.status = "Training finished.".into();
            }
            let steps = self.view.as_ref().map(|v| v.loss.len()).unwrap_or(0);
            // For scripts driving the app (the screenshot check waits for this line).
            #[cfg(not(target_arch = "wasm32"))]
            eprintln!("hif8lab-app: {} ({steps} steps)", self.status);
            #[cfg(target_arch = "wasm32")]
            let _ = steps;
        }
    }

    /// Collects a finished lesson scenario.
    pub(crate) fn poll_lesson(&mut self) {
        if let Some(rx) = &self.lesson_job
            && let Ok(result) = rx.try_recv()
        {
            self.lesson_job = None;
            match result {
                Ok(r) => {
                    #[cfg(not(target_arch = "wasm32"))]
                    {
                        let dir = std::path::Path::new(LESSON_OUT).join("runs");
                        self.lesson_views = hif8lab_train::grid::GridConfig::preset("grid-lesson")
                            .ok()
                            .and_then(|g| hif8lab_train::lesson::scenario(&r.lesson, &g))
                            .unwrap_or_default()
                            .iter()
                            .filter_map(|(name, _)| RunView::load(&dir.join(name)).ok())
                            .collect();
                    }
                    self.lesson_report = Some(r);
                }
                Err(e) => self.status = format!("Lesson scenario failed: {e}"),
            }
        }
    }
}
