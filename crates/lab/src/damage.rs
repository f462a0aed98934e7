//! Damage of a model's quantized MLP weights at a known size: the one function the probe
//! calibration (`hif8lab calibrate-probe`) and a grid's damaged base (`[base] perturb`) both
//! apply, so a dose the calibration measured is the dose a perturbed run starts from.
//!
//! - `noise:F` — Gaussian noise of F × the tensor's RMS added to every element (seeded);
//! - `hif8:K` — each tensor fake-quantized to HiF8 per tensor with its scale K× too large.

use hif8lab_format::{FakeQuant, Format, Overflow, hif8};
use hif8lab_scaling::synth::SplitMix64;
use hif8lab_train::TrainError;
use hif8lab_train::config::{ModelConfig, QatConfig};
use hif8lab_train::models::checkpoint::Checkpoint;
use serde::{Deserialize, Serialize};

use crate::stats::exact::seed_for;

/// One damage of the base's quantized MLP weights.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Perturbation {
    /// The undamaged base.
    None,
    /// Gaussian noise of this fraction of each tensor's RMS.
    Noise(f64),
    /// HiF8 per-tensor fake quantization with the scale this many times too large.
    Tiers(f64),
}

impl Perturbation {
    /// The name records and reports use (`none`, `noise:0.01`, `hif8:64`).
    pub fn name(self) -> String {
        match self {
            Perturbation::None => "none".into(),
            Perturbation::Noise(f) => format!("noise:{f}"),
            Perturbation::Tiers(k) => format!("hif8:{k}"),
        }
    }

    /// The family (`noise`, `hif8`; `none` for the base).
    pub fn family(self) -> &'static str {
        match self {
            Perturbation::None => "none",
            Perturbation::Noise(_) => "noise",
            Perturbation::Tiers(_) => "hif8",
        }
    }

    /// Whether the damage draws random numbers (a seed changes it).
    pub fn seeded(self) -> bool {
        matches!(self, Perturbation::Noise(_))
    }

    /// Parses a comma-separated list of sizes (`noise:0.01,hif8:64`); the error names the
    /// entry and what is accepted.
    pub fn parse_list(text: &str) -> Result<Vec<Perturbation>, hif8lab_format::UnknownName> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse())
            .collect()
    }
}

impl std::str::FromStr for Perturbation {
    type Err = hif8lab_format::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            hif8lab_format::UnknownName {
            kind: "damage size",
            given: s.to_owned(),
            expected: "noise:F (0 < F ≤ 10: Gaussian noise of F × each tensor's RMS), hif8:K (1 ≤ K ≤ 1e6: HiF8 with the scale K× too large)".into(),
        }
        };
        if s == "none" {
            return Ok(Perturbation::None);
        }
        let (kind, value) = s.split_once(':').ok_or_else(bad)?;
        let v: f64 = value.parse().map_err(|_| bad())?;
        match kind {
            "noise" if v > 0.0 && v <= 10.0 => Ok(Perturbation::Noise(v)),
            "hif8" if (1.0..=1e6).contains(&v) => Ok(Perturbation::Tiers(v)),
            _ => Err(bad()),
        }
    }
}

/// What a damage did to the weights.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Tensors changed.
    pub tensors: usize,
    /// Elements in them.
    pub elements: usize,
    /// ‖W′ − W‖ / ‖W‖ over all of them (the damage's size, measured).
    pub relative_rms: f64,
    /// Elements whose scaled value reached HiF8's overflow threshold (clamped to its largest
    /// finite value); 0 for noise.
    pub clipped: usize,
}

/// The names of the tensors a damage touches: gate, up and down of the blocks QAT quantizes
/// by default ([`QatConfig::blocks_for`]).
pub fn damaged_tensors(model: &ModelConfig) -> Vec<String> {
    let qat = QatConfig::default();
    qat.blocks_for(model.layers)
        .into_iter()
        .flat_map(|b| {
            ["gate_proj", "up_proj", "down_proj"]
                .map(|m| format!("model.layers.{b}.mlp.{m}.weight"))
        })
        .collect()
}

/// `weights` with `p` applied to [`damaged_tensors`] (seed `seed` for noise; HiF8's scale
/// from `target`, the scaled amax of an exact estimate), and what changed.
pub fn perturb(
    weights: &Checkpoint,
    model: &ModelConfig,
    p: Perturbation,
    target: f32,
    seed: u64,
) -> Result<(Checkpoint, Change), TrainError> {
    let mut out = weights.clone();
    let mut change = Change::default();
    if p == Perturbation::None {
        return Ok((out, change));
    }
    let (mut diff2, mut norm2) = (0.0f64, 0.0f64);
    for name in damaged_tensors(model) {
        let t = out
            .tensors
            .iter_mut()
            .find(|t| t.name == name)
            .ok_or_else(|| TrainError::Setting {
                setting: "base.model".into(),
                message: format!("no tensor {name} to perturb"),
            })?;
        let n = t.data.len().max(1);
        let rms = (t.data.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / n as f64).sqrt();
        let before = t.data.clone();
        match p {
            Perturbation::None => {}
            Perturbation::Noise(f) => {
                let mut rng = SplitMix64::new(seed_for(seed, &name));
                for v in &mut t.data {
                    *v += (f * rms * rng.normal()) as f32;
                }
            }
            Perturbation::Tiers(k) => {
                let amax = t.data.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                if amax > 0.0 {
                    let scale = (f64::from(target) * k / f64::from(amax)) as f32;
                    let q = FakeQuant::new(Format::HiF8).with_overflow(Overflow::Saturate);
                    change.clipped += t
                        .data
                        .iter()
                        .filter(|v| (**v * scale).abs() >= hif8::OVERFLOW_THRESHOLD)
                        .count();
                    q.qdq_slice(&mut t.data, scale);
                }
            }
        }
        for (a, b) in before.iter().zip(&t.data) {
            diff2 += f64::from(b - a).powi(2);
            norm2 += f64::from(*a).powi(2);
        }
        change.tensors += 1;
        change.elements += t.data.len();
    }
    change.relative_rms = if norm2 > 0.0 {
        (diff2 / norm2).sqrt()
    } else {
        0.0
    };
    Ok((out, change))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use hif8lab_train::models::checkpoint::NamedTensor;

    fn model() -> ModelConfig {
        ModelConfig {
            vocab: 16,
            d_model: 8,
            layers: 4,
            heads: 2,
            kv_heads: 1,
            d_ff: 16,
            context: 8,
            norm_eps: 1e-5,
            rope_theta: 10000.0,
            tie_embeddings: true,
            max_positions: None,
            rope_scaling: None,
        }
    }

    fn weights(m: &ModelConfig) -> Checkpoint {
        let mut rng = SplitMix64::new(7);
        Checkpoint {
            tensors: hif8lab_train::model::param_specs(m)
                .into_iter()
                .map(|(name, shape, _)| NamedTensor {
                    data: (0..shape.iter().product::<usize>())
                        .map(|_| rng.normal() as f32 * 0.02)
                        .collect(),
                    name,
                    shape,
                })
                .collect(),
            metadata: Default::default(),
        }
    }

    #[test]
    fn sizes_parse_and_bad_ones_are_named() {
        let l = Perturbation::parse_list("noise:0.003,noise:0.01,noise:0.03,noise:0.1,noise:0.3,hif8:1,hif8:64,hif8:1024,hif8:8192,hif8:65536").unwrap();
        assert_eq!(l.len(), 10);
        assert_eq!(l[1], Perturbation::Noise(0.01));
        assert_eq!(l[6].name(), "hif8:64");
        for bad in ["noise", "noise:0", "noise:x", "hif8:0.5", "blur:1"] {
            let e = bad.parse::<Perturbation>().unwrap_err().to_string();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
    }

    #[test]
    fn noise_has_the_size_asked_and_touches_only_the_mlp_of_quantized_blocks() {
        let m = model();
        let w = weights(&m);
        let (out, change) = perturb(&w, &m, Perturbation::Noise(0.05), 15.0, 3).unwrap();
        let names = damaged_tensors(&m);
        assert_eq!(change.tensors, names.len());
        assert!(
            (change.relative_rms - 0.05).abs() < 0.01,
            "{}",
            change.relative_rms
        );
        for (a, b) in w.tensors.iter().zip(&out.tensors) {
            assert_eq!(a.data != b.data, names.contains(&a.name), "{}", a.name);
        }
        // Another seed, another draw; the same seed, the same weights.
        let (again, _) = perturb(&w, &m, Perturbation::Noise(0.05), 15.0, 3).unwrap();
        let (other, _) = perturb(&w, &m, Perturbation::Noise(0.05), 15.0, 4).unwrap();
        assert_eq!(again, out);
        assert_ne!(other, out);
    }

    #[test]
    fn a_scale_too_large_moves_values_into_coarser_tiers_then_clips() {
        let m = model();
        let w = weights(&m);
        let sizes: Vec<Change> = [1.0, 64.0, 1024.0, 8192.0]
            .iter()
            .map(|k| perturb(&w, &m, Perturbation::Tiers(*k), 15.0, 0).unwrap().1)
            .collect();
        for pair in sizes.windows(2) {
            assert!(pair[1].relative_rms > pair[0].relative_rms, "{sizes:?}");
        }
        assert_eq!(sizes[2].clipped, 0);
        assert!(
            sizes[3].clipped > 0,
            "8192 × 15 is beyond the overflow threshold"
        );
    }
}
