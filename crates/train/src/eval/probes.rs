//! Probe sets and their scoring, like lm-eval-harness multiple choice: knowledge recall
//! (the MMLU/ARC analog) about the corpus's knowledge base, completion of regularities (the
//! HellaSwag analog), and held-out text of the pretraining distribution (forgetting shows as
//! its loss rising); with the accuracy, relative-drop and APE arithmetic the reports use.

use crate::corpus::{COLORS, DAYS, KINDS, KnowledgeBase, NUMBERS, pretrain_corpus};
use crate::kb::KNOWLEDGE_PER_ENTITY;
use crate::rng::Rng;

/// A multiple-choice item: the context, the choices (continuations), the right one.
#[derive(Clone, Debug, PartialEq)]
pub struct McItem {
    /// Text before the choice.
    pub context: String,
    /// Candidate continuations.
    pub choices: Vec<String>,
    /// Index of the correct choice.
    pub answer: usize,
    /// The item's cluster: items of one cluster share what they ask (a knowledge entity, a
    /// completion family: one sequence with 1–3 words given) and are resampled together.
    pub group: u32,
}

/// All probes of the protocol.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeSet {
    /// Knowledge recall: "The color of X is" → the right colour among four.
    pub knowledge: Vec<McItem>,
    /// Completion of regularities: the next weekday / number / letter among four.
    pub completion: Vec<McItem>,
    /// Held-out text of the pretraining distribution (fresh seed).
    pub heldout: String,
}

pub(crate) fn choices_with(
    answer: String,
    mut pool: Vec<String>,
    rng: &mut Rng,
) -> (Vec<String>, usize) {
    pool.retain(|c| *c != answer);
    let mut choices: Vec<String> = Vec::new();
    while choices.len() < 3 && !pool.is_empty() {
        choices.push(pool.swap_remove(rng.below(pool.len())));
    }
    let at = rng.below(choices.len() + 1);
    choices.insert(at, answer);
    (choices, at)
}

/// Every distinct completion item: weekdays and numbers from 7 starts with 1–3 words given,
/// letters from 22 starts with 2–4 given.
pub const COMPLETION_ITEMS: usize = 7 * 3 + 7 * 3 + 22 * 3;

impl ProbeSet {
    /// The probes of a run's data config: its knowledge base (`entities`, `kb_seed`),
    /// [`KNOWLEDGE_PER_ENTITY`] knowledge items per entity and every completion item; the same
    /// for every run of a grid and for `hif8lab train`.
    pub fn for_data(data: &crate::config::DataConfig) -> Self {
        let kb = KnowledgeBase::generate(data.entities, data.kb_seed);
        ProbeSet::generate(&kb, COMPLETION_ITEMS, data.kb_seed ^ 0x9B)
    }

    /// Probes for a knowledge base: [`KNOWLEDGE_PER_ENTITY`] knowledge items per entity (in
    /// entity order, so item `i` asks about entity `i / 6`), up to `completion` distinct
    /// regularity items (at most [`COMPLETION_ITEMS`]), and about 8 KiB of held-out
    /// pretraining text. Every question uses a phrasing the pretraining corpus states.
    pub fn generate(kb: &KnowledgeBase, completion: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed ^ 0x5052_4F42);
        let knowledge = knowledge_items(kb, &mut rng);
        let all = completion_sequences();
        // Each sequence start pushed its three items (1–3 words given) in a row: a family.
        let mut all: Vec<(u32, _)> = all
            .into_iter()
            .enumerate()
            .map(|(i, item)| ((i / 3) as u32, item))
            .collect();
        // A fixed shuffle, so that a prefix (`completion` < all) mixes the three kinds.
        for i in (1..all.len()).rev() {
            all.swap(i, rng.below(i + 1));
        }
        all.truncate(completion);
        let completion = all
            .into_iter()
            .map(|(group, (context, answer, pool))| {
                let (choices, answer) = choices_with(answer, pool, &mut rng);
                McItem {
                    context,
                    choices,
                    answer,
                    group,
                }
            })
            .collect();
        ProbeSet {
            knowledge,
            completion,
            heldout: pretrain_corpus(kb, seed ^ 0xE1D, 8 * 1024),
        }
    }
}

/// `list`'s words as answers: each with a leading space and `end` after it.
fn words(list: &[&str], end: &str) -> Vec<String> {
    list.iter().map(|w| format!(" {w}{end}")).collect()
}

/// The knowledge items: six questions per entity (colour in three phrasings, kind in two,
/// neighbour), consecutive, each with its choices drawn from `rng`.
fn knowledge_items(kb: &KnowledgeBase, rng: &mut Rng) -> Vec<McItem> {
    let names: Vec<String> = kb.entities.iter().map(|e| e.name.clone()).collect();
    let mut knowledge = Vec::with_capacity(kb.entities.len() * KNOWLEDGE_PER_ENTITY);
    for (entity, e) in kb.entities.iter().enumerate() {
        let (name, kind, color) = (&e.name, KINDS[e.kind], COLORS[e.color]);
        let next = &kb.entities[e.neighbour].name;
        let questions: [(String, String, Vec<String>); KNOWLEDGE_PER_ENTITY] = [
            (
                format!("The color of {name} is"),
                format!(" {color}."),
                words(&COLORS, "."),
            ),
            (
                format!("In the old maps, {name} is painted"),
                format!(" {color}."),
                words(&COLORS, "."),
            ),
            (
                format!("{name} is a {kind} whose color is"),
                format!(" {color}."),
                words(&COLORS, "."),
            ),
            (
                format!("The kind of {name} is"),
                format!(" {kind}."),
                words(&KINDS, "."),
            ),
            (
                format!("{name} is a"),
                format!(" {kind}"),
                words(&KINDS, ""),
            ),
            (
                format!("{name} lies next to"),
                format!(" {next}."),
                names.iter().map(|n| format!(" {n}.")).collect(),
            ),
        ];
        for (context, answer, pool) in questions {
            let (choices, answer) = choices_with(answer, pool, rng);
            knowledge.push(McItem {
                context,
                choices,
                answer,
                group: entity as u32,
            });
        }
    }
    knowledge
}

/// Every completion item (context, answer, pool) in order: next weekday, next number, next
/// letter, each sequence start giving three items (1–3 words shown) in a row.
fn completion_sequences() -> Vec<(String, String, Vec<String>)> {
    let mut all: Vec<(String, String, Vec<String>)> = Vec::with_capacity(COMPLETION_ITEMS);
    // A sequence shown up to `given` elements; the next one (with the corpus's punctuation
    // after it) is the answer.
    let seq = |prefix: &str,
               shown: &[&str],
               sep: &str,
               last_sep: &str,
               next: &str,
               end: &str,
               pool: &[&str]| {
        let mut context = String::from(prefix);
        for (i, w) in shown.iter().enumerate() {
            context.push(' ');
            context.push_str(w);
            context.push_str(if i + 1 == shown.len() { last_sep } else { sep });
        }
        (context, format!(" {next}{end}"), words(pool, end))
    };
    for s in 0..7 {
        let d: Vec<&str> = (0..4).map(|i| DAYS[(s + i) % 7]).collect();
        all.push(seq("After", &d[..1], "", " comes", d[1], ",", &DAYS));
        all.push((
            format!("After {} comes {}, then", d[0], d[1]),
            format!(" {},", d[2]),
            words(&DAYS, ","),
        ));
        all.push((
            format!("After {} comes {}, then {}, then", d[0], d[1], d[2]),
            format!(" {}.", d[3]),
            words(&DAYS, "."),
        ));
    }
    for s in 0..7 {
        let n = &NUMBERS[s..s + 4];
        for given in 1..=3 {
            let end = if given == 3 { "." } else { "," };
            all.push(seq(
                "Counting:",
                &n[..given],
                ",",
                ",",
                n[given],
                end,
                &NUMBERS,
            ));
        }
    }
    let letters: Vec<String> = (b'a'..=b'z').map(|c| char::from(c).to_string()).collect();
    let letter_refs: Vec<&str> = letters.iter().map(String::as_str).collect();
    for s in 0..22 {
        let l = &letter_refs[s..s + 5];
        for given in 2..=4 {
            let end = if given == 4 { "." } else { "" };
            all.push(seq(
                "Letters:",
                &l[..given],
                "",
                "",
                l[given],
                end,
                &letter_refs,
            ));
        }
    }
    all
}

/// Multiple-choice accuracy from each choice's summed log-likelihood: `acc` takes the
/// highest sum, `acc_norm` the highest sum per byte of the choice (lm-eval-harness style;
/// ties go to the first choice).
pub fn mc_accuracy(items: &[McItem], loglik: &[Vec<f64>]) -> (f64, f64) {
    let (acc, acc_norm) = mc_marks(items, loglik);
    let n = items.len().max(1) as f64;
    let count = |m: &[bool]| m.iter().filter(|b| **b).count() as f64 / n;
    (count(&acc), count(&acc_norm))
}

/// Per item, whether `acc` and `acc_norm` ([`mc_accuracy`]) count it right.
pub fn mc_marks(items: &[McItem], loglik: &[Vec<f64>]) -> (Vec<bool>, Vec<bool>) {
    let (acc, acc_norm, _) = mc_scores(items, loglik);
    (acc, acc_norm)
}

/// [`mc_marks`] and, per item, the margin of the right choice by per-byte log-likelihood
/// (acc_norm's measure): its score minus the best other choice's (> 0: right, with room).
pub fn mc_scores(items: &[McItem], loglik: &[Vec<f64>]) -> (Vec<bool>, Vec<bool>, Vec<f32>) {
    let mut acc = Vec::with_capacity(items.len());
    let mut acc_norm = Vec::with_capacity(items.len());
    let mut margin = Vec::with_capacity(items.len());
    for (item, ll) in items.iter().zip(loglik) {
        let best = |f: &dyn Fn(usize) -> f64| {
            (0..item.choices.len()).fold(0, |b, i| if f(i) > f(b) { i } else { b })
        };
        let norm = |i: usize| ll[i] / item.choices[i].len().max(1) as f64;
        acc.push(best(&|i| ll[i]) == item.answer);
        acc_norm.push(best(&norm) == item.answer);
        let other = (0..item.choices.len())
            .filter(|i| *i != item.answer)
            .map(norm)
            .fold(f64::NEG_INFINITY, f64::max);
        // Kept to 1e-4 nats per byte (far below any effect; keeps the stored marks short).
        margin.push((((norm(item.answer) - other) * 1e4).round() / 1e4) as f32);
    }
    (acc, acc_norm, margin)
}

/// Relative drop of a probe score, (base − other) / base × 100 (SPEC.md §6).
pub fn relative_drop(base: f64, other: f64) -> f64 {
    if base == 0.0 {
        0.0
    } else {
        (base - other) / base * 100.0
    }
}

/// Average percentage error of a loss curve against its baseline over the given steps,
/// mean |L_qat − L_base| / |L_base| × 100 (SPEC.md §6).
pub fn ape(qat: &[f64], base: &[f64]) -> f64 {
    let n = qat.len().min(base.len());
    if n == 0 {
        return f64::NAN;
    }
    qat.iter()
        .zip(base)
        .map(|(q, b)| (q - b).abs() / b.abs().max(1e-12))
        .sum::<f64>()
        / n as f64
        * 100.0
}

/// Probe scores from per-token losses: `rows` holds one row of losses per scored sequence —
/// every (item, choice) of `knowledge`, then of `completion`, then held-out windows — and
/// each item set carries, per sequence, (tokens used, choice tokens). Each score comes with
/// its 95 % interval (cluster bootstrap: knowledge items by entity) and the per-item marks.
pub fn score_probes(
    step: u64,
    rows: &[Vec<f32>],
    knowledge: &(Vec<McItem>, Vec<(usize, usize)>),
    completion: &(Vec<McItem>, Vec<(usize, usize)>),
) -> super::ProbeScores {
    use super::resample::{Arm, Groups, bootstrap, pack_marks};
    let mut at = 0;
    let mut score = |(items, spans): &(Vec<McItem>, Vec<(usize, usize)>)| {
        let mut ll = Vec::new();
        let mut k = 0;
        for it in items {
            let mut row = Vec::new();
            for _ in &it.choices {
                let (used, n) = spans[k];
                let l: f64 = rows[at + k][used - n..used]
                    .iter()
                    .map(|v| f64::from(*v))
                    .sum();
                row.push(-l);
                k += 1;
            }
            ll.push(row);
        }
        at += k;
        mc_scores(items, &ll)
    };
    let (k_acc, k_norm, k_margin) = score(knowledge);
    let (c_acc, c_norm, c_margin) = score(completion);
    let group_ids = |items: &[McItem]| items.iter().map(|i| i.group).collect::<Vec<u32>>();
    let (k_group, c_group) = (group_ids(&knowledge.0), group_ids(&completion.0));
    let held: Vec<f64> = rows[at..]
        .iter()
        .map(|r| r.iter().map(|v| f64::from(*v)).sum::<f64>() / r.len().max(1) as f64)
        .collect();
    let n: usize = rows[at..].iter().map(Vec::len).sum();
    let heldout_loss = rows[at..]
        .iter()
        .flatten()
        .map(|v| f64::from(*v))
        .sum::<f64>()
        / n.max(1) as f64;
    let frac = |m: &[bool]| m.iter().filter(|b| **b).count() as f64 / m.len().max(1) as f64;
    let kg = Groups::from_ids(&k_group);
    let cg = Groups::from_ids(&c_group);
    let ci =
        |g: &Groups, m: &[bool]| bootstrap(g, &[Arm::marks(&[m.to_vec()])], &|v| v[0]).interval;
    let intervals = super::ProbeIntervals {
        knowledge_acc: ci(&kg, &k_acc),
        knowledge_acc_norm: ci(&kg, &k_norm),
        completion_acc: ci(&cg, &c_acc),
        completion_acc_norm: ci(&cg, &c_norm),
        heldout_loss: bootstrap(
            &Groups::consecutive(held.len(), super::resample::HELDOUT_BLOCK),
            &[Arm {
                seeds: vec![held.clone()],
            }],
            &|v| v[0],
        )
        .interval,
    };
    super::ProbeScores {
        step,
        knowledge_acc: frac(&k_acc),
        knowledge_acc_norm: frac(&k_norm),
        completion_acc: frac(&c_acc),
        completion_acc_norm: frac(&c_norm),
        heldout_loss,
        knowledge_items: k_acc.len(),
        completion_items: c_acc.len(),
        intervals: Some(intervals),
        marks: Some(super::ProbeMarks {
            knowledge_acc: pack_marks(&k_acc),
            knowledge_acc_norm: pack_marks(&k_norm),
            completion_acc: pack_marks(&c_acc),
            completion_acc_norm: pack_marks(&c_norm),
            heldout: held,
            knowledge_group: k_group,
            completion_group: c_group,
            knowledge_margin: k_margin,
            completion_margin: c_margin,
        }),
    }
}

#[cfg(test)]
mod tests;
