//! Multiple-choice scoring with a [`Model`], as lm-eval-harness scores: each choice appended
//! to its context in the model's own tokenizer (special tokens as the tokenizer adds them),
//! only the choice's tokens scored, sequences never padded. What `hif8lab probe` and the
//! real-model grid score with.

use hif8lab_engine::Backend;

use super::Model;
use crate::eval::{McItem, ProbeSet, score_probes};
use crate::models::tokenizer::Tokenizer;
use crate::trainer::{ProbeScores, TrainError};

/// Sequences of one length scored in one forward pass, at most.
pub const SCORE_BATCH: usize = 16;

/// Held-out windows scored ([`score_probe_set`]), as many as the trainer's probes score.
pub const HELDOUT_WINDOWS: usize = 32;

/// The tokens of `context` followed by `choice` and where the choice starts, cut to the
/// last `max` tokens. The choice's tokens are those of the whole text after the context's
/// (so a merge across the boundary is tokenized as the model would see it); where the
/// whole does not start with the context's tokens, the choice is tokenized alone.
pub fn choice_sequence(
    tokenizer: &Tokenizer,
    context: &str,
    choice: &str,
    special: bool,
    max: usize,
) -> Result<(Vec<u32>, usize), crate::models::tokenizer::TokenizerError> {
    let ctx = tokenizer.encode_with(context, special)?;
    let whole = tokenizer.encode_with(&format!("{context}{choice}"), special)?;
    let cont = match whole.strip_prefix(ctx.as_slice()) {
        Some(rest) if !rest.is_empty() => rest.to_vec(),
        _ => tokenizer.encode_with(choice, false)?,
    };
    let mut seq = ctx;
    let start = seq.len();
    seq.extend(cont);
    let cut = seq.len().saturating_sub(max);
    Ok((seq[cut..].to_vec(), start.saturating_sub(cut).max(1)))
}

/// Per sequence, the loss of each target (entry i: −log p(seq[i + 1] | seq[..= i])).
/// Sequences of one length go through together, up to [`SCORE_BATCH`] a pass, shortest
/// first; `done` hears how many sequences each pass finished.
pub fn sequence_losses<B: Backend>(
    model: &mut Model<B>,
    seqs: &[&[u32]],
    done: &mut dyn FnMut(usize),
) -> Result<Vec<Vec<f32>>, TrainError> {
    let mut order: Vec<usize> = (0..seqs.len()).collect();
    order.sort_by_key(|i| seqs[*i].len());
    let mut out = vec![Vec::new(); seqs.len()];
    for same in order.chunk_by(|a, b| seqs[*a].len() == seqs[*b].len()) {
        for chunk in same.chunks(SCORE_BATCH) {
            let batch: Vec<&[u32]> = chunk.iter().map(|i| seqs[*i]).collect();
            for (i, l) in chunk.iter().zip(model.token_losses_batch(&batch)?) {
                out[*i] = l;
            }
            done(chunk.len());
        }
    }
    Ok(out)
}

/// Scores a probe set with `model` (scores labelled `step`): knowledge and completion items
/// as [`choice_sequence`] builds them, and the loss of the first [`HELDOUT_WINDOWS`]
/// context-long windows of the held-out text. The same statistics, intervals and per-item
/// marks as the trainer's probes.
pub fn score_probe_set<B: Backend>(
    model: &mut Model<B>,
    tokenizer: &Tokenizer,
    probes: &ProbeSet,
    special: bool,
    step: u64,
) -> Result<ProbeScores, TrainError> {
    let ctx = model.config().context;
    let data =
        |e: crate::models::tokenizer::TokenizerError| TrainError::from(super::InferError::from(e));
    let mc = |items: &[McItem]| -> Result<Vec<(Vec<u32>, usize)>, TrainError> {
        let mut seqs = Vec::new();
        for it in items {
            for c in &it.choices {
                seqs.push(
                    choice_sequence(tokenizer, &it.context, c, special, ctx + 1).map_err(data)?,
                );
            }
        }
        Ok(seqs)
    };
    let (knowledge, completion) = (mc(&probes.knowledge)?, mc(&probes.completion)?);
    let held = tokenizer
        .encode_with(&probes.heldout, false)
        .map_err(data)?;
    let windows: Vec<&[u32]> = held
        .windows(ctx + 1)
        .step_by(ctx)
        .take(HELDOUT_WINDOWS)
        .collect();
    let all: Vec<&[u32]> = knowledge
        .iter()
        .chain(&completion)
        .map(|(s, _)| s.as_slice())
        .chain(windows.iter().copied())
        .collect();
    let rows = sequence_losses(model, &all, &mut |_| {})?;
    // A row holds one loss per target: the choice's tokens are its last `len − start`.
    let spans = |v: &[(Vec<u32>, usize)]| -> Vec<(usize, usize)> {
        v.iter()
            .map(|(s, start)| (s.len() - 1, s.len() - start))
            .collect()
    };
    Ok(score_probes(
        step,
        &rows,
        &(probes.knowledge.clone(), spans(&knowledge)),
        &(probes.completion.clone(), spans(&completion)),
    ))
}
