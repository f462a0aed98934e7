//! Checkpoint and resume: continuing from a checkpoint is bit-identical to never stopping,
//! on both backends; a mismatched or corrupted checkpoint is a clear error.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

mod common;

use hif8lab_engine::Backend;
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::gpu::GpuBackend;
use hif8lab_train::config::{PRESETS, RunConfig};
use hif8lab_train::models::checkpoint::Checkpoint;
use hif8lab_train::{TrainError, Trainer};

fn tiny(extra: &[&str]) -> RunConfig {
    let mut sets: Vec<String> = [
        "model.d_model=32",
        "model.layers=3",
        "model.d_ff=64",
        "model.context=16",
        "train.batch=2",
        "train.steps=10",
        "qat.warmup_steps=2",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    sets.extend(extra.iter().map(|s| (*s).to_owned()));
    RunConfig::parse("tiny", PRESETS[0].1, &sets).unwrap()
}

fn steps<B: Backend>(t: &mut Trainer<B>, n: u64) -> Vec<u32> {
    for _ in 0..n {
        t.step().unwrap();
    }
    t.finish()
        .unwrap()
        .iter()
        .map(|r| r.loss.to_bits())
        .collect()
}

fn resume_is_bit_identical<B: Backend>(make: impl Fn() -> B, extra: &[&str]) {
    let config = tiny(extra);
    let mut straight = Trainer::from_config(make(), config.clone()).unwrap();
    let all = steps(&mut straight, 10);
    let mut first = Trainer::from_config(make(), config.clone()).unwrap();
    let head = steps(&mut first, 4);
    // Streamed tensor by tensor from the trainer, as a run folder writes it: the bytes of
    // the whole state read back at once.
    let mut streamed = Vec::new();
    hif8lab_train::models::checkpoint::write_source(
        &first.checkpoint_source().unwrap(),
        &mut streamed,
    )
    .unwrap();
    assert!(streamed == first.checkpoint().unwrap().to_bytes());
    // Through bytes, as on disk.
    let ck = Checkpoint::from_bytes("mem", &streamed).unwrap();
    let mut resumed = Trainer::from_config(make(), config).unwrap();
    resumed.restore(&ck).unwrap();
    assert_eq!(resumed.steps_done(), 4);
    let tail = steps(&mut resumed, 6);
    assert_eq!([head, tail].concat(), all);
}

#[test]
fn resume_is_bit_identical_on_the_cpu() {
    // `train.gemm = "auto"`: the bf16 kernel where this CPU has one.
    resume_is_bit_identical(CpuBackend::new, &[]);
}

#[test]
fn resume_is_bit_identical_on_the_cpu_with_the_f32_gemm_and_in_bf16_precision() {
    resume_is_bit_identical(CpuBackend::new, &["train.gemm=f32"]);
    resume_is_bit_identical(CpuBackend::new, &["train.precision=bf16"]);
    resume_is_bit_identical(CpuBackend::new, &["train.precision=bf16", "train.gemm=f32"]);
}

/// `train.gemm` picks the kernel the trainer reports (and each segment records): the bf16
/// kernel under `auto` where the CPU has one, which runs a QAT run's quantized products (the
/// same products, another order of accumulation); `bf16` is refused by name where it has none.
#[test]
fn train_gemm_picks_the_kernel() {
    let found = hif8lab_engine::cpu::bf16::detect();
    let kernel = |gemm: &str| {
        Trainer::from_config(CpuBackend::new(), tiny(&[&format!("train.gemm={gemm}")]))
            .map(|t| t.gemm_kernel())
    };
    assert_eq!(kernel("f32").unwrap(), "f32");
    assert_eq!(kernel("auto").unwrap(), found.map_or("f32", |k| k.name()));
    match found {
        Some(k) => {
            assert_eq!(kernel("bf16").unwrap(), k.name());
            let mut f32_run =
                Trainer::from_config(CpuBackend::new(), tiny(&["train.gemm=f32"])).unwrap();
            let mut bf16_run =
                Trainer::from_config(CpuBackend::new(), tiny(&["train.gemm=bf16"])).unwrap();
            let (a, b) = (steps(&mut f32_run, 6), steps(&mut bf16_run, 6));
            // Quantization starts after 2 warm-up steps: the same bits before; after, the
            // quantized products ran on the kernel (their FLOPs counted there), the rest on
            // the f32 GEMM, and the losses stay within accumulation error of each other.
            assert_eq!(a[..2], b[..2]);
            assert_eq!(f32_run.backend().gemm_flops().1, 0);
            let (plain, on_kernel) = bf16_run.backend().gemm_flops();
            assert!(on_kernel > 0 && plain > on_kernel, "{plain} {on_kernel}");
            for (x, y) in a.iter().zip(&b) {
                let (x, y) = (f32::from_bits(*x), f32::from_bits(*y));
                assert!((x - y).abs() <= 1e-3 * x.abs(), "{x} vs {y}");
            }
        }
        None => {
            let e = kernel("bf16")
                .expect_err("refused without the units")
                .to_string();
            assert!(e.contains("train.gemm"), "{e}");
        }
    }
}

#[test]
fn resume_is_bit_identical_on_the_gpu() {
    if common::gpu().is_none() {
        return;
    }
    resume_is_bit_identical(|| GpuBackend::new_blocking().unwrap(), &[]);
}

#[test]
fn mismatched_and_corrupted_checkpoints_are_rejected() {
    let mut t = Trainer::from_config(CpuBackend::new(), tiny(&[])).unwrap();
    steps(&mut t, 1);
    let ck = t.checkpoint().unwrap();
    let mut other = Trainer::from_config(
        CpuBackend::new(),
        tiny(&["model.d_model=48", "model.heads=4"]),
    )
    .unwrap();
    match other.restore(&ck) {
        Err(TrainError::Checkpoint(m)) => {
            assert!(m.contains("shape") && m.contains("different config"), "{m}")
        }
        r => panic!("expected a shape error, got {r:?}"),
    }
    let mut stripped = ck.clone();
    stripped
        .tensors
        .retain(|t| !t.name.starts_with("optimizer.exp_avg_sq"));
    let mut same = Trainer::from_config(CpuBackend::new(), tiny(&[])).unwrap();
    let e = same.restore(&stripped).unwrap_err().to_string();
    assert!(
        e.contains("optimizer.exp_avg_sq") && e.contains("missing"),
        "{e}"
    );
    let bytes = ck.to_bytes();
    let e = Checkpoint::from_bytes(
        "runs/x/checkpoints/step_1.safetensors",
        &bytes[..bytes.len() / 2],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("checkpoint runs/x/checkpoints/step_1.safetensors:"),
        "{e}"
    );
    // Hugging Face names.
    assert!(ck.get("model.layers.1.mlp.gate_proj.weight").is_some());
    assert!(ck.get("lm_head.weight").is_some());
    assert!(ck.get("quantizers.0.history").is_some());
}
