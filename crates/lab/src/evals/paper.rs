//! The paper's own numbers, judged: its training logs (APE) and its benchmark summaries,
//! from a compact extract (`docs/results/paper/extract/`), with the claims P1–P6 of
//! `docs/results/claims.md`. [`paper_report`] writes `docs/results/paper/results.md`; a test
//! rebuilds it from the extract byte for byte.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::EvalError;
use super::compare::{count_of, unpaired_intervals};
use super::loss_compare::{BLOCK, LossComparison, compare_losses, draw_part};
use super::report::claim_line;
use super::summary::{Summary, parse_summary};
use super::train_log::{LogPattern, parse_log};
use crate::claims::{Claim, Part, Side, Spread, judge_family};

mod markdown;
use markdown::{write_all_tables, write_final, write_losses, write_saturation, write_spread};

/// A benchmark as the summaries name it: its lm-eval task, split and item count.
pub struct Benchmark {
    /// As printed in the summaries.
    pub label: &'static str,
    /// lm-eval's task.
    pub task: &'static str,
    /// The split lm-eval scores.
    pub split: &'static str,
    /// Its documents.
    pub n: u64,
    /// The metric the authors' script reads.
    pub metric: &'static str,
}

/// The six benchmarks of the summaries (item counts: the datasets' splits that lm-eval's task
/// configurations score; metric: the authors' `compare_results.py`).
pub const BENCHMARKS: [Benchmark; 6] = [
    Benchmark {
        label: "MMLU",
        task: "mmlu",
        split: "test",
        n: 14_042,
        metric: "acc",
    },
    Benchmark {
        label: "GSM8K",
        task: "gsm8k",
        split: "test",
        n: 1_319,
        metric: "exact_match (flexible-extract)",
    },
    Benchmark {
        label: "MATH500",
        task: "minerva_math",
        split: "test",
        n: 5_000,
        metric: "math_verify",
    },
    Benchmark {
        label: "HellaSwag",
        task: "hellaswag",
        split: "validation",
        n: 10_042,
        metric: "acc_norm",
    },
    Benchmark {
        label: "ARC-Easy",
        task: "arc_easy",
        split: "test",
        n: 2_376,
        metric: "acc_norm",
    },
    Benchmark {
        label: "ARC-Challenge",
        task: "arc_challenge",
        split: "test",
        n: 1_172,
        metric: "acc_norm",
    },
];

/// The margin of P4/P5 (%), the APE target of P1 (%), the reported APE of P2 (%).
const MARGIN: f64 = 1.0;
const APE_TARGET: f64 = 0.5;
const REPORTED_APE: f64 = 0.11;

fn benchmark(label: &str) -> Option<&'static Benchmark> {
    BENCHMARKS.iter().find(|b| b.label == label)
}

/// The whole counts `k` of `n` whose percentage prints as `pct` with two decimals.
fn counts_for(pct: f64, n: u64) -> Vec<u64> {
    let centre = (pct / 100.0 * n as f64).round() as i64;
    (centre - 3..=centre + 3)
        .filter(|k| *k >= 0)
        .map(|k| k as u64)
        .filter(|k| ((*k as f64 / n as f64 * 10_000.0).round() / 100.0 - pct).abs() < 1e-9)
        .collect()
}

/// Reads the extract and writes the report.
pub fn paper_report(extract: &Path) -> Result<String, EvalError> {
    let source = std::fs::read_to_string(extract.join("SOURCE.md"))
        .map_err(|e| EvalError::io(&extract.join("SOURCE.md"), &e))?;
    verify_extract(extract, &source)?;
    let read = |name: &str| -> Result<_, EvalError> {
        let p = extract.join(name);
        let gz = std::fs::read(&p).map_err(|e| EvalError::io(&p, &e))?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut bytes)
            .map_err(|e| EvalError::new(&p, "", format!("not gzip ({e})")))?;
        parse_log(&p, &bytes, LogPattern::Csv)
    };
    let base = read("train_bf16_lr1e5.csv.gz")?;
    let quant = read("train_max_quant_lr1e5.csv.gz")?;
    let losses = compare_losses(
        &base,
        &quant,
        None,
        &extract.join("train_max_quant_lr1e5.csv.gz"),
    )?;
    // As the authors' log_visualizer.py computes it: every step of both logs.
    let ape_all = losses
        .phases
        .iter()
        .find(|p| p.phase == "all steps")
        .map_or(f64::NAN, |p| p.ape);
    let dir = extract.join("summaries");
    let summaries = read_summaries(&dir)?;
    let last = summaries
        .iter()
        .rev()
        .find(|s| s.models.iter().any(|m| m == "max_quant_lr1e5") && s.baseline == "bf16_lr1e5")
        .ok_or_else(|| {
            EvalError::new(
                &dir,
                "",
                "no summary compares max_quant_lr1e5 with bf16_lr1e5",
            )
        })?;
    let final_pair = pair_tables(last, "bf16_lr1e5", "max_quant_lr1e5");
    // P6: each first-round model's latest summary against max_quant's latest.
    let latest = |m: &str| {
        summaries
            .iter()
            .rev()
            .find(|s| s.models.iter().any(|x| x == m))
    };
    let sat: Vec<(String, Vec<TaskRow>)> = ["cts", "dts_exp"]
        .iter()
        .filter_map(|m| {
            let (a, b) = (latest("max_quant")?, latest(m)?);
            Some((m.to_string(), cross_tables(a, "max_quant", b, m)))
        })
        .collect();
    let mut claims = paper_claims(&losses, ape_all, &final_pair, &sat);
    judge_family(&mut claims);
    let mut out = String::new();
    let _ = writeln!(out, "# The paper's own numbers, judged\n");
    let _ = writeln!(out, "{}", source.trim_end());
    let _ = writeln!(
        out,
        "\nRebuilt from the extract by `hif8lab judge-paper docs/results/paper/extract --out docs/results/paper/results.md` (a test checks it byte for byte). Claims and thresholds: `docs/results/claims.md` (P1–P6), fixed before these intervals were computed. All claims are judged together with Holm's adjustment; each line shows the interval at the claim's own level.\n"
    );
    let _ = writeln!(out, "## Verdicts\n");
    for c in &claims {
        let _ = writeln!(out, "- {}", claim_line(c));
    }
    write_losses(&mut out, &losses, ape_all);
    write_final(&mut out, last, &final_pair);
    write_saturation(&mut out, &sat);
    write_all_tables(&mut out, &summaries);
    write_spread(&mut out, &summaries, &final_pair);
    Ok(out)
}

/// Every `*.txt` summary in `dir`, in name order.
#[cfg(not(target_arch = "wasm32"))]
/// The `` `name` | `hex` `` pairs of a SOURCE.md table: (first column, SHA-256, third column).
fn sha_rows(source: &str) -> Vec<(String, String, String)> {
    source
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            let code = |c: &str| {
                c.strip_prefix('`')
                    .and_then(|c| c.strip_suffix('`'))
                    .map(String::from)
            };
            let name = code(cells.first()?)?;
            let sha = code(cells.get(1)?)?;
            (sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit())).then(|| {
                let taken = cells.get(2).map_or(String::new(), |c| c.to_string());
                (name, sha, taken)
            })
        })
        .collect()
}

/// Every file of the extract against SOURCE.md: each listed in its table of the extract's
/// files with the SHA-256 the bytes have, none there that is not listed, and each verbatim
/// summary with the SHA-256 its source file in the authors' repository had. An edited
/// score, a swapped or scaled log, a missing or forged summary: refused before any verdict.
#[cfg(not(target_arch = "wasm32"))]
fn verify_extract(extract: &Path, source: &str) -> Result<(), EvalError> {
    use sha2::{Digest, Sha256};
    let source_md = extract.join("SOURCE.md");
    let rows = sha_rows(source);
    // The table of the extract's own files: the rows whose first cell is a path of it.
    let listed: Vec<&(String, String, String)> = rows
        .iter()
        .filter(|(name, _, taken)| {
            taken.is_empty() && !name.contains("/results/") && !name.starts_with("data_visualize/")
        })
        .collect();
    if listed.is_empty() {
        return Err(EvalError::new(
            &source_md,
            "the extract's files",
            "no SHA-256 of the extract's own files: nothing would be verified (scripts/paper-extract.sh writes that table)",
        ));
    }
    let sha = |path: &Path| -> Result<String, EvalError> {
        let bytes = std::fs::read(path).map_err(|e| EvalError::io(path, &e))?;
        Ok(Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect())
    };
    for (name, want, _) in &listed {
        let path = extract.join(name);
        let have = sha(&path)?;
        if &have != want {
            return Err(EvalError::new(
                &path,
                "SHA-256",
                format!(
                    "{have}, but SOURCE.md lists {want}: the file was changed after it was extracted"
                ),
            ));
        }
    }
    // No file the table does not list (a forged summary would be read with the others).
    let mut present: Vec<String> = Vec::new();
    for dir in [extract.to_path_buf(), extract.join("summaries")] {
        for e in std::fs::read_dir(&dir)
            .map_err(|e| EvalError::io(&dir, &e))?
            .flatten()
        {
            let p = e.path();
            if p.is_file() && p.file_name().is_some_and(|n| n != "SOURCE.md") {
                let rel = p
                    .strip_prefix(extract)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .replace('\\', "/");
                present.push(rel);
            }
        }
    }
    if let Some(extra) = present
        .iter()
        .find(|p| !listed.iter().any(|(n, _, _)| n == *p))
    {
        return Err(EvalError::new(
            &extract.join(extra),
            "",
            "a file SOURCE.md does not list: the extract holds only what was extracted",
        ));
    }
    // A verbatim summary has its source file's bytes.
    for (orig, want, taken) in rows.iter().filter(|(_, _, t)| t.ends_with("(verbatim)")) {
        let name = taken.split('`').nth(1).unwrap_or_default();
        let have = sha(&extract.join(name))?;
        if &have != want {
            return Err(EvalError::new(
                &extract.join(name),
                "SHA-256",
                format!("{have}, but {orig} in the authors' repository has {want}"),
            ));
        }
    }
    Ok(())
}

#[cfg(target_arch = "wasm32")]
fn verify_extract(_extract: &Path, _source: &str) -> Result<(), EvalError> {
    Ok(())
}

fn read_summaries(dir: &Path) -> Result<Vec<Summary>, EvalError> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| EvalError::io(dir, &e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).map_err(|e| EvalError::io(p, &e))?;
            parse_summary(p, &text)
        })
        .collect()
}

/// The claims P1–P6 (one family, judged together by the caller).
fn paper_claims(
    losses: &LossComparison,
    ape_all: f64,
    final_pair: &[TaskRow],
    sat: &[(String, Vec<TaskRow>)],
) -> Vec<Claim> {
    let post = losses.phases.iter().find(|p| p.phase == "after warmup");
    let mut claims = vec![
        Claim::new(
            "P1: the QAT run's training loss is near-lossless after the warmup (APE below the challenge's 0.5 %)",
            post.map(|p| {
                vec![draw_part(
                    "post-warmup APE",
                    p.ape,
                    &p.draws[0],
                    Side::Below,
                    APE_TARGET,
                )]
            })
            .unwrap_or_default(),
            serde_json::Value::Null,
        ),
        Claim::new(
            "P2: the reported APE (0.11 %) comes from these logs",
            vec![Part::exact(
                "APE over all steps minus the reported 0.11 %",
                " points",
                ape_all - REPORTED_APE,
                Side::Within,
                0.005,
            )],
            serde_json::Value::Null,
        ),
        Claim::new(
            "P3: the QAT run's loss is systematically higher after the warmup",
            post.map(|p| {
                vec![draw_part(
                    "post-warmup mean signed relative difference",
                    p.signed,
                    &p.draws[1],
                    Side::AtLeast,
                    0.0,
                )]
            })
            .unwrap_or_default(),
            serde_json::Value::Null,
        ),
        average_claim(
            "P4: near-lossless on the benchmarks by the challenge's rule: average relative drop of max_quant_lr1e5 vs bf16_lr1e5 below 1 %",
            final_pair,
            Side::Below,
            MARGIN,
        ),
    ];
    for t in final_pair {
        claims.push(Claim::new(
            &format!("P5: {} within ±1 % (relative) of bf16_lr1e5", t.label),
            vec![drop_part(t, Side::Within, MARGIN)],
            serde_json::Value::Null,
        ));
    }
    for (m, rows) in sat {
        claims.push(average_claim(
            &format!(
                "P6: saturation costs knowledge: average relative drop of {m} vs max_quant above 0"
            ),
            rows,
            Side::AtLeast,
            0.0,
        ));
    }
    claims
}

/// One task of a comparison of two columns.
struct TaskRow {
    label: String,
    shots: Option<u32>,
    n: u64,
    base: f64,
    other: f64,
    kb: usize,
    ko: usize,
    /// The drop the summary printed (4 decimals, from the unrounded scores), where it has one.
    printed: Option<f64>,
    /// Whether whole counts of n reproduce the two percentages (and the printed drop).
    whole: bool,
}

impl TaskRow {
    /// The relative drop: the printed one where there is one (it comes from the unrounded
    /// scores), else from the counts.
    fn drop(&self) -> f64 {
        self.printed
            .unwrap_or_else(|| (self.kb as f64 - self.ko as f64) / self.kb.max(1) as f64 * 100.0)
    }
    fn spread(&self) -> (Spread, [f64; 2], [f64; 2]) {
        unpaired_intervals(
            self.kb,
            self.n as usize,
            self.ko,
            self.n as usize,
            self.kb as f64 / self.n as f64,
        )
    }
}

/// The row of a task: counts of the benchmark's n that print as the two percentages and,
/// where a drop was printed, reproduce it (to its 4 decimals).
fn row_of(
    label: &str,
    shots: Option<u32>,
    base: f64,
    other: f64,
    printed: Option<f64>,
) -> Option<TaskRow> {
    let b = benchmark(label)?;
    if base <= 0.0 {
        return None;
    }
    let (cb, co) = (counts_for(base, b.n), counts_for(other, b.n));
    let reproduces = |kb: u64, ko: u64| {
        printed.is_none_or(|p| ((kb as f64 - ko as f64) / kb as f64 * 100.0 - p).abs() < 5e-5)
    };
    let found = cb
        .iter()
        .flat_map(|kb| co.iter().map(move |ko| (*kb, *ko)))
        .find(|(kb, ko)| reproduces(*kb, *ko));
    let (kb, ko) = found.unwrap_or((
        count_of(base / 100.0, b.n) as u64,
        count_of(other / 100.0, b.n) as u64,
    ));
    Some(TaskRow {
        label: label.to_string(),
        shots,
        n: b.n,
        base,
        other,
        kb: kb as usize,
        ko: ko as usize,
        printed,
        whole: found.is_some(),
    })
}

/// The tasks where both columns of one summary have a value.
fn pair_tables(s: &Summary, base: &str, other: &str) -> Vec<TaskRow> {
    let (i, j) = (col(s, base), col(s, other));
    // The printed drops are against the summary's baseline, one per other model in order.
    let k = (base == s.baseline)
        .then(|| {
            s.models
                .iter()
                .filter(|m| **m != s.baseline)
                .position(|m| m == other)
        })
        .flatten();
    s.rows
        .iter()
        .filter_map(|r| {
            let printed = k.and_then(|k| r.printed_drops.get(k).copied().flatten());
            row_of(&r.task, r.shots, r.scores[i?]?, r.scores[j?]?, printed)
        })
        .collect()
}

fn col(s: &Summary, m: &str) -> Option<usize> {
    s.models.iter().position(|x| x == m)
}

/// `other` from summary `b` against `base` from summary `a`, task by task.
fn cross_tables(a: &Summary, base: &str, b: &Summary, other: &str) -> Vec<TaskRow> {
    let (i, j) = (col(a, base), col(b, other));
    a.rows
        .iter()
        .filter_map(|ra| {
            let rb = b.rows.iter().find(|r| r.task == ra.task)?;
            row_of(&ra.task, ra.shots, ra.scores[i?]?, rb.scores[j?]?, None)
        })
        .collect()
}

fn drop_part(t: &TaskRow, side: Side, threshold: f64) -> Part {
    Part {
        measured: format!("relative drop on {}", t.label),
        unit: "%".into(),
        value: t.drop(),
        spread: t.spread().0,
        side,
        threshold,
        test: "Newcombe's interval for independent samples (no per-document logs published)".into(),
        variation: "benchmark documents (unpaired)".into(),
    }
}

fn average_claim(claim: &str, rows: &[TaskRow], side: Side, threshold: f64) -> Claim {
    let t = rows.len().max(1) as f64;
    let mean = rows.iter().map(TaskRow::drop).sum::<f64>() / t;
    let se = rows
        .iter()
        .map(|r| {
            let [lo, hi] = r.spread().1;
            ((hi - lo) / (2.0 * 1.959_964)).powi(2)
        })
        .sum::<f64>()
        .sqrt()
        / t;
    let parts = if rows.is_empty() {
        vec![]
    } else {
        vec![Part {
            measured: format!("average relative drop over {} tasks", rows.len()),
            unit: "%".into(),
            value: mean,
            spread: Spread::Normal { se },
            side,
            threshold,
            test: "normal interval of a mean of independent tasks' drops (each task's variance from its Newcombe interval)".into(),
            variation: "benchmark documents (unpaired)".into(),
        }]
    };
    Claim::new(claim, parts, serde_json::Value::Null)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_two_decimal_percentages() {
        // ARC-Challenge: 36.77 % and 36.69 % are 431 and 430 of 1,172 (one question).
        assert_eq!(counts_for(36.77, 1172), vec![431]);
        assert_eq!(counts_for(36.69, 1172), vec![430]);
        // MATH: 0.50 % is 25 of 5,000 but no whole count of 500.
        assert_eq!(counts_for(0.50, 5000), vec![25]);
        assert!(counts_for(0.46, 500).is_empty());
    }
}
