//! `hif8lab bench train`: tokens/s of a plain run and of the same run with QAT (all shadow
//! estimators) measured in one process through the run driver, in alternating blocks of
//! steps (so both see the same machine), their ratio; per step:
//! submissions, blocking syncs, kernel dispatches, bind groups created and host time spent
//! enqueuing (recording and submitting) a step; and peak memory. `--profile` (CPU backend)
//! times every op of the timed steps and prints where a step's time goes.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::gpu::GpuBackend;
use hif8lab_engine::{Backend, BackendChoice};
use hif8lab_train::RunConfig;
use hif8lab_train::driver::{Control, Driver, Event, Schedule};
use hif8lab_train::open::open_in_memory;

/// Per-op timing where the backend offers it (the CPU backend; GPU ops run asynchronously
/// on the device and are not timed here).
trait Profiled {
    /// Waits until the device has done what was submitted (a no-op on the CPU).
    fn sync(&self) {}
    fn start_profile(&self) {}
    fn take_profile(&self) -> Vec<(&'static str, hif8lab_engine::cpu::OpTime)> {
        Vec::new()
    }
    /// FLOPs of the matmuls so far: (f32 GEMM, bf16 kernel); the GPU's are all f32.
    fn gemm_flops(&self) -> (u64, u64) {
        (0, 0)
    }
}

impl Profiled for CpuBackend {
    fn start_profile(&self) {
        self.set_profiling(true);
    }
    fn take_profile(&self) -> Vec<(&'static str, hif8lab_engine::cpu::OpTime)> {
        let p = self.profile();
        self.set_profiling(false);
        p
    }
    fn gemm_flops(&self) -> (u64, u64) {
        CpuBackend::gemm_flops(self)
    }
}

impl Profiled for GpuBackend {
    fn sync(&self) {
        self.wait_idle();
    }
}

struct Figures {
    tokens_per_s: f64,
    ms_per_step: f64,
    host_ms_per_step: f64,
    submits_per_step: f64,
    syncs_per_step: f64,
    dispatches_per_step: f64,
    bind_groups_per_step: f64,
    seconds: f64,
    profile: Vec<(&'static str, hif8lab_engine::cpu::OpTime)>,
    /// The share of the timed steps' GEMM FLOPs that ran on the bf16 kernel.
    bf16_gemm_fraction: f64,
}

/// Untimed warm-up steps of each variant (pipeline compilation, allocation).
const WARMUP: u64 = 2;

/// One variant being measured: its driver, and what its timed blocks added up to.
struct Variant<B: Backend> {
    driver: Driver<B>,
    tokens: u64,
    seconds: f64,
}

impl<B: Backend> Variant<B> {
    fn new(backend: B, config: &RunConfig, qat: bool, steps: u64) -> Result<Self> {
        let config = config.bench_variant(qat, WARMUP + steps);
        Ok(Variant {
            driver: open_in_memory(backend, config, None, Schedule::default())?,
            tokens: 0,
            seconds: 0.0,
        })
    }

    /// Runs until `until` steps are done and delivered (waiting for the device); returns
    /// the tokens trained and the seconds it took.
    fn run_until(&mut self, until: u64) -> Result<(u64, f64)> {
        let mut tokens = 0u64;
        let mut sink = |e: Event| {
            if let Event::Report(r) = e {
                tokens += r.tokens;
            }
            Ok(())
        };
        let start = Instant::now();
        while self.driver.trainer().steps_done() < until {
            self.driver
                .advance(Control::Run, Duration::ZERO, true, &mut sink)?;
        }
        self.driver
            .advance(Control::Pause, Duration::ZERO, true, &mut sink)?;
        Ok((tokens, start.elapsed().as_secs_f64()))
    }

    /// The untimed warm-up steps: neither their time nor their tokens count.
    fn warm_up(&mut self) -> Result<()> {
        self.run_until(WARMUP).map(|_| ())
    }

    /// One timed block: runs until `until` steps are done, adding its time and tokens.
    fn block(&mut self, until: u64) -> Result<()> {
        let (tokens, seconds) = self.run_until(until)?;
        self.tokens += tokens;
        self.seconds += seconds;
        Ok(())
    }
}

/// Times `steps` steps of the plain run and `steps` of the QAT run through the run driver
/// (after 2 untimed warm-up steps each), interleaved: blocks of steps alternate between the
/// two in the order plain, QAT, QAT, plain, … so a machine whose speed drifts during the
/// measurement (a shared host) slows both alike and the overhead ratio keeps its meaning.
/// Reads each backend's counters around its timed steps.
fn measure<B: Backend + Profiled>(
    make: impl Fn() -> Result<B>,
    config: &RunConfig,
    steps: u64,
    profile: bool,
) -> Result<[Figures; 2]> {
    let mut variants = [
        Variant::new(make()?, config, false, steps)?,
        Variant::new(make()?, config, true, steps)?,
    ];
    for v in &mut variants {
        v.warm_up()?;
    }
    let before = variants.each_ref().map(|v| {
        (
            v.driver.trainer().backend().counters(),
            v.driver.host_time(),
            v.driver.trainer().backend().gemm_flops(),
        )
    });
    if profile {
        for v in &variants {
            v.driver.trainer().backend().start_profile();
        }
    }
    for (timed, order) in RunConfig::bench_blocks(steps) {
        for i in order {
            variants[i].block(WARMUP + timed)?;
        }
    }
    let mut figures = Vec::with_capacity(2);
    for (v, (counters, host, flops)) in variants.iter().zip(before) {
        let backend = v.driver.trainer().backend();
        let (f32_flops, bf16_flops) = backend.gemm_flops();
        let (f32_flops, bf16_flops) = (f32_flops - flops.0, bf16_flops - flops.1);
        let ops = backend.take_profile();
        let after = backend.counters();
        let host = (v.driver.host_time() - host).as_secs_f64();
        let per = |a: u64, b: u64| (a - b) as f64 / steps as f64;
        figures.push(Figures {
            tokens_per_s: v.tokens as f64 / v.seconds,
            ms_per_step: v.seconds * 1e3 / steps as f64,
            host_ms_per_step: host * 1e3 / steps as f64,
            submits_per_step: per(after.submits, counters.submits),
            syncs_per_step: per(after.blocking_syncs, counters.blocking_syncs),
            dispatches_per_step: per(after.dispatches, counters.dispatches),
            bind_groups_per_step: per(after.bind_groups_created, counters.bind_groups_created),
            seconds: v.seconds,
            profile: ops,
            bf16_gemm_fraction: bf16_flops as f64 / (f32_flops + bf16_flops).max(1) as f64,
        });
    }
    let q = figures.pop().expect("two variants");
    let p = figures.pop().expect("two variants");
    Ok([p, q])
}

/// Peak resident memory of this process in MiB (Linux), if known.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// The per-op table of one variant: op, calls per step, ms per step, share of the step.
fn profile_table(name: &str, f: &Figures, steps: u64) -> Vec<String> {
    let mut lines = vec![format!(
        "  per-op profile, {name} ({:.1} ms/step):  op  calls/step  ms/step  share",
        f.ms_per_step
    )];
    let mut timed = 0.0;
    for (op, t) in &f.profile {
        timed += t.seconds;
        lines.push(format!(
            "    {op:<20} {:>8.1} {:>9.2} {:>6.1} %",
            t.calls as f64 / steps as f64,
            t.seconds * 1e3 / steps as f64,
            100.0 * t.seconds / f.seconds
        ));
    }
    let rest = (f.seconds - timed).max(0.0);
    lines.push(format!(
        "    {:<20} {:>8} {:>9.2} {:>6.1} %",
        "(outside ops)",
        "",
        rest * 1e3 / steps as f64,
        100.0 * rest / f.seconds
    ));
    lines
}

fn profile_json(f: &Figures, steps: u64) -> String {
    let ops: Vec<String> = f
        .profile
        .iter()
        .map(|(op, t)| {
            format!(
                "{{\"op\":{op:?},\"calls_per_step\":{:.2},\"ms_per_step\":{:.4}}}",
                t.calls as f64 / steps as f64,
                t.seconds * 1e3 / steps as f64
            )
        })
        .collect();
    format!("[{}]", ops.join(","))
}

/// What one benchmark measured, and the figures derived from it.
struct Bench {
    info: hif8lab_engine::BackendInfo,
    steps: u64,
    estimators: usize,
    profile: bool,
    /// Plain and QAT.
    p: Figures,
    q: Figures,
    overhead: f64,
    peak: Option<f64>,
    params: usize,
    gemms: Vec<crate::commands::bench_gemm::StepGemm>,
    shape_s: Vec<f64>,
    gemm_s: f64,
    gemm_bound: f64,
    gemm_gflops: f64,
    /// The kernel of the bf16-exact products (`train.gemm` resolved): `f32` or its name.
    gemm_kernel: &'static str,
    /// `train.precision`.
    precision: &'static str,
}

impl Bench {
    /// Model FLOPs: 6 per parameter per token (forward 2, backward 4), the usual measure of
    /// training throughput (a tied head counted once).
    fn gflops(&self, tokens_per_s: f64) -> f64 {
        6.0 * self.params as f64 * tokens_per_s / 1e9
    }

    /// The share of a step the step's GEMMs would take on their own.
    fn gemm_fraction(&self, ms_per_step: f64) -> f64 {
        self.gemm_s * 1e3 / ms_per_step
    }

    fn print_json(&self) -> Result<()> {
        let (info, p, q, steps) = (&self.info, &self.p, &self.q, self.steps);
        let (estimators, overhead, params) = (self.estimators, self.overhead, self.params);
        let (gemm_gflops, gemm_bound) = (self.gemm_gflops, self.gemm_bound);
        let gflops = |t| self.gflops(t);
        let gemm_fraction = |ms| self.gemm_fraction(ms);
        crate::output::outln!(
            "{{\"backend\":{:?},\"adapter\":{:?},\"device_type\":{:?},\"steps\":{steps},\"estimators\":{estimators},\"tokens_per_s_plain\":{:.1},\"tokens_per_s_qat\":{:.1},\"ms_per_step_plain\":{:.2},\"ms_per_step_qat\":{:.2},\"qat_overhead\":{overhead:.4},\"submits_per_step\":{:.2},\"blocking_syncs_per_step\":{:.2},\"dispatches_per_step\":{:.1},\"bind_groups_created_per_step\":{:.2},\"host_ms_per_step\":{:.3},\"host_ms_per_step_plain\":{:.3},\"peak_rss_mib\":{},\"params\":{params},\"model_gflops\":{:.3},\"model_gflops_plain\":{:.3},\"model_gflops_qat\":{:.3},\"gemm_ms_per_step_alone\":{:.4},\"gemm_gflops_alone\":{gemm_gflops:.3},\"gemm_fraction\":{:.4},\"gemm_fraction_qat\":{:.4},\"tokens_per_s_gemm_bound\":{gemm_bound:.1},\"threads\":{},\"gemm_kernel\":{:?},\"precision\":{:?},\"bf16_gemm_fraction_plain\":{:.4},\"bf16_gemm_fraction\":{:.4},\"profile_plain\":{},\"profile_qat\":{},\"gemm_shapes\":{}}}",
            info.kind,
            info.adapter,
            info.device_type,
            p.tokens_per_s,
            q.tokens_per_s,
            p.ms_per_step,
            q.ms_per_step,
            q.submits_per_step,
            q.syncs_per_step,
            q.dispatches_per_step,
            q.bind_groups_per_step,
            q.host_ms_per_step,
            p.host_ms_per_step,
            self.peak
                .map(|v| format!("{v:.1}"))
                .unwrap_or_else(|| "null".into()),
            gflops(p.tokens_per_s),
            gflops(p.tokens_per_s),
            gflops(q.tokens_per_s),
            self.gemm_s * 1e3,
            gemm_fraction(p.ms_per_step),
            gemm_fraction(q.ms_per_step),
            hif8lab_engine::cpu::threads(),
            self.gemm_kernel,
            self.precision,
            p.bf16_gemm_fraction,
            q.bf16_gemm_fraction,
            if self.profile {
                profile_json(p, steps)
            } else {
                "null".into()
            },
            if self.profile {
                profile_json(q, steps)
            } else {
                "null".into()
            },
            if self.profile {
                crate::commands::bench_gemm::shape_json(&self.gemms, &self.shape_s)
            } else {
                "null".into()
            },
        );
        Ok(())
    }

    fn print_text(&self) -> Result<()> {
        let (info, p, q) = (&self.info, &self.p, &self.q);
        crate::output::outln!(
            "bench train on {} '{}' ({}), {} steps each after 2 warm-up steps, plain and QAT in alternating blocks",
            info.kind,
            info.adapter,
            info.device_type,
            self.steps
        );
        crate::output::outln!(
            "  plain: {:>10.1} tok/s {:>9.2} ms/step",
            p.tokens_per_s,
            p.ms_per_step
        );
        crate::output::outln!(
            "  QAT  : {:>10.1} tok/s {:>9.2} ms/step ({} estimators in every quantizer call)",
            q.tokens_per_s,
            q.ms_per_step,
            self.estimators
        );
        crate::output::outln!(
            "  QAT overhead (plain tok/s ÷ QAT tok/s): {:.3}",
            self.overhead
        );
        crate::output::outln!(
            "  precision {}, bf16-exact products on {}: {:.1} % of the GEMM FLOPs on the bf16 kernel plain, {:.1} % QAT",
            self.precision,
            self.gemm_kernel,
            100.0 * p.bf16_gemm_fraction,
            100.0 * q.bf16_gemm_fraction
        );
        crate::output::outln!(
            "  model FLOPs (6 per parameter per token, {} parameters): {:.2} GFLOP/s plain, {:.2} QAT",
            self.params,
            self.gflops(p.tokens_per_s),
            self.gflops(q.tokens_per_s)
        );
        crate::output::outln!(
            "  the step's own GEMMs alone: {:.2} ms/step ({:.1} GFLOP/s); gemm_fraction (their share of a step) {:.3} plain, {:.3} QAT",
            self.gemm_s * 1e3,
            self.gemm_gflops,
            self.gemm_fraction(p.ms_per_step),
            self.gemm_fraction(q.ms_per_step)
        );
        crate::output::outln!(
            "  at most {:.1} tok/s if everything besides the GEMMs were free (tokens per step ÷ their time alone)",
            self.gemm_bound
        );
        crate::output::outln!(
            "  submits/step {:.2}, blocking syncs/step {:.2}, dispatches/step {:.1}, bind groups created/step {:.2}, host ms/step {:.3} (QAT run, steady state)",
            q.submits_per_step,
            q.syncs_per_step,
            q.dispatches_per_step,
            q.bind_groups_per_step,
            q.host_ms_per_step
        );
        if let Some(m) = self.peak {
            crate::output::outln!("  peak resident memory: {m:.1} MiB");
        }
        if self.profile {
            if p.profile.is_empty() {
                crate::output::outln!("  (--profile times ops on the CPU backend only)");
            } else {
                for line in profile_table("plain", p, self.steps)
                    .into_iter()
                    .chain(profile_table("QAT", q, self.steps))
                    .chain(crate::commands::bench_gemm::shape_table(
                        &self.gemms,
                        &self.shape_s,
                    ))
                {
                    crate::output::outln!("{line}");
                }
            }
        }
        Ok(())
    }
}

fn run<B: Backend + Profiled>(
    make: impl Fn() -> Result<B>,
    config: &RunConfig,
    steps: u64,
    json: bool,
    profile: bool,
) -> Result<()> {
    let info = make()?.info();
    let info_kind = info.kind;
    let [p, q] = measure(&make, config, steps, profile)?;
    let overhead = p.tokens_per_s / q.tokens_per_s;
    let estimators = config.qat.plan()?.estimators().len();
    let peak = peak_rss_mib();
    let params = hif8lab_train::model::parameters(&config.model);
    // The step's own GEMM shapes, timed alone on a fresh backend after the steps: the share
    // of a step they would take on their own.
    let gemms = crate::commands::bench_gemm::step_gemms(config);
    let bf16 = (
        config.train.precision() == hif8lab_train::config::Precision::Bf16,
        config.train.gemm != hif8lab_train::config::Gemm::F32,
    );
    let shape_s =
        crate::commands::bench_gemm::gemm_seconds(&make()?, &gemms, &|b: &B| b.sync(), bf16)?;
    let gemm_s = crate::commands::bench_gemm::step_seconds(&gemms, &shape_s);
    // The most tokens/s a step could reach if everything besides its GEMMs were free.
    let gemm_bound = config.tokens_per_step() as f64 / gemm_s.max(1e-12);
    let gemm_gflops = crate::commands::bench_gemm::gemm_flops(&gemms) / gemm_s.max(1e-12) / 1e9;
    let bench = Bench {
        info,
        steps,
        estimators,
        profile,
        p,
        q,
        overhead,
        peak,
        params,
        gemms,
        shape_s,
        gemm_s,
        gemm_bound,
        gemm_gflops,
        gemm_kernel: config
            .train
            .gemm
            .resolve(info_kind)?
            .map_or("f32", |k| k.name()),
        precision: config.train.precision().name(),
    };
    if json {
        bench.print_json()
    } else {
        bench.print_text()
    }
}

/// Runs the benchmark for a preset on a backend.
pub fn bench_train(
    preset: &str,
    sets: &[String],
    backend: &BackendChoice,
    steps: u64,
    json: bool,
    profile: bool,
) -> Result<()> {
    let config = RunConfig::parse(
        &format!("preset '{preset}'"),
        RunConfig::preset_text(preset)?,
        sets,
    )?;
    let resolved = backend.resolve(&mut |n| eprintln!("note: {n}"));
    hif8lab_engine::with_backend_maker!(resolved, make => {
        let make = || {
            let made: Result<_, hif8lab_engine::EngineError> = make();
            made.with_context(|| format!("bench train --backend {backend}"))
        };
        run(make, &config, steps, json, profile)
    })
}
