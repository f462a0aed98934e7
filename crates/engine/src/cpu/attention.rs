//! Causal attention on the CPU, forward and backward: one task per (sequence, head) forward,
//! per (sequence, kv head) backward (its group's heads, then dK and dV from them) — run in
//! parallel natively (rayon) and in order in the browser. Every output element is accumulated in exactly the order of the plain loops in
//! `ops::reference` (kept as the test oracle), so results are bit-identical to them and do
//! not depend on the thread count; the loops are reordered only so that the innermost one
//! runs along `head_dim` over contiguous memory.

use crate::{AttentionShape, CachedAttentionShape};

use super::ops::AttentionGrads;
use super::simd::{F8, F16, LANES, Lanes, WIDE};

/// The rows (`head_dim` elements each) of a [batch, seq, heads, head_dim] tensor, grouped
/// per (sequence, head): group `b·heads + h` holds that head's rows t = 0..seq in order. The
/// tasks write their outputs straight into them (no per-task blocks copied back after).
fn head_rows<'a>(x: &'a mut [f32], s: &AttentionShape, heads: usize) -> Vec<Vec<&'a mut [f32]>> {
    let mut groups: Vec<Vec<&mut [f32]>> = (0..s.batch * heads)
        .map(|_| Vec::with_capacity(s.seq))
        .collect();
    let len = s.batch * s.seq * heads * s.head_dim;
    for (r, row) in x[..len].chunks_exact_mut(s.head_dim.max(1)).enumerate() {
        let (b, h) = (r / (s.seq * heads), r % heads);
        groups[b * heads + h].push(row);
    }
    groups
}

/// Rows per register block of the kernels below.
const R: usize = 4;
/// Lanes of the narrow accumulators ([`F8`]: one AVX register natively, two simd128
/// registers in wasm), of the plain loops' tails and of [`transposed`]'s padding. Where the
/// build has AVX-512 ([`WIDE`]) the kernels take [`F16`] (one AVX-512 register) wherever 16
/// lanes fit, then [`F8`]: each lane's sum is the same chain at any width.
const W: usize = LANES;

/// `out[r·out_stride + j] = Σ_d a[r][d]·bt[d·stride + j]` for the `RR` rows and every
/// `j < ncols`, each sum over d ascending from 0.0 (the plain loops' order per element), in
/// register blocks of `RR` rows × `V`·`W` columns. `bt` is [head_dim][stride] with `stride` a
/// multiple of `W` ≥ `ncols` (zero padding): columns past `ncols` in the last block are
/// computed and dropped.
fn dots_block<const RR: usize>(
    out: &mut [f32],
    out_stride: usize,
    a: [&[f32]; RR],
    bt: &[f32],
    stride: usize,
    ncols: usize,
) {
    let mut j = 0;
    while j < ncols {
        // Two vectors of columns where both exist (more independent sums in flight); the
        // last one may run into the padding (up to `stride`).
        if WIDE && j + 16 < ncols && j + 32 <= stride {
            dots_vectors::<RR, 2, F16>(out, out_stride, a, bt, stride, j, ncols);
            j += 32;
        } else if WIDE && j + W < ncols && j + 16 <= stride {
            dots_vectors::<RR, 1, F16>(out, out_stride, a, bt, stride, j, ncols);
            j += 16;
        } else if j + W < ncols && j + 2 * W <= stride {
            dots_vectors::<RR, 2, F8>(out, out_stride, a, bt, stride, j, ncols);
            j += 2 * W;
        } else {
            dots_vectors::<RR, 1, F8>(out, out_stride, a, bt, stride, j, ncols);
            j += W;
        }
    }
}

/// One register block of [`dots_block`]: `RR` rows × `V` vectors of columns from `j`.
#[inline(always)]
fn dots_vectors<const RR: usize, const V: usize, L: Lanes>(
    out: &mut [f32],
    out_stride: usize,
    a: [&[f32]; RR],
    bt: &[f32],
    stride: usize,
    j: usize,
    ncols: usize,
) {
    let hd = a[0].len();
    let a = a.map(|r| &r[..hd]);
    let mut acc = [[L::zero(); V]; RR];
    for d in 0..hd {
        let row = &bt[d * stride + j..];
        let cols: [L; V] = std::array::from_fn(|v| L::at(&row[v * L::W..]));
        for r in 0..RR {
            let x = a[r][d];
            for v in 0..V {
                acc[r][v] = acc[r][v].add_scaled(x, cols[v]);
            }
        }
    }
    for (r, accr) in acc.iter().enumerate() {
        for (v, lanes) in accr.iter().enumerate() {
            let at = j + v * L::W;
            if at >= ncols {
                break;
            }
            let o = r * out_stride + at;
            if ncols - at >= L::W {
                lanes.store_at(&mut out[o..]);
            } else {
                lanes.store_prefix(&mut out[o..o + ncols - at]);
            }
        }
    }
}

/// `out[r][d] = Σ_{j ≤ i0 + r} p[r][j]·x[j][d]` for the `RR` consecutive causal rows
/// `i0..i0 + RR` (row `r` sums over j ascending from 0.0 up to its own position, the plain
/// loops' order), `x` rows at `x_at(j)` of `hd` elements; lanes in register blocks.
fn weighted_rows<const RR: usize>(
    out: [&mut [f32]; RR],
    p: [&[f32]; RR],
    x: &[f32],
    x_at: impl Fn(usize) -> usize,
    i0: usize,
) {
    let hd = out[0].len();
    let mut out = out;
    let mut dc = 0;
    while dc < hd {
        if WIDE && dc + 32 <= hd {
            weighted_vectors::<RR, 2, F16>(&mut out, p, x, &x_at, dc, i0);
            dc += 32;
            continue;
        }
        if WIDE && dc + 16 <= hd {
            weighted_vectors::<RR, 1, F16>(&mut out, p, x, &x_at, dc, i0);
            dc += 16;
            continue;
        }
        if dc + 2 * W <= hd {
            weighted_vectors::<RR, 2, F8>(&mut out, p, x, &x_at, dc, i0);
            dc += 2 * W;
            continue;
        }
        if dc + W <= hd {
            weighted_vectors::<RR, 1, F8>(&mut out, p, x, &x_at, dc, i0);
            dc += W;
            continue;
        }
        // The last lanes of a head_dim that is no multiple of W: plain loops.
        let w = hd - dc;
        let mut acc = [[0.0f32; W]; RR];
        for j in 0..i0 + RR {
            let xj = &x[x_at(j) + dc..x_at(j) + dc + w];
            // Row r takes position j only up to its own position i0 + r.
            for (accr, pr) in acc.iter_mut().zip(&p).skip(j.saturating_sub(i0)) {
                let c = pr[j];
                for (o, v) in accr.iter_mut().zip(xj) {
                    *o += c * v;
                }
            }
        }
        for (o, accr) in out.iter_mut().zip(&acc) {
            o[dc..dc + w].copy_from_slice(&accr[..w]);
        }
        dc = hd;
    }
}

/// `V` vectors of lanes from `dc` of [`weighted_rows`]: every row takes positions
/// `0..=i0` (registers), then the triangle (position i0 + e adds only to the rows at or
/// below it).
#[inline(always)]
fn weighted_vectors<const RR: usize, const V: usize, L: Lanes>(
    out: &mut [&mut [f32]; RR],
    p: [&[f32]; RR],
    x: &[f32],
    x_at: &impl Fn(usize) -> usize,
    dc: usize,
    i0: usize,
) {
    let mut acc = weighted_full::<RR, V, L>(p, x, x_at, dc, i0);
    for e in 1..RR {
        let j = i0 + e;
        let xj: [L; V] = std::array::from_fn(|v| L::at(&x[x_at(j) + dc + v * L::W..]));
        for r in e..RR {
            let c = p[r][j];
            for v in 0..V {
                acc[r][v] = acc[r][v].add_scaled(c, xj[v]);
            }
        }
    }
    for (o, accr) in out.iter_mut().zip(&acc) {
        for (v, lanes) in accr.iter().enumerate() {
            lanes.store_at(&mut o[dc + v * L::W..]);
        }
    }
}

/// Sums of `R` positions × `V` vectors of lanes (dK's or dV's).
type KvAcc<L, const V: usize> = [[L; V]; R];

/// One head's rows `rows` into the sums of `R` consecutive positions: position `r` takes
/// `coef[coef_at(i) + r]·x[x_at(i) + v·W ..]` from each row `i`, rows ascending — for dK the
/// scores' gradients and Q, for dV the probabilities and dOut. `active(i)`: how many of the
/// positions row `i` reaches (the causal triangle; `R` from the block's last position on).
/// The sums live in registers: copied in, and out once at the end (updated in place, or
/// returned by value, they were written to memory after every row — eight stores a row,
/// the loop's bottleneck).
#[inline(never)]
fn kv_rows<const V: usize, L: Lanes>(
    sums: &mut KvAcc<L, V>,
    (coef, coef_at): (&[f32], impl Fn(usize) -> usize),
    (x, x_at): (&[f32], impl Fn(usize) -> usize),
    rows: std::ops::Range<usize>,
    active: impl Fn(usize) -> usize,
) {
    let mut acc = *sums;
    for i in rows {
        let xa = x_at(i);
        let xs: [L; V] = std::array::from_fn(|v| L::at(&x[xa + v * L::W..]));
        let n = active(i);
        let c = &coef[coef_at(i)..coef_at(i) + n];
        // The whole block as its own call: a constant trip count the compiler unrolls.
        if n == R {
            kv_add(&mut acc, c, xs, R);
        } else {
            kv_add(&mut acc, c, xs, n);
        }
    }
    *sums = acc;
}

/// Adds `c[r]·xs` to the sums of the first `n` positions.
#[inline(always)]
fn kv_add<const V: usize, L: Lanes>(acc: &mut KvAcc<L, V>, c: &[f32], xs: [L; V], n: usize) {
    for r in 0..n {
        for v in 0..V {
            acc[r][v] = acc[r][v].add_scaled(c[r], xs[v]);
        }
    }
}

/// `acc[r][v] = Σ_j p[r][j]·x[x_at(j) + dc + v·W ..]` for j in `0..=i0` ascending from 0.0
/// (every row takes every j: registers).
#[inline(never)]
fn weighted_full<const RR: usize, const V: usize, L: Lanes>(
    p: [&[f32]; RR],
    x: &[f32],
    x_at: &impl Fn(usize) -> usize,
    dc: usize,
    i0: usize,
) -> [[L; V]; RR] {
    let p = p.map(|r| &r[..=i0]);
    let mut acc = [[L::zero(); V]; RR];
    for j in 0..=i0 {
        let xj: [L; V] = std::array::from_fn(|v| L::at(&x[x_at(j) + dc + v * L::W..]));
        for r in 0..RR {
            let c = p[r][j];
            for v in 0..V {
                acc[r][v] = acc[r][v].add_scaled(c, xj[v]);
            }
        }
    }
    acc
}

/// dK (`coef` the group's scores' gradients, `x` Q, `mult` the score scale) or dV (the
/// group's probabilities, dOut, 1: ×1 is exact) of positions `j0..j0 + rows` of kv head
/// `kvh` of sequence `b`, lanes `dc..dc + V·W`, into `out` (its rows by position): each sum over
/// the group's heads, then rows i ascending from its position, as in the reference. `coef`
/// holds the group's [seq, seq] matrices one after another.
fn kv_block<const V: usize, L: Lanes>(
    s: &AttentionShape,
    (b, kvh, j0, rows, dc): (usize, usize, usize, usize, usize),
    (coef, x): (&[f32], &[f32]),
    mult: f32,
    out: &mut [&mut [f32]],
) {
    let (seq, group) = (s.seq, s.heads / s.kv_heads);
    let mut acc: KvAcc<L, V> = [[L::zero(); V]; R];
    // From row `full` on, every position of the block takes every row.
    let full = j0 + rows - 1;
    for gi in 0..group {
        let h = kvh * group + gi;
        // `coef` holds the group's [seq, seq] matrices, head gi's at gi·seq².
        let base = gi * seq * seq;
        let coef_at = |i: usize| base + i * seq + j0;
        let x_at = |i: usize| at(s, s.heads, b, i, h) + dc;
        kv_rows(&mut acc, (coef, coef_at), (x, x_at), j0..full, |i| {
            i - j0 + 1
        });
        kv_rows(&mut acc, (coef, coef_at), (x, x_at), full..seq, |_| rows);
    }
    for (r, accr) in acc.iter().enumerate().take(rows) {
        for (v, lanes) in accr.iter().enumerate() {
            lanes
                .mul(L::splat(mult))
                .store_at(&mut out[j0 + r][dc + v * L::W..]);
        }
    }
}

/// Rows of kv head `kvh` of sequence `b` of a [batch, seq, kv_heads, head_dim] tensor,
/// transposed to [head_dim, stride] (`stride`: seq rounded up to `W`, zero padded).
fn transposed(x: &[f32], s: &AttentionShape, b: usize, kvh: usize) -> (Vec<f32>, usize) {
    let (seq, hd) = (s.seq, s.head_dim);
    let stride = seq.div_ceil(W) * W;
    let mut t = vec![0.0f32; hd * stride];
    for j in 0..seq {
        let o = at(s, s.kv_heads, b, j, kvh);
        for (d, v) in x[o..o + hd].iter().enumerate() {
            t[d * stride + j] = *v;
        }
    }
    (t, stride)
}

/// Offset of row `t`, head `h` of a [batch, seq, heads, head_dim] tensor.
fn at(s: &AttentionShape, heads: usize, b: usize, t: usize, h: usize) -> usize {
    ((b * s.seq + t) * heads + h) * s.head_dim
}

/// Row blocks of a causal [seq, seq] matrix: (first row, rows) in blocks of `R`, the last
/// one shorter.
fn row_blocks(seq: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..seq).step_by(R).map(move |i0| (i0, R.min(seq - i0)))
}

/// `f` on `rows` consecutive rows of `m` (row length `len`) from row `i0`, as an array of
/// `RR` slices.
fn rows_of<const RR: usize>(m: &[f32], len: usize, i0: usize) -> [&[f32]; RR] {
    std::array::from_fn(|r| &m[(i0 + r) * len..(i0 + r + 1) * len])
}

/// Rows `i0..i0 + RR` of a list of rows, as an array.
fn rows_mut<'a, const RR: usize>(m: &'a mut [&mut [f32]], i0: usize) -> [&'a mut [f32]; RR] {
    let mut it = m[i0..i0 + RR].iter_mut();
    std::array::from_fn(|_| it.next().map(|r| &mut **r).unwrap_or_default())
}

/// Score rows `i0..i0 + rows` of one (b, h): `a` rows at `a_at(i)`, against `bt`.
fn score_rows(
    out: &mut [f32],
    seq: usize,
    a: &[f32],
    a_at: impl Fn(usize) -> usize,
    hd: usize,
    (bt, stride): (&[f32], usize),
    (i0, rows): (usize, usize),
) {
    let ncols = i0 + rows;
    let row = |r: usize| &a[a_at(i0 + r)..a_at(i0 + r) + hd];
    let out = &mut out[i0 * seq..];
    if rows == R {
        dots_block::<R>(out, seq, std::array::from_fn(row), bt, stride, ncols);
    } else {
        for r in 0..rows {
            dots_block::<1>(&mut out[r * seq..], seq, [row(r)], bt, stride, i0 + r + 1);
        }
    }
}

/// `out` rows `i0..i0 + rows` (of `out`'s rows, each `head_dim` long) from causal weight
/// rows of `p`.
fn weighted(
    out: &mut [&mut [f32]],
    p: &[f32],
    seq: usize,
    x: &[f32],
    x_at: impl Fn(usize) -> usize + Copy,
    (i0, rows): (usize, usize),
) {
    if rows == R {
        weighted_rows::<R>(rows_mut(out, i0), rows_of(p, seq, i0), x, x_at, i0);
    } else {
        for i in i0..i0 + rows {
            weighted_rows::<1>(rows_mut(out, i), rows_of(p, seq, i), x, x_at, i);
        }
    }
}

/// One causal row of probabilities: its first `len` scores scaled, e^(s − max) over them
/// divided by their sum, and the rest of the row 0. The max in lanes (exact in any order),
/// the sum in the references' lane order (`math::lane_sum`). The scale and e^x run over whole
/// vectors of 8 past `len` (the masked scores there are zeroed before the sum, so each of
/// their lanes adds +0.0, which changes no sum of e^x): no element-by-element tail of e^x
/// per row, which cost as much as the vectors for rows of a few dozen.
#[inline(always)]
fn softmax_row(row: &mut [f32], len: usize, scale: f32) {
    let padded = len.div_ceil(W).saturating_mul(W).min(row.len());
    let (live, masked) = row.split_at_mut(padded);
    for pj in live.iter_mut() {
        *pj *= scale;
    }
    let m = super::math::lane_max(&live[..len]);
    for pj in live.iter_mut() {
        *pj = super::math::exp(*pj - m);
    }
    live[len..].fill(0.0);
    let sum = super::math::lane_sum(live);
    for pj in live[..len].iter_mut() {
        *pj /= sum;
    }
    masked.fill(0.0);
}

pub(crate) fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
    probs: &mut [f32],
    s: AttentionShape,
) {
    let (scale, group, hd, seq) = (s.scale(), s.heads / s.kv_heads, s.head_dim, s.seq);
    let mut outs = head_rows(out, &s, s.heads);
    let task = |idx: usize, (p, o): (&mut [f32], &mut Vec<&mut [f32]>)| {
        let (b, h) = (idx / s.heads, idx % s.heads);
        let kvh = h / group;
        let (kt, stride) = transposed(k, &s, b, kvh);
        for (i0, rows) in row_blocks(seq) {
            let q_at = |i| at(&s, s.heads, b, i, h);
            score_rows(p, seq, q, q_at, hd, (&kt, stride), (i0, rows));
            for i in i0..i0 + rows {
                softmax_row(&mut p[i * seq..(i + 1) * seq], i + 1, scale);
            }
            let v_at = |j| at(&s, s.kv_heads, b, j, kvh);
            weighted(o, p, seq, v, v_at, (i0, rows));
        }
    };
    let probs = &mut probs[..s.probs_len()];
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        probs
            .par_chunks_mut(seq * seq)
            .zip(outs.par_iter_mut())
            .enumerate()
            .for_each(|(idx, t)| task(idx, t));
    }
    #[cfg(target_arch = "wasm32")]
    probs
        .chunks_mut(seq * seq)
        .zip(outs.iter_mut())
        .enumerate()
        .for_each(|(idx, t)| task(idx, t));
}

/// Attention of new rows over a key/value cache ([`crate::ModelOps::attention_cached`]):
/// per (sequence, head) task, each row's scores in order of keys, softmax with its maximum
/// subtracted, then the weighted sum of values in order of keys. Plain loops: the rows are
/// few (one per generated token); a prompt's rows take the same path.
pub(crate) fn attention_cached(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
    scores: &mut [f32],
    s: CachedAttentionShape,
) {
    let (scale, group, hd) = (s.scale(), s.heads / s.kv_heads, s.head_dim);
    let (cap, new) = (s.capacity, s.new);
    let kv_at = |b: usize, j: usize, kvh: usize| ((b * cap + j) * s.kv_heads + kvh) * hd;
    // Each task owns its heads' score rows; outputs are gathered per task, then placed.
    let task = |idx: usize, sc: &mut [f32]| -> Vec<f32> {
        let (b, h) = (idx / s.heads, idx % s.heads);
        let kvh = h / group;
        let mut o = vec![0.0f32; new * hd];
        for i in 0..new {
            let len = s.past + i + 1;
            let qi = &q[((b * new + i) * s.heads + h) * hd..][..hd];
            let row = &mut sc[i * cap..i * cap + len];
            let mut m = f32::NEG_INFINITY;
            for (j, r) in row.iter_mut().enumerate() {
                let kj = &k[kv_at(b, j, kvh)..][..hd];
                let dot: f32 = qi.iter().zip(kj).map(|(a, b)| a * b).sum();
                *r = dot * scale;
                m = m.max(*r);
            }
            let mut sum = 0.0f32;
            for r in row.iter_mut() {
                *r = (*r - m).exp();
                sum += *r;
            }
            let inv = 1.0 / sum;
            let oi = &mut o[i * hd..(i + 1) * hd];
            for (j, p) in row.iter().enumerate() {
                let vj = &v[kv_at(b, j, kvh)..][..hd];
                for (od, vd) in oi.iter_mut().zip(vj) {
                    *od += p * vd;
                }
            }
            for od in oi.iter_mut() {
                *od *= inv;
            }
        }
        o
    };
    let scores = &mut scores[..s.scores_len()];
    #[cfg(not(target_arch = "wasm32"))]
    let results: Vec<Vec<f32>> = {
        use rayon::prelude::*;
        scores
            .par_chunks_mut(new * cap)
            .enumerate()
            .map(|(idx, sc)| task(idx, sc))
            .collect()
    };
    #[cfg(target_arch = "wasm32")]
    let results: Vec<Vec<f32>> = scores
        .chunks_mut(new * cap)
        .enumerate()
        .map(|(idx, sc)| task(idx, sc))
        .collect();
    for (idx, o) in results.iter().enumerate() {
        let (b, h) = (idx / s.heads, idx % s.heads);
        for i in 0..new {
            let at = ((b * new + i) * s.heads + h) * hd;
            out[at..at + hd].copy_from_slice(&o[i * hd..(i + 1) * hd]);
        }
    }
}

pub(crate) fn attention_backward(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    probs: &[f32],
    dout: &[f32],
    g: AttentionGrads<'_>,
    s: AttentionShape,
) {
    let (group, seq) = (s.heads / s.kv_heads, s.seq);
    // One task per (b, kv head): the scores' gradients and dQ of the group's heads (their
    // dscores are consecutive, so each task owns a chunk), then dK and dV from them while
    // they and the probabilities are still in cache (as two passes over all heads, the
    // second read 6 MB back per layer of the small preset).
    // dQ's rows per (b, head): the group's heads of task (b, kvh) are consecutive.
    let mut dq = head_rows(g.dq, &s, s.heads);
    let mut dk = head_rows(g.dk, &s, s.kv_heads);
    let mut dv = head_rows(g.dv, &s, s.kv_heads);
    type Rows<'a> = Vec<&'a mut [f32]>;
    let task = |idx: usize, ds: &mut [f32], dq: &mut [Rows], (dk, dv): (&mut Rows, &mut Rows)| {
        let (b, kvh) = (idx / s.kv_heads, idx % s.kv_heads);
        // V of the kv head, transposed once for the group's heads.
        let (vt, stride) = transposed(v, &s, b, kvh);
        for (gi, (ds, dq)) in ds.chunks_mut(seq * seq).zip(dq.iter_mut()).enumerate() {
            head_dscores_dq((k, probs, dout), (&vt, stride), ds, dq, &s, (b, kvh, gi));
        }
        head_dk_dv(q, probs, dout, ds, (dk, dv), &s, (b, kvh));
    };
    let dscores = &mut g.dscores[..s.probs_len()];
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        dscores
            .par_chunks_mut(group * seq * seq)
            .zip(dq.par_chunks_mut(group))
            .zip(dk.par_iter_mut().zip(dv.par_iter_mut()))
            .enumerate()
            .for_each(|(idx, ((ds, dq), kv))| task(idx, ds, dq, kv));
    }
    #[cfg(target_arch = "wasm32")]
    dscores
        .chunks_mut(group * seq * seq)
        .zip(dq.chunks_mut(group))
        .zip(dk.iter_mut().zip(dv.iter_mut()))
        .enumerate()
        .for_each(|(idx, ((ds, dq), kv))| task(idx, ds, dq, kv));
}

/// The scores' gradients `ds` ([seq, seq]) and dQ ([seq, head_dim]) of head `gi` of kv head
/// `kvh`'s group in sequence `b`; `vt`: that kv head's V as [`transposed`] gives it.
fn head_dscores_dq(
    (k, probs, dout): (&[f32], &[f32], &[f32]),
    (vt, stride): (&[f32], usize),
    ds: &mut [f32],
    dq: &mut [&mut [f32]],
    s: &AttentionShape,
    (b, kvh, gi): (usize, usize, usize),
) {
    let (scale, group, hd, seq) = (s.scale(), s.heads / s.kv_heads, s.head_dim, s.seq);
    let h = kvh * group + gi;
    let idx = b * s.heads + h;
    let p = &probs[idx * seq * seq..(idx + 1) * seq * seq];
    for (i0, rows) in row_blocks(seq) {
        let d_at = |i| at(s, s.heads, b, i, h);
        score_rows(ds, seq, dout, d_at, hd, (vt, stride), (i0, rows));
        for i in i0..i0 + rows {
            let prow = &p[i * seq..=i * seq + i];
            let (dsrow, masked) = ds[i * seq..(i + 1) * seq].split_at_mut(i + 1);
            let rowsum = super::math::lane_dot(prow, dsrow);
            for (d, p) in dsrow.iter_mut().zip(prow) {
                *d = p * (*d - rowsum);
            }
            masked.fill(0.0);
        }
        let k_at = |j| at(s, s.kv_heads, b, j, kvh);
        weighted(dq, ds, seq, k, k_at, (i0, rows));
        for row in dq[i0..i0 + rows].iter_mut() {
            for a in row.iter_mut() {
                *a *= scale;
            }
        }
    }
}

/// dK and dV ([seq, head_dim] each) of kv head `kvh` of sequence `b`, from its group's
/// scores' gradients `dscores` ([group][seq][seq]): for each (j, d) the sum runs over the
/// group's heads, then i ascending from j, as in the reference; blocks of R positions j × W
/// lanes of d.
fn head_dk_dv(
    q: &[f32],
    probs: &[f32],
    dout: &[f32],
    dscores: &[f32],
    (dk, dv): (&mut [&mut [f32]], &mut [&mut [f32]]),
    s: &AttentionShape,
    (b, kvh): (usize, usize),
) {
    let (scale, group, hd, seq) = (s.scale(), s.heads / s.kv_heads, s.head_dim, s.seq);
    // The group's probabilities, indexed like `dscores` (head gi at gi·seq², b's first).
    let first = (b * s.heads + kvh * group) * seq * seq;
    let p = &probs[first..first + group * seq * seq];
    for (j0, rows) in row_blocks(seq) {
        // dK from the scores' gradients and Q, dV from the probabilities and dOut: two
        // vectors of lanes at a time where they fit, then one.
        let mut dc = 0;
        let block = |dc| (b, kvh, j0, rows, dc);
        while dc + W <= hd {
            if WIDE && dc + 32 <= hd {
                kv_block::<2, F16>(s, block(dc), (dscores, q), scale, dk);
                kv_block::<2, F16>(s, block(dc), (p, dout), 1.0, dv);
                dc += 32;
            } else if WIDE && dc + 16 <= hd {
                kv_block::<1, F16>(s, block(dc), (dscores, q), scale, dk);
                kv_block::<1, F16>(s, block(dc), (p, dout), 1.0, dv);
                dc += 16;
            } else if dc + 2 * W <= hd {
                kv_block::<2, F8>(s, block(dc), (dscores, q), scale, dk);
                kv_block::<2, F8>(s, block(dc), (p, dout), 1.0, dv);
                dc += 2 * W;
            } else {
                kv_block::<1, F8>(s, block(dc), (dscores, q), scale, dk);
                kv_block::<1, F8>(s, block(dc), (p, dout), 1.0, dv);
                dc += W;
            }
        }
        // The last lanes of a head_dim that is no multiple of W: plain loops, same order.
        if dc < hd {
            let w = hd - dc;
            let (mut ak, mut av) = ([[0.0f32; W]; R], [[0.0f32; W]; R]);
            for gi in 0..group {
                let h = kvh * group + gi;
                let base = gi * seq * seq;
                for i in j0..seq {
                    let qi = at(s, s.heads, b, i, h) + dc;
                    let (qrow, drow) = (&q[qi..qi + w], &dout[qi..qi + w]);
                    let active = rows.min(i - j0 + 1);
                    for r in 0..active {
                        let at_ij = base + i * seq + j0 + r;
                        let (dsc, pr) = (dscores[at_ij], p[at_ij]);
                        for ((o, x), (ov, y)) in
                            ak[r].iter_mut().zip(qrow).zip(av[r].iter_mut().zip(drow))
                        {
                            *o += dsc * x;
                            *ov += pr * y;
                        }
                    }
                }
            }
            for r in 0..rows {
                for (x, a) in dk[j0 + r][dc..dc + w].iter_mut().zip(&ak[r]) {
                    *x = a * scale;
                }
                dv[j0 + r][dc..dc + w].copy_from_slice(&av[r][..w]);
            }
        }
    }
}

#[cfg(test)]
mod tests;
