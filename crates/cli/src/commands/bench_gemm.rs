//! The GEMMs of one training step, timed alone: what `bench train` compares a step with
//! (`gemm_fraction`: the share of a step's time its own GEMM shapes would take on their own,
//! so 1.0 means everything around the GEMMs is free).

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Result;
use hif8lab_engine::{Backend, Layout, MatmulSpec};
use hif8lab_train::RunConfig;

/// One GEMM shape of a step: (m, n, k, layout) and how often a step runs it.
pub type StepGemm = ((usize, usize, usize, Layout), usize);

/// The GEMMs of one optimizer step of `config` (every micro-batch): per linear layer
/// (cin → cout, over the micro-batch's rows n) the forward `y = x·Wᵀ` (n × cout × cin, NT),
/// the input gradient `dx = dy·W` (n × cin × cout, NN) and the weight gradient
/// `dW += dyᵀ·x` (cout × cin × n, TN), for the q, k, v, o, gate, up and down projections of
/// every block and the output head. Attention's own products (scores and values) are not
/// model FLOPs and are left out.
pub fn step_gemms(config: &RunConfig) -> Vec<StepGemm> {
    let m = &config.model;
    let n = config.train.batch * m.context;
    let (d, ff, v) = (m.d_model, m.d_ff, m.vocab);
    let (hd, kvd) = (m.heads * m.head_dim(), m.kv_heads * m.head_dim());
    let mut count: BTreeMap<(usize, usize, usize, u8), usize> = BTreeMap::new();
    let per_layer = [
        (d, hd),
        (d, kvd),
        (d, kvd),
        (hd, d),
        (d, ff),
        (d, ff),
        (ff, d),
    ];
    let linears = per_layer
        .iter()
        .flat_map(|l| std::iter::repeat_n(*l, m.layers))
        .chain([(d, v)]);
    for (cin, cout) in linears {
        for key in [(n, cout, cin, 0), (n, cin, cout, 1), (cout, cin, n, 2)] {
            *count.entry(key).or_default() += config.train.grad_accum.max(1);
        }
    }
    count
        .into_iter()
        .map(|((m, n, k, l), c)| {
            let layout = [Layout::NT, Layout::NN, Layout::TN][usize::from(l)];
            ((m, n, k, layout), c)
        })
        .collect()
}

/// FLOPs of `gemms` (2·m·n·k each).
pub fn gemm_flops(gemms: &[StepGemm]) -> f64 {
    gemms
        .iter()
        .map(|((m, n, k, _), c)| 2.0 * (*m * *n * *k) as f64 * *c as f64)
        .sum()
}

/// Seconds each GEMM shape of `gemms` takes alone on `backend`, one call (best of 3 after
/// one untimed run); the step's total is [`step_seconds`]. `sync` waits for the device (a
/// no-op on the CPU).
pub fn gemm_seconds<B: Backend>(
    backend: &B,
    gemms: &[StepGemm],
    sync: &dyn Fn(&B),
) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(gemms.len());
    for ((m, n, k, layout), _) in gemms {
        let (a, b) = (
            backend.upload(&filler(m * k, 1))?,
            backend.upload(&filler(k * n, 2))?,
        );
        let c = backend.zeros(m * n)?;
        let spec = MatmulSpec::new(*m, *n, *k, *layout);
        let mut best = f64::INFINITY;
        for rep in 0..4 {
            let t = Instant::now();
            backend.matmul(&a, &b, &c, &spec, None)?;
            sync(backend);
            if rep > 0 {
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
        out.push(best);
    }
    Ok(out)
}

/// Seconds a step's GEMMs take alone: each shape's [`gemm_seconds`] times its calls.
pub fn step_seconds(gemms: &[StepGemm], seconds: &[f64]) -> f64 {
    gemms
        .iter()
        .zip(seconds)
        .map(|((_, c), s)| s * *c as f64)
        .sum()
}

/// GFLOP/s of one m×n×k product that took `seconds`.
fn gflops(m: usize, n: usize, k: usize, seconds: f64) -> f64 {
    2.0 * (m * n * k) as f64 / seconds.max(1e-12) / 1e9
}

/// One line per shape: m×n×k, layout, calls per step, ms per call, GFLOP/s and share of
/// the step's GEMM time.
pub fn shape_table(gemms: &[StepGemm], seconds: &[f64]) -> Vec<String> {
    let total = step_seconds(gemms, seconds).max(1e-12);
    let mut lines = vec![
        "  the step's GEMM shapes alone:  m×n×k  layout  calls/step  ms/call  GFLOP/s  share"
            .to_owned(),
    ];
    for (((m, n, k, layout), calls), s) in gemms.iter().zip(seconds) {
        lines.push(format!(
            "    {:<18} {:<4} {calls:>6} {:>9.3} {:>8.1} {:>6.1} %",
            format!("{m}×{n}×{k}"),
            format!("{layout:?}"),
            s * 1e3,
            gflops(*m, *n, *k, *s),
            100.0 * s * *calls as f64 / total
        ));
    }
    lines
}

/// The same as JSON objects.
pub fn shape_json(gemms: &[StepGemm], seconds: &[f64]) -> String {
    let rows: Vec<String> = gemms
        .iter()
        .zip(seconds)
        .map(|(((m, n, k, layout), calls), s)| {
            format!(
                "{{\"m\":{m},\"n\":{n},\"k\":{k},\"layout\":\"{layout:?}\",\"calls_per_step\":{calls},\"ms_per_call\":{:.4},\"gflops\":{:.2}}}",
                s * 1e3,
                gflops(*m, *n, *k, *s)
            )
        })
        .collect();
    format!("[{}]", rows.join(","))
}

/// Small values of both signs (never denormal).
fn filler(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = hif8lab_format::hash_u32(seed, i as u32);
            ((h >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * 0.1
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_has_three_gemms_per_linear_and_six_flops_per_matrix_parameter_per_token() {
        let config = RunConfig::parse(
            "smoke",
            RunConfig::preset_text("smoke").unwrap(),
            &["model.tie_embeddings=true".into()],
        )
        .unwrap();
        let g = step_gemms(&config);
        let calls: usize = g.iter().map(|(_, c)| c).sum();
        assert_eq!(calls, 3 * (7 * config.model.layers + 1));
        // Every weight matrix of the step's linears (the tied head included) moves 6 FLOPs
        // per parameter per token: the model-FLOPs rule, without norms.
        let m = &config.model;
        let (hd, kvd) = (m.heads * m.head_dim(), m.kv_heads * m.head_dim());
        let matrix_params = m.layers * (m.d_model * (2 * hd + 2 * kvd) + 3 * m.d_model * m.d_ff)
            + m.vocab * m.d_model;
        let tokens = config.train.batch * m.context * config.train.grad_accum;
        assert_eq!(gemm_flops(&g), 6.0 * (matrix_params * tokens) as f64);
    }
}
