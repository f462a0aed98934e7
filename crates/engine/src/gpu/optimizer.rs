//! GPU op family `OptimizerOps`: global gradient norm and AdamW; kernel-backed operations call the launcher beside
//! their kernel.

use super::*;
use crate::{AdamHyper, EngineError, OptimizerOps};

impl OptimizerOps for GpuBackend {
    fn sum_squares(&self, x: &GpuTensor, out: &GpuTensor, slot: usize) -> Result<(), EngineError> {
        sum_squares::launch(self, x, out, slot)
    }

    fn adamw(
        &self,
        param: &GpuTensor,
        grad: &GpuTensor,
        m: &GpuTensor,
        v: &GpuTensor,
        norms: &GpuTensor,
        n_norms: usize,
        hyper: &AdamHyper,
    ) -> Result<(), EngineError> {
        adamw::launch(self, param, grad, m, v, norms, n_norms, hyper)
    }
}
