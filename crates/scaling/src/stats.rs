//! Statistics of one quantizer call on the CPU: the reference the GPU `quant_stats`
//! kernel must match exactly (SPEC.md §3 "Statistics per quantizer call").
//!
//! Definitions (all counts exact):
//! - `amax`: max |x| over non-NaN elements (an Inf makes it Inf); 0 for an empty tensor;
//! - `nonfinite`: elements that are NaN or ±Inf;
//! - `above[k]`: elements with |x| > `est[k]` (NaN never counts);
//! - `overflow[k]`: elements with |x · scale[k]| ≥ the format's overflow threshold;
//! - `underflow`: non-zero elements that quantize to 0 at the active scale.

use hif8lab_format::FakeQuant;

/// One estimator's threshold pair for the shadow counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Threshold {
    /// The estimate: values above it left the tier the scale aimed for.
    pub est: f32,
    /// The scale: values whose scaled magnitude reaches the overflow threshold clip.
    pub scale: f32,
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
}

/// amax and non-finite count (the first pass; all that delayed scaling needs).
pub fn amax_and_nonfinite(x: &[f32]) -> (f32, u64) {
    let mut amax_bits = 0u32;
    let mut nonfinite = 0u64;
    for v in x {
        let a = v.to_bits() & 0x7FFF_FFFF;
        if a >= 0x7F80_0000 {
            nonfinite += 1;
        }
        if a <= 0x7F80_0000 && a > amax_bits {
            amax_bits = a;
        }
    }
    (f32::from_bits(amax_bits), nonfinite)
}

/// Every statistic of one call. `thresholds` has one entry per estimator; `active_scale`
/// is the scale quantization uses; `quant` gives the format and overflow threshold.
pub fn tensor_stats(
    x: &[f32],
    thresholds: &[Threshold],
    active_scale: f32,
    quant: &FakeQuant,
) -> TensorStats {
    let (amax, nonfinite) = amax_and_nonfinite(x);
    let facts = quant.format.facts();
    let limit = facts.overflow_threshold;
    // qdq(v·s) == 0 exactly when |v·s| ≤ underflow_max (checked against the codec in the
    // format crate's tests); the comparison is much cheaper than the codec.
    let underflow_max = facts.underflow_max;
    // One tight pass per counter: each inner loop is a simple compare-and-count the
    // compiler vectorizes, and the tensor stays in cache between passes.
    let count = |pred: &dyn Fn(f32) -> bool| x.iter().filter(|v| pred(**v)).count() as u64;
    let above_est = thresholds
        .iter()
        .map(|t| {
            let est = t.est;
            x.iter().map(|v| u64::from(v.abs() > est)).sum()
        })
        .collect();
    let overflow = thresholds
        .iter()
        .map(|t| {
            let scale = t.scale;
            x.iter()
                .map(|v| u64::from((v * scale).abs() >= limit))
                .sum()
        })
        .collect();
    let underflow = count(&|v| v != 0.0 && (v * active_scale).abs() <= underflow_max);
    TensorStats {
        numel: x.len() as u64,
        amax,
        nonfinite,
        above_est,
        overflow,
        underflow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hif8lab_format::Format;

    #[test]
    fn counts_by_definition() {
        let x = [0.5, -3.0, f32::NAN, f32::NEG_INFINITY, 1e-12, 0.0, 2.0];
        let q = FakeQuant::new(Format::HiF8);
        let t = [
            Threshold {
                est: 1.0,
                scale: 15.0,
            },
            Threshold {
                est: 2.0,
                scale: 20000.0,
            },
        ];
        let s = tensor_stats(&x, &t, 15.0, &q);
        assert_eq!(s.amax, f32::INFINITY);
        assert_eq!(s.nonfinite, 2);
        assert_eq!(s.above_est, [3, 2]); // -3, -inf, 2 | -3, -inf
        assert_eq!(s.overflow, [1, 2]); // -inf | -3·2e4, -inf (2·2e4 = 40000 < 40960)
        assert_eq!(s.underflow, 1); // 1e-12·15 < 2^-23
    }

    #[test]
    fn amax_ignores_nan_and_handles_empty() {
        assert_eq!(amax_and_nonfinite(&[]), (0.0, 0));
        assert_eq!(amax_and_nonfinite(&[f32::NAN, -2.0, 1.0]), (2.0, 1));
    }
}
