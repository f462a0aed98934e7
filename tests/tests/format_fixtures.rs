//! HiF8 / E4M3 / E5M2 codecs against the PyPI oracles (`en-dtypes`, `ml-dtypes`), bit for bit.
//!
//! The fixtures in `tests/fixtures/format/` come from `tests/fixtures/gen_format_fixtures.py`;
//! regenerate them with `python3 tests/fixtures/gen_format_fixtures.py` (needs
//! `pip install en-dtypes ml-dtypes numpy`). Inputs of the `.codes` files are not stored:
//! both sides produce them with the same seeded generator (`fixture_input`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::fs;

use hif8lab_format::{Format, Overflow};
use hif8lab_tests::{FIXTURE_SEED, fixture_input, fixtures_dir};

fn parse_hex(s: &str) -> u32 {
    u32::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex field")
}

/// (format, exponent range) as in the Python generator's FORMATS table.
const GENERATED: [(Format, i32, i32, usize); 3] = [
    (Format::HiF8, -26, 17, 1 << 20),
    (Format::E4M3, -12, 10, 1 << 18),
    (Format::E5M2, -19, 17, 1 << 18),
];

#[test]
fn decode_matches_oracle_for_all_256_codes() {
    let text = fs::read_to_string(fixtures_dir().join("format/decode.tsv")).expect("decode.tsv");
    let mut rows = 0;
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let format: Format = f[0].parse().expect("format");
        let code = parse_hex(f[1]) as u8;
        let expected = f32::from_bits(parse_hex(f[2]));
        let got = format.decode(code);
        if expected.is_nan() {
            assert!(
                got.is_nan(),
                "{format} 0x{code:02X}: expected NaN, got {got}"
            );
        } else {
            assert_eq!(
                got.to_bits(),
                expected.to_bits(),
                "{format} 0x{code:02X}: expected {expected}, got {got}"
            );
        }
        rows += 1;
    }
    assert_eq!(rows, 3 * 256);
}

#[test]
fn generated_inputs_encode_like_the_oracle() {
    let mut total = 0usize;
    for (format, elo, ehi, n) in GENERATED {
        let path = fixtures_dir().join(format!("format/{}.codes", format.name()));
        let expected = fs::read(&path).expect("codes fixture");
        assert_eq!(expected.len(), n, "{}", path.display());
        let mut mismatches = Vec::new();
        for (i, want) in expected.iter().enumerate() {
            let bits = fixture_input(FIXTURE_SEED, i as u64, elo, ehi);
            let got = format.encode(f32::from_bits(bits), Overflow::Inf);
            if got != *want && mismatches.len() < 10 {
                mismatches.push(format!(
                    "input 0x{bits:08X}: want 0x{want:02X} got 0x{got:02X}"
                ));
            }
        }
        assert!(mismatches.is_empty(), "{format}: {mismatches:#?}");
        total += n;
    }
    assert!(total >= 1_000_000);
}

#[test]
fn edge_inputs_encode_like_the_oracle() {
    let text = fs::read_to_string(fixtures_dir().join("format/edges.tsv")).expect("edges.tsv");
    let mut mismatches = Vec::new();
    let mut rows = 0;
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let format: Format = f[0].parse().expect("format");
        let bits = parse_hex(f[1]);
        let want = parse_hex(f[2]) as u8;
        let got = format.encode(f32::from_bits(bits), Overflow::Inf);
        if got != want {
            mismatches.push(format!(
                "{format} input 0x{bits:08X} ({}): want 0x{want:02X} got 0x{got:02X}",
                f32::from_bits(bits)
            ));
        }
        rows += 1;
    }
    assert!(rows > 3000, "edges fixture unexpectedly small: {rows}");
    assert!(
        mismatches.is_empty(),
        "{:#?}",
        &mismatches[..mismatches.len().min(20)]
    );
}

#[test]
fn qdq_equals_decode_of_encode_on_generated_inputs() {
    for (format, elo, ehi, n) in GENERATED {
        for i in 0..n as u64 / 4 {
            let x = f32::from_bits(fixture_input(FIXTURE_SEED ^ 1, i, elo, ehi));
            for overflow in [Overflow::Inf, Overflow::Saturate] {
                let q = format.qdq(x, overflow);
                let d = format.decode(format.encode(x, overflow));
                assert!(
                    q.to_bits() == d.to_bits() || (q.is_nan() && d.is_nan()),
                    "{format} {overflow:?} x={x}: qdq {q} decode(encode) {d}"
                );
            }
        }
    }
}
