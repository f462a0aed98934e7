//! The report's Markdown sections: the losses, the final comparison, the saturation
//! tables, every summary's table and the spread of the reported drops.

use super::*;

fn iv(i: [f64; 2]) -> String {
    format!("[{:+.2}, {:+.2}]", i[0], i[1])
}

pub(super) fn write_losses(out: &mut String, l: &LossComparison, ape_all: f64) {
    let _ = writeln!(out, "\n## Training loss (P1–P3)\n");
    let _ = writeln!(
        out,
        "The two logs (`bf16_lr1e5`, `max_quant_lr1e5`) share the data order and every setting but quantization; r = (L_q − L_b) / L_b × 100 per step. Warmup: steps 1–{} ({}), where quantization is off in both runs — so the warmup's differences are the run-to-run noise of identical settings. {} steps in common, {} in one log only. Intervals: 95 %, circular block bootstrap over steps (blocks of {BLOCK}, 2,000 resamples). APE over all steps, as the authors compute it: {:.4} %.\n",
        l.warmup_until, l.warmup_source, l.common_steps, l.unmatched_steps, ape_all
    );
    let _ = writeln!(
        out,
        "| phase | steps | n | APE % | signed mean % | steps with the QAT loss higher | lag-1 autocorrelation of r |"
    );
    let _ = writeln!(out, "|---|---|---:|---|---|---|---:|");
    for p in &l.phases {
        let _ = writeln!(
            out,
            "| {} | {}–{} | {} | {:.4} [{:.4}, {:.4}] | {:+.4} [{:+.4}, {:+.4}] | {:.1} % [{:.1}, {:.1}] | {:.2} |",
            p.phase,
            p.steps[0],
            p.steps[1],
            p.n,
            p.ape,
            p.ape_interval[0],
            p.ape_interval[1],
            p.signed,
            p.signed_interval[0],
            p.signed_interval[1],
            p.higher * 100.0,
            p.higher_interval[0] * 100.0,
            p.higher_interval[1] * 100.0,
            p.lag1
        );
    }
    let phase = |name: &str| l.phases.iter().find(|p| p.phase == name);
    if let (Some(w), Some(a)) = (phase("warmup"), phase("after warmup")) {
        let _ = writeln!(
            out,
            "\nWhat the intervals cover: the steps of this one pair of runs, not how a second pair would differ. The warmup is a placebo — the two runs differ in no setting there — and it too shows a signed difference ({:+.4} %, [{:+.4}, {:+.4}]) that the block bootstrap cannot attribute to chance: two trajectories drift apart by nondeterminism alone (lag-1 autocorrelation {:.2}). One pair of runs therefore cannot separate quantization from that drift; what it shows is a post-warmup difference {:.0}× the placebo's in size{}, higher at {:.1} % of steps. Repeated pairs (seeds) would give the interval across runs.",
            w.signed,
            w.signed_interval[0],
            w.signed_interval[1],
            w.lag1,
            a.signed.abs() / w.signed.abs().max(1e-12),
            if (a.signed > 0.0) != (w.signed > 0.0) {
                " and of the opposite sign"
            } else {
                ""
            },
            a.higher * 100.0
        );
    }
    let _ = writeln!(
        out,
        "\nThe post-warmup intervals at other block lengths (the choice of block does not decide):\n"
    );
    let _ = writeln!(
        out,
        "| block (steps) | APE % 95 % interval | signed mean % 95 % interval |"
    );
    let _ = writeln!(out, "|---:|---|---|");
    for s in &l.sensitivity {
        let _ = writeln!(
            out,
            "| {} | [{:.4}, {:.4}] | [{:+.4}, {:+.4}] |",
            s[0], s[1], s[2], s[3], s[4]
        );
    }
}

fn task_table(out: &mut String, base: &str, other: &str, rows: &[TaskRow]) {
    let _ = writeln!(
        out,
        "| task | shots | n | {base} % (count) | {other} % (count) | relative drop % | 95 % interval (unpaired) | narrowest paired interval possible |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---|---:|---|---|");
    for r in rows {
        let (_, i, best) = r.spread();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} ({}{}) | {:.2} ({}) | {:+.4} | {} | {} |",
            r.label,
            r.shots.map_or("—".into(), |s| s.to_string()),
            r.n,
            r.base,
            r.kb,
            if r.whole { "" } else { " †" },
            r.other,
            r.ko,
            r.drop(),
            iv(i),
            iv(best)
        );
    }
}

pub(super) fn write_final(out: &mut String, s: &Summary, rows: &[TaskRow]) {
    let _ = writeln!(out, "\n## The final pair on the benchmarks (P4, P5)\n");
    let _ = writeln!(
        out,
        "From `{}` ({}). Counts: the whole counts of the benchmark's n that print as both accuracies and reproduce the printed drop (its 4 decimals); † where none do (the score is not a plain proportion of n). MATH's n is 5,000 (lm-eval's `minerva_math`, despite the label MATH500): 0.50 % and 0.46 % are no whole count of 500. The headline quotes MMLU, HellaSwag and ARC-Challenge; GSM8K, MATH and ARC-Easy are in the same table.\n",
        s.name, s.date
    );
    task_table(out, "bf16_lr1e5", "max_quant_lr1e5", rows);
    let mean = rows.iter().map(TaskRow::drop).sum::<f64>() / rows.len().max(1) as f64;
    let unreachable: Vec<&str> = rows
        .iter()
        .filter(|r| {
            let [lo, hi] = r.spread().2;
            lo <= -MARGIN || hi >= MARGIN
        })
        .map(|r| r.label.as_str())
        .collect();
    let _ = writeln!(
        out,
        "\nAverage relative drop {mean:.4} % (the summary prints {}): by the challenge's point rule that is {} (< 1 %); with its interval, see P4. GSM8K and MATH score 0.5–1.6 %: their relative drops rest on a few dozen right answers and carry most of the average's uncertainty. The narrowest paired interval is what per-document logs could give at best (every discordant document in one direction); the published summaries allow only the unpaired one. Even that best case does not fit inside ±1 % for {}: with these item counts and this difference, equivalence at 1 % cannot be shown for them whatever the logs hold.",
        s.printed_average
            .iter()
            .find(|(m, _)| m == "max_quant_lr1e5")
            .map_or("—".into(), |(_, v)| format!("{v:.4} %")),
        if mean < MARGIN { "PASS" } else { "FAIL" },
        if unreachable.is_empty() {
            "no task".to_string()
        } else {
            unreachable.join(", ")
        }
    );
}

pub(super) fn write_saturation(out: &mut String, sat: &[(String, Vec<TaskRow>)]) {
    let _ = writeln!(out, "\n## Saturation costs knowledge? (P6)\n");
    let _ = writeln!(
        out,
        "The first-round runs (shorter training; MMLU at 26–27 % against 25 % for chance, HellaSwag and the ARC sets also near their chance levels), each estimator's latest summary against max_quant's latest. A drop is relative to max_quant.\n"
    );
    for (m, rows) in sat {
        let _ = writeln!(out, "### {m} vs max_quant\n");
        task_table(out, "max_quant", m, rows);
        let _ = writeln!(out);
    }
}

pub(super) fn write_all_tables(out: &mut String, summaries: &[Summary]) {
    let _ = writeln!(out, "\n## Every summary table\n");
    let flagged: usize = summaries
        .iter()
        .flat_map(|s| {
            s.models
                .iter()
                .filter(|m| **m != s.baseline)
                .flat_map(|m| pair_tables(s, &s.baseline, m))
        })
        .filter(|t| !t.whole)
        .count();
    let _ = writeln!(
        out,
        "Each cell: accuracy %, the relative drop vs the table's baseline as printed (from the unrounded scores), and its 95 % unpaired interval. † would mark a cell where no whole counts of the benchmark's n print as both percentages and reproduce the printed drop (a score that is not a plain proportion of n documents); {}.\n",
        if flagged == 0 {
            "there is none: every cell is a whole count of its n and reproduces its printed drop, which confirms the item counts used".to_string()
        } else {
            format!("{flagged} cell(s) are marked")
        }
    );
    for s in summaries {
        let _ = writeln!(
            out,
            "### {} ({}), baseline {}\n",
            s.name, s.date, s.baseline
        );
        let others: Vec<&String> = s.models.iter().filter(|m| **m != s.baseline).collect();
        let mut head = format!("| task | {} %", s.baseline);
        for m in &others {
            let _ = write!(head, " | {m}");
        }
        let _ = writeln!(out, "{head} |");
        let _ = writeln!(out, "|---|---:{}|", "|---".repeat(others.len()));
        let bi = col(s, &s.baseline).unwrap_or(0);
        let tables: Vec<Vec<TaskRow>> = others
            .iter()
            .map(|m| pair_tables(s, &s.baseline, m))
            .collect();
        for r in &s.rows {
            let mut line = format!(
                "| {} | {} ",
                r.task,
                r.scores[bi].map_or("N/A".into(), |v| format!("{v:.2}"))
            );
            for (k, m) in others.iter().enumerate() {
                let j = col(s, m).unwrap_or(0);
                let cell = match (tables[k].iter().find(|t| t.label == r.task), r.scores[j]) {
                    (Some(t), _) => {
                        let mark = if t.whole { "" } else { " †" };
                        format!(
                            "{:.2}: {:+.2} {}{mark}",
                            t.other,
                            t.drop(),
                            iv(t.spread().1)
                        )
                    }
                    (None, Some(o)) => format!("{o:.2}"),
                    (None, None) => "N/A".into(),
                };
                let _ = write!(line, "| {cell} ");
            }
            let _ = writeln!(out, "{line}|");
        }
        for (m, v) in &s.printed_average {
            let rows: Vec<TaskRow> = pair_tables(s, &s.baseline, m);
            let c = average_claim("", &rows, Side::Below, MARGIN);
            let _ = writeln!(
                out,
                "\n{m}: printed average drop {v:.4} % ({}); recomputed over {} task(s) {:.4} %, 95 % interval {}: {}.",
                if *v < MARGIN { "PASS" } else { "FAIL" },
                rows.len(),
                c.statistic,
                iv(c.interval),
                c.verdict.as_str()
            );
        }
        let _ = writeln!(out);
    }
}

pub(super) fn write_spread(out: &mut String, summaries: &[Summary], final_pair: &[TaskRow]) {
    let _ = writeln!(
        out,
        "## Run-to-run spread: the same cell in several summaries\n"
    );
    let _ = writeln!(
        out,
        "A model name reported in several summaries, and the values each gave (a re-evaluation, or a retrained checkpoint under the same name). Shown, not judged: the spread is the scale against which a drop of a few tenths of a point is read.\n"
    );
    let mut cells: BTreeMap<(String, String), Vec<(String, f64)>> = BTreeMap::new();
    for s in summaries {
        for r in &s.rows {
            for (m, v) in s.models.iter().zip(&r.scores) {
                if let Some(v) = v {
                    cells
                        .entry((m.clone(), r.task.clone()))
                        .or_default()
                        .push((s.name.clone(), *v));
                }
            }
        }
    }
    let mut widest: Option<(f64, String)> = None;
    let _ = writeln!(
        out,
        "| model | task | summaries | distinct values % | range (points) |"
    );
    let _ = writeln!(out, "|---|---|---:|---|---:|");
    for ((m, t), vals) in &cells {
        let mut distinct: Vec<f64> = vals.iter().map(|v| v.1).collect();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        if distinct.len() < 2 {
            continue;
        }
        let range = distinct[distinct.len() - 1] - distinct[0];
        let list: Vec<String> = distinct.iter().map(|v| format!("{v:.2}")).collect();
        let _ = writeln!(
            out,
            "| {m} | {t} | {} | {} | {range:.2} |",
            vals.len(),
            list.join(", ")
        );
        if widest.as_ref().is_none_or(|w: &(f64, String)| range > w.0) {
            widest = Some((range, format!("{m} on {t}")));
        }
    }
    if let Some((range, cell)) = widest {
        let diffs: Vec<String> = final_pair
            .iter()
            .map(|r| format!("{} {:.2}", r.label, r.base - r.other))
            .collect();
        let _ = writeln!(
            out,
            "\nThe widest spread, {range:.2} points ({cell}), against the final pair's differences in points ({}).",
            diffs.join(", ")
        );
    }
}
