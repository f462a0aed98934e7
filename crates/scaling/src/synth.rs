//! Synthetic amax traces (`hif8lab trace synth`): deterministic patterns that show how each
//! estimator reacts, for lessons and tests.

use std::fmt;
use std::str::FromStr;

use crate::import::AmaxSeries;

/// The shape of a synthetic amax sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Steady amax with rare isolated spikes (×3–8 for one call).
    Spike,
    /// amax growing linearly ×10 over the run.
    Ramp,
    /// amax oscillating ±60 % with a 37-call period.
    Oscillate,
    /// amax jumping ×4 halfway.
    Step,
    /// Log-normal noise around a constant.
    Noise,
}

impl Pattern {
    /// All patterns.
    pub const ALL: [Pattern; 5] = [
        Pattern::Spike,
        Pattern::Ramp,
        Pattern::Oscillate,
        Pattern::Step,
        Pattern::Noise,
    ];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Spike => "spike",
            Pattern::Ramp => "ramp",
            Pattern::Oscillate => "oscillate",
            Pattern::Step => "step",
            Pattern::Noise => "noise",
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Pattern {
    type Err = hif8lab_format::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Pattern::ALL
            .into_iter()
            .find(|p| p.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| hif8lab_format::UnknownName {
                kind: "pattern",
                given: s.to_owned(),
                expected: Pattern::ALL.map(Pattern::name).join(", "),
            })
    }
}

/// A small deterministic generator (splitmix64).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// Seeds the generator.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform integer below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Layers of a synthetic trace and their base amax (three MLP inputs of one block).
const LAYERS: [(&str, f64); 3] = [
    ("block1.gate", 2.0),
    ("block1.up", 2.0),
    ("block1.down", 6.0),
];

/// Generates `calls` calls of the pattern for each synthetic layer (role `A`).
pub fn synth(pattern: Pattern, calls: usize, seed: u64) -> Vec<AmaxSeries> {
    let mut rng = SplitMix64::new(seed);
    LAYERS
        .iter()
        .enumerate()
        .map(|(li, (layer, base))| {
            let mut next_spike = 20 + (rng.next_u64() % 60) as usize;
            let amax = (0..calls)
                .map(|t| {
                    let jitter = 1.0 + 0.03 * rng.normal();
                    let progress = t as f64 / calls.max(1) as f64;
                    let shape = match pattern {
                        Pattern::Spike => {
                            if t == next_spike {
                                next_spike += 40 + (rng.next_u64() % 80) as usize;
                                3.0 + 5.0 * rng.uniform()
                            } else {
                                1.0
                            }
                        }
                        Pattern::Ramp => 1.0 + 9.0 * progress,
                        Pattern::Oscillate => {
                            let phase = li as f64 * 1.3;
                            1.0 + 0.6 * (std::f64::consts::TAU * t as f64 / 37.0 + phase).sin()
                        }
                        Pattern::Step => {
                            if t >= calls / 2 {
                                4.0
                            } else {
                                1.0
                            }
                        }
                        Pattern::Noise => (0.5 * rng.normal()).exp(),
                    };
                    (base * shape * jitter).max(1e-6) as f32
                })
                .collect();
            AmaxSeries {
                steps: (0..calls as u64).collect(),
                amax,
                ..AmaxSeries::new(format!("{layer}.A"))
            }
        })
        .collect()
}

/// Writes series as CSV `step,layer,role,amax` (the importer's format), calls interleaved
/// by step. Series names must end in `.ROLE`.
pub fn to_csv(series: &[AmaxSeries]) -> String {
    crate::import::series_to_csv(series)
}
