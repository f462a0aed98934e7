//! Generated corpora and probes for the paper's protocol, at laptop scale and with no
//! downloads (everything deterministic from a seed):
//!
//! - a **knowledge base** of invented entities with attributes and relations, each fact
//!   stated in several templates, plus simple regularities (weekdays, counting, the
//!   alphabet): the pretraining corpus (`kb`), the stand-in for a pretrained model's knowledge;
//! - a **continued-training corpus** (`web`) from another distribution: other words and
//!   sentence shapes, varying lengths, and bursts of rare bytes arriving in clumps, so that
//!   activation amax moves non-monotonically from step to step as on real web text;
//! - **probes** scored like lm-eval-harness multiple choice: knowledge recall (the MMLU/ARC
//!   analog), completion of regularities (the HellaSwag analog), and held-out text of the
//!   pretraining distribution (forgetting shows as its loss rising).

use crate::data::Rng;

const SYLLABLES: [&str; 20] = [
    "zor", "bia", "quel", "tam", "ven", "ost", "rel", "ka", "lum", "dri", "sa", "mon", "pel", "ux",
    "ith", "gar", "no", "bre", "wy", "ta",
];
/// Attribute values of the knowledge base.
pub const COLORS: [&str; 8] = [
    "red", "blue", "green", "amber", "silver", "black", "white", "violet",
];
/// Kinds of entity.
pub const KINDS: [&str; 6] = ["city", "river", "guild", "island", "festival", "library"];
const DAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];
const NUMBERS: [&str; 10] = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
];

/// One entity and its facts.
#[derive(Clone, Debug, PartialEq)]
pub struct Entity {
    /// Invented name.
    pub name: String,
    /// Its kind (index into [`KINDS`]).
    pub kind: usize,
    /// Its colour (index into [`COLORS`]).
    pub color: usize,
    /// Index of the entity it neighbours.
    pub neighbour: usize,
}

/// The invented world the pretraining corpus states.
#[derive(Clone, Debug, PartialEq)]
pub struct KnowledgeBase {
    /// Entities with unique names.
    pub entities: Vec<Entity>,
}

impl KnowledgeBase {
    /// `n` entities with unique names and random facts.
    pub fn generate(n: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed ^ 0x4B42);
        let mut names: Vec<String> = Vec::new();
        while names.len() < n {
            let parts = 2 + rng.below(2);
            let mut name: String = (0..parts)
                .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
                .collect();
            if let Some(first) = name.get_mut(0..1) {
                first.make_ascii_uppercase();
            }
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let entities = names
            .into_iter()
            .map(|name| Entity {
                name,
                kind: rng.below(KINDS.len()),
                color: rng.below(COLORS.len()),
                neighbour: rng.below(n),
            })
            .collect();
        KnowledgeBase { entities }
    }

    /// One fact about entity `e` in a random template.
    fn fact(&self, e: usize, rng: &mut Rng) -> String {
        let x = &self.entities[e];
        let (name, kind, color) = (&x.name, KINDS[x.kind], COLORS[x.color]);
        let next = &self.entities[x.neighbour].name;
        match rng.below(6) {
            0 => format!("The color of {name} is {color}. "),
            1 => format!("{name} is a {kind} whose color is {color}. "),
            2 => format!("In the old maps, {name} is painted {color}. "),
            3 => format!("{name} is a {kind}. "),
            4 => format!("The kind of {name} is {kind}. "),
            _ => format!("{name} lies next to {next}. "),
        }
    }
}

fn regularity(rng: &mut Rng) -> String {
    match rng.below(3) {
        0 => {
            let s = rng.below(7);
            let words: Vec<&str> = (0..4).map(|i| DAYS[(s + i) % 7]).collect();
            format!(
                "After {} comes {}, then {}, then {}. ",
                words[0], words[1], words[2], words[3]
            )
        }
        1 => {
            let s = rng.below(7);
            format!(
                "Counting: {}, {}, {}, {}. ",
                NUMBERS[s],
                NUMBERS[s + 1],
                NUMBERS[s + 2],
                NUMBERS[s + 3]
            )
        }
        _ => {
            let s = rng.below(22) as u8;
            let letters: String = (0..5)
                .map(|i| char::from(b'a' + s + i))
                .collect::<Vec<_>>()
                .iter()
                .map(|c| format!("{c} "))
                .collect();
            format!("Letters: {}. ", letters.trim_end())
        }
    }
}

/// The pretraining corpus: facts of the knowledge base (each stated many times, in several
/// templates) mixed with regularities; about `bytes` long.
pub fn pretrain_corpus(kb: &KnowledgeBase, seed: u64, bytes: usize) -> String {
    let mut rng = Rng::new(seed ^ 0x5052_4554);
    let mut text = String::with_capacity(bytes + 256);
    while text.len() < bytes {
        if rng.below(4) == 0 {
            text.push_str(&regularity(&mut rng));
        } else {
            let e = rng.below(kb.entities.len());
            text.push_str(&kb.fact(e, &mut rng));
        }
    }
    text
}

const WEB_WORDS: [&str; 32] = [
    "market", "price", "update", "today", "online", "shipping", "review", "free", "guide", "best",
    "new", "click", "video", "report", "season", "team", "score", "weather", "forecast", "recipe",
    "minutes", "stock", "rose", "fell", "percent", "users", "download", "version", "release",
    "notes", "city", "council",
];

/// The continued-training corpus: web-like sentences of varying length with bursts of rare
/// bytes (capitals, digits, punctuation runs, non-ASCII characters) arriving in clumps.
pub fn web_corpus(seed: u64, bytes: usize) -> String {
    let mut rng = Rng::new(seed ^ 0x0057_4542);
    let mut text = String::with_capacity(bytes + 512);
    let mut burst_left = 0usize;
    while text.len() < bytes {
        if burst_left == 0 && rng.below(40) == 0 {
            burst_left = 2 + rng.below(6); // a clump of several bursty sentences
        }
        let len = 3 + rng.below(18);
        let mut sentence = String::new();
        for i in 0..len {
            if i > 0 {
                sentence.push(' ');
            }
            if burst_left > 0 && rng.below(3) == 0 {
                let run = 3 + rng.below(12);
                let burst: String = match rng.below(4) {
                    0 => (0..run)
                        .map(|_| char::from(b'A' + rng.below(26) as u8))
                        .collect(),
                    1 => (0..run)
                        .map(|_| char::from(b'0' + rng.below(10) as u8))
                        .collect(),
                    2 => "!?#$%&*"
                        .chars()
                        .cycle()
                        .skip(rng.below(7))
                        .take(run)
                        .collect(),
                    _ => ['é', 'ß', 'ø', '€', 'λ', '東']
                        .iter()
                        .cycle()
                        .skip(rng.below(6))
                        .take(run / 2 + 1)
                        .collect(),
                };
                sentence.push_str(&burst);
            } else {
                sentence.push_str(WEB_WORDS[rng.below(WEB_WORDS.len())]);
            }
        }
        text.push_str(&sentence);
        text.push_str(if rng.below(5) == 0 { "!\n" } else { ". " });
        burst_left = burst_left.saturating_sub(1);
    }
    text
}

/// A multiple-choice item: the context, the choices (continuations), the right one.
#[derive(Clone, Debug, PartialEq)]
pub struct McItem {
    /// Text before the choice.
    pub context: String,
    /// Candidate continuations.
    pub choices: Vec<String>,
    /// Index of the correct choice.
    pub answer: usize,
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

fn choices_with(answer: String, mut pool: Vec<String>, rng: &mut Rng) -> (Vec<String>, usize) {
    pool.retain(|c| *c != answer);
    let mut choices: Vec<String> = Vec::new();
    while choices.len() < 3 && !pool.is_empty() {
        choices.push(pool.swap_remove(rng.below(pool.len())));
    }
    let at = rng.below(choices.len() + 1);
    choices.insert(at, answer);
    (choices, at)
}

impl ProbeSet {
    /// The probes of a run's data config: its knowledge base (`entities`, `kb_seed`) and 60
    /// completion items; the same for every run of a grid and for `hif8lab train`.
    pub fn for_data(data: &crate::config::DataConfig) -> Self {
        let kb = KnowledgeBase::generate(data.entities, data.kb_seed);
        ProbeSet::generate(&kb, 60, data.kb_seed ^ 0x9B)
    }

    /// Probes for a knowledge base: one knowledge item per entity, `completion` regularity
    /// items, and about 8 KiB of held-out pretraining text.
    pub fn generate(kb: &KnowledgeBase, completion: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed ^ 0x5052_4F42);
        let colors: Vec<String> = COLORS.iter().map(|c| format!(" {c}.")).collect();
        let knowledge = kb
            .entities
            .iter()
            .map(|e| {
                let (choices, answer) =
                    choices_with(format!(" {}.", COLORS[e.color]), colors.clone(), &mut rng);
                McItem {
                    context: format!("The color of {} is", e.name),
                    choices,
                    answer,
                }
            })
            .collect();
        let completion = (0..completion)
            .map(|i| {
                let (context, answer, pool): (String, String, Vec<String>) = match i % 3 {
                    0 => {
                        let s = rng.below(7);
                        (
                            format!(
                                "After {} comes {}, then {}, then",
                                DAYS[s],
                                DAYS[(s + 1) % 7],
                                DAYS[(s + 2) % 7]
                            ),
                            format!(" {}.", DAYS[(s + 3) % 7]),
                            DAYS.iter().map(|d| format!(" {d}.")).collect(),
                        )
                    }
                    1 => {
                        let s = rng.below(7);
                        (
                            format!(
                                "Counting: {}, {}, {},",
                                NUMBERS[s],
                                NUMBERS[s + 1],
                                NUMBERS[s + 2]
                            ),
                            format!(" {}.", NUMBERS[s + 3]),
                            NUMBERS.iter().map(|n| format!(" {n}.")).collect(),
                        )
                    }
                    _ => {
                        let s = rng.below(22) as u8;
                        let l = |k: u8| char::from(b'a' + s + k);
                        (
                            format!("Letters: {} {} {} {}", l(0), l(1), l(2), l(3)),
                            format!(" {}.", l(4)),
                            (b'a'..=b'z')
                                .map(|c| format!(" {}.", char::from(c)))
                                .collect(),
                        )
                    }
                };
                let (choices, answer) = choices_with(answer, pool, &mut rng);
                McItem {
                    context,
                    choices,
                    answer,
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

/// Multiple-choice accuracy from each choice's summed log-likelihood: `acc` takes the
/// highest sum, `acc_norm` the highest sum per byte of the choice (lm-eval-harness style;
/// ties go to the first choice).
pub fn mc_accuracy(items: &[McItem], loglik: &[Vec<f64>]) -> (f64, f64) {
    let mut acc = 0usize;
    let mut acc_norm = 0usize;
    for (item, ll) in items.iter().zip(loglik) {
        let best = |f: &dyn Fn(usize) -> f64| {
            (0..item.choices.len()).fold(0, |b, i| if f(i) > f(b) { i } else { b })
        };
        acc += usize::from(best(&|i| ll[i]) == item.answer);
        acc_norm +=
            usize::from(best(&|i| ll[i] / item.choices[i].len().max(1) as f64) == item.answer);
    }
    let n = items.len().max(1) as f64;
    (acc as f64 / n, acc_norm as f64 / n)
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
/// each item set carries, per sequence, (tokens used, choice tokens).
pub fn score_probes(
    step: u64,
    rows: &[Vec<f32>],
    knowledge: &(Vec<McItem>, Vec<(usize, usize)>),
    completion: &(Vec<McItem>, Vec<(usize, usize)>),
) -> crate::ProbeScores {
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
        mc_accuracy(items, &ll)
    };
    let (knowledge_acc, knowledge_acc_norm) = score(knowledge);
    let (completion_acc, completion_acc_norm) = score(completion);
    let held = &rows[at..];
    let n: usize = held.iter().map(Vec::len).sum();
    let heldout_loss = held.iter().flatten().map(|v| f64::from(*v)).sum::<f64>() / n.max(1) as f64;
    crate::ProbeScores {
        step,
        knowledge_acc,
        knowledge_acc_norm,
        completion_acc,
        completion_acc_norm,
        heldout_loss,
    }
}

/// The training text a run's `data` section names: `synthetic`, `kb` (the knowledge base's
/// pretraining corpus), `web` (the bursty continued-training corpus) or a file path.
pub fn training_text(d: &crate::config::DataConfig, seed: u64) -> Result<String, String> {
    Ok(match d.corpus.as_str() {
        "synthetic" => crate::data::synthetic_corpus(seed, d.bytes),
        "kb" => pretrain_corpus(
            &KnowledgeBase::generate(d.entities, d.kb_seed),
            seed,
            d.bytes,
        ),
        "web" => web_corpus(seed, d.bytes),
        path => crate::data::read_corpus(std::path::Path::new(path))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_are_deterministic_and_distinct() {
        let kb = KnowledgeBase::generate(30, 1);
        assert_eq!(kb, KnowledgeBase::generate(30, 1));
        let names: std::collections::BTreeSet<_> = kb.entities.iter().map(|e| &e.name).collect();
        assert_eq!(names.len(), 30);
        let a = pretrain_corpus(&kb, 2, 20_000);
        assert_eq!(a, pretrain_corpus(&kb, 2, 20_000));
        let w = web_corpus(3, 20_000);
        assert_eq!(w, web_corpus(3, 20_000));
        assert!(
            w.bytes().any(|b| b >= 0x80),
            "bursts of rare (non-ASCII) bytes"
        );
        assert!(!a.bytes().any(|b| b >= 0x80));
        let p = ProbeSet::generate(&kb, 12, 4);
        assert_eq!(p, ProbeSet::generate(&kb, 12, 4));
        assert_eq!(p.knowledge.len(), 30);
        assert!(
            p.knowledge
                .iter()
                .chain(&p.completion)
                .all(|i| i.choices.len() == 4 && i.answer < 4)
        );
        // The facts the knowledge probe asks are stated in the corpus.
        let e = &kb.entities[0];
        assert!(a.contains(&format!("The color of {} is {}.", e.name, COLORS[e.color])));
    }

    #[test]
    fn oracle_scores_100_and_uniform_scores_chance() {
        let kb = KnowledgeBase::generate(200, 5);
        let p = ProbeSet::generate(&kb, 300, 6);
        for items in [&p.knowledge, &p.completion] {
            let oracle: Vec<Vec<f64>> = items
                .iter()
                .map(|it| {
                    (0..it.choices.len())
                        .map(|i| if i == it.answer { 0.0 } else { -10.0 })
                        .collect()
                })
                .collect();
            assert_eq!(mc_accuracy(items, &oracle), (1.0, 1.0));
            // A uniform model: every byte costs ln 256.
            let uniform: Vec<Vec<f64>> = items
                .iter()
                .map(|it| {
                    it.choices
                        .iter()
                        .map(|c| -(c.len() as f64) * 256f64.ln())
                        .collect()
                })
                .collect();
            let (_, acc_norm) = mc_accuracy(items, &uniform);
            assert!((acc_norm - 0.25).abs() < 0.08, "chance: {acc_norm}");
        }
    }

    #[test]
    fn ape_and_relative_drop_by_hand() {
        assert!((ape(&[1.1, 2.0], &[1.0, 2.0]) - 5.0).abs() < 1e-9);
        assert!((relative_drop(0.8, 0.6) - 25.0).abs() < 1e-9);
        assert_eq!(relative_drop(0.0, 0.5), 0.0);
    }
}
