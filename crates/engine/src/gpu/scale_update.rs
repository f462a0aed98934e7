//! `gpu::scale_update`: delayed scaling of many quantizers on the GPU, twin of
//! `hif8lab_scaling::QuantizerState` (`shaders/scale_update.wgsl`).

use bytemuck::{Pod, Zeroable};
use hif8lab_scaling::EstimatorSpec;

/// The WGSL of the kernel.
pub const WGSL: &str = include_str!("../../../../shaders/scale_update.wgsl");
/// Invocations per workgroup.
pub const WG: u32 = 64;

/// Uniform parameters; keep in sync with `UpdateParams` in `shaders/scale_update.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct UpdateParams {
    /// First quantizer.
    pub first: u32,
    /// Quantizers to update.
    pub count: u32,
    /// Estimators per quantizer.
    pub k: u32,
    /// History capacity per quantizer.
    pub cap: u32,
    /// Scaling target.
    pub target: f32,
    /// 2^margin.
    pub margin_scale: f32,
    /// 0 = JIT, 1 = TE-style.
    pub cold_start: u32,
    /// 0 = update, 1 = reset.
    pub mode: u32,
}

/// One estimator as the kernel sees it; keep in sync with `EstimatorDesc` in the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct EstimatorDesc {
    /// 0 most_recent, 1 max_window, 2 mean_window, 3 ema, 4 holt, 5 current.
    pub kind: u32,
    /// Window length (windowed kinds).
    pub n: u32,
    /// ema / holt alpha.
    pub alpha: f32,
    /// holt beta.
    pub beta: f32,
    /// holt damping.
    pub damping: f32,
    /// Padding to 32 bytes.
    pub _pad: [u32; 3],
}

impl EstimatorDesc {
    /// The descriptor of a resolved estimator spec.
    pub fn from_spec(spec: &EstimatorSpec, window: usize) -> Self {
        let base = EstimatorDesc::default();
        match spec.resolve(window) {
            EstimatorSpec::MostRecent => EstimatorDesc { kind: 0, ..base },
            EstimatorSpec::MaxWindow(n) => EstimatorDesc {
                kind: 1,
                n: n.unwrap_or(window) as u32,
                ..base
            },
            EstimatorSpec::MeanWindow(n) => EstimatorDesc {
                kind: 2,
                n: n.unwrap_or(window) as u32,
                ..base
            },
            EstimatorSpec::Ema(alpha) => EstimatorDesc {
                kind: 3,
                alpha,
                ..base
            },
            EstimatorSpec::Holt(alpha, beta, damping) => EstimatorDesc {
                kind: 4,
                alpha,
                beta,
                damping,
                ..base
            },
            EstimatorSpec::Current => EstimatorDesc { kind: 5, ..base },
        }
    }
}
