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

pub(crate) fn rmsnorm(x: &[f32], w: &[f32], out: &mut [f32], rstd: &mut [f32], eps: f32) {
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
    for (n, r) in rstd.iter().enumerate() {
        let base = n * c;
        let dot = (0..c).fold(0.0f32, |s, j| s + w[j] * dy[base + j] * x[base + j]);
        let mean_dot = dot / c as f32;
        for j in 0..c {
            dx[base + j] = r * (w[j] * dy[base + j] - x[base + j] * r * r * mean_dot);
        }
    }
    for j in 0..c {
        let mut acc = dw[j];
        for (n, r) in rstd.iter().enumerate() {
            acc += dy[n * c + j] * x[n * c + j] * r;
        }
        dw[j] = acc;
    }
}

pub(crate) fn rope(x: &[f32], table: &[f32], out: &mut [f32], s: RopeShape, inverse: bool) {
    let half = s.head_dim / 2;
    for rh in 0..s.rows * s.heads {
        let p = (rh / s.heads) % s.seq;
        let base = rh * s.head_dim;
        for i in 0..half {
            let c = table[(p * half + i) * 2];
            let sn = table[(p * half + i) * 2 + 1];
            let sn = if inverse { -sn } else { sn };
            let (a, b) = (x[base + i], x[base + i + half]);
            out[base + i] = a * c - b * sn;
            out[base + i + half] = b * c + a * sn;
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

fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

pub(crate) fn swiglu(g: &[f32], u: &[f32], out: &mut [f32]) {
    super::par::pieces_mut(out, |at, o| {
        for (k, ok) in o.iter_mut().enumerate() {
            let i = at + k;
            *ok = g[i] * sigmoid(g[i]) * u[i];
        }
    });
}

pub(crate) fn swiglu_backward(g: &[f32], u: &[f32], dy: &[f32], dg: &mut [f32], du: &mut [f32]) {
    // Each output in its own pass (the sigmoid is recomputed: the same value).
    super::par::pieces_mut(dg, |at, o| {
        for (k, ok) in o.iter_mut().enumerate() {
            let i = at + k;
            let s = sigmoid(g[i]);
            *ok = dy[i] * u[i] * s * (1.0 + g[i] * (1.0 - s));
        }
    });
    super::par::pieces_mut(&mut du[..dg.len()], |at, o| {
        for (k, ok) in o.iter_mut().enumerate() {
            let i = at + k;
            *ok = dy[i] * g[i] * sigmoid(g[i]);
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
    for n in 0..rows {
        let row = &logits[n * vocab..(n + 1) * vocab];
        let m = row[1..].iter().fold(row[0], |m, v| m.max(*v));
        let sum = row.iter().fold(0.0f32, |s, v| s + (v - m).exp());
        let lse = m + sum.ln();
        let t = token(targets[n], vocab);
        losses[n] = lse - row[t];
        for (v, l) in row.iter().enumerate() {
            let p = (l - lse).exp();
            let onehot = if v == t { 1.0 } else { 0.0 };
            dlogits[n * vocab + v] = (p - onehot) * grad_scale;
        }
    }
}

/// Σ x² in the order of `shaders/sum_squares.wgsl`: 256 strided partial sums, then a tree.
pub(crate) fn sum_squares(x: &[f32]) -> f32 {
    const WG: usize = 256;
    let mut partial = [0.0f32; WG];
    for (lane, p) in partial.iter_mut().enumerate() {
        let mut acc = 0.0f32;
        let mut i = lane;
        while i < x.len() {
            acc += x[i] * x[i];
            i += WG;
        }
        *p = acc;
    }
    let mut width = WG / 2;
    while width > 0 {
        for lane in 0..width {
            partial[lane] += partial[lane + width];
        }
        width /= 2;
    }
    partial[0]
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
    let (bc1, bc2) = h.bias_corrections();
    for i in 0..param.len() {
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

    pub fn attention(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        out: &mut [f32],
        probs: &mut [f32],
        s: AttentionShape,
    ) {
        let scale = s.scale();
        let group = s.heads / s.kv_heads;
        for b in 0..s.batch {
            for h in 0..s.heads {
                let kvh = h / group;
                for i in 0..s.seq {
                    let qi = q_index(&s, b, i, h);
                    let prow = p_index(&s, b, h, i);
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
                    let mut sum = 0.0f32;
                    for j in 0..=i {
                        let e = (probs[prow + j] - m).exp();
                        probs[prow + j] = e;
                        sum += e;
                    }
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
            for h in 0..s.heads {
                let kvh = h / group;
                for i in 0..s.seq {
                    let qi = q_index(&s, b, i, h);
                    let prow = p_index(&s, b, h, i);
                    let mut rowsum = 0.0f32;
                    for j in 0..=i {
                        let vj = kv_index(&s, b, j, kvh);
                        let mut dp = 0.0f32;
                        for d in 0..s.head_dim {
                            dp += dout[qi + d] * v[vj + d];
                        }
                        g.dscores[prow + j] = dp;
                        rowsum += probs[prow + j] * dp;
                    }
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
