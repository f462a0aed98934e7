//! Training off the UI thread: a named thread runs the `Trainer` and sends `StepReport`s over
//! a channel; the UI only polls the channel (it never waits for training).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};

use hif8lab_engine::Backend;
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::gpu::GpuBackend;
use hif8lab_train::{RunConfig, StepReport, Trainer};

/// What the training thread tells the UI.
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
    },
    /// A step's report.
    Report(Box<StepReport>),
    /// Training stopped with an error.
    Error(String),
    /// All steps done (or stopped).
    Finished,
}

const RUN: u8 = 0;
const PAUSE: u8 = 1;
const STOP: u8 = 2;

/// A running training thread.
pub struct Training {
    /// Messages from the thread.
    pub rx: Receiver<Msg>,
    control: Arc<AtomicU8>,
}

/// Which device trains.
#[derive(Clone)]
pub enum Device {
    /// The CPU backend.
    Cpu,
    /// A GPU device and queue (eframe's own, shared) with its adapter description.
    Gpu(Box<(wgpu::Device, wgpu::Queue, wgpu::AdapterInfo)>),
}

fn run<B: Backend>(
    backend: B,
    config: RunConfig,
    tx: &Sender<Msg>,
    control: &AtomicU8,
    wake: &dyn Fn(),
) {
    let info = backend.info();
    let mut trainer = match Trainer::new(backend, config) {
        Ok(t) => t,
        Err(e) => {
            let _ = tx.send(Msg::Error(e.to_string()));
            return;
        }
    };
    let _ = tx.send(Msg::Started {
        estimators: trainer.estimator_names().to_vec(),
        active: trainer.active_estimator(),
        backend: format!("{} '{}' ({})", info.kind, info.adapter, info.api),
    });
    let result = (|| -> Result<(), hif8lab_train::TrainError> {
        while !trainer.finished() {
            match control.load(Ordering::Relaxed) {
                STOP => break,
                PAUSE => {
                    std::thread::sleep(std::time::Duration::from_millis(30));
                    continue;
                }
                _ => {}
            }
            trainer.step()?;
            for r in trainer.poll()? {
                let _ = tx.send(Msg::Report(Box::new(r)));
                wake();
            }
        }
        for r in trainer.finish()? {
            let _ = tx.send(Msg::Report(Box::new(r)));
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = tx.send(Msg::Error(e.to_string()));
    }
    let _ = tx.send(Msg::Finished);
    wake();
}

impl Training {
    /// Starts training `config` on a named thread; `wake` asks the UI to repaint.
    pub fn start(
        config: RunConfig,
        device: Device,
        wake: impl Fn() + Send + 'static,
    ) -> std::io::Result<Self> {
        let (tx, rx) = channel();
        let control = Arc::new(AtomicU8::new(RUN));
        let flag = control.clone();
        std::thread::Builder::new()
            .name("hif8lab-training".into())
            .spawn(move || match device {
                Device::Cpu => run(CpuBackend::new(), config, &tx, &flag, &wake),
                Device::Gpu(gpu) => {
                    let (d, q, info) = *gpu;
                    run(
                        GpuBackend::from_device(d, q, info),
                        config,
                        &tx,
                        &flag,
                        &wake,
                    )
                }
            })?;
        Ok(Training { rx, control })
    }

    /// Pauses or resumes.
    pub fn set_paused(&self, paused: bool) {
        self.control
            .store(if paused { PAUSE } else { RUN }, Ordering::Relaxed);
    }

    /// Whether paused.
    pub fn paused(&self) -> bool {
        self.control.load(Ordering::Relaxed) == PAUSE
    }

    /// Asks the thread to stop after the current step.
    pub fn stop(&self) {
        self.control.store(STOP, Ordering::Relaxed);
    }
}

impl Drop for Training {
    fn drop(&mut self) {
        self.stop();
    }
}
