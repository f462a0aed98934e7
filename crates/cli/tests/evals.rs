//! End-to-end tests of `compare-evals`, `compare-logs`, `import log`, `judge-paper` and
//! `replay --sweep`: outputs, files written, exit codes and refusals.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::PathBuf;

use crate::common::{arg, hif8lab, ok, tmp};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(rel)
}

#[test]
fn compare_evals_writes_its_report_and_checks() {
    let out = tmp("evals", "report");
    let (b, q) = (fixture("lm-eval/base"), fixture("lm-eval/qat"));
    let o = hif8lab(&[
        "compare-evals",
        arg(&b),
        arg(&q),
        "--out",
        arg(&out),
        "--margin",
        "5%",
    ]);
    let md = ok(&o);
    assert!(md.contains("within ±5 % (relative)"), "{md}");
    for f in ["report.md", "report.csv", "report.json"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    assert_eq!(std::fs::read_to_string(out.join("report.md")).unwrap(), md);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["margin"], 5.0);
    let task = &json["comparisons"][0]["tasks"][0];
    assert_eq!(task["n"], 609);
    assert!(task["paired"]["only_base"].is_u64());
    // --check: a verdict other than "holds" is a non-zero exit (1 fails, 3 inconclusive).
    let o = hif8lab(&["compare-evals", arg(&b), arg(&q), "--check", "--csv"]);
    let code = o.status.code().unwrap();
    let csv = String::from_utf8_lossy(&o.stdout);
    let verdicts: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().unwrap())
        .collect();
    let expected = if verdicts.contains(&"fails") {
        1
    } else if verdicts.iter().all(|v| *v == "holds") {
        0
    } else {
        3
    };
    assert_eq!(code, expected, "{csv}");
    // acc instead of acc_norm.
    let o = hif8lab(&[
        "compare-evals",
        arg(&b),
        arg(&q),
        "--metric",
        "acc",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(v["comparisons"][0]["tasks"][0]["metric"], "acc");
}

#[test]
fn compare_evals_refuses_bad_input_with_exit_2() {
    let b = fixture("lm-eval/base");
    let missing = tmp("evals", "missing");
    let o = hif8lab(&["compare-evals", arg(&b), arg(&missing)]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(arg(&missing)) && err.contains("no such file"),
        "{err}"
    );
    let o = hif8lab(&["compare-evals", arg(&b), arg(&b), "--margin", "-1"]);
    assert_eq!(o.status.code(), Some(2));
    let o = hif8lab(&["compare-evals", arg(&b), arg(&b), "--metric", "bleu"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = hif8lab(&["compare-evals", arg(&b)]);
    assert_eq!(o.status.code(), Some(2));
    // A --metric for a task the runs lack, or a metric the task lacks: refused, never dropped.
    let o = hif8lab(&[
        "compare-evals",
        arg(&b),
        arg(&b),
        "--metric",
        "hif8lab_general_knowlege=acc",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no task 'hif8lab_general_knowlege'"));
    let o = hif8lab(&[
        "compare-evals",
        arg(&b),
        arg(&b),
        "--metric",
        "hif8lab_general_knowledge=acc_nrom",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("has no metric acc_nrom"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let bad = tmp("evals", "bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("results_x.json"), "{\"results\": 3}").unwrap();
    let o = hif8lab(&["compare-evals", arg(&b), arg(&bad)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("results_x.json: results"));
    // The report never written into a run it reads (nor into a new folder inside one).
    let copy = tmp("evals", "out-inside");
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(&b).unwrap().flatten() {
        std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
    }
    let before = std::fs::read_dir(&copy).unwrap().count();
    for out in [copy.clone(), copy.join("report")] {
        let o = hif8lab(&["compare-evals", arg(&copy), arg(&b), "--out", arg(&out)]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("which this comparison reads"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert_eq!(
        std::fs::read_dir(&copy).unwrap().count(),
        before,
        "nothing written"
    );
}

#[test]
fn logs_import_and_compare() {
    let dir = tmp("evals", "logs");
    std::fs::create_dir_all(&dir).unwrap();
    let line = |s: u32, loss: f64, q: &str| {
        format!(
            "2026-05-06 02:18:14,897 [INFO] step={s}/600 | loss={loss:.4} | lr=1.00e-05 | quant={q} | samples=1,024\n"
        )
    };
    let mut base = String::from("W0506 a warning\n");
    let mut quant = String::from("Traceback (most recent call last):\n");
    for s in 1..=600u32 {
        let l = 5.0 + f64::from(s % 7) * 0.01;
        base.push_str(&line(s, l, "OFF"));
        let on = s > 100;
        quant.push_str(&line(
            s,
            if on { l * 1.002 } else { l },
            if on { "ON" } else { "OFF" },
        ));
    }
    std::fs::write(dir.join("b.log"), base).unwrap();
    std::fs::write(dir.join("q.log"), quant).unwrap();
    let csv = dir.join("b.csv");
    ok(&hif8lab(&[
        "import",
        "log",
        arg(&dir.join("b.log")),
        "--out",
        arg(&csv),
    ]));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(
        text.starts_with("step,loss,lr,quant\n1,5.01,1.00e-05,OFF\n"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 601);
    // The CSV reads back as the same log.
    let o = hif8lab(&["compare-logs", arg(&csv), arg(&dir.join("q.log")), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(v["warmup_until"], 100);
    assert_eq!(v["common_steps"], 600);
    let post = &v["phases"][1];
    assert_eq!(post["phase"], "after warmup");
    assert!((post["ape"].as_f64().unwrap() - 0.2).abs() < 0.01);
    assert_eq!(post["higher"], 1.0);
    assert_eq!(v["claims"][1]["verdict"], "holds", "systematically higher");
    // Bad input: a log without records, a loss that is not a number.
    std::fs::write(dir.join("x.log"), "nothing\n").unwrap();
    let o = hif8lab(&["compare-logs", arg(&csv), arg(&dir.join("x.log"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no training step records"));
    std::fs::write(dir.join("y.log"), "step=1 loss=inf\n").unwrap();
    let o = hif8lab(&[
        "import",
        "log",
        arg(&dir.join("y.log")),
        "--out",
        arg(&dir.join("y.csv")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("y.log: line 1: loss"));
    assert!(!dir.join("y.csv").exists(), "nothing written on refusal");
}

#[test]
fn judge_paper_rebuilds_the_committed_report() {
    let extract = fixture("../../docs/results/paper/extract");
    let out = tmp("evals", "paper");
    std::fs::create_dir_all(&out).unwrap();
    ok(&hif8lab(&[
        "judge-paper",
        arg(&extract),
        "--out",
        arg(&out.join("results.md")),
    ]));
    let committed =
        std::fs::read_to_string(fixture("../../docs/results/paper/results.md")).unwrap();
    assert_eq!(
        std::fs::read_to_string(out.join("results.md")).unwrap(),
        committed
    );
    // Its --out never lands in the extract.
    let o = hif8lab(&[
        "judge-paper",
        arg(&extract),
        "--out",
        arg(&extract.join("summaries/x.md")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("inside the extract"));
}

/// judge-paper verifies the extract against SOURCE.md before it judges: an edited score,
/// a forged summary, a swapped log, a missing table are refused, naming the file.
#[test]
fn judge_paper_verifies_every_file_of_the_extract() {
    let committed = fixture("../../docs/results/paper/extract");
    let copy = |tag: &str| {
        let dir = tmp("evals", &format!("paper-{tag}"));
        std::fs::create_dir_all(dir.join("summaries")).unwrap();
        for sub in ["", "summaries"] {
            for e in std::fs::read_dir(committed.join(sub)).unwrap() {
                let p = e.unwrap().path();
                if p.is_file() {
                    std::fs::copy(&p, dir.join(sub).join(p.file_name().unwrap())).unwrap();
                }
            }
        }
        dir
    };
    let refused = |dir: &std::path::Path, says: &str| {
        let o = hif8lab(&["judge-paper", arg(dir)]);
        assert_eq!(o.status.code(), Some(2), "{says}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{says}: {err}");
    };
    let summary = |dir: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(dir.join("summaries"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v.pop().unwrap()
    };
    // One digit of a score changed.
    let d = copy("edited");
    let s = summary(&d);
    let text = std::fs::read_to_string(&s).unwrap();
    let at = text.find(|c: char| c.is_ascii_digit()).unwrap();
    let mut bytes = text.into_bytes();
    bytes[at] = if bytes[at] == b'9' {
        b'8'
    } else {
        bytes[at] + 1
    };
    std::fs::write(&s, bytes).unwrap();
    refused(&d, "the file was changed after it was extracted");
    // A summary added.
    let d = copy("forged");
    std::fs::copy(summary(&d), d.join("summaries/summary_20991231_000000.txt")).unwrap();
    refused(&d, "a file SOURCE.md does not list");
    // The two logs swapped.
    let d = copy("swapped");
    let (a, b) = (
        d.join("train_bf16_lr1e5.csv.gz"),
        d.join("train_max_quant_lr1e5.csv.gz"),
    );
    let (x, y) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    std::fs::write(&a, y).unwrap();
    std::fs::write(&b, x).unwrap();
    refused(&d, "train_bf16_lr1e5.csv.gz");
    // SOURCE.md without the table of the extract's files.
    let d = copy("untabled");
    let md = std::fs::read_to_string(d.join("SOURCE.md")).unwrap();
    let cut = md.find("The extract's own files").unwrap();
    std::fs::write(d.join("SOURCE.md"), &md[..cut]).unwrap();
    refused(&d, "nothing would be verified");
}

#[test]
fn replay_sweeps_the_window_on_the_real_model_trace() {
    let trace = fixture("real-trace.jsonl.gz");
    let plain = trace.clone();
    let o = hif8lab(&[
        "replay",
        arg(&plain),
        "--sweep",
        "window=1,4,16,64",
        "--json",
    ]);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(rows.len(), 8, "max_window and mean_window × 4 windows");
    assert_eq!(rows[0]["estimator"], "max_window(1)");
    let above = |i: usize| rows[i]["calls_above_est"].as_u64().unwrap();
    // A longer max window is exceeded no more often.
    assert!(above(0) >= above(1) && above(1) >= above(2) && above(2) >= above(3));
    assert!(rows.iter().all(|r| r["calls"] == rows[0]["calls"]));
    let o = hif8lab(&["replay", arg(&plain), "--sweep", "window=0"]);
    assert_eq!(o.status.code(), Some(2));
    let o = hif8lab(&["replay", arg(&plain), "--sweep", "colour=1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown setting"));
}

#[test]
fn windows_beyond_the_bound_and_sweeps_beyond_their_cap_are_refused() {
    let trace = fixture("real-trace.jsonl.gz");
    // A window of 2^40 (and u64::MAX) would allocate terabytes: refused by the plan, exit 2.
    for spec in [
        "max_window(1099511627776)",
        "mean_window(18446744073709551615)",
    ] {
        let o = hif8lab(&["replay", arg(&trace), "--estimators", spec]);
        assert_eq!(o.status.code(), Some(2), "{spec}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains("--estimators") && e.contains("1..=65536"),
            "{spec}: {e}"
        );
    }
    let o = hif8lab(&["replay", arg(&trace), "--sweep", "window=1,1099511627776"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("1..=65536"));
    // 18,000 settings would replay the trace 18,000 times: at most 256.
    let many = (1..=18_000)
        .map(|w| w.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let o = hif8lab(&["replay", arg(&trace), "--sweep", &format!("window={many}")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("18000 values, at most 256"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn compare_logs_gives_no_verdict_on_nothing() {
    let dir = tmp("evals", "logs-nothing");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, steps: std::ops::RangeInclusive<u32>, f: &dyn Fn(u32) -> String| {
        let text: String = steps.map(|s| f(s) + "\n").collect();
        std::fs::write(dir.join(name), text).unwrap();
        dir.join(name)
    };
    let loss = |s: u32| 5.0 + f64::from(s % 7) * 0.01;
    let base = write("b.log", 1..=600, &|s| {
        format!("step={s} loss={:.4}", loss(s))
    });
    let json =
        |o: &std::process::Output| -> serde_json::Value { serde_json::from_str(&ok(o)).unwrap() };
    // A log against itself: exactly no difference, never "systematically higher".
    let v = json(&hif8lab(&[
        "compare-logs",
        arg(&base),
        arg(&base),
        "--json",
    ]));
    assert_eq!(v["claims"][1]["verdict"], "fails", "{}", v["claims"][1]);
    assert_eq!(
        v["claims"][0]["verdict"], "holds",
        "APE 0 is within any margin"
    );
    assert!(v["phases"][0]["degenerate"]["constant"].is_object(), "{v}");
    // 100 steps (one block): the resamples cannot vary, so no verdict.
    let short = write("s.log", 1..=100, &|s| {
        format!(
            "step={s} loss={:.4}",
            loss(s) * (1.0 + f64::from(s % 3) * 0.001)
        )
    });
    let short_base = write("sb.log", 1..=100, &|s| {
        format!("step={s} loss={:.4}", loss(s))
    });
    let v = json(&hif8lab(&[
        "compare-logs",
        arg(&short_base),
        arg(&short),
        "--json",
    ]));
    assert_eq!(
        v["claims"][0]["verdict"], "not judged",
        "{}",
        v["claims"][0]
    );
    assert_eq!(v["claims"][1]["verdict"], "not judged");
    // A warmup past the end, 2 steps in common of 600, a second run appended, a negative
    // loss: refused by name.
    let o = hif8lab(&[
        "compare-logs",
        arg(&base),
        arg(&base),
        "--warmup-steps",
        "900",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("after the warmup"));
    // 2 steps of a 600-step log: not judged, and the 598 others said.
    let stray = write("t.log", 599..=600, &|s| format!("step={s} loss=5.0"));
    let text = ok(&hif8lab(&["compare-logs", arg(&base), arg(&stray)]));
    assert!(
        text.contains("2 steps in common, 598 in one log only") && text.contains("not judged"),
        "{text}"
    );
    // Saying why, not a line of empty fields.
    assert!(
        text.contains(
            "**not judged**: the quantized run's loss is systematically higher — 2 steps, fewer than two blocks"
        ) && !text.contains("threshold \n"),
        "{text}"
    );
    // Logs that barely pair: the shorter's steps mostly missing from the other.
    let odd = write("odd.log", 1..=600, &|s| {
        format!("step={} loss=5.0", 2 * s + 1)
    });
    let o = hif8lab(&["compare-logs", arg(&base), arg(&odd)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("do not pair"));
    let mut two = std::fs::read_to_string(&base).unwrap();
    two.push_str("step=1 loss=6.0\n");
    std::fs::write(dir.join("two.log"), two).unwrap();
    let o = hif8lab(&["compare-logs", arg(&base), arg(&dir.join("two.log"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("more than one run"));
    let neg = write("n.log", 1..=600, &|s| {
        format!("step={s} loss=-{:.4}", loss(s))
    });
    let o = hif8lab(&["compare-logs", arg(&base), arg(&neg)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("finite number ≥ 0"));
    // The training loss is the first loss= of a line, not an eval loss printed after it.
    let evals = write("e.log", 1..=600, &|s| {
        format!("step={s} loss={:.4} eval loss=9.0", loss(s))
    });
    let v = json(&hif8lab(&[
        "compare-logs",
        arg(&base),
        arg(&evals),
        "--json",
    ]));
    assert_eq!(v["phases"][0]["ape"], 0.0, "{}", v["phases"][0]);
}

#[test]
fn compare_evals_refuses_a_base_of_zero_and_impossible_scores() {
    let b = fixture("lm-eval/base");
    for (tag, value, says) in [
        ("zero", 0.0, "is 0: a relative drop from it is undefined"),
        ("above-one", 1.5, "is not a score in [0, 1]"),
        ("negative", -0.5, "is not a score in [0, 1]"),
    ] {
        let dir = tmp("evals", tag);
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(&b).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
        let results = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("results_")
            })
            .unwrap();
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
        v["results"]["hif8lab_general_knowledge"]["acc_norm,none"] = serde_json::json!(value);
        std::fs::write(&results, v.to_string()).unwrap();
        // As the base, and (for the impossible scores) as the other run.
        let o = hif8lab(&["compare-evals", arg(&dir), arg(&b), "--check"]);
        assert_eq!(o.status.code(), Some(2), "{tag}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(says) && err.contains("hif8lab_general_knowledge"),
            "{tag}: {err}"
        );
        if value != 0.0 {
            let o = hif8lab(&["compare-evals", arg(&b), arg(&dir)]);
            assert_eq!(o.status.code(), Some(2), "{tag} as the other run");
        }
    }
}

#[test]
fn outputs_that_are_inputs_and_traces_with_nothing_are_refused() {
    let dir = tmp("evals", "inputs");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("x.log");
    let text: String = (1..=10)
        .map(|s| format!("step={s} loss=5.0 lr=1\n"))
        .collect();
    std::fs::write(&log, &text).unwrap();
    // --out the log itself: refused, the log kept.
    let o = hif8lab(&["import", "log", arg(&log), "--out", arg(&log)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("it is the log being read"));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), text);
    // --keep step,loss would write columns twice (a CSV its own reader refuses).
    let o = hif8lab(&[
        "import",
        "log",
        arg(&log),
        "--out",
        "-",
        "--keep",
        "step,loss",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("always written"));
    let o = hif8lab(&["import", "log", arg(&log), "--out", "-", "--keep", "lr,lr"]);
    assert_eq!(o.status.code(), Some(2));
    // A trace with a header and no call: nothing to replay, exit 2 (not a table of 0 calls).
    let trace = dir.join("t.jsonl");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(
            &std::fs::read(fixture("real-trace.jsonl.gz")).unwrap()[..],
        ),
        &mut bytes,
    )
    .unwrap();
    let first = String::from_utf8_lossy(&bytes)
        .lines()
        .next()
        .unwrap()
        .to_string();
    std::fs::write(&trace, first + "\n").unwrap();
    let o = hif8lab(&["replay", arg(&trace)]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("no quantizer calls"));
    // A gzip of two members is read whole (both members' calls).
    let gz = |b: &[u8]| {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    };
    let cut = bytes.len() / 2
        + bytes[bytes.len() / 2..]
            .iter()
            .position(|b| *b == b'\n')
            .unwrap()
        + 1;
    let mut two = gz(&bytes[..cut]);
    two.extend(gz(&bytes[cut..]));
    std::fs::write(dir.join("two.jsonl.gz"), two).unwrap();
    let whole = hif8lab(&["replay", arg(&fixture("real-trace.jsonl.gz")), "--json"]);
    let split = hif8lab(&["replay", arg(&dir.join("two.jsonl.gz")), "--json"]);
    assert_eq!(ok(&whole), ok(&split), "both members replayed");
    // Not a regular file: refused, never read.
    let o = hif8lab(&["replay", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a regular file"));
}
