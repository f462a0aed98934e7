//! `hif8lab bench train`: tokens/s of a plain run and of the same run with QAT (all shadow
//! estimators) measured in one process through the run driver, their ratio; per step:
//! submissions, blocking syncs, kernel dispatches, bind groups created and host time spent
//! enqueuing (recording and submitting) a step; and peak memory. `--profile` (CPU backend)
//! times every op of the timed steps and prints where a step's time goes.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hif8lab_engine::Backend;
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::gpu::GpuBackend;
use hif8lab_train::driver::{Control, Driver, Event, Schedule};
use hif8lab_train::{RunConfig, Trainer};

/// Per-op timing where the backend offers it (the CPU backend; GPU ops run asynchronously
/// on the device and are not timed here).
trait Profiled {
    fn start_profile(&self) {}
    fn take_profile(&self) -> Vec<(&'static str, hif8lab_engine::cpu::OpTime)> {
        Vec::new()
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
}

impl Profiled for GpuBackend {}

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
}

/// Steps `steps` timed steps through the run driver (after 2 untimed warm-up steps) and
/// reads the backend's counters around them.
fn measure<B: Backend + Profiled>(
    backend: B,
    mut config: RunConfig,
    steps: u64,
    profile: bool,
) -> Result<Figures> {
    const WARMUP: u64 = 2;
    config.train.steps = WARMUP + steps;
    config.train.eval_every = 0;
    config.train.checkpoint_every = 0;
    let trainer = Trainer::new(backend, config)?;
    let mut driver = Driver::new(trainer, Schedule::default());
    let mut tokens = 0u64;
    let mut sink = |e: Event| {
        if let Event::Report(r) = e
            && r.step >= WARMUP
        {
            tokens += r.tokens;
        }
        Ok(())
    };
    // Warm-up (pipeline compilation, allocation), not timed: run until WARMUP steps are
    // delivered.
    while driver.trainer().steps_done() < WARMUP {
        driver.advance(Control::Run, Duration::ZERO, true, &mut sink)?;
    }
    driver.advance(Control::Pause, Duration::ZERO, true, &mut sink)?;
    let before = driver.trainer().backend().counters();
    let host_before = driver.host_time();
    if profile {
        driver.trainer().backend().start_profile();
    }
    let start = Instant::now();
    driver.run(&mut sink, &|| false)?;
    let secs = start.elapsed().as_secs_f64();
    let ops = driver.trainer().backend().take_profile();
    let after = driver.trainer().backend().counters();
    let host = (driver.host_time() - host_before).as_secs_f64();
    let per = |a: u64, b: u64| (a - b) as f64 / steps as f64;
    Ok(Figures {
        tokens_per_s: tokens as f64 / secs,
        ms_per_step: secs * 1e3 / steps as f64,
        host_ms_per_step: host * 1e3 / steps as f64,
        submits_per_step: per(after.submits, before.submits),
        syncs_per_step: per(after.blocking_syncs, before.blocking_syncs),
        dispatches_per_step: per(after.dispatches, before.dispatches),
        bind_groups_per_step: per(after.bind_groups_created, before.bind_groups_created),
        seconds: secs,
        profile: ops,
    })
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

fn run<B: Backend + Profiled>(
    make: impl Fn() -> Result<B>,
    config: &RunConfig,
    steps: u64,
    json: bool,
    profile: bool,
) -> Result<()> {
    let info = make()?.info();
    let mut plain = config.clone();
    plain.qat.enabled = false;
    let mut qat = config.clone();
    qat.qat.enabled = true;
    qat.qat.warmup_steps = 0;
    let p = measure(make()?, plain, steps, profile)?;
    let q = measure(make()?, qat.clone(), steps, profile)?;
    let overhead = p.tokens_per_s / q.tokens_per_s;
    let estimators = qat.qat.scaling.estimators().len();
    let peak = peak_rss_mib();
    if json {
        println!(
            "{{\"backend\":{:?},\"adapter\":{:?},\"device_type\":{:?},\"steps\":{steps},\"estimators\":{estimators},\"tokens_per_s_plain\":{:.1},\"tokens_per_s_qat\":{:.1},\"ms_per_step_plain\":{:.2},\"ms_per_step_qat\":{:.2},\"qat_overhead\":{overhead:.4},\"submits_per_step\":{:.2},\"blocking_syncs_per_step\":{:.2},\"dispatches_per_step\":{:.1},\"bind_groups_created_per_step\":{:.2},\"host_ms_per_step\":{:.3},\"host_ms_per_step_plain\":{:.3},\"peak_rss_mib\":{},\"threads\":{},\"profile_plain\":{},\"profile_qat\":{}}}",
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
            peak.map(|v| format!("{v:.1}"))
                .unwrap_or_else(|| "null".into()),
            crate::bench::threads(),
            if profile {
                profile_json(&p, steps)
            } else {
                "null".into()
            },
            if profile {
                profile_json(&q, steps)
            } else {
                "null".into()
            },
        );
    } else {
        println!(
            "bench train on {} '{}' ({}), {steps} steps each after 2 warm-up steps",
            info.kind, info.adapter, info.device_type
        );
        println!(
            "  plain: {:>10.1} tok/s {:>9.2} ms/step",
            p.tokens_per_s, p.ms_per_step
        );
        println!(
            "  QAT  : {:>10.1} tok/s {:>9.2} ms/step ({estimators} estimators in every quantizer call)",
            q.tokens_per_s, q.ms_per_step
        );
        println!("  QAT overhead (plain tok/s ÷ QAT tok/s): {overhead:.3}");
        println!(
            "  submits/step {:.2}, blocking syncs/step {:.2}, dispatches/step {:.1}, bind groups created/step {:.2}, host ms/step {:.3} (QAT run, steady state)",
            q.submits_per_step,
            q.syncs_per_step,
            q.dispatches_per_step,
            q.bind_groups_per_step,
            q.host_ms_per_step
        );
        if let Some(m) = peak {
            println!("  peak resident memory: {m:.1} MiB");
        }
        if profile {
            if p.profile.is_empty() {
                println!("  (--profile times ops on the CPU backend only)");
            } else {
                for line in profile_table("plain", &p, steps)
                    .into_iter()
                    .chain(profile_table("QAT", &q, steps))
                {
                    println!("{line}");
                }
            }
        }
    }
    Ok(())
}

/// Runs the benchmark for a preset on a backend.
pub fn bench_train(
    preset: &str,
    sets: &[String],
    backend: &str,
    steps: u64,
    json: bool,
    profile: bool,
) -> Result<()> {
    let config = RunConfig::parse(
        &format!("preset '{preset}'"),
        RunConfig::preset_text(preset)?,
        sets,
    )?;
    match backend {
        "cpu" => run(|| Ok(CpuBackend::new()), &config, steps, json, profile),
        _ => run(
            || GpuBackend::new_blocking().context("bench train --backend gpu"),
            &config,
            steps,
            json,
            profile,
        ),
    }
}
