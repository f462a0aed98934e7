//! The pre-registered dose study (`grid --preset real-smollm2-dose`), analysed as its
//! pre-registration says (`docs/results/prereg/real-smollm2-dose.md`, committed in
//! [`PREREG_COMMIT`] before any run): the data order is the unit, the primary endpoint the mean
//! knowledge margin, contrasts paired within orders and tested across them (t, df = orders − 1),
//! a positive control, a placebo, the dose–response slope, and the rule for adding orders.
//! Item-level tests are not used here: they condition on the trained models.

use std::fmt::Write as _;

use serde::Serialize;

use super::GridDataRun;
use crate::claims::{Claim, Part, Side, Spread, judge_family};
use crate::stats::exact::student_t_quantile;
use crate::stats::mean_sd;
use hif8lab_train::eval::ProbeScore;
use hif8lab_train::run::RunSummary;

/// The pre-registration.
pub const PREREG: &str = "docs/results/prereg/real-smollm2-dose.md";
/// The commit that added it (before any run of the study).
pub const PREREG_COMMIT: &str = "8c6d7734a663f138311e1029d1cb67d974bd311a";
/// δ₂: the uniform margin shift that lowers the base's knowledge acc_norm by 2 % relative
/// (calibrated on the committed real-smollm2 base margins, stated in the pre-registration).
pub const DELTA2: f64 = 0.0183;
/// δ₀.₄: the same at the paper's scale (0.4 % relative); reported, not judged.
pub const DELTA04: f64 = 0.0025;
/// The arms' cells.
const SATURATING: super::CellKey = super::CellKey::MOST_RECENT_LOW;
const MAX_WINDOW: super::CellKey = super::CellKey::MAX_WINDOW_LOW;

/// What the study found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DoseStudy {
    /// Orders in which both arms ran.
    pub orders: usize,
    /// The probed doses (steps).
    pub doses: Vec<u64>,
    /// Per dose, per order: d = mean margin(max_window) − mean margin(most_recent).
    pub contrast: Vec<Vec<f64>>,
    /// Per order at the last dose: held-out loss, most_recent − max_window (nats).
    pub heldout: Vec<f64>,
    /// Per order: the least-squares slope of d over the doses (per 100 steps).
    pub slope: Vec<f64>,
    /// Per control order: c = mean margin(max_window) − mean margin(control) at the control's
    /// dose.
    pub control: Vec<f64>,
    /// Per control order: held-out loss, control − max_window at the control's dose (nats):
    /// whether the deliberate damage shows where the probe's margin does not.
    pub control_heldout: Vec<f64>,
    /// Placebo: max_window in orders {0, 1} minus orders {2, 3} (pairs 0–2, 1–3) at the
    /// last dose, and its 95 % t interval (df 1).
    pub placebo: Option<(f64, [f64; 2])>,
    /// The rule for adding orders at the first dose: the standard deviation of d, the
    /// 95 % half-width it implies with 4 orders, and whether orders are to be added.
    pub adding_rule: Option<(f64, f64, bool)>,
    /// Claims 1–3 of the pre-registration, judged together (Holm).
    pub claims: Vec<Claim>,
}

fn margin(p: &hif8lab_train::ProbeScores) -> f64 {
    p.score(ProbeScore::KnowledgeMargin)
}

/// A run's probe at a dose.
fn probe_at(d: &GridDataRun, step: u64) -> Option<&hif8lab_train::ProbeScores> {
    doses_of(&d.summary).into_iter().find(|p| p.step == step)
}

/// Every probe of a run, in order of step.
fn doses_of(s: &RunSummary) -> Vec<&hif8lab_train::ProbeScores> {
    s.earlier_probes.iter().chain(s.probes.iter()).collect()
}

fn t_interval(values: &[f64], confidence: f64) -> [f64; 2] {
    crate::stats::exact::t_interval(values, 1.0 - confidence)
}

/// The study from a grid's data, or None when the data hold no dose study (no positive
/// control, or no arm probed at several doses).
pub fn analyse(data: &[GridDataRun]) -> Option<DoseStudy> {
    let arm = |key: super::CellKey| -> Vec<&GridDataRun> {
        let name = key.name();
        let mut v: Vec<&GridDataRun> = data
            .iter()
            .filter(|d| d.run == name && d.base_seed == 0)
            .collect();
        v.sort_by_key(|d| d.order);
        v
    };
    // A dose study is a grid with the positive control and arms probed at several doses.
    let (mr, mw) = (arm(SATURATING), arm(MAX_WINDOW));
    if !data
        .iter()
        .any(|d| d.run == super::CellKey::CONTROL_LOW.name())
        || mw.is_empty()
        || mw.iter().all(|d| d.summary.earlier_probes.is_empty())
    {
        return None;
    }
    let orders = mr.len().min(mw.len());
    let doses: Vec<u64> = doses_of(&mw[0].summary).iter().map(|p| p.step).collect();
    let at = |d: &GridDataRun, step: u64| probe_at(d, step).map_or(f64::NAN, margin);
    let contrast: Vec<Vec<f64>> = doses
        .iter()
        .map(|s| (0..orders).map(|o| at(mw[o], *s) - at(mr[o], *s)).collect())
        .collect();
    let heldout = (0..orders)
        .map(|o| {
            let h = |d: &GridDataRun| {
                d.summary
                    .probes
                    .as_ref()
                    .map_or(f64::NAN, |p| p.heldout_loss)
            };
            h(mr[o]) - h(mw[o])
        })
        .collect();
    let slope = slopes(&doses, &contrast, orders);
    let ctrl = arm(super::CellKey::CONTROL_LOW);
    let control: Vec<f64> = ctrl
        .iter()
        .filter_map(|c| {
            let step = c.summary.probes.as_ref()?.step;
            let w = mw.iter().find(|d| d.order == c.order)?;
            Some(at(w, step) - margin(c.summary.probes.as_ref()?))
        })
        .collect();
    let control_heldout: Vec<f64> = ctrl
        .iter()
        .filter_map(|c| {
            let p = c.summary.probes.as_ref()?;
            let w = mw.iter().find(|d| d.order == c.order)?;
            Some(p.heldout_loss - probe_at(w, p.step).map_or(f64::NAN, |q| q.heldout_loss))
        })
        .collect();
    let last = doses.last().copied().unwrap_or(0);
    let placebo = (mw.len() >= 4).then(|| {
        let pairs = [
            at(mw[0], last) - at(mw[2], last),
            at(mw[1], last) - at(mw[3], last),
        ];
        (mean_sd(&pairs).0, t_interval(&pairs, 0.95))
    });
    let adding_rule = contrast.first().filter(|c| c.len() >= 2).map(|c| {
        let sd = mean_sd(c).1;
        let half = student_t_quantile(0.975, 3.0) * sd / 2.0;
        (sd, half, half > DELTA2 / 2.0)
    });
    let mut claims = dose_claims(last, orders, &contrast, &control);
    judge_family(&mut claims);
    Some(DoseStudy {
        orders,
        doses,
        contrast,
        heldout,
        slope,
        control,
        control_heldout,
        placebo,
        adding_rule,
        claims,
    })
}

/// Per order, the least-squares slope of the contrast over the doses (per 100 steps).
fn slopes(doses: &[u64], contrast: &[Vec<f64>], orders: usize) -> Vec<f64> {
    let xs: Vec<f64> = doses.iter().map(|s| *s as f64 / 100.0).collect();
    (0..orders)
        .map(|o| {
            let ys: Vec<f64> = contrast.iter().map(|c| c[o]).collect();
            let (mx, my) = (mean_sd(&xs).0, mean_sd(&ys).0);
            let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
            let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
            sxy / sxx.max(1e-300)
        })
        .collect()
}

/// The pre-registration's three claims (cost, equivalence, the control), before Holm.
fn dose_claims(last: u64, orders: usize, contrast: &[Vec<f64>], control: &[f64]) -> Vec<Claim> {
    let final_d = contrast.last().cloned().unwrap_or_default();
    let part = |side: Side, threshold: f64, test: &str| Part {
        measured: format!("mean knowledge margin, max_window − most_recent, at {last} steps"),
        unit: " nats/byte".into(),
        value: mean_sd(&final_d).0,
        spread: Spread::Seeds(final_d.clone()),
        side,
        threshold,
        test: test.into(),
        variation: format!("{orders} data orders (the unit), paired within each"),
    };
    let claims = vec![
        Claim::new(
            &format!("saturation costs knowledge at {last} steps (margin shift ≥ δ₂ = {DELTA2})"),
            vec![part(Side::AtLeast, DELTA2, "paired t over data orders")],
            serde_json::Value::Null,
        ),
        Claim::new(
            &format!("saturation costs nothing that matters (within ±δ₂ = {DELTA2})"),
            vec![part(
                Side::Within,
                DELTA2,
                "paired t over data orders, two one-sided tests",
            )],
            serde_json::Value::Null,
        ),
        Claim::new(
            &format!(
                "the probe sees a deliberate damage (positive control: every order ≥ δ₂ = {DELTA2})"
            ),
            control
                .iter()
                .enumerate()
                .map(|(o, c)| {
                    Part::exact(
                        &format!("control margin loss, order {o}"),
                        " nats/byte",
                        *c,
                        Side::AtLeast,
                        DELTA2,
                    )
                })
                .collect(),
            serde_json::Value::Null,
        ),
    ];
    claims
}

/// The best-case 95 % half-width of the cost claim's interval with `orders` orders and a
/// standard deviation `sd` of the per-order contrast: what the design can resolve.
pub fn half_width(orders: usize, sd: f64) -> f64 {
    if orders < 2 {
        return f64::INFINITY;
    }
    student_t_quantile(0.975, (orders - 1) as f64) * sd / (orders as f64).sqrt()
}

impl DoseStudy {
    /// The study's section of the report.
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        self.write_design(&mut md);
        self.write_secondary(&mut md);
        self.write_control(&mut md);
        self.write_claims(&mut md);
        md
    }

    /// The design, the contrast at each dose and what the design could resolve.
    fn write_design(&self, md: &mut String) {
        let _ = writeln!(md, "\n## The dose study (pre-registered)\n");
        let _ = writeln!(
            md,
            "Pre-registration: `{PREREG}`, commit `{PREREG_COMMIT}`, made before any run of this study; the analysis below is its section \"Analysis\". The unit is the data order ({} orders, both arms in each); contrasts are paired within an order and tested across orders (t, df = {}). δ₂ = {DELTA2} nats/byte (2 % relative knowledge acc_norm on the base), δ₀.₄ = {DELTA04}.\n",
            self.orders,
            self.orders.saturating_sub(1)
        );
        let _ = writeln!(
            md,
            "| steps | d per order (max_window − most_recent, nats/byte) | mean | 95 % t interval |"
        );
        let _ = writeln!(md, "|---:|---|---:|---|");
        for (s, c) in self.doses.iter().zip(&self.contrast) {
            let [lo, hi] = t_interval(c, 0.95);
            let list: Vec<String> = c.iter().map(|v| format!("{v:+.4}")).collect();
            let _ = writeln!(
                md,
                "| {s} | {} | {:+.4} | [{lo:+.4}, {hi:+.4}] |",
                list.join(", "),
                mean_sd(c).0
            );
        }
        if let Some(last) = self.contrast.last().filter(|c| c.len() >= 2) {
            let n = last.len() as f64;
            let reach = DELTA2 * n.sqrt() / student_t_quantile(0.975, n - 1.0);
            let sd = mean_sd(last).1;
            let _ = writeln!(
                md,
                "\nReachability: with {} orders the cost claim can hold only if the sd of d is below {reach:.4} (planned by `grid --plan`); the observed sd at the last dose is {sd:.4}: {}.",
                last.len(),
                if sd < reach {
                    "the claims could be decided"
                } else {
                    "the design could not resolve δ₂ at this spread"
                }
            );
        }
    }

    /// The secondary endpoints (not claims): the dose–response slope, the held-out loss, the
    /// rule for adding orders and the placebo.
    fn write_secondary(&self, md: &mut String) {
        let [lo, hi] = t_interval(&self.slope, 0.95);
        let _ = writeln!(
            md,
            "\nDose–response: slope of d {:+.5} per 100 steps, 95 % t interval [{lo:+.5}, {hi:+.5}] (not a claim). Held-out loss at the last dose, most_recent − max_window: {} nats.",
            mean_sd(&self.slope).0,
            self.heldout
                .iter()
                .map(|v| format!("{v:+.4}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some((sd, half, add)) = self.adding_rule {
            let _ = writeln!(
                md,
                "\nRule for adding orders (at the first dose): sd of d {sd:.4}, 95 % half-width with 4 orders {half:.4} against δ₂ / 2 = {:.4}: {}.",
                DELTA2 / 2.0,
                if add {
                    "orders 4–7 are to be added"
                } else {
                    "4 orders stay"
                }
            );
        }
        match &self.placebo {
            Some((v, [lo, hi])) => {
                let sig = *lo > 0.0 || *hi < 0.0;
                let _ = writeln!(
                    md,
                    "\nPlacebo (max_window in orders 0, 1 minus 2, 3): {v:+.4} [{lo:+.4}, {hi:+.4}] (t, df 1): {}.",
                    if sig {
                        "significant — order-to-order variation is larger than the claims' intervals assume"
                    } else {
                        "not significant, as it must be"
                    }
                );
            }
            None => {
                let _ = writeln!(md, "\nPlacebo: needs 4 orders of max_window.");
            }
        }
    }

    /// The positive control and how it reads.
    fn write_control(&self, md: &mut String) {
        let list = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:+.4}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if self.control.is_empty() {
            let _ = writeln!(md, "\nPositive control: not run.");
        } else {
            let _ = writeln!(
                md,
                "\nPositive control (c = max_window − control, mean knowledge margin at the control's dose, per order): {}; held-out loss, control − max_window: {} nats.",
                list(&self.control),
                list(&self.control_heldout)
            );
            let damaged = self.control_heldout.iter().all(|h| *h > 0.0);
            let other_way = self.control.iter().all(|c| *c < 0.0);
            let reading = match (other_way, damaged) {
                (true, true) => {
                    "the control moved the endpoint the other way: the deliberately damaged runs learned less from the new text (their held-out loss is higher) and kept more of the right answers' margin than max_window did. Damage that slows learning slowed the forgetting that continued training causes in every arm, so this margin cannot tell a quantization damage from less learning"
                }
                (true, false) => {
                    "the control moved the endpoint the other way (the control kept more margin than max_window)"
                }
                (false, _) if self.control.iter().all(|c| *c >= DELTA2) => {
                    "the control lost at least δ₂ of margin in every order: the probe sees deliberate damage"
                }
                (false, _) => "the control did not lose δ₂ of margin in every order",
            };
            let _ = writeln!(md, "\nReading: {reading}.");
        }
    }

    /// The pre-registered claims, with rule 3 applied.
    fn write_claims(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "\n### Claims of the pre-registration (Holm over the three)\n"
        );
        let control_fails = self
            .claims
            .get(2)
            .is_some_and(|c| c.verdict != crate::stats::Verdict3::Holds);
        for (i, c) in self.claims.iter().enumerate() {
            // The sentence without its leading verdict (said in bold before it).
            let sentence = c.sentence();
            let body = sentence
                .strip_prefix(&format!("{}: ", c.verdict.as_str()))
                .unwrap_or(&sentence);
            if i < 2 && control_fails {
                // The pre-registration's rule 3: the interval is shown, the verdict withheld.
                let _ = writeln!(
                    md,
                    "- **unanswerable by this probe** (the positive control did not lose δ₂ of margin in every order; the interval alone would read \"{}\"): {body}",
                    c.verdict.as_str(),
                );
            } else {
                let _ = writeln!(md, "- **{}**: {body}", c.verdict.as_str());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::{CONTROL_RUN, GridData};

    /// A dose study's data from a real run's summary: every probe's knowledge margins
    /// shifted by `shift(run, order, step)`.
    fn study(shift: &dyn Fn(&str, usize, u64) -> f32, control_shift: f32) -> Vec<GridDataRun> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/results/real-smollm2/runs.jsonl.gz");
        let data = GridData::read(&path).expect("the committed real-model data");
        let template = data
            .runs
            .iter()
            .find(|d| d.run == MAX_WINDOW.name())
            .expect("the max_window cell")
            .summary
            .clone();
        let probe_at = |step: u64, by: f32| {
            let mut p = template.probes.clone().expect("probes");
            p.step = step;
            if let Some(m) = p.marks.as_mut() {
                m.knowledge_margin.iter_mut().for_each(|v| *v += by);
            }
            p
        };
        let mut out = Vec::new();
        for order in 0..4 {
            for run in [SATURATING.name(), MAX_WINDOW.name()] {
                let mut s = template.clone();
                s.earlier_probes = [160, 320]
                    .iter()
                    .map(|t| probe_at(*t, shift(&run, order, *t)))
                    .collect();
                s.probes = Some(probe_at(480, shift(&run, order, 480)));
                out.push(GridDataRun {
                    run,
                    order,
                    base_seed: 0,
                    summary: s,
                });
            }
        }
        for order in 0..2 {
            let mut s = template.clone();
            s.probes = Some(probe_at(
                160,
                shift(&MAX_WINDOW.name(), order, 160) - control_shift,
            ));
            out.push(GridDataRun {
                run: CONTROL_RUN.into(),
                order,
                base_seed: 0,
                summary: s,
            });
        }
        out
    }

    #[test]
    fn a_cost_growing_with_the_dose_is_found_and_the_placebo_is_quiet() {
        // most_recent loses 0.01 nats/byte per 160 steps (0.03 at 480), ±0.002 by order.
        let noise = [0.002, -0.001, 0.0, -0.001];
        let data = study(
            &|run, o, t| {
                if run == SATURATING.name() {
                    -(t as f32 / 160.0) * 0.01 + noise[o]
                } else {
                    0.0
                }
            },
            0.1,
        );
        let d = analyse(&data).expect("a dose study");
        assert_eq!(d.doses, vec![160, 320, 480]);
        assert_eq!(d.orders, 4);
        let last = d.contrast.last().unwrap();
        assert!(last.iter().all(|v| (v - 0.03).abs() < 0.0025), "{last:?}");
        assert!(
            mean_sd(&d.slope).0 > 0.0055 && mean_sd(&d.slope).0 < 0.0070,
            "{:?}",
            d.slope
        );
        assert_eq!(d.claims[0].verdict.as_str(), "holds", "costs ≥ δ₂");
        assert_eq!(d.claims[1].verdict.as_str(), "fails", "not within ±δ₂");
        assert_eq!(
            d.claims[2].verdict.as_str(),
            "holds",
            "the control moves the endpoint"
        );
        let (p, [lo, hi]) = d.placebo.unwrap();
        assert!(p.abs() < 1e-6 && lo <= 0.0 && hi >= 0.0);
        let md = d.markdown();
        assert!(md.contains(PREREG_COMMIT) && md.contains("not significant, as it must be"));
    }

    #[test]
    fn no_cost_and_a_blind_probe_are_said_so() {
        let noise = [0.001, -0.001, 0.0005, -0.0005];
        let data = study(
            &|run, o, _| {
                if run == SATURATING.name() {
                    noise[o]
                } else {
                    0.0
                }
            },
            0.001,
        );
        let d = analyse(&data).unwrap();
        assert_eq!(d.claims[0].verdict.as_str(), "fails");
        assert_eq!(d.claims[1].verdict.as_str(), "holds");
        assert_eq!(d.claims[2].verdict.as_str(), "fails");
        assert!(d.markdown().contains("unanswerable by this probe"));
        let (_, _, add) = d.adding_rule.unwrap();
        assert!(!add, "a small spread keeps 4 orders");
    }

    #[test]
    fn the_design_resolves_delta_two_only_with_a_small_spread() {
        // 4 orders: half-width 3.182 · sd / 2; δ₂ needs sd below 0.0115.
        assert!((half_width(4, 0.01) - 0.01591).abs() < 1e-4);
        assert!(half_width(4, 0.0115) < DELTA2 && half_width(4, 0.0116) > DELTA2);
        assert!(half_width(8, 0.0115) < half_width(4, 0.0115));
        assert!(half_width(1, 0.0).is_infinite());
    }
}
