//! Data-parallel helpers of the CPU backend: work split into fixed pieces (independent of
//! the thread count), run on rayon's pool natively and in order in the browser. Elementwise
//! work gives the sequential loop's bits; reductions combine per-piece results with
//! operations that are exact in any order (max, integer sums).

use hif8lab_format::FakeQuant;
#[cfg(test)]
use hif8lab_scaling::stats::tensor_stats;
use hif8lab_scaling::stats::{TensorStats, Threshold, tensor_stats_from};

/// Elements per piece.
pub(crate) const PIECE: usize = 1 << 14;

/// `f(input piece, output piece)` over matching pieces of `src` and `dst`.
pub(crate) fn zip_pieces(
    src: &[f32],
    dst: &mut [f32],
    f: impl Fn(&[f32], &mut [f32]) + Sync + Send,
) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        dst.par_chunks_mut(PIECE)
            .zip(src.par_chunks(PIECE))
            .for_each(|(d, s)| f(s, d));
    }
    #[cfg(target_arch = "wasm32")]
    for (d, s) in dst.chunks_mut(PIECE).zip(src.chunks(PIECE)) {
        f(s, d);
    }
}

/// `f(index of the first element, piece)` over the pieces of `data`.
pub(crate) fn pieces_mut(data: &mut [f32], f: impl Fn(usize, &mut [f32]) + Sync + Send) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        data.par_chunks_mut(PIECE)
            .enumerate()
            .for_each(|(i, d)| f(i * PIECE, d));
    }
    #[cfg(target_arch = "wasm32")]
    for (i, d) in data.chunks_mut(PIECE).enumerate() {
        f(i * PIECE, d);
    }
}

/// `qdq(x·scale)/scale` of every element into `out`. Hybrid (stochastic) rounding draws by
/// element index, so it runs as one piece.
pub(crate) fn qdq_into(quant: &FakeQuant, x: &[f32], out: &mut [f32], scale: f32) {
    match quant.rounding {
        hif8lab_format::Rounding::Hybrid { .. } => quant.qdq_into(x, out, scale),
        _ => zip_pieces(x, out, |s, d| quant.qdq_into(s, d, scale)),
    }
}

/// max |x| over non-NaN elements, as `amax_and_nonfinite` gives it, per piece then max.
pub(crate) fn amax(x: &[f32]) -> f32 {
    let one = |s: &[f32]| hif8lab_scaling::stats::amax_and_nonfinite(s).0.to_bits();
    #[cfg(not(target_arch = "wasm32"))]
    let bits = {
        use rayon::prelude::*;
        x.par_chunks(PIECE).map(one).max()
    };
    #[cfg(target_arch = "wasm32")]
    let bits = x.chunks(PIECE).map(one).max();
    f32::from_bits(bits.unwrap_or(0))
}

/// [`tensor_stats`] of `x`, computed per piece and combined exactly (amax by max, counts by
/// sums): equal to the one-pass result.
pub(crate) fn stats(
    x: &[f32],
    thresholds: &[Threshold],
    active_scale: f32,
    quant: &FakeQuant,
) -> TensorStats {
    let one = |(i, s): (usize, &[f32])| {
        tensor_stats_from(s, (i * PIECE) as u32, thresholds, active_scale, quant)
    };
    #[cfg(not(target_arch = "wasm32"))]
    let parts: Vec<TensorStats> = {
        use rayon::prelude::*;
        x.par_chunks(PIECE).enumerate().map(one).collect()
    };
    #[cfg(target_arch = "wasm32")]
    let parts: Vec<TensorStats> = x.chunks(PIECE).enumerate().map(one).collect();
    // Pieces combine in order: the energies are the same at any thread count.
    let mut total = one((0, &[]));
    for p in parts {
        total.numel += p.numel;
        // Non-negative (or +Inf) floats: larger bits, larger value, as the one pass compares.
        if p.amax.to_bits() > total.amax.to_bits() {
            total.amax = p.amax;
        }
        total.nonfinite += p.nonfinite;
        total.underflow += p.underflow;
        total.signal += p.signal;
        total.noise += p.noise;
        for (t, v) in total.above_est.iter_mut().zip(&p.above_est) {
            *t += v;
        }
        for (t, v) in total.overflow.iter_mut().zip(&p.overflow) {
            *t += v;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_give_the_one_pass_results() {
        let quant = FakeQuant::new(hif8lab_format::Format::HiF8);
        let n = 3 * PIECE + 123;
        let mut x: Vec<f32> = (0..n)
            .map(|i| ((i as f32) * 0.731).sin() * 10f32.powi((i % 9) as i32 - 4))
            .collect();
        x[5] = f32::NAN;
        x[PIECE + 7] = f32::INFINITY;
        x[2 * PIECE + 1] = 123_456.0;
        let th = [
            Threshold {
                est: 1.0,
                scale: 15.0,
            },
            Threshold {
                est: 0.01,
                scale: 1500.0,
            },
        ];
        // Counts and amax exactly; the energies to f64 rounding (pieces sum in another order).
        let (mut p, mut one) = (
            stats(&x, &th, 15.0, &quant),
            tensor_stats(&x, &th, 15.0, &quant),
        );
        assert!(
            (p.signal - one.signal).abs() <= 1e-12 * one.signal,
            "{p:?} {one:?}"
        );
        assert!(
            (p.noise - one.noise).abs() <= 1e-12 * one.noise,
            "{p:?} {one:?}"
        );
        assert!(one.noise > 0.0 && one.signal > one.noise);
        (p.signal, p.noise, one.signal, one.noise) = (0.0, 0.0, 0.0, 0.0);
        assert_eq!(p, one);
        assert_eq!(
            amax(&x).to_bits(),
            hif8lab_scaling::stats::amax_and_nonfinite(&x).0.to_bits()
        );
        let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
        quant.qdq_into(&x, &mut a, 3.0);
        qdq_into(&quant, &x, &mut b, 3.0);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b));
    }
}
