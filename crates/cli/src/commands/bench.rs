//! `hif8lab bench`: throughput figures, each measured against a reference in the same run.
//!
//! Figures are best-of-N wall times on one thread; the machine is named in the output so
//! numbers are never quoted without their context.

use std::hint::black_box;
use std::time::Instant;

use anyhow::Result;
use clap::Subcommand;
use hif8lab_format::{FakeQuant, Format, Overflow, Rounding};

use crate::output::Outcome;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// CPU fake-quantization throughput (one thread) and its ratio to a plain copy.
    Codec {
        /// Elements per buffer (at least 1, at most 2^30).
        #[arg(long, default_value_t = 1 << 22, value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
        elements: u64,
        /// Timed repetitions (the best is reported).
        #[arg(long, default_value_t = 7)]
        reps: usize,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// GPU kernels (copy, qdq, quant_stats, matmul) beside the CPU backend, one run.
    Kernels {
        /// Square matmul sizes to measure.
        #[arg(long, value_delimiter = ',', default_value = "256,512,1024,2048")]
        sizes: Vec<usize>,
        /// Elements of the elementwise benchmarks.
        #[arg(long, default_value_t = 1 << 24)]
        elements: usize,
        /// Also time numpy's f32 GEMM (python3 + numpy) in the same run.
        #[arg(long)]
        numpy: bool,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Training throughput: a plain run vs QAT with all shadow estimators, one process.
    Train {
        /// Preset to measure.
        #[arg(long, default_value = "smoke")]
        preset: String,
        /// Override a key of the preset.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// `gpu` (default), `gpu:ADAPTER`, `cpu` or `auto`.
        #[arg(long, default_value = "gpu")]
        backend: hif8lab_engine::BackendChoice,
        /// Timed steps per variant (at least 1).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
        steps: u64,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Time every op of the timed steps (CPU backend) and print where a step goes.
        #[arg(long)]
        profile: bool,
    },
    /// The CPU backend's GEMMs on a preset's step shapes: f32, fake-quantized on the f32
    /// path and on the bf16 kernel, and bf16-rounded, with the kernel's name.
    Gemm {
        /// Preset whose step shapes are measured.
        #[arg(long, default_value = "small")]
        preset: String,
        /// Override a key of the preset.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Square sizes to measure as well (NN).
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<usize>,
        /// Timed calls per figure (the best is reported; at least 1).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
        reps: u64,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Generation with the key/value cache: prompt and generated tokens per second, peak
    /// resident memory.
    Sample(crate::commands::bench_sample::BenchSampleArgs),
}

pub fn run(cmd: BenchCommand) -> Result<Outcome> {
    match cmd {
        BenchCommand::Codec {
            elements,
            reps,
            json,
        } => bench_codec(elements as usize, reps.max(1), json),
        BenchCommand::Train {
            preset,
            sets,
            backend,
            steps,
            json,
            profile,
        } => {
            crate::commands::bench_train::bench_train(
                &preset,
                &sets,
                &backend,
                steps.max(1),
                json,
                profile,
            )?;
            Ok(Outcome::Ok)
        }
        BenchCommand::Gemm {
            preset,
            sets,
            sizes,
            reps,
            json,
        } => {
            crate::commands::bench_gemm::bench_gemm(&preset, &sets, &sizes, reps as usize, json)?;
            Ok(Outcome::Ok)
        }
        BenchCommand::Sample(args) => {
            crate::commands::bench_sample::run(args)?;
            Ok(Outcome::Ok)
        }
        BenchCommand::Kernels {
            sizes,
            elements,
            numpy,
            json,
        } => {
            crate::commands::bench_kernels::bench_kernels(&sizes, elements.max(1), numpy, json)?;
            Ok(Outcome::Ok)
        }
    }
}

/// Best wall time in seconds of `reps` runs of `f`.
fn best_of(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn bench_codec(n: usize, reps: usize, json: bool) -> Result<Outcome> {
    // Log-uniform magnitudes over 2^-20..2^20 from a fixed integer generator.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let src: Vec<f32> = (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let r = (state >> 32) as u32;
            let exp = 127 - 20 + (r >> 26) % 41;
            f32::from_bits((r & 0x8000_0000) | exp << 23 | (r & 0x7F_FFFF))
        })
        .collect();
    let mut dst = vec![0.0f32; n];
    let copy_s = best_of(reps, || {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
    });
    let cases = [
        ("hif8", FakeQuant::new(Format::HiF8)),
        (
            "hif8-saturate",
            FakeQuant::new(Format::HiF8).with_overflow(Overflow::Saturate),
        ),
        (
            "hif8-hybrid",
            FakeQuant::new(Format::HiF8).with_rounding(Rounding::Hybrid { seed: 1 }),
        ),
        ("e4m3", FakeQuant::new(Format::E4M3)),
        ("e5m2", FakeQuant::new(Format::E5M2)),
    ];
    let scale = 15.0f32 / 1024.0;
    let copy_eps = n as f64 / copy_s;
    let mut rows = Vec::new();
    for (name, quant) in cases {
        let secs = best_of(reps, || {
            quant.qdq_into(black_box(&src), &mut dst, scale);
            black_box(&mut dst);
        });
        let eps = n as f64 / secs;
        rows.push((name, eps, eps / copy_eps));
    }
    let cpu = hif8lab_engine::cpu::cpu_name();
    if json {
        let list: Vec<String> = rows
            .iter()
            .map(|(name, eps, ratio)| {
                format!(
                    "{{\"mode\":\"{name}\",\"elements_per_s\":{eps:.0},\"ratio_to_copy\":{ratio:.4}}}"
                )
            })
            .collect();
        crate::output::outln!(
            "{{\"cpu\":\"{}\",\"threads\":1,\"elements\":{n},\"copy_elements_per_s\":{copy_eps:.0},\"qdq\":[{}]}}",
            cpu.replace('"', "'"),
            list.join(",")
        );
    } else {
        crate::output::outln!(
            "bench codec: CPU '{cpu}', one thread, {n} f32 elements, best of {reps}"
        );
        crate::output::outln!("{:<16} {:>14} {:>10}", "mode", "Melem/s", "vs copy");
        crate::output::outln!("{:<16} {:>14.1} {:>10}", "copy", copy_eps / 1e6, "1.000");
        for (name, eps, ratio) in rows {
            crate::output::outln!("{:<16} {:>14.1} {:>10.3}", name, eps / 1e6, ratio);
        }
    }
    Ok(Outcome::Ok)
}
