//! `hif8lab probe`: a model's knowledge on a multiple-choice probe set (the shipped
//! general-knowledge set, or a file laid out like it), scored like lm-eval-harness.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use hif8lab_engine::{Backend, BackendChoice, with_backend};
use hif8lab_lab::stats::{Arm, Groups, bootstrap};
use hif8lab_train::eval::{GENERAL_KNOWLEDGE, McItem, items_from_tsv, mc_scores};
use hif8lab_train::infer::{Model, SCORE_BATCH, choice_sequence, sequence_losses};

use crate::commands::model_cmds::{on_backend, open_source, window};

/// Arguments of `hif8lab probe`.
#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// A run folder, a checkpoint, a Hugging Face Llama folder or a GGUF file.
    model: PathBuf,
    /// `general` (the shipped general-knowledge set: 609 items over 209 clusters) or a
    /// tab-separated file: cluster, context, answer, three or more distractors per line.
    #[arg(long, default_value = "general")]
    set: String,
    /// `auto` (the GPU when an adapter exists, else the CPU, said so), `cpu`, `gpu` or
    /// `gpu:ADAPTER` (the adapter whose name contains ADAPTER).
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
    /// Encode without the tokenizer's special tokens (by default contexts are encoded as
    /// `tokenizer(text)` does: BOS where the tokenizer adds it).
    #[arg(long)]
    no_special_tokens: bool,
    /// One JSON document: {"items", "clusters", "chance", "acc", "acc_interval", "acc_norm",
    /// "acc_norm_interval", …}.
    #[arg(long)]
    json: bool,
}

/// The items of `--set`.
fn probe_items(set: &str) -> Result<Vec<McItem>> {
    if set == "general" {
        return items_from_tsv("general-knowledge.tsv", GENERAL_KNOWLEDGE)
            .map_err(anyhow::Error::msg);
    }
    let text = std::fs::read(set).with_context(|| format!("--set {set}"))?;
    let text =
        String::from_utf8(text).map_err(|e| anyhow::anyhow!("--set {set}: not UTF-8 ({e})"))?;
    items_from_tsv(set, &text).map_err(anyhow::Error::msg)
}

/// `hif8lab probe`.
pub fn run_probe(args: ProbeArgs) -> Result<crate::output::Outcome> {
    let items = probe_items(&args.set)?;
    let mut src = open_source(&args.model, None)?;
    let m = window(&src, None)?;
    let weights = std::mem::take(&mut src.weights);
    let special = !args.no_special_tokens;
    let max = m.context + 1;
    let mut seqs = Vec::new();
    for it in &items {
        for c in &it.choices {
            seqs.push(
                choice_sequence(&src.tokenizer, &it.context, c, special, max)
                    .map_err(anyhow::Error::msg)?,
            );
        }
    }
    let clock = std::time::Instant::now();
    let losses = on_backend(
        &args.backend,
        |be| with_backend!(be, b => score(b, m, &weights, &seqs, args.json)),
    )
    .map_err(crate::commands::model_cmds::naming(&src.path))?;
    let seconds = clock.elapsed().as_secs_f64();
    // Log-likelihood of each choice: the sum over its tokens.
    let mut k = 0;
    let loglik: Vec<Vec<f64>> = items
        .iter()
        .map(|it| {
            it.choices
                .iter()
                .map(|_| {
                    let ((_, start), l) = (&seqs[k], &losses[k]);
                    k += 1;
                    -l[start - 1..].iter().map(|v| f64::from(*v)).sum::<f64>()
                })
                .collect()
        })
        .collect();
    let (acc, acc_norm, _) = mc_scores(&items, &loglik);
    let groups = Groups::from_ids(&items.iter().map(|i| i.group).collect::<Vec<_>>());
    let score = |marks: &[bool]| bootstrap(&groups, &[Arm::marks(&[marks.to_vec()])], &|v| v[0]);
    let (a, an) = (score(&acc), score(&acc_norm));
    let chance = items
        .iter()
        .map(|i| 1.0 / i.choices.len() as f64)
        .sum::<f64>()
        / items.len() as f64;
    let tokens: usize = seqs.iter().map(|(s, _)| s.len() - 1).sum();
    let doc = serde_json::json!({
        "model": args.model.display().to_string(),
        "set": args.set,
        "items": items.len(),
        "clusters": groups.len(),
        "chance": chance,
        "acc": a.value,
        "acc_interval": a.interval,
        "acc_norm": an.value,
        "acc_norm_interval": an.interval,
        "marks": {
            "acc": hif8lab_lab::stats::pack_marks(&acc),
            "acc_norm": hif8lab_lab::stats::pack_marks(&acc_norm),
        },
        "add_special_tokens": special,
        "tokens_per_s": tokens as f64 / seconds.max(1e-9),
    });
    if args.json {
        crate::output::print_json(&doc)?;
    } else {
        crate::output::outln!(
            "{} on {} ({} items over {} clusters, chance {:.2}): acc {:.3} [95 %: {:.3}, {:.3}], acc_norm {:.3} [{:.3}, {:.3}] (cluster bootstrap); {:.0} tokens/s",
            args.model.display(),
            args.set,
            items.len(),
            groups.len(),
            chance,
            a.value,
            a.interval[0],
            a.interval[1],
            an.value,
            an.interval[0],
            an.interval[1],
            doc["tokens_per_s"].as_f64().unwrap_or(0.0)
        );
    }
    Ok(crate::output::Outcome::Ok)
}

/// Per sequence, the loss of each target.
fn score<B: Backend>(
    backend: B,
    m: hif8lab_train::config::ModelConfig,
    weights: &hif8lab_train::models::checkpoint::Checkpoint,
    seqs: &[(Vec<u32>, usize)],
    quiet: bool,
) -> Result<Vec<Vec<f32>>> {
    let mut model = Model::new(backend, m, weights, SCORE_BATCH)?;
    let bar = crate::commands::train_cmd::progress_bar(seqs.len() as u64, "choices", quiet);
    let all: Vec<&[u32]> = seqs.iter().map(|(s, _)| s.as_slice()).collect();
    let out = sequence_losses(&mut model, &all, &mut |n| bar.inc(n as u64))?;
    bar.finish_and_clear();
    Ok(out)
}
