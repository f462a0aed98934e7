//! The model: a compact Llama (pre-norm blocks of RMSNorm → GQA attention with RoPE →
//! residual, RMSNorm → SwiGLU MLP → residual; final RMSNorm; untied LM head), with explicit
//! forward and backward passes on any [`Backend`], llm.c style, and the W8A8(G8) fake-quantized
//! linear layer of SPEC.md §4 wired through the quantizer bank.
//!
//! Shapes: N = batch·context rows; x: [N, C]; q: [N, H, D]; k, v: [N, Hkv, D]; MLP: [N, F].

use hif8lab_engine::{AttentionShape, Backend, EngineError, Layout, MatmulSpec, RopeShape};
use hif8lab_scaling::{Module, QuantizerId, Role};

use crate::config::{ModelConfig, QatConfig};
use crate::rng::Rng;

mod plan;

pub use plan::{LinearQuant, QuantPlan};

mod workspace;
pub use workspace::*;

/// The parameters of one block (Hugging Face Llama names in `models::checkpoint`).
pub struct Block<T> {
    /// input_layernorm `[C]`.
    pub attn_norm: T,
    /// q_proj [H·D, C].
    pub wq: T,
    /// k_proj [Hkv·D, C].
    pub wk: T,
    /// v_proj [Hkv·D, C].
    pub wv: T,
    /// o_proj [C, H·D].
    pub wo: T,
    /// post_attention_layernorm `[C]`.
    pub mlp_norm: T,
    /// gate_proj [F, C].
    pub w_gate: T,
    /// up_proj [F, C].
    pub w_up: T,
    /// down_proj [C, F].
    pub w_down: T,
}

/// All parameters (or gradients, or optimizer moments: the same shapes).
pub struct Params<T> {
    /// embed_tokens [V, C].
    pub wte: T,
    /// The blocks.
    pub blocks: Vec<Block<T>>,
    /// Final norm `[C]`.
    pub final_norm: T,
    /// lm_head [V, C]; `None` when tied to `wte` ([`ModelConfig::tie_embeddings`]).
    pub lm_head: Option<T>,
}

impl<T> Params<T> {
    /// The LM head: `lm_head`, or the token embedding when they are tied.
    pub fn head(&self) -> &T {
        self.lm_head.as_ref().unwrap_or(&self.wte)
    }
}

/// Trainable parameters of a model of shape `m` (a tied head counted once).
pub fn parameters(m: &ModelConfig) -> usize {
    param_specs(m)
        .iter()
        .map(|(_, shape, _)| shape.iter().product::<usize>())
        .sum()
}

/// Model FLOPs of one optimizer step of `c`: 6 per parameter per token (forward 2, backward
/// 4; a tied head counted once), the measure `bench train` reports throughput in.
pub fn flops_per_step(c: &crate::config::RunConfig) -> f64 {
    6.0 * parameters(&c.model) as f64 * c.tokens_per_step() as f64
}

/// Name, shape and whether weight decay applies, for every parameter in a fixed order.
pub fn param_specs(m: &ModelConfig) -> Vec<(String, Vec<usize>, bool)> {
    let (c, f, v) = (m.d_model, m.d_ff, m.vocab);
    let (hd, kvd) = (m.heads * m.head_dim(), m.kv_heads * m.head_dim());
    let mut specs = vec![("model.embed_tokens.weight".to_owned(), vec![v, c], true)];
    for i in 0..m.layers {
        let p = |n: &str| format!("model.layers.{i}.{n}");
        specs.extend([
            (p("input_layernorm.weight"), vec![c], false),
            (p("self_attn.q_proj.weight"), vec![hd, c], true),
            (p("self_attn.k_proj.weight"), vec![kvd, c], true),
            (p("self_attn.v_proj.weight"), vec![kvd, c], true),
            (p("self_attn.o_proj.weight"), vec![c, hd], true),
            (p("post_attention_layernorm.weight"), vec![c], false),
            (p("mlp.gate_proj.weight"), vec![f, c], true),
            (p("mlp.up_proj.weight"), vec![f, c], true),
            (p("mlp.down_proj.weight"), vec![c, f], true),
        ]);
    }
    specs.push(("model.norm.weight".to_owned(), vec![c], false));
    if !m.tie_embeddings {
        specs.push(("lm_head.weight".to_owned(), vec![v, c], true));
    }
    specs
}

/// Whether `present`, the block numbers a file's weights belong to, are exactly
/// `0..layers`: what a layer count read from a file is checked against before any list is
/// sized by it (a count of 2^31 beside two blocks of weights would build 2^31 entries).
pub fn blocks_are(present: &std::collections::BTreeSet<usize>, layers: usize) -> bool {
    present.len() == layers && present.last().map_or(0, |l| l + 1) == layers
}

/// The index in [`Params::list`] of block `l`'s tensor `k` (0 attn_norm, 1 wq, 2 wk, 3 wv,
/// 4 wo, 5 mlp_norm, 6 gate, 7 up, 8 down); `block_slot(layers, 0)` is the final norm's, the
/// next the untied head's. The embedding's is 0.
pub fn block_slot(l: usize, k: usize) -> usize {
    1 + 9 * l + k
}

impl<T> Params<T> {
    /// Builds the structure from tensors in [`param_specs`] order (no `lm_head` after the
    /// final norm: tied embeddings).
    pub fn from_list(list: Vec<T>, layers: usize) -> Self {
        let mut it = list.into_iter();
        let mut next = || it.next().expect("one tensor per parameter spec");
        let wte = next();
        let blocks = (0..layers)
            .map(|_| Block {
                attn_norm: next(),
                wq: next(),
                wk: next(),
                wv: next(),
                wo: next(),
                mlp_norm: next(),
                w_gate: next(),
                w_up: next(),
                w_down: next(),
            })
            .collect();
        let final_norm = next();
        let lm_head = it.next();
        Params {
            wte,
            blocks,
            final_norm,
            lm_head,
        }
    }

    /// Every tensor in [`param_specs`] order.
    pub fn list(&self) -> Vec<&T> {
        let mut v = vec![&self.wte];
        for b in &self.blocks {
            v.extend([
                &b.attn_norm,
                &b.wq,
                &b.wk,
                &b.wv,
                &b.wo,
                &b.mlp_norm,
                &b.w_gate,
                &b.w_up,
                &b.w_down,
            ]);
        }
        v.push(&self.final_norm);
        v.extend(&self.lm_head);
        v
    }
}

/// Initial values: N(0, 0.02) matrices (output projections scaled by 1/sqrt(2·layers)),
/// norms at 1; deterministic for a seed.
pub fn init_values(m: &ModelConfig, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(seed ^ 0x1417_1A55);
    let residual_scale = 1.0 / (2.0 * m.layers as f64).sqrt();
    param_specs(m)
        .iter()
        .map(|(name, shape, _)| {
            let n: usize = shape.iter().product();
            if shape.len() == 1 {
                vec![1.0; n]
            } else {
                let std = if name.ends_with("o_proj.weight") || name.ends_with("down_proj.weight") {
                    0.02 * residual_scale
                } else {
                    0.02
                };
                (0..n).map(|_| (rng.normal() * std) as f32).collect()
            }
        })
        .collect()
}

/// Everything the passes need besides the tensors.
pub struct Ctx<'a, B: Backend> {
    /// The backend.
    pub b: &'a B,
    /// Model sizes.
    pub m: &'a ModelConfig,
    /// Sequences per micro-batch.
    pub batch: usize,
    /// QAT placement.
    pub plan: &'a QuantPlan,
    /// The quantizer bank, when quantization is on for this step.
    pub bank: Option<&'a B::Bank>,
    /// Round non-quantized GEMM operands to bf16 (emulated-bf16 baseline).
    pub bf16: bool,
    /// Run the products whose operands are exact in bf16 on the CPU's bf16 units.
    pub bf16_units: bool,
    /// Clipped straight-through estimator (zero gradients of values above the estimate).
    pub clipped_ste: bool,
    /// Scratch tensors for masked weight gradients (one per weight size; empty without the
    /// clipped STE).
    pub scratch: &'a [B::Tensor],
    /// The quantizer whose input is binned into the bank's histogram slot, if any.
    pub histogram: Option<usize>,
    /// The step's first micro-batch: [`backward`] writes the linear layers' weight
    /// gradients instead of adding to them, so only [`grads_added_to`] need zeroing first.
    pub first_micro: bool,
    /// The step's last micro-batch: [`backward`] puts each gradient's Σx² into its slot of
    /// this tensor (its index in [`Params::list`]) as soon as the gradient is final, while
    /// it is still in cache (a separate pass after the backward read it from memory: 4 %
    /// of a SmolLM2-135M CPU step).
    pub norms: Option<&'a B::Tensor>,
}

impl<B: Backend> Ctx<'_, B> {
    /// The gradient `t`, in slot `slot` of [`Params::list`], is final for this step: its
    /// Σx² into [`Ctx::norms`], when asked.
    fn finished(&self, t: &B::Tensor, slot: usize) -> Result<(), EngineError> {
        match self.norms {
            Some(norms) => self.b.sum_squares(t, norms, slot),
            None => Ok(()),
        }
    }

    fn rows(&self) -> usize {
        self.batch * self.m.context
    }

    fn attn_shape(&self) -> AttentionShape {
        AttentionShape {
            batch: self.batch,
            seq: self.m.context,
            heads: self.m.heads,
            kv_heads: self.m.kv_heads,
            head_dim: self.m.head_dim(),
        }
    }

    fn rope_shape(&self, heads: usize) -> RopeShape {
        RopeShape {
            rows: self.rows(),
            heads,
            head_dim: self.m.head_dim(),
            seq: self.m.context,
        }
    }

    fn quant(&self, block: usize, module: Module) -> LinearQuant {
        match self.bank {
            Some(_) => self.plan.get(block, module),
            None => LinearQuant::default(),
        }
    }

    /// One quantizer call on `x`: measure amax, update the scale, count the statistics.
    fn quant_call(&self, x: &B::Tensor, q: Option<usize>) -> Result<(), EngineError> {
        quant_call(self.b, self.bank, x, q, self.histogram)
    }

    /// y [n, cout] = Q_A(x [n, cin]) · Q_W(w [cout, cin])ᵀ.
    fn linear(
        &self,
        x: &B::Tensor,
        w: &B::Tensor,
        y: &B::Tensor,
        cin: usize,
        cout: usize,
        lq: LinearQuant,
    ) -> Result<(), EngineError> {
        let q = FakeQuantLinear {
            b: self.b,
            bank: self.bank,
            bf16: self.bf16,
            bf16_units: self.bf16_units,
            histogram: self.histogram,
        };
        q.forward(x, w, y, (self.rows(), cin, cout), lq)
    }

    /// dx [n, cin] = Q_G(dy) · Q_W(w) (overwritten, when asked); dw += Q_G(dy)ᵀ · Q_A(x).
    #[allow(clippy::too_many_arguments)]
    fn linear_backward(
        &self,
        x: &B::Tensor,
        w: &B::Tensor,
        dy: &B::Tensor,
        dx: Option<&B::Tensor>,
        dw: &B::Tensor,
        cin: usize,
        cout: usize,
        lq: LinearQuant,
    ) -> Result<(), EngineError> {
        self.quant_call(dy, lq.g)?;
        let n = self.rows();
        let scratch = self.scratch.iter().find(|t| self.b.len(t) == cout * cin);
        if let Some(dx) = dx {
            let spec = MatmulSpec {
                fuse_a: lq.g,
                fuse_b: lq.w,
                round_bf16: self.bf16,
                bf16_units: self.bf16_units,
                ..MatmulSpec::new(n, cin, cout, Layout::NN)
            };
            self.b.matmul(dy, w, dx, &spec, self.bank)?;
            if let (true, Some(qa), Some(bank)) = (self.clipped_ste, lq.a, self.bank) {
                self.b.ste_mask(x, dx, bank, qa)?;
            }
        }
        let masked_w = match (self.clipped_ste, lq.w, self.bank, scratch) {
            (true, Some(qw), Some(bank), Some(tmp)) => Some((qw, bank, tmp)),
            _ => None,
        };
        let spec = MatmulSpec {
            accumulate: masked_w.is_none() && !self.first_micro,
            fuse_a: lq.g,
            fuse_b: lq.a,
            round_bf16: self.bf16,
            bf16_units: self.bf16_units,
            ..MatmulSpec::new(cout, cin, n, Layout::TN)
        };
        match masked_w {
            None => self.b.matmul(dy, x, dw, &spec, self.bank),
            Some((qw, bank, _)) if self.first_micro => {
                // Nothing to add to yet: the masked contribution is the gradient.
                self.b.matmul(dy, x, dw, &spec, self.bank)?;
                self.b.ste_mask(w, dw, bank, qw)
            }
            Some((qw, bank, tmp)) => {
                // This micro-batch's contribution, masked where W was clipped, then added.
                self.b.matmul(dy, x, tmp, &spec, self.bank)?;
                self.b.ste_mask(w, tmp, bank, qw)?;
                self.b.add_inplace(dw, tmp)
            }
        }
    }
}

/// One quantizer call on `x` (the whole tensor): measure amax, update the scale, count the
/// statistics (and bin it, when it is the histogram's quantizer). Nothing without a bank.
pub(crate) fn quant_call<B: Backend>(
    b: &B,
    bank: Option<&B::Bank>,
    x: &B::Tensor,
    q: Option<usize>,
    histogram: Option<usize>,
) -> Result<(), EngineError> {
    if let (Some(q), Some(bank)) = (q, bank) {
        b.amax(x, bank, q)?;
        b.scale_update(bank, q, 1)?;
        b.quant_stats(x, bank, q)?;
        if histogram == Some(q) {
            b.histogram(x, bank, q)?;
        }
    }
    Ok(())
}

/// The forward of a fake-quantized linear layer, shared by training and inference.
pub(crate) struct FakeQuantLinear<'a, B: Backend> {
    pub b: &'a B,
    pub bank: Option<&'a B::Bank>,
    /// Round non-quantized operands to bf16 (emulated-bf16 baseline).
    pub bf16: bool,
    /// Run the products whose operands are exact in bf16 on the CPU's bf16 units.
    pub bf16_units: bool,
    pub histogram: Option<usize>,
}

impl<B: Backend> FakeQuantLinear<'_, B> {
    /// y [rows, cout] = Q_A(x [rows, cin]) · Q_W(w [cout, cin])ᵀ: each quantized operand's
    /// call (amax, scale, statistics), then one matmul with the fake quantization fused.
    pub(crate) fn forward(
        &self,
        x: &B::Tensor,
        w: &B::Tensor,
        y: &B::Tensor,
        (rows, cin, cout): (usize, usize, usize),
        lq: LinearQuant,
    ) -> Result<(), EngineError> {
        quant_call(self.b, self.bank, x, lq.a, self.histogram)?;
        quant_call(self.b, self.bank, w, lq.w, self.histogram)?;
        let spec = MatmulSpec {
            fuse_a: lq.a,
            fuse_b: lq.w,
            round_bf16: self.bf16,
            bf16_units: self.bf16_units,
            ..MatmulSpec::new(rows, cout, cin, Layout::NT)
        };
        self.b.matmul(x, w, y, &spec, self.bank)
    }
}

/// Forward pass and loss (per-row losses in `ws.losses`) with `dlogits` prepared
/// (`grad_scale` = 1 / (rows · accumulation)).
pub fn forward<B: Backend>(
    cx: &Ctx<'_, B>,
    p: &Params<B::Tensor>,
    ws: &Workspace<B::Tensor>,
    grad_scale: f32,
) -> Result<(), EngineError> {
    let (b, m) = (cx.b, cx.m);
    let (c, f, hd) = (m.d_model, m.d_ff, m.head_dim());
    let (qd, kvd) = (m.heads * hd, m.kv_heads * hd);
    b.embedding(&ws.tokens, &p.wte, &ws.blocks[0].x, c)?;
    for (l, (w, a)) in p.blocks.iter().zip(&ws.blocks).enumerate() {
        b.rmsnorm(&a.x, &w.attn_norm, &a.h1, &a.rstd1, m.norm_eps)?;
        cx.linear(&a.h1, &w.wq, &ws.q_pre, c, qd, cx.quant(l, Module::Q))?;
        cx.linear(&a.h1, &w.wk, &ws.k_pre, c, kvd, cx.quant(l, Module::K))?;
        cx.linear(&a.h1, &w.wv, &a.v, c, kvd, cx.quant(l, Module::V))?;
        b.rope(
            &ws.q_pre,
            &ws.rope_table,
            &a.q,
            cx.rope_shape(m.heads),
            false,
        )?;
        b.rope(
            &ws.k_pre,
            &ws.rope_table,
            &a.k,
            cx.rope_shape(m.kv_heads),
            false,
        )?;
        b.attention(&a.q, &a.k, &a.v, &a.att, &a.probs, cx.attn_shape())?;
        cx.linear(&a.att, &w.wo, &a.x2, qd, c, cx.quant(l, Module::O))?;
        b.add_inplace(&a.x2, &a.x)?;
        b.rmsnorm(&a.x2, &w.mlp_norm, &a.h2, &a.rstd2, m.norm_eps)?;
        cx.linear(&a.h2, &w.w_gate, &a.g, c, f, cx.quant(l, Module::Gate))?;
        cx.linear(&a.h2, &w.w_up, &a.u, c, f, cx.quant(l, Module::Up))?;
        b.swiglu(&a.g, &a.u, &a.s)?;
        let next = ws.blocks.get(l + 1).map(|n| &n.x).unwrap_or(&ws.xf);
        cx.linear(&a.s, &w.w_down, next, f, c, cx.quant(l, Module::Down))?;
        b.add_inplace(next, &a.x2)?;
    }
    b.rmsnorm(&ws.xf, &p.final_norm, &ws.hf, &ws.rstdf, m.norm_eps)?;
    cx.linear(
        &ws.hf,
        p.head(),
        &ws.logits,
        c,
        m.vocab,
        LinearQuant::default(),
    )?;
    b.cross_entropy(&ws.logits, &ws.targets, &ws.losses, &ws.dlogits, grad_scale)
}

/// The gradients [`backward`] adds to even on a step's first micro-batch (the norms' and,
/// untied, the embedding's): the ones to zero before it. The linear layers' (the tied
/// embedding's through the head) are written by their first product.
pub fn grads_added_to<T>(g: &Params<T>) -> Vec<&T> {
    let mut out = vec![&g.final_norm];
    if g.lm_head.is_some() {
        out.push(&g.wte);
    }
    for blk in &g.blocks {
        out.extend([&blk.attn_norm, &blk.mlp_norm]);
    }
    out
}

/// Backward pass: adds this micro-batch's gradients to `g` (writes the linear layers' on
/// the first micro-batch, [`Ctx::first_micro`]).
pub fn backward<B: Backend>(
    cx: &Ctx<'_, B>,
    p: &Params<B::Tensor>,
    g: &Params<B::Tensor>,
    ws: &Workspace<B::Tensor>,
) -> Result<(), EngineError> {
    let (b, m) = (cx.b, cx.m);
    let c = m.d_model;
    // Tied: the head's gradient adds to the embedding's, which the embedding pass adds to.
    cx.linear_backward(
        &ws.hf,
        p.head(),
        &ws.dlogits,
        Some(&ws.dh),
        g.head(),
        c,
        m.vocab,
        LinearQuant::default(),
    )?;
    let final_slot = block_slot(m.layers, 0);
    if let Some(head) = &g.lm_head {
        cx.finished(head, final_slot + 1)?;
    }
    b.rmsnorm_backward(
        &ws.xf,
        &p.final_norm,
        &ws.rstdf,
        &ws.dh,
        &ws.dres,
        &g.final_norm,
    )?;
    cx.finished(&g.final_norm, final_slot)?;
    for l in (0..m.layers).rev() {
        let (w, gw, a) = (&p.blocks[l], &g.blocks[l], &ws.blocks[l]);
        block_backward(cx, l, (w, gw, a), ws)?;
    }
    b.embedding_backward(&ws.tokens, &ws.dres, &g.wte, c)?;
    cx.finished(&g.wte, 0)
}

/// A block's weights, their gradients and its activations.
type BlockRefs<'a, T> = (&'a Block<T>, &'a Block<T>, &'a BlockActs<T>);

/// Block `l`'s backward: the MLP (out = x2 + down(swiglu(gate(h2), up(h2)))), then the
/// attention (x2 = x + o(attention(rope(q(h1)), rope(k(h1)), v(h1)))); `ws.dres` holds
/// d(out) and becomes d(x).
fn block_backward<B: Backend>(
    cx: &Ctx<'_, B>,
    l: usize,
    refs: BlockRefs<'_, B::Tensor>,
    ws: &Workspace<B::Tensor>,
) -> Result<(), EngineError> {
    mlp_backward(cx, l, refs, ws)?;
    attention_backward(cx, l, refs, ws)
}

/// The MLP's backward: `ws.dres` holds d(out) and gets d(x2) added.
fn mlp_backward<B: Backend>(
    cx: &Ctx<'_, B>,
    l: usize,
    (w, gw, a): BlockRefs<'_, B::Tensor>,
    ws: &Workspace<B::Tensor>,
) -> Result<(), EngineError> {
    let (b, m) = (cx.b, cx.m);
    let (c, f) = (m.d_model, m.d_ff);
    cx.linear_backward(
        &a.s,
        &w.w_down,
        &ws.dres,
        Some(&ws.ds),
        &gw.w_down,
        f,
        c,
        cx.quant(l, Module::Down),
    )?;
    cx.finished(&gw.w_down, block_slot(l, 8))?;
    b.swiglu_backward(&a.g, &a.u, &ws.ds, &ws.dg, &ws.du)?;
    // gate's input gradient into dh, up's into dtmp, then their sum.
    for (wt, d, dx, gwt, module, k) in [
        (&w.w_gate, &ws.dg, &ws.dh, &gw.w_gate, Module::Gate, 6),
        (&w.w_up, &ws.du, &ws.dtmp, &gw.w_up, Module::Up, 7),
    ] {
        let lq = cx.quant(l, module);
        cx.linear_backward(&a.h2, wt, d, Some(dx), gwt, c, f, lq)?;
        cx.finished(gwt, block_slot(l, k))?;
    }
    b.add_inplace(&ws.dh, &ws.dtmp)?;
    b.rmsnorm_backward(&a.x2, &w.mlp_norm, &a.rstd2, &ws.dh, &ws.dtmp, &gw.mlp_norm)?;
    cx.finished(&gw.mlp_norm, block_slot(l, 5))?;
    b.add_inplace(&ws.dres, &ws.dtmp)?;
    Ok(())
}

/// The attention's backward: `ws.dres` holds d(x2) and becomes d(x).
fn attention_backward<B: Backend>(
    cx: &Ctx<'_, B>,
    l: usize,
    (w, gw, a): BlockRefs<'_, B::Tensor>,
    ws: &Workspace<B::Tensor>,
) -> Result<(), EngineError> {
    let (b, m) = (cx.b, cx.m);
    let c = m.d_model;
    let hd = m.head_dim();
    let (qd, kvd) = (m.heads * hd, m.kv_heads * hd);
    cx.linear_backward(
        &a.att,
        &w.wo,
        &ws.dres,
        Some(&ws.datt),
        &gw.wo,
        qd,
        c,
        cx.quant(l, Module::O),
    )?;
    cx.finished(&gw.wo, block_slot(l, 4))?;
    b.attention_backward(
        &a.q,
        &a.k,
        &a.v,
        &a.probs,
        &ws.datt,
        &ws.dscores,
        &ws.dq_r,
        &ws.dk_r,
        &ws.dv,
        cx.attn_shape(),
    )?;
    b.rope(
        &ws.dq_r,
        &ws.rope_table,
        &ws.dq,
        cx.rope_shape(m.heads),
        true,
    )?;
    b.rope(
        &ws.dk_r,
        &ws.rope_table,
        &ws.dk,
        cx.rope_shape(m.kv_heads),
        true,
    )?;
    cx.linear_backward(
        &a.h1,
        &w.wq,
        &ws.dq,
        Some(&ws.dh),
        &gw.wq,
        c,
        qd,
        cx.quant(l, Module::Q),
    )?;
    cx.finished(&gw.wq, block_slot(l, 1))?;
    // k, then v: each input gradient added to dh in that order.
    for (wt, d, gwt, module, k) in [
        (&w.wk, &ws.dk, &gw.wk, Module::K, 2),
        (&w.wv, &ws.dv, &gw.wv, Module::V, 3),
    ] {
        let lq = cx.quant(l, module);
        cx.linear_backward(&a.h1, wt, d, Some(&ws.dtmp), gwt, c, kvd, lq)?;
        cx.finished(gwt, block_slot(l, k))?;
        b.add_inplace(&ws.dh, &ws.dtmp)?;
    }
    b.rmsnorm_backward(
        &a.x,
        &w.attn_norm,
        &a.rstd1,
        &ws.dh,
        &ws.dtmp,
        &gw.attn_norm,
    )?;
    cx.finished(&gw.attn_norm, block_slot(l, 0))?;
    b.add_inplace(&ws.dres, &ws.dtmp)
}
