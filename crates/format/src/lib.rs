//! # hif8lab-format
//!
//! The 8-bit number formats of hif8lab, in pure Rust (no GPU, builds for wasm32):
//!
//! - [`hif8`]: HiF8 (HiFloat8) exactly as SPEC.md §2 — decode, encode, ties-away
//!   fake quantization, the optional hybrid (stochastic) rounding, and precision tiers;
//! - [`ocp`]: OCP FP8 E4M3 (fn) and E5M2, round-to-nearest-even;
//! - [`bf16_rne`]: bf16 rounding of f32 for the emulated-bf16 baseline;
//! - [`FakeQuant`]: the single `qdq(x, scale)` entry point the trainer uses for any format,
//!   and [`FormatFacts`], each format's landmarks as data.
//!
//! Scaling (how `scale` is chosen from amax histories) lives in `hif8lab-scaling`, not here.

pub mod hif8;
pub mod ocp;

use std::fmt;
use std::str::FromStr;

/// An 8-bit float format the product can fake-quantize to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Format {
    /// HiF8 (HiFloat8), the paper's format.
    #[default]
    HiF8,
    /// OCP FP8 E4M3 (fn variant: max 448, no Inf).
    E4M3,
    /// OCP FP8 E5M2 (max 57344, with Inf).
    E5M2,
}

impl Format {
    /// Every format, in display order.
    pub const ALL: [Format; 3] = [Format::HiF8, Format::E4M3, Format::E5M2];

    /// Lower-case name used in configs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::HiF8 => "hif8",
            Format::E4M3 => "e4m3",
            Format::E5M2 => "e5m2",
        }
    }

    /// Landmarks of the format.
    pub fn facts(self) -> FormatFacts {
        match self.ocp() {
            None => FormatFacts {
                format: self,
                max_finite: hif8::MAX_FINITE,
                min_normal: hif8::MIN_NORMAL,
                min_subnormal: hif8::MIN_DENORMAL,
                overflow_threshold: hif8::OVERFLOW_THRESHOLD,
                underflow_max: f32::from_bits(0x33FF_FFFF),
                has_inf: true,
                natural_target: hif8::TOP_OF_3BIT_TIER,
            },
            Some(ocp) => FormatFacts {
                format: self,
                max_finite: ocp.max_finite(),
                min_normal: ocp.min_normal(),
                min_subnormal: ocp.min_subnormal(),
                overflow_threshold: ocp.overflow_threshold(),
                underflow_max: ocp.min_subnormal() / 2.0,
                has_inf: ocp.has_inf,
                natural_target: ocp.max_finite(),
            },
        }
    }

    fn ocp(self) -> Option<ocp::OcpFormat> {
        match self {
            Format::HiF8 => None,
            Format::E4M3 => Some(ocp::E4M3),
            Format::E5M2 => Some(ocp::E5M2),
        }
    }

    /// Decodes one code to its exact value.
    pub fn decode(self, code: u8) -> f32 {
        match self.ocp() {
            None => hif8::decode(code),
            Some(f) => f.decode(code),
        }
    }

    /// Encodes one f32 with the format's default rounding (ties-away for HiF8, even for OCP).
    pub fn encode(self, x: f32, overflow: Overflow) -> u8 {
        match self.ocp() {
            None => hif8::encode(x, overflow),
            Some(f) => f.encode(x, overflow),
        }
    }

    /// Quantize-dequantize one f32 with the format's default rounding, no scaling.
    pub fn qdq(self, x: f32, overflow: Overflow) -> f32 {
        match self.ocp() {
            None => hif8::qdq(x, overflow),
            Some(f) => f.qdq(x, overflow),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error for a name that is not one of a closed set: a format, an overflow mode, and the
/// names the other crates parse (a role, a module, a lesson, …): what, the text, the choices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownName {
    /// What kind of name was expected ("format", "overflow", "rounding").
    pub kind: &'static str,
    /// The text given.
    pub given: String,
    /// The accepted spellings.
    pub expected: String,
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} '{}' (expected one of: {})",
            self.kind, self.given, self.expected
        )
    }
}

impl std::error::Error for UnknownName {}

impl FromStr for Format {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "hif8" | "hifloat8" => Ok(Format::HiF8),
            "e4m3" | "e4m3fn" | "float8_e4m3fn" => Ok(Format::E4M3),
            "e5m2" | "float8_e5m2" => Ok(Format::E5M2),
            _ => Err(UnknownName {
                kind: "format",
                given: s.to_owned(),
                expected: "hif8, e4m3, e5m2".into(),
            }),
        }
    }
}

/// What happens to values beyond the format's range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Overflow {
    /// Become non-finite: ±Inf where the format has it (HiF8, E5M2), NaN for E4M3 (fn).
    #[default]
    Inf,
    /// Clamp to ±max finite (Inf inputs too); NaN stays NaN.
    Saturate,
}

impl Overflow {
    /// Lower-case name used in configs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Overflow::Inf => "inf",
            Overflow::Saturate => "saturate",
        }
    }
}

impl FromStr for Overflow {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "inf" | "nonfinite" | "non-finite" => Ok(Overflow::Inf),
            "saturate" | "sat" => Ok(Overflow::Saturate),
            _ => Err(UnknownName {
                kind: "overflow mode",
                given: s.to_owned(),
                expected: "inf, saturate".into(),
            }),
        }
    }
}

/// Rounding mode of a fake quantizer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// The format's standard rounding: ties away from zero for HiF8 (the paper's "TA"),
    /// ties to even for the OCP formats.
    #[default]
    Nearest,
    /// HiF8 only: ties-away for |E| ≤ 3, stochastic above, reproducible from `seed` and the
    /// element index. For OCP formats this is the same as `Nearest`.
    Hybrid {
        /// Seed of the counter-based random stream.
        seed: u32,
    },
}

/// Landmarks of a format, as data (used by plots, the CLI and tests).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FormatFacts {
    /// The format.
    pub format: Format,
    /// Largest finite value.
    pub max_finite: f32,
    /// Smallest normal value.
    pub min_normal: f32,
    /// Smallest non-zero (sub/de-normal) value.
    pub min_subnormal: f32,
    /// |x| at or above this overflows under the default rounding.
    pub overflow_threshold: f32,
    /// Largest |x| that quantizes to zero under the default rounding (just below 2^-23 for
    /// HiF8; half the smallest subnormal for OCP formats, which ties to even zero).
    pub underflow_max: f32,
    /// Whether the format has ±Inf.
    pub has_inf: bool,
    /// The scaling target that suits the format: 15 for HiF8 (top of the 3-bit tier, the
    /// paper's choice), the max finite value for the OCP formats.
    pub natural_target: f32,
}

/// A configured fake quantizer: `qdq(x, scale) = Q(x·scale)/scale`.
///
/// This is the one entry point the trainer (and the GPU kernels' tests) use for any format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FakeQuant {
    /// Target format.
    pub format: Format,
    /// Overflow behaviour.
    pub overflow: Overflow,
    /// Rounding mode.
    pub rounding: Rounding,
}

impl FakeQuant {
    /// A quantizer with the format's defaults (nearest rounding, non-finite overflow).
    pub fn new(format: Format) -> Self {
        FakeQuant {
            format,
            ..Default::default()
        }
    }

    /// Sets the overflow behaviour.
    pub fn with_overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// Sets the rounding mode.
    pub fn with_rounding(mut self, rounding: Rounding) -> Self {
        self.rounding = rounding;
        self
    }

    /// Quantize-dequantize one value at element index 0 (see [`Self::qdq_at`]).
    pub fn qdq(&self, x: f32, scale: f32) -> f32 {
        self.qdq_at(x, scale, 0)
    }

    /// Quantize-dequantize one value: `Q(x·scale)/scale`, both products in f32.
    ///
    /// `index` feeds the counter-based random stream of hybrid rounding and is ignored
    /// otherwise.
    pub fn qdq_at(&self, x: f32, scale: f32, index: u32) -> f32 {
        let scaled = x * scale;
        let q = match (self.format, self.rounding) {
            (Format::HiF8, Rounding::Hybrid { seed }) => {
                hif8::qdq_hybrid(scaled, self.overflow, hash_u32(seed, index))
            }
            (format, _) => format.qdq(scaled, self.overflow),
        };
        q / scale
    }

    /// Fake-quantizes a slice in place; element `i` uses random index `i` for hybrid rounding.
    pub fn qdq_slice(&self, xs: &mut [f32], scale: f32) {
        self.map_elements(xs, scale, |_, x| x);
    }

    /// Writes `qdq(src[i], scale)` to `dst[i]` (the shorter length wins); element `i` uses
    /// random index `i`. The format dispatch happens once, outside the element loop.
    pub fn qdq_into(&self, src: &[f32], dst: &mut [f32], scale: f32) {
        let n = src.len().min(dst.len());
        let (src, dst) = (&src[..n], &mut dst[..n]);
        if let (Format::HiF8, Rounding::Nearest) = (self.format, self.rounding) {
            // The common case: in AVX-512 or AVX2 registers where the build has them, else as
            // a plain zip the compiler vectorizes.
            let ob = hif8::overflow_magnitude_bits(self.overflow);
            #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
            hif8::qdq_scaled_into_avx512(src, dst, scale, ob);
            #[cfg(all(
                target_arch = "x86_64",
                target_feature = "avx2",
                not(target_feature = "avx512f")
            ))]
            hif8::qdq_scaled_into(src, dst, scale, ob);
            #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2")))]
            for (o, x) in dst.iter_mut().zip(src) {
                *o = hif8::qdq_branchless(*x * scale, ob) / scale;
            }
            return;
        }
        self.map_elements(dst, scale, |i, _| src[i]);
    }

    fn map_elements(&self, out: &mut [f32], scale: f32, input: impl Fn(usize, f32) -> f32) {
        let overflow = self.overflow;
        match (self.format.ocp(), self.rounding) {
            (None, Rounding::Hybrid { seed }) => {
                for (i, o) in out.iter_mut().enumerate() {
                    let random = hash_u32(seed, i as u32);
                    *o = hif8::qdq_hybrid(input(i, *o) * scale, overflow, random) / scale;
                }
            }
            (None, Rounding::Nearest) => {
                let ob = hif8::overflow_magnitude_bits(overflow);
                for (i, o) in out.iter_mut().enumerate() {
                    *o = hif8::qdq_branchless(input(i, *o) * scale, ob) / scale;
                }
            }
            (Some(ocp), _) => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = ocp.qdq(input(i, *o) * scale, overflow) / scale;
                }
            }
        }
    }
}

/// Rounds an f32 to the nearest bf16 (ties to even) and back; NaN stays NaN.
pub fn bf16_rne(x: f32) -> f32 {
    half::bf16::from_f32(x).to_f32()
}

/// Counter-based hash giving a well-mixed u32 from a seed and an index (the "lowbias32"
/// integer hash applied twice). The GPU kernels use the same function, so hybrid rounding
/// is reproducible across backends.
pub fn hash_u32(seed: u32, index: u32) -> u32 {
    fn lowbias32(mut x: u32) -> u32 {
        x ^= x >> 16;
        x = x.wrapping_mul(0x7feb_352d);
        x ^= x >> 15;
        x = x.wrapping_mul(0x846c_a68b);
        x ^= x >> 16;
        x
    }
    lowbias32(lowbias32(index ^ seed.wrapping_mul(0x9E37_79B9)).wrapping_add(seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_consistent_with_the_codecs() {
        for format in Format::ALL {
            let f = format.facts();
            assert_eq!(format.qdq(f.max_finite, Overflow::Inf), f.max_finite);
            assert_eq!(format.qdq(f.min_subnormal, Overflow::Inf), f.min_subnormal);
            assert_eq!(format.qdq(f.underflow_max, Overflow::Inf), 0.0, "{format}");
            let above = f32::from_bits(f.underflow_max.to_bits() + 1);
            assert_ne!(format.qdq(above, Overflow::Inf), 0.0, "{format}");
            assert!(!format.qdq(f.overflow_threshold, Overflow::Inf).is_finite());
            let below = f32::from_bits(f.overflow_threshold.to_bits() - 1);
            assert_eq!(format.qdq(below, Overflow::Inf), f.max_finite, "{format}");
            assert_eq!(
                format.qdq(f.overflow_threshold * 4.0, Overflow::Saturate),
                f.max_finite
            );
        }
    }

    #[test]
    fn scale_is_applied_and_removed() {
        let q = FakeQuant::new(Format::HiF8);
        // 0.53·16 = 8.48 lies in the binade [8, 16) where HiF8 steps by 1: it rounds to 8.
        assert_eq!(q.qdq(0.53, 16.0), 8.0 / 16.0);
        assert_eq!(q.qdq(1000.0, 100.0), f32::INFINITY);
        let sat = q.with_overflow(Overflow::Saturate);
        assert_eq!(sat.qdq(1000.0, 100.0), 32768.0 / 100.0);
    }

    #[test]
    fn slice_forms_equal_the_scalar_form() {
        let xs: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.37).collect();
        for format in Format::ALL {
            for rounding in [Rounding::Nearest, Rounding::Hybrid { seed: 3 }] {
                let q = FakeQuant::new(format).with_rounding(rounding);
                let mut inplace = xs.clone();
                q.qdq_slice(&mut inplace, 0.7);
                let mut into = vec![0.0; xs.len()];
                q.qdq_into(&xs, &mut into, 0.7);
                for (i, x) in xs.iter().enumerate() {
                    let want = q.qdq_at(*x, 0.7, i as u32).to_bits();
                    assert_eq!(inplace[i].to_bits(), want);
                    assert_eq!(into[i].to_bits(), want);
                }
            }
        }
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(bf16_rne(1.0 + 1.0 / 256.0), 1.0, "tie to even");
        assert_eq!(
            bf16_rne(1.0 + 3.0 / 256.0),
            1.0 + 4.0 / 256.0,
            "tie to even up"
        );
        assert!(bf16_rne(f32::NAN).is_nan());
    }

    #[test]
    fn names_parse() {
        assert_eq!("HiF8".parse::<Format>(), Ok(Format::HiF8));
        assert_eq!("e4m3fn".parse::<Format>(), Ok(Format::E4M3));
        assert!("fp4".parse::<Format>().is_err());
        assert_eq!("saturate".parse::<Overflow>(), Ok(Overflow::Saturate));
    }
}
