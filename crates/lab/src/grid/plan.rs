//! `grid --plan`: what a grid will run and what each claim can reach with that design,
//! before any run (a claim that cannot reach an outcome is flagged here, not after the data).

use std::fmt::Write as _;

use super::{CellKey, GridConfig};
use crate::stats::exact::{paired_exact, student_t_quantile};

/// Knowledge items of the shipped general-knowledge set (a real base's knowledge probe).
const KNOWLEDGE_ITEMS: usize = 609;

/// The probe items claim 5 compares, (knowledge, completion): a real base's (the shipped
/// general-knowledge set, the pretrained completion set) or the small grid's (its knowledge
/// base's, every regularity item).
fn probe_items(grid: &GridConfig) -> (usize, usize) {
    if grid.base.is_some() {
        (
            KNOWLEDGE_ITEMS,
            hif8lab_train::eval::PRETRAINED_COMPLETION_ITEMS,
        )
    } else {
        (
            grid.data.entities * hif8lab_train::kb::KNOWLEDGE_PER_ENTITY,
            hif8lab_train::eval::COMPLETION_ITEMS,
        )
    }
}
/// The near-lossless margin of claim 5 (%, relative).
const NEAR_LOSSLESS: f64 = 2.0;
/// The base accuracy the relative widths are stated at.
const BASE_ACC: f64 = 0.70;

/// The plan of `grid` with `seeds` data orders, restricted to `only` where not empty.
pub fn plan(grid: &GridConfig, seeds: usize, only: &[String]) -> String {
    let mut out = String::new();
    let runs: Vec<_> = grid
        .runs()
        .into_iter()
        .filter(|r| only.is_empty() || only.contains(&r.name))
        .collect();
    let _ = writeln!(out, "Runs ({} data order(s)):", seeds);
    let mut total = 0u64;
    for r in &runs {
        let c = grid.run_config(r);
        let orders = match &grid.control {
            Some(ctl) if r.control => ctl.orders.min(seeds),
            _ => seeds,
        };
        total += c.train.steps * orders as u64;
        let _ = writeln!(
            out,
            "  {:<24} {:>5} steps × {orders} order(s), lr {}, {}{}",
            r.name,
            c.train.steps,
            c.train.lr,
            r.estimator
                .map_or("no quantization".to_string(), |e| e.to_string()),
            if r.control {
                format!(", scaling margin {} (clipping)", c.qat.scaling.margin)
            } else {
                String::new()
            }
        );
    }
    let _ = writeln!(
        out,
        "  {total} optimizer steps in all (probes every {} steps).\n",
        grid.cont.eval_every
    );
    let _ = writeln!(
        out,
        "What each claim can reach with this design (best case):"
    );
    // Every claim's best case with this design; only the claims whose runs are planned.
    let has = |key: CellKey| runs.iter().any(|r| r.key() == key);
    let (knowledge, completion) = probe_items(grid);
    let design = Reach {
        knowledge,
        completion,
        knowledge_acc: BASE_ACC,
        completion_acc: BASE_ACC,
        replicates: seeds,
    };
    let wanted = |claim: usize| match claim {
        1 | 2 => has(CellKey::MOST_RECENT_LOW) && has(CellKey::MAX_WINDOW_LOW),
        3 => has(CellKey::MAX_WINDOW_HIGH) && has(CellKey::MAX_WINDOW_LOW),
        // The loss hides a damage of the saturating or failing cells.
        4 => {
            has(CellKey::BASELINE_LOW)
                && (has(CellKey::MOST_RECENT_LOW) || has(CellKey::MAX_WINDOW_HIGH))
        }
        _ => has(CellKey::MAX_WINDOW_LOW_WARMUP) && has(CellKey::BASELINE_LOW),
    };
    for (claim, line) in design.lines() {
        if wanted(claim) {
            let _ = writeln!(out, "  {line}");
        }
    }
    if grid.control.is_some() {
        let n = seeds as f64;
        let d2 = super::dose::DELTA2;
        if seeds < 2 {
            let _ = writeln!(
                out,
                "  dose claims: UNREACHABLE with one order (no interval across orders)"
            );
        } else {
            let cost = d2 * n.sqrt() / student_t_quantile(0.975, n - 1.0);
            let tost = d2 * n.sqrt() / student_t_quantile(0.95, n - 1.0);
            let _ = writeln!(
                out,
                "  dose claim 1 (cost ≥ δ₂ = {d2}): reachable when the per-order contrast's sd is below {cost:.4}; claim 2 (within ±δ₂): below {tost:.4} ({seeds} orders, df {})",
                seeds - 1
            );
        }
    }
    out
}

/// A design's probe items, base accuracies and replicates: what bounds how narrow each
/// claim's interval can be.
#[derive(Clone, Copy, Debug)]
pub struct Reach {
    /// Knowledge items per replicate.
    pub knowledge: usize,
    /// Completion items per replicate.
    pub completion: usize,
    /// The base's knowledge accuracy (relative drops are of it).
    pub knowledge_acc: f64,
    /// The base's completion accuracy.
    pub completion_acc: f64,
    /// Replicates per run (data orders × pretrainings), pooled over for paired items.
    pub replicates: usize,
}

/// What a reachable or an unreachable side is called in a line.
fn reach_word(width: f64, limit: f64, blocked: &str) -> String {
    if width < limit {
        "either outcome reachable".into()
    } else {
        format!("UNREACHABLE: \"{blocked}\" cannot come out (more items or orders needed)")
    }
}

impl Reach {
    /// The best-case half-width, as a fraction, of a paired 0/1 difference over `items`
    /// items per replicate at level `alpha`: no item differs at all, the exact interval.
    fn width(&self, items: usize, alpha: f64) -> f64 {
        paired_exact(0, 0, items * self.replicates, alpha)[1]
    }

    /// Per claim (1–5), a line saying what its verdict can reach with this design at best
    /// (every interval at its unadjusted level: Holm's adjustment only widens them).
    pub fn lines(&self) -> Vec<(usize, String)> {
        let reps = self.replicates;
        let t_line = |what: &str| {
            if reps >= 2 {
                format!("{what}: t interval across {reps} replicates: either outcome reachable")
            } else {
                format!(
                    "{what}: one replicate, judged as the run's exact value: either outcome reachable"
                )
            }
        };
        let k = self.knowledge * reps;
        let knowledge = self.width(self.knowledge, 0.05);
        let drop = knowledge / self.knowledge_acc.max(1e-9) * 100.0;
        let points = knowledge * 100.0 / (self.knowledge_acc - 0.25).max(1e-9);
        let mut out = vec![
            (1, t_line("claim 1 (saturation ratio)")),
            (
                2,
                format!(
                    "claim 2 (knowledge drop ≥ {NEAR_LOSSLESS} %, {k} paired items): best-case 95 % interval ±{drop:.2} % relative: {}",
                    reach_word(drop, NEAR_LOSSLESS, "not reproduced")
                ),
            ),
            (
                3,
                format!(
                    "claim 3 (forgetting ≥ 10 points, {k} paired items): best-case 95 % interval ±{points:.1} points: {}",
                    reach_word(points, 10.0, "not reproduced")
                ),
            ),
            (4, t_line("claim 4 (largest APE)")),
        ];
        for (what, items, acc) in [
            ("knowledge", self.knowledge, self.knowledge_acc),
            ("completion", self.completion, self.completion_acc),
        ] {
            let rel = self.width(items, 0.10) / acc.max(1e-9) * 100.0;
            out.push((
                5,
                format!(
                    "claim 5 ({what}, {} paired items): best-case 90 % interval ±{rel:.2} % relative (at base accuracy {acc:.2}) against ±{NEAR_LOSSLESS} %: {}",
                    items * reps,
                    if rel < NEAR_LOSSLESS {
                        "reachable"
                    } else {
                        "UNREACHABLE: \"holds\" cannot come out (more items or orders needed)"
                    }
                ),
            ));
        }
        out
    }

    /// The report's section: every claim's line, from the design alone.
    pub fn markdown(&self) -> String {
        let mut md = String::from(
            "\n## What each claim could reach with this design\n\nComputed from the design alone (probe items, replicates, the base's accuracy), as `grid --plan` prints it before a run: the narrowest interval each claim's statistic can have (no item differing at all: the exact paired interval at the claim's unadjusted level; Holm's adjustment only widens it). A claim marked UNREACHABLE cannot come out on that side whatever the data.\n\n",
        );
        for (_, line) in self.lines() {
            md.push_str("- ");
            md.push_str(&line);
            md.push('\n');
        }
        md
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_flags_what_cannot_be_reached() {
        let grid = GridConfig::preset("real-smollm2").unwrap();
        let p = plan(&grid, 2, &[]);
        // 297 completion items × 2 orders resolve ±2 % (108 could not: the committed
        // report's case).
        assert!(p.contains("claim 5 (completion, 594 paired items)"), "{p}");
        assert!(!p.contains("UNREACHABLE"), "{p}");
        // The small grid's 108 regularity items in one order cannot.
        let small = GridConfig::preset("grid-small").unwrap();
        let p = plan(&small, 1, &[]);
        assert!(p.contains("claim 5 (completion, 108 paired items)"), "{p}");
        assert!(p.contains("UNREACHABLE"), "{p}");
        let dose = GridConfig::preset("real-smollm2-dose").unwrap();
        let only = [
            CellKey::MOST_RECENT_LOW,
            CellKey::MAX_WINDOW_LOW,
            CellKey::CONTROL_LOW,
        ]
        .map(CellKey::name);
        let p = plan(&dose, 4, &only);
        assert!(p.contains(&CellKey::CONTROL_LOW.name()), "{p}");
        // 2 × 480 × 4 + 160 × 2 steps.
        assert!(p.contains("4160 optimizer steps"), "{p}");
        assert!(p.contains("dose claim 1"), "{p}");
        assert!(!p.contains("claim 5"), "its runs are not planned: {p}");
    }

    /// `precision` reaches every continued-training run of a grid (baselines included): the
    /// real-model presets train in bf16 as the paper's baseline does, the pre-registered dose
    /// study keeps the f32 it ran in, and an unknown value is refused by name.
    #[test]
    fn a_grid_s_precision_reaches_every_run() {
        use hif8lab_train::config::Precision;
        let each = |grid: &GridConfig| -> Vec<Precision> {
            grid.runs()
                .iter()
                .map(|r| grid.run_config(r).train.precision())
                .collect()
        };
        for (name, want) in [
            ("real-smollm2", Precision::Bf16),
            ("real-smollm2-quick", Precision::Bf16),
            ("real-smollm2-dose", Precision::F32),
            ("grid-small", Precision::F32),
        ] {
            let grid = GridConfig::preset(name).unwrap();
            assert_eq!(grid.precision, want, "{name}");
            assert!(each(&grid).iter().all(|p| *p == want), "{name}");
        }
        let text = crate::grid::GRID_PRESETS
            .iter()
            .find(|(n, _)| *n == "real-smollm2-quick")
            .unwrap()
            .1
            .replace("precision = \"bf16\"", "precision = \"fp8\"");
        let e = GridConfig::parse(&text, "quick").unwrap_err().to_string();
        assert!(e.contains("precision") || e.contains("fp8"), "{e}");
    }
}
