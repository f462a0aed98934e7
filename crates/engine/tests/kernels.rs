//! GPU kernels against the CPU oracle on a real adapter (lavapipe in CI).
//!
//! Each test body is written once, generic over [`Backend`], and run on both backends.
//! Without an adapter these tests fail when `HIF8LAB_REQUIRE_GPU=1` (set by scripts/test.sh,
//! hence in CI); elsewhere they are skipped with a loud line.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::gpu::GpuBackend;
use hif8lab_engine::prelude::*;
use hif8lab_engine::{Backend, BankConfig, BankSnapshot, EngineError, Layout, MatmulSpec};
use hif8lab_format::{Format, Overflow, Rounding};
use hif8lab_scaling::{ColdStart, EstimatorSpec, QuantizerState, ScalingConfig};

/// Matmul tolerance: |gpu − cpu| ≤ MATMUL_ATOL + MATMUL_RTOL·|cpu| (inputs in [−1, 1]).
const MATMUL_ATOL: f32 = 5e-4;
/// See [`MATMUL_ATOL`].
const MATMUL_RTOL: f32 = 1e-4;

mod common;
use common::gpu;

/// splitmix64, for reproducible inputs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    /// Mixed f32 bit patterns: raw (NaN, Inf, subnormal), log-uniform, few-mantissa-bit ties.
    fn mixed(&mut self) -> f32 {
        let r = self.next();
        let sign = ((r >> 63) as u32) << 31;
        match (r >> 56) & 0xF {
            0 => f32::from_bits(r as u32),
            1 => f32::from_bits(
                sign | (((127 - 30 + (r >> 32) % 50) as u32) << 23) | (r as u32 & 0x7F_0000),
            ),
            _ => f32::from_bits(
                sign | (((127 - 30 + (r >> 32) % 50) as u32) << 23) | (r as u32 & 0x7F_FFFF),
            ),
        }
    }
}

/// Every code's value, the midpoints between neighbours and their f32 neighbours, specials.
fn edge_inputs() -> Vec<f32> {
    let mut v = Vec::new();
    for format in Format::ALL {
        let mut vals: Vec<f32> = (0..=255u8)
            .map(|c| format.decode(c))
            .filter(|x| x.is_finite())
            .map(f32::abs)
            .collect();
        vals.sort_by(f32::total_cmp);
        vals.dedup();
        vals.push(format.facts().overflow_threshold);
        for w in vals.windows(2) {
            let mid = (w[0] + w[1]) / 2.0;
            for x in [
                w[0],
                mid,
                f32::from_bits(mid.to_bits() + 1),
                f32::from_bits(mid.to_bits().saturating_sub(1)),
            ] {
                v.push(x);
                v.push(-x);
            }
        }
    }
    v.extend([
        0.0,
        -0.0,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-45,
        -1e-45,
        1.2e-38,
        f32::MAX,
    ]);
    v
}

fn scaling(
    format: Format,
    overflow: Overflow,
    estimators: &[&str],
    window: usize,
) -> ScalingConfig {
    let specs: Vec<EstimatorSpec> = estimators.iter().map(|s| s.parse().unwrap()).collect();
    ScalingConfig {
        estimator: specs[0],
        shadow: specs,
        window,
        format,
        overflow,
        ..ScalingConfig::default()
    }
}

fn same_bits(a: &[f32], b: &[f32]) -> Result<(), String> {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan()) {
            return Err(format!(
                "element {i}: {x:e} ({:#010x}) vs {y:e} ({:#010x})",
                x.to_bits(),
                y.to_bits()
            ));
        }
    }
    Ok(())
}

fn run_qdq<B: Backend>(b: &B, x: &[f32], config: &BankConfig, scale: f32) -> Vec<f32> {
    let bank = b.new_bank(config).unwrap();
    b.set_scales(&bank, &vec![scale; config.quantizers * config.estimators()])
        .unwrap();
    let xt = b.upload(x).unwrap();
    let out = b.zeros(x.len()).unwrap();
    b.qdq(&xt, &out, &bank, 0).unwrap();
    b.read(&out).wait().unwrap()
}

#[test]
fn qdq_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new();
    let mut rng = Rng(1);
    let mut x: Vec<f32> = (0..1 << 20).map(|_| rng.mixed()).collect();
    x.extend(edge_inputs());
    let codes: Vec<f32> = Format::ALL
        .iter()
        .flat_map(|f| (0..=255u8).map(|c| f.decode(c)))
        .collect();
    let mut checked = 0usize;
    for format in Format::ALL {
        let roundings: &[Rounding] = if format == Format::HiF8 {
            &[Rounding::Nearest, Rounding::Hybrid { seed: 9 }]
        } else {
            &[Rounding::Nearest]
        };
        for overflow in [Overflow::Inf, Overflow::Saturate] {
            for rounding in roundings {
                let mut config = BankConfig::new(
                    1,
                    scaling(format, overflow, &["max_window(4)"], 4)
                        .plan()
                        .unwrap(),
                );
                config.rounding = *rounding;
                for scale in [1.0, 15.0 / 3.7, 1.0 / 1024.0, 4096.0] {
                    let g = run_qdq(gpu, &x, &config, scale);
                    let c = run_qdq(&cpu, &x, &config, scale);
                    same_bits(&g, &c).unwrap_or_else(|e| {
                        panic!("{format} {overflow:?} {rounding:?} scale {scale}: {e}")
                    });
                    let g = run_qdq(gpu, &codes, &config, scale);
                    let c = run_qdq(&cpu, &codes, &config, scale);
                    same_bits(&g, &c).unwrap_or_else(|e| {
                        panic!("codes {format} {overflow:?} scale {scale}: {e}")
                    });
                    checked += x.len() + codes.len();
                }
            }
        }
    }
    assert!(checked > 25_000_000, "{checked}");
}

/// amax → scale_update → quant_stats for one call of quantizer `q`, as the trainer does.
fn stats_call<B: Backend>(b: &B, bank: &B::Bank, x: &[f32], q: usize) {
    let t = b.upload(x).unwrap();
    b.amax(&t, bank, q).unwrap();
    b.scale_update(bank, q, 1).unwrap();
    b.quant_stats(&t, bank, q).unwrap();
    b.flush();
}

fn assert_snapshots_equal(g: &BankSnapshot, c: &BankSnapshot, what: &str) {
    assert_eq!(g.active, c.active);
    for (q, (gs, cs)) in g.quantizers.iter().zip(&c.quantizers).enumerate() {
        same_bits(&gs.est, &cs.est).unwrap_or_else(|e| panic!("{what} q{q} est: {e}"));
        same_bits(&gs.scales, &cs.scales).unwrap_or_else(|e| panic!("{what} q{q} scales: {e}"));
        same_bits(&gs.history, &cs.history).unwrap_or_else(|e| panic!("{what} q{q} history: {e}"));
        assert_eq!(
            gs.measured_amax.to_bits(),
            cs.measured_amax.to_bits(),
            "{what} q{q} measured amax"
        );
        assert_eq!(
            gs.stats.amax.to_bits(),
            cs.stats.amax.to_bits(),
            "{what} q{q} amax"
        );
        // Counts exactly; the quantization error's energies to f32 summation (the GPU sums
        // f32 per lane in grid-stride order, then a fixed tree; the CPU sums f64).
        let energy = |a: f64, b: f64, name: &str| {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs() + 1e-30,
                "{what} q{q} {name}: gpu {a} cpu {b}"
            );
        };
        energy(gs.stats.signal, cs.stats.signal, "signal");
        energy(gs.stats.noise, cs.stats.noise, "noise");
        match (gs.stats.sqnr_db(), cs.stats.sqnr_db()) {
            (Some(g), Some(c)) => assert!((g - c).abs() < 1e-3, "{what} q{q} SQNR {g} vs {c}"),
            (g, c) => assert_eq!(g, c, "{what} q{q} SQNR"),
        }
        let (mut gs, mut cs) = (gs.stats.clone(), cs.stats.clone());
        (gs.signal, gs.noise, cs.signal, cs.noise) = (0.0, 0.0, 0.0, 0.0);
        assert_eq!(gs, cs, "{what} q{q} stats");
    }
}

/// SQNR of one call by its definition, with the codec (f64 sums).
fn sqnr_by_definition(x: &[f32], scale: f32, format: Format) -> f64 {
    let q = hif8lab_format::FakeQuant::new(format);
    let (mut s, mut n) = (0.0f64, 0.0f64);
    for (i, v) in x.iter().enumerate() {
        let d = q.qdq_at(*v, scale, i as u32);
        if v.is_finite() && d.is_finite() {
            s += f64::from(*v).powi(2);
            n += (f64::from(*v) - f64::from(d)).powi(2);
        }
    }
    10.0 * (s / n).log10()
}

#[test]
fn quant_stats_sqnr_is_the_definition_and_deterministic() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new();
    let mut rng = Rng(5);
    let config = BankConfig::new(
        1,
        scaling(Format::HiF8, Overflow::Inf, &["most_recent"], 8)
            .plan()
            .unwrap(),
    );
    let (gb, cb) = (
        gpu.new_bank(&config).unwrap(),
        cpu.new_bank(&config).unwrap(),
    );
    // A calm call sets the estimate; the next has a spike 16× above it: its values above the
    // estimate round with fewer mantissa bits, and the SQNR drops.
    let calm: Vec<f32> = (0..300_001).map(|_| rng.uniform()).collect();
    let mut spiky = calm.clone();
    for v in spiky.iter_mut().step_by(97) {
        *v *= 16.0;
    }
    let mut sqnr = Vec::new();
    for x in [&calm, &spiky] {
        stats_call(gpu, &gb, x, 0);
        stats_call(&cpu, &cb, x, 0);
        let g = gpu.read_bank(&gb).wait().unwrap();
        let c = cpu.read_bank(&cb).wait().unwrap();
        let scale = c.quantizers[0].scales[0];
        let want = sqnr_by_definition(x, scale, Format::HiF8);
        let (gd, cd) = (
            g.quantizers[0].stats.sqnr_db().unwrap(),
            c.quantizers[0].stats.sqnr_db().unwrap(),
        );
        assert!((f64::from(cd) - want).abs() < 1e-4, "cpu {cd} vs {want}");
        assert!((f64::from(gd) - want).abs() < 1e-3, "gpu {gd} vs {want}");
        // The same statistics again: the GPU's energies are bit-identical (no float atomics).
        let t = gpu.upload(x).unwrap();
        gpu.quant_stats(&t, &gb, 0).unwrap();
        gpu.flush();
        let again = gpu.read_bank(&gb).wait().unwrap();
        assert_eq!(
            again.quantizers[0].stats.noise.to_bits(),
            g.quantizers[0].stats.noise.to_bits()
        );
        sqnr.push(cd);
    }
    assert!(sqnr[0] > 20.0, "{sqnr:?}");
    assert!(
        sqnr[1] < sqnr[0] - 1.0,
        "the spike costs precision: {sqnr:?}"
    );
}

#[test]
fn quant_stats_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new();
    let mut rng = Rng(2);
    for format in Format::ALL {
        let config = BankConfig::new(
            2,
            scaling(
                format,
                Overflow::Inf,
                &[
                    "max_window(8)",
                    "most_recent",
                    "ema(0.1)",
                    "mean_window(8)",
                    "holt(0.5,0.1,0.9)",
                    "current",
                ],
                8,
            )
            .plan()
            .unwrap(),
        );
        let (gb, cb) = (
            gpu.new_bank(&config).unwrap(),
            cpu.new_bank(&config).unwrap(),
        );
        for (call, n) in [1usize, 7, 63, 65, 257, 100_003, 4096, 1000]
            .into_iter()
            .enumerate()
        {
            let spread = if call % 3 == 2 {
                3000.0
            } else {
                1.0 + call as f32
            };
            let mut x: Vec<f32> = (0..n).map(|_| rng.uniform() * spread).collect();
            if n > 60 {
                x[5] = f32::NAN;
                x[17] = f32::INFINITY;
                x[40] = 1e-30; // underflows
                x[41] = -0.0;
            }
            for q in 0..2 {
                stats_call(gpu, &gb, &x, q);
                stats_call(&cpu, &cb, &x, q);
            }
            let g = gpu.read_bank(&gb).wait().unwrap();
            let c = cpu.read_bank(&cb).wait().unwrap();
            assert_snapshots_equal(&g, &c, &format!("{format} n={n}"));
            if n > 60 {
                assert_eq!(g.quantizers[0].stats.nonfinite, 2);
                assert!(g.quantizers[0].stats.underflow >= 1);
            }
        }
    }
}

#[test]
fn histogram_matches_cpu_and_the_scaling_crate() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new();
    let mut rng = Rng(9);
    let config = BankConfig::new(
        3,
        scaling(Format::HiF8, Overflow::Inf, &["max_window(8)"], 8)
            .plan()
            .unwrap(),
    );
    let (gb, cb) = (
        gpu.new_bank(&config).unwrap(),
        cpu.new_bank(&config).unwrap(),
    );
    // Nothing binned yet: the slot reads as empty.
    assert_eq!(gpu.read_bank(&gb).wait().unwrap().histogram, None);
    for (call, n) in [1usize, 255, 257, 4099, 200_003].into_iter().enumerate() {
        let x: Vec<f32> = (0..n).map(|_| rng.mixed()).collect();
        let q = call % 3;
        hist_call(gpu, &gb, &x, q);
        hist_call(&cpu, &cb, &x, q);
        let g = gpu
            .read_bank(&gb)
            .wait()
            .unwrap()
            .histogram
            .expect("gpu slot filled");
        let c = cpu
            .read_bank(&cb)
            .wait()
            .unwrap()
            .histogram
            .expect("cpu slot filled");
        assert_eq!(g.quantizer, q);
        assert_eq!(g, c, "n={n}");
        // The scale in effect is the one binned against: recompute from the bank.
        let scale = cpu.read_bank(&cb).wait().unwrap().quantizers[q].scales[0];
        let want = hif8lab_scaling::stats::Log2Histogram::of(&x, scale);
        assert_eq!(g.hist, want, "n={n}");
        assert_eq!(g.hist.total(), n as u64);
        if n > 1000 {
            assert!(g.hist.nonfinite > 0 && g.hist.bins.iter().filter(|c| **c > 0).count() > 50);
        }
    }
    // Restoring a bank empties the slot.
    let snap = gpu.read_bank(&gb).wait().unwrap();
    gpu.restore_bank(&gb, &snap).unwrap();
    assert_eq!(gpu.read_bank(&gb).wait().unwrap().histogram, None);
}

/// amax → scale_update → histogram for one call of quantizer `q`.
fn hist_call<B: Backend>(b: &B, bank: &B::Bank, x: &[f32], q: usize) {
    let t = b.upload(x).unwrap();
    b.amax(&t, bank, q).unwrap();
    b.scale_update(bank, q, 1).unwrap();
    b.histogram(&t, bank, q).unwrap();
    b.flush();
}

#[test]
fn scale_update_matches_scaling_crate() {
    let Some(gpu) = gpu() else { return };
    let specs = [
        "most_recent",
        "max_window(4)",
        "mean_window(3)",
        "ema(0.25)",
        "holt(0.5,0.2,0.9)",
        "current",
    ];
    let window = 4;
    // Three quantizers with scripted amax sequences, updated together in one dispatch.
    let spike = [1.0, 1.0, 1.0, 8.0, 4.0, 2.0, 1.0, 1.0, 1.0, 1.0];
    let ramp: Vec<f32> = (1..=10).map(|i| i as f32 * 0.75).collect();
    let step_zero_inf = [2.0, 2.0, 0.0, 6.0, f32::INFINITY, 6.0, 6.0, 6.0, 6.0, 0.5];
    let seqs: [&[f32]; 3] = [&spike, &ramp, &step_zero_inf];
    for cold_start in [ColdStart::Jit, ColdStart::Te] {
        let mut sc = scaling(Format::HiF8, Overflow::Inf, &specs, window);
        sc.cold_start = cold_start;
        sc.margin = 1;
        let config = BankConfig::new(3, sc.clone().plan().unwrap());
        let bank = gpu.new_bank(&config).unwrap();
        let mut states: Vec<QuantizerState> = (0..3)
            .map(|_| QuantizerState::new(&sc.plan().unwrap()))
            .collect();
        for call in 0..spike.len() {
            if call == 7 {
                // Reset mid-run, as when QAT switches on after warmup.
                gpu.reset(&bank).unwrap();
                states.iter_mut().for_each(QuantizerState::reset);
            }
            let mut want = Vec::new();
            for (q, seq) in seqs.iter().enumerate() {
                let amax = seq[call];
                let t = gpu.upload(&[amax * 0.5, -amax, 0.0]).unwrap();
                gpu.amax(&t, &bank, q).unwrap();
                want.push(states[q].call(amax));
            }
            gpu.scale_update(&bank, 0, 3).unwrap();
            let snap = gpu.read_bank(&bank).wait().unwrap();
            for (q, decisions) in want.iter().enumerate() {
                let s = &snap.quantizers[q];
                let est: Vec<f32> = decisions.iter().map(|d| d.est).collect();
                let scales: Vec<f32> = decisions.iter().map(|d| d.scale).collect();
                let what = format!("{cold_start:?} call {call} quantizer {q}");
                same_bits(&s.est, &est).unwrap_or_else(|e| panic!("{what} est: {e}"));
                same_bits(&s.scales, &scales).unwrap_or_else(|e| panic!("{what} scales: {e}"));
                same_bits(&s.history, &states[q].history())
                    .unwrap_or_else(|e| panic!("{what} history: {e}"));
            }
        }
        // The window evicted exactly: quantizer 0 saw its spike at call 3; with N = 4 the
        // max_window estimate still holds 8 at call 7 only if no reset — after the reset
        // (call 7) the history restarted.
        let snap = gpu.read_bank(&bank).wait().unwrap();
        assert_eq!(snap.quantizers[0].history.len(), 3);
    }
}

/// A flat amax signal estimates exactly its value on the GPU too (the mean of 64 copies of
/// 0.1 rounds one ulp below 0.1 without the clamp), matching the scaling crate.
#[test]
fn flat_amax_is_never_above_its_estimate_on_gpu() {
    let Some(gpu) = gpu() else { return };
    let specs = [
        "mean_window(64)",
        "ema(0.1)",
        "holt(0.5,0.1,0.9)",
        "max_window(64)",
    ];
    let sc = scaling(Format::HiF8, Overflow::Inf, &specs, 64);
    let bank = gpu
        .new_bank(&BankConfig::new(1, sc.plan().unwrap()))
        .unwrap();
    for call in 0..100 {
        let t = gpu.upload(&[0.1f32, -0.05]).unwrap();
        gpu.amax(&t, &bank, 0).unwrap();
        gpu.scale_update(&bank, 0, 1).unwrap();
        let snap = gpu.read_bank(&bank).wait().unwrap();
        for (k, spec) in specs.iter().enumerate() {
            assert_eq!(
                snap.quantizers[0].est[k].to_bits(),
                0.1f32.to_bits(),
                "{spec} at call {call}"
            );
        }
    }
}

#[test]
fn window_eviction_at_exactly_n_on_gpu() {
    let Some(gpu) = gpu() else { return };
    let sc = scaling(Format::HiF8, Overflow::Inf, &["max_window(3)"], 3);
    let bank = gpu
        .new_bank(&BankConfig::new(1, sc.plan().unwrap()))
        .unwrap();
    let mut ests = Vec::new();
    for amax in [9.0f32, 1.0, 1.0, 1.0, 1.0] {
        let t = gpu.upload(&[amax]).unwrap();
        gpu.amax(&t, &bank, 0).unwrap();
        gpu.scale_update(&bank, 0, 1).unwrap();
        ests.push(gpu.read_bank(&bank).wait().unwrap().quantizers[0].est[0]);
    }
    assert_eq!(ests, [9.0, 9.0, 9.0, 9.0, 1.0]);
}

fn random(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.uniform()).collect()
}

fn run_matmul<B: Backend>(
    b: &B,
    a: &[f32],
    bm: &[f32],
    c0: &[f32],
    spec: &MatmulSpec,
    bank: Option<&B::Bank>,
) -> Vec<f32> {
    let (at, bt, ct) = (
        b.upload(a).unwrap(),
        b.upload(bm).unwrap(),
        b.upload(c0).unwrap(),
    );
    b.matmul(&at, &bt, &ct, spec, bank).unwrap();
    b.read(&ct).wait().unwrap()
}

fn assert_close(g: &[f32], c: &[f32], what: &str) {
    for (i, (x, y)) in g.iter().zip(c).enumerate() {
        assert!(
            (x - y).abs() <= MATMUL_ATOL + MATMUL_RTOL * y.abs(),
            "{what}: element {i}: gpu {x} cpu {y}"
        );
    }
}

#[test]
fn matmul_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new();
    let mut rng = Rng(3);
    let shapes = [
        (1, 1, 1, 1),
        (7, 63, 65, 1),
        (257, 129, 33, 1),
        (17, 33, 9, 3),
        (64, 64, 64, 2),
        (5, 3, 0, 1),
    ];
    for (m, n, k, batch) in shapes {
        for layout in Layout::ALL {
            for accumulate in [false, true] {
                let spec = MatmulSpec {
                    batch,
                    accumulate,
                    ..MatmulSpec::new(m, n, k, layout)
                };
                let (sa, sb, sc) = spec.sizes();
                let a = random(&mut rng, sa * batch);
                let b = random(&mut rng, sb * batch);
                let c0 = random(&mut rng, sc * batch);
                let g = run_matmul(gpu, &a, &b, &c0, &spec, None);
                let c = run_matmul(&cpu, &a, &b, &c0, &spec, None);
                assert_close(
                    &g,
                    &c,
                    &format!("{m}x{n}x{k} b{batch} {} acc={accumulate}", layout.name()),
                );
            }
        }
    }
}

#[test]
fn fused_matmul_equals_qdq_then_matmul() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new();
    let mut rng = Rng(4);
    let config = BankConfig::new(
        2,
        scaling(Format::HiF8, Overflow::Inf, &["max_window(4)"], 4)
            .plan()
            .unwrap(),
    );
    for layout in Layout::ALL {
        let spec = MatmulSpec {
            batch: 2,
            fuse_a: Some(0),
            fuse_b: Some(1),
            ..MatmulSpec::new(33, 70, 45, layout)
        };
        let (sa, sb, sc) = spec.sizes();
        let a: Vec<f32> = random(&mut rng, sa * 2).iter().map(|v| v * 3.0).collect();
        let b = random(&mut rng, sb * 2);
        let zeros = vec![0.0; sc * 2];
        let fused = |backend: &dyn Fn() -> Vec<f32>| backend();
        let g_fused = fused(&|| {
            let bank = gpu.new_bank(&config).unwrap();
            gpu.set_scales(&bank, &[15.0 / 3.0, 15.0]).unwrap();
            run_matmul(gpu, &a, &b, &zeros, &spec, Some(&bank))
        });
        // Unfused reference on the GPU: qdq each operand, then a plain matmul.
        let bank = gpu.new_bank(&config).unwrap();
        gpu.set_scales(&bank, &[15.0 / 3.0, 15.0]).unwrap();
        let (at, bt) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
        let (aq, bq) = (gpu.zeros(a.len()).unwrap(), gpu.zeros(b.len()).unwrap());
        gpu.qdq(&at, &aq, &bank, 0).unwrap();
        gpu.qdq(&bt, &bq, &bank, 1).unwrap();
        let ct = gpu.upload(&zeros).unwrap();
        let plain = MatmulSpec {
            fuse_a: None,
            fuse_b: None,
            ..spec
        };
        gpu.matmul(&aq, &bq, &ct, &plain, None).unwrap();
        let g_unfused = gpu.read(&ct).wait().unwrap();
        same_bits(&g_fused, &g_unfused).unwrap_or_else(|e| panic!("{}: {e}", layout.name()));
        let cbank = cpu.new_bank(&config).unwrap();
        cpu.set_scales(&cbank, &[15.0 / 3.0, 15.0]).unwrap();
        let c = run_matmul(&cpu, &a, &b, &zeros, &spec, Some(&cbank));
        assert_close(&g_fused, &c, layout.name());
        // Quantization really happened: the fused result differs from the exact product.
        let exact = run_matmul(&cpu, &a, &b, &zeros, &plain, None);
        assert!(exact.iter().zip(&c).any(|(x, y)| (x - y).abs() > 1e-3));
    }
}

#[test]
fn oversized_tensors_are_rejected_and_work_is_one_submission() {
    if gpu().is_none() {
        return;
    }
    // A device of its own: the counters must not see other tests' submissions.
    let own = GpuBackend::new_blocking().unwrap();
    let gpu = &own;
    let limit = gpu.limits().max_storage_buffer_binding_size;
    let too_many = (limit / 4 + 1) as usize;
    match gpu.zeros(too_many) {
        Err(EngineError::TooLarge {
            bytes, limit: l, ..
        }) => assert!(bytes > l),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("a tensor over the binding limit must be rejected"),
    }
    let before = gpu.counters();
    let config = BankConfig::new(
        1,
        scaling(Format::HiF8, Overflow::Inf, &["max_window(4)"], 4)
            .plan()
            .unwrap(),
    );
    let bank = gpu.new_bank(&config).unwrap();
    let x = gpu.zeros(1000).unwrap();
    let y = gpu.zeros(1000).unwrap();
    for _ in 0..5 {
        gpu.amax(&x, &bank, 0).unwrap();
        gpu.scale_update(&bank, 0, 1).unwrap();
        gpu.quant_stats(&x, &bank, 0).unwrap();
        gpu.qdq(&x, &y, &bank, 0).unwrap();
    }
    let mid = gpu.counters();
    assert_eq!(mid.submits, before.submits, "recording submits nothing");
    assert_eq!(mid.blocking_syncs, before.blocking_syncs);
    gpu.flush();
    assert_eq!(gpu.counters().submits, before.submits + 1);
}

#[test]
fn bf16_matmul_matches_cpu_and_rounds_operands() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new();
    let mut rng = Rng(5);
    let spec = MatmulSpec {
        round_bf16: true,
        ..MatmulSpec::new(37, 29, 41, Layout::NT)
    };
    let (sa, sb, sc) = spec.sizes();
    let a = random(&mut rng, sa);
    let b = random(&mut rng, sb);
    let zeros = vec![0.0; sc];
    let g = run_matmul(gpu, &a, &b, &zeros, &spec, None);
    let c = run_matmul(&cpu, &a, &b, &zeros, &spec, None);
    assert_close(&g, &c, "bf16");
    let rounded = |v: &[f32]| {
        v.iter()
            .map(|x| hif8lab_format::bf16_rne(*x))
            .collect::<Vec<_>>()
    };
    let plain = MatmulSpec {
        round_bf16: false,
        ..spec
    };
    let explicit = run_matmul(&cpu, &rounded(&a), &rounded(&b), &zeros, &plain, None);
    same_bits(&c, &explicit).unwrap();
    let exact = run_matmul(&cpu, &a, &b, &zeros, &plain, None);
    assert!(exact.iter().zip(&c).any(|(x, y)| x != y));
}

#[test]
fn ste_mask_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new();
    let mut rng = Rng(6);
    let config = BankConfig::new(
        3,
        scaling(
            Format::HiF8,
            Overflow::Saturate,
            &["max_window(4)", "most_recent"],
            4,
        )
        .plan()
        .unwrap(),
    );
    let x: Vec<f32> = (0..1001)
        .map(|_| rng.uniform() * 4.0)
        .chain([f32::NAN, f32::INFINITY])
        .collect();
    let grad: Vec<f32> = (0..x.len()).map(|_| rng.uniform()).collect();
    let run = |b: &dyn Fn(&[f32]) -> Vec<f32>| b(&grad);
    let on_gpu = run(&|g| {
        let bank = gpu.new_bank(&config).unwrap();
        // Scale 15/2 on every estimator: the estimate in effect is 2.
        gpu.set_scales(&bank, &[7.5; 6]).unwrap();
        let (xt, gt) = (gpu.upload(&x).unwrap(), gpu.upload(g).unwrap());
        gpu.ste_mask(&xt, &gt, &bank, 2).unwrap();
        gpu.read(&gt).wait().unwrap()
    });
    let bank = cpu.new_bank(&config).unwrap();
    cpu.set_scales(&bank, &[7.5; 6]).unwrap();
    let (xt, gt) = (cpu.upload(&x).unwrap(), cpu.upload(&grad).unwrap());
    cpu.ste_mask(&xt, &gt, &bank, 2).unwrap();
    let on_cpu = cpu.read(&gt).wait().unwrap();
    same_bits(&on_gpu, &on_cpu).unwrap();
    for i in 0..x.len() {
        let want = if x[i].abs() > 2.0 { 0.0 } else { grad[i] };
        assert_eq!(
            on_cpu[i].to_bits(),
            want.to_bits(),
            "element {i}: x {}",
            x[i]
        );
    }
}

#[test]
fn repeated_steps_reuse_bind_groups_and_keep_each_dispatch_params() {
    if gpu().is_none() {
        return;
    }
    // Its own device: the counters of the shared one move with other tests.
    let g = GpuBackend::new_blocking().expect("adapter found above");
    let x: Vec<f32> = (0..1000).map(|i| i as f32 * 0.25 - 100.0).collect();
    let a = g.upload(&x).unwrap();
    let b = g.zeros(x.len()).unwrap();
    let config = BankConfig::new(
        2,
        scaling(Format::HiF8, Overflow::Saturate, &["max_window(4)"], 4)
            .plan()
            .unwrap(),
    );
    let bank = g.new_bank(&config).unwrap();
    let step = |factor: f32| -> Vec<f32> {
        g.copy(&a, &b).unwrap();
        // Three dispatches of one pipeline on one buffer in one submission, each with its
        // own params: each must see its own slot of the uniform ring.
        g.scale_inplace(&b, factor).unwrap();
        g.scale_inplace(&b, 3.0).unwrap();
        g.add_inplace(&b, &a).unwrap();
        g.amax(&b, &bank, 0).unwrap();
        g.scale_update(&bank, 0, 1).unwrap();
        g.flush();
        g.read(&b).wait().unwrap()
    };
    let first = step(2.0);
    let after_first = g.counters();
    let second = step(2.0);
    let third = step(5.0);
    let after_third = g.counters();
    for (i, v) in x.iter().enumerate() {
        assert_eq!(first[i], v * 6.0 + v, "element {i} of step 1");
        assert_eq!(second[i], first[i], "element {i} of step 2");
        assert_eq!(third[i], v * 15.0 + v, "element {i} of step 3");
    }
    assert!(after_first.bind_groups_created > 0);
    assert_eq!(
        after_third.bind_groups_created, after_first.bind_groups_created,
        "steps 2 and 3 repeat step 1's dispatches: no new bind group"
    );
    assert_eq!(after_third.dispatches - after_first.dispatches, 10);
}

/// A backend prepared kernel by kernel (what the browser's frame loop does, so it can show
/// "n of N compiled") counts every kernel once, in order, and computes what a backend built
/// in one go computes, bit for bit.
#[test]
fn a_backend_prepared_kernel_by_kernel_counts_and_matches() {
    let Some(gpu) = gpu() else { return };
    let (device, queue, info) = gpu.device_parts();
    let mut p = GpuBackend::preparing(device, queue, info);
    let total = p.total();
    assert_eq!(total, hif8lab_engine::gpu::KERNELS.len());
    assert_eq!(p.compiled(), 0);
    let mut seen = vec![0];
    let start = std::time::Instant::now();
    let mut calls = 0;
    while !p.advance() {
        calls += 1;
        assert!(p.compiled() <= p.created() && p.created() <= total);
        if *seen.last().unwrap() != p.compiled() {
            seen.push(p.compiled());
        }
        assert!(
            start.elapsed().as_secs() < 120,
            "stuck at {} of {total}",
            p.compiled()
        );
    }
    if *seen.last().unwrap() != p.compiled() {
        seen.push(p.compiled());
    }
    assert!(calls >= total - 1, "one kernel per call: {calls} calls");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert_eq!(*seen.last().unwrap(), total);
    let prepared = p.finish();
    let mut rng = Rng(5);
    let x: Vec<f32> = (0..1 << 16).map(|_| rng.mixed()).collect();
    let config = BankConfig::new(
        1,
        scaling(Format::HiF8, Overflow::Inf, &["max_window(4)"], 4)
            .plan()
            .unwrap(),
    );
    same_bits(
        &run_qdq(&prepared, &x, &config, 15.0 / 3.7),
        &run_qdq(gpu, &x, &config, 15.0 / 3.7),
    )
    .unwrap();
}

/// The CPU backend runs the codec once per quantizer call: the statistics pass leaves its
/// fake-quantized copy for the fused matmul that follows. The product is bit for bit the one
/// without the copy; once the input is touched (written, or read by another op) the copy is
/// not used, and a copy of another tensor or another scale never is.
#[test]
fn cpu_fused_matmul_reuses_the_statistics_copy_only_while_valid() {
    let cpu = CpuBackend::new();
    let (m, n, k) = (33, 17, 40);
    let mut rng = Rng(11);
    let x: Vec<f32> = (0..m * k).map(|_| rng.mixed().clamp(-1e3, 1e3)).collect();
    let w: Vec<f32> = (0..n * k).map(|_| rng.mixed().clamp(-1e3, 1e3)).collect();
    let config = BankConfig::new(
        2,
        scaling(Format::HiF8, Overflow::Inf, &["max_window(4)"], 4)
            .plan()
            .unwrap(),
    );
    let spec = MatmulSpec {
        fuse_a: Some(0),
        fuse_b: Some(1),
        ..MatmulSpec::new(m, n, k, Layout::NT)
    };
    let scales = [15.0 / 3.0, 15.0 / 900.0];
    // Reference: a bank that never ran the statistics pass (matmul quantizes itself).
    let plain = cpu.new_bank(&config).unwrap();
    cpu.set_scales(&plain, &scales).unwrap();
    let product = |bank: &<CpuBackend as Device>::Bank, xt: &_, wt: &_| {
        let ct = cpu.zeros(m * n).unwrap();
        cpu.matmul(xt, wt, &ct, &spec, Some(bank)).unwrap();
        cpu.read(&ct).wait().unwrap()
    };
    let (xt, wt) = (cpu.upload(&x).unwrap(), cpu.upload(&w).unwrap());
    let expected = product(&plain, &xt, &wt);
    let bank = cpu.new_bank(&config).unwrap();
    cpu.set_scales(&bank, &scales).unwrap();
    cpu.quant_stats(&xt, &bank, 0).unwrap();
    cpu.quant_stats(&wt, &bank, 1).unwrap();
    same_bits(&product(&bank, &xt, &wt), &expected).unwrap();
    // Again without a new statistics pass: the copies were given back, still valid.
    same_bits(&product(&bank, &xt, &wt), &expected).unwrap();
    // x changes: the copy of the old x must not be used.
    cpu.scale_inplace(&xt, 2.0).unwrap();
    let x2: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
    let x2t = cpu.upload(&x2).unwrap();
    let expected2 = product(&plain, &x2t, &wt);
    assert!(
        same_bits(&expected2, &expected).is_err(),
        "the change shows"
    );
    same_bits(&product(&bank, &xt, &wt), &expected2).unwrap();
    // A copy of x offered for another tensor, or at another scale, is not taken.
    cpu.quant_stats(&xt, &bank, 0).unwrap();
    same_bits(&product(&bank, &x2t, &wt), &expected2).unwrap();
    cpu.quant_stats(&xt, &bank, 0).unwrap();
    cpu.set_scales(&bank, &[15.0 / 5.0, 15.0 / 900.0]).unwrap();
    cpu.set_scales(&plain, &[15.0 / 5.0, 15.0 / 900.0]).unwrap();
    same_bits(&product(&bank, &xt, &wt), &product(&plain, &x2t, &wt)).unwrap();
}

/// The statistics take the amax op's measurement only while it is of the same tensor,
/// untouched: after a write, or on another tensor, they measure again (the amax and the
/// non-finite count of what they are given).
#[test]
fn cpu_statistics_reuse_the_measured_amax_only_while_valid() {
    let cpu = CpuBackend::new();
    let config = BankConfig::new(
        1,
        scaling(Format::HiF8, Overflow::Inf, &["max_window(4)"], 4)
            .plan()
            .unwrap(),
    );
    let mut x = vec![0.5f32; 5000];
    x[17] = -3.0;
    x[4000] = f32::INFINITY;
    x[4001] = f32::NAN;
    let stats = |bank: &<CpuBackend as Device>::Bank| {
        let snap = cpu.read_bank(bank).wait().unwrap();
        let s = &snap.quantizers[0].stats;
        (s.amax, s.nonfinite)
    };
    let xt = cpu.upload(&x).unwrap();
    let other = cpu.upload(&[7.0f32, -1.0]).unwrap();
    let bank = cpu.new_bank(&config).unwrap();
    // The trainer's order: amax, scale update, statistics.
    cpu.amax(&xt, &bank, 0).unwrap();
    cpu.scale_update(&bank, 0, 1).unwrap();
    cpu.quant_stats(&xt, &bank, 0).unwrap();
    assert_eq!(stats(&bank), (f32::INFINITY, 2));
    // Measured on x, then x changes: the statistics see the new contents.
    cpu.amax(&xt, &bank, 0).unwrap();
    cpu.scale_inplace(&xt, 0.0).unwrap();
    cpu.quant_stats(&xt, &bank, 0).unwrap();
    let (amax, nonfinite) = stats(&bank);
    // 0·inf and 0·NaN are NaN: amax leaves NaNs out and counts them.
    assert_eq!((amax, nonfinite), (0.0, 2));
    // Measured on x, statistics of another tensor: its own amax.
    cpu.amax(&xt, &bank, 0).unwrap();
    cpu.quant_stats(&other, &bank, 0).unwrap();
    assert_eq!(stats(&bank), (7.0, 0));
}

/// The benchmark's bandwidth reference (`elementwise.wgsl`'s `copy` entry) copies every
/// element's bits, NaN payloads and signed zeros included, past one grid-stride round, and
/// refuses tensors of different lengths.
#[test]
fn copy_kernel_copies_bits() {
    let Some(g) = gpu() else {
        return;
    };
    let n = 70_001;
    let x: Vec<f32> = (0..n)
        .map(|i| match i % 7 {
            0 => f32::from_bits(0x7fc0_0123),
            1 => -0.0,
            _ => (i as f32).sin() * 1e3,
        })
        .collect();
    let a = g.upload(&x).unwrap();
    let b = g.zeros(n).unwrap();
    g.copy_kernel(&a, &b).unwrap();
    g.flush();
    let got = g.read(&b).wait().unwrap();
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got), bits(&x));
    assert!(g.copy_kernel(&a, &g.zeros(n - 1).unwrap()).is_err());
}

#[test]
fn auto_never_chooses_a_software_adapter() {
    use hif8lab_engine::{AnyBackend, BackendChoice, is_software};
    let Some(gpu) = gpu() else { return };
    let software = is_software(&gpu.info().device_type);
    let mut notes = Vec::new();
    let resolved = BackendChoice::Auto.resolve(&mut |n| notes.push(n.to_owned()));
    let opened = AnyBackend::open(&BackendChoice::Auto, &mut |n| notes.push(n.to_owned()))
        .expect("auto always opens a backend");
    let opened_cpu = matches!(opened, AnyBackend::Cpu(_));
    if software {
        // lavapipe in CI: auto is the CPU backend, and says why.
        assert_eq!(resolved, BackendChoice::Cpu, "{notes:?}");
        assert!(opened_cpu);
        assert!(
            notes.iter().all(|n| n.contains("software rasterizer")),
            "{notes:?}"
        );
        // An explicit request still takes it, with a note.
        let mut explicit = Vec::new();
        let any = AnyBackend::open(&BackendChoice::GPU, &mut |n| explicit.push(n.to_owned()))
            .expect("gpu opens the software adapter");
        assert!(matches!(any, AnyBackend::Gpu(_)));
        assert!(
            explicit.iter().any(|n| n.contains("software rasterizer")),
            "{explicit:?}"
        );
    } else {
        assert_eq!(resolved, BackendChoice::GPU);
        assert!(!opened_cpu);
    }
}
