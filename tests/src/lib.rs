//! Shared helpers of the workspace-level integration tests: where fixtures live and the
//! seeded input generator that `tests/fixtures/gen_format_fixtures.py` mirrors exactly.

use std::path::PathBuf;

/// Seed of the format fixtures (same constant as the Python generator).
pub const FIXTURE_SEED: u64 = 0x005E_ED0F_4180_1AB5;

/// The `tests/fixtures` folder.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Output `i` (1-based) of the counter-based splitmix64 stream starting at `seed`.
pub fn splitmix64(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The `index`-th (0-based) fixture input as f32 bits; keep in sync with
/// `fixture_inputs` in the Python generator.
///
/// One in 16 inputs is a raw 32-bit pattern (NaN, Inf, f32 subnormals, huge values), one in
/// 16 has only 7 mantissa bits (hits ties and exact values), the rest are log-uniform over
/// binades `elo..=ehi` with a random mantissa and sign.
pub fn fixture_input(seed: u64, index: u64, elo: i32, ehi: i32) -> u32 {
    let r = splitmix64(seed, index + 1);
    let kind = r >> 60;
    if kind == 0 {
        return r as u32;
    }
    let sign = ((r >> 59) & 1) as u32;
    let span = (ehi - elo + 1) as u64;
    let e = ((r >> 32) & 0xFFFF) % span;
    let biased = (e as i64 + 127 + i64::from(elo)) as u32;
    let mant = if kind == 1 {
        (r & 0x7F_0000) as u32
    } else {
        (r & 0x7F_FFFF) as u32
    };
    sign << 31 | biased << 23 | mant
}

/// Structure-aware mutations of valid inputs, for the fuzz tests of every parser a user can
/// feed: bit flips, byte changes, insertions of tokens that parsers trip over (numbers at
/// the edges of their types, quotes, brackets, separators, invalid UTF-8), deletions,
/// duplications, truncations, swapped lines; one input in eight is random bytes.
pub struct Mutator {
    seed: u64,
    counter: u64,
    dictionary: Vec<Vec<u8>>,
}

/// Tokens that often break parsers.
pub const COMMON_TOKENS: [&str; 34] = [
    "0",
    "-0",
    "-1",
    "1e39",
    "-1e39",
    "1e-45",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "\"nan\"",
    "\"inf\"",
    "4294967296",
    "18446744073709551616",
    "-9223372036854775809",
    "1.5",
    "0x10",
    "\"",
    "'",
    ",",
    "\n",
    "\r\n",
    "\t",
    "=",
    "[",
    "]",
    "{",
    "}",
    ":",
    "[[[[[[[[[[[[",
    "\\",
    "\u{feff}",
    "é",
    "\u{0}",
];

impl Mutator {
    /// A mutator with `seed` and extra tokens for the format at hand.
    pub fn new(seed: u64, extra: &[&str]) -> Self {
        let mut dictionary: Vec<Vec<u8>> = COMMON_TOKENS
            .iter()
            .chain(extra)
            .map(|t| t.as_bytes().to_vec())
            .collect();
        dictionary.push(vec![0xff, 0xfe]);
        dictionary.push(vec![0xc3]);
        Mutator {
            seed,
            counter: 0,
            dictionary,
        }
    }

    fn next(&mut self) -> u64 {
        self.counter += 1;
        splitmix64(self.seed, self.counter)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    /// The next input derived from one of `seeds`.
    pub fn input(&mut self, seeds: &[Vec<u8>]) -> Vec<u8> {
        if self.below(8) == 0 || seeds.is_empty() {
            let len = self.below(300);
            return (0..len).map(|_| self.next() as u8).collect();
        }
        let mut v = seeds[self.below(seeds.len())].clone();
        for _ in 0..1 + self.below(4) {
            self.mutate(&mut v);
        }
        v
    }

    fn mutate(&mut self, v: &mut Vec<u8>) {
        let at = self.below(v.len() + 1);
        match self.below(8) {
            0 if !v.is_empty() => {
                let i = self.below(v.len());
                v[i] ^= 1 << self.below(8);
            }
            1 if !v.is_empty() => {
                let i = self.below(v.len());
                v[i] = self.next() as u8;
            }
            2 | 3 => {
                let pick = self.below(self.dictionary.len());
                let token = self.dictionary[pick].clone();
                v.splice(at..at, token);
            }
            4 => {
                let end = (at + 1 + self.below(16)).min(v.len());
                if at < end {
                    v.drain(at..end);
                }
            }
            5 => {
                let end = (at + 1 + self.below(64)).min(v.len());
                if at < end {
                    let copy = v[at..end].to_vec();
                    let to = self.below(v.len() + 1);
                    v.splice(to..to, copy);
                }
            }
            6 => v.truncate(at),
            _ => {
                // Swap two lines.
                let text = std::mem::take(v);
                let mut lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
                if lines.len() > 1 {
                    let (a, b) = (self.below(lines.len()), self.below(lines.len()));
                    lines.swap(a, b);
                }
                *v = lines.join(&b'\n');
            }
        }
    }
}

/// Runs `parse` on `count` inputs from `mutator` and `seeds`; a panic fails with the input
/// (escaped) that caused it. Returns (accepted, rejected).
pub fn fuzz(
    name: &str,
    count: usize,
    mutator: &mut Mutator,
    seeds: &[Vec<u8>],
    mut parse: impl FnMut(&[u8]) -> Result<(), String>,
) -> (usize, usize) {
    let (mut ok, mut rejected) = (0, 0);
    for i in 0..count {
        let input = mutator.input(seeds);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parse(&input)));
        match result {
            Ok(Ok(())) => ok += 1,
            Ok(Err(message)) => {
                assert!(
                    !message.trim().is_empty(),
                    "{name} input {i}: an empty error message for '{}'",
                    input.escape_ascii()
                );
                rejected += 1;
            }
            Err(_) => panic!("{name} input {i} panicked: '{}'", input.escape_ascii()),
        }
    }
    (ok, rejected)
}

/// Panics unless every `tests/*.rs` file of the crate at `manifest_dir` runs: it is one of
/// `modules` (the modules of the crate's folded test binary, `binary`) or a `[[test]]` of its
/// own in the crate's Cargo.toml. A crate that folds its test files sets
/// `autotests = false`, so a file in neither place would never run.
pub fn assert_every_test_file_runs(manifest_dir: &str, modules: &[&str], binary: &str) {
    let root = std::path::Path::new(manifest_dir);
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))
        .unwrap_or_else(|e| panic!("{}: {e}", root.join("Cargo.toml").display()));
    let files = std::fs::read_dir(root.join("tests"))
        .unwrap_or_else(|e| panic!("{}: {e}", root.join("tests").display()));
    for entry in files.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        let own_binary = manifest.contains(&format!("path = \"tests/{name}\""));
        assert!(
            modules.contains(&stem) || own_binary,
            "tests/{name} is neither a module of tests/{binary}.rs nor a [[test]] of Cargo.toml: it would never run"
        );
    }
}
