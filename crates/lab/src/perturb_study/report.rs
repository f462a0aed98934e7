//! The perturb-then-train study's report (results.md), a function of [`PerturbStudy`] alone.

use std::fmt::Write as _;

use hif8lab_train::eval::ProbeScore;

use super::{Contrast, DELTA2P, PREREG, PREREG_COMMIT, PerturbStudy, margin, mean};
use crate::claims::number;
use crate::stats::exact::t_interval;

impl PerturbStudy {
    /// The report (results.md).
    pub fn markdown(&self) -> String {
        let mut md = String::from("# The perturb-then-train study (real-smollm2-perturb)\n\n");
        let last = self.doses.last().copied().unwrap_or(0);
        let _ = writeln!(
            md,
            "Pre-registration: `{PREREG}`, commit `{PREREG_COMMIT}`, committed before this study's code and runs. Analysed as registered by `hif8lab perturb-study`; rebuilt from [runs.jsonl.gz](runs.jsonl.gz) (the new arms) and the dose study's committed data (`docs/results/real-smollm2-dose/runs.jsonl.gz`: U and most_recent-low) by `hif8lab perturb-study --recompute`.\n"
        );
        let _ = writeln!(
            md,
            "Arms, in data orders {} (the unit; every contrast paired within an order), {last} steps at 1e-5 from SmolLM2-135M-Instruct, probed at {} steps:\n\n- **U**: max_window-low from the undamaged base (the dose study's committed runs);\n- **P**: max_window-low from the damaged base: {};\n- **S**: the sham, max_window(65)-low from the undamaged base.\n",
            self.orders
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            self.doses
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            self.damage
        );
        if let [Some(u), Some(p)] = &self.bases {
            let _ = writeln!(
                md,
                "The bases before training: undamaged knowledge acc_norm {:.3}, margin {:.4} nats/byte, held-out loss {:.4}; damaged {:.3}, {:.4}, {:.4}.\n",
                u.score(ProbeScore::KnowledgeAccNorm),
                margin(u),
                u.heldout_loss,
                p.score(ProbeScore::KnowledgeAccNorm),
                margin(p),
                p.heldout_loss
            );
        }
        let _ = writeln!(md, "## Verdicts\n");
        for c in &self.claims {
            let [lo, hi] = c.interval;
            let _ = writeln!(
                md,
                "- **{}** — **{}**: {} {}, {} interval {} to {} (df {}), threshold ≥ δ₂′ = {DELTA2P} nats/byte{}; test: {}.",
                c.claim,
                c.verdict.as_str(),
                c.measured,
                number(c.statistic, &c.unit),
                c.confidence
                    .map_or("no".into(), |x| format!("{:.2} %", 100.0 * x)),
                number(lo, &c.unit),
                number(hi, &c.unit),
                self.orders.len().saturating_sub(1),
                c.p_value
                    .map_or(String::new(), |p| format!("; p (Holm) = {p:.4}")),
                c.test
            );
        }
        match &self.sham_check {
            Some((c, sig)) => {
                let _ = writeln!(
                    md,
                    "- **Sham placebo** (a check, not a claim): mean knowledge margin, U − S, at {last} steps {}: {}.",
                    c.words(" nats/byte"),
                    if *sig {
                        "**significant** — within-order contrasts of this size are not interpretable at this design"
                    } else {
                        "not significant, as a placebo must be"
                    }
                );
            }
            None => {
                let _ = writeln!(md, "- **Sham placebo**: fewer than 2 orders, no test.");
            }
        }
        let d = Contrast::of(&self.saturation);
        match &self.saturation_not_judged {
            Some(why) => {
                let _ = writeln!(
                    md,
                    "- **Saturation costs knowledge at {last} steps** — {why}. Measured, not judged: mean knowledge margin, max_window − most_recent, {}. Its equivalence (TOST on the 90 % interval against ±δ₂′) is not reported either: it stands under the same condition.",
                    d.map_or("–".into(), |c| c.words(" nats/byte"))
                );
            }
            None => {
                let d90 = t_interval(&self.saturation, 0.10);
                let _ = writeln!(
                    md,
                    "- Equivalence beside it (TOST on the 90 % interval against ±δ₂′): [{:+.4}, {:+.4}]: {}.",
                    d90[0],
                    d90[1],
                    if d90[0] > -DELTA2P && d90[1] < DELTA2P {
                        "within ±δ₂′"
                    } else {
                        "not shown within ±δ₂′"
                    }
                );
            }
        }
        let _ = writeln!(md, "\n## Reported, not judged\n");
        for (k, step) in self.doses.iter().enumerate() {
            let c = Contrast::of(&self.control[k]).map_or("–".into(), |c| c.words(" nats/byte"));
            let s = Contrast::of(&self.sham[k]).map_or("–".into(), |c| c.words(" nats/byte"));
            let _ = writeln!(
                md,
                "- At {step} steps: control (U − P) {c}; sham (U − S) {s}."
            );
        }
        let names = ["U", "P", "S"];
        let _ = writeln!(
            md,
            "\nPer order at {last} steps (knowledge margin contrasts in nats/byte; acc_norm; completion margin; held-out loss):\n"
        );
        let _ = writeln!(
            md,
            "| order | c = U − P | s = U − S | d = max_window − most_recent | acc_norm U / P / S | completion margin U / P / S | held-out loss U / P / S | c at matched held-out loss |\n|---|---|---|---|---|---|---|---|"
        );
        let k = self.doses.len().saturating_sub(1);
        for (i, o) in self.orders.iter().enumerate() {
            let three = |f: fn(&(f64, f64, f64)) -> f64, d: usize| {
                self.arms
                    .iter()
                    .map(|a| {
                        a.get(i)
                            .map(f)
                            .filter(|v| v.is_finite())
                            .map_or("–".into(), |v| format!("{v:.d$}"))
                    })
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
            let _ = writeln!(
                md,
                "| {o} | {:+.4} | {:+.4} | {} | {} | {} | {} | {} |",
                self.control[k][i],
                self.sham[k][i],
                self.saturation
                    .get(i)
                    .map_or("–".into(), |v| format!("{v:+.4}")),
                three(|x| x.0, 3),
                three(|x| x.1, 4),
                three(|x| x.2, 4),
                self.matched[i]
                    .map_or("P's losses do not reach U's".into(), |v| format!("{v:+.4}"))
            );
        }
        let col = |j: usize, f: fn(&(f64, f64, f64)) -> f64| -> Vec<f64> {
            self.arms[j].iter().map(f).collect()
        };
        let _ = writeln!(md);
        for (label, f, d) in [
            (
                "knowledge acc_norm",
                (|x: &(f64, f64, f64)| x.0) as fn(&(f64, f64, f64)) -> f64,
                3,
            ),
            ("completion margin", |x| x.1, 4),
            ("held-out loss", |x| x.2, 4),
        ] {
            let _ = writeln!(
                md,
                "- Mean {label} over orders: {}.",
                names
                    .iter()
                    .enumerate()
                    .map(|(j, n)| {
                        let m = mean(&col(j, f));
                        if m.is_finite() {
                            format!("{n} {m:.d$}")
                        } else {
                            format!("{n} –")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let diff = |j: usize, f: fn(&(f64, f64, f64)) -> f64| -> Vec<f64> {
            col(0, f)
                .iter()
                .zip(col(j, f))
                .map(|(a, b)| a - b)
                .collect()
        };
        for (label, j) in [("U − P", 1), ("U − S", 2)] {
            let _ = writeln!(
                md,
                "- Completion margin, {label}: {}; knowledge acc_norm, {label}: {}.",
                Contrast::of(&diff(j, |x| x.1)).map_or("–".into(), |c| c.words(" nats/byte")),
                Contrast::of(&diff(j, |x| x.0)).map_or("–".into(), |c| c.words(""))
            );
        }
        if self.completion_items[1..]
            .iter()
            .any(|n| *n != self.completion_items[0])
        {
            let _ = writeln!(
                md,
                "- Completion is not compared: U was scored on {} completion items (the dose study predates the larger set), P on {} and S on {}; a margin over other items is not the same quantity.",
                self.completion_items[0], self.completion_items[1], self.completion_items[2]
            );
        }
        let matched: Vec<f64> = self.matched.iter().flatten().copied().collect();
        let _ = writeln!(
            md,
            "- Control at matched held-out loss (P's margin interpolated over its {} probes to U's held-out loss at {last} steps): {} of {} orders reachable{}.",
            self.doses.len(),
            matched.len(),
            self.orders.len(),
            Contrast::of(&matched).map_or(String::new(), |c| format!(
                ", mean {}",
                c.words(" nats/byte")
            ))
        );
        match &self.manipulation {
            Some((differs, why)) => {
                let _ = writeln!(
                    md,
                    "- Manipulation check on the dose runs: {why}: the arms {}.",
                    if *differs {
                        "differ in saturation"
                    } else {
                        "do not differ in saturation"
                    }
                );
            }
            None => {
                let _ = writeln!(md, "- Manipulation check on the dose runs: not made.");
            }
        }
        match self.rerun {
            Some((worst, n)) => {
                let _ = writeln!(
                    md,
                    "- Reproducibility: U's order 0 rerun by the build that ran P and S: {} over {n} steps{}.",
                    if worst == 0.0 {
                        "every loss identical".to_owned()
                    } else {
                        format!("the losses differ by at most {worst:.3e}")
                    },
                    if worst == 0.0 {
                        ""
                    } else {
                        " (a deviation: U and P, S ran on different builds)"
                    }
                );
            }
            None => {
                let _ = writeln!(md, "- Reproducibility: U's order 0 was not rerun.");
            }
        }
        md
    }
}
