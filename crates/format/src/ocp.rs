//! OCP FP8 formats E4M3 (the "fn" variant: no Inf, one NaN pattern per sign) and E5M2
//! (IEEE-like, with Inf), round-to-nearest-even, as `ml_dtypes.float8_e4m3fn` /
//! `float8_e5m2` define them.
//!
//! The product offers these beside HiF8 so an experiment can switch format with one
//! setting. Rounding works on the integer bits of the f32, like [`crate::hif8`].

use crate::Overflow;

/// Parameters of an IEEE-like 8-bit float.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OcpFormat {
    /// Name used in configs and the CLI.
    pub name: &'static str,
    /// Mantissa (fraction) bits.
    pub mantissa_bits: u32,
    /// Exponent bias.
    pub bias: i32,
    /// Exponent of the smallest normal (1 − bias).
    pub min_normal_exp: i32,
    /// Whether the all-ones exponent with zero mantissa means infinity (E5M2) or the
    /// format has no infinity (E4M3 fn: overflow becomes NaN unless saturating).
    pub has_inf: bool,
    /// Bits of the largest finite value as an f32.
    pub max_finite_bits: u32,
    /// The positive NaN code `ml_dtypes` produces (sign bit added for negative NaN).
    pub nan_code: u8,
}

/// OCP FP8 E4M3 (fn): max 448, min normal 2^-6, min subnormal 2^-9, NaN 0x7F/0xFF, no Inf.
pub const E4M3: OcpFormat = OcpFormat {
    name: "e4m3",
    mantissa_bits: 3,
    bias: 7,
    min_normal_exp: -6,
    has_inf: false,
    max_finite_bits: 0x43E0_0000, // 448.0
    nan_code: 0x7F,
};

/// OCP FP8 E5M2: max 57344, min normal 2^-14, min subnormal 2^-16, Inf 0x7C/0xFC.
pub const E5M2: OcpFormat = OcpFormat {
    name: "e5m2",
    mantissa_bits: 2,
    bias: 15,
    min_normal_exp: -14,
    has_inf: true,
    max_finite_bits: 0x4760_0000, // 57344.0
    nan_code: 0x7E,
};

const SIGN_BIT: u32 = 0x8000_0000;
const ABS_MASK: u32 = 0x7FFF_FFFF;
const F32_INF_BITS: u32 = 0x7F80_0000;
const F32_QNAN_BITS: u32 = 0x7FC0_0000;
const SIGNIFICAND_ONE: u32 = 0x80_0000;
const FRACTION_MASK: u32 = 0x7F_FFFF;

impl OcpFormat {
    /// Largest finite value.
    pub fn max_finite(&self) -> f32 {
        f32::from_bits(self.max_finite_bits)
    }

    /// Smallest normal value.
    pub fn min_normal(&self) -> f32 {
        crate::hif8::exp2i(self.min_normal_exp)
    }

    /// Smallest subnormal value.
    pub fn min_subnormal(&self) -> f32 {
        crate::hif8::exp2i(self.min_normal_exp - self.mantissa_bits as i32)
    }

    /// Smallest |x| that overflows under round-to-nearest-even: the midpoint between
    /// the max and the next binade step when that midpoint rounds up, else the f32 after it.
    pub fn overflow_threshold(&self) -> f32 {
        let ulp_shift = 23 - self.mantissa_bits;
        let midpoint = self.max_finite_bits + (1 << (ulp_shift - 1));
        let max_is_even = (self.max_finite_bits >> ulp_shift) & 1 == 0;
        let midpoint = if max_is_even { midpoint + 1 } else { midpoint };
        f32::from_bits(midpoint)
    }

    /// Exact fake quantization of one f32 (round to nearest, ties to even).
    pub fn qdq(&self, x: f32, overflow: Overflow) -> f32 {
        let bits = x.to_bits();
        let sign = bits & SIGN_BIT;
        let a = bits & ABS_MASK;
        if a > F32_INF_BITS {
            return x;
        }
        if a == F32_INF_BITS {
            return f32::from_bits(sign | self.overflow_bits(overflow));
        }
        let e = (a >> 23) as i32 - 127;
        let extra = (self.min_normal_exp - e).max(0) as u32;
        let shift = 23 - self.mantissa_bits + extra;
        let rounded = if shift > 24 {
            0
        } else if shift == 24 {
            // Between half the smallest subnormal and the smallest subnormal.
            if a & FRACTION_MASK == 0 {
                0 // exactly half: ties to even (zero)
            } else {
                self.min_subnormal().to_bits()
            }
        } else {
            let significand = a & FRACTION_MASK | SIGNIFICAND_ONE;
            let lsb = (significand >> shift) & 1;
            (a + (1 << (shift - 1)) - 1 + lsb) & !((1u32 << shift) - 1)
        };
        if rounded > self.max_finite_bits {
            return f32::from_bits(sign | self.overflow_bits(overflow));
        }
        f32::from_bits(sign | rounded)
    }

    fn overflow_bits(&self, overflow: Overflow) -> u32 {
        match overflow {
            Overflow::Saturate => self.max_finite_bits,
            Overflow::Inf if self.has_inf => F32_INF_BITS,
            Overflow::Inf => F32_QNAN_BITS,
        }
    }

    /// Decodes one code.
    pub fn decode(&self, code: u8) -> f32 {
        let negative = code & 0x80 != 0;
        let mb = self.mantissa_bits;
        let exp_field = i32::from(code & 0x7F) >> mb;
        let mantissa = u32::from(code) & ((1 << mb) - 1);
        let max_exp_field = (1 << (7 - mb)) - 1;
        let magnitude = if self.has_inf && exp_field == max_exp_field {
            if mantissa == 0 {
                f32::INFINITY
            } else {
                f32::NAN
            }
        } else if !self.has_inf && exp_field == max_exp_field && mantissa == (1 << mb) - 1 {
            f32::NAN
        } else if exp_field == 0 {
            self.min_subnormal() * mantissa as f32
        } else {
            crate::hif8::exp2i(exp_field - self.bias) * (1.0 + mantissa as f32 / (1 << mb) as f32)
        };
        if negative { -magnitude } else { magnitude }
    }

    /// Encodes one f32 (round to nearest even, the given overflow behaviour).
    pub fn encode(&self, x: f32, overflow: Overflow) -> u8 {
        self.code_of_exact(self.qdq(x, overflow))
    }

    /// Code of a value exactly representable in this format (the output of [`Self::qdq`]).
    pub fn code_of_exact(&self, v: f32) -> u8 {
        let bits = v.to_bits();
        let sign_bit = if bits & SIGN_BIT != 0 { 0x80 } else { 0x00 };
        let a = bits & ABS_MASK;
        if a > F32_INF_BITS {
            return sign_bit | self.nan_code;
        }
        let mb = self.mantissa_bits;
        if a == F32_INF_BITS {
            let max_exp_field = (1u8 << (7 - mb)) - 1;
            return if self.has_inf {
                sign_bit | max_exp_field << mb
            } else {
                sign_bit | self.nan_code
            };
        }
        if a == 0 {
            return sign_bit;
        }
        let e = (a >> 23) as i32 - 127;
        if e < self.min_normal_exp {
            let m = (f32::from_bits(a) / self.min_subnormal()) as u8;
            return sign_bit | m;
        }
        let exp_field = (e + self.bias) as u8;
        let m = ((a & FRACTION_MASK) >> (23 - mb)) as u8;
        sign_bit | exp_field << mb | m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn landmarks() {
        assert_eq!(E4M3.max_finite(), 448.0);
        assert_eq!(E4M3.min_subnormal(), 1.0 / 512.0);
        assert_eq!(E5M2.max_finite(), 57344.0);
        assert_eq!(E5M2.min_normal(), 1.0 / 16384.0);
        assert_eq!(
            E4M3.overflow_threshold(),
            f32::from_bits(464.0f32.to_bits() + 1)
        );
        assert_eq!(E5M2.overflow_threshold(), 61440.0);
        assert_eq!(E4M3.decode(0x7E), 448.0);
        assert!(E4M3.decode(0x7F).is_nan());
        assert_eq!(E5M2.decode(0x7C), f32::INFINITY);
        assert_eq!(E5M2.decode(0x7B), 57344.0);
    }

    #[test]
    fn rounding_matches_ml_dtypes_spot_checks() {
        let inf = Overflow::Inf;
        assert_eq!(E4M3.encode(464.0, inf), 0x7E, "tie to even stays at max");
        assert_eq!(E4M3.encode(465.0, inf), 0x7F, "overflow is NaN");
        assert_eq!(E4M3.encode(-500.0, inf), 0xFF);
        assert_eq!(E4M3.encode(f32::NEG_INFINITY, inf), 0xFF);
        assert_eq!(E4M3.encode(-500.0, Overflow::Saturate), 0xFE);
        assert_eq!(
            E4M3.encode(1.0 / 1024.0, inf),
            0x00,
            "half min subnormal ties to zero"
        );
        assert_eq!(E4M3.encode(1.01 / 1024.0, inf), 0x01);
        assert_eq!(E5M2.encode(61440.0, inf), 0x7C);
        assert_eq!(E5M2.encode(61439.0, inf), 0x7B);
        assert_eq!(E5M2.encode(-f32::NAN, inf), 0xFE);
        assert_eq!(E5M2.encode(-1e-30, inf), 0x80, "OCP formats keep -0");
    }
}
