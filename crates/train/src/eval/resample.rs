//! Resampling behind every interval: probe items are not independent (the knowledge items
//! of one entity ask about the same facts in several phrasings, so they rise and fall
//! together), so intervals resample **groups** — a cluster bootstrap — rather than items,
//! and, where a grid ran several seeds, the seeds too (two levels). Everything is
//! deterministic from a fixed resampling seed, so a report is reproducible to the digit.
//! The probe scorer uses it for each score's interval; the tests and verdicts built on it
//! live in `hif8lab-lab`'s `stats`.

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

/// Held-out windows per resampling block: the windows are consecutive pieces of one text,
/// so neighbours are resampled together.
pub const HELDOUT_BLOCK: usize = 4;

/// Bootstrap resamples behind every interval and p-value.
pub const RESAMPLES: usize = 2000;
const RESAMPLE_SEED: u64 = 0x5EED_B007;

/// A statistic with its 95 % interval and, for a comparison, its two-sided p-value (null:
/// the statistic is zero).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The statistic on the data as observed.
    pub value: f64,
    /// 95 % interval (2.5th and 97.5th percentiles of the resampled statistic).
    pub interval: [f64; 2],
    /// Two-sided bootstrap p-value of "the statistic is zero".
    pub p_value: f64,
}

/// The items a statistic can be bootstrapped over: per item, its group; items of one group
/// are resampled together.
#[derive(Clone, Debug, PartialEq)]
pub struct Groups {
    of_item: Vec<usize>,
    count: usize,
}

impl Groups {
    /// Items `0..n` in consecutive groups of `size` (the knowledge items of one entity).
    pub fn consecutive(n: usize, size: usize) -> Self {
        let size = size.max(1);
        Groups {
            of_item: (0..n).map(|i| i / size).collect(),
            count: n.div_ceil(size),
        }
    }

    /// Items grouped by an id per item (equal ids: one group), groups numbered in order of
    /// first appearance.
    pub fn from_ids(ids: &[u32]) -> Self {
        let mut seen = std::collections::HashMap::new();
        let of_item = ids
            .iter()
            .map(|id| {
                let next = seen.len();
                *seen.entry(*id).or_insert(next)
            })
            .collect();
        Groups {
            of_item,
            count: seen.len(),
        }
    }

    /// Every item its own group.
    pub fn singletons(n: usize) -> Self {
        Self::consecutive(n, 1)
    }

    /// The group of item `item` (`None` past the last item).
    pub fn group_of(&self, item: usize) -> Option<usize> {
        self.of_item.get(item).copied()
    }

    /// Number of items.
    pub fn items(&self) -> usize {
        self.of_item.len()
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no groups.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Per group, the sum of `values` over its items and its item count.
    fn sums(&self, values: &[f64]) -> Vec<(f64, f64)> {
        let mut out = vec![(0.0, 0.0); self.count];
        for (g, v) in self.of_item.iter().zip(values) {
            out[*g].0 += v;
            out[*g].1 += 1.0;
        }
        out
    }
}

/// One arm of a comparison: the same items scored once per seed (a shared base model has one
/// seed; runs repeated with `--seeds N` have N). Values are per item: 1/0 for a probe item,
/// a loss for a held-out window.
#[derive(Clone, Debug, PartialEq)]
pub struct Arm {
    /// Per seed, per item.
    pub seeds: Vec<Vec<f64>>,
}

impl Arm {
    /// An arm from per-seed correctness marks.
    pub fn marks(seeds: &[Vec<bool>]) -> Self {
        Arm {
            seeds: seeds
                .iter()
                .map(|m| m.iter().map(|b| f64::from(u8::from(*b))).collect())
                .collect(),
        }
    }
}

/// Cluster bootstrap of any statistic of the arms' mean scores: `stat` gets one mean per arm
/// (averaged over the arm's seeds) and returns the statistic. Groups are resampled with
/// replacement and, where an arm has several seeds, the seeds too (the same draw for every
/// arm, so seed k of a QAT run stays paired with seed k of its baseline).
pub fn bootstrap(groups: &Groups, arms: &[Arm], stat: &dyn Fn(&[f64]) -> f64) -> Estimate {
    let (value, mut draws) = bootstrap_draws(groups, arms, stat, RESAMPLES, RESAMPLE_SEED);
    if groups.is_empty() {
        return Estimate {
            value,
            interval: [f64::NAN, f64::NAN],
            p_value: f64::NAN,
        };
    }
    draws.sort_by(f64::total_cmp);
    let q = |p: f64| percentile(&draws, p);
    let below = draws.iter().filter(|v| **v <= 0.0).count();
    let above = draws.iter().filter(|v| **v >= 0.0).count();
    let p_value = (2.0 * (below.min(above) + 1) as f64 / (draws.len() + 1) as f64).min(1.0);
    Estimate {
        value,
        interval: [q(0.025), q(0.975)],
        p_value,
    }
}

/// The `p`-quantile of sorted bootstrap draws by nearest rank (NaN when there are none): the
/// percentile interval's bounds.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        f64::NAN
    } else {
        sorted[((sorted.len() - 1) as f64 * p).round() as usize]
    }
}

/// The statistic on the data and its `resamples` finite bootstrap draws (see [`bootstrap`];
/// `seed` fixes the resampling, so a report is reproducible to the digit).
pub fn bootstrap_draws(
    groups: &Groups,
    arms: &[Arm],
    stat: &dyn Fn(&[f64]) -> f64,
    resamples: usize,
    seed: u64,
) -> (f64, Vec<f64>) {
    bootstrap_draws_nested(groups, arms, stat, resamples, seed, 1)
}

/// [`bootstrap_draws`] with the replicates in `clusters` clusters (replicate `r` in cluster
/// `r % clusters`: the pretraining of a grid's replicate), resampled in two stages, as the
/// unit of analysis asks: the clusters with replacement, then the replicates within each
/// drawn cluster. With one cluster, or a cluster per replicate, it is [`bootstrap_draws`]
/// draw for draw.
pub fn bootstrap_draws_nested(
    groups: &Groups,
    arms: &[Arm],
    stat: &dyn Fn(&[f64]) -> f64,
    resamples: usize,
    seed: u64,
    clusters: usize,
) -> (f64, Vec<f64>) {
    let sums: Vec<Vec<Vec<(f64, f64)>>> = arms
        .iter()
        .map(|a| a.seeds.iter().map(|s| groups.sums(s)).collect())
        .collect();
    let max_seeds = arms.iter().map(|a| a.seeds.len()).max().unwrap_or(1).max(1);
    let mean_of = |weights: &[f64], seed_pick: &[usize]| -> Vec<f64> {
        sums.iter()
            .map(|arm| {
                if arm.is_empty() {
                    return f64::NAN;
                }
                let per_seed: Vec<f64> = seed_pick
                    .iter()
                    .map(|k| {
                        let g = &arm[k % arm.len()];
                        let (mut s, mut n) = (0.0, 0.0);
                        for (w, (gs, gn)) in weights.iter().zip(g) {
                            s += w * gs;
                            n += w * gn;
                        }
                        if n > 0.0 { s / n } else { f64::NAN }
                    })
                    .collect();
                per_seed.iter().sum::<f64>() / per_seed.len() as f64
            })
            .collect()
    };
    let all_seeds: Vec<usize> = (0..max_seeds).collect();
    let value = stat(&mean_of(&vec![1.0; groups.len()], &all_seeds));
    if groups.is_empty() {
        return (value, Vec::new());
    }
    let mut rng = Rng::new(seed);
    let mut draws = Vec::with_capacity(resamples);
    let mut weights = vec![0.0; groups.len()];
    // Each cluster's members (r ≡ c mod clusters), once for every resample.
    let nested = max_seeds > 1 && clusters > 1 && clusters < max_seeds;
    let members: Vec<Vec<usize>> = if nested {
        (0..clusters)
            .map(|c| (c..max_seeds).step_by(clusters).collect())
            .collect()
    } else {
        Vec::new()
    };
    for _ in 0..resamples {
        weights.iter_mut().for_each(|w| *w = 0.0);
        for _ in 0..groups.len() {
            weights[rng.below(groups.len())] += 1.0;
        }
        let pick: Vec<usize> = if nested {
            // Two stages: a cluster, then its members, as many times as it has members.
            let mut pick = Vec::with_capacity(max_seeds);
            for _ in 0..clusters {
                let m = &members[rng.below(clusters)];
                for _ in 0..m.len() {
                    pick.push(m[rng.below(m.len())]);
                }
            }
            pick
        } else if max_seeds > 1 {
            (0..max_seeds).map(|_| rng.below(max_seeds)).collect()
        } else {
            vec![0]
        };
        let v = stat(&mean_of(&weights, &pick));
        if v.is_finite() {
            draws.push(v);
        }
    }
    (value, draws)
}

/// Packs correctness marks as hexadecimal (4 items a digit, first item in the high bit).
pub fn pack_marks(marks: &[bool]) -> String {
    marks
        .chunks(4)
        .map(|c| {
            let v = c
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (3 - i)));
            char::from_digit(v, 16).unwrap_or('0')
        })
        .collect()
}

/// Unpacks `n` marks packed by [`pack_marks`]; `None` when the text is too short or not hex.
pub fn unpack_marks(text: &str, n: usize) -> Option<Vec<bool>> {
    let digits: Vec<u32> = text
        .chars()
        .map(|c| c.to_digit(16))
        .collect::<Option<_>>()?;
    if digits.len() < n.div_ceil(4) {
        return None;
    }
    Some(
        (0..n)
            .map(|i| digits[i / 4] >> (3 - i % 4) & 1 == 1)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn marks_round_trip() {
        let m: Vec<bool> = (0..37).map(|i| (i * 7 + 3) % 5 < 2).collect();
        let s = pack_marks(&m);
        assert_eq!(s.len(), 10);
        assert_eq!(unpack_marks(&s, 37).unwrap(), m);
        assert!(unpack_marks("zz", 5).is_none());
        assert!(unpack_marks("f", 5).is_none());
    }

    #[test]
    fn bootstrap_separates_a_real_difference_and_not_noise() {
        // 400 items in groups of 4; arm b is right on 10 points more items than arm a.
        let g = Groups::consecutive(400, 4);
        let a: Vec<bool> = (0..400).map(|i| i % 10 < 5).collect();
        let b: Vec<bool> = (0..400).map(|i| i % 10 < 6).collect();
        let e = bootstrap(
            &g,
            &[Arm::marks(std::slice::from_ref(&a)), Arm::marks(&[b])],
            &|m| m[1] - m[0],
        );
        assert!((e.value - 0.1).abs() < 1e-12);
        assert!(e.interval[0] > 0.0 && e.interval[1] < 0.2, "{e:?}");
        assert!(e.p_value < 0.01, "{e:?}");
        // The same run against itself: difference 0, p = 1.
        let same = bootstrap(
            &g,
            &[Arm::marks(std::slice::from_ref(&a)), Arm::marks(&[a])],
            &|m| m[1] - m[0],
        );
        assert_eq!(same.value, 0.0);
        assert_eq!(same.interval, [0.0, 0.0]);
        assert_eq!(same.p_value, 1.0);
    }

    #[test]
    fn nested_replicates_follow_the_pretraining() {
        // 12 replicates = 4 orders of 3 pretrainings (replicate r of pretraining r % 3); the
        // pretraining moves the score far more than the order does.
        let g = Groups::singletons(50);
        let seeds: Vec<Vec<f64>> = (0..12)
            .map(|r| {
                let level = [0.2, 0.5, 0.8][r % 3] + 0.01 * (r / 3) as f64;
                (0..50).map(|i| level + 0.001 * i as f64).collect()
            })
            .collect();
        let arms = [Arm { seeds }];
        let stat = |m: &[f64]| m[0];
        let spread = |d: &mut Vec<f64>| {
            d.sort_by(f64::total_cmp);
            percentile(d, 0.975) - percentile(d, 0.025)
        };
        let (v, mut flat) = bootstrap_draws(&g, &arms, &stat, 2000, 7);
        let (w, mut nested) = bootstrap_draws_nested(&g, &arms, &stat, 2000, 7, 3);
        assert_eq!(v, w);
        // Three pretrainings drawn as three units spread the mean more than twelve
        // exchangeable replicates do.
        let (a, b) = (spread(&mut flat), spread(&mut nested));
        assert!(b > 1.3 * a, "nested {b} vs exchangeable {a}");
        // One cluster, or a cluster per replicate: the plain bootstrap, draw for draw.
        for clusters in [1, 12] {
            let (_, same) = bootstrap_draws_nested(&g, &arms, &stat, 200, 7, clusters);
            let (_, plain) = bootstrap_draws(&g, &arms, &stat, 200, 7);
            assert_eq!(same, plain);
        }
    }
}
