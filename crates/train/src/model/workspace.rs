//! The activations and gradients of one step, allocated once per trainer: per block and
//! for the whole model.

use super::*;

/// Saved activations of one block.
pub(crate) struct BlockActs<T> {
    pub(crate) x: T,
    pub(crate) h1: T,
    pub(crate) rstd1: T,
    pub(crate) q: T,
    pub(crate) k: T,
    pub(crate) v: T,
    pub(crate) probs: T,
    pub(crate) att: T,
    pub(crate) x2: T,
    pub(crate) h2: T,
    pub(crate) rstd2: T,
    pub(crate) g: T,
    pub(crate) u: T,
    pub(crate) s: T,
}

/// Activations and scratch of one micro-batch.
pub struct Workspace<T> {
    pub(crate) tokens: T,
    pub(crate) targets: T,
    pub(crate) blocks: Vec<BlockActs<T>>,
    pub(crate) xf: T,
    pub(crate) hf: T,
    pub(crate) rstdf: T,
    /// Per-row losses of the last forward pass.
    pub losses: T,
    /// Logits [N, V] of the last forward pass.
    pub logits: T,
    pub(crate) dlogits: T,
    pub(crate) dres: T,
    pub(crate) dh: T,
    pub(crate) dtmp: T,
    pub(crate) dq: T,
    pub(crate) dk: T,
    pub(crate) dv: T,
    pub(crate) dq_r: T,
    pub(crate) dk_r: T,
    pub(crate) datt: T,
    pub(crate) dscores: T,
    pub(crate) dg: T,
    pub(crate) du: T,
    pub(crate) ds: T,
    pub(crate) q_pre: T,
    pub(crate) k_pre: T,
    pub(crate) rope_table: T,
    /// Weight-gradient scratch of the clipped STE, one per quantizable weight size.
    pub weight_scratch: Vec<T>,
}

impl<T> Workspace<T> {
    /// Allocates the activations of a micro-batch of `batch` sequences.
    pub fn new<B: Backend<Tensor = T>>(
        b: &B,
        m: &ModelConfig,
        batch: usize,
    ) -> Result<Self, EngineError> {
        let n = batch * m.context;
        let (c, f, v, hd) = (m.d_model, m.d_ff, m.vocab, m.head_dim());
        let (qd, kvd) = (m.heads * hd, m.kv_heads * hd);
        let probs = batch * m.heads * m.context * m.context;
        let z = |len: usize| b.zeros(len);
        let blocks = (0..m.layers)
            .map(|_| {
                Ok(BlockActs {
                    x: z(n * c)?,
                    h1: z(n * c)?,
                    rstd1: z(n)?,
                    q: z(n * qd)?,
                    k: z(n * kvd)?,
                    v: z(n * kvd)?,
                    probs: z(probs)?,
                    att: z(n * qd)?,
                    x2: z(n * c)?,
                    h2: z(n * c)?,
                    rstd2: z(n)?,
                    g: z(n * f)?,
                    u: z(n * f)?,
                    s: z(n * f)?,
                })
            })
            .collect::<Result<Vec<_>, EngineError>>()?;
        Ok(Workspace {
            tokens: z(n)?,
            targets: z(n)?,
            blocks,
            xf: z(n * c)?,
            hf: z(n * c)?,
            rstdf: z(n)?,
            logits: z(n * v)?,
            losses: z(n)?,
            dlogits: z(n * v)?,
            dres: z(n * c)?,
            dh: z(n * c)?,
            dtmp: z(n * c)?,
            dq: z(n * qd)?,
            dk: z(n * kvd)?,
            dv: z(n * kvd)?,
            dq_r: z(n * qd)?,
            dk_r: z(n * kvd)?,
            datt: z(n * qd)?,
            dscores: z(probs)?,
            dg: z(n * f)?,
            du: z(n * f)?,
            ds: z(n * f)?,
            q_pre: z(n * qd)?,
            k_pre: z(n * kvd)?,
            rope_table: b.upload(&m.rope_table(m.context))?,
            weight_scratch: Vec::new(),
        })
    }

    /// Allocates the clipped STE's weight-gradient scratch (MLP and attention weight sizes).
    pub fn with_weight_scratch<B: Backend<Tensor = T>>(
        mut self,
        b: &B,
        m: &ModelConfig,
    ) -> Result<Self, EngineError> {
        let hd = m.head_dim();
        let mut sizes = vec![
            m.d_ff * m.d_model,
            m.heads * hd * m.d_model,
            m.kv_heads * hd * m.d_model,
        ];
        sizes.sort_unstable();
        sizes.dedup();
        self.weight_scratch = sizes
            .into_iter()
            .map(|n| b.zeros(n))
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// Loads a micro-batch's tokens and targets.
    pub fn load<B: Backend<Tensor = T>>(
        &self,
        b: &B,
        tokens: &[f32],
        targets: &[f32],
    ) -> Result<(), EngineError> {
        b.write(&self.tokens, tokens)?;
        b.write(&self.targets, targets)
    }
}
