//! The size checks of the model's and the optimizer's ops: one function an op, called by both
//! backends before they compute, so the CPU oracle and a GPU kernel refuse the same calls with
//! the same words. Each takes the tensors' lengths (elements) and returns what the op derives
//! from them (rows, the vocabulary).

use crate::{AttentionShape, CachedAttentionShape, EngineError, RopeShape};
use crate::{at_least, at_least_each, rows_of, same_len};

/// Embedding gather: table `[vocab, channels]`, out at least `tokens × channels`; the vocabulary.
pub(crate) fn embedding(
    table: usize,
    out: usize,
    tokens: usize,
    channels: usize,
) -> Result<usize, EngineError> {
    let vocab = rows_of("embedding table", table, channels)?;
    at_least("embedding out", out, tokens * channels)?;
    Ok(vocab)
}

/// Embedding scatter-add: dtable `[vocab, channels]`, dout at least `tokens × channels`; the
/// vocabulary.
pub(crate) fn embedding_backward(
    dtable: usize,
    dout: usize,
    tokens: usize,
    channels: usize,
) -> Result<usize, EngineError> {
    let vocab = rows_of("embedding dtable", dtable, channels)?;
    at_least("embedding dout", dout, tokens * channels)?;
    Ok(vocab)
}

/// RMSNorm: x `[rows, c]` with weight `[c]`, out like x, rstd `[rows]`; the rows.
pub(crate) fn rmsnorm(
    x: usize,
    weight: usize,
    out: usize,
    rstd: usize,
) -> Result<usize, EngineError> {
    let rows = rows_of("rmsnorm x", x, weight)?;
    same_len("rmsnorm out", out, x)?;
    same_len("rmsnorm rstd", rstd, rows)?;
    Ok(rows)
}

/// RMSNorm's backward: x `[rows, c]` with weight `[c]`, rstd `[rows]`, dy and dx like x,
/// dweight like weight; the rows.
pub(crate) fn rmsnorm_backward(
    [x, weight, rstd]: [usize; 3],
    [dy, dx, dweight]: [usize; 3],
) -> Result<usize, EngineError> {
    let rows = rows_of("rmsnorm_backward x", x, weight)?;
    same_len("rmsnorm_backward rstd", rstd, rows)?;
    same_len("rmsnorm_backward dy", dy, x)?;
    same_len("rmsnorm_backward dx", dx, x)?;
    same_len("rmsnorm_backward dweight", dweight, weight)?;
    Ok(rows)
}

/// Rotary embedding: x and out hold `rows × heads × head_dim`, the table `seq × head_dim`.
pub(crate) fn rope(
    x: usize,
    out: usize,
    table: usize,
    shape: &RopeShape,
) -> Result<(), EngineError> {
    let n = shape.rows * shape.heads * shape.head_dim;
    at_least("rope x", x, n)?;
    at_least("rope out", out, n)?;
    at_least("rope table", table, shape.seq * shape.head_dim)
}

/// The attention shape itself: whole groups of heads, a head size and a sequence (the CPU
/// checks it before it locks any tensor: one tensor may be passed for several arguments).
pub(crate) fn attention_shape(s: &AttentionShape) -> Result<(), EngineError> {
    if s.kv_heads == 0 || !s.heads.is_multiple_of(s.kv_heads) || s.head_dim == 0 || s.seq == 0 {
        return Err(EngineError::Shape {
            op: "attention".into(),
            message: format!(
                "heads {} must be a multiple of kv_heads {}, head_dim and seq > 0",
                s.heads, s.kv_heads
            ),
        });
    }
    Ok(())
}

/// Causal attention: q, k, v, out and probs against the shape (checked first by
/// [`attention_shape`]).
pub(crate) fn attention(
    shape: &AttentionShape,
    [q, k, v, out, probs]: [usize; 5],
) -> Result<(), EngineError> {
    at_least_each(
        "attention",
        &[
            ("q", q, shape.q_len()),
            ("k", k, shape.kv_len()),
            ("v", v, shape.kv_len()),
            ("out", out, shape.q_len()),
            ("probs", probs, shape.probs_len()),
        ],
    )
}

/// Attention's backward: dscores, dq, dk, dv and dout against the shape (checked first by
/// [`attention_shape`]).
pub(crate) fn attention_backward(
    shape: &AttentionShape,
    [dscores, dq, dk, dv, dout]: [usize; 5],
) -> Result<(), EngineError> {
    at_least_each(
        "attention_backward",
        &[
            ("dscores", dscores, shape.probs_len()),
            ("dq", dq, shape.q_len()),
            ("dk", dk, shape.kv_len()),
            ("dv", dv, shape.kv_len()),
            ("dout", dout, shape.q_len()),
        ],
    )
}

/// Attention over a key/value cache: q, the caches, out and the score scratch against the
/// shape (checked first by [`CachedAttentionShape::check`]).
pub(crate) fn attention_cached(
    shape: &CachedAttentionShape,
    [q, k_cache, v_cache, out, scores]: [usize; 5],
) -> Result<(), EngineError> {
    at_least_each(
        "attention_cached",
        &[
            ("q", q, shape.q_len()),
            ("k_cache", k_cache, shape.cache_len()),
            ("v_cache", v_cache, shape.cache_len()),
            ("out", out, shape.q_len()),
            ("scores", scores, shape.scores_len()),
        ],
    )
}

/// SwiGLU: u and out like g.
pub(crate) fn swiglu(g: usize, u: usize, out: usize) -> Result<(), EngineError> {
    same_len("swiglu u", u, g)?;
    same_len("swiglu out", out, g)
}

/// SwiGLU's backward: u, dy, dg and du like g.
pub(crate) fn swiglu_backward(g: usize, [u, dy, dg, du]: [usize; 4]) -> Result<(), EngineError> {
    for (what, len) in [("u", u), ("dy", dy), ("dg", dg), ("du", du)] {
        same_len(&format!("swiglu_backward {what}"), len, g)?;
    }
    Ok(())
}

/// Cross-entropy: losses like targets, logits whole rows of them (a vocabulary of at least
/// 1), dlogits like logits when the gradient is asked for (`dlogits` > 0).
pub(crate) fn cross_entropy(
    logits: usize,
    targets: usize,
    losses: usize,
    dlogits: usize,
) -> Result<(), EngineError> {
    same_len("cross_entropy losses", losses, targets)?;
    rows_of("cross_entropy logits", logits, logits / targets.max(1))?;
    if dlogits > 0 {
        same_len("cross_entropy dlogits", dlogits, logits)?;
    }
    if targets == 0 || !logits.is_multiple_of(targets) {
        return Err(EngineError::Shape {
            op: "cross_entropy".into(),
            message: "logits are not rows of targets".into(),
        });
    }
    Ok(())
}

/// AdamW: grad and the moments like the parameter, at least `n_norms` norms.
pub(crate) fn adamw(
    param: usize,
    [grad, m, v]: [usize; 3],
    norms: usize,
    n_norms: usize,
) -> Result<(), EngineError> {
    for (what, len) in [("grad", grad), ("m", m), ("v", v)] {
        same_len(&format!("adamw {what}"), len, param)?;
    }
    at_least("adamw norms", norms, n_norms)
}

/// Σx² into `slot` of out.
pub(crate) fn sum_squares(out: usize, slot: usize) -> Result<(), EngineError> {
    at_least("sum_squares out", out, slot + 1)
}
