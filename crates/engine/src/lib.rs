//! # hif8lab-engine
//!
//! The compute engine: a [`Backend`] trait for the tensor operations the trainer calls, with
//! two implementations —
//! - [`cpu::CpuBackend`]: plain Rust, the **oracle** every GPU kernel is tested against and the
//!   fallback where WebGPU is missing (builds for wasm32);
//! - [`gpu::GpuBackend`]: wgpu + WGSL kernels from `shaders/` (one kernel per file), running
//!   natively (Vulkan/Metal/DX12) and in the browser (WebGPU).
//!
//! The trait is four op families on one [`Device`]: [`TensorOps`], [`QuantOps`],
//! [`ModelOps`], [`OptimizerOps`] (import [`prelude`] to call them on a concrete backend).
//! Kernels (17, listed in [`gpu::KERNELS`], one WGSL file each): `qdq`, `amax`,
//! `quant_stats`, `histogram`, `scale_update` (the quantizer bank), `matmul` (tiled GEMM,
//! three layouts, batched, fused fake quantization), `embedding`, `rmsnorm`, `rope`,
//! `attention`, `attention_cached`, `swiglu`, `cross_entropy`, `elementwise` (the model), `sum_squares`, `adamw`
//! (the optimizer) and `ste_mask`; `elementwise` also holds the plain copy that is the
//! benchmark's bandwidth reference.
//!
//! The semantics of formats and scaling live in `hif8lab-format` and `hif8lab-scaling`; the
//! model and the training loop live in `hif8lab-train`, not here.

pub mod bank;
mod checks;
mod choice;
pub mod cpu;
mod error;
pub mod gpu;
pub mod readback;

pub use bank::{BankConfig, BankHistogram, BankSnapshot, QuantizerSnapshot, StatsSnapshot};
#[cfg(not(target_arch = "wasm32"))]
pub use choice::open_gpu;
pub use choice::{AnyBackend, BackendChoice, NotABackend, is_software};
pub use error::EngineError;
pub use readback::Readback;

mod info;
pub use info::*;

mod shapes;
pub use shapes::*;

/// Declares an op family once: the trait, and its GPU implementation forwarding each op to
/// the launcher named after `=>` (beside its kernel in `gpu/`), so an op's arguments are
/// written in the trait and in its launcher only. The CPU oracle implements the traits by
/// hand (`cpu/`).
macro_rules! op_family {
    (
        $(#[$tm:meta])*
        pub trait $Trait:ident: Device {
            $(
                $(#[$m:meta])*
                fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty => $gpu:path;
            )*
        }
    ) => {
        $(#[$tm])*
        pub trait $Trait: Device {
            $(
                $(#[$m])*
                fn $name(&self $(, $arg: $ty)*) -> $ret;
            )*
        }

        impl $Trait for gpu::GpuBackend {
            $(
                $(#[$m])*
                fn $name(&self $(, $arg: $ty)*) -> $ret {
                    $gpu(self $(, $arg)*)
                }
            )*
        }
    };
}

/// What every backend is: its tensor and bank types, what it runs on, submission and counters.
///
/// Tensors are flat f32 buffers (handles: outputs are written through `&Tensor`). An output
/// must not alias an input of the same call. GPU work is recorded and submitted on
/// [`Device::flush`] (or when something is read back); results arrive through
/// [`Readback`]s, never by blocking inside an operation.
pub trait Device {
    /// A flat f32 tensor.
    type Tensor;

    /// A quantizer bank: amax histories, estimates, scales and statistics of many quantizers.
    type Bank;

    /// What computes.
    fn info(&self) -> BackendInfo;

    /// Submits recorded work (no-op on the CPU).
    fn flush(&self);

    /// Submissions and blocking waits so far.
    fn counters(&self) -> Counters;
}

op_family! {
/// Op family: tensors (create, read, write, copy, elementwise, matrix products).
pub trait TensorOps: Device {
    /// A tensor holding `data`.
    fn upload(&self, data: &[f32]) -> Result<Self::Tensor, EngineError> => gpu::tensor::upload;

    /// A zero-filled tensor of `len` elements.
    fn zeros(&self, len: usize) -> Result<Self::Tensor, EngineError> => gpu::tensor::zeros;

    /// Elements in a tensor.
    fn len(&self, t: &Self::Tensor) -> usize => gpu::tensor::len;

    /// Overwrites a tensor's contents (`data.len()` must equal its length).
    fn write(&self, t: &Self::Tensor, data: &[f32]) -> Result<(), EngineError> => gpu::tensor::write;

    /// Reads a tensor back (asynchronously on the GPU).
    fn read(&self, t: &Self::Tensor) -> Readback<Vec<f32>> => gpu::tensor::read;

    /// `dst = src` (same lengths).
    fn copy(&self, src: &Self::Tensor, dst: &Self::Tensor) -> Result<(), EngineError> => gpu::tensor::copy;

    /// `dst[dst_at..dst_at + len] = src[src_at..src_at + len]` (a key/value cache append,
    /// a row taken out of a batch).
    fn copy_range(
        &self,
        src: &Self::Tensor,
        src_at: usize,
        dst: &Self::Tensor,
        dst_at: usize,
        len: usize,
    ) -> Result<(), EngineError> => gpu::tensor::copy_range;

    /// A matrix product; fused quantization reads scales from `bank`.
    fn matmul(
        &self,
        a: &Self::Tensor,
        b: &Self::Tensor,
        c: &Self::Tensor,
        spec: &MatmulSpec,
        bank: Option<&Self::Bank>,
    ) -> Result<(), EngineError> => gpu::matmul::launch;

    /// Sets every element to zero.
    fn fill_zero(&self, t: &Self::Tensor) -> Result<(), EngineError> => gpu::tensor::fill_zero;

    /// `dst += src`.
    fn add_inplace(&self, dst: &Self::Tensor, src: &Self::Tensor) -> Result<(), EngineError> => gpu::elementwise::launch_add;

    /// `dst *= factor`.
    fn scale_inplace(&self, dst: &Self::Tensor, factor: f32) -> Result<(), EngineError> => gpu::elementwise::launch_scale;
}
}

op_family! {
/// Op family: the quantizer bank (fake quantization, amax, delayed scaling, statistics).
pub trait QuantOps: Device {
    /// A quantizer bank for `config`: empty histories, every scale 1.0.
    fn new_bank(&self, config: &BankConfig) -> Result<Self::Bank, EngineError> => gpu::quant::new_bank;

    /// Sets every estimator's current scale (`[quantizer][estimator]`, flattened); the
    /// estimate in effect becomes the amax each scale aims at.
    fn set_scales(&self, bank: &Self::Bank, scales: &[f32]) -> Result<(), EngineError> => gpu::quant::set_scales;

    /// `out = qdq(x·s)/s` with `s` the quantizer's active scale.
    fn qdq(
        &self,
        x: &Self::Tensor,
        out: &Self::Tensor,
        bank: &Self::Bank,
        quantizer: usize,
    ) -> Result<(), EngineError> => gpu::qdq::launch;

    /// Measures this call's amax of `x` for the quantizer (input of `scale_update`).
    fn amax(
        &self,
        x: &Self::Tensor,
        bank: &Self::Bank,
        quantizer: usize,
    ) -> Result<(), EngineError> => gpu::amax::launch;

    /// One delayed-scaling call for quantizers `first..first+count`: every estimator's
    /// estimate and scale from the history (and the measured amax where needed), then push
    /// the amax.
    fn scale_update(
        &self,
        bank: &Self::Bank,
        first: usize,
        count: usize,
    ) -> Result<(), EngineError> => gpu::scale_update::launch;

    /// Empties every history and sets every scale to 1.0.
    fn reset(&self, bank: &Self::Bank) -> Result<(), EngineError> => gpu::scale_update::launch_reset;

    /// The statistics of `x` for the quantizer against its current estimates and scales.
    fn quant_stats(
        &self,
        x: &Self::Tensor,
        bank: &Self::Bank,
        quantizer: usize,
    ) -> Result<(), EngineError> => gpu::quant_stats::launch;

    /// The distribution of log2|x·s| (s: the quantizer's active scale) in quarter binades,
    /// into the bank's one histogram slot (replacing what it held); read back with the bank.
    fn histogram(
        &self,
        x: &Self::Tensor,
        bank: &Self::Bank,
        quantizer: usize,
    ) -> Result<(), EngineError> => gpu::histogram::launch;

    /// Reads the whole bank back.
    fn read_bank(&self, bank: &Self::Bank) -> Readback<BankSnapshot> => gpu::quant::read_bank;

    /// Reads several tensors and optionally a bank back with one copy (one submission on the
    /// GPU): what a training step needs at its end.
    fn read_step(
        &self,
        tensors: &[&Self::Tensor],
        bank: Option<&Self::Bank>,
    ) -> Readback<StepReadback> => gpu::quant::read_step;

    /// Restores histories, estimates and scales from a snapshot (checkpoint resume).
    fn restore_bank(&self, bank: &Self::Bank, snapshot: &BankSnapshot) -> Result<(), EngineError> => gpu::quant::restore_bank;

    /// Clipped straight-through estimator: `grad[i] = 0` where `|x[i]|` exceeds the
    /// quantizer's active estimate (same lengths).
    fn ste_mask(
        &self,
        x: &Self::Tensor,
        grad: &Self::Tensor,
        bank: &Self::Bank,
        quantizer: usize,
    ) -> Result<(), EngineError> => gpu::ste_mask::launch;
}
}

op_family! {
/// Op family: the layers of the Llama-style model, forward and backward.
pub trait ModelOps: Device {
    /// `out[n, :] = table[tokens[n], :]` (token ids stored as f32).
    fn embedding(
        &self,
        tokens: &Self::Tensor,
        table: &Self::Tensor,
        out: &Self::Tensor,
        channels: usize,
    ) -> Result<(), EngineError> => gpu::embedding::launch;

    /// `dtable[tokens[n], :] += dout[n, :]`, summed in token order.
    fn embedding_backward(
        &self,
        tokens: &Self::Tensor,
        dout: &Self::Tensor,
        dtable: &Self::Tensor,
        channels: usize,
    ) -> Result<(), EngineError> => gpu::embedding::launch_backward;

    /// RMSNorm of each row of `x` (`channels` wide); writes `out` and `rstd`.
    fn rmsnorm(
        &self,
        x: &Self::Tensor,
        weight: &Self::Tensor,
        out: &Self::Tensor,
        rstd: &Self::Tensor,
        eps: f32,
    ) -> Result<(), EngineError> => gpu::rmsnorm::launch;

    /// RMSNorm backward: overwrites `dx`, adds to `dweight`.
    #[allow(clippy::too_many_arguments)]
    fn rmsnorm_backward(
        &self,
        x: &Self::Tensor,
        weight: &Self::Tensor,
        rstd: &Self::Tensor,
        dy: &Self::Tensor,
        dx: &Self::Tensor,
        dweight: &Self::Tensor,
    ) -> Result<(), EngineError> => gpu::rmsnorm::launch_backward;

    /// Rotary embedding (rotate-half) with a [`rope_table`]; `inverse` rotates back
    /// (the backward pass).
    fn rope(
        &self,
        x: &Self::Tensor,
        table: &Self::Tensor,
        out: &Self::Tensor,
        shape: RopeShape,
        inverse: bool,
    ) -> Result<(), EngineError> => gpu::rope::launch;

    /// Causal grouped-query attention; writes `out` and the probabilities.
    fn attention(
        &self,
        q: &Self::Tensor,
        k: &Self::Tensor,
        v: &Self::Tensor,
        out: &Self::Tensor,
        probs: &Self::Tensor,
        shape: AttentionShape,
    ) -> Result<(), EngineError> => gpu::attention::launch;

    /// Causal grouped-query attention of new rows over a key/value cache (generation):
    /// row i of each sequence attends to cache positions `0..=past + i`; writes `out`
    /// (`scores` is scratch).
    fn attention_cached(
        &self,
        q: &Self::Tensor,
        k_cache: &Self::Tensor,
        v_cache: &Self::Tensor,
        out: &Self::Tensor,
        scores: &Self::Tensor,
        shape: CachedAttentionShape,
    ) -> Result<(), EngineError> => gpu::attention_cached::launch;

    /// Attention backward: overwrites `dq`, `dk`, `dv` (`dscores` is scratch of the
    /// probabilities' size).
    #[allow(clippy::too_many_arguments)]
    fn attention_backward(
        &self,
        q: &Self::Tensor,
        k: &Self::Tensor,
        v: &Self::Tensor,
        probs: &Self::Tensor,
        dout: &Self::Tensor,
        dscores: &Self::Tensor,
        dq: &Self::Tensor,
        dk: &Self::Tensor,
        dv: &Self::Tensor,
        shape: AttentionShape,
    ) -> Result<(), EngineError> => gpu::attention::launch_backward;

    /// `out = silu(g)·u`.
    fn swiglu(
        &self,
        g: &Self::Tensor,
        u: &Self::Tensor,
        out: &Self::Tensor,
    ) -> Result<(), EngineError> => gpu::swiglu::launch;

    /// SwiGLU backward: overwrites `dg` and `du`.
    fn swiglu_backward(
        &self,
        g: &Self::Tensor,
        u: &Self::Tensor,
        dy: &Self::Tensor,
        dg: &Self::Tensor,
        du: &Self::Tensor,
    ) -> Result<(), EngineError> => gpu::swiglu::launch_backward;

    /// Softmax cross-entropy per row (`vocab` wide): per-row losses and
    /// `dlogits = (softmax − onehot)·grad_scale` (targets stored as f32). An empty `dlogits`
    /// asks for the losses only (evaluation).
    fn cross_entropy(
        &self,
        logits: &Self::Tensor,
        targets: &Self::Tensor,
        losses: &Self::Tensor,
        dlogits: &Self::Tensor,
        grad_scale: f32,
    ) -> Result<(), EngineError> => gpu::cross_entropy::launch;
}
}

op_family! {
/// Op family: the optimizer (global gradient norm, AdamW).
pub trait OptimizerOps: Device {
    /// `out[slot] = Σ x²` in a fixed order.
    fn sum_squares(
        &self,
        x: &Self::Tensor,
        out: &Self::Tensor,
        slot: usize,
    ) -> Result<(), EngineError> => gpu::sum_squares::launch;

    /// AdamW on one tensor; the clip factor comes from the first `n_norms` entries of
    /// `norms` (sums of squares), read on the device.
    #[allow(clippy::too_many_arguments)]
    fn adamw(
        &self,
        param: &Self::Tensor,
        grad: &Self::Tensor,
        m: &Self::Tensor,
        v: &Self::Tensor,
        norms: &Self::Tensor,
        n_norms: usize,
        hyper: &AdamHyper,
    ) -> Result<(), EngineError> => gpu::adamw::launch;
}
}

/// Everything the trainer calls: the four op families on one device. Implemented for every
/// type that implements them (the CPU oracle and the GPU engine).
pub trait Backend: TensorOps + QuantOps + ModelOps + OptimizerOps {}

impl<B: TensorOps + QuantOps + ModelOps + OptimizerOps> Backend for B {}

/// The traits to import to call backend operations on a concrete backend.
pub mod prelude {
    pub use crate::{Backend, Device, ModelOps, OptimizerOps, QuantOps, TensorOps};
}

/// Checks that `len` is a whole number of `width`-wide rows; returns the row count.
pub(crate) fn rows_of(what: &str, len: usize, width: usize) -> Result<usize, EngineError> {
    if width == 0 || !len.is_multiple_of(width) {
        return Err(EngineError::Shape {
            op: what.into(),
            message: format!("{len} elements are not rows of {width}"),
        });
    }
    Ok(len / width)
}

/// Checks that `[at, at + len)` lies within a tensor of `have` elements.
pub(crate) fn within(what: &str, have: usize, at: usize, len: usize) -> Result<(), EngineError> {
    match at.checked_add(len) {
        Some(end) if end <= have => Ok(()),
        _ => Err(EngineError::Shape {
            op: what.into(),
            message: format!("elements {at}..{at}+{len} are outside a tensor of {have}"),
        }),
    }
}

/// Checks that two lengths agree.
pub(crate) fn same_len(what: &str, a: usize, b: usize) -> Result<(), EngineError> {
    if a == b {
        Ok(())
    } else {
        Err(EngineError::Shape {
            op: what.into(),
            message: format!("lengths {a} and {b} differ"),
        })
    }
}

/// Checks that a tensor has at least `need` elements.
pub(crate) fn at_least(what: &str, have: usize, need: usize) -> Result<(), EngineError> {
    if have < need {
        return Err(EngineError::Shape {
            op: what.into(),
            message: format!("{have} elements, needs {need}"),
        });
    }
    Ok(())
}

/// [`at_least`] for each `(name, have, need)`, named `"{what} {name}"`.
pub(crate) fn at_least_each(
    what: &str,
    checks: &[(&str, usize, usize)],
) -> Result<(), EngineError> {
    for (name, have, need) in checks {
        at_least(&format!("{what} {name}"), *have, *need)?;
    }
    Ok(())
}

/// Checks a matmul's operand sizes against the spec; shared by both backends.
pub(crate) fn check_matmul(
    spec: &MatmulSpec,
    a_len: usize,
    b_len: usize,
    c_len: usize,
) -> Result<(), EngineError> {
    let (sa, sb, sc) = spec.sizes();
    let need = [("A", sa, a_len), ("B", sb, b_len), ("C", sc, c_len)];
    for (name, per_batch, have) in need {
        let want = per_batch * spec.batch;
        if have < want {
            return Err(EngineError::Shape {
                op: "matmul".into(),
                message: format!(
                    "{}×{}×{} batch {} ({}): operand {name} has {have} elements, needs {want}",
                    spec.m,
                    spec.n,
                    spec.k,
                    spec.batch,
                    spec.layout.name()
                ),
            });
        }
    }
    Ok(())
}
