//! Causal attention on the CPU, forward and backward: one task per (sequence, head) — per
//! (sequence, kv head) for dK and dV — run in parallel natively (rayon) and in order in the
//! browser. Every output element is accumulated in exactly the order of the plain loops in
//! `ops::reference` (kept as the test oracle), so results are bit-identical to them and do
//! not depend on the thread count; the loops are reordered only so that the innermost one
//! runs along `head_dim` over contiguous memory.

use crate::AttentionShape;

use super::ops::AttentionGrads;

/// Runs `f(index, chunk)` over the `size`-element chunks of `data` (in parallel natively)
/// and returns the results in chunk order.
fn map_chunks<R: Send>(
    data: &mut [f32],
    size: usize,
    f: impl Fn(usize, &mut [f32]) -> R + Sync + Send,
) -> Vec<R> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        data.par_chunks_mut(size)
            .enumerate()
            .map(|(i, c)| f(i, c))
            .collect()
    }
    #[cfg(target_arch = "wasm32")]
    {
        data.chunks_mut(size)
            .enumerate()
            .map(|(i, c)| f(i, c))
            .collect()
    }
}

/// Runs `f(index)` for `0..n` (in parallel natively), results in order.
fn map_range<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        (0..n).into_par_iter().map(f).collect()
    }
    #[cfg(target_arch = "wasm32")]
    {
        (0..n).map(f).collect()
    }
}

/// `out[j] = Σ_d a[d]·bt[d·stride + j]` for every j of `out`, each sum over d ascending from
/// 0.0 (the plain loops' order per j); vectorized across j.
fn dots(out: &mut [f32], a: &[f32], bt: &[f32], stride: usize) {
    out.fill(0.0);
    let n = out.len();
    for (d, ad) in a.iter().enumerate() {
        let col = &bt[d * stride..d * stride + n];
        for (o, x) in out.iter_mut().zip(col) {
            *o += ad * x;
        }
    }
}

/// Rows of kv head `kvh` of sequence `b` of a [batch, seq, kv_heads, head_dim] tensor,
/// transposed to [head_dim, seq].
fn transposed(x: &[f32], s: &AttentionShape, b: usize, kvh: usize) -> Vec<f32> {
    let (seq, hd) = (s.seq, s.head_dim);
    let mut t = vec![0.0f32; hd * seq];
    for j in 0..seq {
        let o = at(s, s.kv_heads, b, j, kvh);
        for (d, v) in x[o..o + hd].iter().enumerate() {
            t[d * seq + j] = *v;
        }
    }
    t
}

/// acc[d] += c·x[d] for every d (independent elements: vectorized).
fn axpy(acc: &mut [f32], c: f32, x: &[f32]) {
    for (a, v) in acc.iter_mut().zip(x) {
        *a += c * v;
    }
}

/// Offset of row `t`, head `h` of a [batch, seq, heads, head_dim] tensor.
fn at(s: &AttentionShape, heads: usize, b: usize, t: usize, h: usize) -> usize {
    ((b * s.seq + t) * heads + h) * s.head_dim
}

/// Writes a per-(b, head) [seq, head_dim] block back into a [batch, seq, heads, head_dim]
/// tensor.
fn scatter(dst: &mut [f32], blocks: &[Vec<f32>], s: &AttentionShape, heads: usize) {
    let hd = s.head_dim;
    for (idx, block) in blocks.iter().enumerate() {
        let (b, h) = (idx / heads, idx % heads);
        for t in 0..s.seq {
            let o = at(s, heads, b, t, h);
            dst[o..o + hd].copy_from_slice(&block[t * hd..(t + 1) * hd]);
        }
    }
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
    let blocks = map_chunks(&mut probs[..s.probs_len()], seq * seq, |idx, p| {
        let (b, h) = (idx / s.heads, idx % s.heads);
        let kvh = h / group;
        let kt = transposed(k, &s, b, kvh);
        let mut o = vec![0.0f32; seq * hd];
        for i in 0..seq {
            let qi = at(&s, s.heads, b, i, h);
            let row = &mut p[i * seq..(i + 1) * seq];
            dots(&mut row[..=i], &q[qi..qi + hd], &kt, seq);
            let mut m = f32::NEG_INFINITY;
            for pj in row.iter_mut().take(i + 1) {
                let sc = *pj * scale;
                *pj = sc;
                m = m.max(sc);
            }
            let mut sum = 0.0f32;
            for pj in row.iter_mut().take(i + 1) {
                let e = (*pj - m).exp();
                *pj = e;
                sum += e;
            }
            for (j, pj) in row.iter_mut().enumerate() {
                *pj = if j <= i { *pj / sum } else { 0.0 };
            }
            let acc = &mut o[i * hd..(i + 1) * hd];
            for (j, pj) in row.iter().enumerate().take(i + 1) {
                let vj = at(&s, s.kv_heads, b, j, kvh);
                axpy(acc, *pj, &v[vj..vj + hd]);
            }
        }
        o
    });
    scatter(out, &blocks, &s, s.heads);
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
    let (scale, group, hd, seq) = (s.scale(), s.heads / s.kv_heads, s.head_dim, s.seq);
    // dscores and dq, per (b, h).
    let dq_blocks = map_chunks(&mut g.dscores[..s.probs_len()], seq * seq, |idx, ds| {
        let (b, h) = (idx / s.heads, idx % s.heads);
        let kvh = h / group;
        let vt = transposed(v, &s, b, kvh);
        let p = &probs[idx * seq * seq..(idx + 1) * seq * seq];
        let mut dq = vec![0.0f32; seq * hd];
        for i in 0..seq {
            let qi = at(&s, s.heads, b, i, h);
            let (prow, dsrow) = (&p[i * seq..(i + 1) * seq], &mut ds[i * seq..(i + 1) * seq]);
            dots(&mut dsrow[..=i], &dout[qi..qi + hd], &vt, seq);
            let mut rowsum = 0.0f32;
            for j in 0..=i {
                rowsum += prow[j] * dsrow[j];
            }
            for j in 0..seq {
                dsrow[j] = if j <= i {
                    prow[j] * (dsrow[j] - rowsum)
                } else {
                    0.0
                };
            }
            let acc = &mut dq[i * hd..(i + 1) * hd];
            for (j, dsj) in dsrow.iter().enumerate().take(i + 1) {
                let kj = at(&s, s.kv_heads, b, j, kvh);
                axpy(acc, *dsj, &k[kj..kj + hd]);
            }
            for a in acc.iter_mut() {
                *a *= scale;
            }
        }
        dq
    });
    scatter(g.dq, &dq_blocks, &s, s.heads);
    // dk and dv, per (b, kv head): for each (j, d) the sum runs over the group's heads, then
    // i ascending from j, as in the reference.
    let dscores: &[f32] = g.dscores;
    let kv_blocks = map_range(s.batch * s.kv_heads, |idx| {
        let (b, kvh) = (idx / s.kv_heads, idx % s.kv_heads);
        let mut dk = vec![0.0f32; seq * hd];
        let mut dv = vec![0.0f32; seq * hd];
        for gi in 0..group {
            let h = kvh * group + gi;
            let base = (b * s.heads + h) * seq * seq;
            for i in 0..seq {
                let qi = at(&s, s.heads, b, i, h);
                let (qrow, drow) = (&q[qi..qi + hd], &dout[qi..qi + hd]);
                for j in 0..=i {
                    let (dsc, pr) = (dscores[base + i * seq + j], probs[base + i * seq + j]);
                    axpy(&mut dk[j * hd..(j + 1) * hd], dsc, qrow);
                    axpy(&mut dv[j * hd..(j + 1) * hd], pr, drow);
                }
            }
        }
        for x in dk.iter_mut() {
            *x *= scale;
        }
        (dk, dv)
    });
    let (dk, dv): (Vec<Vec<f32>>, Vec<Vec<f32>>) = kv_blocks.into_iter().unzip();
    scatter(g.dk, &dk, &s, s.kv_heads);
    scatter(g.dv, &dv, &s, s.kv_heads);
}

#[cfg(test)]
mod tests {
    use super::super::ops::reference;
    use super::*;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
            })
            .collect()
    }

    #[test]
    fn fast_attention_is_bit_identical_to_the_plain_loops() {
        for (batch, seq, heads, kv_heads, head_dim) in [
            (1, 1, 1, 1, 2),
            (2, 7, 4, 2, 8),
            (3, 16, 6, 3, 4),
            (1, 33, 2, 1, 16),
        ] {
            let s = AttentionShape {
                batch,
                seq,
                heads,
                kv_heads,
                head_dim,
            };
            let (q, k, v) = (
                values(s.q_len(), 1),
                values(s.kv_len(), 2),
                values(s.kv_len(), 3),
            );
            let dout = values(s.q_len(), 4);
            let (mut o1, mut p1) = (vec![0.0; s.q_len()], vec![0.0; s.probs_len()]);
            let (mut o2, mut p2) = (vec![9.0; s.q_len()], vec![9.0; s.probs_len()]);
            reference::attention(&q, &k, &v, &mut o1, &mut p1, s);
            attention(&q, &k, &v, &mut o2, &mut p2, s);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&o1), bits(&o2), "out {s:?}");
            assert_eq!(bits(&p1), bits(&p2), "probs {s:?}");
            let mut a = [
                vec![0.0; s.probs_len()],
                vec![0.0; s.q_len()],
                vec![0.0; s.kv_len()],
                vec![0.0; s.kv_len()],
            ];
            let mut b = [
                vec![7.0; s.probs_len()],
                vec![7.0; s.q_len()],
                vec![7.0; s.kv_len()],
                vec![7.0; s.kv_len()],
            ];
            fn grads(x: &mut [Vec<f32>; 4]) -> AttentionGrads<'_> {
                let [ds, dq, dk, dv] = x;
                AttentionGrads {
                    dscores: ds,
                    dq,
                    dk,
                    dv,
                }
            }
            reference::attention_backward(&q, &k, &v, &p1, &dout, grads(&mut a), s);
            attention_backward(&q, &k, &v, &p1, &dout, grads(&mut b), s);
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(bits(x), bits(y), "backward {s:?}");
            }
        }
    }
}
