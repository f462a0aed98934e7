//! The model kernels (embedding, RMSNorm, RoPE, attention, SwiGLU, cross-entropy,
//! elementwise, sum of squares, AdamW): GPU against the CPU oracle on a real adapter, and the
//! CPU backward passes against central finite differences.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::prelude::*;
use hif8lab_engine::{
    AdamHyper, AttentionShape, Backend, CachedAttentionShape, RopeShape, rope_table,
};

/// |gpu − cpu| ≤ OPS_ATOL + OPS_RTOL·|cpu| (exp, log, sqrt and division may differ by a few
/// ULP between a GPU and the CPU).
const OPS_ATOL: f32 = 1e-5;
/// See [`OPS_ATOL`].
const OPS_RTOL: f32 = 1e-4;
/// Finite differences: |analytic − numeric| ≤ FD_TOL·(1 + |numeric|), central differences
/// with step FD_STEP, the loss summed in f64.
const FD_TOL: f64 = 3e-3;
/// See [`FD_TOL`].
const FD_STEP: f32 = 1e-2;

mod common;
use common::gpu;

fn rand_vec(seed: u32, n: usize, amp: f32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = hif8lab_format::hash_u32(seed, i as u32);
            ((h >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0) * amp
        })
        .collect()
}

fn close(g: &[f32], c: &[f32], what: &str) {
    assert_eq!(g.len(), c.len(), "{what}");
    for (i, (x, y)) in g.iter().zip(c).enumerate() {
        assert!(
            (x - y).abs() <= OPS_ATOL + OPS_RTOL * y.abs(),
            "{what}[{i}]: gpu {x} cpu {y}"
        );
    }
}

/// Runs `f` on a backend with the given input tensors and returns the listed outputs.
fn on<B: Backend>(
    b: &B,
    inputs: &[Vec<f32>],
    outputs: &[usize],
    f: impl Fn(&B, &[B::Tensor], &[B::Tensor]),
) -> Vec<Vec<f32>> {
    let ins: Vec<B::Tensor> = inputs.iter().map(|v| b.upload(v).unwrap()).collect();
    let outs: Vec<B::Tensor> = outputs.iter().map(|n| b.zeros(*n).unwrap()).collect();
    f(b, &ins, &outs);
    outs.iter().map(|t| b.read(t).wait().unwrap()).collect()
}

macro_rules! parity {
    ($what:expr, $inputs:expr, $outputs:expr, |$b:ident, $i:ident, $o:ident| $body:expr) => {{
        let inputs: Vec<Vec<f32>> = $inputs;
        let outputs: Vec<usize> = $outputs;
        let cpu = on(&CpuBackend::new(), &inputs, &outputs, |$b, $i, $o| $body);
        if let Some(g) = gpu() {
            let gpu_out = on(g, &inputs, &outputs, |$b, $i, $o| $body);
            for (k, (go, co)) in gpu_out.iter().zip(&cpu).enumerate() {
                close(go, co, &format!("{} output {k}", $what));
            }
        }
        cpu
    }};
}

#[test]
fn embedding_matches_cpu() {
    let (v, c, n) = (11, 7, 23);
    let tokens: Vec<f32> = (0..n).map(|i| ((i * 5) % v) as f32).collect();
    let table = rand_vec(1, v * c, 1.0);
    let out = parity!(
        "embedding",
        vec![tokens.clone(), table.clone()],
        vec![n * c],
        |b, i, o| { b.embedding(&i[0], &i[1], &o[0], c).unwrap() }
    );
    assert_eq!(&out[0][c..2 * c], &table[5 * c..6 * c]);
    let dout = rand_vec(2, n * c, 1.0);
    let grads = parity!(
        "embedding_backward",
        vec![tokens, dout.clone()],
        vec![v * c],
        |b, i, o| { b.embedding_backward(&i[0], &i[1], &o[0], c).unwrap() }
    );
    // Token 0 appears at rows 0, 11, 22.
    let want: f32 = dout[0] + dout[11 * c] + dout[22 * c];
    assert!((grads[0][0] - want).abs() < 1e-6);
}

#[test]
fn embedding_backward_adds_to_the_named_rows_only_in_token_order() {
    // A table with values already in it, rows no token names (vocab 40, 9 distinct tokens),
    // repeats, and an id past the vocabulary (clamped to the last row): every row is its old
    // value plus its tokens' gradients in increasing position, on both backends, bit for bit.
    let (v, c) = (40, 5);
    let ids = [3, 7, 3, 39, 0, 7, 7, 12, 3, 55, 21, 0, 39];
    let tokens: Vec<f32> = ids.iter().map(|t| *t as f32).collect();
    let table = rand_vec(3, v * c, 1.0);
    let dout = rand_vec(4, ids.len() * c, 1.0);
    let mut want = table.clone();
    for (pos, id) in ids.iter().enumerate() {
        let row = (*id).min(v - 1);
        for ch in 0..c {
            want[row * c + ch] += dout[pos * c + ch];
        }
    }
    fn on_backend<B: Backend>(b: &B, t: &[f32], d: &[f32], table: &[f32], c: usize) -> Vec<f32> {
        let (t, d, out) = (
            b.upload(t).unwrap(),
            b.upload(d).unwrap(),
            b.upload(table).unwrap(),
        );
        b.embedding_backward(&t, &d, &out, c).unwrap();
        b.read(&out).wait().unwrap()
    }
    let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    let cpu = on_backend(&CpuBackend::new(), &tokens, &dout, &table, c);
    assert_eq!(bits(&cpu), bits(&want), "cpu");
    assert_eq!(&cpu[c..3 * c], &table[c..3 * c], "rows 1 and 2: no token");
    if let Some(g) = gpu() {
        let gpu_out = on_backend(g, &tokens, &dout, &table, c);
        assert_eq!(bits(&gpu_out), bits(&want), "gpu");
    }
}

#[test]
fn rmsnorm_matches_cpu() {
    let (rows, c) = (9, 65);
    let x = rand_vec(3, rows * c, 2.0);
    let w = rand_vec(4, c, 1.0);
    parity!(
        "rmsnorm",
        vec![x.clone(), w.clone()],
        vec![rows * c, rows],
        |b, i, o| { b.rmsnorm(&i[0], &i[1], &o[0], &o[1], 1e-5).unwrap() }
    );
    let dy = rand_vec(5, rows * c, 1.0);
    let cpu = CpuBackend::new();
    let (xt, wt) = (cpu.upload(&x).unwrap(), cpu.upload(&w).unwrap());
    let (y, r) = (cpu.zeros(rows * c).unwrap(), cpu.zeros(rows).unwrap());
    cpu.rmsnorm(&xt, &wt, &y, &r, 1e-5).unwrap();
    let rstd = cpu.read(&r).wait().unwrap();
    parity!(
        "rmsnorm_backward",
        vec![x, w, rstd, dy],
        vec![rows * c, c],
        |b, i, o| {
            b.rmsnorm_backward(&i[0], &i[1], &i[2], &i[3], &o[0], &o[1])
                .unwrap()
        }
    );
}

#[test]
fn rope_matches_cpu_and_inverts() {
    let shape = RopeShape {
        rows: 2 * 5,
        heads: 3,
        head_dim: 8,
        seq: 5,
    };
    let x = rand_vec(6, 10 * 3 * 8, 1.0);
    let table = rope_table(5, 8, 10000.0);
    let out = parity!(
        "rope",
        vec![x.clone(), table.clone()],
        vec![x.len()],
        |b, i, o| { b.rope(&i[0], &i[1], &o[0], shape, false).unwrap() }
    );
    let back = parity!(
        "rope inverse",
        vec![out[0].clone(), table],
        vec![x.len()],
        |b, i, o| { b.rope(&i[0], &i[1], &o[0], shape, true).unwrap() }
    );
    for (a, b) in back[0].iter().zip(&x) {
        assert!((a - b).abs() < 1e-5);
    }
    // Position 0 is not rotated.
    assert_eq!(&out[0][..24], &x[..24]);
}

fn attention_shape() -> AttentionShape {
    AttentionShape {
        batch: 2,
        seq: 7,
        heads: 4,
        kv_heads: 2,
        head_dim: 8,
    }
}

#[test]
fn attention_matches_cpu() {
    let s = attention_shape();
    let q = rand_vec(7, s.q_len(), 1.0);
    let k = rand_vec(8, s.kv_len(), 1.0);
    let v = rand_vec(9, s.kv_len(), 1.0);
    let fwd = parity!(
        "attention",
        vec![q.clone(), k.clone(), v.clone()],
        vec![s.q_len(), s.probs_len()],
        |b, i, o| { b.attention(&i[0], &i[1], &i[2], &o[0], &o[1], s).unwrap() }
    );
    // Each probability row sums to 1 over j ≤ i and is 0 above the diagonal.
    for row in fwd[1].chunks(s.seq).take(s.seq) {
        let sum: f32 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5);
    }
    assert_eq!(fwd[1][1], 0.0);
    let dout = rand_vec(10, s.q_len(), 1.0);
    parity!(
        "attention_backward",
        vec![q, k, v, fwd[1].clone(), dout],
        vec![s.probs_len(), s.q_len(), s.kv_len(), s.kv_len()],
        |b, i, o| b
            .attention_backward(
                &i[0], &i[1], &i[2], &i[3], &i[4], &o[0], &o[1], &o[2], &o[3], s
            )
            .unwrap()
    );
}

/// Attention over a key/value cache: GPU against the CPU twin, and both against the plain
/// causal attention of the whole sequence (the rows past.. of one sequence of past + new),
/// for head dimensions below and above the kernel's 64 invocations.
#[test]
fn attention_cached_matches_cpu_and_full_attention() {
    // The last shape is a long window (what inference runs through this kernel on a GPU).
    for (head_dim, past, new, capacity) in [
        (8, 5, 3, 11),
        (70, 0, 6, 6),
        (16, 9, 1, 10),
        (64, 0, 600, 600),
    ] {
        let (heads, kv_heads) = (6, 2);
        let seq = past + new;
        let full = AttentionShape {
            batch: 1,
            seq,
            heads,
            kv_heads,
            head_dim,
        };
        let q_all = rand_vec(21, full.q_len(), 1.0);
        let k_all = rand_vec(22, full.kv_len(), 1.0);
        let v_all = rand_vec(23, full.kv_len(), 1.0);
        // The CPU's full attention is the reference (the GPU's training kernel, one
        // invocation per query row, is checked on short sequences in attention_matches_cpu).
        let reference = on(
            &CpuBackend::new(),
            &[q_all.clone(), k_all.clone(), v_all.clone()],
            &[full.q_len(), full.probs_len()],
            |b, i, o| {
                b.attention(&i[0], &i[1], &i[2], &o[0], &o[1], full)
                    .unwrap()
            },
        );
        let shape = CachedAttentionShape {
            batch: 1,
            past,
            new,
            capacity,
            heads,
            kv_heads,
            head_dim,
        };
        let row = heads * head_dim;
        let q_new = q_all[past * row..].to_vec();
        // Caches of `capacity` positions: the first `seq` filled, the rest garbage (never read).
        let mut k_cache = rand_vec(24, shape.cache_len(), 9.0);
        let mut v_cache = rand_vec(25, shape.cache_len(), 9.0);
        k_cache[..k_all.len()].copy_from_slice(&k_all);
        v_cache[..v_all.len()].copy_from_slice(&v_all);
        let cached = parity!(
            "attention_cached",
            vec![q_new, k_cache, v_cache],
            vec![shape.q_len(), shape.scores_len()],
            |b, i, o| {
                b.attention_cached(&i[0], &i[1], &i[2], &o[0], &o[1], shape)
                    .unwrap()
            }
        );
        close(
            &cached[0],
            &reference[0][past * row..],
            "cached vs full attention",
        );
    }
    // A shape whose rows do not fit the cache is refused.
    let cpu = CpuBackend::new();
    let t = cpu.zeros(64).unwrap();
    let bad = CachedAttentionShape {
        batch: 1,
        past: 3,
        new: 2,
        capacity: 4,
        heads: 1,
        kv_heads: 1,
        head_dim: 2,
    };
    assert!(cpu.attention_cached(&t, &t, &t, &t, &t, bad).is_err());
}

/// copy_range copies exactly its range on both backends and refuses ranges outside a tensor.
#[test]
fn copy_range_matches_cpu() {
    let src = rand_vec(31, 37, 1.0);
    let dst = rand_vec(32, 50, 1.0);
    let out = parity!(
        "copy_range",
        vec![src.clone(), dst.clone()],
        vec![],
        |b, i, _o| { b.copy_range(&i[0], 5, &i[1], 11, 20).unwrap() }
    );
    assert!(out.is_empty());
    {
        let b = CpuBackend::new();
        let (s, d) = (b.upload(&src).unwrap(), b.upload(&dst).unwrap());
        b.copy_range(&s, 5, &d, 11, 20).unwrap();
        let got = b.read(&d).wait().unwrap();
        assert_eq!(&got[11..31], &src[5..25]);
        assert_eq!(&got[..11], &dst[..11]);
        assert_eq!(&got[31..], &dst[31..]);
        assert!(b.copy_range(&s, 30, &d, 0, 8).is_err());
        assert!(b.copy_range(&s, 0, &d, 45, 8).is_err());
    }
    if let Some(g) = gpu() {
        let (s, d) = (g.upload(&src).unwrap(), g.upload(&dst).unwrap());
        g.copy_range(&s, 5, &d, 11, 20).unwrap();
        let got = g.read(&d).wait().unwrap();
        assert_eq!(&got[11..31], &src[5..25]);
        assert_eq!(&got[31..], &dst[31..]);
        assert!(g.copy_range(&s, 30, &d, 0, 8).is_err());
    }
}

/// The loss over a real model's vocabulary (49,152 logits a row) on both backends within
/// 2e-6 of the f64 value (a sum in f32 in order drifted by 1e-5 here; one invocation per row
/// lost two thirds of the sum on lavapipe).
#[test]
fn cross_entropy_over_a_large_vocabulary_matches_f64() {
    let (rows, vocab) = (3usize, 49_152usize);
    let logits = rand_vec(41, rows * vocab, 10.0);
    let targets: Vec<f32> = (0..rows).map(|r| (r * 7919 % vocab) as f32).collect();
    let want: Vec<f64> = (0..rows)
        .map(|r| {
            let row = &logits[r * vocab..(r + 1) * vocab];
            let m = row.iter().fold(f32::MIN, |a, b| a.max(*b)) as f64;
            let lse = m + row
                .iter()
                .map(|x| (f64::from(*x) - m).exp())
                .sum::<f64>()
                .ln();
            lse - f64::from(row[targets[r] as usize])
        })
        .collect();
    let check = |got: &[f32], what: &str| {
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (f64::from(*g) - w).abs() < 2e-6 * w.abs().max(1.0),
                "{what}: {g} vs {w}"
            );
        }
    };
    // With the gradient, and the losses only (an empty dlogits): the same losses, bit for bit.
    fn losses<B: Backend>(b: &B, logits: &[f32], targets: &[f32], grad: usize) -> Vec<f32> {
        let (l, t) = (b.upload(logits).unwrap(), b.upload(targets).unwrap());
        let (lo, d) = (b.zeros(targets.len()).unwrap(), b.zeros(grad).unwrap());
        b.cross_entropy(&l, &t, &lo, &d, 1.0).unwrap();
        b.flush();
        b.read(&lo).wait().unwrap()
    }
    let cpu = CpuBackend::new();
    let with_grad = losses(&cpu, &logits, &targets, rows * vocab);
    check(&with_grad, "cpu");
    assert_eq!(
        with_grad,
        losses(&cpu, &logits, &targets, 0),
        "cpu, losses only"
    );
    if let Some(g) = gpu() {
        let with_grad = losses(g, &logits, &targets, rows * vocab);
        check(&with_grad, "gpu");
        assert_eq!(
            with_grad,
            losses(g, &logits, &targets, 0),
            "gpu, losses only"
        );
    }
}

#[test]
fn swiglu_cross_entropy_elementwise_match_cpu() {
    let n = 257;
    let g = rand_vec(11, n, 4.0);
    let u = rand_vec(12, n, 2.0);
    parity!("swiglu", vec![g.clone(), u.clone()], vec![n], |b, i, o| b
        .swiglu(&i[0], &i[1], &o[0])
        .unwrap());
    let dy = rand_vec(13, n, 1.0);
    parity!("swiglu_backward", vec![g, u, dy], vec![n, n], |b, i, o| {
        b.swiglu_backward(&i[0], &i[1], &i[2], &o[0], &o[1])
            .unwrap()
    });
    let (rows, vocab) = (13, 37);
    let logits = rand_vec(14, rows * vocab, 5.0);
    let targets: Vec<f32> = (0..rows).map(|i| ((i * 7) % vocab) as f32).collect();
    let ce = parity!(
        "cross_entropy",
        vec![logits, targets],
        vec![rows, rows * vocab],
        |b, i, o| {
            b.cross_entropy(&i[0], &i[1], &o[0], &o[1], 1.0 / 13.0)
                .unwrap()
        }
    );
    assert!(ce[0].iter().all(|l| *l > 0.0));
    let row_sum: f32 = ce[1][..vocab].iter().sum();
    assert!(
        row_sum.abs() < 1e-6,
        "softmax − onehot sums to 0: {row_sum}"
    );
    let a = rand_vec(15, n, 1.0);
    let b2 = rand_vec(16, n, 1.0);
    let sum = parity!(
        "add/scale",
        vec![a.clone(), b2.clone()],
        vec![n],
        |b, i, o| {
            b.add_inplace(&o[0], &i[0]).unwrap();
            b.add_inplace(&o[0], &i[1]).unwrap();
            b.scale_inplace(&o[0], 0.5).unwrap();
        }
    );
    assert_eq!(sum[0][5], (a[5] + b2[5]) * 0.5);
}

#[test]
fn sum_squares_and_adamw_match_cpu() {
    // One row of 40 workgroups, and rows of 512 with a short last one (the finish pass
    // then adds 512 workgroup sums).
    for n in [10_007, 300_001] {
        let x = rand_vec(17, n, 1.0);
        let out = parity!("sum_squares", vec![x.clone()], vec![3], |b, i, o| b
            .sum_squares(&i[0], &o[0], 2)
            .unwrap());
        let direct: f64 = x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum();
        assert!((f64::from(out[0][2]) - direct).abs() < 1e-4 * direct, "{n}");
        assert_eq!(out[0][0], 0.0, "other slots untouched");
    }
    let n = 1000;
    let p = rand_vec(18, n, 1.0);
    let g = rand_vec(19, n, 3.0);
    let m = rand_vec(20, n, 0.1);
    let v: Vec<f32> = rand_vec(21, n, 0.1).iter().map(|x| x.abs()).collect();
    let norms = vec![400.0, 500.0];
    for (step, max_norm) in [(1u64, 1.0f32), (7, 0.0)] {
        let h = AdamHyper {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            step,
            max_norm,
        };
        let cpu = CpuBackend::new();
        let updated = parity!(
            "adamw",
            vec![p.clone(), g.clone(), m.clone(), v.clone(), norms.clone()],
            vec![n, n, n],
            |b, i, o| {
                b.copy(&i[0], &o[0]).unwrap();
                b.copy(&i[2], &o[1]).unwrap();
                b.copy(&i[3], &o[2]).unwrap();
                b.adamw(&o[0], &i[1], &o[1], &o[2], &i[4], 2, &h).unwrap()
            }
        );
        assert_ne!(updated[0], p, "parameters moved");
        // Check the CPU against a direct f64 formula on one element.
        let pt = cpu.upload(&p).unwrap();
        let (gt, mt, vt, nt) = (
            cpu.upload(&g).unwrap(),
            cpu.upload(&m).unwrap(),
            cpu.upload(&v).unwrap(),
            cpu.upload(&norms).unwrap(),
        );
        cpu.adamw(&pt, &gt, &mt, &vt, &nt, 2, &h).unwrap();
        let got = cpu.read(&pt).wait().unwrap()[3];
        let clip = if max_norm > 0.0 {
            (1.0f64 / (900.0f64.sqrt() + 1e-6)).min(1.0)
        } else {
            1.0
        };
        let gi = f64::from(g[3]) * clip;
        let mi = 0.9 * f64::from(m[3]) + 0.1 * gi;
        let vi = 0.95 * f64::from(v[3]) + 0.05 * gi * gi;
        let t = step as i32;
        let upd = (mi / (1.0 - 0.9f64.powi(t))) / ((vi / (1.0 - 0.95f64.powi(t))).sqrt() + 1e-8);
        let want = f64::from(p[3]) - 1e-3 * (upd + 0.1 * f64::from(p[3]));
        assert!((f64::from(got) - want).abs() < 1e-6, "{got} vs {want}");
    }
}

/// Central finite differences of L(x) = Σ r·f(x) against the analytic gradient at up to 24
/// coordinates of `x`.
fn fd_check(what: &str, x: &[f32], analytic: &[f32], loss: impl Fn(&[f32]) -> f64) {
    let step = (x.len() / 24).max(1);
    for j in (0..x.len()).step_by(step) {
        let mut xp = x.to_vec();
        let mut xm = x.to_vec();
        xp[j] += FD_STEP;
        xm[j] -= FD_STEP;
        let numeric = (loss(&xp) - loss(&xm)) / (2.0 * f64::from(FD_STEP));
        let a = f64::from(analytic[j]);
        assert!(
            (a - numeric).abs() <= FD_TOL * (1.0 + numeric.abs()),
            "{what}[{j}]: analytic {a} numeric {numeric}"
        );
    }
}

fn project(y: &[f32], r: &[f32]) -> f64 {
    y.iter()
        .zip(r)
        .map(|(a, b)| f64::from(*a) * f64::from(*b))
        .sum()
}

#[test]
fn backward_passes_match_finite_differences() {
    let cpu = CpuBackend::new();
    let up = |v: &[f32]| cpu.upload(v).unwrap();
    let rd = |t: &hif8lab_engine::cpu::CpuTensor| cpu.read(t).wait().unwrap();
    // RMSNorm: x and w.
    let (rows, c) = (3, 16);
    let x = rand_vec(30, rows * c, 1.5);
    let w = rand_vec(31, c, 1.0);
    let r = rand_vec(32, rows * c, 1.0);
    let norm = |x: &[f32], w: &[f32]| {
        let (y, s) = (cpu.zeros(rows * c).unwrap(), cpu.zeros(rows).unwrap());
        cpu.rmsnorm(&up(x), &up(w), &y, &s, 1e-5).unwrap();
        (rd(&y), rd(&s))
    };
    let (_, rstd) = norm(&x, &w);
    let (dx, dw) = (cpu.zeros(rows * c).unwrap(), cpu.zeros(c).unwrap());
    cpu.rmsnorm_backward(&up(&x), &up(&w), &up(&rstd), &up(&r), &dx, &dw)
        .unwrap();
    fd_check("rmsnorm dx", &x, &rd(&dx), |xx| {
        project(&norm(xx, &w).0, &r)
    });
    fd_check("rmsnorm dw", &w, &rd(&dw), |ww| {
        project(&norm(&x, ww).0, &r)
    });
    // RoPE: the inverse rotation is the transpose.
    let shape = RopeShape {
        rows: 4,
        heads: 2,
        head_dim: 4,
        seq: 4,
    };
    let table = up(&rope_table(4, 4, 10000.0));
    let xr = rand_vec(33, 32, 1.0);
    let rr = rand_vec(34, 32, 1.0);
    let rope = |x: &[f32], inverse: bool| {
        let o = cpu.zeros(32).unwrap();
        cpu.rope(&up(x), &table, &o, shape, inverse).unwrap();
        rd(&o)
    };
    fd_check("rope", &xr, &rope(&rr, true), |xx| {
        project(&rope(xx, false), &rr)
    });
    // Attention: q, k, v.
    let s = AttentionShape {
        batch: 1,
        seq: 5,
        heads: 2,
        kv_heads: 1,
        head_dim: 4,
    };
    let q = rand_vec(35, s.q_len(), 1.0);
    let k = rand_vec(36, s.kv_len(), 1.0);
    let v = rand_vec(37, s.kv_len(), 1.0);
    let ra = rand_vec(38, s.q_len(), 1.0);
    let attn = |q: &[f32], k: &[f32], v: &[f32]| {
        let (o, p) = (
            cpu.zeros(s.q_len()).unwrap(),
            cpu.zeros(s.probs_len()).unwrap(),
        );
        cpu.attention(&up(q), &up(k), &up(v), &o, &p, s).unwrap();
        (rd(&o), rd(&p))
    };
    let (_, probs) = attn(&q, &k, &v);
    let (ds, dq, dk, dv) = (
        cpu.zeros(s.probs_len()).unwrap(),
        cpu.zeros(s.q_len()).unwrap(),
        cpu.zeros(s.kv_len()).unwrap(),
        cpu.zeros(s.kv_len()).unwrap(),
    );
    cpu.attention_backward(
        &up(&q),
        &up(&k),
        &up(&v),
        &up(&probs),
        &up(&ra),
        &ds,
        &dq,
        &dk,
        &dv,
        s,
    )
    .unwrap();
    fd_check("attention dq", &q, &rd(&dq), |qq| {
        project(&attn(qq, &k, &v).0, &ra)
    });
    fd_check("attention dk", &k, &rd(&dk), |kk| {
        project(&attn(&q, kk, &v).0, &ra)
    });
    fd_check("attention dv", &v, &rd(&dv), |vv| {
        project(&attn(&q, &k, vv).0, &ra)
    });
    // SwiGLU: g and u.
    let g = rand_vec(39, 20, 3.0);
    let u = rand_vec(40, 20, 2.0);
    let rs = rand_vec(41, 20, 1.0);
    let sw = |g: &[f32], u: &[f32]| {
        let o = cpu.zeros(20).unwrap();
        cpu.swiglu(&up(g), &up(u), &o).unwrap();
        rd(&o)
    };
    let (dg, du) = (cpu.zeros(20).unwrap(), cpu.zeros(20).unwrap());
    cpu.swiglu_backward(&up(&g), &up(&u), &up(&rs), &dg, &du)
        .unwrap();
    fd_check("swiglu dg", &g, &rd(&dg), |gg| project(&sw(gg, &u), &rs));
    fd_check("swiglu du", &u, &rd(&du), |uu| project(&sw(&g, uu), &rs));
    // Cross-entropy: the mean loss over rows.
    let (rows, vocab) = (3, 9);
    let logits = rand_vec(42, rows * vocab, 3.0);
    let targets = vec![1.0, 8.0, 4.0];
    let ce = |l: &[f32]| {
        let (lo, dl) = (cpu.zeros(rows).unwrap(), cpu.zeros(rows * vocab).unwrap());
        cpu.cross_entropy(&up(l), &up(&targets), &lo, &dl, 1.0 / rows as f32)
            .unwrap();
        (rd(&lo), rd(&dl))
    };
    let (_, dlogits) = ce(&logits);
    fd_check("cross_entropy", &logits, &dlogits, |ll| {
        ce(ll).0.iter().map(|v| f64::from(*v)).sum::<f64>() / rows as f64
    });
}

/// Both backends refuse the same malformed calls with the same words (one size check an op,
/// `checks.rs`): among them logits shorter than their targets, which the GPU once let
/// through to a kernel with a vocabulary of 0.
#[test]
fn both_backends_refuse_malformed_calls_alike() {
    fn refusals<B: Backend>(b: &B) -> Vec<String> {
        // A fresh tensor for every argument (the CPU locks each one it reads).
        let t = |n: usize| b.zeros(n).unwrap();
        let shape = AttentionShape {
            batch: 1,
            seq: 2,
            heads: 2,
            kv_heads: 1,
            head_dim: 2,
        };
        let rope = RopeShape {
            rows: 2,
            heads: 2,
            head_dim: 2,
            seq: 2,
        };
        let hyper = AdamHyper {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.0,
            step: 1,
            max_norm: 0.0,
        };
        let results = [
            b.embedding(&t(2), &t(3), &t(8), 2),
            b.embedding_backward(&t(4), &t(3), &t(8), 2),
            b.rmsnorm(&t(8), &t(3), &t(8), &t(4), 1e-5),
            b.rmsnorm_backward(&t(8), &t(4), &t(3), &t(8), &t(8), &t(4)),
            b.rope(&t(4), &t(4), &t(8), rope, false),
            b.attention(&t(8), &t(2), &t(4), &t(8), &t(8), shape),
            b.attention_backward(
                &t(8),
                &t(4),
                &t(4),
                &t(8),
                &t(8),
                &t(8),
                &t(8),
                &t(4),
                &t(2),
                shape,
            ),
            b.swiglu(&t(4), &t(3), &t(4)),
            b.swiglu_backward(&t(4), &t(4), &t(4), &t(3), &t(4)),
            b.cross_entropy(&t(0), &t(4), &t(4), &t(0), 1.0),
            b.cross_entropy(&t(12), &t(4), &t(3), &t(12), 1.0),
            b.adamw(&t(4), &t(4), &t(3), &t(4), &t(2), 3, &hyper),
            b.sum_squares(&t(16), &t(2), 2),
        ];
        results
            .into_iter()
            .enumerate()
            .map(|(i, r)| match r {
                Err(e) => e.to_string(),
                Ok(()) => panic!("call {i} was accepted"),
            })
            .collect()
    }
    let cpu = refusals(&CpuBackend::new());
    assert!(cpu[9].contains("cross_entropy"), "{}", cpu[9]);
    if let Some(g) = gpu() {
        assert_eq!(refusals(g), cpu);
    }
}
