//! ggml's tensor element types and their dequantization to f32, exactly as llama.cpp's
//! `dequantize_row_*` (ggml-quants.c) and the `gguf` Python package's `gguf.quants` define
//! them: every product and sum in the same order, in f32, so the values agree bit for bit.
//!
//! Block layouts (bytes, little-endian; `d`, `m`, `dmin` are f16):
//! - Q4_0 (32 elements, 18 B): d, 16 nibble bytes; x = (q − 8)·d.
//! - Q4_1 (32, 20 B): d, m, 16 nibble bytes; x = q·d + m.
//! - Q5_0 (32, 22 B): d, 4 bytes of fifth bits, 16 nibble bytes; x = (q − 16)·d.
//! - Q5_1 (32, 24 B): d, m, 4 bytes of fifth bits, 16 nibble bytes; x = q·d + m.
//! - Q8_0 (32, 34 B): d, 32 signed bytes; x = q·d.
//! - Q4_K (256, 144 B): d, dmin, 12 bytes of 6-bit scales and mins, 128 nibble bytes;
//!   x = (d·sc)·q − dmin·m per sub-block of 32.
//! - Q5_K (256, 176 B): as Q4_K plus 32 bytes of fifth bits.
//! - Q6_K (256, 210 B): 128 low-nibble bytes, 64 bytes of high 2-bit pairs, 16 signed scales,
//!   d; x = (d·sc)·(q − 32) per sub-block of 16.

use half::{bf16, f16};

/// A ggml element type this project reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    /// float32.
    F32,
    /// float16.
    F16,
    /// bfloat16.
    BF16,
    /// 4-bit, one scale per 32.
    Q4_0,
    /// 4-bit, scale and minimum per 32.
    Q4_1,
    /// 5-bit, one scale per 32.
    Q5_0,
    /// 5-bit, scale and minimum per 32.
    Q5_1,
    /// 8-bit, one scale per 32.
    Q8_0,
    /// 4-bit k-quant (super-blocks of 256).
    Q4_K,
    /// 5-bit k-quant.
    Q5_K,
    /// 6-bit k-quant.
    Q6_K,
}

const ALL: [GgmlType; 11] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

impl GgmlType {
    /// The type of ggml id `id` (`enum ggml_type`), if this project reads it.
    pub fn from_id(id: u32) -> Option<Self> {
        ALL.into_iter().find(|t| t.id() == id)
    }

    /// Its ggml id.
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q4_K => 12,
            GgmlType::Q5_K => 13,
            GgmlType::Q6_K => 14,
            GgmlType::BF16 => 30,
        }
    }

    /// Its name as ggml spells it.
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::BF16 => "BF16",
            GgmlType::Q4_0 => "Q4_0",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q5_0 => "Q5_0",
            GgmlType::Q5_1 => "Q5_1",
            GgmlType::Q8_0 => "Q8_0",
            GgmlType::Q4_K => "Q4_K",
            GgmlType::Q5_K => "Q5_K",
            GgmlType::Q6_K => "Q6_K",
        }
    }

    /// The types read, for messages.
    pub fn supported_list() -> String {
        ALL.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
    }

    /// Elements per block.
    pub fn block_elements(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0 => {
                32
            }
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => 256,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q5_0 => 22,
            GgmlType::Q5_1 => 24,
            GgmlType::Q8_0 => 34,
            GgmlType::Q4_K => 144,
            GgmlType::Q5_K => 176,
            GgmlType::Q6_K => 210,
        }
    }
}

fn h(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The 6-bit scale and minimum `j` (0–7) of a Q4_K/Q5_K block's 12 packed bytes
/// (`get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

fn block(ty: GgmlType, b: &[u8], y: &mut [f32]) {
    match ty {
        GgmlType::F32 => y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        GgmlType::F16 => y[0] = h(b, 0),
        GgmlType::BF16 => y[0] = bf16::from_le_bytes([b[0], b[1]]).to_f32(),
        GgmlType::Q4_0 => {
            let d = h(b, 0);
            for j in 0..16 {
                let q = b[2 + j];
                y[j] = (i32::from(q & 0xF) - 8) as f32 * d;
                y[j + 16] = (i32::from(q >> 4) - 8) as f32 * d;
            }
        }
        GgmlType::Q4_1 => {
            let (d, m) = (h(b, 0), h(b, 2));
            for j in 0..16 {
                let q = b[4 + j];
                y[j] = f32::from(q & 0xF) * d + m;
                y[j + 16] = f32::from(q >> 4) * d + m;
            }
        }
        GgmlType::Q5_0 | GgmlType::Q5_1 => {
            let (d, m, at) = match ty {
                GgmlType::Q5_0 => (h(b, 0), 0.0, 2),
                _ => (h(b, 0), h(b, 2), 4),
            };
            let qh = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
            for j in 0..16 {
                let q = b[at + 4 + j];
                let xh0 = (((qh >> j) << 4) & 0x10) as u8;
                let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
                let (q0, q1) = ((q & 0xF) | xh0, (q >> 4) | xh1);
                if ty == GgmlType::Q5_0 {
                    y[j] = (i32::from(q0) - 16) as f32 * d;
                    y[j + 16] = (i32::from(q1) - 16) as f32 * d;
                } else {
                    y[j] = f32::from(q0) * d + m;
                    y[j + 16] = f32::from(q1) * d + m;
                }
            }
        }
        GgmlType::Q8_0 => {
            let d = h(b, 0);
            for j in 0..32 {
                y[j] = f32::from(b[2 + j] as i8) * d;
            }
        }
        GgmlType::Q4_K | GgmlType::Q5_K => {
            let (d, dmin) = (h(b, 0), h(b, 2));
            let scales = &b[4..16];
            let (qh, ql) = match ty {
                GgmlType::Q5_K => (&b[16..48], &b[48..176]),
                _ => (&b[0..0], &b[16..144]),
            };
            for (n, chunk) in y.chunks_exact_mut(64).enumerate() {
                let (sc1, m1) = scale_min_k4(2 * n, scales);
                let (sc2, m2) = scale_min_k4(2 * n + 1, scales);
                let (d1, min1) = (d * f32::from(sc1), dmin * f32::from(m1));
                let (d2, min2) = (d * f32::from(sc2), dmin * f32::from(m2));
                let q = &ql[32 * n..32 * n + 32];
                for l in 0..32 {
                    let (mut lo, mut hi) = (q[l] & 0xF, q[l] >> 4);
                    if !qh.is_empty() {
                        lo += ((qh[l] >> (2 * n)) & 1) << 4;
                        hi += ((qh[l] >> (2 * n + 1)) & 1) << 4;
                    }
                    chunk[l] = d1 * f32::from(lo) - min1;
                    chunk[l + 32] = d2 * f32::from(hi) - min2;
                }
            }
        }
        GgmlType::Q6_K => {
            let (ql, qh, sc) = (&b[0..128], &b[128..192], &b[192..208]);
            let d = h(b, 208);
            for (n, chunk) in y.chunks_exact_mut(128).enumerate() {
                let (ql, qh, sc) = (&ql[64 * n..], &qh[32 * n..], &sc[8 * n..]);
                for l in 0..32 {
                    let is = l / 16;
                    let q1 = (i32::from(ql[l] & 0xF) | (i32::from(qh[l] & 3) << 4)) - 32;
                    let q2 =
                        (i32::from(ql[l + 32] & 0xF) | (i32::from((qh[l] >> 2) & 3) << 4)) - 32;
                    let q3 = (i32::from(ql[l] >> 4) | (i32::from((qh[l] >> 4) & 3) << 4)) - 32;
                    let q4 = (i32::from(ql[l + 32] >> 4) | (i32::from((qh[l] >> 6) & 3) << 4)) - 32;
                    let s = |k: usize| d * f32::from(sc[is + k] as i8);
                    chunk[l] = s(0) * q1 as f32;
                    chunk[l + 32] = s(2) * q2 as f32;
                    chunk[l + 64] = s(4) * q3 as f32;
                    chunk[l + 96] = s(6) * q4 as f32;
                }
            }
        }
    }
}

/// Dequantizes `bytes` (whole blocks of `ty`) into `out` (`bytes.len() / block_bytes ·
/// block_elements` values).
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) {
    let (be, bb) = (ty.block_elements(), ty.block_bytes());
    for (b, y) in bytes.chunks_exact(bb).zip(out.chunks_exact_mut(be)) {
        block(ty, b, y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_sizes_match_ggml() {
        for t in ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
        }
        assert_eq!(GgmlType::from_id(4), None, "Q4_2 was removed from ggml");
        // ggml's type_traits: block sizes / type sizes.
        assert_eq!(
            (
                GgmlType::Q4_K.block_elements(),
                GgmlType::Q4_K.block_bytes()
            ),
            (256, 144)
        );
        assert_eq!(
            (
                GgmlType::Q6_K.block_elements(),
                GgmlType::Q6_K.block_bytes()
            ),
            (256, 210)
        );
    }

    #[test]
    fn q8_0_and_q4_0_by_hand() {
        let mut b = vec![0u8; 34];
        b[..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        b[2] = 4;
        b[3] = (-6i8) as u8;
        let mut y = [0.0f32; 32];
        dequantize(GgmlType::Q8_0, &b, &mut y);
        assert_eq!((y[0], y[1], y[2]), (2.0, -3.0, 0.0));
        let mut b = vec![0u8; 18];
        b[..2].copy_from_slice(&f16::from_f32(2.0).to_le_bytes());
        b[2] = 0xF0; // element 0: 0 − 8, element 16: 15 − 8
        dequantize(GgmlType::Q4_0, &b, &mut y);
        assert_eq!((y[0], y[16], y[1]), (-16.0, 14.0, -16.0));
    }
}
