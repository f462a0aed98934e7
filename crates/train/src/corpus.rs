//! Generated corpora for the paper's protocol, at laptop scale and with no downloads
//! (everything deterministic from a seed):
//!
//! - a **knowledge base** of invented entities with attributes and relations, each fact
//!   stated in several templates, plus simple regularities (weekdays, counting, the
//!   alphabet): the pretraining corpus (`kb`), the stand-in for a pretrained model's knowledge;
//! - a **continued-training corpus** (`web`) from another distribution: other words and
//!   sentence shapes, varying lengths, and bursts of rare bytes arriving in clumps, so that
//!   activation amax moves non-monotonically from step to step as on real web text.
//!
//! The probes that ask about the knowledge base are in [`crate::eval::probes`].

use crate::rng::Rng;

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
pub(crate) const DAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];
pub(crate) const NUMBERS: [&str; 10] = [
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

#[cfg(test)]
mod tests;
