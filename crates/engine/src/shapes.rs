//! The shapes and hyperparameters the ops take: matrix layouts, attention and RoPE shapes
//! (with the RoPE tables), AdamW's hyperparameters.

use super::*;

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
    /// On the CPU, run the product on the bf16 dot-product units where the CPU has them and
    /// both operands are exact in bf16 (fake-quantized: their codes `Q(x·s)`, the scale
    /// product `1/(s_a·s_b)` applied once to the f32 result; or rounded, with
    /// `round_bf16`): the same products, another order of f32 accumulation. Otherwise, and on
    /// the GPU, the f32 product.
    pub bf16_units: bool,
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
            bf16_units: false,
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
            return Err(EngineError::Shape {
                op: "attention_cached".into(),
                message: format!("bad shape {self:?}"),
            });
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
