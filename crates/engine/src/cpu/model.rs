//! CPU op family `ModelOps`: the layers of the model, forward and backward (`ops.rs`).

use super::{CpuBackend, CpuTensor, ops};
use crate::checks;
use crate::{AttentionShape, CachedAttentionShape, EngineError, ModelOps, RopeShape};

impl ModelOps for CpuBackend {
    fn embedding(
        &self,
        tokens: &CpuTensor,
        table: &CpuTensor,
        out: &CpuTensor,
        channels: usize,
    ) -> Result<(), EngineError> {
        let _op = self.launched("embedding");
        let (t, w, mut o) = (tokens.read(), table.read(), out.get());
        checks::embedding(w.len(), o.len(), t.len(), channels)?;
        ops::embedding(&t, &w, &mut o, channels);
        Ok(())
    }

    fn embedding_backward(
        &self,
        tokens: &CpuTensor,
        dout: &CpuTensor,
        dtable: &CpuTensor,
        channels: usize,
    ) -> Result<(), EngineError> {
        let _op = self.launched("embedding_backward");
        let (t, d, mut w) = (tokens.read(), dout.read(), dtable.get());
        checks::embedding_backward(w.len(), d.len(), t.len(), channels)?;
        ops::embedding_backward(&t, &d, &mut w, channels);
        Ok(())
    }

    fn rmsnorm(
        &self,
        x: &CpuTensor,
        weight: &CpuTensor,
        out: &CpuTensor,
        rstd: &CpuTensor,
        eps: f32,
    ) -> Result<(), EngineError> {
        let _op = self.launched("rmsnorm");
        let (xv, w, mut o, mut r) = (x.read(), weight.read(), out.get(), rstd.get());
        checks::rmsnorm(xv.len(), w.len(), o.len(), r.len())?;
        ops::rmsnorm(&xv, &w, &mut o, &mut r, eps);
        Ok(())
    }

    fn rmsnorm_backward(
        &self,
        x: &CpuTensor,
        weight: &CpuTensor,
        rstd: &CpuTensor,
        dy: &CpuTensor,
        dx: &CpuTensor,
        dweight: &CpuTensor,
    ) -> Result<(), EngineError> {
        let _op = self.launched("rmsnorm_backward");
        let (xv, w, r, d) = (x.read(), weight.read(), rstd.read(), dy.read());
        let (mut dxv, mut dwv) = (dx.get(), dweight.get());
        checks::rmsnorm_backward(
            [xv.len(), w.len(), r.len()],
            [d.len(), dxv.len(), dwv.len()],
        )?;
        ops::rmsnorm_backward(&xv, &w, &r, &d, &mut dxv, &mut dwv);
        Ok(())
    }

    fn rope(
        &self,
        x: &CpuTensor,
        table: &CpuTensor,
        out: &CpuTensor,
        shape: RopeShape,
        inverse: bool,
    ) -> Result<(), EngineError> {
        let _op = self.launched("rope");
        let (xv, t, mut o) = (x.read(), table.read(), out.get());
        checks::rope(xv.len(), o.len(), t.len(), &shape)?;
        ops::rope(&xv, &t, &mut o, shape, inverse);
        Ok(())
    }

    fn attention(
        &self,
        q: &CpuTensor,
        k: &CpuTensor,
        v: &CpuTensor,
        out: &CpuTensor,
        probs: &CpuTensor,
        shape: AttentionShape,
    ) -> Result<(), EngineError> {
        let _op = self.launched("attention");
        checks::attention_shape(&shape)?;
        let (qv, kv, vv) = (q.read(), k.read(), v.read());
        let (mut o, mut p) = (out.get(), probs.get());
        checks::attention(&shape, [qv.len(), kv.len(), vv.len(), o.len(), p.len()])?;
        super::attention::attention(&qv, &kv, &vv, &mut o, &mut p, shape);
        Ok(())
    }

    fn attention_cached(
        &self,
        q: &CpuTensor,
        k_cache: &CpuTensor,
        v_cache: &CpuTensor,
        out: &CpuTensor,
        scores: &CpuTensor,
        shape: CachedAttentionShape,
    ) -> Result<(), EngineError> {
        let _op = self.launched("attention_cached");
        shape.check()?;
        let (qv, kv, vv) = (q.read(), k_cache.read(), v_cache.read());
        let (mut o, mut s) = (out.get(), scores.get());
        checks::attention_cached(&shape, [qv.len(), kv.len(), vv.len(), o.len(), s.len()])?;
        super::attention::attention_cached(&qv, &kv, &vv, &mut o, &mut s, shape);
        Ok(())
    }

    fn attention_backward(
        &self,
        q: &CpuTensor,
        k: &CpuTensor,
        v: &CpuTensor,
        probs: &CpuTensor,
        dout: &CpuTensor,
        dscores: &CpuTensor,
        dq: &CpuTensor,
        dk: &CpuTensor,
        dv: &CpuTensor,
        shape: AttentionShape,
    ) -> Result<(), EngineError> {
        let _op = self.launched("attention_backward");
        checks::attention_shape(&shape)?;
        let (qv, kv, vv, p, d) = (q.read(), k.read(), v.read(), probs.read(), dout.read());
        let (mut ds, mut dqv, mut dkv, mut dvv) = (dscores.get(), dq.get(), dk.get(), dv.get());
        checks::attention_backward(&shape, [ds.len(), dqv.len(), dkv.len(), dvv.len(), d.len()])?;
        super::attention::attention_backward(
            &qv,
            &kv,
            &vv,
            &p,
            &d,
            ops::AttentionGrads {
                dscores: &mut ds,
                dq: &mut dqv,
                dk: &mut dkv,
                dv: &mut dvv,
            },
            shape,
        );
        Ok(())
    }

    fn swiglu(&self, g: &CpuTensor, u: &CpuTensor, out: &CpuTensor) -> Result<(), EngineError> {
        let _op = self.launched("swiglu");
        let (gv, uv, mut o) = (g.read(), u.read(), out.get());
        checks::swiglu(gv.len(), uv.len(), o.len())?;
        ops::swiglu(&gv, &uv, &mut o);
        Ok(())
    }

    fn swiglu_backward(
        &self,
        g: &CpuTensor,
        u: &CpuTensor,
        dy: &CpuTensor,
        dg: &CpuTensor,
        du: &CpuTensor,
    ) -> Result<(), EngineError> {
        let _op = self.launched("swiglu_backward");
        let (gv, uv, d) = (g.read(), u.read(), dy.read());
        let (mut dgv, mut duv) = (dg.get(), du.get());
        checks::swiglu_backward(gv.len(), [uv.len(), d.len(), dgv.len(), duv.len()])?;
        ops::swiglu_backward(&gv, &uv, &d, &mut dgv, &mut duv);
        Ok(())
    }

    fn cross_entropy(
        &self,
        logits: &CpuTensor,
        targets: &CpuTensor,
        losses: &CpuTensor,
        dlogits: &CpuTensor,
        grad_scale: f32,
    ) -> Result<(), EngineError> {
        let _op = self.launched("cross_entropy");
        let (l, t) = (logits.read(), targets.read());
        let (mut lo, mut dl) = (losses.get(), dlogits.get());
        checks::cross_entropy(l.len(), t.len(), lo.len(), dl.len())?;
        ops::cross_entropy(&l, &t, &mut lo, &mut dl, grad_scale);
        Ok(())
    }
}
