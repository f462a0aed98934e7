//! The CPU backend's results do not depend on its thread count: a QAT run (big enough that
//! matmul, attention, fake quantization and statistics all split into several pieces) gives
//! bit-identical losses and quantizer statistics on 1, 2 and 3 threads.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use hif8lab_engine::cpu::CpuBackend;
use hif8lab_train::{RunConfig, Trainer};

fn run(threads: usize) -> (Vec<u32>, Vec<u32>) {
    let config = RunConfig::parse(
        "smoke",
        hif8lab_train::config::PRESETS[0].1,
        &[
            "model.d_model=128".into(),
            "model.d_ff=384".into(),
            "model.context=64".into(),
            "train.batch=4".into(),
            "train.steps=4".into(),
            "qat.warmup_steps=1".into(),
            "qat.enabled=true".into(),
        ],
    )
    .unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let mut t = Trainer::from_config(CpuBackend::new(), config).unwrap();
        while !t.finished() {
            t.step().unwrap();
        }
        let reports = t.finish().unwrap();
        let losses = reports.iter().map(|r| r.loss.to_bits()).collect();
        let amax = reports
            .iter()
            .flat_map(|r| r.calls.iter().map(|c| c.amax.to_bits()))
            .collect();
        (losses, amax)
    })
}

#[test]
fn losses_are_bit_identical_at_any_thread_count() {
    let one = run(1);
    assert!(!one.1.is_empty(), "quantizer calls recorded");
    assert_eq!(run(2), one);
    assert_eq!(run(3), one);
}
