//! Errors of the engine.

/// What can go wrong in the engine.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// No GPU adapter (or none matching `WGPU_ADAPTER_NAME`).
    #[error("no GPU adapter: {0}")]
    NoAdapter(String),
    /// The adapter refused the device.
    #[error("GPU device request failed: {0}")]
    Device(String),
    /// A tensor exceeds what one binding may hold on this device.
    #[error(
        "{what} needs {bytes} bytes, over this device's max_storage_buffer_binding_size of {limit} bytes (split the tensor)"
    )]
    TooLarge {
        /// Which tensor.
        what: String,
        /// Its size.
        bytes: u64,
        /// The device limit.
        limit: u64,
    },
    /// Mismatched shapes or indices: the operation and what is wrong.
    #[error("shape error: {op}: {message}")]
    Shape {
        /// The operation (`matmul`, `attention`, `copy_range`, `bank`, …).
        op: String,
        /// What is wrong with its operands.
        message: String,
    },
    /// A bank configuration the engine cannot hold.
    #[error("bank config: {0}")]
    Config(String),
    /// Reading results back failed.
    #[error("readback failed: {0}")]
    Readback(String),
    /// The result is not there yet (asynchronous readback still pending).
    #[error("result not ready yet")]
    NotReady,
    /// A device allows less than a kernel needs (a device created elsewhere: eframe's, a
    /// browser's).
    #[error("the device allows {limit} = {have}, the engine needs {need}")]
    Limit {
        /// The `wgpu::Limits` field.
        limit: &'static str,
        /// The device's value.
        have: u32,
        /// The engine's need.
        need: u32,
    },
    /// The CPU thread pool cannot be built as asked (`--threads N`).
    #[error("--threads {threads}: {message}")]
    Threads {
        /// The asked count.
        threads: usize,
        /// Why not.
        message: String,
    },
}
