//! Evaluations made elsewhere, judged: `compare-evals` (lm-evaluation-harness folders),
//! `compare-logs` (two training logs, APE and the signed difference), `judge-paper` (the
//! paper's extract → its report) and `import log` (a training log as CSV).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use hif8lab_lab::evals::compare::{CompareOptions, compare};
use hif8lab_lab::evals::lm_eval::EvalRun;
use hif8lab_lab::evals::loss_compare::compare_losses;
use hif8lab_lab::evals::paper::paper_report;
use hif8lab_lab::evals::report::claim_line;
use hif8lab_lab::evals::train_log::{LogPattern, read_log, to_csv};
use hif8lab_lab::stats::Verdict3;
use hif8lab_train::io::write_atomic;

use crate::output::{Outcome, outln, print_json};

/// A margin: `1%`, `1 %` or `1` (percent, relative).
fn parse_margin(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches('%').trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v < 100.0 => Ok(v),
        _ => Err(format!(
            "{s:?}: a relative margin in percent between 0 and 100 (e.g. 1%)"
        )),
    }
}

/// Arguments of `compare-evals`.
#[derive(Args, Debug)]
pub struct CompareEvalsArgs {
    /// lm-eval output folders (or results_*.json files): the base first, then the runs
    /// compared with it.
    #[arg(required = true, num_args = 2..)]
    runs: Vec<PathBuf>,
    /// Equivalence margin on the relative drop (`1%`; the paper's).
    #[arg(long, default_value = "1%", value_parser = parse_margin)]
    margin: f64,
    /// The metric compared: `acc`, `acc_norm,none`, or per task `arc_easy=acc` (repeat the
    /// flag). Default per task: acc_norm, else acc, else exact_match.
    #[arg(long)]
    metric: Vec<String>,
    /// The report as JSON.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// The report as CSV (one row per task and run).
    #[arg(long)]
    csv: bool,
    /// Also write report.md, report.csv and report.json into this folder.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Exit 1 when a claim fails, 3 when one is inconclusive (for scripts and CI).
    #[arg(long)]
    check: bool,
}

/// `compare-evals`.
pub fn run_compare_evals(args: CompareEvalsArgs) -> Result<Outcome> {
    let mut metrics = BTreeMap::new();
    for m in &args.metric {
        match m.split_once('=') {
            Some((task, metric)) if !task.is_empty() && !metric.is_empty() => {
                metrics.insert(task.to_string(), metric.to_string());
            }
            None if !m.is_empty() => {
                metrics.insert("*".to_string(), m.clone());
            }
            _ => bail!("--metric {m:?}: expected METRIC or TASK=METRIC"),
        }
    }
    let runs = args
        .runs
        .iter()
        .map(|p| EvalRun::open(p))
        .collect::<Result<Vec<_>, _>>()?;
    // The report never lands inside a run it reads (lm-eval's folders stay as lm-eval
    // wrote them).
    if let Some(out) = &args.out {
        for run in &args.runs {
            let folder = if run.is_file() {
                run.parent().unwrap_or(Path::new(""))
            } else {
                run.as_path()
            };
            if inside(out, folder) {
                bail!(
                    "--out {}: inside the run {}, which this comparison reads; write the report elsewhere",
                    out.display(),
                    run.display()
                );
            }
        }
    }
    // A task named by --metric must be one of the runs' (a typo would drop it silently).
    for task in metrics.keys().filter(|t| *t != "*") {
        if runs
            .iter()
            .all(|r| !r.tasks.contains_key(task) && !r.groups.contains_key(task))
            && let Some(run) = runs.first()
        {
            let known: Vec<&String> = run.tasks.keys().chain(run.groups.keys()).collect();
            bail!(
                "--metric {task}={}: {} has no task '{task}' (tasks: {})",
                metrics[task],
                run.path.display(),
                known
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let report = compare(
        &runs,
        &CompareOptions {
            margin: args.margin,
            metrics,
        },
    )?;
    if report.comparisons.iter().all(|c| c.tasks.is_empty()) {
        bail!(
            "{}: no task with a 0/1 metric (acc, acc_norm, exact_match) in both runs{}",
            args.runs[0].display(),
            if args.metric.is_empty() {
                ""
            } else {
                " for --metric"
            }
        );
    }
    let json = serde_json::to_value(&report)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("--out {}", dir.display()))?;
        for (name, text) in [
            ("report.md", report.markdown()),
            ("report.csv", report.csv()),
            ("report.json", serde_json::to_string_pretty(&json)? + "\n"),
        ] {
            let path = dir.join(name);
            write_atomic(&path, text.as_bytes()).with_context(|| path.display().to_string())?;
        }
    }
    if args.json {
        print_json(&json)?;
    } else if args.csv {
        crate::output::out!("{}", report.csv());
    } else {
        crate::output::out!("{}", report.markdown());
    }
    let verdicts: Vec<Verdict3> = report
        .comparisons
        .iter()
        .flat_map(|c| {
            c.tasks
                .iter()
                .map(|t| t.claim.verdict)
                .chain([c.average.verdict])
        })
        .collect();
    Ok(outcome(args.check, &verdicts))
}

fn outcome(check: bool, verdicts: &[Verdict3]) -> Outcome {
    if !check {
        Outcome::Ok
    } else if verdicts.contains(&Verdict3::Fails) {
        Outcome::ClaimsFail
    } else if verdicts.iter().all(|v| *v == Verdict3::Holds) {
        Outcome::Ok
    } else {
        Outcome::Inconclusive
    }
}

/// Arguments of `compare-logs`.
#[derive(Args, Debug)]
pub struct CompareLogsArgs {
    /// The high-precision baseline's training log.
    base: PathBuf,
    /// The quantized run's training log (same data order).
    quant: PathBuf,
    /// How the logs are read: `auto`, `kv` (`step=N | loss=X | …` lines), `jsonl` or `csv`.
    #[arg(long, default_value = "auto")]
    pattern: LogPattern,
    /// The last warmup step (default: read from the quantized log's `quant=ON|OFF` field,
    /// else 0).
    #[arg(long)]
    warmup_steps: Option<u64>,
    /// The APE threshold the claim is judged against (%).
    #[arg(long, default_value = "0.5%", value_parser = parse_margin)]
    ape_below: f64,
    /// The comparison as JSON.
    #[arg(long)]
    json: bool,
}

/// `compare-logs`.
pub fn run_compare_logs(args: CompareLogsArgs) -> Result<Outcome> {
    use hif8lab_lab::claims::{Claim, Side, judge_family};
    let base = read_log(&args.base, args.pattern)?;
    let quant = read_log(&args.quant, args.pattern)?;
    let c = compare_losses(&base, &quant, args.warmup_steps, &args.quant)?;
    // The claims are about the QAT phase: never the warmup's steps in its place.
    let post = c.phases.iter().find(|p| p.phase == "after warmup");
    if post.is_none() {
        bail!(
            "{}: no step in common after the warmup (up to step {}, {}): nothing of the \
             quantized phase to judge",
            args.quant.display(),
            c.warmup_until,
            c.warmup_source
        );
    }
    // Most of the shorter log's steps must be in common: a judgement on a few stray
    // steps would speak for the thousands that do not pair.
    let shorter = base.records.len().min(quant.records.len());
    if 2 * c.common_steps < shorter {
        bail!(
            "{} vs {}: {} steps in common of the shorter log's {shorter}: the logs do not \
             pair step by step (another run, another step numbering?)",
            args.quant.display(),
            args.base.display(),
            c.common_steps
        );
    }
    let part = hif8lab_lab::evals::loss_compare::draw_part;
    let ape_claim = format!(
        "the quantized run's loss is within {} % APE of the baseline's",
        args.ape_below
    );
    let higher_claim = "the quantized run's loss is systematically higher";
    use hif8lab_lab::claims::Part;
    use hif8lab_lab::evals::loss_compare::Degenerate;
    let mut claims: Vec<Claim> = post
        .map(|p| match &p.degenerate {
            // Too few steps: no verdict from resamples that cannot vary.
            Some(d @ Degenerate::TooFewSteps { .. }) => [ape_claim.as_str(), higher_claim]
                .map(|text| Claim::new(text, Vec::new(), serde_json::Value::String(d.to_string())))
                .to_vec(),
            // The same difference at every step: the values are exact.
            Some(d @ Degenerate::Constant { .. }) => vec![
                Claim::new(
                    &ape_claim,
                    vec![Part::exact("APE", "%", p.ape, Side::Below, args.ape_below)],
                    serde_json::Value::String(d.to_string()),
                ),
                Claim::new(
                    higher_claim,
                    vec![Part::exact(
                        "mean signed relative difference",
                        "%",
                        p.signed,
                        Side::Above,
                        0.0,
                    )],
                    serde_json::Value::String(d.to_string()),
                ),
            ],
            None => vec![
                Claim::new(
                    &ape_claim,
                    vec![part("APE", p.ape, &p.draws[0], Side::Below, args.ape_below)],
                    serde_json::Value::Null,
                ),
                // Strictly positive: an interval at 0 is no "systematically higher".
                Claim::new(
                    higher_claim,
                    vec![part(
                        "mean signed relative difference",
                        p.signed,
                        &p.draws[1],
                        Side::Above,
                        0.0,
                    )],
                    serde_json::Value::Null,
                ),
            ],
        })
        .unwrap_or_default();
    judge_family(&mut claims);
    if args.json {
        let mut doc = serde_json::to_value(&c)?;
        doc["claims"] = serde_json::to_value(&claims)?;
        print_json(&doc)?;
        return Ok(Outcome::Ok);
    }
    outln!(
        "{} vs {}: {} steps in common, {} in one log only, warmup up to step {} ({})",
        args.quant.display(),
        args.base.display(),
        c.common_steps,
        c.unmatched_steps,
        c.warmup_until,
        c.warmup_source
    );
    for p in &c.phases {
        if let Some(d) = &p.degenerate {
            outln!(
                "  {:<13} steps {}–{} (n {}): APE {:.4} %, signed {:+.4} %, QAT loss higher at {:.1} % of steps; no interval: {d}",
                p.phase,
                p.steps[0],
                p.steps[1],
                p.n,
                p.ape,
                p.signed,
                p.higher * 100.0
            );
            continue;
        }
        outln!(
            "  {:<13} steps {}–{} (n {}): APE {:.4} % [{:.4}, {:.4}], signed {:+.4} % [{:+.4}, {:+.4}], QAT loss higher at {:.1} % of steps; lag-1 autocorrelation {:.2}",
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
            p.lag1
        );
    }
    for claim in &claims {
        outln!("{}", claim_line(claim));
    }
    Ok(Outcome::Ok)
}

/// Arguments of `judge-paper`.
#[derive(Args, Debug)]
pub struct JudgePaperArgs {
    /// The extract folder (`docs/results/paper/extract`).
    extract: PathBuf,
    /// Write the report here (atomically) instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// `judge-paper`.
pub fn run_judge_paper(args: JudgePaperArgs) -> Result<Outcome> {
    // The report never lands inside the extract it judges (it would replace a file the
    // next judgement checks).
    if let Some(out) = &args.out
        && inside(out.parent().unwrap_or(Path::new("")), &args.extract)
    {
        bail!(
            "--out {}: inside the extract {}; write the report elsewhere",
            out.display(),
            args.extract.display()
        );
    }
    let text = paper_report(&args.extract)?;
    match &args.out {
        Some(p) => write_atomic(p, text.as_bytes()).with_context(|| p.display().to_string())?,
        None => crate::output::out!("{text}"),
    }
    Ok(Outcome::Ok)
}

/// Arguments of `import log`.
#[derive(Args, Debug)]
pub struct LogArgs {
    /// The training log.
    file: PathBuf,
    /// How it is read: `auto`, `kv` (`step=N | loss=X | …` lines), `jsonl` or `csv`.
    #[arg(long, default_value = "auto")]
    pattern: LogPattern,
    /// Fields kept beside step and loss, comma-separated.
    #[arg(long, default_value = "lr,quant")]
    keep: String,
    /// The CSV to write (atomically; `-` for standard output).
    #[arg(long)]
    out: PathBuf,
}

/// `import log`.
pub fn run_import_log(args: LogArgs) -> Result<Outcome> {
    // The output never replaces its input (the log would be lost for its own CSV).
    if args.out != Path::new("-")
        && let (Ok(a), Ok(b)) = (
            std::fs::canonicalize(&args.file),
            std::fs::canonicalize(&args.out),
        )
        && a == b
    {
        bail!(
            "--out {}: it is the log being read; write the CSV elsewhere",
            args.out.display()
        );
    }
    let keep: Vec<&str> = args.keep.split(',').filter(|k| !k.is_empty()).collect();
    // step and loss are always the first columns: kept twice, the CSV would not read back.
    if let Some(k) = keep.iter().find(|k| matches!(**k, "step" | "loss")) {
        bail!(
            "--keep {}: {k} is always written; name the other fields",
            args.keep
        );
    }
    if let Some(k) = keep
        .iter()
        .enumerate()
        .find(|(i, k)| keep[..*i].contains(k))
        .map(|(_, k)| k)
    {
        bail!("--keep {}: {k} is named twice", args.keep);
    }
    let log = read_log(&args.file, args.pattern)?;
    let csv = to_csv(&log, &keep);
    if args.out == Path::new("-") {
        crate::output::out!("{csv}");
    } else {
        write_atomic(&args.out, csv.as_bytes())
            .with_context(|| format!("--out {}", args.out.display()))?;
        eprintln!(
            "{}: {} steps ({} to {}) read with pattern {}{}; {} other lines",
            args.file.display(),
            log.records.len(),
            log.records.first().map_or(0, |r| r.step),
            log.records.last().map_or(0, |r| r.step),
            log.pattern.name(),
            if log.repeated_steps > 0 {
                format!(", {} repeated step(s) kept last", log.repeated_steps)
            } else {
                String::new()
            },
            log.other_lines
        );
    }
    Ok(Outcome::Ok)
}

/// Whether the folder `dir` (which need not exist yet: its nearest existing ancestor is
/// taken) lies in `folder` or is it (`""` stands for the current folder in both).
fn inside(dir: &Path, folder: &Path) -> bool {
    let dot = |p: &Path| {
        if p.as_os_str().is_empty() {
            Path::new(".").to_path_buf()
        } else {
            p.to_path_buf()
        }
    };
    let Ok(folder) = std::fs::canonicalize(dot(folder)) else {
        return false;
    };
    let mut at = dot(dir);
    loop {
        if let Ok(d) = std::fs::canonicalize(&at) {
            return d.starts_with(&folder);
        }
        match at.parent() {
            Some(p) => at = dot(p),
            None => return false,
        }
    }
}
