//! The GGUF container (llama.cpp's model file, versions 2 and 3): header, metadata key/values,
//! tensor descriptions and where each tensor's bytes lie. Parsed from a byte slice (a mapped
//! file) with every count and length checked against the bytes that remain, so a damaged or
//! hostile file is an error naming the field, never a panic or a huge allocation.
//!
//! Layout (little-endian): magic `GGUF`, version u32, tensor count u64, key/value count u64;
//! each key/value: key (string), value type u32, value; each tensor: name, dimension count
//! u32, dimensions u64 (innermost first), ggml type u32, offset u64 into the data section;
//! the data section starts at the next multiple of `general.alignment` (default 32).

use std::collections::BTreeMap;

use super::dequant::GgmlType;

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// Any unsigned integer type.
    Uint(u64),
    /// Any signed integer type.
    Int(i64),
    /// f32 or f64.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A UTF-8 string (a file holding invalid UTF-8 is refused).
    Str(String),
    /// An array of values.
    Array(Vec<MetaValue>),
}

impl MetaValue {
    /// The value as a non-negative integer, if it is one.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            MetaValue::Uint(v) => Some(*v),
            MetaValue::Int(v) => u64::try_from(*v).ok(),
            _ => None,
        }
    }

    /// The value as a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            MetaValue::Uint(v) => Some(*v as f64),
            MetaValue::Int(v) => Some(*v as f64),
            MetaValue::Float(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            MetaValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The value as an array.
    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A short description of the value's type, for errors.
    pub fn kind(&self) -> &'static str {
        match self {
            MetaValue::Uint(_) => "an unsigned integer",
            MetaValue::Int(_) => "an integer",
            MetaValue::Float(_) => "a number",
            MetaValue::Bool(_) => "a boolean",
            MetaValue::Str(_) => "a string",
            MetaValue::Array(_) => "an array",
        }
    }
}

/// One tensor's description.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its GGUF name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Dimensions, innermost (row length) first, as GGUF stores them.
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Byte offset of its data within the file.
    pub start: usize,
    /// Its data's length in bytes.
    pub bytes: usize,
}

impl TensorInfo {
    /// Elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// The shape in row-major order (outermost first: the Hugging Face / PyTorch shape).
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|d| *d as usize).collect()
    }
}

/// A parsed GGUF file (descriptions only; tensor bytes stay in the caller's slice).
#[derive(Clone, Debug, PartialEq)]
pub struct GgufFile {
    /// Format version (2 or 3).
    pub version: u32,
    /// Metadata in file order of keys (a key given twice is an error).
    pub metadata: BTreeMap<String, MetaValue>,
    /// Tensors in file order.
    pub tensors: Vec<TensorInfo>,
}

/// Why a file is not a GGUF file this project reads.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}{message}", if at.is_empty() { String::new() } else { format!("{at}: ") })]
pub struct GgufError {
    /// Where in the file: the field being read (`header: tensor_count`, `metadata key 3`,
    /// `tensor 'blk.0.attn_q.weight'`), or empty for the file as a whole.
    pub at: String,
    /// What is wrong there.
    pub message: String,
}

impl GgufError {
    /// An error at a field of the file.
    pub fn at(at: impl Into<String>, message: impl Into<String>) -> Self {
        GgufError {
            at: at.into(),
            message: message.into(),
        }
    }

    /// An error of the file as a whole (its magic, two tensors' bytes, a conversion).
    pub fn whole(message: impl Into<String>) -> Self {
        GgufError::at(String::new(), message)
    }
}

/// Values nested deeper than this (arrays of arrays of …) are refused.
const MAX_DEPTH: usize = 4;

/// The largest `general.alignment` read (llama.cpp's files use 32; a larger one only pads).
const MAX_ALIGNMENT: u64 = 1 << 20;

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &dyn Fn() -> String) -> Result<&'a [u8], GgufError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len());
        match end {
            Some(end) => {
                let s = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(GgufError::at(
                what(),
                format!(
                    "the file ends at byte {} (needs {n} more bytes from byte {})",
                    self.bytes.len(),
                    self.pos
                ),
            )),
        }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, GgufError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let len = self.u64(what)?;
        if len > self.remaining() as u64 {
            return Err(GgufError::at(
                what(),
                format!(
                    "a string of {len} bytes, but only {} bytes remain",
                    self.remaining()
                ),
            ));
        }
        let at = self.pos;
        let b = self.take(len as usize, what)?;
        // Strict, as llama.cpp's own `gguf` package reads it: a replaced byte would change a
        // token's spelling (and so the tokenizer) without a word.
        std::str::from_utf8(b).map(str::to_owned).map_err(|e| {
            GgufError::at(
                what(),
                format!(
                    "a string that is not valid UTF-8 (byte {} of it, at file offset {})",
                    e.valid_up_to(),
                    at + e.valid_up_to()
                ),
            )
        })
    }

    fn value(
        &mut self,
        ty: u32,
        depth: usize,
        what: &dyn Fn() -> String,
    ) -> Result<MetaValue, GgufError> {
        let fixed = |c: &mut Self, n: usize| -> Result<u64, GgufError> {
            let b = c.take(n, what)?;
            let mut a = [0u8; 8];
            a[..n].copy_from_slice(b);
            Ok(u64::from_le_bytes(a))
        };
        Ok(match ty {
            0 => MetaValue::Uint(fixed(self, 1)?),
            1 => MetaValue::Int(i64::from(fixed(self, 1)? as u8 as i8)),
            2 => MetaValue::Uint(fixed(self, 2)?),
            3 => MetaValue::Int(i64::from(fixed(self, 2)? as u16 as i16)),
            4 => MetaValue::Uint(fixed(self, 4)?),
            5 => MetaValue::Int(i64::from(fixed(self, 4)? as u32 as i32)),
            6 => MetaValue::Float(f64::from(f32::from_bits(fixed(self, 4)? as u32))),
            7 => match fixed(self, 1)? {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => {
                    return Err(GgufError::at(
                        what(),
                        format!("boolean byte {b} (not 0 or 1)"),
                    ));
                }
            },
            8 => MetaValue::Str(self.string(what)?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(GgufError::at(
                        what(),
                        format!("arrays nested deeper than {MAX_DEPTH}"),
                    ));
                }
                let inner = self.u32(what)?;
                let len = self.u64(what)?;
                // Every element takes at least one byte: a length beyond the bytes left is a
                // damaged file, refused before allocating for it.
                if len > self.remaining() as u64 {
                    return Err(GgufError::at(
                        what(),
                        format!(
                            "an array of {len} elements, but only {} bytes remain",
                            self.remaining()
                        ),
                    ));
                }
                let mut out = Vec::with_capacity(len as usize);
                for i in 0..len {
                    let item = || format!("{}[{i}]", what());
                    out.push(self.value(inner, depth + 1, &item)?);
                }
                MetaValue::Array(out)
            }
            10 => MetaValue::Uint(fixed(self, 8)?),
            11 => MetaValue::Int(fixed(self, 8)? as i64),
            12 => MetaValue::Float(f64::from_bits(fixed(self, 8)?)),
            t => {
                return Err(GgufError::at(
                    what(),
                    format!("unknown value type {t} (GGUF defines 0–12)"),
                ));
            }
        })
    }
}

/// `general.alignment` (32 when absent): a power of two up to [`MAX_ALIGNMENT`].
fn alignment(metadata: &BTreeMap<String, MetaValue>) -> Result<usize, GgufError> {
    let alignment = match metadata.get("general.alignment") {
        None => 32,
        Some(v) => v
            .as_u64()
            .filter(|a| a.is_power_of_two() && *a <= MAX_ALIGNMENT)
            .ok_or_else(|| {
                GgufError::whole(format!(
                    "metadata 'general.alignment' is {}: a power of two from 1 to {MAX_ALIGNMENT} \
                     (1 MiB) is needed",
                    match v {
                        MetaValue::Uint(n) => n.to_string(),
                        MetaValue::Int(n) => n.to_string(),
                        other => other.kind().to_owned(),
                    }
                ))
            })?,
    } as usize;
    Ok(alignment)
}

/// Tensors with names and bytes of their own: a damaged or crafted file shares them.
fn distinct_tensors(tensors: &[TensorInfo]) -> Result<(), GgufError> {
    let mut names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(GgufError::whole(format!(
            "tensor '{}' is given twice",
            w[0]
        )));
    }
    // Two tensors sharing bytes: a damaged or crafted file (llama.cpp refuses it too).
    let mut by_start: Vec<&TensorInfo> = tensors.iter().collect();
    by_start.sort_by_key(|t| t.start);
    if let Some(w) = by_start
        .windows(2)
        .find(|w| w[0].start + w[0].bytes > w[1].start)
    {
        return Err(GgufError::whole(format!(
            "tensor '{}' (bytes {}..{}) overlaps tensor '{}' (bytes {}..{}): each tensor \
             needs bytes of its own",
            w[1].name,
            w[1].start,
            w[1].start + w[1].bytes,
            w[0].name,
            w[0].start,
            w[0].start + w[0].bytes
        )));
    }
    Ok(())
}

impl GgufFile {
    /// Parses the header, metadata and tensor descriptions of `bytes` (the whole file: tensor
    /// extents are checked against its length).
    pub fn parse(bytes: &[u8]) -> Result<Self, GgufError> {
        let mut c = Cursor { bytes, pos: 0 };
        let magic = c.take(4, &|| "header".into())?;
        if magic != b"GGUF" {
            return Err(GgufError::whole(format!(
                "not a GGUF file (starts with {:02x?}, not \"GGUF\")",
                magic
            )));
        }
        let version = c.u32(&|| "header: version".into())?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::at(
                "header",
                format!("GGUF version {version} (versions 2 and 3 are supported)"),
            ));
        }
        let n_tensors = c.u64(&|| "header: tensor_count".into())?;
        let n_kv = c.u64(&|| "header: metadata_kv_count".into())?;
        // A key/value takes at least 13 bytes, a tensor description at least 24.
        if n_kv > c.remaining() as u64 / 13 || n_tensors > c.remaining() as u64 / 24 {
            return Err(GgufError::at(
                "header",
                format!(
                    "{n_kv} metadata entries and {n_tensors} tensors do not fit in a file of {} bytes",
                    bytes.len()
                ),
            ));
        }
        let mut metadata = BTreeMap::new();
        for i in 0..n_kv {
            let key = c.string(&|| format!("metadata entry {i}: key"))?;
            let what = || format!("metadata '{key}'");
            let ty = c.u32(&what)?;
            let v = c.value(ty, 0, &what)?;
            if metadata.insert(key.clone(), v).is_some() {
                return Err(GgufError::whole(format!("metadata '{key}' is given twice")));
            }
        }
        let alignment = alignment(&metadata)?;
        let mut raw = Vec::new();
        for i in 0..n_tensors {
            let name = c.string(&|| format!("tensor {i}: name"))?;
            let what = || format!("tensor '{name}'");
            let n_dims = c.u32(&what)?;
            if !(1..=4).contains(&n_dims) {
                return Err(GgufError::at(
                    format!("tensor '{name}'"),
                    format!("{n_dims} dimensions (1 to 4 are allowed)"),
                ));
            }
            let mut dims = Vec::new();
            for _ in 0..n_dims {
                dims.push(c.u64(&what)?);
            }
            let ty = c.u32(&what)?;
            let offset = c.u64(&what)?;
            raw.push((name, dims, ty, offset));
        }
        let data_start = c.pos.div_ceil(alignment) * alignment;
        let mut tensors = Vec::with_capacity(raw.len());
        for (name, dims, ty, offset) in raw {
            tensors.push(TensorInfo::place(
                name,
                dims,
                ty,
                offset,
                (data_start, alignment),
                bytes.len(),
            )?);
        }
        distinct_tensors(&tensors)?;
        Ok(GgufFile {
            version,
            metadata,
            tensors,
        })
    }

    /// A metadata value.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.get(key)
    }

    /// A tensor's description.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

impl TensorInfo {
    /// A tensor description checked against the file: a type this project reads, whole
    /// blocks per row, an aligned offset, data inside the file (`file_len` bytes; the data
    /// section starts at `data_start`).
    fn place(
        name: String,
        dims: Vec<u64>,
        ty: u32,
        offset: u64,
        (data_start, alignment): (usize, usize),
        file_len: usize,
    ) -> Result<Self, GgufError> {
        let ggml_type = GgmlType::from_id(ty).ok_or_else(|| {
            GgufError::at(
                format!("tensor '{name}'"),
                format!(
                    "ggml type {ty} is not one this project reads ({})",
                    GgmlType::supported_list()
                ),
            )
        })?;
        let elements = dims
            .iter()
            .try_fold(1u64, |a, d| a.checked_mul(*d))
            .filter(|e| *e > 0)
            .ok_or_else(|| {
                GgufError::at(
                    format!("tensor '{name}'"),
                    format!("dimensions {dims:?} are empty or overflow"),
                )
            })?;
        let block = ggml_type.block_elements() as u64;
        if !dims[0].is_multiple_of(block) {
            return Err(GgufError::at(
                format!("tensor '{name}'"),
                format!(
                    "rows of {} elements are not whole blocks of {block} ({})",
                    dims[0],
                    ggml_type.name()
                ),
            ));
        }
        let size = (elements / block).checked_mul(ggml_type.block_bytes() as u64);
        let start = (data_start as u64).checked_add(offset);
        let end = match (start, size) {
            (Some(s), Some(n)) => s.checked_add(n),
            _ => None,
        };
        if !offset.is_multiple_of(alignment as u64) {
            return Err(GgufError::at(
                format!("tensor '{name}'"),
                format!("offset {offset} is not aligned to {alignment}"),
            ));
        }
        match (start, size, end) {
            (Some(s), Some(n), Some(e)) if e <= file_len as u64 => Ok(TensorInfo {
                name,
                dims,
                ggml_type,
                start: s as usize,
                bytes: n as usize,
            }),
            _ => Err(GgufError::at(
                format!("tensor '{name}'"),
                format!(
                    "{elements} elements of {} at offset {offset} run past the end of the file ({file_len} bytes)",
                    ggml_type.name()
                ),
            )),
        }
    }
}

/// A metadata value in words, for messages.
pub fn meta_text(v: &MetaValue) -> String {
    match v {
        MetaValue::Uint(n) => n.to_string(),
        MetaValue::Int(n) => n.to_string(),
        MetaValue::Float(f) => format!("{f}"),
        MetaValue::Bool(b) => b.to_string(),
        MetaValue::Str(s) => s.clone(),
        MetaValue::Array(a) => format!("an array of {}", a.len()),
    }
}
