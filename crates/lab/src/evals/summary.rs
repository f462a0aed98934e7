//! Benchmark summary tables as text, the layout of the paper repository's
//! `evaluate_benchmarks/compare_results.py` (`summary_<date>.txt`):
//!
//! ```text
//! Task                              bf16         cts  vs bf16 drop
//! MMLU          (5-shot)           26.66%       26.13%      1.9770% x
//! -- Average accuracy drop vs bf16 baseline --
//!   cts         : avg drop = -0.6055%  [PASS < 1.0%]
//! ```
//!
//! Model names are right-aligned in 12-character columns, so a name of 12 characters or more
//! runs into its neighbour (`bf16_lr1e5max_quant_lr1e5`). The names are therefore taken from
//! where they stand alone — the baseline from `vs NAME drop`, the others from the average
//! section's `NAME : avg drop` lines — and the header is split by them (longest match first).

use std::path::Path;

use serde::Serialize;

use super::EvalError;

/// One row: a benchmark's accuracies, per model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryRow {
    /// The benchmark as printed (`MMLU`, `ARC-Challenge`).
    pub task: String,
    /// Few-shot examples, from `(5-shot)`.
    pub shots: Option<u32>,
    /// Accuracy (%) per model, in the table's column order; `None` for `N/A`.
    pub scores: Vec<Option<f64>>,
    /// The printed relative drops (%) of each non-baseline model, in column order.
    pub printed_drops: Vec<Option<f64>>,
}

/// One summary file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// The file's name.
    pub name: String,
    /// The date line's text.
    pub date: String,
    /// Models in column order (the baseline among them).
    pub models: Vec<String>,
    /// The baseline.
    pub baseline: String,
    /// Rows.
    pub rows: Vec<SummaryRow>,
    /// The printed average drops (%) per non-baseline model.
    pub printed_average: Vec<(String, f64)>,
}

fn pct(path: &Path, at: &str, token: &str) -> Result<Option<f64>, EvalError> {
    if token == "N/A" {
        return Ok(None);
    }
    token
        .strip_suffix('%')
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|x| x.is_finite())
        .map(Some)
        .ok_or_else(|| EvalError::new(path, at, format!("{token:?} is not a percentage or N/A")))
}

/// Parses one summary file's text.
pub fn parse_summary(path: &Path, text: &str) -> Result<Summary, EvalError> {
    let lines: Vec<&str> = text.lines().collect();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let date = lines
        .iter()
        .find(|l| l.starts_with("Evaluation Summary"))
        .and_then(|l| l.split_once('('))
        .map(|(_, d)| d.trim_end_matches(')').trim().to_string())
        .ok_or_else(|| EvalError::new(path, "line 1", "no \"Evaluation Summary (date)\" line"))?;
    let (hi, header) = lines
        .iter()
        .enumerate()
        .find(|(_, l)| l.starts_with("Task"))
        .ok_or_else(|| EvalError::new(path, "header", "no line starting with \"Task\""))?;
    let baseline = header
        .find("vs ")
        .map(|i| &header[i + 3..])
        .and_then(|rest| rest.split(" drop").next())
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .ok_or_else(|| {
            EvalError::new(
                path,
                &format!("line {}", hi + 1),
                "no \"vs NAME drop\" column",
            )
        })?
        .to_string();
    let printed_average = printed_averages(path, &lines)?;
    let mut rows = Vec::new();
    let mut columns = None;
    for (i, l) in lines.iter().enumerate().skip(hi + 1) {
        if l.starts_with('=') || l.starts_with('-') || l.trim().is_empty() {
            if !rows.is_empty() {
                break;
            }
            continue;
        }
        let row = parse_row(path, &format!("line {}", i + 1), l)?;
        let m = row.scores.len();
        if *columns.get_or_insert(m) != m {
            return Err(EvalError::new(
                path,
                &format!("line {}", i + 1),
                "a different number of columns",
            ));
        }
        rows.push(row);
    }
    let m = columns.ok_or_else(|| EvalError::new(path, "rows", "no benchmark rows"))?;
    // Split the header's names by the names known from where they stand alone.
    let mut known: Vec<String> = printed_average.iter().map(|(n, _)| n.clone()).collect();
    known.push(baseline.clone());
    let models = split_models(path, &format!("line {}", hi + 1), header, known, m)?;
    if !models.contains(&baseline) {
        return Err(EvalError::new(
            path,
            "header",
            format!("the baseline {baseline} has no column"),
        ));
    }
    Ok(Summary {
        name,
        date,
        models,
        baseline,
        rows,
        printed_average,
    })
}

/// The `NAME: avg drop = X%` lines: (name, value).
fn printed_averages(path: &Path, lines: &[&str]) -> Result<Vec<(String, f64)>, EvalError> {
    let mut printed_average = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some((m, rest)) = l.split_once(": avg drop =") {
            let v = rest.split_whitespace().next().unwrap_or("");
            let at = format!("line {}", i + 1);
            let v =
                pct(path, &at, v)?.ok_or_else(|| EvalError::new(path, &at, "an average of N/A"))?;
            printed_average.push((m.trim().to_string(), v));
        }
    }
    Ok(printed_average)
}

/// One benchmark row `TASK (N-shot) S1 … SM D2 … DM` (`at` names its line).
fn parse_row(path: &Path, at: &str, l: &str) -> Result<SummaryRow, EvalError> {
    let at = at.to_owned();
    let open = l
        .find('(')
        .ok_or_else(|| EvalError::new(path, &at, "no \"(N-shot)\""))?;
    let close = l[open..]
        .find(')')
        .map(|c| open + c)
        .ok_or_else(|| EvalError::new(path, &at, "no \")\""))?;
    let task = l[..open].trim().to_string();
    let shots = l[open + 1..close]
        .strip_suffix("-shot")
        .and_then(|s| s.parse().ok());
    let tokens: Vec<&str> = l[close + 1..]
        .split_whitespace()
        .filter(|t| *t != "x")
        .collect();
    if tokens.len().is_multiple_of(2) {
        return Err(EvalError::new(
            path,
            &at,
            format!("{} values: expected M scores and M − 1 drops", tokens.len()),
        ));
    }
    let m = tokens.len().div_ceil(2);
    let scores = tokens[..m]
        .iter()
        .map(|t| pct(path, &at, t))
        .collect::<Result<_, _>>()?;
    let printed_drops = tokens[m..]
        .iter()
        .map(|t| pct(path, &at, t))
        .collect::<Result<_, _>>()?;
    Ok(SummaryRow {
        task,
        shots,
        scores,
        printed_drops,
    })
}

/// The header's model names, squeezed together by the header's spacing, split by the names
/// `known` from where they stand alone; `m` of them.
fn split_models(
    path: &Path,
    at: &str,
    header: &str,
    mut known: Vec<String>,
    m: usize,
) -> Result<Vec<String>, EvalError> {
    known.sort_by_key(|n| std::cmp::Reverse(n.len()));
    let squeezed: String = header["Task".len()..]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let mut rest = squeezed.as_str();
    let mut models = Vec::new();
    while models.len() < m {
        let Some(n) = known.iter().find(|n| rest.starts_with(n.as_str())) else {
            return Err(EvalError::new(
                path,
                at,
                format!(
                    "cannot split the model names at {:?} (known: {})",
                    &rest.chars().take(24).collect::<String>(),
                    known.join(", ")
                ),
            ));
        };
        models.push(n.clone());
        rest = &rest[n.len()..];
    }
    Ok(models)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAMMED: &str = "Evaluation Summary  (2026-05-07 10:20:16)

========
Task                        bf16_lr1e5max_quant_lr1e5        bf16vs bf16_lr1e5 dropvs bf16_lr1e5 drop
--------
MMLU          (5-shot)           43.36%       43.17%       26.66%      0.4271%       38.5184% x
ARC-Challenge(25-shot)           36.77%       36.69%         N/A      0.2320%           N/A
========

-- Average accuracy drop vs bf16 baseline --
  max_quant_lr1e5: avg drop = 4.8916%  [FAIL < 1.0%]
  bf16        : avg drop = 28.0065%  [FAIL < 1.0%]
";

    #[test]
    fn splits_names_that_run_together() {
        let s = parse_summary(Path::new("s.txt"), JAMMED).unwrap();
        assert_eq!(s.baseline, "bf16_lr1e5");
        assert_eq!(s.models, ["bf16_lr1e5", "max_quant_lr1e5", "bf16"]);
        assert_eq!(s.rows.len(), 2);
        assert_eq!(s.rows[1].task, "ARC-Challenge");
        assert_eq!(s.rows[1].shots, Some(25));
        assert_eq!(s.rows[1].scores, [Some(36.77), Some(36.69), None]);
        assert_eq!(s.rows[0].printed_drops, [Some(0.4271), Some(38.5184)]);
        assert_eq!(
            s.printed_average[0],
            ("max_quant_lr1e5".to_string(), 4.8916)
        );
    }

    #[test]
    fn refuses_what_it_cannot_read_naming_the_line() {
        let e = parse_summary(Path::new("s.txt"), &JAMMED.replace("26.66%", "26,66%")).unwrap_err();
        assert!(e.to_string().contains("s.txt: line 6"), "{e}");
        let e = parse_summary(
            Path::new("s.txt"),
            &JAMMED.replace("  bf16        : avg", "  zz : avg"),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("cannot split the model names"),
            "{e}"
        );
        assert!(parse_summary(Path::new("s.txt"), "nothing").is_err());
    }

    #[test]
    fn fuzzed_summaries_never_panic() {
        let mut rng = hif8lab_train::rng::Rng::new(7);
        for _ in 0..3000 {
            let mut b = JAMMED.as_bytes().to_vec();
            for _ in 0..1 + rng.below(5) {
                let i = rng.below(b.len());
                match rng.below(3) {
                    0 => b[i] = b"(%)-x 9N/A\n:="[rng.below(13)],
                    1 => {
                        b.remove(i);
                    }
                    _ => b.insert(i, rng.below(256) as u8),
                }
            }
            let text = String::from_utf8_lossy(&b);
            if let Ok(s) = parse_summary(Path::new("f.txt"), &text) {
                assert!(s.rows.iter().all(|r| r.scores.len() == s.models.len()));
            }
        }
    }
}
