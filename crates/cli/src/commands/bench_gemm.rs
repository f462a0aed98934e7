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
/// no-op on the CPU); `(round, units)`: `train.precision` is bf16, `train.gemm` is not f32.
pub fn gemm_seconds<B: Backend>(
    backend: &B,
    gemms: &[StepGemm],
    sync: &dyn Fn(&B),
    (round, units): (bool, bool),
) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(gemms.len());
    for ((m, n, k, layout), _) in gemms {
        let (a, b) = (
            backend.upload(&filler(m * k, 1))?,
            backend.upload(&filler(k * n, 2))?,
        );
        let c = backend.zeros(m * n)?;
        // As the step's unquantized products run: under `precision = "bf16"` the operands
        // rounded, on the bf16 kernel where the CPU has one and `train.gemm` allows it.
        let spec = MatmulSpec {
            round_bf16: round,
            bf16_units: units,
            ..MatmulSpec::new(*m, *n, *k, *layout)
        };
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

/// What `bench gemm` times for one shape: seconds per call of each path (`None`: the CPU has
/// no bf16 units).
struct GemmRow {
    shape: (usize, usize, usize, Layout),
    calls: usize,
    f32_s: f64,
    f32_quantized_s: f64,
    bf16_quantized_s: Option<f64>,
    bf16_rounded_s: Option<f64>,
    /// The fake-quantized product on each bf16 kernel this CPU has, best first.
    by_kernel: Vec<(&'static str, f64)>,
}

/// `hif8lab bench gemm`: the CPU backend's GEMMs on the step shapes of a preset (and on
/// squares of `sizes`), each on the f32 path and, where the CPU has bf16 units, on the bf16
/// kernel: plain f32 operands; fake-quantized operands (both sides, HiF8, read from the
/// statistics pass's copies as in training) on the f32 path (`Q(x·s)/s` in f32) and on the
/// bf16 kernel (the codes); and operands rounded to bf16 (`train.precision = "bf16"`). Best of `reps` timed calls after one untimed call, all in
/// one run, with the kernel's name.
pub fn bench_gemm(
    preset: &str,
    sets: &[String],
    sizes: &[usize],
    reps: usize,
    json: bool,
) -> Result<()> {
    use hif8lab_engine::cpu::CpuBackend;
    use hif8lab_engine::prelude::*;
    let config = RunConfig::parse(
        &format!("preset '{preset}'"),
        RunConfig::preset_text(preset)?,
        sets,
    )?;
    let kernel = hif8lab_engine::cpu::bf16::detect();
    let cpu = CpuBackend::new();
    // Every kernel this CPU has, each on a backend of its own (tensors and banks are plain
    // memory, shared by all).
    let kernels: Vec<_> = hif8lab_engine::cpu::bf16::available()
        .into_iter()
        .map(|k| (k, CpuBackend::new().with_bf16_kernel(Some(k))))
        .collect();
    let adapter = cpu.info().adapter;
    let scaling = hif8lab_scaling::ScalingConfig::default().plan()?;
    let estimators = scaling.estimators().len();
    let bank = cpu.new_bank(&hif8lab_engine::BankConfig::new(2, scaling))?;
    // Scales that put the fillers' amax (0.05) at the format's target.
    cpu.set_scales(&bank, &vec![15.0 / 0.05; 2 * estimators])?;
    let mut shapes = step_gemms(&config);
    shapes.extend(sizes.iter().map(|&s| ((s, s, s, Layout::NN), 0)));
    let mut rows = Vec::new();
    for &((m, n, k, layout), calls) in &shapes {
        let (a, b) = (
            cpu.upload(&filler(m * k, 1))?,
            cpu.upload(&filler(k * n, 2))?,
        );
        let c = cpu.zeros(m * n)?;
        let time_on = |cpu: &CpuBackend, spec: &MatmulSpec| -> Result<f64> {
            // As in a training step: the statistics pass leaves each quantized operand's
            // fake-quantized copy, which the products then read.
            if spec.fuse_a.is_some() {
                cpu.quant_stats(&a, &bank, 0)?;
                cpu.quant_stats(&b, &bank, 1)?;
            }
            cpu.matmul(&a, &b, &c, spec, Some(&bank))?;
            let mut best = f64::INFINITY;
            for _ in 0..reps.max(1) {
                let t = Instant::now();
                cpu.matmul(&a, &b, &c, spec, Some(&bank))?;
                best = best.min(t.elapsed().as_secs_f64());
            }
            Ok(best)
        };
        let time = |spec: &MatmulSpec| time_on(&cpu, spec);
        let plain = MatmulSpec::new(m, n, k, layout);
        let quantized = MatmulSpec {
            fuse_a: Some(0),
            fuse_b: Some(1),
            ..plain
        };
        let units = |spec: MatmulSpec| MatmulSpec {
            bf16_units: true,
            ..spec
        };
        let rounded = MatmulSpec {
            round_bf16: true,
            ..plain
        };
        let by_kernel: Vec<(&'static str, f64)> = kernels
            .iter()
            .map(|(k, on)| Ok((k.name(), time_on(on, &units(quantized))?)))
            .collect::<Result<_>>()?;
        rows.push(GemmRow {
            shape: (m, n, k, layout),
            calls,
            f32_s: time(&plain)?,
            f32_quantized_s: time(&quantized)?,
            // The run's kernel is one of them: its time, not a second measurement.
            bf16_quantized_s: kernel.and_then(|kernel| {
                by_kernel
                    .iter()
                    .find(|(name, _)| *name == kernel.name())
                    .map(|(_, s)| *s)
            }),
            bf16_rounded_s: kernel.map(|_| time(&units(rounded))).transpose()?,
            by_kernel,
        });
    }
    let name = kernel.map_or("none", |k| k.name());
    let threads = hif8lab_engine::cpu::threads();
    let flops = |r: &GemmRow| 2.0 * (r.shape.0 * r.shape.1 * r.shape.2) as f64;
    let rate = |r: &GemmRow, s: f64| flops(r) / s.max(1e-12) / 1e9;
    // The step's shapes together: FLOPs over the summed time of their calls.
    let step = |pick: &dyn Fn(&GemmRow) -> Option<f64>| -> Option<f64> {
        let mut total = (0.0, 0.0);
        for r in rows.iter().filter(|r| r.calls > 0) {
            total.0 += flops(r) * r.calls as f64;
            total.1 += pick(r)? * r.calls as f64;
        }
        Some(total.0 / total.1.max(1e-12) / 1e9)
    };
    let step_f32 = step(&|r| Some(r.f32_s));
    let step_f32_q = step(&|r| Some(r.f32_quantized_s));
    let step_bf16_q = step(&|r| r.bf16_quantized_s);
    let step_bf16_r = step(&|r| r.bf16_rounded_s);
    let opt = |v: Option<f64>| v.map_or("null".to_owned(), |v| format!("{v:.2}"));
    if json {
        let list: Vec<String> = rows
            .iter()
            .map(|r| {
                let (m, n, k, layout) = r.shape;
                format!(
                    "{{\"m\":{m},\"n\":{n},\"k\":{k},\"layout\":\"{layout:?}\",\"calls_per_step\":{},\"gflops_f32\":{:.2},\"gflops_f32_quantized\":{:.2},\"gflops_bf16_quantized\":{},\"gflops_bf16_rounded\":{},\"gflops_bf16_quantized_by_kernel\":{{{}}}}}",
                    r.calls,
                    rate(r, r.f32_s),
                    rate(r, r.f32_quantized_s),
                    opt(r.bf16_quantized_s.map(|s| rate(r, s))),
                    opt(r.bf16_rounded_s.map(|s| rate(r, s))),
                    r.by_kernel
                        .iter()
                        .map(|(name, s)| format!("{name:?}:{:.2}", rate(r, *s)))
                        .collect::<Vec<_>>()
                        .join(","),
                )
            })
            .collect();
        let by_kernel: Vec<String> = kernels
            .iter()
            .enumerate()
            .map(|(i, (k, _))| format!("{:?}:{}", k.name(), opt(step(&|r| Some(r.by_kernel[i].1)))))
            .collect();
        crate::output::outln!(
            "{{\"cpu\":{adapter:?},\"threads\":{threads},\"gemm_kernel\":{name:?},\"preset\":{preset:?},\"step_gflops_f32\":{},\"step_gflops_f32_quantized\":{},\"step_gflops_bf16_quantized\":{},\"step_gflops_bf16_rounded\":{},\"step_gflops_bf16_quantized_by_kernel\":{{{}}},\"shapes\":[{}]}}",
            opt(step_f32),
            opt(step_f32_q),
            opt(step_bf16_q),
            opt(step_bf16_r),
            by_kernel.join(","),
            list.join(",")
        );
        return Ok(());
    }
    crate::output::outln!(
        "bench gemm on '{adapter}', {threads} threads, bf16 kernel: {name}; the step shapes of preset '{preset}' (GFLOP/s, best of {reps})"
    );
    crate::output::outln!(
        "  {:<18} {:<4} {:>6} {:>9} {:>11} {:>11} {:>11}",
        "m×n×k",
        "lay",
        "calls",
        "f32",
        "f32 quant",
        "bf16 quant",
        "bf16 round"
    );
    let cell = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
    for r in &rows {
        let (m, n, k, layout) = r.shape;
        crate::output::outln!(
            "  {:<18} {:<4} {:>6} {:>9.1} {:>11.1} {:>11} {:>11}",
            format!("{m}×{n}×{k}"),
            format!("{layout:?}"),
            r.calls,
            rate(r, r.f32_s),
            rate(r, r.f32_quantized_s),
            cell(r.bf16_quantized_s.map(|s| rate(r, s))),
            cell(r.bf16_rounded_s.map(|s| rate(r, s))),
        );
    }
    crate::output::outln!(
        "  the step's shapes together: f32 {}, f32 quantized {}, bf16 quantized {}, bf16 rounded {} GFLOP/s",
        cell(step_f32),
        cell(step_f32_q),
        cell(step_bf16_q),
        cell(step_bf16_r)
    );
    if kernels.len() > 1 {
        // The quantized products on each kernel, side by side.
        for (i, (k, _)) in kernels.iter().enumerate() {
            let per_shape: Vec<String> = rows
                .iter()
                .map(|r| format!("{:.0}", rate(r, r.by_kernel[i].1)))
                .collect();
            crate::output::outln!(
                "  bf16 quantized on {:<12} step {} GFLOP/s; per shape above: {}",
                k.name(),
                cell(step(&|r| Some(r.by_kernel[i].1))),
                per_shape.join(" ")
            );
        }
    }
    if kernel.is_none() {
        crate::output::outln!(
            "  (this CPU has no bf16 dot-product units (AMX or AVX512-BF16): its products run in f32)"
        );
    }
    Ok(())
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
