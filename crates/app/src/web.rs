//! The browser entry point: eframe's web runner on a canvas, the URL query as start-up
//! options, `window.__hif8lab` refreshed every frame, downloads through a Blob link, and files
//! handed in by the page's file picker.
//!
//! Compute uses eframe's own WebGPU device and queue (a second device fails in browsers); when
//! eframe renders with WebGL instead, or the device lacks what the engine needs, training runs
//! on the CPU backend compiled to wasm and a notice says why.

use std::cell::RefCell;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::training::Device;
use crate::{HifApp, Options, Tab};

/// A shipped file's page-relative URL and its bytes, or why it could not be fetched.
type Fetched = (&'static str, Result<Vec<u8>, String>);

thread_local! {
    /// Files the page's picker delivered, waiting for the next frame.
    static DROPPED: RefCell<Vec<(String, Vec<u8>)>> = const { RefCell::new(Vec::new()) };
    /// A Start asked for by a script, waiting for the next frame.
    static START: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// A Pause (true) or Resume (false) asked for by a script, waiting for the next frame.
    static PAUSE: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
    /// A Stop asked for by a script, waiting for the next frame.
    static STOP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// A lesson's "Open … »" link a script pressed (the panel's name), for the next frame.
    static LINK: RefCell<Option<String>> = const { RefCell::new(None) };
    /// A page (`loss` … `lessons`, or `settings`) a script asked to show.
    static SHOW: RefCell<Option<String>> = const { RefCell::new(None) };
    /// A theme (`dark` / `light`) a script asked for.
    static THEME: RefCell<Option<String>> = const { RefCell::new(None) };
    /// The app's egui context, to ask for a frame when the page hands something in (an idle
    /// page draws no frames on its own).
    static CTX: RefCell<Option<eframe::egui::Context>> = const { RefCell::new(None) };
    /// Shipped files fetched from beside the page (or why not), waiting for the next frame.
    static FETCHED: RefCell<Vec<Fetched>> = const { RefCell::new(Vec::new()) };
}

/// Fetches `url` (relative to the page) whole.
async fn fetch_bytes(url: &str) -> Result<Vec<u8>, String> {
    use wasm_bindgen_futures::JsFuture;
    let err = |e: JsValue| {
        format!(
            "{url}: {}",
            e.as_string().unwrap_or_else(|| format!("{e:?}"))
        )
    };
    let window = web_sys::window().ok_or("no window")?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str(url))
        .await
        .map_err(err)?
        .dyn_into()
        .map_err(|_| format!("{url}: not a response"))?;
    if !response.ok() {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    let buffer = JsFuture::from(response.array_buffer().map_err(err)?)
        .await
        .map_err(err)?;
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}

/// Fetches the shipped files (the lessons' base, the real-model runs); each is handed to
/// the app at the frame after it arrives.
fn fetch_shipped() {
    for url in [
        crate::shipped::BASE_URL,
        crate::shipped::REAL_RUNS_URL,
        crate::shipped::OUTLIER_TRACE_URL,
    ] {
        wasm_bindgen_futures::spawn_local(async move {
            let result = fetch_bytes(url).await;
            FETCHED.with(|f| f.borrow_mut().push((url, result)));
            wake();
        });
    }
}

fn wake() {
    CTX.with(|c| {
        if let Some(ctx) = c.borrow().as_ref() {
            ctx.request_repaint();
        }
    });
}

/// The handle the page holds (`new WebHandle()`, then `start(canvas)`).
#[wasm_bindgen]
pub struct WebHandle {
    runner: eframe::WebRunner,
}

#[wasm_bindgen]
impl WebHandle {
    /// A runner (installs eframe's panic handler).
    #[wasm_bindgen(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        WebHandle {
            runner: eframe::WebRunner::new(),
        }
    }

    /// Starts the app on `canvas`, reading options from the page's URL query.
    pub async fn start(&self, canvas: web_sys::HtmlCanvasElement) -> Result<(), JsValue> {
        let query = web_sys::window()
            .and_then(|w| w.location().search().ok())
            .unwrap_or_default();
        let options = options_from_query(&query);
        self.runner
            .start(
                canvas,
                eframe::WebOptions::default(),
                Box::new(move |cc| Ok(Box::new(create(cc, &options)))),
            )
            .await
    }

    /// Whether the app has crashed.
    pub fn has_panicked(&self) -> bool {
        self.runner.has_panicked()
    }

    /// The crash message, if it crashed.
    pub fn panic_message(&self) -> Option<String> {
        self.runner.panic_summary().map(|s| s.message())
    }

    /// Hands a file's contents to the app (the page's file picker calls this per file).
    pub fn open_file(&self, name: String, bytes: Vec<u8>) {
        DROPPED.with(|d| d.borrow_mut().push((name, bytes)));
        wake();
    }

    /// Shows a tab (`loss`, `amax`, `saturation`, `estimators`, `histogram`, `runs`,
    /// `lessons`) or, on a narrow window, the settings page (`settings`) at the next frame —
    /// what a click on the tab does (for scripts and the layout test).
    pub fn show_tab(&self, name: String) {
        SHOW.with(|s| *s.borrow_mut() = Some(name));
        wake();
    }

    /// Switches the theme (`dark` or `light`) at the next frame.
    pub fn set_theme(&self, name: String) {
        THEME.with(|s| *s.borrow_mut() = Some(name));
        wake();
    }

    /// Presses Start at the next frame (for scripts: the same as the button).
    pub fn start_training(&self) {
        START.with(|s| s.set(true));
        wake();
    }

    /// Presses Pause (`true`) or Resume (`false`) at the next frame (the run bar's button).
    pub fn pause_training(&self, pause: bool) {
        PAUSE.with(|s| s.set(Some(pause)));
        wake();
    }

    /// Presses the open lesson's "Open NAME »" link at the next frame (`Amax`,
    /// `Saturation`, …): on the real-model lesson it opens the outlier quantizers' trace.
    pub fn lesson_link(&self, name: String) {
        LINK.with(|s| *s.borrow_mut() = Some(name));
        wake();
    }

    /// Presses Stop at the next frame (the run bar's button).
    pub fn stop_training(&self) {
        STOP.with(|s| s.set(true));
        wake();
    }
}

/// Times the CPU backend in this page (the browser's CPU fallback), outside the frame loop:
/// `steps` training steps of `preset` (plain, and QAT from the first step, timed in
/// alternating blocks) after two warm-up steps each, on the main thread. Returns JSON:
/// `simd` (whether this build uses WebAssembly SIMD), `steps_per_s_plain`,
/// `steps_per_s_qat`, `ms_per_step_plain`, `ms_per_step_qat`. For the browser test and for anyone comparing builds or browsers.
#[wasm_bindgen]
pub fn bench_cpu(preset: &str, steps: u32) -> Result<String, JsValue> {
    use hif8lab_train::RunConfig;
    use hif8lab_train::open::open_in_memory;
    let err = |e: &dyn std::fmt::Display| JsValue::from_str(&e.to_string());
    let text = RunConfig::preset_text(preset).map_err(|e| err(&e))?;
    let base = RunConfig::parse(preset, text, &[]).map_err(|e| err(&e))?;
    // Both variants built and warmed up first, then timed in the blocks `hif8lab bench
    // train` uses (RunConfig::bench_blocks): the browser compiles hot wasm code again in
    // its optimizing tier while the page runs, and whichever variant ran first would pay
    // for it.
    // Through the run driver, as every run: it enqueues and delivers the steps.
    use hif8lab_train::driver::{Control, Driver, Schedule};
    let run_until = |d: &mut Driver<hif8lab_engine::cpu::CpuBackend>, until: u64| {
        let mut sink = |_: hif8lab_train::driver::Event| Ok(());
        while d.trainer().steps_done() < until {
            d.advance(Control::Run, web_time::Duration::ZERO, true, &mut sink)?;
        }
        d.advance(Control::Pause, web_time::Duration::ZERO, true, &mut sink)
            .map(|_| ())
    };
    let mut drivers = Vec::with_capacity(2);
    for qat in [false, true] {
        let config = base.bench_variant(qat, u64::from(steps) + 2);
        let backend = hif8lab_engine::cpu::CpuBackend::new();
        let mut driver =
            open_in_memory(backend, config, None, Schedule::default()).map_err(|e| err(&e))?;
        run_until(&mut driver, 2).map_err(|e| err(&e))?;
        drivers.push(driver);
    }
    let mut seconds = [0.0f64; 2];
    for (until, order) in RunConfig::bench_blocks(u64::from(steps)) {
        for i in order {
            let start = web_time::Instant::now();
            run_until(&mut drivers[i], 2 + until).map_err(|e| err(&e))?;
            seconds[i] += start.elapsed().as_secs_f64();
        }
    }
    let ms = seconds.map(|s| s * 1e3 / f64::from(steps.max(1)));
    Ok(format!(
        "{{\"preset\":{preset:?},\"steps\":{steps},\"simd\":{},\"ms_per_step_plain\":{:.3},\"ms_per_step_qat\":{:.3},\"steps_per_s_plain\":{:.3},\"steps_per_s_qat\":{:.3}}}",
        cfg!(target_feature = "simd128"),
        ms[0],
        ms[1],
        1e3 / ms[0],
        1e3 / ms[1]
    ))
}

/// Start-up options from a URL query: `?preset=NAME&autostart=1&tab=amax&lesson=NAME&backend=cpu`
/// (`&pretrain=1`: pretrain the lessons' base in the page instead of the shipped one).
pub fn options_from_query(query: &str) -> Options {
    let mut o = Options::default();
    for pair in query.trim_start_matches('?').split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "preset" if !v.is_empty() => o.preset = Some(v.to_owned()),
            "autostart" => o.autostart = v != "0" && v != "false",
            "tab" => o.tab = Tab::parse(v),
            "lesson" if !v.is_empty() => o.lesson = Some(v.to_owned()),
            "backend" if !v.is_empty() => o.backend = v.parse().ok(),
            "pretrain" => o.pretrain_base = v != "0" && v != "false",
            _ => {}
        }
    }
    o
}

fn create(cc: &eframe::CreationContext<'_>, options: &Options) -> HifApp {
    CTX.with(|c| *c.borrow_mut() = Some(cc.egui_ctx.clone()));
    crate::training::worker::set_wake(wake);
    let mut app = HifApp::new(options);
    match &cc.wgpu_render_state {
        Some(rs) => {
            let info = rs.adapter.get_info();
            // A software rasterizer (SwiftShader where the browser has no usable GPU) spends
            // a frame on pixels and triangles: edges drawn without their anti-aliasing
            // fringe halve the triangles. Measured in headless Chromium (SwiftShader,
            // 1280×800, a `small` run's Loss panel): 6.7 → 10.7 frames/s while it trains.
            let drawn = if info.device_type == wgpu::DeviceType::Cpu {
                cc.egui_ctx
                    .tessellation_options_mut(|t| t.feathering = false);
                " This browser draws without a GPU: edges are drawn without smoothing, to keep \
                 the page responsive."
            } else {
                ""
            };
            if info.backend != wgpu::Backend::BrowserWebGpu {
                app.messages.notice = Some(format!(
                    "This browser has no WebGPU: training runs on the CPU instead (slower, same \
                     results).{drawn}"
                ));
            } else if let Err(why) =
                hif8lab_engine::gpu::GpuBackend::check_limits(&rs.device.limits())
            {
                app.messages.notice = Some(format!(
                    "This WebGPU device cannot run the engine ({why}); training runs on the CPU backend in wasm."
                ));
            } else {
                app.device.gpu = Some(Device::Gpu(Box::new((
                    rs.device.clone(),
                    rs.queue.clone(),
                    info,
                ))));
                app.form.settings.gpu = true;
            }
        }
        None => {
            app.messages.notice = Some(
                "No wgpu renderer in this browser; training runs on the CPU backend in wasm."
                    .into(),
            );
        }
    }
    if options.backend == Some(hif8lab_engine::BackendChoice::Cpu) {
        app.form.settings.gpu = false;
    }
    app.shipped.base_pending = true;
    app.shipped.runs_pending = true;
    app.shipped.outlier_pending = true;
    fetch_shipped();
    if options.autostart {
        app.autostart(|| {});
    }
    app
}

/// Applies a Pause or Resume pressed through the page's handle (at the start of a frame, or for
/// a run in a worker once the frame has taken the worker's messages).
pub fn take_pause(app: &mut HifApp) {
    if let Some(pause) = PAUSE.with(|s| s.take()) {
        app.pause_live(pause);
    }
}

/// Takes what the page handed in since the last frame (files, fetched files, and the presses
/// scripts made through the handle), at the start of a frame: before training advances, as a
/// click on the button lands before the next frame's training does.
pub fn take_inputs(app: &mut HifApp) {
    let files: Vec<(String, Vec<u8>)> = DROPPED.with(|d| d.borrow_mut().drain(..).collect());
    if !files.is_empty() {
        app.open_files(&files);
    }
    let fetched: Vec<_> = FETCHED.with(|f| f.borrow_mut().drain(..).collect());
    for (url, result) in fetched {
        app.shipped_arrived(url, result);
    }
    if START.with(|s| s.replace(false)) {
        app.start(|| {});
    }
    // A run in a worker trains outside the frame: its Pause lands after this frame has taken
    // what the worker posted ([`take_pause`]), so "Paused after step N" counts every step
    // reported before it and at most the one under way follows.
    if !app.trains_in_worker() {
        take_pause(app);
    }
    if STOP.with(|s| s.replace(false)) {
        app.stop_live();
    }
    if let Some(name) = LINK.with(|s| s.borrow_mut().take())
        && let Some(tab) = Tab::parse(&name)
    {
        app.lesson_link(tab);
    }
    if let Some(name) = SHOW.with(|s| s.borrow_mut().take()) {
        app.form.page = name == "settings";
        if let Some(tab) = Tab::parse(&name) {
            app.selection.tab = tab;
        }
        wake();
    }
    if let Some(name) = THEME.with(|s| s.borrow_mut().take()) {
        CTX.with(|c| {
            if let Some(ctx) = c.borrow().as_ref() {
                ctx.set_theme(if name == "light" {
                    eframe::egui::Theme::Light
                } else {
                    eframe::egui::Theme::Dark
                });
            }
        });
        wake();
    }
}

/// Sets `window.__hif8lab` to the app's snapshot (at the end of a frame).
pub fn publish(app: &HifApp) {
    let Some(window) = web_sys::window() else {
        return;
    };
    if let Ok(value) = js_sys::JSON::parse(&app.snapshot().to_string()) {
        let _ = js_sys::Reflect::set(&window, &JsValue::from_str("__hif8lab"), &value);
    }
}

/// Offers `bytes` as a download named `name`.
pub fn download(name: &str, bytes: &[u8], mime: &str) -> Result<(), String> {
    let err = |e: JsValue| format!("download of {name} failed: {e:?}");
    let window = web_sys::window().ok_or("no window")?;
    let document = window.document().ok_or("no document")?;
    let parts = js_sys::Array::new();
    parts.push(&js_sys::Uint8Array::from(bytes).into());
    let props = web_sys::BlobPropertyBag::new();
    props.set_type(mime);
    let blob =
        web_sys::Blob::new_with_u8_array_sequence_and_options(&parts, &props).map_err(err)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(err)?;
    let a: web_sys::HtmlAnchorElement = document
        .create_element("a")
        .map_err(err)?
        .dyn_into()
        .map_err(|_| "not an anchor".to_owned())?;
    a.set_href(&url);
    a.set_download(name);
    a.click();
    web_sys::Url::revoke_object_url(&url).map_err(err)?;
    Ok(())
}

/// Asks the page to open its file picker (`<input id="hif8lab-file">`).
pub fn pick_files() -> Result<(), String> {
    let input = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id("hif8lab-file"))
        .ok_or("the page has no #hif8lab-file input")?;
    input
        .dyn_into::<web_sys::HtmlElement>()
        .map_err(|_| "#hif8lab-file is not an element".to_owned())?
        .click();
    Ok(())
}
