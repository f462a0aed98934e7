//! A run with more calls per quantizer than the app stores one by one: the counts the app
//! shows equal the run folder's `summary.json`, and a single spike stays visible.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use hif8lab_app::state::{MAX_CALLS, RunView};
use hif8lab_engine::Device;
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_scaling::{CallRecord, Module, QuantizerId, Role};
use hif8lab_train::driver::{Event, Sink};
use hif8lab_train::run::folder::RunFolder;
use hif8lab_train::run::{RunStatus, RunSummary};
use hif8lab_train::{RunConfig, StepReport};

const STEPS: u64 = 25_000;
const SPIKE: u64 = 3_001; // odd: in the half that is merged

#[test]
fn long_run_counts_match_the_summary_and_a_spike_survives() {
    let dir = std::env::temp_dir().join(format!("hif8lab-long-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = RunConfig::parse("smoke", RunConfig::preset_text("smoke").unwrap(), &[])
        .expect("smoke preset");
    config.train.steps = STEPS;
    config.train.trace_every = 1;
    let estimators = vec!["most_recent".to_owned(), "max_window(16)".to_owned()];
    let ids = [Role::A, Role::G].map(|role| QuantizerId {
        block: 1,
        module: Module::Up,
        role,
    });
    let info = CpuBackend::new().info();
    let mut folder =
        RunFolder::create(&dir, &config, &estimators, 0, ids.len(), &info, "f32").unwrap();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 11) as f32 / (1u64 << 53) as f32
    };
    let mut previous = [1.0f32; 2];
    for step in 0..STEPS {
        let calls = ids
            .iter()
            .enumerate()
            .map(|(q, id)| {
                let amax = if step == SPIKE && q == 0 {
                    1024.0
                } else {
                    1.0 + next() * 0.5
                };
                // most_recent: the previous amax; max_window: a generous bound, exceeded only
                // by the spike.
                let est = [previous[q], 2.0];
                previous[q] = amax;
                let above: Vec<u64> = est.iter().map(|e| u64::from(amax > *e) * 3).collect();
                CallRecord {
                    id: *id,
                    step,
                    micro: 0,
                    numel: 4096,
                    amax,
                    est: est.to_vec(),
                    scales: est.iter().map(|e| 128.0 / e).collect(),
                    above_est: above,
                    overflow: vec![u64::from(amax > 100.0), 0],
                    underflow: 1,
                    nonfinite: 0,
                    sqnr_db: Some(if amax > 100.0 { 12.0 } else { 31.0 }),
                }
            })
            .collect();
        let report = StepReport {
            step,
            loss: 3.0,
            lr: 1e-4,
            grad_norm: 1.0,
            qat_enabled: true,
            tokens: 64,
            calls,
            histogram: None,
        };
        folder.event(Event::Report(Box::new(report))).unwrap();
        if step == 1_000 {
            // Mid-run: the folder has its one writer, and the app reads it all the same.
            let e = hif8lab_train::lock::FolderLock::acquire(&dir).unwrap_err();
            assert!(e.to_string().contains("pid"), "{e}");
            let view = RunView::load(&dir).expect("a folder being written reads");
            let calls: u64 = view.calls[&ids[0].into()]
                .iter()
                .map(|c| u64::from(c.calls))
                .sum();
            assert!((1..=1_001).contains(&calls), "{calls} calls read mid-run");
        }
    }
    folder.finish(RunStatus::Finished, None).unwrap();
    let summary = RunSummary::read(&dir).expect("summary.json");
    assert_eq!(summary.counts.calls, STEPS * ids.len() as u64);

    let view = RunView::load(&dir).unwrap();
    // The app's counts are the summary's, call for call.
    assert_eq!(view.calls_above(), summary.counts.calls_above());
    assert_eq!(view.counts, summary.counts);
    assert_eq!(summary.shadow("max_window").unwrap().calls_above_est, 1);
    assert!(summary.shadow("most_recent").unwrap().calls_above_est > 10_000);
    assert_eq!(
        view.calls_above_roles(&[Role::G]),
        summary.counts.calls_above_roles(&[Role::G])
    );
    // Storage is bounded, but every call is accounted for and the spike is kept whole.
    let spiked = &view.calls[&ids[0].into()];
    assert!(spiked.len() <= MAX_CALLS, "{} entries", spiked.len());
    assert!(spiked.len() < STEPS as usize);
    assert_eq!(
        spiked.iter().map(|c| u64::from(c.calls)).sum::<u64>(),
        STEPS
    );
    let holder = spiked
        .iter()
        .rev()
        .find(|c| c.step <= SPIKE)
        .expect("an entry covers the spike");
    assert_eq!(
        holder.amax, 1024.0,
        "the spike's amax is the entry's maximum"
    );
    assert_eq!(
        holder.calls_above[1], 1,
        "the excursion above max_window is kept"
    );
    assert!(holder.est[1] < holder.amax);
    assert!(holder.calls > 1, "the spike sits in a merged entry");
    let _ = std::fs::remove_dir_all(&dir);
}
