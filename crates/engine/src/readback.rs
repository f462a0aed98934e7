//! "Results available later": the value of an asynchronous GPU readback (or an immediate
//! CPU result), consumable from a frame loop (`try_take`) or a thread (`wait`).

use std::sync::{Arc, Mutex};

use crate::EngineError;

type Slot<T> = Arc<Mutex<Option<Result<T, EngineError>>>>;

/// A device poll: blocking (`wait`) or not (`try_take`). Natively it may cross threads; in
/// the browser nothing is `Send` and the browser itself drives completion.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) type Poller = Box<dyn Fn(bool) + Send>;
/// See the native definition.
#[cfg(target_arch = "wasm32")]
pub(crate) type Poller = Box<dyn Fn(bool)>;

/// A result that arrives later. Poll with [`Readback::try_take`] (never blocks; what a
/// browser frame loop uses) or block with [`Readback::wait`] (native only).
pub struct Readback<T> {
    slot: Slot<T>,
    poller: Option<Poller>,
}

impl<T> Readback<T> {
    /// An already available result.
    pub fn ready(value: Result<T, EngineError>) -> Self {
        Readback {
            slot: Arc::new(Mutex::new(Some(value))),
            poller: None,
        }
    }

    /// A pending result filled through the returned slot; `poller(true)` blocks until the
    /// device has completed the work that fills it, `poller(false)` only checks.
    pub(crate) fn pending(poller: Option<Poller>) -> (Self, Slot<T>) {
        let slot: Slot<T> = Arc::new(Mutex::new(None));
        (
            Readback {
                slot: slot.clone(),
                poller,
            },
            slot,
        )
    }

    /// The result if it has arrived; `None` while pending. Takes it out. Never blocks.
    pub fn try_take(&self) -> Option<Result<T, EngineError>> {
        if let Some(v) = self.take_slot() {
            return Some(v);
        }
        if let Some(p) = &self.poller {
            p(false);
        }
        self.take_slot()
    }

    fn take_slot(&self) -> Option<Result<T, EngineError>> {
        self.slot.lock().ok().and_then(|mut s| s.take())
    }

    /// Whether the result has arrived (polls the device once, never blocks).
    pub fn is_ready(&self) -> bool {
        let ready = || self.slot.lock().map(|s| s.is_some()).unwrap_or(true);
        if ready() {
            return true;
        }
        if let Some(p) = &self.poller {
            p(false);
        }
        ready()
    }

    /// Blocks until the result arrives (counts as a blocking sync on the GPU).
    ///
    /// Another thread polling the same device may be the one that runs the completion
    /// callback, a moment after this thread's wait returned; so the wait repeats (yielding)
    /// until the value is there, for at most a minute.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait(self) -> Result<T, EngineError> {
        let start = std::time::Instant::now();
        loop {
            if let Some(v) = self.take_slot() {
                return v;
            }
            match &self.poller {
                Some(p) => p(true),
                None => return Err(EngineError::NotReady),
            }
            if start.elapsed() > std::time::Duration::from_secs(60) {
                return Err(EngineError::NotReady);
            }
            std::thread::yield_now();
        }
    }
}
