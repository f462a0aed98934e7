//! `hif8lab bench kernels`: GPU kernel throughput (copy, qdq, quant_stats, matmul) beside
//! the CPU backend, all measured in one run and reported with the adapter's name.

use std::time::Instant;

use anyhow::{Context, Result};
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::gpu::GpuBackend;
use hif8lab_engine::prelude::*;
use hif8lab_engine::{BankConfig, Layout, MatmulSpec};
use hif8lab_scaling::ScalingConfig;

/// One matmul measurement.
struct MatmulFigure {
    m: usize,
    n: usize,
    k: usize,
    layout: Layout,
    fused: bool,
    gflops: f64,
}

impl MatmulFigure {
    fn json(&self) -> String {
        format!(
            "{{\"m\":{},\"n\":{},\"k\":{},\"layout\":\"{}\",\"fused\":{},\"gflops\":{:.3}}}",
            self.m,
            self.n,
            self.k,
            self.layout.name(),
            self.fused,
            self.gflops
        )
    }
}

/// Seconds of the fastest run of `f` (after one warm-up), repeating until at least
/// `min_secs` passed and `min_reps` runs were timed. The minimum is the figure least
/// disturbed by other load on a shared machine; numpy is timed the same way.
fn time_per_run(min_reps: usize, min_secs: f64, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut reps = 0;
    let mut best = f64::INFINITY;
    while reps < min_reps || start.elapsed().as_secs_f64() < min_secs {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
        reps += 1;
    }
    best
}

/// A square product of size `s`, fused quantization of both operands when asked (bank
/// quantizers 0 and 1).
fn matmul_spec(s: usize, layout: Layout, fused: bool) -> MatmulSpec {
    MatmulSpec {
        fuse_a: fused.then_some(0),
        fuse_b: fused.then_some(1),
        ..MatmulSpec::new(s, s, s, layout)
    }
}

fn pseudo_random(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = hif8lab_format::hash_u32(seed, i as u32);
            (h >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

/// Runs the benchmark and prints a table or one JSON object.
pub fn bench_kernels(sizes: &[usize], elements: usize, numpy: bool, json: bool) -> Result<()> {
    // The CPU figures come first, before a (possibly CPU-emulated) GPU device exists whose
    // worker threads could compete for the cores.
    let scaling = ScalingConfig::default().plan()?;
    let k = scaling.estimators().len();
    let cpu = CpuBackend::new();
    let cpu_bank = cpu.new_bank(&BankConfig::new(2, scaling.clone()))?;
    cpu.set_scales(&cpu_bank, &vec![15.0 / 40.0; 2 * k])?;
    // Warm up (thread pool start, page faults, clocks) on the largest size, untimed.
    if let Some(&s) = sizes.iter().max() {
        let (a, b) = (
            cpu.upload(&pseudo_random(s * s, 2))?,
            cpu.upload(&pseudo_random(s * s, 3))?,
        );
        let c = cpu.zeros(s * s)?;
        let warm = Instant::now();
        while warm.elapsed().as_secs_f64() < 0.5 {
            cpu.matmul(&a, &b, &c, &MatmulSpec::new(s, s, s, Layout::NN), None)?;
        }
    }
    let cpu_mm = matmul_figures(&cpu, &cpu_bank, sizes, (3, 0.5), &|| {})?;
    let numpy_figures = if numpy { numpy_gemm(sizes) } else { Vec::new() };

    let gpu = GpuBackend::new_blocking().context("bench kernels needs a GPU adapter")?;
    let info = gpu.info();
    let emulated = info.device_type == "Cpu";
    if emulated {
        eprintln!(
            "warning: adapter '{}' is a CPU ({}): these are emulated figures, not GPU performance",
            info.adapter, info.api
        );
    }
    let n = elements.min((gpu.limits().max_storage_buffer_binding_size / 4) as usize);
    let x = gpu.upload(
        &pseudo_random(n, 1)
            .iter()
            .map(|v| v * 40.0)
            .collect::<Vec<_>>(),
    )?;
    let y = gpu.zeros(n)?;
    let bank = gpu.new_bank(&BankConfig::new(2, scaling))?;
    gpu.set_scales(&bank, &vec![15.0 / 40.0; 2 * k])?;
    gpu.wait_idle();
    let bytes = n as f64 * 4.0;
    let copy_s = time_per_run(5, 0.3, || {
        let _ = gpu.copy_kernel(&x, &y);
        gpu.wait_idle();
    });
    let qdq_s = time_per_run(5, 0.3, || {
        let _ = gpu.qdq(&x, &y, &bank, 0);
        gpu.wait_idle();
    });
    let stats_s = time_per_run(5, 0.3, || {
        let _ = gpu.quant_stats(&x, &bank, 0);
        gpu.wait_idle();
    });
    let copy_gbps = 2.0 * bytes / copy_s / 1e9;
    let qdq_gbps = 2.0 * bytes / qdq_s / 1e9;
    let stats_gbps = bytes / stats_s / 1e9;

    let gpu_mm = matmul_figures(&gpu, &bank, sizes, (2, 0.2), &|| gpu.wait_idle())?;
    let figures = Figures {
        adapter: info.adapter,
        api: info.api,
        device_type: info.device_type,
        emulated,
        cpu_adapter: cpu.info().adapter,
        elements: n,
        copy_gbps,
        qdq_gbps,
        stats_gbps,
        gpu_mm,
        cpu_mm,
        numpy: numpy_figures,
    };
    if json {
        crate::output::outln!("{}", figures.json());
    } else {
        figures.print()?;
    }
    Ok(())
}

/// numpy's f32 GEMM GFLOP/s at each size, measured by a python3 subprocess in this run
/// (empty when python3 or numpy is missing; a note is printed).
fn numpy_gemm(sizes: &[usize]) -> Vec<(usize, f64)> {
    let script = format!(
        "import time, numpy as np\n\
         for n in {sizes:?}:\n\
         \x20   rng = np.random.default_rng(0)\n\
         \x20   a = rng.standard_normal((n, n), dtype=np.float32); b = rng.standard_normal((n, n), dtype=np.float32)\n\
         \x20   a @ b\n\
         \x20   reps, t0, best = 0, time.perf_counter(), 1e9\n\
         \x20   while reps < 3 or time.perf_counter() - t0 < 0.5:\n\
         \x20       t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t); reps += 1\n\
         \x20   print(n, 2 * n**3 / best / 1e9)\n"
    );
    match std::process::Command::new("python3")
        .arg("-c")
        .arg(&script)
        .output()
    {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
            })
            .collect(),
        _ => {
            eprintln!("note: python3 with numpy not available; no numpy comparison");
            Vec::new()
        }
    }
}

/// Square matmul figures on `backend` for each size, layout and fused or not; `(runs, secs)`:
/// the least runs and seconds timed per figure; `wait` waits for the device after each product.
fn matmul_figures<B: Backend>(
    backend: &B,
    bank: &B::Bank,
    sizes: &[usize],
    (runs, secs): (usize, f64),
    wait: &dyn Fn(),
) -> Result<Vec<MatmulFigure>> {
    let mut out = Vec::new();
    for &s in sizes {
        let (a, b, c) = (
            backend.upload(&pseudo_random(s * s, 2))?,
            backend.upload(&pseudo_random(s * s, 3))?,
            backend.zeros(s * s)?,
        );
        let flops = 2.0 * (s as f64).powi(3);
        for layout in Layout::ALL {
            for fused in [false, true] {
                let spec = matmul_spec(s, layout, fused);
                let per_run = time_per_run(runs, secs, || {
                    let _ = backend.matmul(&a, &b, &c, &spec, Some(bank));
                    wait();
                });
                out.push(MatmulFigure {
                    m: s,
                    n: s,
                    k: s,
                    layout,
                    fused,
                    gflops: flops / per_run / 1e9,
                });
            }
        }
    }
    Ok(out)
}

/// What `bench kernels` measured.
struct Figures {
    adapter: String,
    api: String,
    device_type: String,
    emulated: bool,
    cpu_adapter: String,
    elements: usize,
    copy_gbps: f64,
    qdq_gbps: f64,
    stats_gbps: f64,
    gpu_mm: Vec<MatmulFigure>,
    cpu_mm: Vec<MatmulFigure>,
    numpy: Vec<(usize, f64)>,
}

impl Figures {
    /// The CPU backend's plain NN figure at size `s`.
    fn cpu_nn(&self, s: usize) -> Option<f64> {
        self.cpu_mm
            .iter()
            .find(|f| f.m == s && f.layout == Layout::NN && !f.fused)
            .map(|f| f.gflops)
    }

    /// One JSON object (`--json`).
    fn json(&self) -> String {
        let list = |v: &[MatmulFigure]| {
            v.iter()
                .map(MatmulFigure::json)
                .collect::<Vec<_>>()
                .join(",")
        };
        let np = self
            .numpy
            .iter()
            .map(|(s, g)| {
                let ratio = self.cpu_nn(*s).map(|c| c / g).unwrap_or(f64::NAN);
                format!("{{\"n\":{s},\"gflops\":{g:.3},\"cpu_backend_ratio\":{ratio:.3}}}")
            })
            .collect::<Vec<_>>()
            .join(",");
        let (copy_gbps, qdq_gbps, stats_gbps) = (self.copy_gbps, self.qdq_gbps, self.stats_gbps);
        let (emulated, n) = (self.emulated, self.elements);
        format!(
            "{{\"adapter\":{:?},\"backend\":{:?},\"device_type\":{:?},\"emulated\":{emulated},\"cpu\":{:?},\"elements\":{n},\"copy_gbps\":{copy_gbps:.3},\"qdq_gbps\":{qdq_gbps:.3},\"stats_gbps\":{stats_gbps:.3},\"qdq_ratio\":{:.3},\"stats_ratio\":{:.3},\"matmul\":[{}],\"cpu_matmul\":[{}],\"numpy_matmul\":[{np}]}}",
            self.adapter,
            self.api,
            self.device_type,
            self.cpu_adapter,
            qdq_gbps / copy_gbps,
            stats_gbps / copy_gbps,
            list(&self.gpu_mm),
            list(&self.cpu_mm)
        )
    }

    /// The human-readable table.
    fn print(&self) -> Result<()> {
        let (copy_gbps, qdq_gbps, stats_gbps) = (self.copy_gbps, self.qdq_gbps, self.stats_gbps);
        let (emulated, n) = (self.emulated, self.elements);
        let bytes = n as f64 * 4.0;
        crate::output::outln!(
            "bench kernels on '{}' ({}, {}){}",
            self.adapter,
            self.api,
            self.device_type,
            if emulated {
                " — EMULATED (CPU adapter)"
            } else {
                ""
            }
        );
        crate::output::outln!("elementwise over {n} f32 ({:.0} MiB):", bytes / 1048576.0);
        crate::output::outln!("  copy         {copy_gbps:8.2} GB/s   1.000");
        crate::output::outln!(
            "  qdq          {qdq_gbps:8.2} GB/s   {:.3} of copy",
            qdq_gbps / copy_gbps
        );
        crate::output::outln!(
            "  quant_stats  {stats_gbps:8.2} GB/s   {:.3} of copy (reads only; 5 estimators)",
            stats_gbps / copy_gbps
        );
        crate::output::outln!("matmul GFLOP/s (GPU | CPU backend '{}'):", self.cpu_adapter);
        crate::output::outln!(
            "  {:>5} {:>6} {:>6} {:>10} {:>10}",
            "size",
            "layout",
            "fused",
            "gpu",
            "cpu"
        );
        for (g, c) in self.gpu_mm.iter().zip(&self.cpu_mm) {
            crate::output::outln!(
                "  {:>5} {:>6} {:>6} {:>10.2} {:>10.2}",
                g.m,
                g.layout.name(),
                g.fused,
                g.gflops,
                c.gflops
            );
        }
        for (s, g) in &self.numpy {
            if let Some(c) = self.cpu_nn(*s) {
                crate::output::outln!(
                    "  numpy (OpenBLAS) {s}³: {g:.2} GFLOP/s; CPU backend / numpy = {:.3}",
                    c / g
                );
            }
        }
        Ok(())
    }
}
