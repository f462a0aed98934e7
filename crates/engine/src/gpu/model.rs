//! GPU op family `ModelOps`: the layers of the model, forward and backward; kernel-backed operations call the launcher beside
//! their kernel.

use super::*;
use crate::{AttentionShape, CachedAttentionShape, EngineError, ModelOps, RopeShape};

impl ModelOps for GpuBackend {
    fn embedding(
        &self,
        tokens: &GpuTensor,
        table: &GpuTensor,
        out: &GpuTensor,
        channels: usize,
    ) -> Result<(), EngineError> {
        embedding::launch(self, tokens, table, out, channels)
    }

    fn embedding_backward(
        &self,
        tokens: &GpuTensor,
        dout: &GpuTensor,
        dtable: &GpuTensor,
        channels: usize,
    ) -> Result<(), EngineError> {
        embedding::launch_backward(self, tokens, dout, dtable, channels)
    }

    fn rmsnorm(
        &self,
        x: &GpuTensor,
        weight: &GpuTensor,
        out: &GpuTensor,
        rstd: &GpuTensor,
        eps: f32,
    ) -> Result<(), EngineError> {
        rmsnorm::launch(self, x, weight, out, rstd, eps)
    }

    fn rmsnorm_backward(
        &self,
        x: &GpuTensor,
        weight: &GpuTensor,
        rstd: &GpuTensor,
        dy: &GpuTensor,
        dx: &GpuTensor,
        dweight: &GpuTensor,
    ) -> Result<(), EngineError> {
        rmsnorm::launch_backward(self, x, weight, rstd, dy, dx, dweight)
    }

    fn rope(
        &self,
        x: &GpuTensor,
        table: &GpuTensor,
        out: &GpuTensor,
        shape: RopeShape,
        inverse: bool,
    ) -> Result<(), EngineError> {
        rope::launch(self, x, table, out, shape, inverse)
    }

    fn attention(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        out: &GpuTensor,
        probs: &GpuTensor,
        shape: AttentionShape,
    ) -> Result<(), EngineError> {
        attention::launch(self, q, k, v, out, probs, shape)
    }

    fn attention_cached(
        &self,
        q: &GpuTensor,
        k_cache: &GpuTensor,
        v_cache: &GpuTensor,
        out: &GpuTensor,
        scores: &GpuTensor,
        shape: CachedAttentionShape,
    ) -> Result<(), EngineError> {
        attention_cached::launch(self, q, k_cache, v_cache, out, scores, shape)
    }

    fn attention_backward(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        probs: &GpuTensor,
        dout: &GpuTensor,
        dscores: &GpuTensor,
        dq: &GpuTensor,
        dk: &GpuTensor,
        dv: &GpuTensor,
        shape: AttentionShape,
    ) -> Result<(), EngineError> {
        attention::launch_backward(self, q, k, v, probs, dout, dscores, dq, dk, dv, shape)
    }

    fn swiglu(&self, g: &GpuTensor, u: &GpuTensor, out: &GpuTensor) -> Result<(), EngineError> {
        swiglu::launch(self, g, u, out)
    }

    fn swiglu_backward(
        &self,
        g: &GpuTensor,
        u: &GpuTensor,
        dy: &GpuTensor,
        dg: &GpuTensor,
        du: &GpuTensor,
    ) -> Result<(), EngineError> {
        swiglu::launch_backward(self, g, u, dy, dg, du)
    }

    fn cross_entropy(
        &self,
        logits: &GpuTensor,
        targets: &GpuTensor,
        losses: &GpuTensor,
        dlogits: &GpuTensor,
        grad_scale: f32,
    ) -> Result<(), EngineError> {
        cross_entropy::launch(self, logits, targets, losses, dlogits, grad_scale)
    }
}
