//! CPU twins of the model kernels, on plain slices, looping in the same order as the WGSL
//! (so sums are reproducible and the comparison with the GPU is tight).

use crate::{AdamHyper, RopeShape};

fn token(t: f32, vocab: usize) -> usize {
    (t.max(0.0) as usize).min(vocab - 1)
}

pub(crate) fn embedding(tokens: &[f32], table: &[f32], out: &mut [f32], c: usize) {
    let vocab = table.len() / c;
    for (n, t) in tokens.iter().enumerate() {
        let v = token(*t, vocab);
        out[n * c..(n + 1) * c].copy_from_slice(&table[v * c..(v + 1) * c]);
    }
}

pub(crate) fn embedding_backward(tokens: &[f32], dout: &[f32], dtable: &mut [f32], c: usize) {
    let vocab = dtable.len() / c;
    for (n, t) in tokens.iter().enumerate() {
        let v = token(*t, vocab);
        for j in 0..c {
            dtable[v * c + j] += dout[n * c + j];
        }
    }
}

/// Rows whose sums (Σ w·dy·x of the norm's backward) run side by side: each row's
/// sum is still one chain over its columns in order — the readable loop's bits — but a chain
/// of dependent adds waits for each add's latency, and eight independent ones fill it.
const ROW_GROUP: usize = 8;

/// The sums of [`ROW_GROUP`] rows, one chain per row from 0.0 over the columns `0..c` in
/// order (`term(r, j)`: row `r`'s term of column `j`), as `(0..c).fold(0.0, |s, j| s +
/// term(r, j))` gives each of them.
#[inline(always)]
fn group_sums(c: usize, term: impl Fn(usize, usize) -> f32) -> [f32; ROW_GROUP] {
    let mut sums = [0.0f32; ROW_GROUP];
    for j in 0..c {
        for (r, s) in sums.iter_mut().enumerate() {
            *s += term(r, j);
        }
    }
    sums
}

/// Rows in parallel pieces (each row as [`rmsnorm_rows`] computes it).
pub(crate) fn rmsnorm(x: &[f32], w: &[f32], out: &mut [f32], rstd: &mut [f32], eps: f32) {
    let c = w.len();
    let rows = rstd.len();
    super::par::rows2_mut(&mut out[..rows * c], c, rstd, 1, |n0, o, r| {
        rmsnorm_rows(&x[n0 * c..n0 * c + o.len()], w, o, r, eps);
    });
}

/// The readable loops of [`rmsnorm`] over the rows of `x`.
pub(crate) fn rmsnorm_rows(x: &[f32], w: &[f32], out: &mut [f32], rstd: &mut [f32], eps: f32) {
    let c = w.len();
    for (n, r_out) in rstd.iter_mut().enumerate() {
        let row = &x[n * c..(n + 1) * c];
        let ss = row.iter().fold(0.0f32, |s, v| s + v * v);
        let r = 1.0 / (ss / c as f32 + eps).sqrt();
        *r_out = r;
        for j in 0..c {
            out[n * c + j] = row[j] * r * w[j];
        }
    }
}

pub(crate) fn rmsnorm_backward(
    x: &[f32],
    w: &[f32],
    rstd: &[f32],
    dy: &[f32],
    dx: &mut [f32],
    dw: &mut [f32],
) {
    let c = w.len();
    let rows = rstd.len();
    super::par::rows_mut(&mut dx[..rows * c], c, |n0, d| {
        let n1 = n0 + d.len() / c;
        rmsnorm_backward_dx_grouped(&x[n0 * c..n1 * c], w, &rstd[n0..n1], &dy[n0 * c..n1 * c], d);
    });
    // dw[j] sums over the rows in order for every j: rows outer, columns inner (vectorized),
    // the columns split into parallel pieces (of 32: six for the model's 192 columns, so two
    // threads share them evenly).
    super::par::sized_mut(&mut dw[..c], 32, |j0, part| {
        for (n, r) in rstd.iter().enumerate() {
            let (dyr, xr) = (&dy[n * c + j0..], &x[n * c + j0..]);
            for ((a, d), xv) in part.iter_mut().zip(dyr).zip(xr) {
                *a += d * xv * r;
            }
        }
    });
}

#[cfg(test)]
/// The readable loops of [`rmsnorm_backward`]: dx of the rows of `x`, and the weight
/// gradient summed over them onto `dw`.
pub(crate) fn rmsnorm_backward_rows(
    x: &[f32],
    w: &[f32],
    rstd: &[f32],
    dy: &[f32],
    dx: &mut [f32],
    dw: &mut [f32],
) {
    let c = w.len();
    rmsnorm_backward_dx(x, w, rstd, dy, dx);
    for j in 0..c {
        let mut acc = dw[j];
        for (n, r) in rstd.iter().enumerate() {
            acc += dy[n * c + j] * x[n * c + j] * r;
        }
        dw[j] = acc;
    }
}

/// dx of the rows of `x` in groups of [`ROW_GROUP`] rows (bit for bit [`rmsnorm_backward_dx`]).
fn rmsnorm_backward_dx_grouped(x: &[f32], w: &[f32], rstd: &[f32], dy: &[f32], dx: &mut [f32]) {
    let c = w.len();
    let grouped = rstd.len() / ROW_GROUP * ROW_GROUP;
    for (g, rg) in rstd[..grouped].chunks_exact(ROW_GROUP).enumerate() {
        let span = g * ROW_GROUP * c..(g + 1) * ROW_GROUP * c;
        let (x, dy, dx) = (&x[span.clone()], &dy[span.clone()], &mut dx[span]);
        for at in (0..x.len()).step_by(super::par::STREAM_BLOCK) {
            super::par::will_read(&x[at..]);
            super::par::will_read(&dy[at..]);
            super::par::will_write(&dx[at..]);
        }
        let dots = group_sums(c, |r, j| w[j] * dy[r * c + j] * x[r * c + j]);
        for (k, r) in rg.iter().enumerate() {
            let mean_dot = dots[k] / c as f32;
            let row = k * c..(k + 1) * c;
            let (x, dy, dx) = (&x[row.clone()], &dy[row.clone()], &mut dx[row]);
            for j in 0..c {
                dx[j] = r * (w[j] * dy[j] - x[j] * r * r * mean_dot);
            }
        }
    }
    let at = grouped * c;
    rmsnorm_backward_dx(&x[at..], w, &rstd[grouped..], &dy[at..], &mut dx[at..]);
}

fn rmsnorm_backward_dx(x: &[f32], w: &[f32], rstd: &[f32], dy: &[f32], dx: &mut [f32]) {
    let c = w.len();
    for (n, r) in rstd.iter().enumerate() {
        let base = n * c;
        let dot = (0..c).fold(0.0f32, |s, j| s + w[j] * dy[base + j] * x[base + j]);
        let mean_dot = dot / c as f32;
        for j in 0..c {
            dx[base + j] = r * (w[j] * dy[base + j] - x[base + j] * r * r * mean_dot);
        }
    }
}

/// Token rows in parallel pieces, bit for bit [`rope_rows`]: each row's position's cos and
/// sin taken out of the interleaved table once (the sin negated for the inverse), then
/// every head's two halves in contiguous loops the compiler vectorizes (reading the table's
/// pairs per element kept them scalar).
pub(crate) fn rope(x: &[f32], table: &[f32], out: &mut [f32], s: RopeShape, inverse: bool) {
    let len = s.heads * s.head_dim;
    let half = s.head_dim / 2;
    super::par::rows_mut(&mut out[..s.rows * len], len, |r0, o| {
        let (mut cos, mut sin) = (vec![0.0f32; half], vec![0.0f32; half]);
        for (t, orow) in o.chunks_exact_mut(len).enumerate() {
            let n = r0 + t;
            let pair = &table[(n % s.seq) * half * 2..][..half * 2];
            for ((c, sn), cs) in cos.iter_mut().zip(&mut sin).zip(pair.chunks_exact(2)) {
                *c = cs[0];
                *sn = if inverse { -cs[1] } else { cs[1] };
            }
            let xrow = &x[n * len..(n + 1) * len];
            for c in (0..len).step_by(super::par::STREAM_BLOCK) {
                super::par::will_read(&xrow[c..]);
                super::par::will_write(&orow[c..]);
            }
            for (xh, oh) in xrow
                .chunks_exact(s.head_dim)
                .zip(orow.chunks_exact_mut(s.head_dim))
            {
                let (a, b) = xh.split_at(half);
                let (oa, ob) = oh.split_at_mut(half);
                for i in 0..half {
                    oa[i] = a[i] * cos[i] - b[i] * sin[i];
                    ob[i] = b[i] * cos[i] + a[i] * sin[i];
                }
            }
        }
    });
}

#[cfg(test)]
/// The readable loops of [`rope`] for the head rows `first..` that `out` holds (`out` starts
/// at head row `first`).
pub(crate) fn rope_rows(
    x: &[f32],
    table: &[f32],
    out: &mut [f32],
    s: RopeShape,
    inverse: bool,
    first: usize,
) {
    let half = s.head_dim / 2;
    let out_base = first * s.head_dim;
    for rh in first..first + out.len() / s.head_dim {
        let p = (rh / s.heads) % s.seq;
        let base = rh * s.head_dim;
        for i in 0..half {
            let c = table[(p * half + i) * 2];
            let sn = table[(p * half + i) * 2 + 1];
            let sn = if inverse { -sn } else { sn };
            let (a, b) = (x[base + i], x[base + i + half]);
            out[base - out_base + i] = a * c - b * sn;
            out[base - out_base + i + half] = b * c + a * sn;
        }
    }
}

/// Outputs of the attention backward pass.
pub(crate) struct AttentionGrads<'a> {
    pub dscores: &'a mut [f32],
    pub dq: &'a mut [f32],
    pub dk: &'a mut [f32],
    pub dv: &'a mut [f32],
}

#[inline(always)]
fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + super::math::exp(-v))
}

pub(crate) fn swiglu(g: &[f32], u: &[f32], out: &mut [f32]) {
    super::par::pieces_mut(out, |at, o| {
        let n = o.len();
        let b = super::par::STREAM_BLOCK;
        for ((o, g), u) in o
            .chunks_mut(b)
            .zip(g[at..at + n].chunks(b))
            .zip(u[at..at + n].chunks(b))
        {
            super::par::will_read(g);
            super::par::will_read(u);
            super::par::will_write(o);
            for ((ok, g), u) in o.iter_mut().zip(g).zip(u) {
                *ok = g * sigmoid(*g) * u;
            }
        }
    });
}

pub(crate) fn swiglu_backward(g: &[f32], u: &[f32], dy: &[f32], dg: &mut [f32], du: &mut [f32]) {
    // Both outputs in one pass, the sigmoid computed once per element.
    let n = dg.len();
    super::par::rows2_mut(dg, 1, &mut du[..n], 1, |at, dgp, dup| {
        let n = dgp.len();
        let (g, u, dy) = (&g[at..at + n], &u[at..at + n], &dy[at..at + n]);
        let dup = &mut dup[..n];
        for k0 in (0..n).step_by(super::par::STREAM_BLOCK) {
            let k1 = (k0 + super::par::STREAM_BLOCK).min(n);
            for x in [&g[k0..], &u[k0..], &dy[k0..]] {
                super::par::will_read(x);
            }
            super::par::will_write(&dgp[k0..]);
            super::par::will_write(&dup[k0..]);
            for k in k0..k1 {
                let s = sigmoid(g[k]);
                dgp[k] = dy[k] * u[k] * s * (1.0 + g[k] * (1.0 - s));
                dup[k] = dy[k] * g[k] * s;
            }
        }
    });
}

pub(crate) fn cross_entropy(
    logits: &[f32],
    targets: &[f32],
    losses: &mut [f32],
    dlogits: &mut [f32],
    grad_scale: f32,
) {
    let rows = losses.len();
    let vocab = logits.len() / rows.max(1);
    if dlogits.is_empty() {
        // Losses only (evaluation): each row's exponentials in a scratch row, no gradient.
        let rows_per_task = (super::par::PIECE / vocab.max(1)).max(1);
        super::par::sized_mut(losses, rows_per_task, |n0, l| {
            let mut scratch = vec![0.0f32; vocab];
            for (i, loss) in l.iter_mut().enumerate() {
                let n = n0 + i;
                cross_entropy_rows(
                    &logits[n * vocab..(n + 1) * vocab],
                    &targets[n..n + 1],
                    std::slice::from_mut(loss),
                    &mut scratch,
                    0.0,
                    false,
                );
            }
        });
        return;
    }
    super::par::rows2_mut(
        &mut dlogits[..rows * vocab],
        vocab,
        losses,
        1,
        |n0, d, l| {
            let n1 = n0 + l.len();
            cross_entropy_rows(
                &logits[n0 * vocab..n1 * vocab],
                &targets[n0..n1],
                l,
                d,
                grad_scale,
                true,
            );
        },
    );
}

/// The readable loops of [`cross_entropy`] over the rows of `logits` (`dlogits` written
/// when `gradient`, else only used as scratch).
pub(crate) fn cross_entropy_rows(
    logits: &[f32],
    targets: &[f32],
    losses: &mut [f32],
    dlogits: &mut [f32],
    grad_scale: f32,
    gradient: bool,
) {
    let rows = losses.len();
    let vocab = logits.len() / rows.max(1);
    for n in 0..rows {
        let row = &logits[n * vocab..(n + 1) * vocab];
        let m = row[1..].iter().fold(row[0], |m, v| m.max(*v));
        // e^(l − m) into the gradient row first (vectorized), then its sum in order.
        let d = &mut dlogits[n * vocab..(n + 1) * vocab];
        for (e, l) in d.iter_mut().zip(row) {
            *e = super::math::exp(l - m);
        }
        // The sum in f64: in f32, a 49,152-token vocabulary's sum in order drifts by ~1e-5
        // relative (visible in an eval's mean loss).
        let sum: f64 = d.iter().map(|e| f64::from(*e)).sum();
        let lse64 = f64::from(m) + sum.ln();
        let lse = lse64 as f32;
        let t = token(targets[n], vocab);
        losses[n] = (lse64 - f64::from(row[t])) as f32;
        if !gradient {
            continue;
        }
        for (dv, l) in d.iter_mut().zip(row) {
            *dv = super::math::exp(l - lse) * grad_scale;
        }
        d[t] = (super::math::exp(row[t] - lse) - 1.0) * grad_scale;
    }
}

pub(crate) fn adamw(
    param: &mut [f32],
    grad: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    norms: &[f32],
    h: &AdamHyper,
) {
    let total = norms.iter().fold(0.0f32, |s, n| s + n);
    let norm = total.sqrt();
    let clip = if h.max_norm > 0.0 {
        (h.max_norm / (norm + 1e-6)).min(1.0)
    } else {
        1.0
    };
    let n = param.len();
    let bc = h.bias_corrections();
    // Seven streams (four read, three written back) outrun the hardware's prefetch: each
    // gets a hint 512 elements ahead (figures in docs/cpu-performance.md).
    super::par::pieces3_mut(param, &mut m[..n], &mut v[..n], |at, param, m, v| {
        let grad = &grad[at..at + param.len()];
        let block = super::par::STREAM_BLOCK;
        for (i, p) in param.chunks_mut(block).enumerate() {
            let span = i * block..i * block + p.len();
            super::par::will_read(&grad[span.start..]);
            super::par::will_write(&m[span.start..]);
            super::par::will_write(&v[span.start..]);
            super::par::will_write(p);
            adamw_block(
                p,
                &grad[span.clone()],
                &mut m[span.clone()],
                &mut v[span],
                clip,
                h,
                bc,
            );
        }
    });
}

/// The readable loop of [`adamw`] (its oracle over a whole tensor): every element of `param`
/// (with its moments) updated from its gradient scaled by `clip`, with the bias corrections
/// `(1 − β₁ᵗ, 1 − β₂ᵗ)`.
fn adamw_block(
    param: &mut [f32],
    grad: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    clip: f32,
    h: &AdamHyper,
    (bc1, bc2): (f32, f32),
) {
    let n = param.len();
    let (grad, m, v) = (&grad[..n], &mut m[..n], &mut v[..n]);
    for i in 0..n {
        let g = grad[i] * clip;
        let mi = h.beta1 * m[i] + (1.0 - h.beta1) * g;
        let vi = h.beta2 * v[i] + (1.0 - h.beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        let update = (mi / bc1) / ((vi / bc2).sqrt() + h.eps);
        param[i] -= h.lr * (update + h.weight_decay * param[i]);
    }
}

/// The plain loops of attention, the oracle of the parallel `cpu::attention` (which must
/// match them bit for bit).
#[cfg(test)]
pub(crate) mod reference {
    use super::AttentionGrads;
    use crate::AttentionShape;

    fn q_index(s: &AttentionShape, b: usize, t: usize, h: usize) -> usize {
        ((b * s.seq + t) * s.heads + h) * s.head_dim
    }

    fn kv_index(s: &AttentionShape, b: usize, t: usize, h: usize) -> usize {
        ((b * s.seq + t) * s.kv_heads + h) * s.head_dim
    }

    fn p_index(s: &AttentionShape, b: usize, h: usize, i: usize) -> usize {
        ((b * s.heads + h) * s.seq + i) * s.seq
    }

    /// The query rows of sequence `b` in order (head by head, position by position): the kv
    /// head each reads, its position, where its q row and its probability row start.
    fn query_rows(
        s: &AttentionShape,
        b: usize,
    ) -> impl Iterator<Item = (usize, usize, usize, usize)> + '_ {
        let group = s.heads / s.kv_heads;
        (0..s.heads).flat_map(move |h| {
            (0..s.seq).map(move |i| (h / group, i, q_index(s, b, i, h), p_index(s, b, h, i)))
        })
    }

    pub fn attention(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        out: &mut [f32],
        probs: &mut [f32],
        s: AttentionShape,
    ) {
        let scale = s.scale();
        for b in 0..s.batch {
            for (kvh, i, qi, prow) in query_rows(&s, b) {
                let mut m = f32::NEG_INFINITY;
                for j in 0..=i {
                    let kj = kv_index(&s, b, j, kvh);
                    let mut dot = 0.0f32;
                    for d in 0..s.head_dim {
                        dot += q[qi + d] * k[kj + d];
                    }
                    let sc = dot * scale;
                    probs[prow + j] = sc;
                    m = m.max(sc);
                }
                for j in 0..=i {
                    probs[prow + j] = crate::cpu::math::exp(probs[prow + j] - m);
                }
                let sum = crate::cpu::math::lane_sum(&probs[prow..=prow + i]);
                for j in 0..s.seq {
                    probs[prow + j] = if j <= i { probs[prow + j] / sum } else { 0.0 };
                }
                for d in 0..s.head_dim {
                    let mut acc = 0.0f32;
                    for j in 0..=i {
                        acc += probs[prow + j] * v[kv_index(&s, b, j, kvh) + d];
                    }
                    out[qi + d] = acc;
                }
            }
        }
    }

    pub fn attention_backward(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        probs: &[f32],
        dout: &[f32],
        g: AttentionGrads<'_>,
        s: AttentionShape,
    ) {
        let scale = s.scale();
        let group = s.heads / s.kv_heads;
        for b in 0..s.batch {
            for (kvh, i, qi, prow) in query_rows(&s, b) {
                for j in 0..=i {
                    let vj = kv_index(&s, b, j, kvh);
                    let mut dp = 0.0f32;
                    for d in 0..s.head_dim {
                        dp += dout[qi + d] * v[vj + d];
                    }
                    g.dscores[prow + j] = dp;
                }
                let rowsum = crate::cpu::math::lane_dot(
                    &probs[prow..=prow + i],
                    &g.dscores[prow..=prow + i],
                );
                for j in 0..s.seq {
                    g.dscores[prow + j] = if j <= i {
                        probs[prow + j] * (g.dscores[prow + j] - rowsum)
                    } else {
                        0.0
                    };
                }
                for d in 0..s.head_dim {
                    let mut acc = 0.0f32;
                    for j in 0..=i {
                        acc += g.dscores[prow + j] * k[kv_index(&s, b, j, kvh) + d];
                    }
                    g.dq[qi + d] = acc * scale;
                }
            }
            for kvh in 0..s.kv_heads {
                for j in 0..s.seq {
                    let kj = kv_index(&s, b, j, kvh);
                    for d in 0..s.head_dim {
                        let (mut dk, mut dv) = (0.0f32, 0.0f32);
                        for gi in 0..group {
                            let h = kvh * group + gi;
                            for i in j..s.seq {
                                let pi = p_index(&s, b, h, i) + j;
                                let qi = q_index(&s, b, i, h);
                                dk += g.dscores[pi] * q[qi + d];
                                dv += probs[pi] * dout[qi + d];
                            }
                        }
                        g.dk[kj + d] = dk * scale;
                        g.dv[kj + d] = dv;
                    }
                }
            }
        }
    }
}

/// The parallel ops against their readable loops (one piece, in order): bit for bit, on
/// sizes that span several pieces with a ragged last one.
#[cfg(test)]
mod parallel_tests {
    use super::super::test_data::bits;
    use super::*;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        super::super::test_data::values(n, seed, 6.0)
    }

    #[test]
    fn parallel_ops_equal_their_readable_loops() {
        let (rows, c) = (1031, 72); // 74,232 elements: 5 pieces, the last one short
        let (x, w, dy) = (values(rows * c, 1), values(c, 2), values(rows * c, 3));
        let (mut o1, mut r1) = (vec![0.0; rows * c], vec![0.0; rows]);
        let (mut o2, mut r2) = (vec![1.0; rows * c], vec![1.0; rows]);
        rmsnorm(&x, &w, &mut o1, &mut r1, 1e-5);
        rmsnorm_rows(&x, &w, &mut o2, &mut r2, 1e-5);
        assert_eq!((bits(&o1), bits(&r1)), (bits(&o2), bits(&r2)), "rmsnorm");

        let dw0 = values(c, 4);
        let (mut dx1, mut dw1) = (vec![0.0; rows * c], dw0.clone());
        let (mut dx2, mut dw2) = (vec![1.0; rows * c], dw0);
        rmsnorm_backward(&x, &w, &r1, &dy, &mut dx1, &mut dw1);
        rmsnorm_backward_rows(&x, &w, &r1, &dy, &mut dx2, &mut dw2);
        assert_eq!(bits(&dx1), bits(&dx2), "rmsnorm_backward dx");
        assert_eq!(bits(&dw1), bits(&dw2), "rmsnorm_backward dw");

        let s = RopeShape {
            rows,
            heads: 3,
            head_dim: 24,
            seq: 17,
        };
        let table = values(s.seq * s.head_dim, 5);
        for inverse in [false, true] {
            let (mut a, mut b) = (vec![0.0; rows * c], vec![1.0; rows * c]);
            rope(&x, &table, &mut a, s, inverse);
            rope_rows(&x, &table, &mut b, s, inverse, 0);
            assert_eq!(bits(&a), bits(&b), "rope inverse={inverse}");
        }

        let (g, u) = (values(rows * c, 6), values(rows * c, 7));
        let (mut dg1, mut du1) = (vec![0.0; rows * c], vec![0.0; rows * c]);
        swiglu_backward(&g, &u, &dy, &mut dg1, &mut du1);
        for i in 0..rows * c {
            let sg = sigmoid(g[i]);
            let dg = dy[i] * u[i] * sg * (1.0 + g[i] * (1.0 - sg));
            let du = dy[i] * g[i] * sigmoid(g[i]);
            assert_eq!(
                (dg1[i].to_bits(), du1[i].to_bits()),
                (dg.to_bits(), du.to_bits())
            );
        }

        let vocab = 256;
        let logits = values(rows * vocab, 8);
        let targets: Vec<f32> = (0..rows).map(|i| ((i * 37) % vocab) as f32).collect();
        let (mut l1, mut d1) = (vec![0.0; rows], vec![0.0; rows * vocab]);
        let (mut l2, mut d2) = (vec![1.0; rows], vec![1.0; rows * vocab]);
        cross_entropy(&logits, &targets, &mut l1, &mut d1, 0.25);
        cross_entropy_rows(&logits, &targets, &mut l2, &mut d2, 0.25, true);
        assert_eq!(
            (bits(&l1), bits(&d1)),
            (bits(&l2), bits(&d2)),
            "cross_entropy"
        );

        let h = AdamHyper {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            step: 3,
            max_norm: 1.0,
        };
        let (mut p1, mut m1, mut v1) = (x.clone(), values(rows * c, 9), values(rows * c, 10));
        for v in v1.iter_mut() {
            *v = v.abs();
        }
        let (mut p2, mut m2, mut v2) = (p1.clone(), m1.clone(), v1.clone());
        adamw(&mut p1, &dy, &mut m1, &mut v1, &[4.0, 5.0], &h);
        let clip = (h.max_norm / (9.0f32.sqrt() + 1e-6)).min(1.0);
        adamw_block(
            &mut p2,
            &dy,
            &mut m2,
            &mut v2,
            clip,
            &h,
            h.bias_corrections(),
        );
        assert_eq!(
            (bits(&p1), bits(&m1), bits(&v1)),
            (bits(&p2), bits(&m2), bits(&v2))
        );
    }
}
