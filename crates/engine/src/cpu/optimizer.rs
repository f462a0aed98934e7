//! CPU op family `OptimizerOps`: global gradient norm and AdamW.

use super::{CpuBackend, CpuTensor, ops};
use crate::{AdamHyper, EngineError, OptimizerOps};

/// Lanes of a sum-of-squares group (the WGSL kernel's workgroup size).
const WG: usize = 256;

/// Most groups of 256 lanes a sum of squares is taken in (the CPU's, and the workgroups of
/// `shaders/sum_squares.wgsl`'s `main`): enough to fill a large GPU.
pub const SUM_SQUARES_GROUPS: usize = 512;

/// The groups of a sum of squares over `n` elements, on both backends: one per 256
/// elements, at most [`SUM_SQUARES_GROUPS`].
pub fn sum_squares_groups(n: usize) -> usize {
    n.div_ceil(WG).clamp(1, SUM_SQUARES_GROUPS)
}

impl OptimizerOps for CpuBackend {
    fn sum_squares(&self, x: &CpuTensor, out: &CpuTensor, slot: usize) -> Result<(), EngineError> {
        let _op = self.launched("sum_squares");
        let v = sum_squares(&x.read());
        let mut o = out.get();
        crate::checks::sum_squares(o.len(), slot)?;
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
        crate::checks::adamw(p.len(), [g.len(), mv.len(), vv.len()], nv.len(), n_norms)?;
        ops::adamw(&mut p, &g, &mut mv, &mut vv, &nv[..n_norms], hyper);
        Ok(())
    }
}

/// Σ x² in the order of `shaders/sum_squares.wgsl`: `groups` groups of 256 lanes, lane
/// (g, l) summing x[g·256 + l + j·groups·256]² for j = 0, 1, … in order, each group's lanes
/// through the fixed tree; then lane l sums the group sums l, l + 256, … in order, and the
/// tree again. The groups ([`sum_squares_groups`]) run in parallel in pieces of 16 (the bits
/// do not depend on the thread count), each piece streaming through a contiguous 16 KiB of
/// every row of `groups`·256 elements into lanes that stay in L1 (pieces of 64, whose 64 KiB
/// of lanes did not: 29–30 ms a step at SmolLM2-135M's shape against 25–27).
fn sum_squares(x: &[f32]) -> f32 {
    const PIECE_GROUPS: usize = 16;
    let groups = sum_squares_groups(x.len());
    let mut sums = vec![0.0f32; groups];
    super::par::sized_mut(&mut sums, PIECE_GROUPS, |first, sums| {
        let mut lanes = vec![0.0f32; sums.len() * WG];
        for row in x.chunks(groups * WG) {
            let Some(segment) = row.get(first * WG..) else {
                break;
            };
            for (p, v) in lanes.iter_mut().zip(segment) {
                *p += v * v;
            }
        }
        for (s, group) in sums.iter_mut().zip(lanes.chunks_exact_mut(WG)) {
            *s = lane_tree(group);
        }
    });
    let mut lanes = [0.0f32; WG];
    for (g, s) in sums.iter().enumerate() {
        lanes[g % WG] += s;
    }
    lane_tree(&mut lanes)
}

/// The WGSL kernels' tree over 256 lanes: lane l += lane l + width, width 128, 64, … 1.
fn lane_tree(lanes: &mut [f32]) -> f32 {
    let mut width = lanes.len() / 2;
    while width > 0 {
        for lane in 0..width {
            lanes[lane] += lanes[lane + width];
        }
        width /= 2;
    }
    lanes[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_squares_sums_in_the_kernels_order() {
        let x = super::super::test_data::values(74_232, 1, 6.0);
        // Σx²: the WGSL kernel's groups, grid-stride lanes and trees, as plain loops; one
        // group (1,000 elements), groups in one row (74,232: 290 groups), and several rows of
        // 512 groups with the last one short (300,001).
        let big = super::super::test_data::values(300_001, 9, 6.0);
        for x in [&x[..1000], &x[..], &big[..]] {
            let (n, groups) = (x.len(), x.len().div_ceil(256).clamp(1, 512));
            let tree = |lanes: &mut [f32; 256]| {
                let mut width = 128;
                while width > 0 {
                    for l in 0..width {
                        lanes[l] += lanes[l + width];
                    }
                    width /= 2;
                }
                lanes[0]
            };
            let mut sums = Vec::new();
            for g in 0..groups {
                let mut lanes = [0.0f32; 256];
                for (l, lane) in lanes.iter_mut().enumerate() {
                    let mut i = g * 256 + l;
                    while i < n {
                        *lane += x[i] * x[i];
                        i += groups * 256;
                    }
                }
                sums.push(tree(&mut lanes));
            }
            let mut lanes = [0.0f32; 256];
            for (l, lane) in lanes.iter_mut().enumerate() {
                let mut g = l;
                while g < groups {
                    *lane += sums[g];
                    g += 256;
                }
            }
            assert_eq!(
                sum_squares(x).to_bits(),
                tree(&mut lanes).to_bits(),
                "Σx² of {n}"
            );
        }
    }
}
