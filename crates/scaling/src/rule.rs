//! The scale rule (SPEC.md §3 step 4): how an estimated amax becomes a scale. A leaf: the
//! configuration builds a rule, the quantizer state applies it.

use serde::{Deserialize, Serialize};

/// Added to the estimate before dividing (SPEC.md §3 step 4).
pub const EST_EPSILON: f32 = 1e-12;

/// The scale rule `scale = target / (est + 1e-12) / 2^margin`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleRule {
    /// Where the estimated amax should land after scaling (15 = top of HiF8's 3-bit tier).
    pub target: f32,
    /// Extra power-of-two headroom (Transformer Engine's `margin`).
    pub margin: i32,
}

impl ScaleRule {
    /// The scale for a usable estimate, or `None` when `est` is 0, negative, NaN or Inf.
    pub fn scale_for(&self, est: f32) -> Option<f32> {
        if !(est.is_finite() && est > 0.0) {
            return None;
        }
        let scale = self.target / (est + EST_EPSILON) / pow2(self.margin);
        (scale.is_finite() && scale > 0.0).then_some(scale)
    }

    /// The amax a scale maps onto the target: `target / (scale · 2^margin)`.
    pub fn implied_est(&self, scale: f32) -> f32 {
        self.target / (scale * pow2(self.margin))
    }
}

/// 2^m as f32 (exact; clamped to the normal range).
pub fn pow2(m: i32) -> f32 {
    f32::from_bits(((m.clamp(-126, 127) + 127) as u32) << 23)
}
