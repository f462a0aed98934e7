//! The lessons' pretrained base, shipped with the program (`assets/lessons/base.safetensors`):
//! the weights that pretraining the `grid-lesson` base on the native CPU backend gives, bit
//! for bit, with that base's probe scores, so a lesson (in the browser above all, where
//! pretraining takes 20–30 s) starts from it at once. (The browser's own pretraining gives
//! other last bits: its matrix products run `gemm-f32`'s simd128 kernels, without the fused
//! multiply-adds of the native ones; its probe scores came out the same.) The file states the pretraining configuration it came from: it is used
//! only for a grid whose pretraining is exactly that one (a changed preset pretrains).
//!
//! `hif8lab lesson base --out FILE` writes it; a test pretrains it again and checks the
//! shipped bits.

use std::sync::Arc;

use crate::grid::GridConfig;
use hif8lab_train::config::RunConfig;
use hif8lab_train::models::checkpoint::Checkpoint;
use hif8lab_train::trainer::ProbeScores;

/// Where the shipped base lives in the source tree.
pub const FILE: &str = "assets/lessons/base.safetensors";

/// The shipped file's bytes (compiled into native builds; the browser fetches the file from
/// beside its page, `lessons/base.safetensors`, and hands it to [`shipped_from`]).
#[cfg(not(target_arch = "wasm32"))]
static BYTES: &[u8] = include_bytes!("../../../../assets/lessons/base.safetensors");

/// Metadata key: the pretraining configuration (JSON of [`RunConfig`]).
const CONFIG_KEY: &str = "hif8lab.lesson_base.config";
/// Metadata key: the base's probe scores (JSON of [`ProbeScores`]).
const PROBES_KEY: &str = "hif8lab.lesson_base.probes";
/// Metadata key: the kind of machine it was pretrained on ([`machine`]).
const MACHINE_KEY: &str = "hif8lab.lesson_base.machine";

/// The kind of machine, as far as the CPU backend's bits depend on it: the architecture and
/// whether the matrix products run fused multiply-adds (`gemm-f32` picks its kernels at run
/// time). Pretraining on machines of one kind gives the same bits.
pub fn machine() -> String {
    #[cfg(target_arch = "x86_64")]
    let fma =
        std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2");
    #[cfg(target_arch = "aarch64")]
    let fma = true;
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let fma = false;
    format!(
        "{} ({})",
        std::env::consts::ARCH,
        if fma { "fma" } else { "no fma" }
    )
}

/// A pretrained lesson base: its weights and its probe scores.
#[derive(Clone, Debug)]
pub struct LessonBase {
    /// The weights (no optimizer state: a lesson's runs start their optimizer fresh).
    pub weights: Arc<Checkpoint>,
    /// The base's probe scores after pretraining.
    pub probes: ProbeScores,
}

impl LessonBase {
    /// A fingerprint of the weights' bits (FNV-1a, 64 bits, over names, shapes and values, by
    /// name): equal fingerprints, equal bits.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.weights)
    }

    /// The file's checkpoint: the weights with the pretraining configuration and the probe
    /// scores as metadata.
    pub fn to_checkpoint(&self, config: &RunConfig) -> Checkpoint {
        let mut ck = (*self.weights).clone();
        ck.metadata.insert(CONFIG_KEY.into(), config_key(config));
        ck.metadata.insert(MACHINE_KEY.into(), machine());
        ck.metadata.insert(
            PROBES_KEY.into(),
            serde_json::to_string(&self.probes).unwrap_or_default(),
        );
        ck
    }
}

/// The FNV-1a fingerprint of a checkpoint's tensors (see [`LessonBase::fingerprint`]).
pub fn fingerprint(ck: &Checkpoint) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    let mut tensors: Vec<_> = ck.tensors.iter().collect();
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    for t in tensors {
        eat(t.name.as_bytes());
        for d in &t.shape {
            eat(&(*d as u64).to_le_bytes());
        }
        for v in &t.data {
            eat(&v.to_bits().to_le_bytes());
        }
    }
    format!("{h:016x}")
}

fn config_key(config: &RunConfig) -> String {
    serde_json::to_string(config).unwrap_or_default()
}

/// The kind of machine the shipped base was pretrained on ([`machine`]).
#[cfg(not(target_arch = "wasm32"))]
pub fn shipped_machine() -> Option<String> {
    Checkpoint::from_bytes(FILE, BYTES)
        .ok()?
        .metadata
        .remove(MACHINE_KEY)
}

/// Reads a lesson base file (`path` names it in errors): the base and the pretraining
/// configuration it states.
pub fn parse(path: &str, bytes: &[u8]) -> Result<(LessonBase, RunConfig), super::LessonDataError> {
    let err = |m: String| super::LessonDataError::new(path, m);
    let mut ck = Checkpoint::from_bytes(path, bytes).map_err(|e| err(e.to_string()))?;
    let field = |key: &str| {
        ck.metadata
            .get(key)
            .cloned()
            .ok_or_else(|| err(format!("{path}: metadata field '{key}' missing")))
    };
    let config: RunConfig = serde_json::from_str(&field(CONFIG_KEY)?)
        .map_err(|e| err(format!("{path}: metadata field '{CONFIG_KEY}': {e}")))?;
    let probes: ProbeScores = serde_json::from_str(&field(PROBES_KEY)?)
        .map_err(|e| err(format!("{path}: metadata field '{PROBES_KEY}': {e}")))?;
    ck.metadata.clear();
    Ok((
        LessonBase {
            weights: Arc::new(ck),
            probes,
        },
        config,
    ))
}

/// The shipped file, as shipped.
#[cfg(not(target_arch = "wasm32"))]
pub fn shipped_bytes() -> &'static [u8] {
    BYTES
}

/// The shipped base, when it was pretrained with exactly `grid`'s pretraining
/// configuration; `None` otherwise (the caller pretrains).
#[cfg(not(target_arch = "wasm32"))]
pub fn shipped(grid: &GridConfig) -> Option<LessonBase> {
    shipped_from(BYTES, grid)
}

/// The base in a lesson base file's `bytes`, when it was pretrained with exactly `grid`'s
/// pretraining configuration.
pub fn shipped_from(bytes: &[u8], grid: &GridConfig) -> Option<LessonBase> {
    let (base, config) = parse(FILE, bytes).ok()?;
    (config_key(&config) == config_key(&grid.pretrain_config())).then_some(base)
}

/// Pretrains `grid`'s base in memory on `backend` through the run driver, probes scored
/// after the last step — what the app does when nothing is shipped, and what the shipped
/// file holds.
#[cfg(not(target_arch = "wasm32"))]
pub fn pretrain<B: hif8lab_engine::Backend>(
    backend: B,
    grid: &GridConfig,
) -> Result<LessonBase, hif8lab_train::trainer::TrainError> {
    use hif8lab_train::driver::{Memory, Schedule};
    use hif8lab_train::open::open_in_memory;
    use hif8lab_train::trainer::TrainError;
    let schedule = Schedule {
        probes: Some(Arc::new(grid.probes())),
        keep_weights: true,
        ..Default::default()
    };
    let config = grid.pretrain_config();
    let mut driver = open_in_memory(backend, config, None, schedule)?;
    let mut sink = Memory::default();
    driver.run(&mut sink, &|| false)?;
    let weights = sink
        .weights
        .ok_or_else(|| TrainError::Checkpoint("pretraining gave no weights".into()))?;
    let probes = sink
        .probes
        .pop()
        .ok_or_else(|| TrainError::Checkpoint("pretraining scored no probes".into()))?;
    Ok(LessonBase { weights, probes })
}
