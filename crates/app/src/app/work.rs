//! The app's background work: starting runs and lesson scenarios, polling their messages,
//! checking the form.

use crate::jobs::*;
use crate::*;
use hif8lab_lab::lesson::LessonId;

impl HifApp {
    /// Puts the side panel in the state the current lesson starts from (a live run on the
    /// smoke model with the matched baseline alongside).
    pub fn setup_lesson(&mut self) {
        let mut s = Settings::from_preset("smoke");
        s.baseline = true;
        s.gpu = self.form.settings.gpu;
        // Active most_recent; max_window(64) and the rest shadow it on the same calls. (From
        // scratch a high rate has nothing to forget: forgetting's scenario runs headless.)
        if self.lessons.lesson.id == LessonId::Saturation {
            let _ = s.set("qat.scaling.estimator", "most_recent");
        }
        self.form.settings = s;
    }

    /// Runs the current lesson's scenario headless on a thread (native; a few seconds on the
    /// CPU at the lessons' size) and shows its verdict when done.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run_lesson_scenario(&mut self) {
        let name = self.lessons.lesson.name;
        let user = self.sandbox_settings();
        let (tx, rx) = std::sync::mpsc::channel();
        let text = std::sync::Arc::new(std::sync::Mutex::new(
            "Starting the lesson's scenario…".to_owned(),
        ));
        let mut progress = LessonProgress::new(text.clone());
        let spawned = std::thread::Builder::new()
            .name("hif8lab-lesson".into())
            .spawn(move || {
                // On a thread of the CPU backend's pool, as the command line runs it.
                let result = hif8lab_engine::cpu::on_pool(|| {
                    hif8lab_lab::grid::GridConfig::preset("grid-lesson")
                        .map_err(|e| e.to_string())
                        .and_then(|grid| {
                            hif8lab_lab::lesson::run_lesson(
                                name,
                                &|| Ok(hif8lab_engine::cpu::CpuBackend::new()),
                                &grid,
                                std::path::Path::new(LESSON_OUT),
                                &mut progress,
                                user.as_ref(),
                            )
                            .map_err(|e| e.to_string())
                        })
                });
                let _ = tx.send(result);
            });
        match spawned {
            Ok(_) => {
                self.jobs.start(JobKind::Lesson, Work::Lesson(rx, text));
                self.lessons.report = None;
            }
            Err(e) => self.messages.status = format!("Cannot run the lesson: {e}"),
        }
    }

    /// The settings the sandbox lesson's scenario trains: the form's, when the sandbox is the
    /// lesson shown and the form is valid (the other lessons train fixed scenarios).
    pub fn sandbox_settings(&self) -> Option<RunConfig> {
        (self.lessons.lesson.id == hif8lab_lab::lesson::LessonId::Sandbox)
            .then(|| self.run_config().ok())
            .flatten()
    }

    /// Opens files handed in together (dropped, or from the browser's file picker).
    pub fn open_files(&mut self, files: &[(String, Vec<u8>)]) {
        if crate::hf_model::is_hf_files(files) {
            return self.open_hf_files(files);
        }
        match RunView::from_files(files) {
            Ok(v) => {
                self.messages.status = format!("Opened {} ({} quantizers).", v.name, v.calls.len());
                self.selection.quantizer = v.calls.keys().next().cloned();
                self.set_view(v);
            }
            Err(e) => self.messages.status = format!("Cannot open: {e}"),
        }
    }

    /// Starts training with the current settings (no-op while they are invalid). Natively
    /// the knowledge probes are scored before, during (every quarter) and after the run.
    pub fn start(&mut self, wake: impl Fn() + Send + Sync + 'static) {
        let Ok(config) = self.run_config() else {
            return;
        };
        // Probes cost a few forward passes per evaluation: natively on the training thread;
        // in the browser's frame loop only the lessons that need them ask for them.
        self.lessons.live_run = None;
        let extras = RunExtras {
            probes: (!self.device.frame_loop)
                .then(|| Arc::new(hif8lab_train::eval::ProbeSet::for_data(&config.data))),
            eval_every: (config.train.steps / 4).max(1),
            eval_at_start: true,
            base: self.form.hf_model.as_ref().map(|m| m.weights.clone()),
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
        let device = match (&self.device.gpu, self.form.settings.gpu) {
            (Some(d), true) => d.clone(),
            _ => Device::Cpu,
        };
        (self.device.backend, self.device.adapter) = match &device {
            Device::Gpu(g) if g.2.backend == wgpu::Backend::BrowserWebGpu => {
                let i = &g.2;
                let name = [&i.name, &i.driver, &i.driver_info]
                    .into_iter()
                    .find(|s| !s.is_empty())
                    .cloned()
                    .unwrap_or_else(|| "WebGPU adapter (unnamed by the browser)".into());
                (BackendKind::WebGpu, name)
            }
            Device::Gpu(g) => (BackendKind::Gpu, g.2.name.clone()),
            Device::Cpu => (BackendKind::Cpu, hif8lab_engine::cpu::cpu_name()),
        };
        self.messages.error = None;
        let mut baseline_config = config.clone();
        baseline_config.qat.enabled = false;
        let wake = std::sync::Arc::new(wake);
        let w = wake.clone();
        let mut view = RunView::new(&self.run_name(&config), Vec::new(), 0, 0.0);
        view.set_config(&config);
        match self.launch(config, device.clone(), extras.clone(), move || w()) {
            Ok(t) => {
                self.set_view(view);
                self.jobs.start(JobKind::Run, Work::Training(t));
                self.messages.status = "Starting…".into();
            }
            Err(e) => self.messages.status = format!("Cannot start training: {e}"),
        }
        self.jobs.stop(JobKind::Baseline);
        self.runs.baseline = None;
        if self.form.settings.baseline && self.jobs.running(JobKind::Run) {
            let mut view = RunView::new("baseline", Vec::new(), 0, 0.0);
            view.set_config(&baseline_config);
            if let Ok(t) = self.launch(baseline_config, device, extras, move || wake()) {
                self.runs.baseline = Some(view);
                self.jobs.start(JobKind::Baseline, Work::Training(t));
            }
        }
    }

    /// Each field's message and the whole form's (Ok: the memory the run needs, checked
    /// against this machine's memory before anything is allocated), recomputed only when the
    /// settings change.
    pub fn check_form(&mut self) -> (Vec<Option<String>>, Result<String, String>) {
        if self
            .form
            .check
            .as_ref()
            .is_none_or(|(s, _, _, _)| *s != self.form.settings)
        {
            let fields = settings::FIELDS
                .iter()
                .map(|f| self.form.settings.field_error(f.key))
                .collect();
            let (limits, adapter) = match &self.device.gpu {
                Some(training::Device::Gpu(g)) if self.form.settings.gpu => (
                    hif8lab_engine::MemoryLimits::of_gpu(&g.0.limits(), g.2.device_type),
                    g.2.name.clone(),
                ),
                _ => (hif8lab_engine::MemoryLimits::host(), "this machine".into()),
            };
            let config = self.run_config();
            let flops = config
                .as_ref()
                .ok()
                .map(|c| hif8lab_train::model::flops_per_step(c) * c.train.steps as f64);
            let whole = config.and_then(|config| {
                let estimate = hif8lab_train::memory::MemoryEstimate::for_config(&config);
                estimate.check(&limits, &adapter).map_err(|e| e.0)?;
                Ok(estimate.summary())
            });
            self.form.check = Some((self.form.settings.clone(), fields, whole, flops));
        }
        match &self.form.check {
            Some((_, f, w, _)) => (f.clone(), w.clone()),
            None => (Vec::new(), Ok(String::new())),
        }
    }

    /// A short name for a live run: preset, active estimator, lr, format.
    fn run_name(&self, c: &RunConfig) -> String {
        format!(
            "{} {} lr={} {}",
            self.form
                .hf_model
                .as_ref()
                .map_or(self.form.settings.preset.as_str(), |m| m.name.as_str()),
            c.qat.scaling.estimator,
            c.train.lr,
            c.qat.scaling.format
        )
    }

    /// What `--autostart` / `?autostart=1` starts: with a lesson open, its live run (for
    /// forgetting: from the pretrained base) and natively its judged scenario; otherwise the
    /// settings' run.
    pub fn autostart(&mut self, wake: impl Fn() + Send + Sync + Clone + 'static) {
        if self.selection.tab != Tab::Lessons {
            return self.start(wake);
        }
        if self.lessons.lesson.id == LessonId::Outliers {
            // Nothing trains: the committed real-model runs are judged.
            self.judge_real_outliers();
            return;
        }
        match self.lessons.lesson.id {
            LessonId::Forgetting => self.start_from_base(wake),
            // The grid is the lesson: in the browser its scenario is what starts.
            LessonId::Fixes if self.device.frame_loop => self.run_scenario_in_memory(),
            _ => {
                self.start(wake);
                self.lessons.live_run = Some(self.lessons.lesson.id);
            }
        }
        // Natively a lesson also runs its judged scenario (headless runs, a few seconds).
        #[cfg(not(target_arch = "wasm32"))]
        if !self.device.frame_loop {
            self.run_lesson_scenario();
        }
    }

    /// Starts one run: stepped from the frame loop, or on a thread that calls `wake`.
    pub(super) fn launch(
        &self,
        config: RunConfig,
        device: Device,
        extras: RunExtras,
        wake: impl Fn() + Send + 'static,
    ) -> std::io::Result<Training> {
        if self.device.frame_loop {
            Ok(Training::start_local(config, device, extras))
        } else {
            Training::start(config, device, extras, wake)
        }
    }

    /// The forgetting lesson's live run: continued training from the pretrained base at
    /// `lesson_lr`, with (max_window(64), warmup) or without QAT, the matched baseline
    /// alongside, probes every 25 steps. Pretrains the base first (once, a few seconds).
    pub fn start_from_base(&mut self, wake: impl Fn() + Send + Sync + Clone + 'static) {
        let grid = match hif8lab_lab::grid::GridConfig::preset("grid-lesson") {
            Ok(g) => g,
            Err(e) => {
                self.messages.status = e.to_string();
                return;
            }
        };
        let probes = Arc::new(grid.probes());
        if self.awaits_shipped_base() {
            self.lessons.after_base = true;
            return;
        }
        let Some(base) = self.lessons.base.clone() else {
            self.lessons.after_base = self.pretrain_base(&grid, wake);
            return;
        };
        let run = hif8lab_lab::grid::GridRun {
            name: "lesson".into(),
            estimator: self
                .lessons
                .qat
                .then_some(hif8lab_scaling::EstimatorSpec::MaxWindow(None)),
            high_lr: false,
            warmup: true,
            paper: "",
            format: hif8lab_format::Format::HiF8,
            control: false,
        };
        let mut config = grid.run_config(&run);
        config.train.lr = self.lessons.lr;
        self.form.settings.baseline = self.lessons.qat;
        let extras = RunExtras {
            base: Some(base),
            probes: Some(probes),
            eval_every: 25,
            eval_at_start: true,
            keep_weights: false,
        };
        let lr = config.train.lr;
        self.start_run(config, extras, wake);
        self.lessons.live_run = Some(LessonId::Forgetting);
        // Named after what it runs (the form's preset does not describe it).
        if let Some(v) = &mut self.runs.live {
            v.name = format!(
                "forgetting lesson lr={lr:e} {}",
                if self.lessons.qat {
                    "QAT max_window(64)"
                } else {
                    "no QAT"
                }
            );
        }
    }

    /// Average percentage error of the loss against the matched baseline over the steps
    /// both have reached (SPEC.md §6), if a baseline runs.
    pub fn ape(&self) -> Option<f64> {
        self.ape_of(self.runs.live.as_ref()?)
    }

    /// [`HifApp::ape`] of `view`.
    pub fn ape_of(&self, view: &RunView) -> Option<f64> {
        state::ape(view, self.runs.baseline.as_ref()?)
    }

    /// The frame-loop time a job gets this frame: the live run and its baseline share 12 ms;
    /// pretraining or a scenario gets 12 ms beside them, 14 ms alone — what a 60 Hz frame
    /// can spare and still draw. Where drawing a frame takes longer than that (a software
    /// renderer, a slow machine), the jobs get as long as the last frame took to draw, up to
    /// 250 ms, so training keeps about half of the time instead of a sliver of it.
    fn budget(&self, kind: JobKind) -> std::time::Duration {
        let live = [JobKind::Run, JobKind::Baseline]
            .iter()
            .filter(|k| self.jobs.running(**k))
            .count() as u32;
        let drawing = self.frames.last_ms.clamp(0.0, 250.0) as u32;
        let ms = match kind {
            JobKind::Run | JobKind::Baseline => 12u32.max(drawing) / live.max(1),
            _ if live > 0 => 12,
            _ => 14u32.max(drawing),
        };
        std::time::Duration::from_millis(u64::from(ms))
    }

    /// The one dispatch of background work: drains every job (never waits for one; a
    /// frame-loop run also trains here within its budget), hands each message to the
    /// handler of its kind, then runs what follows a finished job.
    pub fn poll_jobs(&mut self, ctx: &egui::Context) {
        let budgets: Vec<std::time::Duration> =
            self.jobs.list.iter().map(|j| self.budget(j.kind)).collect();
        // Bin the input of the quantizer the Amax / Histogram panels show.
        let binned = self
            .selection
            .quantizer
            .as_ref()
            .and_then(|s| s.quantizer())
            .and_then(|s| self.runs.quantizers.iter().position(|q| *q == s));
        let mut list = std::mem::take(&mut self.jobs.list);
        for (job, budget) in list.iter_mut().zip(budgets) {
            let kind = job.kind;
            match &mut job.work {
                Work::Training(t) => {
                    if kind == JobKind::Run {
                        t.set_histogram(binned);
                    }
                    for msg in t.drain(budget) {
                        match msg {
                            Msg::Finished => {
                                if kind == JobKind::Run {
                                    self.messages.first_step = None;
                                }
                                if job.status == JobStatus::Running {
                                    job.status = JobStatus::Finished;
                                }
                            }
                            Msg::Error(e) => {
                                self.on_error(kind, &e);
                                job.status = JobStatus::Failed(e);
                            }
                            msg => self.on_message(kind, msg),
                        }
                    }
                    if kind == JobKind::Run {
                        self.note_pace(t.elapsed_s());
                        // The first step's time so far, while it runs.
                        if let Some((since, base)) = &self.messages.first_step {
                            self.messages.status =
                                Messages::first_step_words(base, since.elapsed().as_secs_f64());
                        }
                    }
                }
                Work::Scenario(s) => match s.poll(budget) {
                    Ok(Some(report)) => {
                        self.messages.status = format!("Scenario of {} judged.", report.lesson);
                        self.lessons.views = std::mem::take(&mut s.views);
                        self.lessons.report = Some(report);
                        job.status = JobStatus::Finished;
                    }
                    Ok(None) => self.messages.status = s.progress(),
                    Err(e) => {
                        self.on_error(kind, &e);
                        job.status = JobStatus::Failed(e);
                    }
                },
                Work::Lesson(rx, _) => {
                    if let Ok(result) = rx.try_recv() {
                        match result {
                            Ok(r) => {
                                let (views, base) = lesson_views(&r);
                                self.lessons.views = views;
                                // The base every run continued from: the thumbnails' "before".
                                if base.is_some() {
                                    self.lessons.base_probes = base;
                                }
                                self.lessons.report = Some(r);
                                job.status = JobStatus::Finished;
                            }
                            Err(e) => {
                                self.on_error(kind, &e);
                                job.status = JobStatus::Failed(e);
                            }
                        }
                    }
                }
            }
        }
        let (done, running): (Vec<Job>, Vec<Job>) = list
            .into_iter()
            .partition(|j| j.status != JobStatus::Running);
        // Jobs started by the handlers (none today) stay after the ones that ran.
        let started = std::mem::replace(&mut self.jobs.list, running);
        self.jobs.list.extend(started);
        for job in done {
            self.on_finished(job.kind, &job.status, ctx);
        }
    }

    /// A message of a training job.
    fn on_message(&mut self, kind: JobKind, msg: Msg) {
        match (kind, msg) {
            (
                JobKind::Run,
                Msg::Started {
                    estimators,
                    active,
                    backend,
                    quantizers,
                },
            ) => {
                self.runs.quantizers = quantizers;
                if let Some(v) = &mut self.runs.live {
                    v.estimators = estimators;
                    v.active = active;
                }
                // The count reaches its end in words before the first step's line.
                let kernels = self
                    .messages
                    .kernels
                    .take()
                    .map(|n| format!("All {n} of {n} GPU kernels compiled. "))
                    .unwrap_or_default();
                let base = kernels
                    + &match self.device.backend {
                        BackendKind::WebGpu => {
                            format!("Training on WebGPU ({}).", self.device.adapter)
                        }
                        _ => format!("Training on {backend}."),
                    };
                self.messages.status = Messages::first_step_words(&base, 0.0);
                self.messages.first_step = Some((web_time::Instant::now(), base));
            }
            (JobKind::Run, Msg::Preparing { compiled, total }) => {
                self.messages.kernels = Some(total);
                self.messages.first_step = None;
                self.messages.status = format!(
                    "Preparing the GPU kernels: {compiled} of {total} compiled (once per run; the first step follows)…"
                );
            }
            (JobKind::Run, Msg::Report(r)) => {
                if let Some((_, base)) = self.messages.first_step.take() {
                    self.messages.status = base;
                }
                if let Some(v) = &mut self.runs.live {
                    v.push_report(&r);
                    if self.selection.quantizer.is_none() {
                        self.selection.quantizer = r.calls.first().map(|c| c.id.into());
                    }
                }
            }
            (JobKind::Run, Msg::Probes(p)) => {
                if let Some(v) = &mut self.runs.live {
                    v.probes.push(*p);
                }
            }
            (JobKind::Baseline, Msg::Report(r)) => {
                let b = self.runs.baseline.get_or_insert_with(RunView::default);
                b.loss.push([r.step as f64, f64::from(r.loss)]);
            }
            (JobKind::Baseline, Msg::Probes(p)) => {
                self.runs
                    .baseline
                    .get_or_insert_with(RunView::default)
                    .probes
                    .push(*p);
            }
            (JobKind::Base, Msg::Weights(w)) => {
                self.lessons.base_fingerprint = Some(hif8lab_lab::lesson::base::fingerprint(&w));
                self.lessons.base = Some(w);
                self.lessons.base_from = "pretrained";
            }
            (JobKind::Base, Msg::Probes(p)) => self.lessons.base_probes = Some(*p),
            (JobKind::Base, Msg::Report(r)) => {
                self.messages.status = format!("Pretraining the base model: step {}…", r.step + 1);
            }
            _ => {}
        }
    }

    /// This device's pace from the live run (`elapsed_s` since its Start), from its second
    /// step on (the first holds the start-up): what the form's time estimate divides by.
    fn note_pace(&mut self, elapsed_s: f64) {
        if let Some(v) = &self.runs.live
            && let (Some(c), 2..) = (&v.config, v.loss.len())
            && elapsed_s > 0.0
        {
            let flops = hif8lab_train::model::flops_per_step(c) * v.loss.len() as f64;
            self.device.pace = Some(flops / elapsed_s);
        }
    }

    /// A job's error: the status line (and, for the live run and scenarios, the error the
    /// page reports).
    fn on_error(&mut self, kind: JobKind, e: &str) {
        self.messages.status = match kind {
            JobKind::Run => format!("Training stopped: {e}"),
            JobKind::Baseline => format!("Baseline stopped: {e}"),
            JobKind::Base => format!("Pretraining stopped: {e}"),
            JobKind::Scenario | JobKind::Lesson => format!("Lesson scenario failed: {e}"),
        };
        if matches!(kind, JobKind::Run | JobKind::Scenario) {
            self.messages.error = Some(e.to_owned());
        }
    }

    /// What follows a finished job.
    fn on_finished(&mut self, kind: JobKind, status: &JobStatus, ctx: &egui::Context) {
        match kind {
            JobKind::Run => {
                if *status == JobStatus::Finished {
                    let done = self.runs.live.as_ref().map_or(0, |v| v.loss.len());
                    let target = self
                        .runs
                        .live
                        .as_ref()
                        .and_then(|v| v.config.as_ref())
                        .map(|c| c.train.steps)
                        .unwrap_or(0) as usize;
                    // A run stopped early ends as "finished" too: say which it was.
                    self.messages.status = if done < target {
                        format!("Training stopped at step {done} of {target}.")
                    } else {
                        "Training finished.".into()
                    };
                }
                let steps = self.runs.live.as_ref().map_or(0, |v| v.loss.len());
                // For scripts driving the app (the screenshot check waits for this line).
                #[cfg(not(target_arch = "wasm32"))]
                eprintln!("hif8lab-app: {} ({steps} steps)", self.messages.status);
                #[cfg(target_arch = "wasm32")]
                let _ = steps;
            }
            JobKind::Base => {
                if self.lessons.base.is_some() && std::mem::take(&mut self.lessons.after_base) {
                    let ctx = ctx.clone();
                    self.start_from_base(move || ctx.request_repaint());
                }
                if self.lessons.base.is_some() && std::mem::take(&mut self.lessons.scenario_waiting)
                {
                    self.run_scenario_in_memory();
                }
            }
            JobKind::Baseline | JobKind::Scenario | JobKind::Lesson => {}
        }
    }
}
