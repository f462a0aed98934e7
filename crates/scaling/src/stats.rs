//! Statistics of one quantizer call on the CPU: the reference the GPU `quant_stats`
//! kernel must match exactly (SPEC.md §3 "Statistics per quantizer call").
//!
//! Definitions (all counts exact):
//! - `amax`: max |x| over non-NaN elements (an Inf makes it Inf); 0 for an empty tensor;
//! - `nonfinite`: elements that are NaN or ±Inf;
//! - `above[k]`: elements with |x| > `est[k]` (NaN never counts);
//! - `overflow[k]`: elements with `|x · scale[k]|` ≥ the format's overflow threshold;
//! - `underflow`: non-zero elements that quantize to 0 at the active scale.
//!
//! Plain Rust, the readable reference: [`errors`] (the quantization error and SQNR),
//! [`counts`] (the counts from bounds), [`histogram`]. The same passes in SIMD registers,
//! [`simd`] (what the engine's CPU backend and the torch package's CPU path run), are held
//! to these in its tests.

use hif8lab_format::FakeQuant;

pub mod counts;
pub mod errors;
pub mod histogram;
pub mod simd;

use counts::counted;
pub use counts::{
    CountBounds, CountN, GROUP, GroupCounter, Plain, count_group, count_group_of, count_group_with,
    live_bounds,
};
use errors::block;
pub use errors::{
    ENERGY_LANES, Lanes, SQNR_CAP_DB, block_lanes, error_terms, quant_error, quant_error_of,
    sqnr_db, with_tail,
};
pub use histogram::*;

/// One estimator's threshold pair for the shadow counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Threshold {
    /// The estimate: values above it left the tier the scale aimed for.
    pub est: f32,
    /// The scale: values whose scaled magnitude reaches the overflow threshold clip.
    pub scale: f32,
}

impl Threshold {
    /// One threshold per estimator from the estimates and the scales, in order (the shorter
    /// list wins).
    pub fn pairs(ests: &[f32], scales: &[f32]) -> Vec<Threshold> {
        ests.iter()
            .zip(scales)
            .map(|(est, scale)| Threshold {
                est: *est,
                scale: *scale,
            })
            .collect()
    }
}

/// Statistics of one tensor for one call.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorStats {
    /// Elements in the tensor.
    pub numel: u64,
    /// max |x| over non-NaN elements.
    pub amax: f32,
    /// NaN or Inf elements.
    pub nonfinite: u64,
    /// Per threshold: elements with |x| > est.
    pub above_est: Vec<u64>,
    /// Per threshold: elements with |x·scale| ≥ overflow threshold.
    pub overflow: Vec<u64>,
    /// Non-zero elements that quantize to zero at the active scale.
    pub underflow: u64,
    /// Σx² over the finite elements whose fake-quantized value is finite.
    pub signal: f64,
    /// Σ(x − qdq(x))² over the same elements, at the active scale (the quantization error
    /// of the call; overflowing elements are counted in `overflow`, not here).
    pub noise: f64,
}

/// Every statistic of one call. `thresholds` has one entry per estimator; `active_scale`
/// is the scale quantization uses; `quant` gives the format and overflow threshold.
pub fn tensor_stats(
    x: &[f32],
    thresholds: &[Threshold],
    active_scale: f32,
    quant: &FakeQuant,
) -> TensorStats {
    tensor_stats_from(x, 0, thresholds, active_scale, quant)
}

/// [`tensor_stats`] of a piece of a tensor starting at element `first_index` (the random
/// index of hybrid rounding in the quantization error).
pub fn tensor_stats_from(
    x: &[f32],
    first_index: u32,
    thresholds: &[Threshold],
    active_scale: f32,
    quant: &FakeQuant,
) -> TensorStats {
    let (signal, noise) = quant_error(x, first_index, active_scale, quant);
    let amax = amax_and_nonfinite(x);
    counted(x, thresholds, active_scale, quant, signal, noise, amax)
}

/// [`tensor_stats_from`] of a piece `x` whose fake-quantized values at the active scale are
/// `q` (computed once, e.g. by the fake quantization that follows), without the codec and
/// without the amax pass: `amax` and `nonfinite` are 0, for a caller that measures them
/// ([`amax_and_nonfinite`] of the same elements) and puts them in their place. `bounds`:
/// the call's [`CountBounds`] (found once for all its pieces); `reach`: at least every
/// |x| of the piece that is not NaN (the tensor's amax), so that the counts from a bound
/// above it, zero, need no pass over the elements.
pub fn tensor_counts_given(x: &[f32], q: &[f32], bounds: &CountBounds, reach: f32) -> TensorStats {
    let (signal, noise) = quant_error_of(x, q);
    bounds.counted_with(x, signal, noise, (0.0, 0), reach, count_group_of)
}

/// amax and non-finite count (the first pass; all that delayed scaling needs), in 8 lanes
/// the compiler vectorizes.
pub fn amax_and_nonfinite(x: &[f32]) -> (f32, u64) {
    const L: usize = 8;
    const INF: u32 = 0x7F80_0000;
    let mut amax_bits = 0u32;
    let mut nonfinite = 0u64;
    // Blocks of 2^20 elements: per lane a 32-bit count (cannot wrap) and a running max of
    // the magnitude's bits (NaN's bits replaced by 0), L lanes at once.
    for big in x.chunks(1 << 20) {
        let whole = big.len() / L * L;
        let (mut m, mut n) = ([0u32; L], [0u32; L]);
        for b in big[..whole].chunks_exact(L) {
            let b: &[f32; L] = block(b);
            for l in 0..L {
                let a = b[l].to_bits() & 0x7FFF_FFFF;
                n[l] += u32::from(a >= INF);
                m[l] = m[l].max(if a <= INF { a } else { 0 });
            }
        }
        for v in &big[whole..] {
            let a = v.to_bits() & 0x7FFF_FFFF;
            n[0] += u32::from(a >= INF);
            m[0] = m[0].max(if a <= INF { a } else { 0 });
        }
        amax_bits = m.iter().fold(amax_bits, |a, b| a.max(*b));
        nonfinite += n.iter().map(|c| u64::from(*c)).sum::<u64>();
    }
    (f32::from_bits(amax_bits), nonfinite)
}

#[cfg(test)]
mod tests;
