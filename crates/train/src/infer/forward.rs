//! The inference forward pass: activations for exactly the rows of one call (no padding, one
//! set reused by every layer, nothing kept for a backward pass), and per-layer key/value
//! caches for generation (a prompt's rows once, then one row per token).
//!
//! Data flow of one call over `rows = batch · n` positions (`past` of them already cached):
//! tokens → embedding → per block: RMSNorm → Q/K/V → RoPE at positions past.. → (cache
//! append) → attention → O + residual → RMSNorm → SwiGLU MLP + residual → final RMSNorm →
//! logits of every row, or of the last row only.

use hif8lab_engine::{AttentionShape, Backend, CachedAttentionShape, EngineError, RopeShape};
use hif8lab_scaling::Module;

use crate::config::ModelConfig;
use crate::model::{FakeQuantLinear, LinearQuant, Params, QuantPlan};

/// Activations of one call shape (`batch` sequences of `n` new positions).
pub(crate) struct Acts<T> {
    pub batch: usize,
    pub n: usize,
    pub tokens: T,
    x: T,
    h: T,
    rstd: T,
    q_pre: T,
    q: T,
    k_pre: T,
    k: T,
    v: T,
    att: T,
    x2: T,
    g: T,
    u: T,
    s: T,
    /// Attention probabilities / scores scratch.
    scores: T,
    /// RoPE rows of the positions past..past + n (generation).
    rope_now: T,
    /// The last row's final hidden state (generation).
    h_last: T,
    /// Logits of every row (`all_logits`), else of the last row.
    pub logits: T,
    pub targets: T,
    pub losses: T,
    dlogits: T,
}

/// Bytes the activations of a call shape take (f32), the memory check's term.
pub(crate) fn acts_bytes(
    m: &ModelConfig,
    batch: usize,
    n: usize,
    capacity: usize,
    all_logits: bool,
) -> u64 {
    let rows = (batch * n) as u64;
    let (c, f, v) = (m.d_model as u64, m.d_ff as u64, m.vocab as u64);
    let hd = m.head_dim() as u64;
    let (qd, kvd) = (m.heads as u64 * hd, m.kv_heads as u64 * hd);
    let per_row = 4 * c + 2 + 3 * qd + 3 * kvd + 3 * f;
    let logit_rows = if all_logits { rows } else { 1 };
    let scores = batch as u64 * m.heads as u64 * n as u64 * capacity as u64;
    4 * (rows * per_row + scores + n as u64 * hd + c + logit_rows * v + 2 * rows)
}

impl<T> Acts<T> {
    /// Activations for `batch` × `n` rows over caches of `capacity` positions; logits of every
    /// row when `all_logits` (eval), else of the last row (generation).
    pub(crate) fn new<B: Backend<Tensor = T>>(
        b: &B,
        m: &ModelConfig,
        batch: usize,
        n: usize,
        capacity: usize,
        all_logits: bool,
    ) -> Result<Self, EngineError> {
        let rows = batch * n;
        let (c, f, v, hd) = (m.d_model, m.d_ff, m.vocab, m.head_dim());
        let (qd, kvd) = (m.heads * hd, m.kv_heads * hd);
        let z = |len: usize| b.zeros(len);
        let logit_rows = if all_logits { rows } else { 1 };
        Ok(Acts {
            batch,
            n,
            tokens: z(rows)?,
            x: z(rows * c)?,
            h: z(rows * c)?,
            rstd: z(rows)?,
            q_pre: z(rows * qd)?,
            q: z(rows * qd)?,
            k_pre: z(rows * kvd)?,
            k: z(rows * kvd)?,
            v: z(rows * kvd)?,
            att: z(rows * qd)?,
            x2: z(rows * c)?,
            g: z(rows * f)?,
            u: z(rows * f)?,
            s: z(rows * f)?,
            scores: z(batch * m.heads * n * capacity)?,
            rope_now: z(n * hd)?,
            h_last: z(c)?,
            logits: z(logit_rows * v)?,
            targets: z(if all_logits { rows } else { 0 })?,
            losses: z(if all_logits { rows } else { 0 })?,
            // Losses only: no gradient of the logits (an empty tensor asks for none).
            dlogits: z(0)?,
        })
    }
}

/// Keys and values of every layer for one sequence: `[capacity, kv_heads · head_dim]` each.
pub(crate) struct KvCache<T> {
    k: Vec<T>,
    v: Vec<T>,
    /// Positions the caches can hold.
    pub capacity: usize,
    /// Positions filled.
    pub len: usize,
}

impl<T> KvCache<T> {
    /// Empty caches of `capacity` positions.
    pub(crate) fn new<B: Backend<Tensor = T>>(
        b: &B,
        m: &ModelConfig,
        capacity: usize,
    ) -> Result<Self, EngineError> {
        let kvd = m.kv_heads * m.head_dim();
        let mut k = Vec::with_capacity(m.layers);
        let mut v = Vec::with_capacity(m.layers);
        for _ in 0..m.layers {
            k.push(b.zeros(capacity * kvd)?);
            v.push(b.zeros(capacity * kvd)?);
        }
        Ok(KvCache {
            k,
            v,
            capacity,
            len: 0,
        })
    }
}

/// Bytes of a [`KvCache`].
pub(crate) fn cache_bytes(m: &ModelConfig, capacity: usize) -> u64 {
    4 * 2 * m.layers as u64 * capacity as u64 * (m.kv_heads * m.head_dim()) as u64
}

/// What one forward call needs besides the tensors.
pub(crate) struct Pass<'a, B: Backend> {
    pub b: &'a B,
    pub m: &'a ModelConfig,
    pub params: &'a Params<B::Tensor>,
    /// The RoPE table of every position the model may see (`[positions, head_dim]`).
    pub rope_table: &'a B::Tensor,
    pub plan: &'a QuantPlan,
    pub bank: Option<&'a B::Bank>,
    /// Windows through the workgroup attention kernel (`attention_cached` with nothing
    /// cached): on a GPU, the training kernel's one invocation per query row lost accuracy
    /// from about 500 positions on lavapipe; the CPU keeps its vectorized attention.
    pub windows_as_cached: bool,
    /// When set, the residual stream is read after every block and the pass stops at the
    /// first block whose output is not finite, noting it here (finding where a model
    /// overflows; never on the normal path).
    pub watch: Option<&'a std::cell::Cell<Option<usize>>>,
}

impl<B: Backend> Pass<'_, B> {
    fn quant(&self, block: usize, module: Module) -> LinearQuant {
        match self.bank {
            Some(_) => self.plan.get(block, module),
            None => LinearQuant::default(),
        }
    }

    /// The fake-quantized linear layer of this pass (no bf16 rounding, no histogram):
    /// `y [rows, cout] = Q_A(x [rows, cin]) · Q_W(w [cout, cin])ᵀ`, activations sized to the
    /// call, so a quantizer measures exactly its rows.
    fn fql(&self) -> FakeQuantLinear<'_, B> {
        FakeQuantLinear {
            b: self.b,
            bank: self.bank,
            bf16: false,
            bf16_units: false,
            histogram: None,
        }
    }

    /// Block `l`'s attention over `a.q`, `a.k`, `a.v` into `a.att`: through the cache (its
    /// rows from `past` written first), or each sequence from position 0.
    fn attend(
        &self,
        a: &Acts<B::Tensor>,
        l: usize,
        cache: Option<&mut KvCache<B::Tensor>>,
        past: usize,
    ) -> Result<(), EngineError> {
        let (b, m) = (self.b, self.m);
        let hd = m.head_dim();
        let (n, kvd) = (a.n, m.kv_heads * hd);
        match cache {
            Some(kv) => {
                b.copy_range(&a.k, 0, &kv.k[l], past * kvd, n * kvd)?;
                b.copy_range(&a.v, 0, &kv.v[l], past * kvd, n * kvd)?;
                let shape = CachedAttentionShape {
                    batch: 1,
                    past,
                    new: n,
                    capacity: kv.capacity,
                    heads: m.heads,
                    kv_heads: m.kv_heads,
                    head_dim: hd,
                };
                b.attention_cached(&a.q, &kv.k[l], &kv.v[l], &a.att, &a.scores, shape)?;
            }
            None if self.windows_as_cached => {
                let shape = CachedAttentionShape {
                    batch: a.batch,
                    past: 0,
                    new: n,
                    capacity: n,
                    heads: m.heads,
                    kv_heads: m.kv_heads,
                    head_dim: hd,
                };
                b.attention_cached(&a.q, &a.k, &a.v, &a.att, &a.scores, shape)?;
            }
            None => {
                let shape = AttentionShape {
                    batch: a.batch,
                    seq: n,
                    heads: m.heads,
                    kv_heads: m.kv_heads,
                    head_dim: hd,
                };
                b.attention(&a.q, &a.k, &a.v, &a.att, &a.scores, shape)?;
            }
        }
        Ok(())
    }

    /// The forward pass over `a`'s rows (tokens already written to `a.tokens`). With a
    /// cache (one sequence), the rows are positions `cache.len..` and are appended to it;
    /// without, each of the `a.batch` sequences starts at position 0. Logits land in
    /// `a.logits` (every row or the last, as `a` was made); with targets written, the
    /// per-row losses in `a.losses`.
    pub(crate) fn forward(
        &self,
        a: &Acts<B::Tensor>,
        mut cache: Option<&mut KvCache<B::Tensor>>,
        all_logits: bool,
    ) -> Result<(), EngineError> {
        let (b, m, p) = (self.b, self.m, self.params);
        let (c, hd) = (m.d_model, m.head_dim());
        let (n, rows) = (a.n, a.batch * a.n);
        let past = cache.as_ref().map_or(0, |k| k.len);
        if let Some(k) = &cache
            && (a.batch != 1 || past + n > k.capacity)
        {
            return Err(EngineError::Shape {
                op: "kv cache".into(),
                message: format!(
                    "{past} + {n} positions of batch {} exceed its {} positions",
                    a.batch, k.capacity
                ),
            });
        }
        // RoPE of positions past..past + n: the table's rows from `past`.
        let table = if past == 0 {
            self.rope_table
        } else {
            b.copy_range(self.rope_table, past * hd, &a.rope_now, 0, n * hd)?;
            &a.rope_now
        };
        b.embedding(&a.tokens, &p.wte, &a.x, c)?;
        for l in 0..p.blocks.len() {
            self.block(a, l, table, cache.as_deref_mut(), past)?;
            if let Some(watch) = self.watch {
                b.flush();
                if b.read(&a.x).wait()?.iter().any(|v| !v.is_finite()) {
                    watch.set(Some(l));
                    return Ok(());
                }
            }
        }
        if let Some(kv) = cache {
            kv.len += n;
        }
        b.rmsnorm(&a.x, &p.final_norm, &a.h, &a.rstd, m.norm_eps)?;
        let none = LinearQuant::default();
        if all_logits {
            self.fql()
                .forward(&a.h, p.head(), &a.logits, (rows, c, m.vocab), none)?;
            if b.len(&a.targets) == rows {
                b.cross_entropy(&a.logits, &a.targets, &a.losses, &a.dlogits, 1.0)?;
            }
        } else {
            b.copy_range(&a.h, (rows - 1) * c, &a.h_last, 0, c)?;
            self.fql()
                .forward(&a.h_last, p.head(), &a.logits, (1, c, m.vocab), none)?;
        }
        Ok(())
    }

    /// Block `l` of the forward pass over `a`'s rows (`table`: the rope rows of positions
    /// `past..`; the cache, when given, gets this block's keys and values).
    fn block(
        &self,
        a: &Acts<B::Tensor>,
        l: usize,
        table: &B::Tensor,
        cache: Option<&mut KvCache<B::Tensor>>,
        past: usize,
    ) -> Result<(), EngineError> {
        let (b, m, w) = (self.b, self.m, &self.params.blocks[l]);
        let (c, f, hd) = (m.d_model, m.d_ff, m.head_dim());
        let (qd, kvd) = (m.heads * hd, m.kv_heads * hd);
        let (n, rows) = (a.n, a.batch * a.n);
        let rope = |heads| RopeShape {
            rows,
            heads,
            head_dim: hd,
            seq: n,
        };
        b.rmsnorm(&a.x, &w.attn_norm, &a.h, &a.rstd, m.norm_eps)?;
        self.fql().forward(
            &a.h,
            &w.wq,
            &a.q_pre,
            (rows, c, qd),
            self.quant(l, Module::Q),
        )?;
        self.fql().forward(
            &a.h,
            &w.wk,
            &a.k_pre,
            (rows, c, kvd),
            self.quant(l, Module::K),
        )?;
        self.fql()
            .forward(&a.h, &w.wv, &a.v, (rows, c, kvd), self.quant(l, Module::V))?;
        b.rope(&a.q_pre, table, &a.q, rope(m.heads), false)?;
        b.rope(&a.k_pre, table, &a.k, rope(m.kv_heads), false)?;
        self.attend(a, l, cache, past)?;
        self.fql().forward(
            &a.att,
            &w.wo,
            &a.x2,
            (rows, qd, c),
            self.quant(l, Module::O),
        )?;
        b.add_inplace(&a.x2, &a.x)?;
        b.rmsnorm(&a.x2, &w.mlp_norm, &a.h, &a.rstd, m.norm_eps)?;
        self.fql().forward(
            &a.h,
            &w.w_gate,
            &a.g,
            (rows, c, f),
            self.quant(l, Module::Gate),
        )?;
        self.fql()
            .forward(&a.h, &w.w_up, &a.u, (rows, c, f), self.quant(l, Module::Up))?;
        b.swiglu(&a.g, &a.u, &a.s)?;
        self.fql().forward(
            &a.s,
            &w.w_down,
            &a.x,
            (rows, f, c),
            self.quant(l, Module::Down),
        )?;
        b.add_inplace(&a.x, &a.x2)?;
        Ok(())
    }
}
