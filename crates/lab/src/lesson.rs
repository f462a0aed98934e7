//! Lessons: the two failure modes of delayed scaling, each a scenario of real runs and the
//! claims it teaches, judged from the runs' own numbers (never canned text).
//!
//! A lesson's runs continue training from a pretrained base (the grid's protocol, at the
//! `grid-lesson` size); [`judge`] turns their summaries into [`Claim`]s with the evidence.

pub mod base;
pub mod outliers;
mod sandbox;
use sandbox::sandbox;
pub use sandbox::{SANDBOX_KEYS, SANDBOX_SATURATION_LIMIT, sandbox_run};

/// The saturation lesson's E4M3 twin of most_recent-low (saturating overflow: it clips).
const E4M3_RUN: &str = "e4m3-saturate-most_recent-low";

/// A lesson's data that cannot be read or judged (a shipped base, the committed real-model
/// runs): the file it came from and what is wrong, said as one sentence that names the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LessonDataError {
    /// The file (or what stands for it).
    pub source_name: String,
    /// The whole message, the file named in it.
    pub message: String,
}

impl LessonDataError {
    /// An error of `source_name` with the full `message`.
    pub fn new(source_name: &str, message: impl Into<String>) -> Self {
        LessonDataError {
            source_name: source_name.to_string(),
            message: message.into(),
        }
    }
}

use serde::Serialize;

pub use crate::claims::Claim;
use crate::claims::{Part, Side};
use crate::grid::{
    CellKey, GridConfig, GridResults, GridRun, RunSummary, base_run, count_of_kind as count,
    forgetting_contrast, forgetting_vs_base, grid_runs,
};
use crate::stats::Verdict3;
use hif8lab_scaling::{EstimatorKind, Role};
use hif8lab_train::config::RunConfig;
use hif8lab_train::eval::{ape, relative_drop};
use hif8lab_train::trainer::ProbeScores;

/// A lesson's text and set-up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lesson {
    /// Which lesson it is.
    pub id: LessonId,
    /// Name (`hif8lab lesson run NAME`, `?lesson=NAME`): `id.name()`.
    pub name: &'static str,
    /// Title.
    pub title: &'static str,
    /// What to predict before running.
    pub predict: &'static str,
    /// What to look at while it runs.
    pub look: &'static str,
    /// The controls that matter.
    pub controls: &'static [&'static str],
}

/// Which lesson: what code branches on (a lesson's name is only its spelling on the command
/// line and in a URL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LessonId {
    /// 1. Amax saturation.
    Saturation,
    /// 2. Catastrophic forgetting.
    Forgetting,
    /// 3. Both fixes are needed.
    Fixes,
    /// 4. A real model's outliers (judged from committed data; nothing trains).
    Outliers,
    /// 5. Sandbox.
    Sandbox,
}

impl LessonId {
    /// Its name (`saturation`, …).
    pub fn name(self) -> &'static str {
        match self {
            LessonId::Saturation => "saturation",
            LessonId::Forgetting => "forgetting",
            LessonId::Fixes => "fixes",
            LessonId::Outliers => "outliers",
            LessonId::Sandbox => "sandbox",
        }
    }

    /// Its lesson ([`LESSONS`] is in the enum's order; a test holds it so).
    pub fn lesson(self) -> &'static Lesson {
        &LESSONS[self as usize]
    }
}

impl std::fmt::Display for LessonId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for LessonId {
    type Err = hif8lab_format::UnknownName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        LESSONS
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.id)
            .ok_or_else(|| hif8lab_format::UnknownName {
                kind: "lesson",
                given: name.to_owned(),
                expected: names(),
            })
    }
}

/// The lessons, in teaching order.
pub static LESSONS: [Lesson; 5] = [
    Lesson {
        id: LessonId::Saturation,
        name: "saturation",
        title: "1. Amax saturation",
        predict: "Continued training on bursty web text with HiF8 fake quantization. The scale of each step comes from the amax of earlier calls. Predict: if the estimate is the most recent amax alone, how often will a tensor exceed it? Will the loss show it?",
        look: "Estimators: calls above the estimate for most_recent vs max_window(64) on the same calls. Loss: the QAT curve against its matched baseline. Saturation: where the events are. HiF8 with target 15 keeps values above the estimate (with fewer mantissa bits); E4M3 with target = max hard-clips them (overflow).",
        controls: &["estimator", "window", "target", "format"],
    },
    Lesson {
        id: LessonId::Forgetting,
        name: "forgetting",
        title: "2. Catastrophic forgetting",
        predict: "The same pretrained model continues training at a low and at a high learning rate, with and without QAT. Predict: which run forgets the facts it knew? Will its loss look worse?",
        look: "Two things side by side: the knowledge-probe accuracy against the base model's, and the training loss. Compare the rates on both, with and without quantization, before you read the verdict.",
        controls: &["lr", "qat"],
    },
    Lesson {
        id: LessonId::Fixes,
        name: "fixes",
        title: "3. Both fixes are needed",
        predict: "Eight runs: most_recent and max_window(64), each at the high and the low learning rate, the low rate also with a high-precision warmup, and the two BF16 baselines. Predict: which single change keeps the model near its baseline — or does it take two?",
        look: "The verdict's numbers per run: calls above the estimate, the loss's APE against its baseline and the knowledge drop. Which runs stay near their baseline on all three? Runs: each run's loss against the others.",
        controls: &["estimator", "lr", "warmup"],
    },
    Lesson {
        id: LessonId::Outliers,
        name: "outliers",
        title: "4. A real model's outliers",
        predict: "A real pretrained model (SmolLM2-135M-Instruct) continued with HiF8 QAT on its MLP projections: one quantizer's input carries an outlier channel about a thousand times larger than the median quantizer's (the verdict below gives the measured ratio). Predict: is most_recent exceeded there more often than max_window(64)? Does HiF8 overflow there? Does E4M3?",
        look: "The verdict, judged from the committed runs of `hif8lab grid --preset real-smollm2` (nothing trains here). Then the outlier itself: Amax shows block11.down.A's amax on each of its 480 calls (a committed trace of the real model) against every estimator's estimate; Saturation shows which calls exceed each estimate.",
        controls: &["estimator", "format"],
    },
    Lesson {
        id: LessonId::Sandbox,
        name: "sandbox",
        title: "5. Sandbox",
        predict: "Every knob, starting from the lessons' state. Predict before you press Start (in the settings), then check.",
        look: "All panels. The scenario trains your settings (rate, steps, warmup, estimator, window, target, format) from the lessons' base and judges one claim fixed in advance: your estimator is exceeded on at most 5 % of the activation and gradient calls. Try most_recent, then max_window(64).",
        controls: &[
            "preset",
            "steps",
            "lr",
            "estimator",
            "window",
            "target",
            "warmup",
        ],
    },
];

/// Looks a lesson up by name.
pub fn lesson(name: &str) -> Option<&'static Lesson> {
    LESSONS.iter().find(|l| l.name == name)
}

/// The names of the lessons, comma separated (for error messages).
pub fn names() -> String {
    LESSONS.map(|l| l.name).join(", ")
}

pub use crate::claims::EXACT;

/// A lesson's design: one run per setting, from one base.
const ONE_RUN: crate::grid::Design = crate::grid::Design {
    orders: 1,
    bases: 1,
};

/// A claim whose part could not be computed (a run without per-item marks).
fn unjudged(claim: &str) -> Claim {
    Claim::new(
        claim,
        Vec::new(),
        serde_json::json!({"note": "not judged: a run lacks per-item probe marks"}),
    )
}

/// A lesson's verdict: `{"lesson": .., "claims": [..], "summary": ..}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LessonReport {
    /// Lesson name.
    pub lesson: String,
    /// Its claims.
    pub claims: Vec<Claim>,
    /// "What just happened", written from the numbers.
    pub summary: String,
    /// The scenario's runs, by their folder names under `<out>/runs/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
}

impl LessonReport {
    /// Whether every claim holds.
    pub fn holds(&self) -> bool {
        self.claims.iter().all(|c| c.holds)
    }

    /// The lesson's verdict: holds when every claim holds, fails when one fails,
    /// inconclusive otherwise.
    pub fn verdict(&self) -> Verdict3 {
        Verdict3::all(&self.claims.iter().map(|c| c.verdict).collect::<Vec<_>>())
    }
}

fn by_name<'a>(runs: &[(String, RunConfig)], s: &'a [RunSummary], name: &str) -> &'a RunSummary {
    let i = runs
        .iter()
        .position(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("lesson run {name} is part of the scenario"));
    &s[i]
}

/// Calls above the estimate of estimators named `prefix`, on activations and gradients only.
fn count_ag(s: &RunSummary, kind: EstimatorKind) -> u64 {
    s.calls_above_roles(kind, &[Role::A, Role::G])
}

/// A run's final training loss as the lessons state it everywhere (their verdicts, summaries
/// and the app's run tiles): the mean of the last fifth of its steps' losses (NaN for none).
pub fn final_loss(v: &[f64]) -> f64 {
    let n = (v.len() / 5).max(1).min(v.len());
    if n == 0 {
        return f64::NAN;
    }
    v[v.len() - n..].iter().sum::<f64>() / n as f64
}

/// The runs of a lesson's scenario (continued training from the base); none for the
/// outliers lesson, which trains nothing. The sandbox trains `user`'s settings (see
/// [`sandbox_run`]), or the grid's fixed run without them.
pub fn scenario(
    id: LessonId,
    grid: &GridConfig,
    user: Option<&RunConfig>,
) -> Option<Vec<(String, RunConfig)>> {
    let run = |key: CellKey| {
        let r = GridRun::of(key, "");
        (r.name.clone(), grid.run_config(&r))
    };
    Some(match id {
        LessonId::Saturation => {
            let (_, mut e4m3) = run(CellKey::MOST_RECENT_LOW);
            e4m3.qat.scaling.format = hif8lab_format::Format::E4M3;
            e4m3.qat.scaling.target = 448.0;
            e4m3.qat.scaling.overflow = hif8lab_format::Overflow::Saturate;
            vec![
                run(CellKey::BASELINE_LOW),
                run(CellKey::MOST_RECENT_LOW),
                run(CellKey::MAX_WINDOW_LOW),
                (E4M3_RUN.into(), e4m3),
            ]
        }
        LessonId::Forgetting => vec![
            run(CellKey::BASELINE_LOW),
            run(CellKey::BASELINE_HIGH),
            run(CellKey::MAX_WINDOW_LOW),
            run(CellKey::MAX_WINDOW_HIGH),
        ],
        LessonId::Fixes => grid_runs()
            .iter()
            .map(|r| (r.name.clone(), grid.run_config(r)))
            .collect(),
        LessonId::Sandbox => {
            let (_, fixed) = run(CellKey::MAX_WINDOW_LOW_WARMUP);
            vec![sandbox_run(&fixed, user.unwrap_or(&fixed))]
        }
        LessonId::Outliers => return None,
    })
}

/// Judges a lesson's claims from its runs' summaries (`runs` as given by [`scenario`]).
pub fn judge(
    id: LessonId,
    base: ProbeScores,
    runs: &[(String, RunConfig)],
    s: &[RunSummary],
) -> LessonReport {
    let (claims, summary) = match id {
        LessonId::Saturation => saturation(runs, s),
        LessonId::Forgetting => forgetting(base, runs, s),
        LessonId::Fixes => fixes(base, s),
        LessonId::Sandbox | LessonId::Outliers => sandbox(runs, s),
    };
    LessonReport {
        lesson: id.name().into(),
        claims,
        summary,
        runs: runs.iter().map(|(n, _)| n.clone()).collect(),
    }
}

fn saturation(runs: &[(String, RunConfig)], s: &[RunSummary]) -> (Vec<Claim>, String) {
    let base = by_name(runs, s, &CellKey::BASELINE_LOW.name());
    let mr = by_name(runs, s, &CellKey::MOST_RECENT_LOW.name());
    let mw = by_name(runs, s, &CellKey::MAX_WINDOW_LOW.name());
    let e4 = by_name(runs, s, E4M3_RUN);
    // Each run's own (active) estimator, on activations and gradients (where spikes hit),
    // plus the shadow of the other on the same calls and the weights' slow drift.
    let (mr_calls, mw_calls) = (
        count_ag(mr, EstimatorKind::MostRecent),
        count_ag(mw, EstimatorKind::MaxWindow),
    );
    let (mr_shadow_in_mw, mw_shadow_in_mr) = (
        count_ag(mw, EstimatorKind::MostRecent),
        count_ag(mr, EstimatorKind::MaxWindow),
    );
    let weights = |r: &RunSummary, p: &str| {
        r.shadow_calls_by_role()
            .iter()
            .filter(|(role, _)| role == "W")
            .map(|(_, pairs)| count(pairs, p))
            .sum::<u64>()
    };
    let (mr_w, mw_w) = (weights(mr, "most_recent"), weights(mw, "max_window"));
    let n = mr.losses.len().min(base.losses.len());
    let mr_ape = ape(&mr.losses[..n], &base.losses[..n]);
    let mr_over = count(&mr.shadow_overflow(), "most_recent");
    let mr_elems = count(&mr.shadow_elements(), "most_recent");
    let e4_over = count(&e4.shadow_overflow(), "most_recent");
    let e4_calls = count(&e4.shadow_calls(), "most_recent");
    let kd = relative_drop(
        base.final_probes().knowledge_acc_norm,
        mr.final_probes().knowledge_acc_norm,
    );
    let mut claims = vec![
        Claim::new(
            "on activations and gradients, most_recent's estimate is exceeded on at least 4× as many calls as max_window(64)'s (and on at least 10)",
            vec![
                Part::exact(
                    "calls above the estimate, most_recent ÷ max_window(64)",
                    "×",
                    mr_calls as f64 / mw_calls.max(1) as f64,
                    Side::AtLeast,
                    4.0,
                ),
                Part::exact(
                    "most_recent's calls above its estimate",
                    " calls",
                    mr_calls as f64,
                    Side::AtLeast,
                    10.0,
                ),
            ],
            serde_json::json!({
                "most_recent_calls_above_est": mr_calls,
                "max_window_calls_above_est": mw_calls,
                "same_calls_shadow": {"max_window_in_most_recent_run": mw_shadow_in_mr, "most_recent_in_max_window_run": mr_shadow_in_mw},
                "weights_drifting_up": {"most_recent": mr_w, "max_window": mw_w},
            }),
        ),
        Claim::new(
            "the loss barely moves: APE of the most_recent run vs its matched baseline < 2 %",
            vec![Part::exact(
                &format!(
                    "APE of {} vs {}",
                    CellKey::MOST_RECENT_LOW.name(),
                    CellKey::BASELINE_LOW.name()
                ),
                "%",
                mr_ape,
                Side::Below,
                2.0,
            )],
            serde_json::json!({"ape_percent": mr_ape, "steps": n, "knowledge_drop_percent": kd}),
        ),
    ];
    claims.extend(what_formats_do(mr_elems, mr_over, e4_calls, e4_over));
    let summary = format!(
        "On activations and gradients, most_recent was exceeded on {mr_calls} calls, max_window(64) on {mw_calls} (weights, drifting up slowly, exceeded both: {mr_w} and {mw_w} calls); the loss stayed within {mr_ape:.3} % (APE) of the baseline and knowledge accuracy moved {kd:.1} %. HiF8 target 15 let {mr_elems} elements above the estimate through with fewer mantissa bits ({mr_over} overflowed); E4M3 at target 448 clipped {e4_over}."
    );
    (claims, summary)
}

/// What each format does with the excursions: HiF8 (target 15) keeps them with fewer
/// mantissa bits, E4M3 (target 448, saturating) clips them.
fn what_formats_do(mr_elems: u64, mr_over: u64, e4_calls: u64, e4_over: u64) -> [Claim; 2] {
    [
        Claim::new(
            "HiF8 with target 15 keeps what exceeds the estimate (fewer mantissa bits, no overflow)",
            vec![
                Part::exact(
                    "elements above most_recent's estimate",
                    " elements",
                    mr_elems as f64,
                    Side::AtLeast,
                    1.0,
                ),
                Part::exact(
                    "elements that overflowed",
                    " elements",
                    mr_over as f64,
                    Side::Below,
                    1.0,
                ),
            ],
            serde_json::json!({"elements_above_est": mr_elems, "overflow": mr_over}),
        ),
        Claim::new(
            "E4M3 with target = max (448) and saturate hard-clips the excursions (overflow > 0)",
            vec![
                Part::exact(
                    "E4M3 calls above the estimate",
                    " calls",
                    e4_calls as f64,
                    Side::AtLeast,
                    1.0,
                ),
                Part::exact(
                    "E4M3 elements clipped",
                    " elements",
                    e4_over as f64,
                    Side::AtLeast,
                    1.0,
                ),
            ],
            serde_json::json!({"calls_above_est": e4_calls, "overflow_clipped": e4_over}),
        ),
    ]
}

fn forgetting(
    base: ProbeScores,
    runs: &[(String, RunConfig)],
    s: &[RunSummary],
) -> (Vec<Claim>, String) {
    let base_run = [base_run(&base)];
    let one = |n: &str| std::slice::from_ref(by_name(runs, s, n));
    let forgot =
        |n: &str| forgetting_vs_base(ONE_RUN, &base_run, n, one(n)).map_or(f64::NAN, |p| p.value);
    let contrast =
        |hi: &str, lo: &str| forgetting_contrast(ONE_RUN, &base_run, (hi, one(hi)), (lo, one(lo)));
    let loss = |n: &str| final_loss(&by_name(runs, s, n).losses);
    let (ll, lh) = (
        loss(&CellKey::BASELINE_LOW.name()),
        loss(&CellKey::BASELINE_HIGH.name()),
    );
    let ev = |hi: &str, lo: &str| {
        serde_json::json!({
            "forgetting_high_points": forgot(hi),
            "forgetting_low_points": forgot(lo),
            "base_knowledge_acc_norm": base.knowledge_acc_norm,
            "chance": crate::grid::KNOWLEDGE_CHANCE,
            "items": base.knowledge_items,
        })
    };
    let claim = |text: &str, hi: &str, lo: &str| match contrast(hi, lo) {
        Some(part) => Claim::new(text, vec![part], ev(hi, lo)),
        None => unjudged(text),
    };
    let mut claims = vec![
        claim(
            "without QAT, the high learning rate forgets: it loses ≥ 10 points more of the base's above-chance knowledge than the low rate",
            &CellKey::BASELINE_HIGH.name(),
            &CellKey::BASELINE_LOW.name(),
        ),
        claim(
            "with QAT (max_window), the same",
            &CellKey::MAX_WINDOW_HIGH.name(),
            &CellKey::MAX_WINDOW_LOW.name(),
        ),
        Claim::new(
            "the loss looks healthy: the high-LR run ends with a training loss no more than 2 % above the low-LR run's",
            vec![Part::exact(
                "final training loss of the high-LR run relative to the low-LR run's",
                "%",
                (lh / ll - 1.0) * 100.0,
                Side::Below,
                2.0,
            )],
            serde_json::json!({"final_loss_high": lh, "final_loss_low": ll}),
        ),
    ];
    crate::claims::judge_family(&mut claims);
    let summary = format!(
        "Against the base model, the high LR forgot {:.1} points of its above-chance knowledge and the low LR {:.1} without QAT ({:.1} and {:.1} with QAT; 0 = none, 100 = down to chance, above 100 = below chance), while the final training loss (the mean of the last fifth of the steps) was {lh:.3} (high) vs {ll:.3} (low).",
        forgot(&CellKey::BASELINE_HIGH.name()),
        forgot(&CellKey::BASELINE_LOW.name()),
        forgot(&CellKey::MAX_WINDOW_HIGH.name()),
        forgot(&CellKey::MAX_WINDOW_LOW.name())
    );
    (claims, summary)
}

fn fixes(base: ProbeScores, s: &[RunSummary]) -> (Vec<Claim>, String) {
    let per_run: Vec<Vec<RunSummary>> = s.iter().map(|x| vec![x.clone()]).collect();
    let results = GridResults::compute(&grid_runs(), &per_run, base.clone());
    // The grid's verdicts on the loss and on the fix (lessons 1 and 2 teach the others) …
    let mut claims: Vec<Claim> = results
        .verdicts
        .iter()
        .filter(|v| v.claim.starts_with("the training loss") || v.claim.contains("near-lossless"))
        .cloned()
        .collect();
    // … and why each fix alone falls short.
    let row = |key: CellKey| results.rows.iter().find(|r| r.key == key);
    let base_run = [base_run(&base)];
    let text = "max_window alone is not enough: at the high LR it still forgets ≥ 10 points of the base's above-chance knowledge";
    let part = row(CellKey::MAX_WINDOW_HIGH).and_then(|r| {
        forgetting_vs_base(
            ONE_RUN,
            &base_run,
            &CellKey::MAX_WINDOW_HIGH.name(),
            &r.seeds,
        )
    });
    let forgot = part.as_ref().map_or(f64::NAN, |p| p.value);
    claims.push(match part {
        Some(p) => Claim::new(
            text,
            vec![p],
            serde_json::json!({"max_window_high_forgetting_points": forgot}),
        ),
        None => unjudged(text),
    });
    let ag = |key: CellKey, kind| row(key).map(|r| count_ag(&r.summary, kind)).unwrap_or(0);
    let (mr_low, fix_calls) = (
        ag(CellKey::MOST_RECENT_LOW, EstimatorKind::MostRecent),
        ag(CellKey::MAX_WINDOW_LOW_WARMUP, EstimatorKind::MaxWindow),
    );
    claims.push(Claim::new(
        "a low LR alone is not enough: most_recent's estimate is still exceeded on activations and gradients ≥ 4× as often as in the fixed run (and on at least 10 calls)",
        vec![
            Part::exact(
                &format!(
                    "calls above the estimate, {} ÷ {}",
                    CellKey::MOST_RECENT_LOW.name(),
                    CellKey::MAX_WINDOW_LOW_WARMUP.name()
                ),
                "×",
                mr_low as f64 / fix_calls.max(1) as f64,
                Side::AtLeast,
                4.0,
            ),
            Part::exact(&format!("{}'s calls above its estimate", CellKey::MOST_RECENT_LOW.name()), " calls", mr_low as f64, Side::AtLeast, 10.0),
        ],
        serde_json::json!({"most_recent_low_calls_above_est": mr_low, "fix_calls_above_est": fix_calls}),
    ));
    crate::claims::judge_family(&mut claims);
    let fix = row(CellKey::MAX_WINDOW_LOW_WARMUP);
    // An unfixed run that kept more knowledge than the fix: said, with both intervals.
    let noise: String = fix
        .map(|f| {
            [CellKey::MOST_RECENT_LOW, CellKey::MAX_WINDOW_LOW]
                .into_iter()
                .filter_map(row)
                .filter(|r| r.knowledge.value < f.knowledge.value)
                .map(|r| unfixed_kept_more(&r.name, &r.knowledge, &f.knowledge))
                .collect()
        })
        .unwrap_or_default();
    let summary = match fix {
        Some(r) => format!(
            "{} runs. max_window(64) + warmup + low LR: APE {:.3} %, knowledge drop {:.2} % [95 %: {:.2} to {:.2}] vs its baseline, {fix_calls} activation/gradient calls above the estimate (most_recent at the low LR: {mr_low}); max_window at the high LR forgot {:.1} points of the base model's above-chance knowledge.{noise} Claims: {}.",
            results.rows.len(),
            r.ape_all,
            r.knowledge.value,
            r.knowledge.interval[0],
            r.knowledge.interval[1],
            forgot,
            crate::claims::headline(&claims, Verdict3::as_str),
        ),
        None => "The grid did not run.".into(),
    };
    (claims, summary)
}

/// Why an unfixed run may keep more knowledge than the fix: the two drops' intervals, and
/// whether they overlap (noise at this size) or not.
fn unfixed_kept_more(
    name: &str,
    unfixed: &hif8lab_train::eval::resample::Estimate,
    fix: &hif8lab_train::eval::resample::Estimate,
) -> String {
    let overlap = unfixed.interval[1] >= fix.interval[0] && fix.interval[1] >= unfixed.interval[0];
    format!(
        " {name} kept more knowledge than the fix (drop {:.2} % [95 %: {:.2} to {:.2}] against {:.2} % [{:.2} to {:.2}]): {}",
        unfixed.value,
        unfixed.interval[0],
        unfixed.interval[1],
        fix.value,
        fix.interval[0],
        fix.interval[1],
        if overlap {
            "the intervals overlap, so at this size the difference is noise (a few probe items), not a benefit of saturation."
        } else {
            "the intervals do not overlap: at this size the unfixed run did keep more, on these items."
        }
    )
}

/// Runs a lesson headless: pretrains the base (or reuses `<out>/base`), trains the scenario
/// into `<out>/runs/`, and judges it.
#[cfg(not(target_arch = "wasm32"))]
pub fn run_lesson<B: hif8lab_engine::Backend>(
    name: &str,
    make: &dyn Fn() -> Result<B, hif8lab_train::TrainError>,
    grid: &GridConfig,
    out: &std::path::Path,
    progress: &mut dyn crate::grid::GridProgress,
    user: Option<&RunConfig>,
) -> Result<LessonReport, hif8lab_train::TrainError> {
    let refused = |message: String| hif8lab_train::TrainError::Setting {
        setting: String::new(),
        message,
    };
    let id: LessonId = name
        .parse()
        .map_err(|e: hif8lab_format::UnknownName| refused(e.to_string()))?;
    let runs = scenario(id, grid, user).ok_or_else(|| {
        refused(format!(
            "lesson '{name}' trains nothing: it is judged from a grid's data"
        ))
    })?;
    let (base, summaries) = crate::grid::train_from_base(make, grid, out, &runs, progress)?;
    Ok(judge(id, base, &runs, &summaries))
}

#[cfg(test)]
mod id_tests {
    use super::*;

    #[test]
    fn an_unfixed_run_keeping_more_is_called_noise_only_when_the_intervals_overlap() {
        use hif8lab_train::eval::resample::Estimate;
        let e = |value: f64, lo: f64, hi: f64| Estimate {
            value,
            interval: [lo, hi],
            p_value: 0.5,
        };
        let fix = e(3.0, 1.0, 5.0);
        let s = unfixed_kept_more(&CellKey::MAX_WINDOW_LOW.name(), &e(1.5, -0.5, 3.5), &fix);
        assert!(
            s.contains("drop 1.50 % [95 %: -0.50 to 3.50] against 3.00 % [1.00 to 5.00]"),
            "{s}"
        );
        assert!(s.contains("noise"), "{s}");
        let s = unfixed_kept_more(&CellKey::MAX_WINDOW_LOW.name(), &e(-2.0, -3.0, 0.5), &fix);
        assert!(s.contains("do not overlap") && !s.contains("noise"), "{s}");
    }

    #[test]
    fn the_final_loss_is_the_mean_of_the_last_fifth() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(final_loss(&v), 9.5);
        assert_eq!(final_loss(&[3.0]), 3.0);
        assert!(final_loss(&[]).is_nan());
    }

    #[test]
    fn every_lesson_is_found_by_its_id_and_its_name() {
        for (i, l) in LESSONS.iter().enumerate() {
            assert_eq!(l.id as usize, i, "LESSONS is in the enum's order");
            assert_eq!(l.id.name(), l.name);
            assert_eq!(l.name.parse::<LessonId>(), Ok(l.id));
            assert!(std::ptr::eq(l.id.lesson(), l));
        }
        let e = "nope".parse::<LessonId>().unwrap_err();
        assert!(
            e.to_string().contains("unknown lesson 'nope'") && e.to_string().contains("saturation"),
            "{e}"
        );
        // Only the outliers lesson has no scenario to train.
        let grid = GridConfig::preset("grid-lesson").unwrap();
        for l in &LESSONS {
            assert_eq!(
                scenario(l.id, &grid, None).is_none(),
                l.id == LessonId::Outliers
            );
        }
    }
}
