//! Delayed-scaling semantics on scripted amax sequences, with hand-computed expectations.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use hif8lab_scaling::estimator::{Ema, Estimator, Holt, MaxWindow, MeanWindow, MostRecent};
use hif8lab_scaling::{ColdStart, EstimatorSpec, QuantizerState, ScalingConfig};
use proptest::prelude::*;

/// A config whose only estimators are `specs` (the first one active).
fn config(specs: &[&str], window: usize) -> ScalingConfig {
    let specs: Vec<EstimatorSpec> = specs.iter().map(|s| s.parse().expect(s)).collect();
    ScalingConfig {
        estimator: specs[0],
        window,
        shadow: specs,
        ..ScalingConfig::default()
    }
}

/// The estimate in effect at each call of `amax` for each estimator.
fn estimates(specs: &[&str], window: usize, amax: &[f32]) -> Vec<Vec<f32>> {
    let mut state = QuantizerState::new(&config(specs, window).plan().unwrap());
    let mut per_estimator = vec![Vec::new(); specs.len()];
    for a in amax {
        for (k, d) in state.call(*a).iter().enumerate() {
            per_estimator[k].push(d.est);
        }
    }
    per_estimator
}

fn above(est: &[f32], amax: &[f32]) -> usize {
    est.iter().zip(amax).filter(|(e, a)| a > e).count()
}

#[test]
fn single_spike_then_decay() {
    let amax = [1.0, 1.0, 1.0, 8.0, 4.0, 2.0, 1.0, 1.0];
    let e = estimates(
        &["most_recent", "max_window(64)", "mean_window(2)", "current"],
        64,
        &amax,
    );
    assert_eq!(e[0], [1.0, 1.0, 1.0, 1.0, 8.0, 4.0, 2.0, 1.0]);
    assert_eq!(e[1], [1.0, 1.0, 1.0, 1.0, 8.0, 8.0, 8.0, 8.0]);
    assert_eq!(e[2], [1.0, 1.0, 1.0, 1.0, 4.5, 6.0, 3.0, 1.5]);
    assert_eq!(e[3], amax);
    // Every delayed estimator misses the spike itself; only max_window keeps headroom after.
    assert_eq!(above(&e[0], &amax), 1);
    assert_eq!(above(&e[1], &amax), 1);
    assert_eq!(above(&e[3], &amax), 0);
}

#[test]
fn monotone_ramp_up_most_recent_underestimates_every_call() {
    let amax = [1.0, 2.0, 3.0, 4.0, 5.0];
    let e = estimates(&["most_recent", "max_window(3)", "ema(0.5)"], 3, &amax);
    assert_eq!(e[0], [1.0, 1.0, 2.0, 3.0, 4.0]);
    assert_eq!(above(&e[0], &amax), 4, "all but the cold-start call");
    assert_eq!(above(&e[1], &amax), 4, "a max cannot predict growth either");
    // ema(0.5) over the stored history (3 entries): 1 → 1.5 → 2.25 ; then [2,3,4] → 2.5 → 3.25
    assert_eq!(e[2], [1.0, 1.0, 1.5, 2.25, 3.25]);
}

#[test]
fn step_change() {
    let amax = [1.0, 1.0, 1.0, 4.0, 4.0, 4.0];
    let e = estimates(
        &["most_recent", "mean_window(2)", "max_window(2)"],
        2,
        &amax,
    );
    assert_eq!(e[0], [1.0, 1.0, 1.0, 1.0, 4.0, 4.0]);
    assert_eq!(e[1], [1.0, 1.0, 1.0, 1.0, 2.5, 4.0]);
    assert_eq!(e[2], [1.0, 1.0, 1.0, 1.0, 4.0, 4.0]);
    assert_eq!(above(&e[1], &amax), 2, "the mean lags one more call");
}

#[test]
fn window_eviction_at_exactly_n_and_n_plus_1() {
    // N = 3: the 9 is in the window for the three calls after it, gone at the fourth.
    let amax = [9.0, 1.0, 1.0, 1.0, 1.0];
    let e = estimates(&["max_window(3)"], 3, &amax);
    assert_eq!(e[0], [9.0, 9.0, 9.0, 9.0, 1.0]);
    let mut state = QuantizerState::new(&config(&["max_window(3)"], 3).plan().unwrap());
    for a in amax {
        state.call(a);
    }
    assert_eq!(
        state.history(),
        [1.0, 1.0, 1.0],
        "history bounded by the window"
    );
}

#[test]
fn reset_forgets_history_and_scales() {
    let mut state = QuantizerState::new(&config(&["max_window(4)"], 4).plan().unwrap());
    for a in [100.0, 50.0] {
        state.call(a);
    }
    assert_eq!(state.decide(1.0)[0].est, 100.0);
    state.reset();
    assert!(state.history().is_empty());
    let d = state.call(2.0);
    assert!(d[0].cold);
    assert_eq!(
        d[0].est, 2.0,
        "JIT cold start after reset uses the call's own amax"
    );
    assert_eq!(d[0].scale, 7.5);
}

#[test]
fn zero_nan_and_inf_amax_keep_the_previous_scale() {
    let mut state =
        QuantizerState::new(&config(&["most_recent", "max_window(2)"], 2).plan().unwrap());
    let d = state.call(3.0);
    assert_eq!(d[0].scale, 5.0);
    let d = state.call(0.0); // est = 3 from history: usable
    assert_eq!(d[0].scale, 5.0);
    let d = state.call(2.0); // most_recent est = 0: keep 5.0; max_window est = 3
    assert!(d[0].kept_previous);
    assert_eq!((d[0].scale, d[0].raw_est, d[0].est), (5.0, 0.0, 3.0));
    assert!(!d[1].kept_previous);
    state.call(f32::NAN);
    let d = state.call(1.0); // history [2, NaN]: NaN poisons both
    assert!(d[0].raw_est.is_nan() && d[0].kept_previous);
    assert!(d[1].raw_est.is_nan() && d[1].kept_previous);
    assert_eq!(d[1].scale, 7.5, "max_window keeps its own previous scale");
    state.call(f32::INFINITY);
    let d = state.call(1.0); // history [1, Inf]
    assert!(d[1].raw_est.is_infinite() && d[1].kept_previous);
    assert_eq!(d[0].scale, 15.0, "most_recent est = 1 is usable");
}

#[test]
fn jit_vs_te_cold_start() {
    let mut jit = QuantizerState::new(&config(&["max_window(4)"], 4).plan().unwrap());
    assert_eq!(jit.call(3.0)[0].scale, 5.0);
    let mut te_config = config(&["max_window(4)"], 4);
    te_config.cold_start = ColdStart::Te;
    let mut te = QuantizerState::new(&te_config.plan().unwrap());
    let d = te.call(3.0)[0];
    assert_eq!((d.scale, d.est, d.kept_previous), (1.0, 15.0, true));
    assert_eq!(te.call(3.0)[0].scale, 5.0, "second call uses the history");
    // current scaling ignores cold start.
    let mut cts = te_config.clone();
    cts.estimator = EstimatorSpec::Current;
    cts.shadow = vec![EstimatorSpec::Current];
    assert_eq!(
        QuantizerState::new(&cts.plan().unwrap()).call(3.0)[0].scale,
        5.0
    );
}

#[test]
fn scale_rule_with_margin_and_target() {
    let mut c = config(&["most_recent"], 4);
    c.margin = 1;
    c.target = 224.0;
    let mut s = QuantizerState::new(&c.plan().unwrap());
    assert_eq!(s.call(2.0)[0].scale, 56.0, "224 / 2 / 2^1");
}

#[test]
fn smoothing_estimators_by_hand() {
    assert_eq!(Ema { alpha: 0.5 }.estimate(&[1.0, 2.0], 0.0), 1.5);
    let holt = Holt {
        alpha: 0.5,
        beta: 0.5,
        damping: 1.0,
    };
    // l: 1 → 0.5·2 + 0.5·1 = 1.5 ; b: 0 → 0.5·0.5 = 0.25 ; forecast 1.75
    assert_eq!(holt.estimate(&[1.0, 2.0], 0.0), 1.75);
    assert_eq!(MeanWindow { n: 2 }.estimate(&[5.0, 1.0, 3.0], 0.0), 2.0);
    assert_eq!(MaxWindow { n: 2 }.estimate(&[5.0, 1.0, 3.0], 0.0), 3.0);
    assert_eq!(MostRecent.estimate(&[5.0, 1.0, 3.0], 0.0), 3.0);
}

#[test]
fn config_accepts_transformer_engine_names() {
    let c: ScalingConfig = serde_json::from_str(
        r#"{"amax_compute_algo": "most_recent", "amax_history_len": 1024, "margin": 2}"#,
    )
    .expect("TE names");
    assert_eq!(c.estimator, EstimatorSpec::MostRecent);
    assert_eq!((c.window, c.margin), (1024, 2));
    let c: ScalingConfig = serde_json::from_str(r#"{"amax_compute_algo": "max"}"#).expect("max");
    assert_eq!(c.plan().unwrap().active().to_string(), "max_window(64)");
    let err = serde_json::from_str::<ScalingConfig>(r#"{"windw": 3}"#).unwrap_err();
    assert!(err.to_string().contains("unknown field `windw`"), "{err}");
    let err = serde_json::from_str::<ScalingConfig>(r#"{"estimator": "ema(7)"}"#).unwrap_err();
    assert!(err.to_string().contains("ema alpha"), "{err}");
}

#[test]
fn default_config_is_the_papers_fix_with_all_shadows() {
    let c = ScalingConfig::default();
    let plan = c.plan().expect("valid");
    let names = plan.names();
    assert_eq!(
        names,
        [
            "most_recent",
            "ema(0.1)",
            "mean_window(64)",
            "max_window(64)",
            "current"
        ]
    );
    assert_eq!(names[plan.active_index()], "max_window(64)");
    assert_eq!((c.target, c.window, plan.history_len()), (15.0, 64, 64));
}

fn amax_seq() -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(
        prop_oneof![
            8 => 1e-3f32..1e4,
            1 => Just(0.0f32),
        ],
        1..200,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn max_window_bounds_its_last_n(amax in amax_seq(), n in 1usize..40) {
        let spec = format!("max_window({n})");
        let mut state = QuantizerState::new(&config(&[spec.as_str()], n).plan().unwrap());
        for (t, a) in amax.iter().enumerate() {
            let d = state.call(*a)[0];
            if t > 0 && !d.kept_previous {
                for earlier in &amax[t.saturating_sub(n)..t] {
                    prop_assert!(d.est >= *earlier);
                }
            }
        }
    }

    #[test]
    fn current_is_never_exceeded(amax in amax_seq()) {
        let e = estimates(&["current"], 8, &amax);
        prop_assert_eq!(above(&e[0], &amax), 0);
    }

    #[test]
    fn estimators_are_deterministic(amax in amax_seq()) {
        let specs = ["most_recent", "max_window(16)", "mean_window(16)", "ema(0.1)", "holt(0.5,0.1,0.9)", "current"];
        let a = estimates(&specs, 16, &amax);
        let b = estimates(&specs, 16, &amax);
        let bits = |v: &Vec<Vec<f32>>| v.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&a), bits(&b));
    }

    #[test]
    fn shadow_decisions_equal_solo_runs(amax in amax_seq()) {
        let specs = ["max_window(8)", "most_recent", "ema(0.2)"];
        let together = estimates(&specs, 8, &amax);
        for (k, spec) in specs.iter().enumerate() {
            let alone = estimates(&[spec], 8, &amax);
            prop_assert_eq!(&together[k], &alone[0]);
        }
    }
}

/// A flat amax signal is never "above its own estimate": a window of identical values gives
/// exactly that value (an f32 sum of 64 copies divided by 64 can round one ulp below), and
/// every estimate of a history stays within the history's [min, max] (Holt's trend aside).
#[test]
fn flat_histories_estimate_exactly_their_value() {
    // 0.1 summed 64 times in f32 and divided by 64 is 0.099999905 without the clamp.
    let naive = (0..64).fold(0.0f32, |s, _| s + 0.1f32) / 64.0;
    assert_ne!(naive, 0.1f32, "this value shows the artifact");
    let specs = [
        "mean_window(64)",
        "ema(0.1)",
        "holt(0.5,0.1,0.9)",
        "max_window(64)",
        "most_recent",
    ];
    for value in [0.1f32, 1.0 / 3.0, 7.3e-5, 1234.567, 3.0e38] {
        let amax = vec![value; 200];
        let e = estimates(&specs, 64, &amax);
        for (k, spec) in specs.iter().enumerate() {
            assert!(
                e[k].iter().all(|v| v.to_bits() == value.to_bits()),
                "{spec} on a flat {value}: {:?}",
                &e[k][..4]
            );
            assert_eq!(above(&e[k], &amax), 0, "{spec}");
        }
    }
}

proptest! {
    #[test]
    fn means_and_smoothing_stay_within_the_history(
        history in proptest::collection::vec(1e-30f32..1e30, 1..100),
        n in 1usize..80,
        alpha in 0.01f32..1.0,
    ) {
        let lo = history.iter().cloned().fold(f32::INFINITY, f32::min);
        let hi = history.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let mean = MeanWindow { n }.estimate(&history, 0.0);
        let w = &history[history.len().saturating_sub(n)..];
        let wlo = w.iter().cloned().fold(f32::INFINITY, f32::min);
        let whi = w.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        prop_assert!(mean >= wlo && mean <= whi, "mean {mean} outside [{wlo}, {whi}]");
        let ema = Ema { alpha }.estimate(&history, 0.0);
        prop_assert!(ema >= lo && ema <= hi, "ema {ema} outside [{lo}, {hi}]");
    }
}

#[test]
fn estimator_names_are_matched_by_their_spec_not_their_spelling() {
    use hif8lab_scaling::EstimatorKind;
    let run = [
        "most_recent",
        "ema(0.1)",
        "mean_window(64)",
        "max_window(64)",
        "current",
    ];
    for (name, at) in [
        ("max_window", 3),
        ("max", 3),
        ("max_window(16)", 3),
        ("mean", 2),
        ("ema", 1),
        ("cts", 4),
        ("most-recent", 0),
    ] {
        let kind = EstimatorKind::of(name).unwrap();
        assert_eq!(kind.position_in(&run), Some(at), "{name}");
    }
    // Spellings that merely start like one are not it.
    for name in ["max_windowx", "most_recently", "", "ema(2)x"] {
        assert_eq!(EstimatorKind::of(name), None, "{name}");
    }
    assert_eq!(EstimatorKind::Holt.position_in(&run), None);
}
