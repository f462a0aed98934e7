//! The grid's `results.md`: the run table, the shadow comparison, quantization error,
//! the per-quantizer section and the verdicts. (Native only.)

use hif8lab_train::eval::ProbeScore;
use std::fmt::Write as _;

use super::GridResults;
use super::count_of_kind;
use super::results::{SQNR_ROLES, shadow, sqnr_of};
use crate::stats::{Estimate, mean_sd};
use hif8lab_train::run::RunSummary;

impl GridResults {
    /// `results.md`: the table, the shadow comparison, and the verdict table. (Native only.)
    #[cfg(not(target_arch = "wasm32"))]
    pub fn markdown(&self) -> String {
        let mut md = String::from("# hif8lab grid results\n\n");
        self.intro(&mut md);
        self.run_table(&mut md);
        self.shadow_and_sqnr(&mut md);
        md.push_str(&super::quantizers::markdown(&self.rows));
        md.push_str(&super::manipulation::markdown(
            super::manipulation::check(&self.rows).as_ref(),
            &self.rows,
        ));
        md.push_str(&super::verdicts::claims_markdown(&self.verdicts));
        if let Some(reach) = self.reach() {
            md.push_str(&reach.markdown());
        }
        md.push_str(&super::placebo::markdown(
            &self.rows,
            self.bases.len(),
            self.first_order,
        ));
        if let Some(d) = &self.dose {
            md.push_str(&d.markdown());
        }
        md
    }

    /// Which numerics the runs used: `train.precision` and the kernel of their bf16-exact
    /// CPU products, over every replicate (records written before these were kept: `f32`).
    pub fn numerics(&self) -> String {
        let mut precision: Vec<String> = Vec::new();
        let mut gemm: Vec<String> = Vec::new();
        let add = |list: &mut Vec<String>, v: &str| {
            let v = if v.is_empty() { "f32" } else { v };
            if !list.iter().any(|x| x == v) {
                list.push(v.to_owned());
            }
        };
        let mut torch: Vec<String> = Vec::new();
        for s in self.rows.iter().flat_map(|r| &r.seeds) {
            add(&mut precision, &s.precision);
            if s.backend == "torch" {
                add(&mut torch, &s.adapter);
                continue;
            }
            for k in s.gemm.split('+') {
                add(&mut gemm, k);
            }
        }
        let kernels: Vec<String> = gemm
            .iter()
            .map(|k| match k.as_str() {
                "f32" => "the f32 GEMM".to_owned(),
                k => format!("the {k} kernel"),
            })
            .collect();
        let precision = precision.join(" and ");
        if !torch.is_empty() {
            return format!(
                "Engine (`grid --engine torch`): the continued runs were trained by {}; each was scored by this program's probes on its final weights, and every estimator's counts and the SQNR come from the first process's trace of every call. Numerics: precision {precision} (there: f32, or `torch.autocast` to bf16, which also keeps GEMM outputs and elementwise operations in bf16).",
                torch.join("; ")
            );
        }
        format!(
            "Numerics: precision {precision} (`train.precision`; bf16 rounds every operand that is not fake-quantized to bf16, as PyTorch's autocast and the paper's BF16 baseline do, f32 keeps them), f32 master weights and optimizer; products of operands exact in bf16 on {} (`train.gemm`; the bf16 kernel computes the same products in another order of f32 accumulation).",
            kernels.join(" and ")
        )
    }

    /// The design's reach: the first base's items and accuracies, every replicate.
    #[cfg(not(target_arch = "wasm32"))]
    fn reach(&self) -> Option<super::plan::Reach> {
        let b = self.bases.first()?;
        Some(super::plan::Reach {
            knowledge: b.knowledge_items,
            completion: b.completion_items,
            knowledge_acc: b.score(ProbeScore::KnowledgeAccNorm),
            completion_acc: b.score(ProbeScore::CompletionAccNorm),
            replicates: self.seeds,
        })
    }

    /// The base model's scores, what a replicate is, the learning rates.
    #[cfg(not(target_arch = "wasm32"))]
    fn intro(&self, md: &mut String) {
        let bases = self.bases.len().max(1);
        for (j, b) in self.bases.iter().enumerate() {
            let ci = |name: ProbeScore, d: usize| {
                let [lo, hi] = b.interval(name);
                format!("{:.d$} [{lo:.d$}, {hi:.d$}]", b.score(name))
            };
            if let Some(model) = &self.base_model {
                let clusters = b.groups(ProbeScore::KnowledgeAccNorm).len();
                let _ = writeln!(
                    md,
                    "Base model: {model}, a real pretrained model (not trained here): knowledge acc_norm {} on {} general-knowledge items over {clusters} clusters, completion acc_norm {} on {} regularity items, held-out loss {} on the held-out web text (95 % intervals in brackets; chance is 0.25). Every run continues from its weights.\n",
                    ci(ProbeScore::KnowledgeAccNorm, 3),
                    b.knowledge_items,
                    ci(ProbeScore::CompletionAccNorm, 3),
                    b.completion_items,
                    ci(ProbeScore::HeldoutLoss, 4),
                );
                continue;
            }
            let _ = writeln!(
                md,
                "Base model{} (after pretraining): knowledge acc_norm {}, completion acc_norm {}, held-out loss {} ({} knowledge items over {} entities, {} completion items; 95 % intervals in brackets; chance is 0.25).\n",
                if bases > 1 {
                    format!(", pretraining seed {j}")
                } else {
                    String::new()
                },
                ci(ProbeScore::KnowledgeAccNorm, 3),
                ci(ProbeScore::CompletionAccNorm, 3),
                ci(ProbeScore::HeldoutLoss, 4),
                b.knowledge_items,
                b.knowledge_items / hif8lab_train::kb::KNOWLEDGE_PER_ENTITY,
                b.completion_items,
            );
        }
        if self.base_model.is_some() {
            if self.first_order > 0 {
                let _ = writeln!(
                    md,
                    "Data orders {}–{} (fresh: orders 0–{} were not run here).\n",
                    self.first_order,
                    self.first_order + self.seeds - 1,
                    self.first_order - 1
                );
            }
            let _ = writeln!(
                md,
                "{} data order(s) of continued training from the one real base = {} replicate(s) per run: a data order varies the order of the same training text. Each run is compared with the baseline of the same order and, for the baselines, with the base model. Scores are means over replicates with 95 % intervals from a cluster bootstrap (knowledge items resampled by cluster, completion items by family, held-out windows in blocks of 4; replicates resampled too). Drops are relative to the matched high-precision baseline or, for the baselines, to the base model; where fewer than 25 items differ (pooled over replicates) the interval is the exact paired one. The table's p-values are two-sided against no drop and not adjusted for multiplicity (they describe; the verdicts below are judged with Holm's adjustment). APE is mean ± standard deviation across replicates. Probes are scored in high precision with the final weights, in the model's own tokenizer with BOS (as lm-eval-harness scores).\n",
                self.seeds, self.seeds
            );
        } else {
            let _ = writeln!(
                md,
                "{} data order(s) × {bases} pretraining(s) of the base = {} replicate(s) per run: a data order varies the continued training's order over the same text; a pretraining seed varies the base's initialization, data order and sampled text of the same knowledge base. Intervals over replicates cover both sources; each run is compared with its own base and with the baseline of the same order and base. Scores are means over replicates with 95 % intervals from a cluster bootstrap (knowledge items resampled by entity, completion items by family, held-out windows in blocks of 4; replicates resampled too). Drops are relative to the matched high-precision baseline or, for the baselines, to the base model; where fewer than 25 items differ (pooled over replicates) the interval is the exact paired one. The table's p-values are two-sided against no drop and not adjusted for multiplicity (they describe; the verdicts below are judged with Holm's adjustment). APE is mean ± standard deviation across replicates. Probes are scored in high precision with the trained weights.\n",
                self.seeds / bases,
                self.seeds
            );
        }
        let _ = writeln!(md, "{}\n", self.numerics());
        let lr = |high: bool| {
            let key = if high {
                super::CellKey::BASELINE_HIGH
            } else {
                super::CellKey::BASELINE_LOW
            };
            self.rows
                .iter()
                .find(|r| r.key == key)
                .map_or(f32::NAN, |r| r.summary.lr)
        };
        let paper_rates = (lr(true) - 1e-4).abs() < 1e-9 && (lr(false) - 1e-5).abs() < 1e-10;
        if lr(true).is_nan() || lr(false).is_nan() {
            // No baselines to name the two rates by (a study of a few arms).
            let mut rates: Vec<String> = Vec::new();
            for r in &self.rows {
                let text = format!("{:e}", r.summary.lr);
                if !rates.contains(&text) {
                    rates.push(text);
                }
            }
            let _ = writeln!(
                md,
                "Learning rate, by value: {} (no baseline run here names a high and a low rate).\n",
                rates.join(", ")
            );
        } else if self.base_model.is_some() && paper_rates {
            let _ = writeln!(
                md,
                "Learning rates, by value: the high rate is 1e-4 and the low rate 1e-5, the paper's own rates (a real pretrained model needs no stand-in).\n"
            );
        } else {
            let _ = writeln!(
                md,
                "Learning rates, by value: the high rate is {:e} and the low rate {:e} (a ratio of {:.0}). They stand in for the paper's 1e-4 (forgetting) and 1e-5 (its recipe), keeping the paper's ratio between them; they are higher than the paper's because a small model pretrained briefly at a high rate barely moves in a few hundred steps at the paper's rates (docs/results/claims.md).\n",
                lr(true),
                lr(false),
                lr(true) / lr(false)
            );
        }
    }

    /// The run table: loss, APE, probe scores and drops with intervals, counts.
    #[cfg(not(target_arch = "wasm32"))]
    fn run_table(&self, md: &mut String) {
        md.push_str("| run | paper setting | lr | final loss | APE all % | APE last 10 % | knowledge acc_norm [95 %] | drop % [95 %] (p) | completion acc_norm [95 %] | drop % [95 %] (p) | held-out loss [95 %] | calls above est (active) | overflow |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        let fmt_est = |e: Option<&Estimate>, d: usize| match e {
            Some(e) => format!(
                "{:.d$} [{:.d$}, {:.d$}]",
                e.value, e.interval[0], e.interval[1]
            ),
            None => "–".into(),
        };
        let fmt_drop = |e: &Estimate| {
            format!(
                "{:.1} [{:.1}, {:.1}] ({})",
                e.value,
                e.interval[0],
                e.interval[1],
                fmt_p(e.p_value)
            )
        };
        for r in &self.rows {
            let s = &r.summary;
            let sum = |f: &dyn Fn(&RunSummary) -> u64| r.seeds.iter().map(f).sum::<u64>();
            let active = sum(&|x| shadow(x, &x.estimator));
            let ov = sum(&|x| {
                x.shadow_overflow()
                    .iter()
                    .find(|(n, _)| *n == x.estimator)
                    .map(|(_, v)| *v)
                    .unwrap_or(0)
            });
            let loss = mean_sd(
                &r.seeds
                    .iter()
                    .map(|x| x.losses.last().copied().unwrap_or(f64::NAN))
                    .collect::<Vec<_>>(),
            )
            .0;
            let _ = writeln!(
                md,
                "| {} | {} | {:e} | {:.4} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.name,
                r.paper,
                r.summary.lr,
                loss,
                fmt_pm(r.ape_all, r.ape_all_sd),
                fmt_pm(r.ape_last, r.ape_last_sd),
                fmt_est(r.score(ProbeScore::KnowledgeAccNorm), 3),
                fmt_drop(&r.knowledge),
                fmt_est(r.score(ProbeScore::CompletionAccNorm), 3),
                fmt_drop(&r.completion),
                fmt_est(r.score(ProbeScore::HeldoutLoss), 4),
                if s.quantized() {
                    active.to_string()
                } else {
                    "–".into()
                },
                ov
            );
        }
    }

    /// Every estimator's calls above its estimate per run, and the SQNR per role.
    #[cfg(not(target_arch = "wasm32"))]
    fn shadow_and_sqnr(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "\n## Shadow comparison (every estimator on the same calls of each QAT run)\n\nCalls whose amax exceeded the estimator's estimate, summed over {} replicate(s):\n",
            self.seeds
        );
        if let Some(first) = self
            .rows
            .iter()
            .find(|r| !r.summary.shadow_calls().is_empty())
        {
            let names: Vec<String> = first
                .summary
                .shadow_calls()
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            let _ = writeln!(md, "| run | {} |", names.join(" | "));
            let _ = writeln!(md, "|---|{}", "---|".repeat(names.len()));
            for r in self
                .rows
                .iter()
                .filter(|r| !r.summary.shadow_calls().is_empty())
            {
                let vals: Vec<String> = names
                    .iter()
                    .map(|n| {
                        r.seeds
                            .iter()
                            .map(|x| count_of_kind(&x.shadow_calls(), n))
                            .sum::<u64>()
                            .to_string()
                    })
                    .collect();
                let _ = writeln!(md, "| {} | {} |", r.name, vals.join(" | "));
            }
        }
        md.push_str("\n## Quantization error (SQNR, dB)\n\nSQNR of each quantizer call at the scale it used, 10·log10(Σx² / Σ(x − qdq(x))²), per operand role: median over the run's calls (median of the seeds' medians) and the worst call (over every seed). HiF8 rounds values above the estimate to fewer mantissa bits instead of clipping them, so the worst calls show where saturation costs precision.\n\n| run | A median | A worst | W median | W worst | G median | G worst |\n|---|---|---|---|---|---|---|\n");
        for r in self.rows.iter().filter(|r| !r.summary.sqnr.is_empty()) {
            let cells: Vec<String> = SQNR_ROLES
                .iter()
                .flat_map(|role| match sqnr_of(r, *role) {
                    Some((m, w)) => [format!("{m:.2}"), format!("{w:.2}")],
                    None => ["–".into(), "–".into()],
                })
                .collect();
            let _ = writeln!(md, "| {} | {} |", r.name, cells.join(" | "));
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn fmt_pm(v: f64, sd: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else {
        format!("{v:.3} ± {sd:.3}")
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn fmt_p(p: f64) -> String {
    if p.is_nan() {
        "–".into()
    } else if p < 0.001 {
        "p < 0.001".into()
    } else {
        format!("p = {p:.3}")
    }
}
