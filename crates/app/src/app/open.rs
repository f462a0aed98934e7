//! What the app opens: a Hugging Face folder or GGUF file, a grid folder, the files
//! shipped with it.

#[cfg(not(target_arch = "wasm32"))]
use crate::egui;
use crate::hf_model::*;
use crate::shipped::*;
use crate::*;
use hif8lab_train::RunConfig;
use hif8lab_train::models::checkpoint::Checkpoint;
use hif8lab_train::models::hf;
#[cfg(not(target_arch = "wasm32"))]
use std::path::Path;
use std::sync::Arc;

impl HifApp {
    /// Opens a Hugging Face folder or a GGUF file (natively).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_hf_dir(&mut self, dir: &std::path::Path) {
        let result = hif8lab_train::models::source::ModelSource::open(dir)
            .map_err(|e| e.to_string())
            .map(|s| HfStart {
                name: dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| dir.display().to_string()),
                source: s.init_from(),
                tokenizer: s.tokenizer_setting(),
                model: s.model.config.model,
                weights: Arc::new(s.model.weights),
            });
        self.set_hf(result);
    }

    /// Opens a Hugging Face model from its files (the browser's file picker): `config.json`,
    /// every `.safetensors` file, and `tokenizer.json` (the byte tokenizer in the browser).
    pub fn open_hf_files(&mut self, files: &[(String, Vec<u8>)]) {
        let result = (|| {
            let (_, config) = files
                .iter()
                .find(|(n, _)| base(n) == "config.json")
                .ok_or("no config.json among the files")?;
            let config = hf::parse_config(
                std::path::Path::new("config.json"),
                &String::from_utf8_lossy(config),
            )
            .map_err(|e| e.to_string())?;
            let mut tensors = Vec::new();
            for (name, bytes) in files.iter().filter(|(n, _)| n.ends_with(".safetensors")) {
                let ck = Checkpoint::from_bytes(name, bytes).map_err(|e| e.to_string())?;
                tensors.extend(
                    ck.tensors
                        .into_iter()
                        .map(|t| (std::path::PathBuf::from(base(name)), t)),
                );
            }
            if tensors.is_empty() {
                return Err("no .safetensors files among the files".to_owned());
            }
            let weights = hf::select_weights(
                std::path::Path::new("(the chosen files)"),
                &config.model,
                tensors,
            )
            .map_err(|e| e.to_string())?;
            let tokenizer = match files.iter().find(|(n, _)| base(n) == "tokenizer.json") {
                Some((name, bytes)) => {
                    match hif8lab_train::models::tokenizer::Tokenizer::from_json(
                        name,
                        &String::from_utf8_lossy(bytes),
                    )
                    .map_err(|e| e.to_string())?
                    {
                        hif8lab_train::models::tokenizer::Tokenizer::Bytes => "bytes".to_owned(),
                        #[allow(unreachable_patterns)]
                        _ => {
                            return Err(format!(
                                "{name}: open the folder in the desktop app for this tokenizer \
                                 (from files, only the byte tokenizer)"
                            ));
                        }
                    }
                }
                None if config.model.vocab == 256 => "bytes".into(),
                None => return Err("no tokenizer.json among the files".into()),
            };
            Ok(HfStart {
                name: "Hugging Face model".into(),
                source: "(files)".into(),
                model: config.model,
                weights: Arc::new(weights),
                tokenizer,
            })
        })();
        self.set_hf(result);
    }

    /// Opens what was dropped on the window (natively; the browser page uses its file
    /// picker): a folder as a Hugging Face model or a run folder, files as a run or trace.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_dropped(&mut self, ctx: &egui::Context) {
        let (dirs, files): (Vec<std::path::PathBuf>, Vec<(String, Vec<u8>)>) = ctx.input(|i| {
            let dirs = i
                .raw
                .dropped_files
                .iter()
                .map(|f| f.path().to_path_buf())
                // A GGUF file is a model, opened like a Hugging Face folder.
                .filter(|p| p.is_dir() || hif8lab_train::models::gguf::is_gguf(p))
                .collect();
            let files = i
                .raw
                .dropped_files
                .iter()
                .filter(|f| !hif8lab_train::models::gguf::is_gguf(f.path()))
                .filter_map(|f| Some((f.path().display().to_string(), f.bytes().ok()?)))
                .collect();
            (dirs, files)
        });
        for dir in dirs {
            if hif8lab_train::models::source::is_model_path(&dir) {
                self.open_hf_dir(&dir);
            } else {
                self.form.open_path = dir.display().to_string();
                self.open_run();
            }
        }
        if !files.is_empty() {
            self.open_files(&files);
        }
    }

    fn set_hf(&mut self, result: Result<HfStart, String>) {
        match result {
            Ok(m) => {
                self.messages.status = format!(
                    "Opened {} ({:.2} M parameters, {} layers, d_model {}): Start continues \
                     training it with the settings below.",
                    m.name,
                    m.parameters() as f64 / 1e6,
                    m.model.layers,
                    m.model.d_model
                );
                self.form.hf_model = Some(m);
                self.form.check = None;
            }
            Err(e) => self.messages.status = format!("Cannot open the model: {e}"),
        }
    }

    /// The run the form describes: the preset with its fields, and the opened Hugging Face
    /// model, if any.
    pub fn run_config(&self) -> Result<RunConfig, String> {
        let config = self.form.settings.config()?;
        match &self.form.hf_model {
            Some(m) => m.apply(config),
            None => Ok(config),
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl HifApp {
    /// Opens a committed results folder (`results.md` beside `runs.jsonl.gz`, as
    /// `docs/results/*` are): every run of the first data order with its loss curve, probes
    /// and counts, overlaid in Runs. Such a folder keeps no per-call trace, and says so.
    pub fn open_results(&mut self, dir: &Path) -> Result<String, String> {
        let path = dir.join(hif8lab_lab::grid::DATA_FILE);
        let data = hif8lab_lab::grid::GridData::read(&path).map_err(|e| e.to_string())?;
        let mut views: Vec<RunView> = data
            .runs
            .iter()
            .filter(|d| d.order == 0 && d.base_seed == 0)
            .map(|d| RunView::from_summary(&d.run, &d.summary))
            .collect();
        if views.is_empty() {
            return Err(format!("{}: no runs", path.display()));
        }
        let total = views.len();
        let shown = views.remove(first_shown(&views));
        for v in views.into_iter().take(crate::MAX_RUNS) {
            self.keep_run(v);
        }
        let words = format!(
            "Opened {}: {total} runs (first data order; in Runs, overlaid), {} shown: loss curves, probes and counts from {}. Per-call amax traces are not kept in a results folder: Amax and Saturation need a run folder (open one under the grid's runs/).",
            dir.display(),
            shown.name,
            hif8lab_lab::grid::DATA_FILE
        );
        self.selection.tab = Tab::Runs;
        self.set_view(shown);
        Ok(words)
    }

    /// Opens the runs of a grid's or a lesson's folder (`<dir>/runs/NAME`, the first data
    /// order: names without `-seedK`); returns what was opened, in words.
    pub fn open_grid(&mut self, dir: &Path) -> Result<String, String> {
        let runs = dir.join("runs");
        let mut names: Vec<String> = std::fs::read_dir(&runs)
            .map_err(|e| format!("{}: {e}", runs.display()))?
            .filter_map(|e| e.ok())
            .filter(|e| hif8lab_train::run::RunDir::new(e.path()).has_metrics())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.contains("-seed"))
            .collect();
        names.sort();
        if names.is_empty() {
            return Err(format!("{}: no run folders", runs.display()));
        }
        let mut views = Vec::new();
        let mut skipped = Vec::new();
        for n in names.iter().take(crate::MAX_RUNS + 1) {
            match RunView::load(&runs.join(n)) {
                Ok(v) => views.push(v),
                Err(e) => skipped.push(e),
            }
        }
        if views.is_empty() {
            return Err(skipped.join("; "));
        }
        let shown = views.remove(first_shown(&views));
        let opened = views.len() + 1;
        for v in views {
            self.keep_run(v);
        }
        let mut words = format!(
            "Opened {}: {opened} runs of {} (first data order; in Runs, overlaid), {} shown",
            dir.display(),
            names.len(),
            shown.name
        );
        if let Some((key, top, median)) = largest_amax(&shown) {
            words.push_str(&format!(
                "; the largest amax is {key}'s, {top:.4e} ({:.0}× the median quantizer's): chosen in Amax, outlined on Saturation",
                top / median.max(f32::MIN_POSITIVE)
            ));
            self.selection.quantizer = Some(key);
            self.selection.tab = Tab::Amax;
        }
        if !skipped.is_empty() {
            words.push_str(&format!("; not opened: {}", skipped.join("; ")));
        }
        self.set_view(shown);
        Ok(words + ".")
    }
}

impl HifApp {
    /// Takes the shipped base in `bytes`: notes its fingerprint and, unless asked to
    /// pretrain, starts the lessons from it (when it matches the `grid-lesson` preset).
    pub fn adopt_base_bytes(&mut self, bytes: &[u8]) {
        let Some(grid) = lesson_grid() else {
            return;
        };
        if let Some(b) = hif8lab_lab::lesson::base::shipped_from(bytes, &grid) {
            let fingerprint = b.fingerprint();
            self.shipped.base = Some((fingerprint.clone(), b.probes.knowledge_acc_norm));
            if !self.shipped.pretrain_base && self.lessons.base.is_none() {
                self.lessons.base_fingerprint = Some(fingerprint);
                self.lessons.base = Some(b.weights);
                self.lessons.base_probes = Some(b.probes);
                self.lessons.base_from = "shipped";
            }
        }
    }

    /// Whether the shipped base is still on its way (the browser) and is to be used: the
    /// caller starts what it wanted once it arrives ([`HifApp::shipped_arrived`]).
    pub fn awaits_shipped_base(&mut self) -> bool {
        let waits =
            self.lessons.base.is_none() && self.shipped.base_pending && !self.shipped.pretrain_base;
        if waits {
            self.messages.status = "Loading the lessons' shipped base model…".into();
        }
        waits
    }

    /// The shipped base compiled into this build.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn adopt_shipped_base(&mut self) {
        self.adopt_base_bytes(hif8lab_lab::lesson::base::shipped_bytes());
    }

    /// A shipped file the browser fetched (`url`: [`BASE_URL`] or [`REAL_RUNS_URL`]), or why
    /// it could not; starts what waited for it.
    pub fn shipped_arrived(&mut self, url: &str, bytes: Result<Vec<u8>, String>) {
        match (url, bytes) {
            (BASE_URL, result) => {
                self.shipped.base_pending = false;
                match result {
                    Ok(b) => self.adopt_base_bytes(&b),
                    Err(e) => {
                        self.messages.status =
                            format!("No shipped base ({e}): lessons pretrain it.")
                    }
                }
                // What waited starts now: from the shipped base, or pretraining it.
                if std::mem::take(&mut self.lessons.after_base) {
                    self.start_from_base(|| {});
                }
                if std::mem::take(&mut self.lessons.scenario_waiting) {
                    self.run_scenario_in_memory();
                }
            }
            (OUTLIER_TRACE_URL, result) => {
                self.shipped.outlier_pending = false;
                match result {
                    Ok(b) => self.shipped.outlier_trace = Some(b),
                    Err(e) => self.messages.status = format!("No outlier trace ({e})."),
                }
                if let Some(tab) = self.shipped.outlier_waiting.take() {
                    self.open_outlier(tab);
                }
            }
            (REAL_RUNS_URL, result) => {
                self.shipped.runs_pending = false;
                match result {
                    Ok(b) => self.shipped.real_runs = Some(b),
                    Err(e) => self.messages.status = format!("No real-model runs ({e})."),
                }
                if std::mem::take(&mut self.shipped.outliers_waiting) {
                    self.judge_real_outliers();
                }
            }
            _ => {}
        }
    }

    /// A lesson's "Open … »" link: the panel, or on the real-model lesson (where nothing
    /// trains) the panel opened on the real model's outliers.
    pub fn lesson_link(&mut self, tab: crate::Tab) {
        if self.lessons.lesson.id == hif8lab_lab::lesson::LessonId::Outliers {
            self.open_outlier(tab);
        } else {
            self.selection.tab = tab;
        }
    }

    /// Lesson 4's "Open Amax »" and "Open Saturation »": the real model's outlier quantizers
    /// from their committed per-call trace ([`crate::shipped::OUTLIER_TRACE_FILE`]), the
    /// ~1,700× one chosen, on `tab`.
    pub fn open_outlier(&mut self, tab: crate::Tab) {
        #[cfg(not(target_arch = "wasm32"))]
        let packed: &[u8] = crate::shipped::outlier_trace();
        #[cfg(target_arch = "wasm32")]
        let packed: &[u8] = match &self.shipped.outlier_trace {
            Some(b) => b,
            None if self.shipped.outlier_pending => {
                self.shipped.outlier_waiting = Some(tab);
                self.messages.status = "Loading the real model's outlier trace…".into();
                return;
            }
            None => {
                self.messages.status = format!(
                    "Cannot open the outlier trace: {OUTLIER_TRACE_URL} could not be fetched"
                );
                return;
            }
        };
        let opened = RunView::from_trace_bytes(std::path::Path::new(OUTLIER_TRACE_FILE), packed);
        match opened {
            Ok(mut v) => {
                v.name = "SmolLM2-135M outliers (most_recent-low, dose study, order 0)".into();
                let key = crate::state::SeriesKey::parse(OUTLIER_QUANTIZER);
                self.messages.status = format!(
                    "Opened the real model's outlier quantizers ({} calls each); {OUTLIER_QUANTIZER} chosen.",
                    v.calls
                        .get(&key)
                        .map_or(0, |c| c.iter().map(|c| c.calls).sum::<u32>())
                );
                self.selection.quantizer = Some(key);
                self.set_view(v);
                self.selection.tab = tab;
            }
            Err(e) => self.messages.status = format!("Cannot open the outlier trace: {e}"),
        }
    }

    /// The real-model lesson's verdict, judged from the committed SmolLM2-135M grid's data
    /// (shipped with the app; nothing trains).
    pub fn judge_real_outliers(&mut self) {
        use hif8lab_lab::lesson::outliers;
        #[cfg(not(target_arch = "wasm32"))]
        let data = outliers::committed();
        #[cfg(target_arch = "wasm32")]
        let data = match &self.shipped.real_runs {
            Some(b) => outliers::committed_from(b),
            None if self.shipped.runs_pending => {
                self.shipped.outliers_waiting = true;
                self.messages.status = "Loading the committed real-model runs…".into();
                return;
            }
            None => Err(hif8lab_lab::lesson::LessonDataError::new(
                REAL_RUNS_URL,
                format!("{REAL_RUNS_URL} could not be fetched"),
            )),
        };
        match data.and_then(|d| outliers::judge(outliers::COMMITTED_FILE, &d)) {
            Ok(r) => {
                self.messages.status = format!(
                    "Judged the committed real-model runs: {}.",
                    hif8lab_lab::claims::headline(&r.claims, hif8lab_lab::stats::Verdict3::as_str)
                );
                self.lessons.views.clear();
                self.lessons.report = Some(r);
            }
            Err(e) => self.messages.status = format!("Cannot judge the real-model runs: {e}"),
        }
    }
}

/// The quantizer of `view` whose amax went highest, that amax, and the median over the
/// quantizers of each one's highest amax.
#[cfg(not(target_arch = "wasm32"))]
fn largest_amax(view: &RunView) -> Option<(crate::state::SeriesKey, f32, f32)> {
    let tops: Vec<(crate::state::SeriesKey, f32)> = view
        .calls
        .iter()
        .filter_map(|(k, calls)| {
            let top = calls
                .iter()
                .map(|c| c.amax)
                .filter(|a| a.is_finite())
                .fold(f32::NEG_INFINITY, f32::max);
            top.is_finite().then(|| (k.clone(), top))
        })
        .collect();
    let (key, top) = tops.iter().max_by(|a, b| a.1.total_cmp(&b.1)).cloned()?;
    let maxima: Vec<f32> = tops.iter().map(|t| t.1).collect();
    Some((key, top, hif8lab_scaling::replay::median(&maxima)))
}

/// The run of a grid folder to show first: the low-rate most_recent run (the paper's
/// failing cell), else the first with quantizer calls, else the first.
#[cfg(not(target_arch = "wasm32"))]
fn first_shown(views: &[RunView]) -> usize {
    views
        .iter()
        .position(|v| v.name == hif8lab_lab::grid::CellKey::MOST_RECENT_LOW.name())
        .or_else(|| views.iter().position(|v| !v.calls.is_empty()))
        .unwrap_or(0)
}
