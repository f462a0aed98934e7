//! The one random generator of the crate: splitmix64 (deterministic, portable), the scaling
//! crate's, so a corpus, a probe set, an initialization, a sampler and a bootstrap drawn from
//! one seed are the same on every machine and in the browser.

pub use hif8lab_scaling::synth::SplitMix64 as Rng;
