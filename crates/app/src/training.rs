//! Training without making the UI wait. One [`Stepper`] advances a `Trainer` a few steps at a
//! time and turns its reports into [`Msg`]s; natively it runs on a named thread and the UI
//! drains a channel, in the browser (no threads) the frame loop calls it with a time budget
//! per frame. Steps in flight are bounded, so readbacks — asynchronous in both cases — keep up.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use hif8lab_engine::Backend;
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::gpu::GpuBackend;
use hif8lab_train::driver::{Control, Driver, Event, Progress, Schedule, Sink};
use hif8lab_train::eval::ProbeSet;
use hif8lab_train::models::checkpoint::Checkpoint;
use hif8lab_train::open::open_in_memory;
use hif8lab_train::{ProbeScores, RunConfig, StepReport, TrainError};

pub mod wire;
#[cfg(target_arch = "wasm32")]
pub mod worker;

/// What training tells the UI.
#[derive(Debug)]
pub enum Msg {
    /// Training started: estimator names, active index, backend description.
    Started {
        /// Estimator names.
        estimators: Vec<String>,
        /// Active estimator.
        active: usize,
        /// Backend and adapter.
        backend: String,
        /// Quantizers, in bank order.
        quantizers: Vec<hif8lab_scaling::QuantizerId>,
    },
    /// The GPU kernels compiled so far, of all (before `Started` on a GPU device).
    Preparing {
        /// Kernels compiled and confirmed by the device.
        compiled: usize,
        /// Kernels in all.
        total: usize,
    },
    /// A step's report.
    Report(Box<StepReport>),
    /// Probe scores (before the first step, every `eval_every` steps, after the last).
    Probes(Box<ProbeScores>),
    /// The final weights, when asked for ([`RunExtras::keep_weights`]).
    Weights(Arc<Checkpoint>),
    /// Training stopped with an error.
    Error(String),
    /// All steps done (or stopped).
    Finished,
}

pub(crate) const RUN: u8 = 0;
pub(crate) const PAUSE: u8 = 1;
pub(crate) const STOP: u8 = 2;

/// Steps enqueued ahead of their reports: enough to keep a GPU busy, few enough that a
/// Stop or a slow readback never leaves much unreported.
pub const MAX_IN_FLIGHT: usize = 3;

/// On a GPU device the page's (or window's) frames share the queue with training and wait
/// behind the steps enqueued before them: fewer steps are kept in flight once steps take
/// long, so a frame waits about this long at most (a frame at 20 frames/s), or one step where
/// a step takes longer ([`hif8lab_train::driver::in_flight_bound`]).
pub const FRAME_WAIT: Duration = Duration::from_millis(50);

/// Which device trains.
#[derive(Clone)]
pub enum Device {
    /// The CPU backend.
    Cpu,
    /// A GPU device and queue (eframe's own, shared) with its adapter description.
    Gpu(Box<(wgpu::Device, wgpu::Queue, wgpu::AdapterInfo)>),
}

/// What a run needs besides its config.
#[derive(Clone, Default)]
pub struct RunExtras {
    /// Weights to start from (continued training from a pretrained base).
    pub base: Option<Arc<Checkpoint>>,
    /// Probes scored before the first step, every `eval_every` steps and after the last
    /// (native only: scoring waits for the device).
    pub probes: Option<Arc<ProbeSet>>,
    /// Steps between probe evaluations (0: only after the last, and before the first when
    /// `eval_at_start`).
    pub eval_every: u64,
    /// Also score the probes before the first step.
    pub eval_at_start: bool,
    /// Send the final weights back as [`Msg::Weights`].
    pub keep_weights: bool,
}

/// The run driver seen through what the stepper needs (erases the backend type).
trait Drive {
    fn advance(
        &mut self,
        control: Control,
        budget: Duration,
        sink: &mut dyn Sink,
    ) -> Result<Progress, TrainError>;
    fn set_histogram(&mut self, quantizer: Option<usize>);
}

impl<B: Backend> Drive for Driver<B> {
    fn advance(
        &mut self,
        control: Control,
        budget: Duration,
        sink: &mut dyn Sink,
    ) -> Result<Progress, TrainError> {
        // Never blocks: in the browser readbacks arrive between frames.
        Driver::advance(self, control, budget, false, sink)
    }
    fn set_histogram(&mut self, quantizer: Option<usize>) {
        self.trainer_mut().set_histogram(quantizer);
    }
}

/// No histogram requested.
pub(crate) const NO_HISTOGRAM: usize = usize::MAX;

/// Advances one training run in slices of bounded time, through the run driver.
pub struct Stepper {
    run: Option<Box<dyn Drive>>,
    queue: VecDeque<Msg>,
    done: bool,
    histogram: usize,
    extras: RunExtras,
    /// A GPU device's kernels being compiled (one per call), with the config to start once
    /// they are.
    preparing: Option<(hif8lab_engine::gpu::Preparing, RunConfig)>,
    /// The compiled-kernel count last reported.
    reported: usize,
    /// What bounds the steps in flight besides [`MAX_IN_FLIGHT`] ([`FRAME_WAIT`] on a GPU).
    frame_wait: Option<Duration>,
}

impl Stepper {
    /// Builds the trainer for `config` on `device` (an error becomes `Error` + `Finished`).
    pub fn new(config: RunConfig, device: Device, extras: RunExtras) -> Self {
        let mut s = Stepper {
            run: None,
            queue: VecDeque::new(),
            done: false,
            histogram: NO_HISTOGRAM,
            extras,
            preparing: None,
            reported: 0,
            frame_wait: None,
        };
        let made = match device {
            Device::Cpu => s.adopt(CpuBackend::new(), config),
            Device::Gpu(gpu) => {
                s.frame_wait = Some(FRAME_WAIT);
                let (d, q, info) = *gpu;
                let p = GpuBackend::preparing(d, q, info);
                s.queue.push_back(Msg::Preparing {
                    compiled: 0,
                    total: p.total(),
                });
                s.preparing = Some((p, config));
                Ok(())
            }
        };
        if let Err(e) = made {
            s.queue.push_back(Msg::Error(e.to_string()));
            s.queue.push_back(Msg::Finished);
            s.done = true;
        }
        s
    }

    fn adopt<B: Backend + 'static>(
        &mut self,
        backend: B,
        config: RunConfig,
    ) -> Result<(), TrainError> {
        let info = backend.info();
        let extras = &self.extras;
        let schedule = Schedule {
            probes: extras.probes.clone(),
            eval_every: extras.eval_every,
            eval_at_start: extras.eval_at_start,
            keep_weights: extras.keep_weights,
            max_in_flight: MAX_IN_FLIGHT,
            frame_wait: self.frame_wait,
            ..Schedule::default()
        };
        let driver = open_in_memory(backend, config, extras.base.as_deref(), schedule)?;
        let trainer = driver.trainer();
        self.queue.push_back(Msg::Started {
            estimators: trainer.estimator_names().to_vec(),
            active: trainer.active_estimator(),
            backend: format!("{} '{}' ({})", info.kind, info.adapter, info.api),
            quantizers: trainer.quantizers().to_vec(),
        });
        self.run = Some(Box::new(driver));
        Ok(())
    }

    /// Builds GPU kernels for up to `budget` (one per `advance`, none waiting for another)
    /// and reports each change in the count the device has confirmed; once all are
    /// confirmed, builds the trainer. Stop ends it here.
    fn prepare(&mut self, control: u8, budget: Duration) -> (Vec<Msg>, bool) {
        let start = web_time::Instant::now();
        let mut waiting = false;
        if control == STOP {
            self.preparing = None;
            self.done = true;
            self.queue.push_back(Msg::Finished);
        }
        while let Some((p, _)) = self.preparing.as_mut() {
            let before = p.created();
            let ready = p.advance();
            // Confirmations arrive on their own (in the browser, between frames): report
            // every change, whenever it is seen.
            let (compiled, total) = (p.compiled(), p.total());
            if compiled != self.reported {
                self.reported = compiled;
                self.queue.push_back(Msg::Preparing { compiled, total });
            }
            if ready {
                if let Some((p, config)) = self.preparing.take()
                    && let Err(e) = self.adopt(p.finish(), config)
                {
                    self.queue.push_back(Msg::Error(e.to_string()));
                    self.queue.push_back(Msg::Finished);
                    self.done = true;
                }
                break;
            }
            if start.elapsed() >= budget {
                waiting = true;
                break;
            }
            if p.created() == before {
                // Every kernel is built; the device has not confirmed them all yet: natively
                // it will soon, in the browser only between frames.
                waiting = true;
                if cfg!(target_arch = "wasm32") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        (self.queue.drain(..).collect(), waiting)
    }

    /// Whether `Finished` has been produced.
    pub fn done(&self) -> bool {
        self.done
    }

    /// Works for about `budget` (at least one step when one can be enqueued) and returns what
    /// happened. Returns early when it can only wait for readbacks: in the browser they arrive
    /// between frames. `control` is RUN, PAUSE or STOP.
    pub(crate) fn advance(
        &mut self,
        control: u8,
        histogram: usize,
        budget: Duration,
    ) -> (Vec<Msg>, bool) {
        if self.preparing.is_some() {
            return self.prepare(control, budget);
        }
        let mut waiting = false;
        let Stepper {
            run: slot,
            queue,
            done,
            histogram: binned,
            ..
        } = self;
        if !*done && let Some(run) = slot.as_mut() {
            if histogram != *binned {
                *binned = histogram;
                run.set_histogram((histogram != NO_HISTOGRAM).then_some(histogram));
            }
            let control = match control {
                RUN => Control::Run,
                PAUSE => Control::Pause,
                _ => Control::Stop,
            };
            let mut sink = |e: Event| {
                queue.push_back(match e {
                    Event::Report(r) => Msg::Report(r),
                    Event::Probes(p) => Msg::Probes(p),
                    Event::Weights(w) => Msg::Weights(w),
                    Event::Checkpoint { .. } => return Ok(()),
                });
                Ok(())
            };
            let result = run.advance(control, budget, &mut sink);
            let finished = match result {
                Ok(Progress::Working) => false,
                Ok(Progress::Waiting) => {
                    waiting = true;
                    false
                }
                Ok(Progress::Finished | Progress::Stopped) => true,
                Err(e) => {
                    queue.push_back(Msg::Error(e.to_string()));
                    true
                }
            };
            if finished {
                queue.push_back(Msg::Finished);
                *done = true;
                *slot = None;
            }
        }
        (queue.drain(..).collect(), waiting)
    }
}

enum Source {
    #[cfg(not(target_arch = "wasm32"))]
    Thread(std::sync::mpsc::Receiver<Msg>),
    Local(Box<Stepper>),
    /// The browser's CPU training, in a Web Worker (controls are posted to it as they
    /// change).
    #[cfg(target_arch = "wasm32")]
    Worker(worker::WorkerRun),
}

/// A training run the UI drains each frame.
pub struct Training {
    source: Source,
    control: Arc<AtomicU8>,
    histogram: Arc<AtomicUsize>,
    started: web_time::Instant,
}

impl Training {
    /// Seconds since it started.
    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Starts training `config`: natively on a named thread (`wake` asks the UI to repaint
    /// when reports arrive), in the browser stepped from the frame loop.
    pub fn start(
        config: RunConfig,
        device: Device,
        extras: RunExtras,
        wake: impl Fn() + Send + 'static,
    ) -> std::io::Result<Self> {
        #[cfg(target_arch = "wasm32")]
        {
            let _ = wake;
            Ok(Self::start_local(config, device, extras))
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let (tx, rx) = std::sync::mpsc::channel();
            let control = Arc::new(AtomicU8::new(RUN));
            let histogram = Arc::new(AtomicUsize::new(NO_HISTOGRAM));
            let (flag, hist) = (control.clone(), histogram.clone());
            std::thread::Builder::new()
                .name("hif8lab-training".into())
                .spawn(move || {
                    let on_cpu = matches!(device, Device::Cpu);
                    let body = move || {
                        let mut s = Stepper::new(config, device, extras);
                        while !s.done() {
                            let (msgs, waiting) = s.advance(
                                flag.load(Ordering::Relaxed),
                                hist.load(Ordering::Relaxed),
                                Duration::from_millis(20),
                            );
                            let any = !msgs.is_empty();
                            for m in msgs {
                                if tx.send(m).is_err() {
                                    return; // the UI is gone
                                }
                            }
                            if any {
                                wake();
                            }
                            if waiting {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                        }
                    };
                    // A CPU run works on a thread of the CPU backend's pool, as the command
                    // line does: its ops split into pieces without a hand-off per op (while
                    // paused it keeps that thread; other CPU work has the rest).
                    if on_cpu {
                        hif8lab_engine::cpu::on_pool(body);
                    } else {
                        body();
                    }
                })?;
            Ok(Training {
                source: Source::Thread(rx),
                control,
                histogram,
                started: web_time::Instant::now(),
            })
        }
    }

    /// Starts training driven by [`Training::drain`] from the caller's frame loop (what the
    /// browser does; natively it serves the tests of that path). In the browser a CPU run
    /// goes to a Web Worker instead (`training::worker`, wasm only), so that no step holds the page;
    /// only where none can start is it stepped from the frame loop.
    pub fn start_local(config: RunConfig, device: Device, extras: RunExtras) -> Self {
        #[cfg(target_arch = "wasm32")]
        if matches!(device, Device::Cpu) {
            match worker::WorkerRun::start(config.clone(), &extras) {
                Ok(run) => {
                    return Training {
                        source: Source::Worker(run),
                        control: Arc::new(AtomicU8::new(RUN)),
                        histogram: Arc::new(AtomicUsize::new(NO_HISTOGRAM)),
                        started: web_time::Instant::now(),
                    };
                }
                Err(why) => web_sys::console::warn_1(
                    &format!("training in the page's frame loop (no worker: {why})").into(),
                ),
            }
        }
        Training {
            source: Source::Local(Box::new(Stepper::new(config, device, extras))),
            control: Arc::new(AtomicU8::new(RUN)),
            histogram: Arc::new(AtomicUsize::new(NO_HISTOGRAM)),
            started: web_time::Instant::now(),
        }
    }

    /// What happened since the last call. A frame-loop run first works for up to `budget`.
    pub fn drain(&mut self, budget: Duration) -> Vec<Msg> {
        let control = self.control.load(Ordering::Relaxed);
        match &mut self.source {
            #[cfg(not(target_arch = "wasm32"))]
            Source::Thread(rx) => {
                let _ = budget;
                rx.try_iter().collect()
            }
            Source::Local(s) => {
                let histogram = self.histogram.load(Ordering::Relaxed);
                s.advance(control, histogram, budget).0
            }
            #[cfg(target_arch = "wasm32")]
            Source::Worker(run) => {
                let _ = (budget, control);
                run.drain()
            }
        }
    }

    /// Whether it trains in a Web Worker (the browser's CPU runs).
    pub fn in_worker(&self) -> bool {
        #[cfg(target_arch = "wasm32")]
        if matches!(self.source, Source::Worker(_)) {
            return true;
        }
        false
    }

    /// Pauses or resumes.
    pub fn set_paused(&self, paused: bool) {
        let control = if paused { PAUSE } else { RUN };
        self.control.store(control, Ordering::Relaxed);
        #[cfg(target_arch = "wasm32")]
        if let Source::Worker(run) = &self.source {
            run.control(control);
        }
    }

    /// Chooses the quantizer (bank index, as in `Msg::Started::quantizers`) whose input is
    /// binned into each step's log2|x·scale| histogram; `None` stops binning.
    pub fn set_histogram(&self, quantizer: Option<usize>) {
        let q = quantizer.unwrap_or(NO_HISTOGRAM);
        if self.histogram.swap(q, Ordering::Relaxed) != q {
            #[cfg(target_arch = "wasm32")]
            if let Source::Worker(run) = &self.source {
                run.histogram(q);
            }
        }
    }

    /// Whether paused.
    pub fn paused(&self) -> bool {
        self.control.load(Ordering::Relaxed) == PAUSE
    }

    /// Asks training to stop after the current step (reports still in flight are dropped).
    pub fn stop(&self) {
        self.control.store(STOP, Ordering::Relaxed);
        #[cfg(target_arch = "wasm32")]
        if let Source::Worker(run) = &self.source {
            run.control(STOP);
        }
    }
}

impl Drop for Training {
    fn drop(&mut self) {
        self.stop();
    }
}
