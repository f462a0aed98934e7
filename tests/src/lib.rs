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
