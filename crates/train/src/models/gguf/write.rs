//! GGUF bytes from metadata and tensor data: the inverse of [`super::file`]. It writes what
//! a parsed file describes (or an edited copy of it), so tests and fuzzers can drive chosen
//! metadata values (a block count, a token list, an epsilon) through the whole conversion
//! without a Python writer.
//!
//! Integers are written as 64-bit (types 10/11), numbers as f64 (12): the reader treats every
//! width alike. Tensors are laid out in the order given, each at the next aligned offset.

use super::file::{GgufFile, MetaValue};

/// One tensor to write: GGUF name, dimensions (innermost first), ggml type id and its bytes.
#[derive(Clone, Debug)]
pub struct RawTensor {
    /// GGUF name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Dimensions, innermost first.
    pub dims: Vec<u64>,
    /// ggml type id.
    pub ggml_type: u32,
    /// The tensor's bytes as the type stores them.
    pub data: Vec<u8>,
}

/// The tensors of a parsed file with their bytes (`bytes`: the whole file).
pub fn raw_tensors(g: &GgufFile, bytes: &[u8]) -> Vec<RawTensor> {
    g.tensors
        .iter()
        .map(|t| RawTensor {
            name: t.name.clone(),
            dims: t.dims.clone(),
            ggml_type: t.ggml_type.id(),
            data: bytes[t.start..t.start + t.bytes].to_vec(),
        })
        .collect()
}

fn string(out: &mut Vec<u8>, s: &[u8]) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s);
}

fn type_id(v: &MetaValue) -> u32 {
    match v {
        MetaValue::Uint(_) => 10,
        MetaValue::Int(_) => 11,
        MetaValue::Float(_) => 12,
        MetaValue::Bool(_) => 7,
        MetaValue::Str(_) => 8,
        MetaValue::Array(_) => 9,
    }
}

fn value(out: &mut Vec<u8>, v: &MetaValue) {
    match v {
        MetaValue::Uint(n) => out.extend(n.to_le_bytes()),
        MetaValue::Int(n) => out.extend(n.to_le_bytes()),
        MetaValue::Float(f) => out.extend(f.to_le_bytes()),
        MetaValue::Bool(b) => out.push(u8::from(*b)),
        MetaValue::Str(s) => string(out, s.as_bytes()),
        MetaValue::Array(a) => {
            out.extend(a.first().map_or(4, type_id).to_le_bytes());
            out.extend((a.len() as u64).to_le_bytes());
            for x in a {
                value(out, x);
            }
        }
    }
}

/// A version-3 GGUF file of `metadata` (in the order given) and `tensors`, aligned to
/// `general.alignment` when the metadata sets it (else 32).
pub fn to_bytes(metadata: &[(String, MetaValue)], tensors: &[RawTensor]) -> Vec<u8> {
    let alignment = metadata
        .iter()
        .find(|(k, _)| k == "general.alignment")
        .and_then(|(_, v)| v.as_u64())
        .filter(|a| a.is_power_of_two() && *a <= 1 << 20)
        .unwrap_or(32) as usize;
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((metadata.len() as u64).to_le_bytes());
    for (k, v) in metadata {
        string(&mut out, k.as_bytes());
        out.extend(type_id(v).to_le_bytes());
        value(&mut out, v);
    }
    let mut offset = 0usize;
    let mut offsets = Vec::with_capacity(tensors.len());
    for t in tensors {
        string(&mut out, t.name.as_bytes());
        out.extend((t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            out.extend(d.to_le_bytes());
        }
        out.extend(t.ggml_type.to_le_bytes());
        out.extend((offset as u64).to_le_bytes());
        offsets.push(offset);
        offset = (offset + t.data.len()).div_ceil(alignment) * alignment;
    }
    let data_start = out.len().div_ceil(alignment) * alignment;
    out.resize(data_start, 0);
    for (t, o) in tensors.iter().zip(offsets) {
        out.resize(data_start + o, 0);
        out.extend(&t.data);
    }
    out
}

/// `g` (parsed from `bytes`) written again with `edit` applied to its metadata and tensors.
pub fn rewrite(
    g: &GgufFile,
    bytes: &[u8],
    edit: impl FnOnce(&mut Vec<(String, MetaValue)>, &mut Vec<RawTensor>),
) -> Vec<u8> {
    let mut metadata: Vec<(String, MetaValue)> = g
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut tensors = raw_tensors(g, bytes);
    edit(&mut metadata, &mut tensors);
    to_bytes(&metadata, &tensors)
}
