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
//! `attention`, `swiglu`, `cross_entropy`, `elementwise` (the model), `sum_squares`, `adamw`
//! (the optimizer), `ste_mask` and `copy` (bandwidth reference).
//!
//! The semantics of formats and scaling live in `hif8lab-format` and `hif8lab-scaling`; the
//! model and the training loop live in `hif8lab-train`, not here.

pub mod bank;
pub mod cpu;
mod error;
pub mod gpu;
pub mod readback;

pub use bank::{BankConfig, BankHistogram, BankSnapshot, QuantizerSnapshot, StatsSnapshot};
pub use error::EngineError;
pub use readback::Readback;

/// Operand layout of a matrix product (row-major storage throughout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `C = A·B`, A: M×K, B: K×N.
    NN,
    /// `C = A·Bᵀ`, A: M×K, B: N×K.
    NT,
    /// `C = Aᵀ·B`, A: K×M, B: K×N.
    TN,
}

impl Layout {
    /// All layouts.
    pub const ALL: [Layout; 3] = [Layout::NN, Layout::NT, Layout::TN];

    /// Short name (`nn`, `nt`, `tn`).
    pub fn name(self) -> &'static str {
        match self {
            Layout::NN => "nn",
            Layout::NT => "nt",
            Layout::TN => "tn",
        }
    }

    pub(crate) fn id(self) -> u32 {
        match self {
            Layout::NN => 0,
            Layout::NT => 1,
            Layout::TN => 2,
        }
    }
}

/// A (batched) matrix product `C[b] (+)= op(A[b])·op(B[b])`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulSpec {
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// Inner dimension.
    pub k: usize,
    /// Number of independent products; operands are packed one after another.
    pub batch: usize,
    /// Operand layout.
    pub layout: Layout,
    /// Add to C instead of overwriting it.
    pub accumulate: bool,
    /// Fake-quantize A on load with this bank quantizer's active scale.
    pub fuse_a: Option<usize>,
    /// Fake-quantize B on load with this bank quantizer's active scale.
    pub fuse_b: Option<usize>,
    /// Round every operand that is not fake-quantized to bf16 (RNE) on load: the
    /// emulated-bf16 baseline.
    pub round_bf16: bool,
}

impl MatmulSpec {
    /// A plain product of one batch, no accumulation, no fused quantization.
    pub fn new(m: usize, n: usize, k: usize, layout: Layout) -> Self {
        MatmulSpec {
            m,
            n,
            k,
            batch: 1,
            layout,
            accumulate: false,
            fuse_a: None,
            fuse_b: None,
            round_bf16: false,
        }
    }

    /// Elements of one A, one B and one C.
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.m * self.k, self.k * self.n, self.m * self.n)
    }
}

/// Shape of an attention call: q `[batch, seq, heads, head_dim]`, k and v
/// `[batch, seq, kv_heads, head_dim]`, probabilities `[batch, heads, seq, seq]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Sequences.
    pub batch: usize,
    /// Positions per sequence.
    pub seq: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (divides `heads`).
    pub kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
}

impl AttentionShape {
    /// Elements of q (and of the attention output).
    pub fn q_len(&self) -> usize {
        self.batch * self.seq * self.heads * self.head_dim
    }
    /// Elements of k (and of v).
    pub fn kv_len(&self) -> usize {
        self.batch * self.seq * self.kv_heads * self.head_dim
    }
    /// Elements of the probability (and score-gradient) buffer.
    pub fn probs_len(&self) -> usize {
        self.batch * self.heads * self.seq * self.seq
    }
    /// The score scale 1/sqrt(head_dim), computed once on the host for both backends.
    pub fn scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }
}

/// Shape of attention over a key/value cache (generation): `new` query rows at positions
/// `past..past + new` of each of `batch` sequences, q `[batch, new, heads, head_dim]`; the
/// caches k and v `[batch, capacity, kv_heads, head_dim]` hold positions `0..past + new`;
/// the score scratch is `[batch, heads, new, capacity]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedAttentionShape {
    /// Sequences.
    pub batch: usize,
    /// Positions already in the cache before these rows.
    pub past: usize,
    /// Query rows (new positions) per sequence.
    pub new: usize,
    /// Positions the caches hold per sequence (≥ past + new).
    pub capacity: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (divides `heads`).
    pub kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
}

impl CachedAttentionShape {
    /// Elements of q (and of the output).
    pub fn q_len(&self) -> usize {
        self.batch * self.new * self.heads * self.head_dim
    }
    /// Elements of each cache.
    pub fn cache_len(&self) -> usize {
        self.batch * self.capacity * self.kv_heads * self.head_dim
    }
    /// Elements of the score scratch.
    pub fn scores_len(&self) -> usize {
        self.batch * self.heads * self.new * self.capacity
    }
    /// The score scale 1/sqrt(head_dim) (as [`AttentionShape::scale`]).
    pub fn scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }
    /// Checks the shape itself (both backends).
    pub(crate) fn check(&self) -> Result<(), EngineError> {
        if self.heads == 0
            || self.kv_heads == 0
            || !self.heads.is_multiple_of(self.kv_heads)
            || self.head_dim == 0
            || self.past + self.new > self.capacity
        {
            return Err(EngineError::Shape(format!(
                "attention_cached: bad shape {self:?}"
            )));
        }
        Ok(())
    }
}

/// Shape of a rotary embedding call: x `[rows, heads, head_dim]`, position = row % seq.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RopeShape {
    /// Rows (batch · seq).
    pub rows: usize,
    /// Heads per row.
    pub heads: usize,
    /// Head dimension (even).
    pub head_dim: usize,
    /// Sequence length.
    pub seq: usize,
}

/// The cos/sin table of rotary embeddings, `[seq, head_dim/2, 2]`, computed once on the host
/// so both backends rotate by identical values.
///
/// It follows `transformers`' Llama rotary embedding step by step in f32 (the model's
/// definition the weights were trained with): `inv_freq_i = 1 / base^(2i/d)` and the angle
/// `p · inv_freq_i` rounded to f32 (at position 800 an angle's rounding is ~3e-5 rad, which
/// shows in the loss of long windows), then cos and sin of that angle, rounded once.
pub fn rope_table(seq: usize, head_dim: usize, theta: f64) -> Vec<f32> {
    rope_table_scaled(seq, head_dim, theta, None)
}

/// Llama-3-style rope scaling (`rope_type: llama3`): frequencies below the low-frequency
/// boundary are divided by `factor`, those above the high one kept, those between blended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Llama3Scaling {
    /// `factor`.
    pub factor: f64,
    /// `low_freq_factor`.
    pub low_freq_factor: f64,
    /// `high_freq_factor`.
    pub high_freq_factor: f64,
    /// `original_max_position_embeddings`.
    pub original_max_positions: f64,
}

/// The inverse frequencies of [`rope_table_scaled`], as `transformers` computes them in f32.
pub fn rope_inv_freq(head_dim: usize, theta: f64, llama3: Option<Llama3Scaling>) -> Vec<f32> {
    let half = head_dim / 2;
    (0..half)
        .map(|i| {
            // torch: 1.0 / (base ** (arange(0, d, 2).float() / d)), all in f32.
            let x = (2 * i) as f32 / head_dim as f32;
            let p = (theta as f32 as f64).powf(f64::from(x)) as f32;
            let inv = 1.0f32 / p;
            match llama3 {
                None => inv,
                Some(s) => {
                    // transformers' _compute_llama3_parameters (f32 tensors, f64 scalars).
                    let low_wavelen = s.original_max_positions / s.low_freq_factor;
                    let high_wavelen = s.original_max_positions / s.high_freq_factor;
                    let wavelen = 2.0f32 * std::f32::consts::PI / inv;
                    let scaled = if f64::from(wavelen) > low_wavelen {
                        inv / s.factor as f32
                    } else {
                        inv
                    };
                    let smooth = ((s.original_max_positions as f32 / wavelen)
                        - s.low_freq_factor as f32)
                        / (s.high_freq_factor as f32 - s.low_freq_factor as f32);
                    let medium =
                        f64::from(wavelen) >= high_wavelen && f64::from(wavelen) <= low_wavelen;
                    if medium {
                        (1.0 - smooth) * scaled / s.factor as f32 + smooth * scaled
                    } else {
                        scaled
                    }
                }
            }
        })
        .collect()
}

/// [`rope_table`] with optional Llama-3 rope scaling.
pub fn rope_table_scaled(
    seq: usize,
    head_dim: usize,
    theta: f64,
    llama3: Option<Llama3Scaling>,
) -> Vec<f32> {
    let inv = rope_inv_freq(head_dim, theta, llama3);
    let mut table = Vec::with_capacity(seq * inv.len() * 2);
    for p in 0..seq {
        for f in &inv {
            let angle = f64::from(p as f32 * f);
            table.push(angle.cos() as f32);
            table.push(angle.sin() as f32);
        }
    }
    table
}

/// Hyper-parameters of one AdamW update.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamHyper {
    /// Learning rate of this step.
    pub lr: f32,
    /// β1.
    pub beta1: f32,
    /// β2.
    pub beta2: f32,
    /// ε.
    pub eps: f32,
    /// Decoupled weight decay (0 for norms).
    pub weight_decay: f32,
    /// Step number, from 1 (bias correction).
    pub step: u64,
    /// Global gradient-norm clip (≤ 0: none).
    pub max_norm: f32,
}

impl AdamHyper {
    /// (1 − β1^t, 1 − β2^t), in f64 then rounded, identical for both backends.
    pub fn bias_corrections(&self) -> (f32, f32) {
        let t = self.step.max(1) as i32;
        (
            (1.0 - f64::from(self.beta1).powi(t)) as f32,
            (1.0 - f64::from(self.beta2).powi(t)) as f32,
        )
    }
}

/// What [`Backend::read_step`] returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepReadback {
    /// The tensors, in the order asked.
    pub tensors: Vec<Vec<f32>>,
    /// The bank, when asked.
    pub bank: Option<BankSnapshot>,
}

/// Who computes: shown in reports and benchmarks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendInfo {
    /// `cpu` or `gpu`.
    pub kind: &'static str,
    /// Adapter or CPU name.
    pub adapter: String,
    /// Graphics API (`Vulkan`, `Metal`, `Dx12`, `BrowserWebGpu`) or `native` for the CPU.
    pub api: String,
    /// Device type (`DiscreteGpu`, `IntegratedGpu`, `Cpu`, …).
    pub device_type: String,
    /// What the backend can hold, for refusing runs that cannot fit before allocating.
    pub memory: MemoryLimits,
}

/// Memory a backend can use, as far as it can be known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Bytes of host memory available now (`MemAvailable`, bounded by the cgroup limit), or
    /// the wasm32 address space; `None` where it cannot be read.
    pub host_bytes: Option<u64>,
    /// Memory of a separate device in bytes; `None` when there is none or the API does not
    /// say (wgpu does not report video memory).
    pub device_bytes: Option<u64>,
    /// Whether tensors live in host memory: the CPU backend, and adapters that run on the
    /// CPU (lavapipe, SwiftShader).
    pub device_in_host: bool,
    /// Largest single tensor in bytes (GPU: the smaller of `max_storage_buffer_binding_size`
    /// and `max_buffer_size`); `None` on the CPU.
    pub max_tensor_bytes: Option<u64>,
}

impl MemoryLimits {
    /// Where tensors live in host memory (the CPU backend): what the host has available.
    pub fn host() -> Self {
        MemoryLimits {
            host_bytes: host_memory_available(),
            device_bytes: None,
            device_in_host: true,
            max_tensor_bytes: None,
        }
    }
}

/// Host memory available to this process now, in bytes: `MemAvailable` of /proc/meminfo,
/// bounded by a cgroup v2 limit (`memory.max` − `memory.current`) where one is set; the 4 GiB
/// address space of wasm32; `None` elsewhere.
pub fn host_memory_available() -> Option<u64> {
    #[cfg(target_arch = "wasm32")]
    {
        Some(4 << 30)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
        let available = meminfo.lines().find_map(|l| {
            let kb = l.strip_prefix("MemAvailable:")?.trim().strip_suffix("kB")?;
            kb.trim().parse::<u64>().ok().map(|kb| kb * 1024)
        })?;
        let read = |name: &str| -> Option<u64> {
            std::fs::read_to_string(format!("/sys/fs/cgroup/{name}"))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        let cgroup =
            read("memory.max").map(|max| max.saturating_sub(read("memory.current").unwrap_or(0)));
        Some(cgroup.map_or(available, |c| c.min(available)))
    }
}

/// Counters of host/device interaction, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Command submissions.
    pub submits: u64,
    /// Times the host blocked waiting for the device.
    pub blocking_syncs: u64,
    /// Kernel launches (GPU dispatches; CPU operations that stand for one).
    pub dispatches: u64,
    /// Bind groups created (GPU; 0 on the CPU).
    pub bind_groups_created: u64,
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

/// Op family: tensors (create, read, write, copy, elementwise, matrix products).
pub trait TensorOps: Device {
    /// A tensor holding `data`.
    fn upload(&self, data: &[f32]) -> Result<Self::Tensor, EngineError>;

    /// A zero-filled tensor of `len` elements.
    fn zeros(&self, len: usize) -> Result<Self::Tensor, EngineError>;

    /// Elements in a tensor.
    fn len(&self, t: &Self::Tensor) -> usize;

    /// Overwrites a tensor's contents (`data.len()` must equal its length).
    fn write(&self, t: &Self::Tensor, data: &[f32]) -> Result<(), EngineError>;

    /// Reads a tensor back (asynchronously on the GPU).
    fn read(&self, t: &Self::Tensor) -> Readback<Vec<f32>>;

    /// `dst = src` (same lengths).
    fn copy(&self, src: &Self::Tensor, dst: &Self::Tensor) -> Result<(), EngineError>;

    /// `dst[dst_at..dst_at + len] = src[src_at..src_at + len]` (a key/value cache append,
    /// a row taken out of a batch).
    fn copy_range(
        &self,
        src: &Self::Tensor,
        src_at: usize,
        dst: &Self::Tensor,
        dst_at: usize,
        len: usize,
    ) -> Result<(), EngineError>;

    /// A matrix product; fused quantization reads scales from `bank`.
    fn matmul(
        &self,
        a: &Self::Tensor,
        b: &Self::Tensor,
        c: &Self::Tensor,
        spec: &MatmulSpec,
        bank: Option<&Self::Bank>,
    ) -> Result<(), EngineError>;

    /// Sets every element to zero.
    fn fill_zero(&self, t: &Self::Tensor) -> Result<(), EngineError>;

    /// `dst += src`.
    fn add_inplace(&self, dst: &Self::Tensor, src: &Self::Tensor) -> Result<(), EngineError>;

    /// `dst *= factor`.
    fn scale_inplace(&self, dst: &Self::Tensor, factor: f32) -> Result<(), EngineError>;
}

/// Op family: the quantizer bank (fake quantization, amax, delayed scaling, statistics).
pub trait QuantOps: Device {
    /// A quantizer bank for `config`: empty histories, every scale 1.0.
    fn new_bank(&self, config: &BankConfig) -> Result<Self::Bank, EngineError>;

    /// Sets every estimator's current scale (`[quantizer][estimator]`, flattened); the
    /// estimate in effect becomes the amax each scale aims at.
    fn set_scales(&self, bank: &Self::Bank, scales: &[f32]) -> Result<(), EngineError>;

    /// `out = qdq(x·s)/s` with `s` the quantizer's active scale.
    fn qdq(
        &self,
        x: &Self::Tensor,
        out: &Self::Tensor,
        bank: &Self::Bank,
        quantizer: usize,
    ) -> Result<(), EngineError>;

    /// Measures this call's amax of `x` for the quantizer (input of `scale_update`).
    fn amax(
        &self,
        x: &Self::Tensor,
        bank: &Self::Bank,
        quantizer: usize,
    ) -> Result<(), EngineError>;

    /// One delayed-scaling call for quantizers `first..first+count`: every estimator's
    /// estimate and scale from the history (and the measured amax where needed), then push
    /// the amax.
    fn scale_update(
        &self,
        bank: &Self::Bank,
        first: usize,
        count: usize,
    ) -> Result<(), EngineError>;

    /// Empties every history and sets every scale to 1.0.
    fn reset(&self, bank: &Self::Bank) -> Result<(), EngineError>;

    /// The statistics of `x` for the quantizer against its current estimates and scales.
    fn quant_stats(
        &self,
        x: &Self::Tensor,
        bank: &Self::Bank,
        quantizer: usize,
    ) -> Result<(), EngineError>;

    /// The distribution of log2|x·s| (s: the quantizer's active scale) in quarter binades,
    /// into the bank's one histogram slot (replacing what it held); read back with the bank.
    fn histogram(
        &self,
        x: &Self::Tensor,
        bank: &Self::Bank,
        quantizer: usize,
    ) -> Result<(), EngineError>;

    /// Reads the whole bank back.
    fn read_bank(&self, bank: &Self::Bank) -> Readback<BankSnapshot>;

    /// Reads several tensors and optionally a bank back with one copy (one submission on the
    /// GPU): what a training step needs at its end.
    fn read_step(
        &self,
        tensors: &[&Self::Tensor],
        bank: Option<&Self::Bank>,
    ) -> Readback<StepReadback>;

    /// Restores histories, estimates and scales from a snapshot (checkpoint resume).
    fn restore_bank(&self, bank: &Self::Bank, snapshot: &BankSnapshot) -> Result<(), EngineError>;

    /// Clipped straight-through estimator: `grad[i] = 0` where `|x[i]|` exceeds the
    /// quantizer's active estimate (same lengths).
    fn ste_mask(
        &self,
        x: &Self::Tensor,
        grad: &Self::Tensor,
        bank: &Self::Bank,
        quantizer: usize,
    ) -> Result<(), EngineError>;
}

/// Op family: the layers of the Llama-style model, forward and backward.
pub trait ModelOps: Device {
    /// `out[n, :] = table[tokens[n], :]` (token ids stored as f32).
    fn embedding(
        &self,
        tokens: &Self::Tensor,
        table: &Self::Tensor,
        out: &Self::Tensor,
        channels: usize,
    ) -> Result<(), EngineError>;

    /// `dtable[tokens[n], :] += dout[n, :]`, summed in token order.
    fn embedding_backward(
        &self,
        tokens: &Self::Tensor,
        dout: &Self::Tensor,
        dtable: &Self::Tensor,
        channels: usize,
    ) -> Result<(), EngineError>;

    /// RMSNorm of each row of `x` (`channels` wide); writes `out` and `rstd`.
    fn rmsnorm(
        &self,
        x: &Self::Tensor,
        weight: &Self::Tensor,
        out: &Self::Tensor,
        rstd: &Self::Tensor,
        eps: f32,
    ) -> Result<(), EngineError>;

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
    ) -> Result<(), EngineError>;

    /// Rotary embedding (rotate-half) with a [`rope_table`]; `inverse` rotates back
    /// (the backward pass).
    fn rope(
        &self,
        x: &Self::Tensor,
        table: &Self::Tensor,
        out: &Self::Tensor,
        shape: RopeShape,
        inverse: bool,
    ) -> Result<(), EngineError>;

    /// Causal grouped-query attention; writes `out` and the probabilities.
    fn attention(
        &self,
        q: &Self::Tensor,
        k: &Self::Tensor,
        v: &Self::Tensor,
        out: &Self::Tensor,
        probs: &Self::Tensor,
        shape: AttentionShape,
    ) -> Result<(), EngineError>;

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
    ) -> Result<(), EngineError>;

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
    ) -> Result<(), EngineError>;

    /// `out = silu(g)·u`.
    fn swiglu(
        &self,
        g: &Self::Tensor,
        u: &Self::Tensor,
        out: &Self::Tensor,
    ) -> Result<(), EngineError>;

    /// SwiGLU backward: overwrites `dg` and `du`.
    fn swiglu_backward(
        &self,
        g: &Self::Tensor,
        u: &Self::Tensor,
        dy: &Self::Tensor,
        dg: &Self::Tensor,
        du: &Self::Tensor,
    ) -> Result<(), EngineError>;

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
    ) -> Result<(), EngineError>;
}

/// Op family: the optimizer (global gradient norm, AdamW).
pub trait OptimizerOps: Device {
    /// `out[slot] = Σ x²` in a fixed order.
    fn sum_squares(
        &self,
        x: &Self::Tensor,
        out: &Self::Tensor,
        slot: usize,
    ) -> Result<(), EngineError>;

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
    ) -> Result<(), EngineError>;
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
        return Err(EngineError::Shape(format!(
            "{what}: {len} elements are not rows of {width}"
        )));
    }
    Ok(len / width)
}

/// Checks that `[at, at + len)` lies within a tensor of `have` elements.
pub(crate) fn within(what: &str, have: usize, at: usize, len: usize) -> Result<(), EngineError> {
    match at.checked_add(len) {
        Some(end) if end <= have => Ok(()),
        _ => Err(EngineError::Shape(format!(
            "{what}: elements {at}..{at}+{len} are outside a tensor of {have}"
        ))),
    }
}

/// Checks that two lengths agree.
pub(crate) fn same_len(what: &str, a: usize, b: usize) -> Result<(), EngineError> {
    if a == b {
        Ok(())
    } else {
        Err(EngineError::Shape(format!(
            "{what}: lengths {a} and {b} differ"
        )))
    }
}

/// Checks that a tensor has at least `need` elements.
pub(crate) fn at_least(what: &str, have: usize, need: usize) -> Result<(), EngineError> {
    if have < need {
        return Err(EngineError::Shape(format!(
            "{what}: {have} elements, needs {need}"
        )));
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
            return Err(EngineError::Shape(format!(
                "matmul {}×{}×{} batch {} ({}): operand {name} has {have} elements, needs {want}",
                spec.m,
                spec.n,
                spec.k,
                spec.batch,
                spec.layout.name()
            )));
        }
    }
    Ok(())
}
