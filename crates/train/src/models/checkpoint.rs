//! Checkpoints in the safetensors format: the model under Hugging Face Llama names, AdamW
//! moments (`optimizer.exp_avg.<name>`, `optimizer.exp_avg_sq.<name>`), every quantizer's
//! amax history, estimates and scales (`quantizers.*`), and in the metadata the step, the
//! data position and the run config. Written to a temporary file and renamed.
//!
//! Integrity: the metadata key `tensor_crc32` holds the CRC-32 of the whole data section (as
//! 11 hex digits: the 32-bit value zero-padded to its placeholder's width)
//! (every tensor's bytes in file order), checked on every load, so flipped bytes inside tensor
//! data are refused instead of silently changing the run. Files without the key (written
//! before it existed) still load.
//!
//! Read and written with the `safetensors` crate (files memory-mapped on load); tensors are
//! F32 when written, F32, BF16 or F16 when read.

use std::collections::BTreeMap;
use std::path::Path;

/// The name ending of a PyTorch module's extra state (`nn.Module.get_extra_state`), which
/// `save_pretrained` stores beside the weights.
pub const EXTRA_STATE_SUFFIX: &str = "._extra_state";

/// Metadata key of the CRC-32 of the data section (lower-case hex, 8 digits).
pub const CHECKSUM_KEY: &str = "tensor_crc32";

/// A tensor of a checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedTensor {
    /// Name.
    pub name: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Values.
    pub data: Vec<f32>,
}

/// A whole checkpoint.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Checkpoint {
    /// Tensors in file order.
    pub tensors: Vec<NamedTensor>,
    /// String metadata.
    pub metadata: BTreeMap<String, String>,
}

/// A checkpoint that cannot be read: which file and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("checkpoint {path}: {message}")]
pub struct CheckpointError {
    /// The file.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// A tensor a model needs that a checkpoint lacks, holds in another shape, or stores in a
/// type this project does not read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TensorError {
    /// No tensor of this name.
    #[error("tensor '{name}' missing")]
    Missing {
        /// The tensor.
        name: String,
    },
    /// Another shape than the model's.
    #[error("tensor '{name}' has shape {found:?}, this model needs {needed:?} (different config?)")]
    Shape {
        /// The tensor.
        name: String,
        /// Its shape in the checkpoint.
        found: Vec<usize>,
        /// The model's.
        needed: Vec<usize>,
    },
    /// A dtype other than F32, BF16 or F16.
    #[error("dtype {dtype} is not supported (F32, BF16 or F16)")]
    Dtype {
        /// The dtype as safetensors names it.
        dtype: String,
    },
}

impl Checkpoint {
    /// The tensor called `name`.
    pub fn get(&self, name: &str) -> Option<&NamedTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The data of tensor `name`, which this model needs with `shape`: the one check that
    /// loading base weights and restoring a run share (a missing tensor or another shape is
    /// named).
    pub fn tensor_of_shape(&self, name: &str, shape: &[usize]) -> Result<&[f32], TensorError> {
        let t = self.get(name).ok_or_else(|| TensorError::Missing {
            name: name.to_owned(),
        })?;
        if t.shape != shape {
            return Err(TensorError::Shape {
                name: name.to_owned(),
                found: t.shape.clone(),
                needed: shape.to_vec(),
            });
        }
        Ok(&t.data)
    }

    /// Serializes to safetensors bytes ([`Self::write_to`] into memory).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // (Writing to a Vec cannot fail.)
        let _ = self.write_to(&mut out);
        out
    }

    /// Parses safetensors bytes (F32, BF16 and F16 tensors, read as f32); `path` names the
    /// file in errors. A module's serialized extra state (PyTorch's `*._extra_state`, such as
    /// the quantizers' state `hif8lab.torch` keeps there) is not a weight and is passed over.
    pub fn from_bytes(path: &str, bytes: &[u8]) -> Result<Self, CheckpointError> {
        let err = |message: String| CheckpointError {
            path: path.to_owned(),
            message,
        };
        let invalid = |e: safetensors::SafeTensorError| {
            use safetensors::SafeTensorError as E;
            err(match e {
                E::MetadataIncompleteBuffer | E::InvalidHeaderLength | E::HeaderTooSmall => {
                    format!(
                        "not a complete safetensors file ({e}; {} bytes: cut short or damaged?)",
                        bytes.len()
                    )
                }
                other => format!("not a valid safetensors file: {other}"),
            })
        };
        let (header_len, meta) = safetensors::SafeTensors::read_metadata(bytes).map_err(invalid)?;
        let st = safetensors::SafeTensors::deserialize(bytes).map_err(invalid)?;
        let mut metadata: BTreeMap<String, String> = meta
            .metadata()
            .as_ref()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let mut tensors = Vec::new();
        for name in meta.offset_keys() {
            if name.ends_with(EXTRA_STATE_SUFFIX) {
                continue;
            }
            let view = st
                .tensor(&name)
                .map_err(|e| err(format!("tensor '{name}': {e}")))?;
            tensors.push(NamedTensor {
                data: to_f32(view.dtype(), view.data())
                    .map_err(|m| err(format!("tensor '{name}': {m}")))?,
                shape: view.shape().to_vec(),
                name,
            });
        }
        // Structure first (errors name the tensor), then the bytes.
        if let Some(stored) = metadata.remove(CHECKSUM_KEY) {
            let data = &bytes[8 + header_len..];
            let computed = crc32fast::hash(data);
            if u32::from_str_radix(stored.trim(), 16).ok() != Some(computed) {
                return Err(err(format!(
                    "tensor data checksum mismatch: the file says {CHECKSUM_KEY} {stored}, its data \
                     has {computed:08x} (the file was changed or damaged after it was written)"
                )));
            }
        }
        Ok(Checkpoint { tensors, metadata })
    }

    /// Writes the checkpoint atomically (temporary file, then rename), streaming: the same
    /// bytes as [`Self::to_bytes`] without a second copy of the tensors in memory.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        save_source(path, self)
    }

    /// Writes the safetensors bytes of [`Self::to_bytes`] to `w` ([`write_source`]).
    pub fn write_to(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        write_source(self, w)
    }

    /// Reads a checkpoint file (memory-mapped: the file's bytes are converted to f32 once,
    /// never copied whole).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(path: &Path) -> Result<Self, CheckpointError> {
        let map = map_file(path)?;
        Self::from_bytes(&path.display().to_string(), &map)
    }

    /// Reads a checkpoint file.
    #[cfg(target_arch = "wasm32")]
    pub fn load(path: &Path) -> Result<Self, CheckpointError> {
        let bytes = std::fs::read(path).map_err(|e| CheckpointError {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::from_bytes(&path.display().to_string(), &bytes)
    }
}

/// The same safetensors bytes with the header's keys sorted (the crate writes metadata from a
/// hash map, in an order that changes from process to process): equal contents, equal
/// bytes, so a resumed run's checkpoint is byte-identical to an uninterrupted one's.
pub fn canonical(bytes: Vec<u8>) -> Vec<u8> {
    // (`bytes` is moved in so the common case needs no copy.)
    let Some(n) = header_len(&bytes).filter(|n| 8 + n <= bytes.len()) else {
        return bytes;
    };
    let Ok(header) =
        serde_json::from_slice::<BTreeMap<String, serde_json::Value>>(&bytes[8..8 + n])
    else {
        return bytes;
    };
    let sorted: BTreeMap<String, serde_json::Value> = header
        .into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::Object(m) => {
                let inner: BTreeMap<String, serde_json::Value> = m.into_iter().collect();
                (k, serde_json::to_value(inner).unwrap_or_default())
            }
            other => (k, other),
        })
        .collect();
    let Ok(mut text) = serde_json::to_vec(&sorted) else {
        return bytes;
    };
    text.resize(text.len().next_multiple_of(8), b' ');
    if text.len() == n {
        // Same length (the usual case): rewritten in place, no second copy of the data.
        let mut bytes = bytes;
        bytes[8..8 + n].copy_from_slice(&text);
        return bytes;
    }
    let mut out = Vec::with_capacity(8 + text.len() + bytes.len() - 8 - n);
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(&text);
    out.extend_from_slice(&bytes[8 + n..]);
    out
}

/// The length of a safetensors header (the 8-byte little-endian prefix).
fn header_len(bytes: &[u8]) -> Option<usize> {
    let prefix: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    usize::try_from(u64::from_le_bytes(prefix)).ok()
}

/// The bytes of f32 values, little-endian (every target this project builds for is).
fn bytemuck_f32(v: &[f32]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// Tensor bytes of `dtype` as f32 values (F32, BF16 and F16; other types are refused).
pub fn to_f32(dtype: safetensors::Dtype, bytes: &[u8]) -> Result<Vec<f32>, TensorError> {
    use safetensors::Dtype;
    Ok(match dtype {
        Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Dtype::BF16 => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        other => {
            return Err(TensorError::Dtype {
                dtype: format!("{other:?}"),
            });
        }
    })
}

/// A read-only memory map of `path` (errors name the file).
#[cfg(not(target_arch = "wasm32"))]
pub fn map_file(path: &Path) -> Result<memmap2::Mmap, CheckpointError> {
    let err = |e: std::io::Error| CheckpointError {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(err)?;
    // SAFETY: mapping is unsafe because the file may change while it is mapped, and the
    // slices read from the map assume it does not. This project never changes a mapped
    // file: checkpoints are written to a temporary file and renamed into place (never
    // rewritten in place), a run folder has one writer, and the map lives only while one
    // file is parsed. Another process truncating or rewriting the file meanwhile is not
    // guarded against: a truncation raises SIGBUS, and a rewrite can give torn values
    // (which the CRC-32 check usually catches, but cannot promise to).
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(err)?;
    Ok(map)
}

/// Every `step_N.safetensors` in a run's `checkpoints/` folder, newest first.
pub fn list(run_dir: &Path) -> Vec<(u64, std::path::PathBuf)> {
    let mut found: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(run_dir.join("checkpoints"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let step: u64 = name
                        .strip_prefix("step_")?
                        .strip_suffix(".safetensors")?
                        .parse()
                        .ok()?;
                    Some((step, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_by_key(|(step, _)| std::cmp::Reverse(*step));
    found
}

/// The newest `step_N.safetensors` in a run's `checkpoints/` folder.
pub fn latest(run_dir: &Path) -> Option<std::path::PathBuf> {
    list(run_dir).into_iter().next().map(|(_, p)| p)
}

/// A checkpoint found valid for continuing a run.
pub struct ValidCheckpoint {
    /// Its step (its name and metadata agree).
    pub step: u64,
    /// Its file.
    pub path: std::path::PathBuf,
    /// Its contents.
    pub checkpoint: Checkpoint,
}

/// The newest checkpoint of `run_dir` that loads (checksum included), says it is step N as
/// its name does, and was written for a run with `fingerprint`
/// ([`crate::RunConfig::continuation_fingerprint`]); with every newer one skipped and why.
pub fn newest_valid(run_dir: &Path, fingerprint: &str) -> (Option<ValidCheckpoint>, Vec<String>) {
    let mut skipped = Vec::new();
    for (step, path) in list(run_dir) {
        let reason = match Checkpoint::load(&path) {
            Err(e) => e.message,
            Ok(ck) => {
                let stored_step = ck.metadata.get("step").and_then(|s| s.parse::<u64>().ok());
                match ck.metadata.get("config_fingerprint") {
                    _ if stored_step != Some(step) => format!(
                        "its metadata says step {}, its name step {step}",
                        ck.metadata.get("step").map_or("(none)", String::as_str)
                    ),
                    Some(f) if f != fingerprint => format!(
                        "written for config fingerprint {f}, this run has {fingerprint} (a \
                         checkpoint of another run or config)"
                    ),
                    _ => {
                        let found = ValidCheckpoint {
                            step,
                            path,
                            checkpoint: ck,
                        };
                        return (Some(found), skipped);
                    }
                }
            }
        };
        skipped.push(format!("{}: {reason}", path.display()));
    }
    (None, skipped)
}

/// Where a checkpoint's tensors come from: a [`Checkpoint`] in memory, or a trainer read
/// back one tensor at a time (so writing it never holds weights and moments twice).
pub trait CheckpointSource {
    /// The tensors' names and shapes (any order).
    fn layout(&self) -> Vec<(String, Vec<usize>)>;
    /// The metadata.
    fn metadata(&self) -> BTreeMap<String, String>;
    /// The data of tensor `i` of [`CheckpointSource::layout`].
    fn tensor(&self, i: usize) -> std::io::Result<std::borrow::Cow<'_, [f32]>>;
}

impl CheckpointSource for Checkpoint {
    fn layout(&self) -> Vec<(String, Vec<usize>)> {
        self.tensors
            .iter()
            .map(|t| (t.name.clone(), t.shape.clone()))
            .collect()
    }

    fn metadata(&self) -> BTreeMap<String, String> {
        self.metadata.clone()
    }

    fn tensor(&self, i: usize) -> std::io::Result<std::borrow::Cow<'_, [f32]>> {
        Ok(std::borrow::Cow::Borrowed(&self.tensors[i].data))
    }
}

/// The checkpoint of `src` in memory.
pub fn materialize(src: &dyn CheckpointSource) -> std::io::Result<Checkpoint> {
    let tensors = src
        .layout()
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            Ok(NamedTensor {
                name,
                shape,
                data: src.tensor(i)?.into_owned(),
            })
        })
        .collect::<std::io::Result<_>>()?;
    Ok(Checkpoint {
        tensors,
        metadata: src.metadata(),
    })
}

/// Writes `src` to `path` whole or not at all ([`write_source`] through a temporary file and
/// a rename).
pub fn save_source(path: &Path, src: &dyn CheckpointSource) -> std::io::Result<()> {
    crate::io::write_atomic_with(path, &mut |w| write_source(src, w))
}

/// Writes `src` as safetensors bytes to `w`, one tensor at a time: the header (keys sorted,
/// the data's CRC-32 in the metadata, padded to 8 bytes), then each tensor's data in name
/// order (the `safetensors` crate's order for one dtype). The CRC comes first, so the data is
/// read twice (once for the CRC, once to write it); at most one tensor is held at a time.
pub fn write_source(src: &dyn CheckpointSource, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    use serde_json::{Value, json};
    let layout = src.layout();
    let mut order: Vec<usize> = (0..layout.len()).collect();
    order.sort_by(|a, b| layout[*a].0.cmp(&layout[*b].0));
    let mut crc = crc32fast::Hasher::new();
    for &i in &order {
        crc.update(bytemuck_f32(&src.tensor(i)?));
    }
    let mut metadata: BTreeMap<String, Value> = src
        .metadata()
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    metadata.insert(
        CHECKSUM_KEY.into(),
        Value::String(format!("{:011x}", crc.finalize())),
    );
    let mut header: BTreeMap<String, Value> = BTreeMap::new();
    header.insert("__metadata__".into(), serde_json::to_value(metadata)?);
    let mut offset = 0usize;
    for &i in &order {
        let (name, shape) = &layout[i];
        let end = offset + 4 * shape.iter().product::<usize>();
        header.insert(
            name.clone(),
            json!({"data_offsets": [offset, end], "dtype": "F32", "shape": shape}),
        );
        offset = end;
    }
    let mut text = serde_json::to_vec(&header)?;
    text.resize(text.len().next_multiple_of(8), b' ');
    w.write_all(&(text.len() as u64).to_le_bytes())?;
    w.write_all(&text)?;
    for &i in &order {
        let data = src.tensor(i)?;
        if data.len() != layout[i].1.iter().product::<usize>() {
            return Err(std::io::Error::other(format!(
                "tensor '{}' changed size while it was written",
                layout[i].0
            )));
        }
        w.write_all(bytemuck_f32(&data))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modules_extra_state_is_passed_over_and_other_u8_tensors_are_refused() {
        let w = [1.5f32, -2.0];
        let state = [7u8, 0, 255];
        let bytes = |extra: &str| {
            safetensors::serialize(
                vec![
                    (
                        "model.layers.0.mlp.up_proj.weight",
                        safetensors::tensor::TensorView::new(
                            safetensors::Dtype::F32,
                            vec![1, 2],
                            bytemuck_f32(&w),
                        )
                        .unwrap(),
                    ),
                    (
                        extra,
                        safetensors::tensor::TensorView::new(
                            safetensors::Dtype::U8,
                            vec![3],
                            &state,
                        )
                        .unwrap(),
                    ),
                ],
                None,
            )
            .unwrap()
        };
        let c = Checkpoint::from_bytes(
            "m.safetensors",
            &bytes("model.layers.0.mlp.up_proj._extra_state"),
        )
        .unwrap();
        assert_eq!(c.tensors.len(), 1);
        assert_eq!(c.tensors[0].data, w);
        let e = Checkpoint::from_bytes("m.safetensors", &bytes("model.layers.0.mlp.up_proj.codes"))
            .unwrap_err();
        assert!(
            e.to_string().contains("model.layers.0.mlp.up_proj.codes"),
            "{e}"
        );
    }

    /// The bytes as the `safetensors` crate serializes them, header keys sorted and the
    /// data's CRC written over a placeholder: the reference [`Checkpoint::write_to`] must
    /// equal.
    fn reference_bytes(c: &Checkpoint) -> Vec<u8> {
        const PLACEHOLDER: &str = "crc32-unset";
        let views: Vec<(&str, safetensors::tensor::TensorView<'_>)> = c
            .tensors
            .iter()
            .filter_map(|t| {
                let bytes: &[u8] = bytemuck_f32(&t.data);
                safetensors::tensor::TensorView::new(
                    safetensors::Dtype::F32,
                    t.shape.clone(),
                    bytes,
                )
                .ok()
                .map(|v| (t.name.as_str(), v))
            })
            .collect();
        let mut metadata: std::collections::HashMap<String, String> = c
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        metadata.insert(CHECKSUM_KEY.into(), PLACEHOLDER.into());
        let mut out = canonical(safetensors::serialize(views, Some(metadata)).unwrap_or_default());
        // The checksum of the data section, written over the placeholder (same length).
        let header_len = header_len(&out).unwrap_or(0);
        let crc = format!("{:011x}", crc32fast::hash(&out[8 + header_len..]));
        let quoted = format!("\"{PLACEHOLDER}\"");
        if let Some(at) = out[8..8 + header_len]
            .windows(quoted.len())
            .position(|w| w == quoted.as_bytes())
        {
            out[8 + at + 1..8 + at + 1 + PLACEHOLDER.len()].copy_from_slice(crc.as_bytes());
        }
        out
    }

    #[test]
    fn round_trip_and_corruption_errors() {
        let c = Checkpoint {
            tensors: vec![
                NamedTensor {
                    name: "a".into(),
                    shape: vec![2, 3],
                    data: (0..6).map(|i| i as f32 * 0.5).collect(),
                },
                NamedTensor {
                    name: "b".into(),
                    shape: vec![1],
                    data: vec![f32::NAN],
                },
            ],
            metadata: [("step".to_owned(), "7".to_owned())].into_iter().collect(),
        };
        let bytes = c.to_bytes();
        let back = Checkpoint::from_bytes("x", &bytes).unwrap();
        assert_eq!(back.tensors[0], c.tensors[0]);
        assert!(back.tensors[1].data[0].is_nan());
        assert_eq!(back.metadata["step"], "7");
        let e = Checkpoint::from_bytes("ck.safetensors", &bytes[..bytes.len() - 3]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("checkpoint ck.safetensors: not a complete safetensors file"),
            "{e}"
        );
        let e = Checkpoint::from_bytes("ck", &[1, 2]).unwrap_err();
        assert!(e.to_string().contains("not a complete"), "{e}");
        let mut bad = bytes.clone();
        bad[10] = b'!';
        assert!(Checkpoint::from_bytes("ck", &bad).is_err());
        // A flipped byte inside tensor data (the header still parses) is caught by the checksum.
        let mut flipped = bytes.clone();
        let last = flipped.len() - 6;
        flipped[last] ^= 0x40;
        let e = Checkpoint::from_bytes("ck", &flipped).unwrap_err();
        assert!(e.to_string().contains("checksum mismatch"), "{e}");
        assert!(
            !back.metadata.contains_key(CHECKSUM_KEY),
            "checked, then dropped"
        );
    }

    #[test]
    fn streamed_bytes_equal_the_whole_serialization() {
        // Names out of order, a long metadata table, shapes of several ranks and sizes that
        // leave the header at every remainder mod 8: the streamed file is the same bytes.
        for extra in 0..8 {
            let c = Checkpoint {
                tensors: vec![
                    NamedTensor {
                        name: "model.layers.10.mlp.up_proj.weight".into(),
                        shape: vec![3, 4],
                        data: (0..12).map(|i| i as f32 - 5.5).collect(),
                    },
                    NamedTensor {
                        name: format!("adam.m.{}", "x".repeat(extra)),
                        shape: vec![5],
                        data: vec![1e-30, -0.0, f32::INFINITY, 3.0, f32::NAN],
                    },
                    NamedTensor {
                        name: "bank.state".into(),
                        shape: vec![2, 1, 2],
                        data: vec![0.25; 4],
                    },
                ],
                metadata: [
                    ("step".to_owned(), "12".to_owned()),
                    ("config_fingerprint".to_owned(), "abc\"quoted\"".to_owned()),
                    ("z".to_owned(), "é".repeat(extra)),
                ]
                .into_iter()
                .collect(),
            };
            let mut streamed = Vec::new();
            c.write_to(&mut streamed).unwrap();
            assert_eq!(streamed, reference_bytes(&c), "extra {extra}");
            assert_eq!(c.to_bytes(), streamed);
        }
    }
}
