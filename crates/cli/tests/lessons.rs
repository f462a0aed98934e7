//! Every lesson's scenario runs (`hif8lab lesson run NAME --json`), each in its own fresh
//! folder (pretraining included) and within the 2-minute budget, and its claims keep the
//! JSON contract: `claim`, `evidence`, `holds` (true only when the verdict is `holds`),
//! `verdict` (holds / fails / inconclusive, consistent with the interval), `test`,
//! `measured`, `statistic`, `unit`, `interval` ([lo, hi]) at `confidence`, `threshold`, and
//! `p_value` where probe scores are compared. Claims on exact counts of a run must hold; a
//! claim judged from probe scores must not fail (it may be inconclusive when its interval
//! straddles the threshold); the exit code says which.
//! An unknown lesson is bad input.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::process::Command;

/// `hif8lab lesson run NAME --json --out OUT` with `--set` for each of `sets`.
fn run_lesson(name: &str, out: &std::path::Path, sets: &[&str]) -> std::process::Output {
    let mut args = vec![
        "lesson",
        "run",
        name,
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args(&args)
        .output()
        .unwrap()
}

fn lesson(name: &str) -> serde_json::Value {
    let out = std::env::temp_dir().join(format!("hif8lab-lesson-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = run_lesson(name, &out, &[]);
    let _ = std::fs::remove_dir_all(&out);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(v["lesson"], name);
    let claims = v["claims"].as_array().unwrap();
    assert!(!claims.is_empty());
    let mut inconclusive = 0;
    for c in claims {
        assert!(c["claim"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(!c["evidence"].is_null());
        let verdict = c["verdict"].as_str().unwrap();
        assert_eq!(c["holds"], verdict == "holds", "{c}");
        let test = c["test"].as_str().unwrap();
        let stat = c["statistic"].as_f64().unwrap();
        let iv: Vec<f64> = c["interval"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(iv.len(), 2, "{c}");
        assert!(iv[0] <= iv[1], "{c}");
        assert!(c["measured"].as_str().is_some_and(|s| !s.is_empty()), "{c}");
        assert!(
            c["threshold"].as_str().is_some_and(|s| !s.is_empty()),
            "{c}"
        );
        if c.get("p_value").is_none() {
            // Exact quantities of one run (counts, APE): no interval across runs; the claim
            // must hold.
            assert!(test.starts_with("exact value"), "{c}");
            assert_eq!(
                iv,
                [stat, stat],
                "an exact claim's interval is its value: {c}"
            );
            assert!(c["confidence"].is_null(), "{c}");
            assert_eq!(verdict, "holds", "claim failed: {c}");
        } else {
            assert!(
                test.contains("bootstrap") || test.starts_with("exact paired"),
                "{c}"
            );
            assert!(iv[1] > iv[0], "never of zero width: {c}");
            let confidence = c["confidence"].as_f64().unwrap();
            assert!(confidence > 0.8 && confidence < 1.0, "{c}");
            let p = c["p_value"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&p), "{c}");
            assert_ne!(verdict, "fails", "claim failed: {c}");
            inconclusive += usize::from(verdict == "inconclusive");
        }
    }
    let expected = if inconclusive == 0 { 0 } else { 3 };
    assert_eq!(
        o.status.code(),
        Some(expected),
        "exit code with {inconclusive} inconclusive claims"
    );
    assert_eq!(v["holds"], inconclusive == 0);
    assert!(v["summary"].as_str().is_some_and(|s| s.len() > 20));
    let seconds = v["seconds"].as_f64().unwrap();
    assert!(seconds > 0.0, "{seconds}");
    v
}

#[test]
fn saturation_lesson_claims_hold() {
    let v = lesson("saturation");
    let e = &v["claims"][0]["evidence"];
    // The numbers the summary quotes are the evidence's.
    let mr = e["most_recent_calls_above_est"].as_u64().unwrap();
    assert!(v["summary"].as_str().unwrap().contains(&mr.to_string()));
}

#[test]
fn forgetting_lesson_claims_hold() {
    lesson("forgetting");
}

#[test]
fn fixes_lesson_claims_hold() {
    let v = lesson("fixes");
    assert_eq!(v["claims"].as_array().unwrap().len(), 4);
    // The grid's verdict on the fix compares runs on the same probe items.
    let fix = &v["claims"][1];
    assert!(
        fix["claim"].as_str().unwrap().contains("near-lossless"),
        "{fix}"
    );
    assert!(fix["p_value"].is_number(), "{fix}");
}

/// The sandbox's claim, which names the estimator the run used.
fn sandbox_claim_names<'a>(v: &'a serde_json::Value, estimator: &str) -> &'a serde_json::Value {
    let c = &v["claims"][0];
    let want = format!("your estimator ({estimator})");
    assert!(c["claim"].as_str().unwrap().starts_with(&want), "{c}");
    c
}

#[test]
fn sandbox_lesson_claims_hold() {
    let v = lesson("sandbox");
    // The fixed run (max_window(64) with warmup at the low rate) keeps under 5 % of its
    // activation and gradient calls above the estimate; the claim names its estimator.
    sandbox_claim_names(&v, "max_window(64)");
    assert!(
        v["runs"][0]
            .as_str()
            .unwrap()
            .starts_with("sandbox-max_window"),
        "{v}"
    );
}

/// The sandbox trains the settings given with `--set`; the other lessons refuse them.
#[test]
fn sandbox_lesson_takes_settings() {
    let out =
        std::env::temp_dir().join(format!("hif8lab-lesson-sandbox-set-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = |name: &str, sets: &[&str]| run_lesson(name, &out, sets);
    let o = run(
        "sandbox",
        &["qat.scaling.estimator=most_recent", "train.steps=30"],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&o.stderr)));
    let c = sandbox_claim_names(&v, "most_recent");
    assert!(v["runs"][0].as_str().unwrap().contains("30steps"), "{v}");
    // Exact counts: the verdict follows the share (holds below 1 %, fails at or above).
    let share = c["statistic"].as_f64().unwrap();
    assert_eq!(
        c["verdict"],
        if share < 1.0 { "holds" } else { "fails" },
        "{c}"
    );
    // A bad setting names itself; another lesson refuses --set.
    let o = run("sandbox", &["train.lr=fast"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("train.lr"), "{err}");
    let o = run("fixes", &["train.lr=1e-3"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("only the sandbox"));
    // A setting the sandbox would validate and then not train is refused by name.
    for set in [
        "qat.scaling.margin=2",
        "qat.scaling.cold_start=te",
        "optim.weight_decay=0",
        "train.batch=4",
        "data.corpus=kb",
    ] {
        let o = run("sandbox", &[set]);
        assert_eq!(o.status.code(), Some(2), "{set}");
        let err = String::from_utf8_lossy(&o.stderr);
        let key = set.split('=').next().unwrap();
        assert!(
            err.contains(&format!("'{key}' is not one of them")),
            "{set}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The real model's outliers, judged from the committed SmolLM2-135M grid's data (nothing
/// trains): the quantizer it names is the one whose amax tops that data, found here
/// independently, and the counts it quotes are that data's.
#[test]
fn outliers_lesson_judges_the_committed_real_model_runs() {
    let v = lesson("outliers");
    assert_eq!(v["claims"].as_array().unwrap().len(), 4);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(hif8lab_lab::lesson::outliers::COMMITTED_FILE);
    let data = hif8lab_lab::grid::GridData::read(&path).unwrap();
    let mr = data
        .runs
        .iter()
        .find(|r| r.run == "most_recent-low" && r.order == 0)
        .unwrap();
    let top = mr
        .summary
        .per_quantizer
        .iter()
        .max_by(|a, b| a.amax_max.total_cmp(&b.amax_max))
        .unwrap();
    let e = &v["claims"][1]["evidence"];
    assert_eq!(
        v["claims"][0]["evidence"]["quantizer"],
        top.quantizer.as_str()
    );
    let k = mr
        .summary
        .estimators
        .iter()
        .position(|x| x == "most_recent")
        .unwrap();
    assert_eq!(
        e["most_recent_calls_above_est"].as_u64().unwrap(),
        top.calls_above[k]
    );
    assert!(v["summary"].as_str().unwrap().contains(&top.quantizer));
    // --from a folder without a grid's data: named, non-zero exit.
    let dir = std::env::temp_dir().join(format!("hif8lab-outliers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args(["lesson", "run", "outliers", "--from", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0));
    assert!(err.contains("runs.jsonl.gz"), "{err}");
    // --from belongs to the outliers lesson only.
    let o = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args([
            "lesson",
            "run",
            "saturation",
            "--from",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--from"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_lesson_is_bad_input() {
    let o = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args(["lesson", "run", "nope"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown lesson 'nope'") && err.contains("saturation"),
        "{err}"
    );
}

/// `lesson base --check` writes nothing: an `--out` beside it is refused, not ignored.
#[test]
fn lesson_base_check_refuses_an_out_it_would_ignore() {
    let o = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args([
            "lesson",
            "base",
            "--check",
            "--out",
            "elsewhere.safetensors",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--check") && err.contains("cannot be used with"),
        "{err}"
    );
    assert!(!std::path::Path::new("elsewhere.safetensors").exists());
}
