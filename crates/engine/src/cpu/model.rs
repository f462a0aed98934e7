//! CPU op family `ModelOps`: the layers of the model, forward and backward (`ops.rs`).

use super::{CpuBackend, CpuTensor, check_attention, ops};
use crate::{
    AttentionShape, CachedAttentionShape, EngineError, ModelOps, RopeShape, at_least, rows_of,
    same_len,
};

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
        rows_of("embedding table", w.len(), channels)?;
        at_least("embedding out", o.len(), t.len() * channels)?;
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
        rows_of("embedding dtable", w.len(), channels)?;
        at_least("embedding dout", d.len(), t.len() * channels)?;
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
        let rows = rows_of("rmsnorm x", xv.len(), w.len())?;
        same_len("rmsnorm out", o.len(), xv.len())?;
        same_len("rmsnorm rstd", r.len(), rows)?;
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
        let rows = rows_of("rmsnorm_backward x", xv.len(), w.len())?;
        same_len("rmsnorm_backward rstd", r.len(), rows)?;
        same_len("rmsnorm_backward dy", d.len(), xv.len())?;
        same_len("rmsnorm_backward dx", dxv.len(), xv.len())?;
        same_len("rmsnorm_backward dweight", dwv.len(), w.len())?;
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
        let n = shape.rows * shape.heads * shape.head_dim;
        at_least("rope x", xv.len(), n)?;
        at_least("rope out", o.len(), n)?;
        at_least("rope table", t.len(), shape.seq * shape.head_dim)?;
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
        check_attention(&shape)?;
        let (qv, kv, vv) = (q.read(), k.read(), v.read());
        let (mut o, mut p) = (out.get(), probs.get());
        at_least("attention q", qv.len(), shape.q_len())?;
        at_least("attention k", kv.len(), shape.kv_len())?;
        at_least("attention v", vv.len(), shape.kv_len())?;
        at_least("attention out", o.len(), shape.q_len())?;
        at_least("attention probs", p.len(), shape.probs_len())?;
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
        at_least("attention_cached q", qv.len(), shape.q_len())?;
        at_least("attention_cached k_cache", kv.len(), shape.cache_len())?;
        at_least("attention_cached v_cache", vv.len(), shape.cache_len())?;
        at_least("attention_cached out", o.len(), shape.q_len())?;
        at_least("attention_cached scores", s.len(), shape.scores_len())?;
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
        check_attention(&shape)?;
        let (qv, kv, vv, p, d) = (q.read(), k.read(), v.read(), probs.read(), dout.read());
        let (mut ds, mut dqv, mut dkv, mut dvv) = (dscores.get(), dq.get(), dk.get(), dv.get());
        at_least("attention_backward dscores", ds.len(), shape.probs_len())?;
        at_least("attention_backward dq", dqv.len(), shape.q_len())?;
        at_least("attention_backward dk", dkv.len(), shape.kv_len())?;
        at_least("attention_backward dv", dvv.len(), shape.kv_len())?;
        at_least("attention_backward dout", d.len(), shape.q_len())?;
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
        same_len("swiglu u", uv.len(), gv.len())?;
        same_len("swiglu out", o.len(), gv.len())?;
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
        for (what, len) in [
            ("u", uv.len()),
            ("dy", d.len()),
            ("dg", dgv.len()),
            ("du", duv.len()),
        ] {
            same_len(&format!("swiglu_backward {what}"), len, gv.len())?;
        }
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
        same_len("cross_entropy losses", lo.len(), t.len())?;
        rows_of("cross_entropy logits", l.len(), l.len() / t.len().max(1))?;
        if !dl.is_empty() {
            same_len("cross_entropy dlogits", dl.len(), l.len())?;
        }
        if t.is_empty() || l.len() % t.len() != 0 {
            return Err(EngineError::Shape(
                "cross_entropy: logits are not rows of targets".into(),
            ));
        }
        ops::cross_entropy(&l, &t, &mut lo, &mut dl, grad_scale);
        Ok(())
    }
}
