//! CPU op family `OptimizerOps`: global gradient norm and AdamW.

use super::{CpuBackend, CpuTensor, ops};
use crate::{AdamHyper, EngineError, OptimizerOps, at_least, same_len};

impl OptimizerOps for CpuBackend {
    fn sum_squares(&self, x: &CpuTensor, out: &CpuTensor, slot: usize) -> Result<(), EngineError> {
        let _op = self.launched("sum_squares");
        let v = ops::sum_squares(&x.read());
        let mut o = out.get();
        at_least("sum_squares out", o.len(), slot + 1)?;
        o[slot] = v;
        Ok(())
    }

    fn adamw(
        &self,
        param: &CpuTensor,
        grad: &CpuTensor,
        m: &CpuTensor,
        v: &CpuTensor,
        norms: &CpuTensor,
        n_norms: usize,
        hyper: &AdamHyper,
    ) -> Result<(), EngineError> {
        let _op = self.launched("adamw");
        let (g, nv) = (grad.read(), norms.read());
        let (mut p, mut mv, mut vv) = (param.get(), m.get(), v.get());
        for (what, len) in [("grad", g.len()), ("m", mv.len()), ("v", vv.len())] {
            same_len(&format!("adamw {what}"), len, p.len())?;
        }
        at_least("adamw norms", nv.len(), n_norms)?;
        ops::adamw(&mut p, &g, &mut mv, &mut vv, &nv[..n_norms], hyper);
        Ok(())
    }
}
