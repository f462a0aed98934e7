//! The run driver: its probe and checkpoint schedule, blocking and non-blocking driving
//! give the same reports, and stop checkpoints where it stopped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::sync::Arc;
use std::time::Duration;

mod common;

use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::gpu::GpuBackend;
use hif8lab_train::config::{PRESETS, RunConfig};
use hif8lab_train::driver::{
    Control, Driver, Event, Memory, Progress, Schedule, Sink, in_flight_bound,
};
use hif8lab_train::eval::ProbeSet;
use hif8lab_train::{TrainError, Trainer};

fn tiny() -> RunConfig {
    let sets: Vec<String> = [
        "model.d_model=32",
        "model.layers=3",
        "model.d_ff=64",
        "model.context=16",
        "train.batch=2",
        "train.steps=6",
        "qat.warmup_steps=2",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    RunConfig::parse("tiny", PRESETS[0].1, &sets).unwrap()
}

/// Everything the driver emitted, in order, as short labels.
#[derive(Default)]
struct Log {
    events: Vec<String>,
    losses: Vec<u32>,
}

impl Sink for Log {
    fn event(&mut self, e: Event) -> Result<(), TrainError> {
        self.events.push(match e {
            Event::Report(r) => {
                self.losses.push(r.loss.to_bits());
                format!("report {}", r.step)
            }
            Event::Probes(p) => format!("probes {}", p.step),
            Event::Checkpoint { step, .. } => format!("checkpoint {step}"),
            Event::Weights(_) => "weights".into(),
        });
        Ok(())
    }
}

fn schedule(config: &RunConfig) -> Schedule {
    Schedule {
        probes: Some(Arc::new(ProbeSet::for_data(&config.data))),
        eval_every: 2,
        eval_at_start: true,
        checkpoint_every: 3,
        checkpoint_at_end: true,
        keep_weights: true,
        max_in_flight: 2,
        frame_wait: None,
    }
}

#[test]
fn schedule_runs_in_order_and_both_ways_of_driving_agree() {
    let config = tiny();
    let mut blocking = Log::default();
    let mut d = Driver::new(
        Trainer::from_config(CpuBackend::new(), config.clone()).unwrap(),
        schedule(&config),
    );
    assert_eq!(d.run(&mut blocking, &|| false).unwrap(), Progress::Finished);
    let expected: Vec<String> = [
        "probes 0",
        "report 0",
        "report 1",
        "probes 2",
        "report 2",
        "checkpoint 3",
        "report 3",
        "probes 4",
        "report 4",
        "report 5",
        "probes 6",
        "weights",
        "checkpoint 6",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(blocking.events, expected);
    // Driven from a "frame loop": small budgets, never blocking.
    let mut framed = Log::default();
    let mut d = Driver::new(
        Trainer::from_config(CpuBackend::new(), config.clone()).unwrap(),
        Schedule {
            checkpoint_every: 0,
            checkpoint_at_end: false,
            ..schedule(&config)
        },
    );
    let mut calls = 0;
    loop {
        calls += 1;
        match d
            .advance(Control::Run, Duration::ZERO, false, &mut framed)
            .unwrap()
        {
            Progress::Finished => break,
            Progress::Stopped => panic!("not stopped"),
            _ => assert!(calls < 10_000, "the frame loop makes progress"),
        }
    }
    assert_eq!(framed.losses, blocking.losses, "same steps, same losses");
    let probes: Vec<&String> = framed
        .events
        .iter()
        .filter(|e| e.starts_with("probes"))
        .collect();
    assert_eq!(probes, ["probes 0", "probes 2", "probes 4", "probes 6"]);
    assert_eq!(framed.events.last().unwrap(), "weights");
}

/// A slice that runs a step on the CPU (its report is ready as it ends) reports it in the same
/// slice: a caller that shows each slice's events (the browser's worker posts them after each)
/// is never a step behind, and a Pause after a slice has nothing left to report.
#[test]
fn a_cpu_slice_reports_the_step_it_ran() {
    let config = tiny();
    let mut d = Driver::new(
        Trainer::from_config(CpuBackend::new(), config.clone()).unwrap(),
        Schedule {
            max_in_flight: 3,
            ..Schedule::default()
        },
    );
    for step in 0..4 {
        let mut log = Log::default();
        let p = d
            .advance(Control::Run, Duration::ZERO, false, &mut log)
            .unwrap();
        assert_eq!(p, Progress::Working);
        assert_eq!(log.events, [format!("report {step}")], "slice {step}");
        assert_eq!(d.trainer().in_flight(), 0);
    }
    let mut log = Log::default();
    d.advance(Control::Pause, Duration::ZERO, false, &mut log)
        .unwrap();
    assert!(
        log.events.is_empty(),
        "nothing left for the pause: {:?}",
        log.events
    );
    assert_eq!(d.trainer().steps_done(), 4);
}

#[test]
fn stop_checkpoints_where_it_stopped_and_pause_enqueues_nothing() {
    let config = tiny();
    let mut d = Driver::new(
        Trainer::from_config(CpuBackend::new(), config.clone()).unwrap(),
        Schedule {
            checkpoint_at_end: true,
            ..Schedule::default()
        },
    );
    let mut log = Log::default();
    for _ in 0..2 {
        d.advance(Control::Run, Duration::ZERO, true, &mut log)
            .unwrap();
    }
    let before = d.trainer().steps_done();
    d.advance(Control::Pause, Duration::ZERO, true, &mut log)
        .unwrap();
    assert_eq!(d.trainer().steps_done(), before, "pause enqueues nothing");
    assert_eq!(
        d.trainer().in_flight(),
        0,
        "a blocking pause delivers what was in flight"
    );
    let p = d
        .advance(Control::Stop, Duration::ZERO, true, &mut log)
        .unwrap();
    assert_eq!(p, Progress::Stopped);
    assert_eq!(log.events.last().unwrap(), &format!("checkpoint {before}"));
    // Stopped stays stopped.
    let mut memory = Memory::default();
    assert_eq!(
        d.advance(Control::Run, Duration::ZERO, true, &mut memory)
            .unwrap(),
        Progress::Stopped
    );
    assert!(memory.reports.is_empty());
}

#[test]
fn steps_in_flight_fit_the_frame_wait() {
    let ms = Duration::from_millis;
    let wait = Some(ms(50));
    // Without a wait or before a step's time is known: the schedule's bound.
    assert_eq!(in_flight_bound(3, None, Some(ms(1000))), 3);
    assert_eq!(in_flight_bound(3, wait, None), 3);
    // As many as fit in the wait, at least one, at most the bound (0: none).
    assert_eq!(in_flight_bound(3, wait, Some(ms(2800))), 1);
    assert_eq!(in_flight_bound(3, wait, Some(ms(20))), 2);
    assert_eq!(in_flight_bound(3, wait, Some(ms(5))), 3);
    assert_eq!(in_flight_bound(0, wait, Some(ms(10))), 5);
}

/// On a GPU (the device a page's frames share) steps queue ahead of their reports: up to
/// the schedule's bound, or with a frame wait shorter than a step one at a time once a
/// step's time is known — and the losses are the same either way.
#[test]
fn a_frame_wait_keeps_one_step_in_flight_on_the_gpu() {
    let (Some(first), Some(second)) = (common::gpu(), common::gpu()) else {
        return;
    };
    let config = tiny();
    let run = |gpu: GpuBackend, frame_wait: Option<Duration>| {
        let schedule = Schedule {
            max_in_flight: 3,
            frame_wait,
            ..Schedule::default()
        };
        let trainer = Trainer::from_config(gpu, config.clone());
        let mut d = Driver::new(trainer.unwrap(), schedule);
        let mut log = Log::default();
        // The most steps in flight once a step's time was known.
        let mut most = 0;
        for calls in 0.. {
            assert!(calls < 100_000, "the frame loop makes progress");
            match d
                .advance(Control::Run, Duration::ZERO, false, &mut log)
                .unwrap()
            {
                Progress::Finished => break,
                Progress::Stopped => panic!("not stopped"),
                _ => {}
            }
            if d.step_time().is_some() {
                most = most.max(d.trainer().in_flight());
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        (most, log.losses)
    };
    let (unbounded, losses) = run(first, None);
    let (bounded, same) = run(second, Some(Duration::ZERO));
    assert!(
        unbounded >= 2,
        "without a wait steps queue ahead ({unbounded} at most)"
    );
    assert_eq!(bounded, 1, "a wait shorter than a step keeps one in flight");
    assert_eq!(losses, same, "the same steps either way");
}
