//! The completion probe of a pretrained model: the small grid's regularity items (weekdays,
//! numbers, letters; [`super::probes::COMPLETION_ITEMS`]) and more sequences any English
//! model has read many times (months, counting on to twenty and down from ten, the alphabet
//! backwards, ordinals, the planets), [`PRETRAINED_COMPLETION_ITEMS`] distinct items in
//! families of three (one sequence start, 1–3 elements given, or 2–4 for letters),
//! resampled together.
//!
//! Enough items that a ±2 % equivalence on completion (claim 5) can be decided with the real
//! grid's two data orders: 108 items could not (their best-case interval at two orders is
//! ±2.27 %).

use super::probes::{McItem, ProbeSet, choices_with};
use crate::rng::Rng;

/// Distinct items of [`pretrained_completion`].
pub const PRETRAINED_COMPLETION_ITEMS: usize =
    super::probes::COMPLETION_ITEMS + 36 + 30 + 21 + 66 + 21 + 15;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const TO_TWENTY: [&str; 20] = [
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
];
const ORDINALS: [&str; 10] = [
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
];
const PLANETS: [&str; 8] = [
    "Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn", "Uranus", "Neptune",
];

/// A family: `prefix` then the sequence `s` shown up to `given` elements (joined by
/// `sep`), the next element the answer, the rest of `pool` the distractors.
struct Family<'a> {
    prefix: &'a str,
    sep: &'a str,
    pool: &'a [&'a str],
}

impl Family<'_> {
    fn item(&self, s: &[&str], given: usize) -> (String, String, Vec<String>) {
        let context = format!(
            "{} {}{}",
            self.prefix,
            s[..given].join(self.sep),
            self.sep.trim_end()
        );
        let pool = self.pool.iter().map(|w| format!(" {w}")).collect();
        (context, format!(" {}", s[given]), pool)
    }
}

/// The extra sequences, family by family (three items each, in a row).
fn extra_sequences() -> Vec<(String, String, Vec<String>)> {
    let mut all = Vec::new();
    let mut family =
        |f: &Family<'_>, seqs: Vec<Vec<&str>>, givens: std::ops::RangeInclusive<usize>| {
            for s in seqs {
                for given in givens.clone() {
                    all.push(f.item(&s, given));
                }
            }
        };
    let months = Family {
        prefix: "The months in order:",
        sep: ", ",
        pool: &MONTHS,
    };
    family(
        &months,
        (0..12)
            .map(|s| (0..4).map(|i| MONTHS[(s + i) % 12]).collect())
            .collect(),
        1..=3,
    );
    let count = Family {
        prefix: "Counting:",
        sep: ", ",
        pool: &TO_TWENTY,
    };
    family(
        &count,
        (7..17).map(|s| TO_TWENTY[s..s + 4].to_vec()).collect(),
        1..=3,
    );
    let down = Family {
        prefix: "Counting down:",
        sep: ", ",
        pool: &TO_TWENTY[..10],
    };
    family(
        &down,
        (3..10)
            .rev()
            .map(|s| (0..4).map(|i| TO_TWENTY[s - i]).collect())
            .collect(),
        1..=3,
    );
    let letters: Vec<String> = (b'a'..=b'z')
        .rev()
        .map(|c| char::from(c).to_string())
        .collect();
    let refs: Vec<&str> = letters.iter().map(String::as_str).collect();
    let back = Family {
        prefix: "The alphabet backwards:",
        sep: " ",
        pool: &refs,
    };
    family(
        &back,
        (0..22).map(|s| refs[s..s + 5].to_vec()).collect(),
        2..=4,
    );
    let ordinals = Family {
        prefix: "In order: the",
        sep: ", the ",
        pool: &ORDINALS,
    };
    family(
        &ordinals,
        (0..7).map(|s| ORDINALS[s..s + 4].to_vec()).collect(),
        1..=3,
    );
    let planets = Family {
        prefix: "The planets from the Sun:",
        sep: ", ",
        pool: &PLANETS,
    };
    family(
        &planets,
        (0..5).map(|s| PLANETS[s..s + 4].to_vec()).collect(),
        1..=3,
    );
    all
}

/// The completion items of a pretrained model: the small grid's every regularity item
/// (as [`ProbeSet::generate`] makes them from `seed`), then the extra families, their
/// choices drawn from `seed` too; families numbered on from the small grid's.
pub fn pretrained_completion(seed: u64) -> Vec<McItem> {
    let kb = crate::corpus::KnowledgeBase::generate(2, seed);
    let mut items = ProbeSet::generate(&kb, super::probes::COMPLETION_ITEMS, seed).completion;
    let first = items.iter().map(|i| i.group + 1).max().unwrap_or(0);
    let mut rng = Rng::new(seed ^ 0x5245_4755);
    for (i, (context, answer, pool)) in extra_sequences().into_iter().enumerate() {
        let (choices, answer) = choices_with(answer, pool, &mut rng);
        items.push(McItem {
            context,
            choices,
            answer,
            group: first + (i / 3) as u32,
        });
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pretrained_completion_set_is_large_distinct_and_grouped() {
        let items = pretrained_completion(5);
        assert_eq!(items.len(), PRETRAINED_COMPLETION_ITEMS);
        assert!(items.len() >= 250);
        assert_eq!(items, pretrained_completion(5));
        let contexts: std::collections::BTreeSet<_> = items.iter().map(|i| &i.context).collect();
        assert_eq!(contexts.len(), items.len(), "every item distinct");
        for it in &items {
            let distinct: std::collections::BTreeSet<_> = it.choices.iter().collect();
            assert_eq!(distinct.len(), 4, "{it:?}");
            assert!(it.answer < 4);
        }
        // Families of three, numbered in a row.
        let groups: std::collections::BTreeSet<_> = items.iter().map(|i| i.group).collect();
        assert_eq!(groups.len(), items.len() / 3);
        for g in groups {
            assert_eq!(
                items.iter().filter(|i| i.group == g).count(),
                3,
                "family {g}"
            );
        }
        // Hand-checked samples of the new families.
        let find = |c: &str| {
            items
                .iter()
                .find(|i| i.context == c)
                .unwrap_or_else(|| panic!("{c}"))
        };
        let it = find("The months in order: December, January,");
        assert_eq!(it.choices[it.answer], " February");
        let it = find("Counting down: ten, nine, eight,");
        assert_eq!(it.choices[it.answer], " seven");
        let it = find("The alphabet backwards: z y");
        assert_eq!(it.choices[it.answer], " x");
        let it = find("In order: the first, the second, the");
        assert_eq!(it.choices[it.answer], " third");
        let it = find("Counting: seventeen, eighteen, nineteen,");
        assert_eq!(it.choices[it.answer], " twenty");
        let it = find("The planets from the Sun: Earth, Mars,");
        assert_eq!(it.choices[it.answer], " Jupiter");
    }
}
