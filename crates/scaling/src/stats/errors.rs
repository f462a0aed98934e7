//! The quantization error of a call: signal and noise energies summed in a fixed order of
//! lanes (so every implementation, scalar or SIMD, gives the same bits), and the SQNR.

use hif8lab_format::FakeQuant;

/// SQNR reported when a call's quantization error is exactly zero (every value
/// representable): a cap, not a measurement.
pub const SQNR_CAP_DB: f32 = 300.0;

/// Signal-to-quantization-noise ratio in dB, 10·log10(signal / noise); `None` when there is
/// no signal (an all-zero tensor), [`SQNR_CAP_DB`] when the noise is zero.
pub fn sqnr_db(signal: f64, noise: f64) -> Option<f32> {
    if signal.is_nan() || signal <= 0.0 || !signal.is_finite() || !noise.is_finite() {
        None
    } else if noise <= 0.0 {
        Some(SQNR_CAP_DB)
    } else {
        Some(((10.0 * (signal / noise).log10()) as f32).min(SQNR_CAP_DB))
    }
}

/// Signal and quantization-noise energies of `x` fake-quantized at `scale`: f64 sums in
/// [`ENERGY_LANES`] interleaved lanes (element `i` into lane `i % 8`, each lane in element
/// order, then the lanes in order), so the loop vectorizes instead of waiting on one chain
/// of additions; the order is fixed by the element index alone. Element `i` uses random
/// index `first_index + i` for hybrid rounding, as the fake-quantization of the same tensor
/// does. Non-finite inputs and elements whose quantized value is not finite (overflow
/// without saturation) are left out.
pub fn quant_error(x: &[f32], first_index: u32, scale: f32, quant: &FakeQuant) -> (f64, f64) {
    energies(x, |i, v| {
        quant.qdq_at(v, scale, first_index.wrapping_add(i as u32))
    })
}

/// [`quant_error`] of `x` whose fake-quantized values `q` are already computed (same sums,
/// same order: equal results when `q` is what the quantizer gives). The CPU backend runs
/// the same sums in SIMD registers ([`super::simd`]).
pub fn quant_error_of(x: &[f32], q: &[f32]) -> (f64, f64) {
    let q = &q[..x.len()];
    let given = |i: usize, _: f32| q[i];
    let whole = x.len() / ENERGY_LANES * ENERGY_LANES;
    with_tail(block_lanes(&x[..whole], &given), x, whole, &given)
}

/// A block of `L` elements as an array (`x` has exactly `L`, from `chunks_exact`).
#[inline(always)]
pub(crate) fn block<const L: usize>(x: &[f32]) -> &[f32; L] {
    x.try_into()
        .unwrap_or_else(|_| panic!("stats: a block of {} elements, {L} expected", x.len()))
}

/// Lanes of the energy sums.
pub const ENERGY_LANES: usize = 8;

/// Σv² and Σ(v − q)² over the elements whose `v` and `q = quantized(i, v)` are finite, in
/// [`ENERGY_LANES`] lanes.
#[inline(always)]
fn energies(x: &[f32], quantized: impl Fn(usize, f32) -> f32) -> (f64, f64) {
    let whole = x.len() / ENERGY_LANES * ENERGY_LANES;
    with_tail(block_lanes(&x[..whole], &quantized), x, whole, &quantized)
}

/// Per-lane energy sums: lane l of each.
pub type Lanes = ([f64; ENERGY_LANES], [f64; ENERGY_LANES]);

/// The lane sums over `x`, whole blocks of [`ENERGY_LANES`] elements: lane l takes element
/// l of each block, blocks in order.
#[inline(always)]
pub fn block_lanes(x: &[f32], quantized: &impl Fn(usize, f32) -> f32) -> Lanes {
    const L: usize = ENERGY_LANES;
    let (mut signal, mut noise) = ([0.0f64; L], [0.0f64; L]);
    for (c, block) in x.chunks_exact(L).enumerate() {
        for l in 0..L {
            let (s, n) = error_terms(block[l], quantized(c * L + l, block[l]));
            signal[l] += s;
            noise[l] += n;
        }
    }
    (signal, noise)
}

/// `lanes` of `x[..whole]` plus the elements from `whole` on (element `whole + l` into lane
/// l), then the lanes summed in order.
#[inline(always)]
pub fn with_tail(
    (mut signal, mut noise): Lanes,
    x: &[f32],
    whole: usize,
    quantized: &impl Fn(usize, f32) -> f32,
) -> (f64, f64) {
    for (l, v) in x[whole..].iter().enumerate() {
        let (s, n) = error_terms(*v, quantized(whole + l, *v));
        signal[l] += s;
        noise[l] += n;
    }
    (
        signal.iter().fold(0.0, |a, b| a + b),
        noise.iter().fold(0.0, |a, b| a + b),
    )
}

/// One element's v² and (v − q)², both 0 (adding nothing) when `v` or `q` is not finite.
#[inline(always)]
pub fn error_terms(v: f32, q: f32) -> (f64, f64) {
    // Finite: the magnitude's bits below those of infinity. When either is not, both
    // become +0.0 (bit masks, no branch): terms of exactly 0.
    let finite = |x: f32| (x.to_bits() & 0x7FFF_FFFF) < 0x7F80_0000;
    let mask = 0u32.wrapping_sub(u32::from(finite(v) & finite(q)));
    let (v, q) = (
        f32::from_bits(v.to_bits() & mask),
        f32::from_bits(q.to_bits() & mask),
    );
    let (v, e) = (f64::from(v), f64::from(v) - f64::from(q));
    (v * v, e * e)
}
