//! The pre-registered perturb-then-train study (`docs/results/prereg/real-smollm2-perturb.md`,
//! committed in [`PREREG_COMMIT`] before its code and its runs), analysed as registered.
//!
//! Arms, each in data orders 0–3, every contrast paired within an order:
//! - **U**: max_window-low from the undamaged base: the dose study's committed runs;
//! - **P**: max_window-low from the base damaged by `hif8:1024` (`grid --perturb`);
//! - **S**: the sham, max_window(65)-low from the undamaged base;
//! - the dose study's most_recent-low for the saturation contrast.
//!
//! Claims (Holm over 1 and 3 at α = 0.05; the sham is a check, not a claim):
//! 1. **Control**: c = margin(U) − margin(P) at 480 steps; holds when the 95 % t interval
//!    of mean c (df 3) lies at or above δ₂′, fails when wholly below, else inconclusive.
//! 2. **Sham**: s = margin(U) − margin(S); must not be significant at α = 0.05.
//! 3. **Saturation**: d = margin(max_window) − margin(most_recent) on the dose runs; judged
//!    only when claim 1 holds, the sham is not significant and the manipulation check finds
//!    the arms differ; otherwise "not tested at this scale" (or "unanswerable by this probe"
//!    when the control did not hold).

mod report;

use crate::claims::{Claim, Part, Side, Spread, judge_family};
use crate::grid::{CellKey, GridData, GridDataRun};
use crate::stats::exact::t_test;
use crate::stats::mean_sd;
use hif8lab_train::ProbeScores;
use hif8lab_train::eval::ProbeScore;
use hif8lab_train::trainer::TrainError;

/// The pre-registration.
pub const PREREG: &str = "docs/results/prereg/real-smollm2-perturb.md";
/// The commit that added it.
pub const PREREG_COMMIT: &str = "d493d4b70e776798ab8b18e4018161889b44ca3a";
/// δ₂′: the uniform margin shift that costs 2 % of max_window-low's knowledge acc_norm at
/// 480 steps (nats per byte), fixed in the pre-registration.
pub const DELTA2P: f64 = 0.0091;
/// The study's data file: every new arm's grid data, each line tagged with its arm.
pub const DATA_FILE: &str = "runs.jsonl.gz";
/// The new arms, as tagged in [`DATA_FILE`].
pub const ARMS: [&str; 3] = ["damaged", "sham", "rerun"];

/// The study's new data: each arm's grid data.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StudyData {
    /// P: max_window-low from the damaged base.
    pub damaged: GridData,
    /// S: the sham from the undamaged base.
    pub sham: GridData,
    /// U's order 0 again, by the build that ran P (the reproducibility check).
    pub rerun: Option<GridData>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Tagged {
    arm: String,
    line: serde_json::Value,
}

impl StudyData {
    /// The gzipped JSON lines: each arm's grid data lines, tagged `{"arm": …, "line": …}`.
    pub fn to_gzip_jsonl(&self) -> Result<Vec<u8>, TrainError> {
        use std::io::Write;
        let mut text = String::new();
        let arms = [Some(&self.damaged), Some(&self.sham), self.rerun.as_ref()];
        for (arm, data) in ARMS.iter().zip(arms) {
            let Some(data) = data else { continue };
            for l in data.to_jsonl().lines() {
                let line: serde_json::Value =
                    serde_json::from_str(l).map_err(|e| TrainError::File {
                        file: DATA_FILE.into(),
                        message: e.to_string(),
                    })?;
                let tagged = Tagged {
                    arm: (*arm).to_owned(),
                    line,
                };
                text.push_str(&serde_json::to_string(&tagged).unwrap_or_default());
                text.push('\n');
            }
        }
        let io_err = TrainError::io(DATA_FILE);
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(text.as_bytes()).map_err(&io_err)?;
        z.finish().map_err(io_err)
    }

    /// Reads [`DATA_FILE`] at `path`: each arm's lines through the grid data reader (every
    /// check it makes), errors naming the file, the line and the field.
    pub fn read(path: &std::path::Path) -> Result<Self, TrainError> {
        let source = path.display().to_string();
        let bytes =
            crate::evals::lm_eval::read_input(path, true).map_err(|e| TrainError::File {
                file: source.clone(),
                message: e.to_string(),
            })?;
        let text = String::from_utf8(bytes).map_err(|e| TrainError::File {
            file: source.clone(),
            message: format!("not UTF-8 JSON lines: {e}"),
        })?;
        let mut arms: [String; 3] = Default::default();
        for (i, l) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let t: Tagged = serde_json::from_str(l).map_err(|e| TrainError::File {
                file: source.clone(),
                message: format!("line {}: {e}", i + 1),
            })?;
            let k = ARMS
                .iter()
                .position(|a| *a == t.arm)
                .ok_or_else(|| TrainError::File {
                    file: source.clone(),
                    message: format!(
                        "line {}: field 'arm' is \"{}\" (arms: {})",
                        i + 1,
                        t.arm,
                        ARMS.join(", ")
                    ),
                })?;
            arms[k].push_str(&t.line.to_string());
            arms[k].push('\n');
        }
        let grid =
            |k: usize| GridData::from_jsonl(&format!("{source} (arm {})", ARMS[k]), &arms[k]);
        for k in 0..2 {
            if arms[k].is_empty() {
                return Err(TrainError::File {
                    file: source.clone(),
                    message: format!("no line of the arm \"{}\"", ARMS[k]),
                });
            }
        }
        Ok(StudyData {
            damaged: grid(0)?,
            sham: grid(1)?,
            rerun: if arms[2].is_empty() {
                None
            } else {
                Some(grid(2)?)
            },
        })
    }
}

/// A mean over orders with its 95 % t interval and two-sided p against 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Contrast {
    /// Orders.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// 95 % t interval (df n − 1).
    pub interval: [f64; 2],
    /// Two-sided p against 0.
    pub p: f64,
}

impl Contrast {
    fn of(values: &[f64]) -> Option<Self> {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        let (mean, interval, p) = t_test(&v, 0.05)?;
        Some(Contrast {
            n: v.len(),
            mean,
            interval,
            p,
        })
    }

    fn words(&self, unit: &str) -> String {
        format!(
            "{:+.4}{unit}, 95 % t interval [{:+.4}, {:+.4}] (df {}), p = {:.3}",
            self.mean,
            self.interval[0],
            self.interval[1],
            self.n - 1,
            self.p
        )
    }
}

/// What the study found.
#[derive(Clone, Debug)]
pub struct PerturbStudy {
    /// Orders with U, P and S.
    pub orders: Vec<usize>,
    /// The probed doses (steps).
    pub doses: Vec<u64>,
    /// Per dose, per order: c = margin(U) − margin(P).
    pub control: Vec<Vec<f64>>,
    /// Per dose, per order: s = margin(U) − margin(S).
    pub sham: Vec<Vec<f64>>,
    /// Per order at the last dose: d = margin(max_window) − margin(most_recent) (dose runs).
    pub saturation: Vec<f64>,
    /// Per arm (U, P, S), per order at the last dose: knowledge acc_norm, completion margin,
    /// held-out loss.
    pub arms: [Vec<(f64, f64, f64)>; 3],
    /// Per order: the control contrast at matched held-out loss (P's margin interpolated
    /// over its probes to U's held-out loss at the last dose), None where P's losses do not
    /// reach it.
    pub matched: Vec<Option<f64>>,
    /// The sham's contrast at the last dose and whether it is significant.
    pub sham_check: Option<(Contrast, bool)>,
    /// The manipulation check on the dose runs: whether the arms differ, and why.
    pub manipulation: Option<(bool, String)>,
    /// The reproducibility check: per step, the rerun's loss minus U's order 0; the
    /// largest absolute difference and the steps compared.
    pub rerun: Option<(f64, usize)>,
    /// The bases' scores: undamaged, damaged.
    pub bases: [Option<ProbeScores>; 2],
    /// The damaged base, as its data name it.
    pub damage: String,
    /// Claims 1 (control) and 3 (saturation), judged together; claim 3's verdict word when
    /// it is not judged ("not tested at this scale", "unanswerable by this probe", …).
    pub claims: Vec<Claim>,
    /// Why claim 3 was not judged, if it was not.
    pub saturation_not_judged: Option<String>,
    /// Completion items each arm (U, P, S) was scored on; completion is compared only
    /// where they match U's.
    pub completion_items: [usize; 3],
}

fn margin(p: &ProbeScores) -> f64 {
    p.score(ProbeScore::KnowledgeMargin)
}

fn doses_of(d: &GridDataRun) -> Vec<&ProbeScores> {
    d.summary
        .earlier_probes
        .iter()
        .chain(d.summary.probes.iter())
        .collect()
}

fn arm(data: &GridData, key: CellKey) -> Vec<&GridDataRun> {
    let name = key.name();
    let mut v: Vec<&GridDataRun> = data
        .runs
        .iter()
        .filter(|d| d.run == name && d.base_seed == 0)
        .collect();
    v.sort_by_key(|d| d.order);
    v
}

fn at(d: &GridDataRun, step: u64, f: fn(&ProbeScores) -> f64) -> f64 {
    doses_of(d)
        .into_iter()
        .find(|p| p.step == step)
        .map_or(f64::NAN, f)
}

/// Linear interpolation of P's margin at U's held-out loss `target`, over P's probes in
/// order of held-out loss; None where `target` lies outside their range.
fn matched_margin(p: &GridDataRun, target: f64) -> Option<f64> {
    let mut pts: Vec<(f64, f64)> = doses_of(p)
        .into_iter()
        .map(|s| (s.heldout_loss, margin(s)))
        .filter(|(l, m)| l.is_finite() && m.is_finite())
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts.windows(2).find_map(|w| {
        let ((l0, m0), (l1, m1)) = (w[0], w[1]);
        (l0 <= target && target <= l1).then(|| {
            if l1 > l0 {
                m0 + (m1 - m0) * (target - l0) / (l1 - l0)
            } else {
                m0
            }
        })
    })
}

/// The study from the dose study's data (U and most_recent-low) and the new arms'.
pub fn analyse(dose: &GridData, new: &StudyData) -> Result<PerturbStudy, TrainError> {
    let bad = |message: String| TrainError::File {
        file: DATA_FILE.into(),
        message,
    };
    let u = arm(dose, CellKey::MAX_WINDOW_LOW);
    let mr = arm(dose, CellKey::MOST_RECENT_LOW);
    let p = arm(&new.damaged, CellKey::MAX_WINDOW_LOW);
    let s = arm(&new.sham, CellKey::SHAM_LOW);
    if u.is_empty() || p.is_empty() || s.is_empty() {
        return Err(bad(format!(
            "the study needs max_window-low in the dose data ({} orders), max_window-low in \
             the damaged arm ({}) and max_window65-low in the sham arm ({})",
            u.len(),
            p.len(),
            s.len()
        )));
    }
    if new
        .damaged
        .base_model
        .as_deref()
        .is_none_or(|m| !m.contains("damaged"))
    {
        return Err(bad(format!(
            "the damaged arm's base is \"{}\": not a damaged base",
            new.damaged.base_model.clone().unwrap_or_default()
        )));
    }
    if new
        .sham
        .base_model
        .as_deref()
        .is_some_and(|m| m.contains("damaged"))
    {
        return Err(bad("the sham arm's base is damaged".into()));
    }
    let orders: Vec<usize> = u
        .iter()
        .map(|d| d.order)
        .filter(|o| p.iter().any(|d| d.order == *o) && s.iter().any(|d| d.order == *o))
        .collect();
    fn find<'a>(v: &[&'a GridDataRun], o: usize) -> Option<&'a GridDataRun> {
        v.iter().copied().find(|d| d.order == o)
    }
    let doses: Vec<u64> = doses_of(u[0]).iter().map(|q| q.step).collect();
    let per_dose = |other: &[&GridDataRun]| -> Vec<Vec<f64>> {
        doses
            .iter()
            .map(|step| {
                orders
                    .iter()
                    .map(|o| match (find(&u, *o), find(other, *o)) {
                        (Some(a), Some(b)) => at(a, *step, margin) - at(b, *step, margin),
                        _ => f64::NAN,
                    })
                    .collect()
            })
            .collect()
    };
    let control = per_dose(&p);
    let sham = per_dose(&s);
    let last = doses.last().copied().unwrap_or(0);
    let saturation: Vec<f64> = orders
        .iter()
        .filter_map(|o| Some(at(find(&u, *o)?, last, margin) - at(find(&mr, *o)?, last, margin)))
        .collect();
    // Completion is compared only on the same items: the dose study's runs were scored on
    // an earlier, smaller completion set than runs made since.
    let items = |v: &[&GridDataRun]| {
        v.first()
            .and_then(|d| d.summary.probes.as_ref())
            .map_or(0, |q| q.completion_items)
    };
    let completion_items = [items(&u), items(&p), items(&s)];
    let figures = |v: &[&GridDataRun]| -> Vec<(f64, f64, f64)> {
        let same = items(v) == completion_items[0];
        orders
            .iter()
            .map(|o| {
                find(v, *o).map_or((f64::NAN, f64::NAN, f64::NAN), |d| {
                    (
                        at(d, last, |q| q.score(ProbeScore::KnowledgeAccNorm)),
                        if same {
                            at(d, last, |q| q.score(ProbeScore::CompletionMargin))
                        } else {
                            f64::NAN
                        },
                        at(d, last, |q| q.heldout_loss),
                    )
                })
            })
            .collect()
    };
    let arms = [figures(&u), figures(&p), figures(&s)];
    let matched: Vec<Option<f64>> = orders
        .iter()
        .map(|o| {
            let (a, b) = (find(&u, *o)?, find(&p, *o)?);
            let target = at(a, last, |q| q.heldout_loss);
            Some(at(a, last, margin) - matched_margin(b, target)?)
        })
        .collect();
    let sham_check = sham
        .last()
        .and_then(|v| Contrast::of(v))
        .map(|c| (c, c.p < 0.05));
    let manipulation = crate::grid::results_of("the dose study's data", dose.clone())
        .ok()
        .and_then(|r| crate::grid::manipulation::check(&r.rows))
        .map(|c| (c.differs, c.why));
    let rerun = new.rerun.as_ref().and_then(|r| {
        let a = arm(r, CellKey::MAX_WINDOW_LOW)
            .into_iter()
            .find(|d| d.order == 0)?;
        let b = find(&u, 0)?;
        let n = a.summary.losses.len().min(b.summary.losses.len());
        let worst = a.summary.losses[..n]
            .iter()
            .zip(&b.summary.losses[..n])
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        Some((worst, n))
    });
    // Claim 1: the control, on its per-order contrast at the last dose.
    let final_c = control.last().cloned().unwrap_or_default();
    let part = |values: &[f64], measured: &str, side: Side, test: &str| Part {
        measured: measured.into(),
        unit: " nats/byte".into(),
        value: mean_sd(values).0,
        spread: Spread::Seeds(values.to_vec()),
        side,
        threshold: DELTA2P,
        test: test.into(),
        variation: format!(
            "{} data orders (the unit), paired within each",
            values.len()
        ),
    };
    let mut claims = vec![Claim::new(
        &format!(
            "the probe sees a damage that training carries (control: margin(U) − margin(P) at {last} steps ≥ δ₂′ = {DELTA2P})"
        ),
        vec![part(
            &final_c,
            &format!("mean knowledge margin, undamaged − damaged base, at {last} steps"),
            Side::AtLeast,
            "paired t over data orders",
        )],
        serde_json::Value::Null,
    )];
    judge_family(&mut claims);
    let control_holds = claims[0].holds;
    let sham_significant = sham_check.is_some_and(|(_, sig)| sig);
    let differs = manipulation.as_ref().is_some_and(|(d, _)| *d);
    let saturation_not_judged = if !control_holds {
        Some(format!(
            "unanswerable by this probe: the control {} (claim 1 did not hold)",
            claims[0].verdict.as_str()
        ))
    } else if sham_significant {
        Some(
            "not judged: the sham is significant, so within-order contrasts of this size are not interpretable at this design"
                .into(),
        )
    } else if !differs {
        Some(format!(
            "not tested at this scale: the arms do not differ in saturation ({})",
            manipulation
                .as_ref()
                .map_or("no manipulation check on the dose data".into(), |(_, w)| w
                    .clone())
        ))
    } else {
        None
    };
    if saturation_not_judged.is_none() {
        claims.push(Claim::new(
            &format!(
                "saturation costs knowledge at {last} steps (margin(max_window) − margin(most_recent) ≥ δ₂′ = {DELTA2P})"
            ),
            vec![part(
                &saturation,
                &format!("mean knowledge margin, max_window − most_recent, at {last} steps"),
                Side::AtLeast,
                "paired t over data orders",
            )],
            serde_json::Value::Null,
        ));
        judge_family(&mut claims);
    }
    let base_of = |g: &GridData| g.bases.first().cloned();
    Ok(PerturbStudy {
        orders,
        doses,
        control,
        sham,
        saturation,
        arms,
        matched,
        sham_check,
        manipulation,
        rerun,
        bases: [base_of(&new.sham), base_of(&new.damaged)],
        completion_items,
        damage: new.damaged.base_model.clone().unwrap_or_default(),
        claims,
        saturation_not_judged,
    })
}

fn mean(v: &[f64]) -> f64 {
    let f: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if f.is_empty() {
        f64::NAN
    } else {
        f.iter().sum::<f64>() / f.len() as f64
    }
}
