//! Data-parallel helpers of the CPU backend: work split into fixed pieces (independent of
//! the thread count), run on rayon's pool natively and in order in the browser. Elementwise
//! work gives the sequential loop's bits; reductions combine per-piece results with
//! operations that are exact in any order (max, integer sums).

use super::simd::stats::tensor_counts_given;
use hif8lab_format::FakeQuant;
#[cfg(test)]
use hif8lab_scaling::stats::tensor_stats;
#[cfg(test)]
use hif8lab_scaling::stats::tensor_stats_from;
use hif8lab_scaling::stats::{CountBounds, TensorStats, Threshold};

/// Elements per piece.
pub(crate) const PIECE: usize = 1 << 14;

/// Elements per piece of the statistics pass ([`stats_qdq`]): smaller than [`PIECE`], so
/// that the tensors of a small model (8–20 K elements) still split over two threads (the
/// pass does several operations per element; the amax pass, one, keeps [`PIECE`]).
pub(crate) const STATS_PIECE: usize = 1 << 12;

/// Elements per block of a streaming loop between prefetch hints (four cache lines).
pub(crate) const STREAM_BLOCK: usize = 64;

/// How far ahead the hints reach, in elements (2 KiB).
const AHEAD: usize = 512;

/// Hints that the four cache lines [`AHEAD`] past the start of `x` will be read soon
/// (x86-64; nothing elsewhere). In a training step most tensors are no longer in cache when
/// an elementwise op streams through them, and the hardware's prefetch did not keep up.
#[inline(always)]
pub(crate) fn will_read(x: &[f32]) {
    hint::<false>(x, AHEAD, STREAM_BLOCK);
}

/// Like [`will_read`], for lines that will be written.
#[inline(always)]
pub(crate) fn will_write(x: &[f32]) {
    hint::<true>(x, AHEAD, STREAM_BLOCK);
}

/// A prefetch of each cache line (16 f32) of elements `ahead..ahead + len` past the start
/// of `x`, for writing or for reading.
#[inline(always)]
fn hint<const WRITE: bool>(x: &[f32], ahead: usize, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..len).step_by(16) {
        use std::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch};
        let at = x.as_ptr().wrapping_add(ahead + line).cast();
        // SAFETY: a prefetch only hints at an address (formed with `wrapping_add`, never
        // dereferenced) and cannot fault.
        #[allow(unsafe_code)]
        unsafe {
            if WRITE {
                _mm_prefetch::<_MM_HINT_ET0>(at);
            } else {
                _mm_prefetch::<_MM_HINT_T0>(at);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, ahead, len);
}

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
    sized_mut(data, PIECE, f);
}

/// `f(index of the first element, piece)` over pieces of `size` elements of `data`.
pub(crate) fn sized_mut(
    data: &mut [f32],
    size: usize,
    f: impl Fn(usize, &mut [f32]) + Sync + Send,
) {
    let size = size.max(1);
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        data.par_chunks_mut(size)
            .enumerate()
            .for_each(|(i, d)| f(i * size, d));
    }
    #[cfg(target_arch = "wasm32")]
    for (i, d) in data.chunks_mut(size).enumerate() {
        f(i * size, d);
    }
}

/// Rows per piece for rows of `len` elements: whole rows, about [`PIECE`] elements.
fn rows_per_piece(len: usize) -> usize {
    (PIECE / len.max(1)).max(1)
}

/// `f(first row, rows)` over pieces of whole rows (`len` elements each) of `out`.
pub(crate) fn rows_mut(out: &mut [f32], len: usize, f: impl Fn(usize, &mut [f32]) + Sync + Send) {
    let len = len.max(1);
    sized_mut(out, rows_per_piece(len) * len, |at, o| f(at / len, o));
}

/// `f(first row, a rows, b rows)` over pieces of whole rows of `a` (`a_len` elements each)
/// and the matching rows of `b` (`b_len` each).
pub(crate) fn rows2_mut(
    a: &mut [f32],
    a_len: usize,
    b: &mut [f32],
    b_len: usize,
    f: impl Fn(usize, &mut [f32], &mut [f32]) + Sync + Send,
) {
    let per = rows_per_piece(a_len);
    let (a_len, b_len) = (a_len.max(1), b_len.max(1));
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        a.par_chunks_mut(per * a_len)
            .zip(b.par_chunks_mut(per * b_len))
            .enumerate()
            .for_each(|(i, (x, y))| f(i * per, x, y));
    }
    #[cfg(target_arch = "wasm32")]
    for (i, (x, y)) in a
        .chunks_mut(per * a_len)
        .zip(b.chunks_mut(per * b_len))
        .enumerate()
    {
        f(i * per, x, y);
    }
}

/// `f(index of the first element, a piece, b piece, c piece)` over matching pieces of three
/// equally long slices.
pub(crate) fn pieces3_mut(
    a: &mut [f32],
    b: &mut [f32],
    c: &mut [f32],
    f: impl Fn(usize, &mut [f32], &mut [f32], &mut [f32]) + Sync + Send,
) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        a.par_chunks_mut(PIECE)
            .zip(b.par_chunks_mut(PIECE))
            .zip(c.par_chunks_mut(PIECE))
            .enumerate()
            .for_each(|(i, ((x, y), z))| f(i * PIECE, x, y, z));
    }
    #[cfg(target_arch = "wasm32")]
    for (i, ((x, y), z)) in a
        .chunks_mut(PIECE)
        .zip(b.chunks_mut(PIECE))
        .zip(c.chunks_mut(PIECE))
        .enumerate()
    {
        f(i * PIECE, x, y, z);
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

/// The codes `Q(x·scale)` of every element into `out` (what `qdq_into` writes before its
/// division by `scale`: the same scaled value, the same element index for hybrid rounding),
/// for the bf16 GEMM.
pub(crate) fn codes_into(quant: &FakeQuant, x: &[f32], out: &mut [f32], scale: f32) {
    // Q(y·1)/1 = Q(y): the codec's own kernels on y = x·scale, a block at a time.
    let block = |s: &[f32], d: &mut [f32]| {
        let mut y = [0.0f32; STREAM_BLOCK];
        for (s, d) in s.chunks(STREAM_BLOCK).zip(d.chunks_mut(STREAM_BLOCK)) {
            for (y, x) in y.iter_mut().zip(s) {
                *y = x * scale;
            }
            quant.qdq_into(&y[..s.len()], d, 1.0);
        }
    };
    match quant.rounding {
        hif8lab_format::Rounding::Hybrid { .. } => {
            for (i, (o, v)) in out.iter_mut().zip(x).enumerate() {
                *o = quant.qdq_at(v * scale, 1.0, i as u32);
            }
        }
        _ => zip_pieces(x, out, block),
    }
}

/// max |x| over non-NaN elements and the count of non-finite ones, as
/// `amax_and_nonfinite` gives them: per piece, then the max and the sum.
pub(crate) fn amax(x: &[f32]) -> (f32, u64) {
    let one = |s: &[f32]| {
        let (amax, nonfinite) = super::simd::stats::amax_and_nonfinite(s);
        (amax.to_bits(), nonfinite)
    };
    let both = |a: (u32, u64), b: (u32, u64)| (a.0.max(b.0), a.1 + b.1);
    #[cfg(not(target_arch = "wasm32"))]
    let (bits, nonfinite) = {
        use rayon::prelude::*;
        x.par_chunks(PIECE).map(one).reduce(|| (0, 0), both)
    };
    #[cfg(target_arch = "wasm32")]
    let (bits, nonfinite) = x.chunks(PIECE).map(one).fold((0, 0), both);
    (f32::from_bits(bits), nonfinite)
}

/// [`tensor_stats`] of `x`, computed per piece and combined exactly (amax by max, counts by
/// sums): equal to the one-pass result. (The backend uses [`stats_qdq`]; this two-pass form
/// is its reference.)
#[cfg(test)]
pub(crate) fn stats(
    x: &[f32],
    thresholds: &[Threshold],
    active_scale: f32,
    quant: &FakeQuant,
) -> TensorStats {
    let one = |(i, s): (usize, &[f32])| {
        tensor_stats_from(s, (i * STATS_PIECE) as u32, thresholds, active_scale, quant)
    };
    #[cfg(not(target_arch = "wasm32"))]
    let parts: Vec<TensorStats> = {
        use rayon::prelude::*;
        x.par_chunks(STATS_PIECE).enumerate().map(one).collect()
    };
    #[cfg(target_arch = "wasm32")]
    let parts: Vec<TensorStats> = x.chunks(STATS_PIECE).enumerate().map(one).collect();
    combine(one((0, &[])), parts)
}

/// [`stats`] and the fake quantization of `x` at `active_scale` into `out`, with the codec
/// run once per element: `out` is exactly [`qdq_into`]'s result, and the statistics are
/// exactly [`stats`]' (its error sums read `out` instead of quantizing again). `measured`:
/// [`amax`] of `x` where the caller has it (the amax op's), else it is measured here.
pub(crate) fn stats_qdq(
    x: &[f32],
    out: &mut [f32],
    thresholds: &[Threshold],
    active_scale: f32,
    quant: &FakeQuant,
    measured: Option<(f32, u64)>,
) -> TensorStats {
    // The amax first: every count from a bound above it is zero without a pass. The bounds
    // once for all pieces.
    let (amax, nonfinite) = measured.unwrap_or_else(|| amax(x));
    let bounds = CountBounds::new(thresholds, active_scale, quant);
    let one = |(s, q): (&[f32], &[f32])| tensor_counts_given(s, q, &bounds, amax);
    // Each piece fake-quantized and counted in one task (one pass over the pool, the piece
    // still in cache); hybrid rounding draws by element index, so it quantizes as one piece
    // first.
    let hybrid = matches!(quant.rounding, hif8lab_format::Rounding::Hybrid { .. });
    if hybrid {
        quant.qdq_into(x, out, active_scale);
    }
    let piece = |(s, q): (&[f32], &mut [f32])| {
        if hybrid {
            one((s, q))
        } else {
            super::simd::stats::tensor_qdq_counts(s, q, quant, active_scale, &bounds, amax)
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    let parts: Vec<TensorStats> = {
        use rayon::prelude::*;
        x.par_chunks(STATS_PIECE)
            .zip(out.par_chunks_mut(STATS_PIECE))
            .map(piece)
            .collect()
    };
    #[cfg(target_arch = "wasm32")]
    let parts: Vec<TensorStats> = x
        .chunks(STATS_PIECE)
        .zip(out.chunks_mut(STATS_PIECE))
        .map(piece)
        .collect();
    let mut total = combine(one((&[], &[])), parts);
    (total.amax, total.nonfinite) = (amax, nonfinite);
    total
}

/// Per-piece statistics combined in piece order onto `total` (an empty piece's): amax by
/// max, counts by sums, energies summed in order — the same at any thread count.
fn combine(mut total: TensorStats, parts: Vec<TensorStats>) -> TensorStats {
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
        let (whole, nonfinite) = hif8lab_scaling::stats::amax_and_nonfinite(&x);
        let (pieced, pieced_nonfinite) = amax(&x);
        assert_eq!(
            (pieced.to_bits(), pieced_nonfinite),
            (whole.to_bits(), nonfinite)
        );
        let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
        quant.qdq_into(&x, &mut a, 3.0);
        qdq_into(&quant, &x, &mut b, 3.0);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b));
    }

    /// The one-codec-pass statistics equal the two-pass ones bit for bit (energies too: same
    /// pieces, same order) and their output equals the fake quantization's, for round to
    /// nearest and for hybrid rounding, HiF8 and an OCP format.
    #[test]
    fn stats_with_qdq_equal_stats_then_qdq() {
        use hif8lab_format::{Format, Rounding};
        let n = 3 * PIECE + 77;
        let mut x: Vec<f32> = (0..n)
            .map(|i| ((i as f32) * 0.37).cos() * 10f32.powi((i % 11) as i32 - 5))
            .collect();
        x[9] = f32::NAN;
        x[PIECE + 3] = f32::NEG_INFINITY;
        x[2 * PIECE] = 9.0e4;
        // Without the infinity the amax is finite (9e4): the overflow bound (about 4.4e3)
        // is below it and counted, the estimates 1e5 and 1e6 above it and skipped.
        let mut finite = x.clone();
        finite[PIECE + 3] = 1.0;
        let th = [
            Threshold {
                est: 2.0,
                scale: 7.5,
            },
            Threshold {
                est: 1.0e5,
                scale: 1.0e-3,
            },
            Threshold {
                est: 1.0e6,
                scale: 7.5,
            },
        ];
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for x in [x, finite] {
            for (format, rounding) in [
                (Format::HiF8, Rounding::Nearest),
                (Format::HiF8, Rounding::Hybrid { seed: 3 }),
                (Format::E4M3, Rounding::Nearest),
            ] {
                let mut quant = FakeQuant::new(format);
                quant.rounding = rounding;
                let two = stats(&x, &th, 7.5, &quant);
                let mut q = vec![0.0; n];
                qdq_into(&quant, &x, &mut q, 7.5);
                let mut out = vec![1.0; n];
                let one = stats_qdq(&x, &mut out, &th, 7.5, &quant, None);
                assert_eq!(bits(&out), bits(&q), "{format} {rounding:?}");
                assert_eq!(one, two, "{format} {rounding:?}");
                assert_eq!(one.signal.to_bits(), two.signal.to_bits());
                assert_eq!(one.noise.to_bits(), two.noise.to_bits());
                // With the amax measured beforehand (the amax op's): the same statistics.
                let measured = amax(&x);
                assert_eq!((measured.0, measured.1), (two.amax, two.nonfinite));
                let given = stats_qdq(&x, &mut out, &th, 7.5, &quant, Some(measured));
                assert_eq!(given, two, "{format} {rounding:?}");
            }
        }
    }
}
