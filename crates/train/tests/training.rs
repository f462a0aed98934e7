//! The trainer end to end on both backends: learning, determinism, QAT placement and
//! switching, CPU/GPU parity, no blocking host syncs in steady state, and a whole-model
//! finite-difference gradient check.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

mod common;

use common::gpu;
use std::collections::BTreeSet;

use hif8lab_engine::Backend;
use hif8lab_engine::cpu::CpuBackend;
use hif8lab_engine::prelude::*;
use hif8lab_scaling::{Module, Role};
use hif8lab_train::config::{PRESETS, RunConfig};
use hif8lab_train::model::{self, Ctx, Params, QuantPlan, Workspace};
use hif8lab_train::{StepReport, Trainer};

/// Loss agreement between the CPU and GPU backends after 20 QAT steps (relative).
const PARITY_LOSS_RTOL: f32 = 2e-3;

fn tiny(extra: &[&str]) -> RunConfig {
    let mut sets: Vec<String> = [
        "model.d_model=32",
        "model.layers=3",
        "model.heads=4",
        "model.kv_heads=2",
        "model.d_ff=64",
        "model.context=16",
        "train.batch=4",
        "train.steps=20",
        "train.lr=3e-3",
        "qat.warmup_steps=2",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    sets.extend(extra.iter().map(|s| (*s).to_owned()));
    RunConfig::parse("tiny", PRESETS[0].1, &sets).expect("tiny config")
}

fn run<B: Backend>(b: B, config: RunConfig) -> (Vec<StepReport>, Trainer<B>) {
    let mut t = Trainer::from_config(b, config).expect("trainer");
    let mut reports = Vec::new();
    while !t.finished() {
        t.step().expect("step");
        reports.extend(t.poll().expect("poll"));
    }
    reports.extend(t.finish().expect("finish"));
    (reports, t)
}

fn losses(r: &[StepReport]) -> Vec<u32> {
    r.iter().map(|r| r.loss.to_bits()).collect()
}

#[test]
fn loss_falls_and_runs_are_bit_identical_on_the_cpu() {
    let config = tiny(&["train.steps=60", "qat.enabled=false"]);
    let (a, _) = run(CpuBackend::new(), config.clone());
    let (b, _) = run(CpuBackend::new(), config);
    assert_eq!(a.len(), 60);
    assert_eq!(
        losses(&a),
        losses(&b),
        "same config + seed + backend ⇒ same losses"
    );
    let first = a[0].loss;
    let last: f32 = a[55..].iter().map(|r| r.loss).sum::<f32>() / 5.0;
    assert!(
        (first - 256f32.ln()).abs() < 0.3,
        "starts near ln(256): {first}"
    );
    assert!(last < first - 1.5, "loss falls: {first} → {last}");
}

#[test]
fn qat_that_never_switches_on_equals_the_plain_run() {
    let (plain, _) = run(
        CpuBackend::new(),
        tiny(&["qat.enabled=false", "train.steps=8"]),
    );
    let (never, t) = run(
        CpuBackend::new(),
        tiny(&["qat.warmup_steps=100", "train.steps=8"]),
    );
    assert!(!t.quantizers().is_empty());
    assert_eq!(losses(&plain), losses(&never));
    assert!(never.iter().all(|r| !r.qat_enabled && r.calls.is_empty()));
    let (on, _) = run(
        CpuBackend::new(),
        tiny(&["qat.warmup_steps=0", "train.steps=8"]),
    );
    assert_ne!(
        losses(&plain),
        losses(&on),
        "quantization changes the numbers"
    );
}

#[test]
fn quantizers_touch_exactly_the_configured_places() {
    let config = tiny(&[
        "qat.modules=[\"up\", \"o\"]",
        "qat.roles=[\"A\", \"G\"]",
        "qat.blocks=[0, 2]",
        "train.steps=4",
    ]);
    let (reports, t) = run(CpuBackend::new(), config);
    let want: BTreeSet<(u32, Module, Role)> = [0u32, 2]
        .iter()
        .flat_map(|b| [Module::Up, Module::O].map(|m| [(*b, m, Role::A), (*b, m, Role::G)]))
        .flatten()
        .collect();
    let planned: BTreeSet<_> = t
        .quantizers()
        .iter()
        .map(|q| (q.block, q.module, q.role))
        .collect();
    assert_eq!(planned, want);
    let seen: BTreeSet<_> = reports
        .iter()
        .flat_map(|r| &r.calls)
        .map(|c| (c.id.block, c.id.module, c.id.role))
        .collect();
    assert_eq!(seen, want);
    // Default placement: blocks 1..L-1 of 3, MLP only, all roles.
    let plan = QuantPlan::new(&tiny(&[]).model, &tiny(&[]).qat);
    assert_eq!(plan.ids.len(), 9);
    assert!(plan.ids.iter().all(|q| q.block == 1));
}

#[test]
fn warmup_switch_starts_every_history_fresh() {
    let (reports, t) = run(
        CpuBackend::new(),
        tiny(&["qat.warmup_steps=3", "train.steps=6"]),
    );
    assert!(reports[..3].iter().all(|r| !r.qat_enabled));
    let first = &reports[3];
    assert!(first.qat_enabled);
    let mr = t
        .estimator_names()
        .iter()
        .position(|n| n == "most_recent")
        .unwrap();
    for c in &first.calls {
        // JIT cold start: the first call's estimate is its own amax, for every estimator.
        assert_eq!(c.est[mr], c.amax, "{}", c.id);
        assert_eq!(c.above_est[mr], 0);
    }
    let second = &reports[4];
    let moved = second.calls.iter().filter(|c| c.est[mr] != c.amax).count();
    assert!(
        moved > 0,
        "from the second call on, the estimate is the previous amax"
    );
    let records = t.trace_records(second);
    assert_eq!(records.len(), second.calls.len());
    assert_eq!(records[0].shadow.len(), t.estimator_names().len());
}

#[test]
fn gpu_matches_cpu_with_qat_and_never_blocks() {
    let Some(g) = gpu() else { return };
    let config = tiny(&["qat.warmup_steps=2", "train.steps=20"]);
    let (cpu_reports, _) = run(CpuBackend::new(), config.clone());
    let mut t = Trainer::from_config(g, config).expect("gpu trainer");
    t.step().unwrap();
    t.step().unwrap();
    let before = t.backend().counters();
    for _ in 2..20 {
        t.step().unwrap();
        let _ = t.poll().unwrap();
    }
    let after = t.backend().counters();
    assert_eq!(
        after.blocking_syncs, before.blocking_syncs,
        "no blocking sync inside steps"
    );
    let steps = 18.0;
    let submits_per_step = (after.submits - before.submits) as f64 / steps;
    assert!(
        submits_per_step <= 4.0,
        "{submits_per_step} submissions per step"
    );
    let mut gpu_reports = Vec::new();
    // Reports that arrived during the loop were consumed; run again to compare all of them.
    let (gpu_all, _) = run(
        gpu().unwrap(),
        tiny(&["qat.warmup_steps=2", "train.steps=20"]),
    );
    gpu_reports.extend(gpu_all);
    for (c, g) in cpu_reports.iter().zip(&gpu_reports) {
        assert!(
            (c.loss - g.loss).abs() <= PARITY_LOSS_RTOL * c.loss,
            "step {}: cpu {} gpu {}",
            c.step,
            c.loss,
            g.loss
        );
        assert_eq!(c.calls.len(), g.calls.len());
        for (cc, gc) in c.calls.iter().zip(&g.calls) {
            assert_eq!(cc.id, gc.id);
            assert_eq!(cc.numel, gc.numel);
            assert!(
                (cc.amax - gc.amax).abs() <= 1e-2 * cc.amax.abs() + 1e-6,
                "{} amax {} vs {}",
                cc.id,
                cc.amax,
                gc.amax
            );
        }
    }
    // The GPU is deterministic too.
    let (again, _) = run(
        gpu().unwrap(),
        tiny(&["qat.warmup_steps=2", "train.steps=20"]),
    );
    assert_eq!(losses(&again), losses(&gpu_reports));
}

/// Shared setup of the finite-difference tests: weights 10× larger than at init (std 0.2,
/// so gradients are big enough for f32 finite differences) and a workspace loaded with one
/// micro-batch of 2 sequences.
fn fd_setup(
    b: &CpuBackend,
    m: &hif8lab_train::config::ModelConfig,
) -> (Vec<Vec<f32>>, Workspace<hif8lab_engine::cpu::CpuTensor>) {
    let values: Vec<Vec<f32>> = model::init_values(m, 5)
        .into_iter()
        .map(|v| {
            if v.iter().all(|x| *x == 1.0) {
                v
            } else {
                v.iter().map(|x| x * 10.0).collect()
            }
        })
        .collect();
    let ws = Workspace::new(b, m, 2).unwrap();
    let text = hif8lab_train::data::synthetic_corpus(1, 4000);
    let mut sampler = hif8lab_train::data::Sampler::new(hif8lab_train::data::tokenize(&text), 3);
    let (x, y) = sampler.next_batch(2, m.context).unwrap();
    ws.load(b, &x, &y).unwrap();
    (values, ws)
}

#[test]
fn whole_model_gradient_matches_finite_differences() {
    let config = tiny(&["qat.enabled=false", "model.layers=2"]);
    let m = &config.model;
    let b = CpuBackend::new();
    let (values, ws) = fd_setup(&b, m);
    let upload = |vals: &[Vec<f32>]| {
        Params::from_list(
            vals.iter().map(|v| b.upload(v).unwrap()).collect(),
            m.layers,
        )
    };
    let plan = QuantPlan::default();
    let cx = Ctx {
        b: &b,
        m,
        batch: 2,
        plan: &plan,
        bank: None,
        bf16: false,
        bf16_units: false,
        clipped_ste: false,
        scratch: &[],
        histogram: None,
        first_micro: false,
        norms: None,
    };
    let rows = 2 * m.context;
    let loss = |vals: &[Vec<f32>]| -> f64 {
        let p = upload(vals);
        model::forward(&cx, &p, &ws, 1.0 / rows as f32).unwrap();
        b.read(&ws.losses)
            .wait()
            .unwrap()
            .iter()
            .map(|v| f64::from(*v))
            .sum::<f64>()
            / rows as f64
    };
    let p = upload(&values);
    let zeros: Vec<Vec<f32>> = values.iter().map(|v| vec![0.0; v.len()]).collect();
    let g = upload(&zeros);
    model::forward(&cx, &p, &ws, 1.0 / rows as f32).unwrap();
    model::backward(&cx, &p, &g, &ws).unwrap();
    let grads: Vec<Vec<f32>> = g.list().iter().map(|t| b.read(t).wait().unwrap()).collect();
    let specs = model::param_specs(m);
    let h = 1e-2f32;
    let mut checked = 0;
    let max_grad = grads.iter().flatten().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(
        max_grad > 1e-2,
        "gradients are not trivially small: {max_grad}"
    );
    for (pi, (name, _, _)) in specs.iter().enumerate() {
        let n = values[pi].len();
        // The coordinate with the largest gradient (most signal) and two fixed ones.
        let top = (0..n)
            .max_by(|a, b| grads[pi][*a].abs().total_cmp(&grads[pi][*b].abs()))
            .unwrap();
        for j in [top, n / 3, n - 1] {
            let mut plus = values.clone();
            plus[pi][j] += h;
            let mut minus = values.clone();
            minus[pi][j] -= h;
            let numeric = (loss(&plus) - loss(&minus)) / (2.0 * f64::from(h));
            let analytic = f64::from(grads[pi][j]);
            assert!(
                (analytic - numeric).abs() <= 2e-3 + 5e-2 * numeric.abs(),
                "{name}[{j}]: analytic {analytic} numeric {numeric}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, specs.len() * 3);
}

#[test]
fn gradient_accumulation_matches_a_bigger_batch() {
    // 2 micro-batches of 2 sequences draw the same 4 sequences as 1 batch of 4.
    let (accum, _) = run(
        CpuBackend::new(),
        tiny(&["train.batch=2", "train.grad_accum=2", "train.steps=6"]),
    );
    let (big, _) = run(CpuBackend::new(), tiny(&["train.batch=4", "train.steps=6"]));
    for (a, b) in accum.iter().zip(&big) {
        assert!(
            (a.loss - b.loss).abs() < 2e-3 * b.loss,
            "step {}: {} vs {}",
            a.step,
            a.loss,
            b.loss
        );
        assert_eq!(a.tokens, b.tokens);
    }
    // Each micro-batch is one quantizer call: two calls per quantizer per step.
    let last = accum.last().unwrap();
    assert_eq!(
        last.calls.iter().filter(|c| c.micro == 1).count(),
        last.calls.len() / 2
    );
}

/// One backward pass on `values` with QAT on every module (and the clipped STE when
/// `clipped`): the gradients after a first micro-batch (`first_micro`, written over `start`
/// except where [`model::grads_added_to`] says it adds) and after a later one (added to zeros),
/// with the Σx² the pass put into `norms` for each and Σx² of each read afterwards (bits).
#[allow(clippy::type_complexity)]
fn backward_grads(
    config: &RunConfig,
    first_micro: bool,
    start: f32,
) -> (Vec<Vec<f32>>, Vec<u32>, Vec<u32>) {
    let m = &config.model;
    let b = CpuBackend::new();
    let (values, ws) = fd_setup(&b, m);
    let ws = ws.with_weight_scratch(&b, m).unwrap();
    let upload = |vals: &[Vec<f32>]| {
        Params::from_list(
            vals.iter().map(|v| b.upload(v).unwrap()).collect(),
            m.layers,
        )
    };
    let plan = QuantPlan::new(m, &config.qat);
    let bank = b
        .new_bank(&hif8lab_engine::BankConfig::new(
            plan.ids.len(),
            config.qat.plan().unwrap(),
        ))
        .unwrap();
    let cx = Ctx {
        b: &b,
        m,
        batch: 2,
        plan: &plan,
        bank: Some(&bank),
        bf16: false,
        bf16_units: false,
        clipped_ste: config.qat.clipped_ste,
        scratch: &ws.weight_scratch,
        histogram: None,
        first_micro,
        norms: None,
    };
    let filled = |x: f32| -> Vec<Vec<f32>> { values.iter().map(|v| vec![x; v.len()]).collect() };
    // A first pass fills the histories; the second, on weights 3× larger, saturates against
    // their estimates, so the clipped STE has gradients to mask.
    let rows = 2 * m.context;
    let (p, g) = (upload(&values), upload(&filled(0.0)));
    model::forward(&cx, &p, &ws, 1.0 / rows as f32).unwrap();
    model::backward(&cx, &p, &g, &ws).unwrap();
    let larger: Vec<Vec<f32>> = values
        .iter()
        .map(|v| v.iter().map(|x| x * 3.0).collect())
        .collect();
    let p = upload(&larger);
    let g = upload(&filled(start));
    if first_micro {
        for t in model::grads_added_to(&g) {
            b.fill_zero(t).unwrap();
        }
    }
    let n = g.list().len();
    let (norms, after) = (b.upload(&vec![-1.0; n]).unwrap(), b.zeros(n).unwrap());
    let cx = Ctx {
        norms: Some(&norms),
        ..cx
    };
    model::forward(&cx, &p, &ws, 1.0 / rows as f32).unwrap();
    model::backward(&cx, &p, &g, &ws).unwrap();
    for (i, t) in g.list().into_iter().enumerate() {
        b.sum_squares(t, &after, i).unwrap();
    }
    let bits = |t| -> Vec<u32> {
        let v: Vec<f32> = b.read(t).wait().unwrap();
        v.iter().map(|x| x.to_bits()).collect()
    };
    let grads = g.list().iter().map(|t| b.read(t).wait().unwrap()).collect();
    (grads, bits(&norms), bits(&after))
}

#[test]
fn a_first_micro_batch_writes_the_gradients_zeroed_ones_would_sum_to() {
    // The trainer zeroes only `grads_added_to` before a step: every other gradient must be
    // written whole by its first product (tied or not, masked by the clipped STE or not),
    // whatever it held (here 7.0 everywhere).
    for tie in [true, false] {
        for clipped in [false, true] {
            let tie_set = format!("model.tie_embeddings={tie}");
            let clip_set = format!("qat.clipped_ste={clipped}");
            let config = tiny(&[
                "qat.warmup_steps=0",
                "qat.scaling.overflow=\"saturate\"",
                "qat.modules=[\"gate\", \"up\", \"down\", \"q\", \"k\", \"v\", \"o\"]",
                &tie_set,
                &clip_set,
            ]);
            let (written, norms, after) = backward_grads(&config, true, 7.0);
            // The last micro-batch's backward puts every gradient's final Σx² in its slot.
            assert_eq!(norms, after, "Σx² (tied {tie}, clipped STE {clipped})");
            let (added, _, _) = backward_grads(&config, false, 0.0);
            assert_eq!(written.len(), added.len());
            for (i, (w, a)) in written.iter().zip(&added).enumerate() {
                let bits = |v: &[f32]| v.iter().map(|x| (x + 0.0).to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(w),
                    bits(a),
                    "gradient {i} (tied {tie}, clipped STE {clipped})"
                );
            }
            assert!(added.iter().flatten().any(|v| *v != 0.0));
        }
    }
}

#[test]
fn divergence_halts_with_the_offending_place_named() {
    // lr 1e9 is outside what a config accepts (train.lr ≤ 1); set directly, it forces the
    // divergence whose report this test checks.
    let mut config = tiny(&["train.grad_clip=0", "qat.warmup_steps=0", "train.steps=40"]);
    config.train.lr = 1e9;
    let mut t = Trainer::from_config(CpuBackend::new(), config).unwrap();
    let mut err = None;
    while !t.finished() && err.is_none() {
        t.step().unwrap();
        if let Err(e) = t.poll() {
            err = Some(e);
        }
    }
    let e = err
        .or_else(|| t.finish().err())
        .expect("training with lr 1e9 must diverge");
    let msg = e.to_string();
    assert!(msg.contains("non-finite values at step"), "{msg}");
    assert!(
        msg.contains("quantizer block") || msg.contains("loss"),
        "{msg}"
    );
}

#[test]
fn emulated_bf16_baseline_rounds_gemm_operands() {
    let (f32_run, _) = run(
        CpuBackend::new(),
        tiny(&["qat.enabled=false", "train.steps=10"]),
    );
    let (bf16, _) = run(
        CpuBackend::new(),
        tiny(&[
            "qat.enabled=false",
            "train.steps=10",
            "train.bf16_gemm=true",
        ]),
    );
    let (again, _) = run(
        CpuBackend::new(),
        tiny(&[
            "qat.enabled=false",
            "train.steps=10",
            "train.bf16_gemm=true",
        ]),
    );
    assert_eq!(losses(&bf16), losses(&again));
    assert_ne!(
        losses(&bf16),
        losses(&f32_run),
        "rounding changes the numbers"
    );
    for (a, b) in bf16.iter().zip(&f32_run) {
        assert!(
            (a.loss - b.loss).abs() < 0.05 * b.loss,
            "bf16 stays close: {} vs {}",
            a.loss,
            b.loss
        );
    }
}

#[test]
fn clipped_ste_masks_gradients_and_needs_saturation() {
    let e = RunConfig::parse("x", PRESETS[0].1, &["qat.clipped_ste=true".into()]).unwrap_err();
    assert!(e.to_string().contains("qat.scaling.overflow"), "{e}");
    let sat = [
        "qat.scaling.overflow=saturate",
        "qat.scaling.estimator=most_recent",
        "qat.warmup_steps=0",
        "train.steps=12",
    ];
    let (identity, _) = run(CpuBackend::new(), tiny(&sat));
    let (clipped, _) = run(
        CpuBackend::new(),
        tiny(&[&sat[..], &["qat.clipped_ste=true"]].concat()),
    );
    let (again, _) = run(
        CpuBackend::new(),
        tiny(&[&sat[..], &["qat.clipped_ste=true"]].concat()),
    );
    assert_eq!(losses(&clipped), losses(&again));
    assert!(
        clipped
            .iter()
            .flat_map(|r| &r.calls)
            .any(|c| c.above_est[0] > 0),
        "some values exceed the estimate"
    );
    assert_ne!(
        losses(&clipped),
        losses(&identity),
        "masking changes the updates"
    );
    assert!(clipped.last().unwrap().loss < clipped[0].loss);
}

#[test]
fn identity_ste_gradient_follows_the_high_precision_gradient() {
    // With QAT on, the straight-through gradient (computed on fake-quantized operands) must
    // track the finite-difference gradient of the high-precision loss: HiF8 keeps 3 mantissa
    // bits around the estimate, so the two agree within a few percent where gradients are large.
    let config = tiny(&[
        "qat.warmup_steps=0",
        "model.layers=3",
        "qat.modules=[\"gate\", \"up\", \"down\", \"q\", \"k\", \"v\", \"o\"]",
    ]);
    let m = &config.model;
    let b = CpuBackend::new();
    let (values, ws) = fd_setup(&b, m);
    let upload = |vals: &[Vec<f32>]| {
        Params::from_list(
            vals.iter().map(|v| b.upload(v).unwrap()).collect(),
            m.layers,
        )
    };
    let plan = QuantPlan::new(m, &config.qat);
    assert!(plan.ids.len() >= 21);
    let bank = b
        .new_bank(&hif8lab_engine::BankConfig::new(
            plan.ids.len(),
            config.qat.plan().unwrap(),
        ))
        .unwrap();
    let rows = 2 * m.context;
    let hp = Ctx {
        b: &b,
        m,
        batch: 2,
        plan: &plan,
        bank: None,
        bf16: false,
        bf16_units: false,
        clipped_ste: false,
        scratch: &[],
        histogram: None,
        first_micro: false,
        norms: None,
    };
    let loss = |vals: &[Vec<f32>]| -> f64 {
        let p = upload(vals);
        model::forward(&hp, &p, &ws, 1.0 / rows as f32).unwrap();
        b.read(&ws.losses)
            .wait()
            .unwrap()
            .iter()
            .map(|v| f64::from(*v))
            .sum::<f64>()
            / rows as f64
    };
    let qat = Ctx {
        bank: Some(&bank),
        ..Ctx {
            b: &b,
            m,
            batch: 2,
            plan: &plan,
            bank: None,
            bf16: false,
            bf16_units: false,
            clipped_ste: false,
            scratch: &[],
            histogram: None,
            first_micro: false,
            norms: None,
        }
    };
    let p = upload(&values);
    let g = upload(
        &values
            .iter()
            .map(|v| vec![0.0; v.len()])
            .collect::<Vec<_>>(),
    );
    model::forward(&qat, &p, &ws, 1.0 / rows as f32).unwrap();
    model::backward(&qat, &p, &g, &ws).unwrap();
    let grads: Vec<Vec<f32>> = g.list().iter().map(|t| b.read(t).wait().unwrap()).collect();
    let specs = model::param_specs(m);
    let mut checked = 0;
    for (pi, (name, _, _)) in specs.iter().enumerate() {
        // Parameters of quantized layers in block 1, where the STE path is taken.
        if !name.starts_with("model.layers.1.") || name.contains("layernorm") {
            continue;
        }
        let n = values[pi].len();
        let top = (0..n)
            .max_by(|a, c| grads[pi][*a].abs().total_cmp(&grads[pi][*c].abs()))
            .unwrap();
        let h = 1e-2f32;
        let mut plus = values.clone();
        plus[pi][top] += h;
        let mut minus = values.clone();
        minus[pi][top] -= h;
        let numeric = (loss(&plus) - loss(&minus)) / (2.0 * f64::from(h));
        let analytic = f64::from(grads[pi][top]);
        assert!(
            (analytic - numeric).abs() <= 1e-3 + 0.15 * numeric.abs(),
            "{name}[{top}]: STE {analytic} vs high-precision FD {numeric}"
        );
        assert!(numeric.abs() > 1e-3, "{name}: a real signal");
        checked += 1;
    }
    assert_eq!(checked, 7, "q, k, v, o, gate, up, down of block 1");
}

#[test]
fn histogram_reports_the_chosen_quantizer_without_changing_training() {
    let config = tiny(&["qat.warmup_steps=2", "train.steps=6"]);
    let (plain, _) = run(CpuBackend::new(), config.clone());
    let cpu = hist_run(CpuBackend::new(), config.clone());
    assert_eq!(losses(&cpu.0), losses(&plain), "binning changes nothing");
    check_histograms(&cpu);
    if let Some(g) = gpu() {
        check_histograms(&hist_run(g, config));
    }
}

/// A run binning the last quantizer's input; also returns the active estimator's index.
fn hist_run<B: Backend>(b: B, config: RunConfig) -> (Vec<StepReport>, usize) {
    let mut t = Trainer::from_config(b, config).unwrap();
    t.set_histogram(Some(t.quantizers().len() - 1));
    let active = t.active_estimator();
    let mut reports = Vec::new();
    while !t.finished() {
        t.step().expect("step");
        reports.extend(t.poll().expect("poll"));
    }
    reports.extend(t.finish().expect("finish"));
    (reports, active)
}

fn check_histograms((reports, active): &(Vec<StepReport>, usize)) {
    for r in reports {
        match (&r.histogram, r.qat_enabled) {
            (None, false) => {}
            (Some((id, h)), true) => {
                let call = r
                    .calls
                    .iter()
                    .rev()
                    .find(|c| c.id == *id)
                    .expect("its call");
                assert_eq!(
                    h.total(),
                    call.numel,
                    "step {}: every element binned",
                    r.step
                );
                assert_eq!(h.nonfinite, 0);
                // The top bin holding data is the one of amax·scale (the same f32 product).
                let top = h.bins.iter().rposition(|c| *c > 0).expect("some bin");
                let scaled = f64::from(call.amax * call.scales[*active]).log2();
                let lower = hif8lab_scaling::stats::Log2Histogram::lower_log2(top);
                assert!(
                    (lower..lower + 0.25).contains(&scaled),
                    "step {}: top bin {lower} vs log2(amax·s) {scaled}",
                    r.step
                );
            }
            (h, qat) => panic!("step {}: histogram {} with QAT {qat}", r.step, h.is_some()),
        }
    }
}
