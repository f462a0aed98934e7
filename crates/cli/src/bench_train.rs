//! `hif8lab bench train`: tokens/s of a plain run and of the same run with QAT (all shadow
//! estimators) measured in one process, their ratio, submissions and blocking syncs per
//! step, and peak memory.

use std::time::Instant;

use anyhow::{Context, Result};
use hif8lab_engine::Backend;
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::gpu::GpuBackend;
use hif8lab_train::{RunConfig, Trainer};

struct Figures {
    tokens_per_s: f64,
    ms_per_step: f64,
    submits_per_step: f64,
    syncs_per_step: f64,
}

fn measure<B: Backend>(backend: B, config: RunConfig, steps: u64) -> Result<Figures> {
    let mut t = Trainer::new(backend, config)?;
    // Warm-up (pipeline compilation, allocation), not timed.
    for _ in 0..2 {
        t.step()?;
    }
    t.finish()?;
    let before = t.backend().counters();
    let start = Instant::now();
    let mut tokens = 0u64;
    for _ in 0..steps {
        t.step()?;
        for r in t.poll()? {
            tokens += r.tokens;
        }
    }
    let steady = t.backend().counters();
    for r in t.finish()? {
        tokens += r.tokens;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(Figures {
        tokens_per_s: tokens as f64 / secs,
        ms_per_step: secs * 1e3 / steps as f64,
        submits_per_step: (steady.submits - before.submits) as f64 / steps as f64,
        syncs_per_step: (steady.blocking_syncs - before.blocking_syncs) as f64 / steps as f64,
    })
}

/// Peak resident memory of this process in MiB (Linux), if known.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn run<B: Backend>(
    make: impl Fn() -> Result<B>,
    config: &RunConfig,
    steps: u64,
    json: bool,
) -> Result<()> {
    let info = make()?.info();
    let mut plain = config.clone();
    plain.qat.enabled = false;
    let mut qat = config.clone();
    qat.qat.enabled = true;
    qat.qat.warmup_steps = 0;
    let p = measure(make()?, plain, steps)?;
    let q = measure(make()?, qat.clone(), steps)?;
    let overhead = p.tokens_per_s / q.tokens_per_s;
    let estimators = qat.qat.scaling.estimators().len();
    let peak = peak_rss_mib();
    if json {
        println!(
            "{{\"backend\":{:?},\"adapter\":{:?},\"device_type\":{:?},\"steps\":{steps},\"estimators\":{estimators},\"tokens_per_s_plain\":{:.1},\"tokens_per_s_qat\":{:.1},\"ms_per_step_plain\":{:.2},\"ms_per_step_qat\":{:.2},\"qat_overhead\":{overhead:.4},\"submits_per_step\":{:.2},\"blocking_syncs_per_step\":{:.2},\"peak_rss_mib\":{}}}",
            info.kind,
            info.adapter,
            info.device_type,
            p.tokens_per_s,
            q.tokens_per_s,
            p.ms_per_step,
            q.ms_per_step,
            q.submits_per_step,
            q.syncs_per_step,
            peak.map(|v| format!("{v:.1}"))
                .unwrap_or_else(|| "null".into())
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
            "  submits/step {:.2}, blocking syncs/step {:.2} (QAT run, steady state)",
            q.submits_per_step, q.syncs_per_step
        );
        if let Some(m) = peak {
            println!("  peak resident memory: {m:.1} MiB");
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
) -> Result<()> {
    let config = RunConfig::parse(
        &format!("preset '{preset}'"),
        RunConfig::preset_text(preset)?,
        sets,
    )?;
    match backend {
        "cpu" => run(|| Ok(CpuBackend::new()), &config, steps, json),
        _ => run(
            || GpuBackend::new_blocking().context("bench train --backend gpu"),
            &config,
            steps,
            json,
        ),
    }
}
