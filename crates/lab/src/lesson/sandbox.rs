//! The sandbox lesson: the user's own settings trained from the lessons' base, judged on a
//! claim fixed in advance that their choice decides.

use super::{Claim, count_ag, final_loss};
use crate::claims::{Part, Side};
use crate::grid::RunSummary;
use hif8lab_train::config::RunConfig;

/// The settings the sandbox takes from the user (what [`sandbox_run`] copies): any other is
/// refused by name, never validated and then ignored.
pub const SANDBOX_KEYS: [&str; 9] = [
    "train.lr",
    "train.steps",
    "qat.enabled",
    "qat.warmup_steps",
    "qat.scaling.estimator",
    "qat.scaling.window",
    "qat.scaling.target",
    "qat.scaling.format",
    "qat.scaling.overflow",
];

/// The sandbox's run: the lessons' model and data (`fixed`, so that it continues from their
/// base) with what the user chose in `user`: the learning rate and steps, the warmup, and
/// the quantization (on or off, estimator, window, target, format, overflow). Its folder is
/// named by those choices, so that another choice trains anew and the same one is reused.
pub fn sandbox_run(fixed: &RunConfig, user: &RunConfig) -> (String, RunConfig) {
    let mut c = fixed.clone();
    c.train.lr = user.train.lr;
    c.train.steps = user.train.steps;
    c.qat.enabled = user.qat.enabled;
    c.qat.warmup_steps = user.qat.warmup_steps;
    let (u, s) = (&user.qat.scaling, &mut c.qat.scaling);
    s.estimator = u.estimator;
    s.window = u.window;
    s.target = u.target;
    s.format = u.format;
    s.overflow = u.overflow;
    // The active estimator as its plan spells it (an unplannable config is refused before
    // it runs; its name keeps the spelling given).
    let active = c
        .qat
        .scaling
        .plan()
        .map_or_else(|_| u.estimator.to_string(), |p| p.active().to_string());
    let s = &c.qat.scaling;
    let what = if c.qat.enabled {
        format!(
            "{}-{}-target{}-{:?}-warmup{}",
            active, s.format, s.target, s.overflow, c.qat.warmup_steps
        )
    } else {
        "bf16".into()
    };
    let name: String = format!("sandbox-{what}-lr{:e}-{}steps", c.train.lr, c.train.steps)
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || "-_.".contains(ch) {
                ch
            } else {
                '_'
            }
        })
        .collect();
    (name.to_lowercase(), c)
}

/// The share of a run's activation and gradient calls above the active estimate the
/// sandbox's claim allows, fixed before any run. At the lessons' size max_window(64) with
/// warmup at the low rate keeps under it; most_recent, exceeded on about every other call,
/// does not. (Weights, whose amax drifts up slowly, exceed any past-only estimate often and
/// are left out, as in the lessons' texts.)
pub const SANDBOX_SATURATION_LIMIT: f64 = 0.05;

pub(super) fn sandbox(runs: &[(String, RunConfig)], s: &[RunSummary]) -> (Vec<Claim>, String) {
    use hif8lab_scaling::Role;
    let (name, config) = &runs[0];
    let r = &s[0];
    let active = config.qat.plan().map_or_else(
        |_| config.qat.scaling.estimator.to_string(),
        |p| p.active().to_string(),
    );
    let ag_calls = r.counts.calls_of_roles(&[Role::A, Role::G]);
    let ag_above = r.active_calls_above_roles(&[Role::A, Role::G]);
    let (mr, mw) = (
        count_ag(r, hif8lab_scaling::EstimatorKind::MostRecent),
        count_ag(r, hif8lab_scaling::EstimatorKind::MaxWindow),
    );
    // A claim the user's choice decides, never one that holds by construction.
    let claim = format!(
        "your estimator ({active}) is exceeded on at most {:.0} % of the run's activation and gradient calls",
        100.0 * SANDBOX_SATURATION_LIMIT
    );
    let claims = if r.quantized() && ag_calls > 0 {
        vec![Claim::new(
            &claim,
            vec![Part::exact(
                "share of activation and gradient calls above the active estimate",
                " %",
                100.0 * ag_above as f64 / ag_calls as f64,
                Side::Below,
                100.0 * SANDBOX_SATURATION_LIMIT,
            )],
            serde_json::json!({"run": name, "activation_gradient_calls": ag_calls, "calls_above_est": ag_above}),
        )]
    } else {
        vec![Claim::new(
            &claim,
            Vec::new(),
            serde_json::json!({"note": "not judged: the run did not quantize"}),
        )]
    };
    let summary = format!(
        "{name}: {} steps, final loss {:.3}; on activations and gradients {ag_above} of {ag_calls} calls above the active estimate. On the same calls most_recent was exceeded on {mr} and max_window(64) on {mw} (max_window's estimate is never below most_recent's, so it is never exceeded more often: that is arithmetic, not a finding).",
        r.losses.len(),
        final_loss(&r.losses),
    );
    (claims, summary)
}
