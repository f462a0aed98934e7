//! The browser's CPU training in a Web Worker, so that a step (seconds long on the `small`
//! preset) never holds the page: the worker loads this same module, runs a [`Stepper`] on
//! the CPU backend and posts each [`Msg`] back ([`super::wire`]); the page drains them each
//! frame. Pause and the histogram's quantizer are posted to it; Stop ends it at once
//! (`terminate`), as a closed tab would.
//!
//! Pause lands at the next step boundary whatever the load: after each slice of work (a
//! step, or the steps that fit 50 ms) the worker posts a `tick` marker and starts no more
//! work until the page answers `go` with its current control. The page answers from its
//! message handler (not a frame), on the same port as its `control` messages, so a Pause
//! pressed while a step runs is read before the next step could start; the worker never races
//! a message of its own against the page's (a timer or a second channel may overtake them).
//!
//! The worker is a module script made from a Blob: it buffers what the page posts while the
//! module loads, then hands it to [`training_worker_main`]. The page names the module it
//! loaded in `window.__hif8lab_pkg` (index.html); without it, or where a module worker
//! cannot start, training is stepped from the frame loop as before.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use js_sys::{Array, Reflect, Uint8Array};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use super::wire::{self, Setup};
use crate::training::{Device, Msg, NO_HISTOGRAM, RUN, RunExtras, STOP, Stepper};
use hif8lab_train::RunConfig;

thread_local! {
    /// How the page asks for a frame when a message arrives (set by the web entry point:
    /// an idle page draws no frames on its own).
    static WAKE: RefCell<Option<Box<dyn Fn()>>> = const { RefCell::new(None) };
}

/// Sets what [`WorkerRun`] calls when a message arrives.
pub fn set_wake(f: impl Fn() + 'static) {
    WAKE.with(|w| *w.borrow_mut() = Some(Box::new(f)));
}

fn wake() {
    WAKE.with(|w| {
        if let Some(f) = w.borrow().as_ref() {
            f();
        }
    });
}

/// A run in a worker, seen from the page.
pub struct WorkerRun {
    worker: web_sys::Worker,
    inbox: Rc<RefCell<VecDeque<Msg>>>,
    /// The control the page last asked for: what it answers each `tick` with.
    control: Rc<std::cell::Cell<u8>>,
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::ErrorEvent)>,
    ended: std::cell::Cell<bool>,
}

fn js_text(e: JsValue) -> String {
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}

fn post(worker: &web_sys::Worker, kind: &str, value: f64) {
    let m = js_sys::Object::new();
    let _ = Reflect::set(&m, &"kind".into(), &kind.into());
    let _ = Reflect::set(&m, &"value".into(), &value.into());
    let _ = worker.post_message(&m);
}

impl WorkerRun {
    /// Starts `config` in a new worker, or says why it cannot (no module named by the page,
    /// no module workers).
    pub fn start(config: RunConfig, extras: &RunExtras) -> Result<Self, String> {
        let window = web_sys::window().ok_or("no window")?;
        let pkg = Reflect::get(&window, &"__hif8lab_pkg".into())
            .ok()
            .and_then(|v| v.as_string())
            .ok_or("the page names no module for a worker")?;
        let script = format!(
            "const pending = [];\n\
             self.onmessage = (e) => pending.push(e.data);\n\
             const m = await import({pkg:?});\n\
             await m.default();\n\
             m.training_worker_main(pending);\n"
        );
        let parts = Array::of1(&script.into());
        let options = web_sys::BlobPropertyBag::new();
        options.set_type("text/javascript");
        let blob =
            web_sys::Blob::new_with_str_sequence_and_options(&parts, &options).map_err(js_text)?;
        let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(js_text)?;
        let worker_options = web_sys::WorkerOptions::new();
        worker_options.set_type(web_sys::WorkerType::Module);
        let worker = web_sys::Worker::new_with_options(&url, &worker_options).map_err(js_text)?;
        let _ = web_sys::Url::revoke_object_url(&url);

        let inbox: Rc<RefCell<VecDeque<Msg>>> = Rc::default();
        let control = Rc::new(std::cell::Cell::new(RUN));
        let to = inbox.clone();
        let (answer, asked) = (worker.clone(), control.clone());
        let on_message =
            Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
                if e.data().as_string().as_deref() == Some(TICK) {
                    // The worker waits for this before its next slice of work.
                    post(&answer, "go", f64::from(asked.get()));
                    return;
                }
                let bytes = Uint8Array::new(&e.data()).to_vec();
                let msg = wire::decode(&bytes)
                    .unwrap_or_else(|why| Msg::Error(format!("training worker: {why}")));
                to.borrow_mut().push_back(msg);
                wake();
            });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        let to = inbox.clone();
        let on_error =
            Closure::<dyn FnMut(web_sys::ErrorEvent)>::new(move |e: web_sys::ErrorEvent| {
                let mut q = to.borrow_mut();
                q.push_back(Msg::Error(format!("training worker: {}", e.message())));
                q.push_back(Msg::Finished);
                wake();
            });
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));

        let (setup, base) = Setup::of(config, extras);
        let m = js_sys::Object::new();
        let _ = Reflect::set(&m, &"kind".into(), &"start".into());
        let setup = Uint8Array::from(setup.encode().as_slice());
        let transfer = Array::of1(&setup.buffer());
        let _ = Reflect::set(&m, &"setup".into(), &setup);
        if let Some(bytes) = base {
            let array = Uint8Array::from(bytes.as_slice());
            transfer.push(&array.buffer());
            let _ = Reflect::set(&m, &"base".into(), &array);
        }
        worker
            .post_message_with_transfer(&m, &transfer)
            .map_err(js_text)?;
        Ok(WorkerRun {
            worker,
            inbox,
            control,
            _on_message: on_message,
            _on_error: on_error,
            ended: std::cell::Cell::new(false),
        })
    }

    /// What arrived since the last call; the worker ends with the run.
    pub fn drain(&mut self) -> Vec<Msg> {
        let msgs: Vec<Msg> = self.inbox.borrow_mut().drain(..).collect();
        if !self.ended.get() && msgs.iter().any(|m| matches!(m, Msg::Finished)) {
            self.ended.set(true);
            self.worker.terminate();
        }
        msgs
    }

    /// Run, pause or stop (`training::RUN` …); Stop ends the worker now, dropping the step
    /// in flight, and `Finished` is the next message.
    pub fn control(&self, control: u8) {
        if self.ended.get() {
            return;
        }
        self.control.set(control);
        if control == STOP {
            self.ended.set(true);
            self.worker.terminate();
            self.inbox.borrow_mut().push_back(Msg::Finished);
            wake();
        } else {
            post(&self.worker, "control", f64::from(control));
        }
    }

    /// The quantizer whose input each step bins (`NO_HISTOGRAM`: none).
    pub fn histogram(&self, quantizer: usize) {
        if !self.ended.get() {
            let value = if quantizer == NO_HISTOGRAM {
                -1.0
            } else {
                quantizer as f64
            };
            post(&self.worker, "histogram", value);
        }
    }
}

impl Drop for WorkerRun {
    fn drop(&mut self) {
        self.worker.terminate();
    }
}

/// What the worker posts after each slice of work (a string, never a wire message).
const TICK: &str = "tick";

/// The worker's run.
struct Work {
    stepper: Stepper,
    control: u8,
    histogram: usize,
    /// The last slice waited for readbacks (then the next comes after a pause).
    waiting: bool,
}

thread_local! {
    static WORK: RefCell<Option<Work>> = const { RefCell::new(None) };
    /// The channel whose messages run the next tick: a message behind those the page has
    /// already posted (one task source, first in first out), where a timer may overtake them.
    static NEXT: RefCell<Option<web_sys::MessageChannel>> = const { RefCell::new(None) };
}

fn scope() -> web_sys::DedicatedWorkerGlobalScope {
    js_sys::global().unchecked_into()
}

fn send(msg: &Msg) {
    let bytes = wire::encode(msg);
    let array = Uint8Array::from(bytes.as_slice());
    let _ = scope().post_message_with_transfer(&array, &Array::of1(&array.buffer()));
}

/// Works for up to 50 ms (or one step, whichever is longer), posts what happened, then a
/// `tick`: the next slice starts when the page answers `go` ([`on_go`]), after every message
/// it posted before (Pause among them).
fn tick() {
    WORK.with(|w| {
        let mut slot = w.borrow_mut();
        let Some(work) = slot.as_mut() else {
            return;
        };
        let (msgs, waiting) =
            work.stepper
                .advance(work.control, work.histogram, Duration::from_millis(50));
        msgs.iter().for_each(send);
        if work.stepper.done() {
            *slot = None;
            return;
        }
        work.waiting = waiting;
        let _ = scope().post_message(&TICK.into());
    });
}

/// The page's answer to a `tick`: its control now. Running, the next slice starts at once
/// (behind the messages already posted); paused or waiting for readbacks, after 20 ms.
fn on_go(control: u8) {
    let again = WORK.with(|w| {
        let mut slot = w.borrow_mut();
        let work = slot.as_mut()?;
        work.control = control;
        Some(if work.waiting || control != RUN {
            20
        } else {
            0
        })
    });
    if let Some(ms) = again {
        schedule(ms);
    }
}

fn schedule(ms: i32) {
    if ms > 0 {
        let f = Closure::once_into_js(tick);
        let _ =
            scope().set_timeout_with_callback_and_timeout_and_arguments_0(f.unchecked_ref(), ms);
        return;
    }
    NEXT.with(|n| {
        let mut n = n.borrow_mut();
        if n.is_none()
            && let Ok(channel) = web_sys::MessageChannel::new()
        {
            let on = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(|_| tick());
            channel
                .port1()
                .set_onmessage(Some(on.as_ref().unchecked_ref()));
            on.forget();
            *n = Some(channel);
        }
        match n.as_ref() {
            Some(channel) => {
                let _ = channel.port2().post_message(&JsValue::NULL);
            }
            None => {
                let f = Closure::once_into_js(tick);
                let _ = scope()
                    .set_timeout_with_callback_and_timeout_and_arguments_0(f.unchecked_ref(), 0);
            }
        }
    });
}

fn on_message(data: &JsValue) {
    let field = |k: &str| Reflect::get(data, &k.into()).unwrap_or(JsValue::UNDEFINED);
    match field("kind").as_string().as_deref() {
        Some("start") => {
            let base = field("base")
                .dyn_into::<Uint8Array>()
                .ok()
                .map(|a| a.to_vec());
            let run = field("setup")
                .dyn_into::<Uint8Array>()
                .map_err(|_| "no setup".to_owned())
                .and_then(|a| Setup::decode(&a.to_vec()))
                .and_then(|setup| setup.into_run(base.as_deref()));
            match run {
                Ok((config, extras)) => {
                    let stepper = Stepper::new(config, Device::Cpu, extras);
                    WORK.with(|w| {
                        *w.borrow_mut() = Some(Work {
                            stepper,
                            control: RUN,
                            histogram: NO_HISTOGRAM,
                            waiting: false,
                        })
                    });
                    schedule(0);
                }
                Err(e) => {
                    send(&Msg::Error(format!("training worker: {e}")));
                    send(&Msg::Finished);
                }
            }
        }
        Some("go") => on_go(field("value").as_f64().unwrap_or(0.0) as u8),
        Some("control") => {
            let value = field("value").as_f64().unwrap_or(0.0) as u8;
            WORK.with(|w| {
                if let Some(work) = w.borrow_mut().as_mut() {
                    work.control = value;
                }
            });
        }
        Some("histogram") => {
            let value = field("value").as_f64().unwrap_or(-1.0);
            WORK.with(|w| {
                if let Some(work) = w.borrow_mut().as_mut() {
                    work.histogram = if value < 0.0 {
                        NO_HISTOGRAM
                    } else {
                        value as usize
                    };
                }
            });
        }
        _ => {}
    }
}

/// The worker's entry (called by its bootstrap script with what the page posted while the
/// module loaded): handles those, then every later message.
#[wasm_bindgen]
pub fn training_worker_main(pending: Array) {
    let handler = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(|e: web_sys::MessageEvent| {
        on_message(&e.data())
    });
    scope().set_onmessage(Some(handler.as_ref().unchecked_ref()));
    handler.forget();
    for m in pending.iter() {
        on_message(&m);
    }
}
