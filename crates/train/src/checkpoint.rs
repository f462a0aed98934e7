//! Checkpoints in the safetensors format: the model under Hugging Face Llama names, AdamW
//! moments (`optimizer.exp_avg.<name>`, `optimizer.exp_avg_sq.<name>`), every quantizer's
//! amax history, estimates and scales (`quantizers.*`), and in the metadata the step, the
//! data position and the run config. Written to a temporary file and renamed.
//!
//! Integrity: the metadata key `tensor_crc32` holds the CRC-32 of the whole data section
//! (every tensor's bytes in file order), checked on every load, so flipped bytes inside tensor
//! data are refused instead of silently changing the run. Files without the key (written
//! before it existed) still load.
//!
//! safetensors: 8-byte little-endian header length, a JSON header
//! `{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__":
//! {...}}`, then the raw little-endian data.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

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

impl Checkpoint {
    /// The tensor called `name`.
    pub fn get(&self, name: &str) -> Option<&NamedTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The data of tensor `name`, which this model needs with `shape`: the one check that
    /// loading base weights and restoring a run share (a missing tensor or another shape is
    /// named).
    pub fn tensor_of_shape(&self, name: &str, shape: &[usize]) -> Result<&[f32], String> {
        let t = self
            .get(name)
            .ok_or_else(|| format!("tensor '{name}' missing"))?;
        if t.shape != shape {
            return Err(format!(
                "tensor '{name}' has shape {:?}, this model needs {shape:?} (different config?)",
                t.shape
            ));
        }
        Ok(&t.data)
    }

    /// Serializes to safetensors bytes (the data checksum goes into the metadata).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut data = Vec::with_capacity(self.tensors.iter().map(|t| t.data.len() * 4).sum());
        for t in &self.tensors {
            for v in &t.data {
                data.extend_from_slice(&v.to_le_bytes());
            }
        }
        let mut metadata = self.metadata.clone();
        metadata.insert(
            CHECKSUM_KEY.into(),
            format!("{:08x}", crc32fast::hash(&data)),
        );
        let mut header = serde_json::Map::new();
        let mut offset = 0usize;
        for t in &self.tensors {
            let bytes = t.data.len() * 4;
            header.insert(
                t.name.clone(),
                json!({"dtype": "F32", "shape": t.shape, "data_offsets": [offset, offset + bytes]}),
            );
            offset += bytes;
        }
        header.insert("__metadata__".into(), json!(metadata));
        let mut text = serde_json::to_string(&Value::Object(header)).unwrap_or_default();
        while !text.len().is_multiple_of(8) {
            text.push(' ');
        }
        let mut out = Vec::with_capacity(8 + text.len() + offset);
        out.extend_from_slice(&(text.len() as u64).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(&data);
        out
    }

    /// Parses safetensors bytes (F32 tensors only); `path` names the file in errors.
    pub fn from_bytes(path: &str, bytes: &[u8]) -> Result<Self, CheckpointError> {
        let err = |message: String| CheckpointError {
            path: path.to_owned(),
            message,
        };
        if bytes.len() < 8 {
            return Err(err("file is shorter than the 8-byte header length".into()));
        }
        let mut len_bytes = [0u8; 8];
        len_bytes.copy_from_slice(&bytes[..8]);
        let header_len = u64::from_le_bytes(len_bytes) as usize;
        let data_start = 8usize
            .checked_add(header_len)
            .filter(|e| *e <= bytes.len())
            .ok_or_else(|| {
                err(format!(
                    "header length {header_len} runs past the end of the file"
                ))
            })?;
        let header: serde_json::Map<String, Value> = serde_json::from_slice(&bytes[8..data_start])
            .map_err(|e| err(format!("header is not a JSON object: {e}")))?;
        let data = &bytes[data_start..];
        let mut tensors = Vec::new();
        let mut metadata = BTreeMap::new();
        if let Some(m) = header.get("__metadata__").and_then(Value::as_object) {
            for (k, val) in m {
                metadata.insert(k.clone(), val.as_str().unwrap_or_default().to_owned());
            }
        }
        for (name, v) in &header {
            if name == "__metadata__" {
                continue;
            }
            let field = |f: &str| {
                v.get(f)
                    .ok_or_else(|| err(format!("tensor '{name}': missing field '{f}'")))
            };
            if field("dtype")?.as_str() != Some("F32") {
                return Err(err(format!(
                    "tensor '{name}': dtype {} is not F32",
                    field("dtype")?
                )));
            }
            let shape: Vec<usize> = serde_json::from_value(field("shape")?.clone())
                .map_err(|e| err(format!("tensor '{name}': field 'shape': {e}")))?;
            let offsets: [usize; 2] = serde_json::from_value(field("data_offsets")?.clone())
                .map_err(|e| err(format!("tensor '{name}': field 'data_offsets': {e}")))?;
            let bytes_needed = shape.iter().try_fold(4usize, |n, d| n.checked_mul(*d));
            if offsets[1] < offsets[0]
                || offsets[1] > data.len()
                || Some(offsets[1] - offsets[0]) != bytes_needed
            {
                return Err(err(format!(
                    "tensor '{name}': data_offsets {offsets:?} do not hold shape {shape:?} in {} data bytes",
                    data.len()
                )));
            }
            let values = data[offsets[0]..offsets[1]]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            tensors.push((
                offsets[0],
                NamedTensor {
                    name: name.clone(),
                    shape,
                    data: values,
                },
            ));
        }
        // Structure first (errors name the tensor), then the bytes.
        if let Some(stored) = metadata.remove(CHECKSUM_KEY) {
            let computed = format!("{:08x}", crc32fast::hash(data));
            if stored != computed {
                return Err(err(format!(
                    "tensor data checksum mismatch: the file says {CHECKSUM_KEY} {stored}, its data \
                     has {computed} (the file was changed or damaged after it was written)"
                )));
            }
        }
        tensors.sort_by_key(|(o, _)| *o);
        Ok(Checkpoint {
            tensors: tensors.into_iter().map(|(_, t)| t).collect(),
            metadata,
        })
    }

    /// Writes the checkpoint atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        crate::run::write_atomic(path, &self.to_bytes())
    }

    /// Reads a checkpoint file.
    pub fn load(path: &Path) -> Result<Self, CheckpointError> {
        let bytes = std::fs::read(path).map_err(|e| CheckpointError {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::from_bytes(&path.display().to_string(), &bytes)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
                .starts_with("checkpoint ck.safetensors: tensor 'b'"),
            "{e}"
        );
        let e = Checkpoint::from_bytes("ck", &[1, 2]).unwrap_err();
        assert!(e.to_string().contains("shorter"), "{e}");
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
}
