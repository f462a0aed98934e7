//! `compare-evals` on lm-eval output folders made by the real tool (SmolLM2-135M and a QAT run
//! of it on the shipped probe set, `--log_samples`; tests/fixtures/gen_lm_eval_fixtures.sh):
//! the paired counts against an independent count from the samples, refusals of runs that
//! cannot be paired, the unpaired path, Holm across tasks, and the reader fuzzed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use hif8lab_lab::evals::compare::{CompareOptions, compare};
use hif8lab_lab::evals::lm_eval::EvalRun;
use hif8lab_lab::stats::mcnemar;
use serde_json::Value;

pub(crate) fn fixture(arm: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/lm-eval")
        .join(arm)
}

pub(crate) fn file_in(dir: &Path, prefix: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix}* in {}", dir.display()))
}

pub(crate) fn samples(dir: &Path) -> Vec<Value> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(file_in(dir, "samples_")).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A scratch copy of a fixture folder.
pub(crate) fn copy(arm: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hif8lab-evals-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(fixture(arm)).unwrap().flatten() {
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    dir
}

pub(crate) fn write_samples(dir: &Path, rows: &[Value]) {
    let path = file_in(dir, "samples_");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::fast(),
    );
    for r in rows {
        writeln!(gz, "{r}").unwrap();
    }
    gz.finish().unwrap();
}

pub(crate) fn open(dir: &Path) -> EvalRun {
    EvalRun::open(dir).unwrap()
}

#[test]
fn paired_counts_match_an_independent_count() {
    let (base, qat) = (open(&fixture("base")), open(&fixture("qat")));
    let report = compare(&[base, qat], &CompareOptions::default()).unwrap();
    let t = &report.comparisons[0].tasks[0];
    assert_eq!(t.task, "hif8lab_general_knowledge");
    assert_eq!(t.metric, "acc_norm");
    assert_eq!(t.n, 609);
    // Count the discordant documents straight from the two logs.
    let (b, q) = (samples(&fixture("base")), samples(&fixture("qat")));
    let mark = |rows: &[Value], id: u64| {
        rows.iter().find(|r| r["doc_id"] == id).unwrap()["acc_norm"]
            .as_f64()
            .unwrap()
    };
    let (mut only_base, mut only_qat) = (0, 0);
    for id in 0..609u64 {
        match (mark(&b, id), mark(&q, id)) {
            (x, y) if x > y => only_base += 1,
            (x, y) if x < y => only_qat += 1,
            _ => {}
        }
    }
    let p = t.paired.as_ref().expect("both runs logged their documents");
    assert_eq!((p.only_base, p.only_other), (only_base, only_qat));
    assert_eq!(p.mcnemar_p, mcnemar(only_base, only_qat));
    // The score is lm-eval's own aggregate.
    let results: Value =
        serde_json::from_slice(&std::fs::read(file_in(&fixture("base"), "results_")).unwrap())
            .unwrap();
    let acc_norm = results["results"]["hif8lab_general_knowledge"]["acc_norm,none"]
        .as_f64()
        .unwrap();
    assert!((t.base - acc_norm).abs() < 1e-12);
    // Clusters are the probe set's entities: 209 of them, read from the documents' field.
    assert_eq!(p.clusters, Some(209));
    assert_eq!(p.clusters_by.as_deref(), Some("cluster"));
    // acc beside acc_norm, on the same documents, counted the same way.
    let also = p.also.as_ref().expect("acc was logged too");
    assert_eq!(also.metric, "acc");
    let acc = |rows: &[Value], id: u64| {
        rows.iter().find(|r| r["doc_id"] == id).unwrap()["acc"]
            .as_f64()
            .unwrap()
    };
    let only = (0..609u64).filter(|id| acc(&b, *id) > acc(&q, *id)).count();
    assert_eq!(also.only_base, only);
    // The log-likelihood margins were logged: a paired shift with an interval around it.
    let (m, [lo, hi]) = (p.margin_shift.unwrap(), p.margin_shift_interval.unwrap());
    assert!(lo <= m && m <= hi && lo < hi);
    // 25 or more discordant documents and clusters: the cluster bootstrap decides.
    let expected = if only_base + only_qat >= 25 {
        "cluster bootstrap"
    } else {
        "exact"
    };
    assert_eq!(p.decided_by, expected);
    assert!(p.cluster_interval.is_some());
    let md = report.markdown();
    assert!(
        md.contains("| hif8lab_general_knowledge | acc_norm | 609 | 0 |"),
        "{md}"
    );
    assert!(report.csv().lines().count() == 2);
}

#[test]
fn runs_that_cannot_be_paired_are_refused_by_name() {
    // A changed document.
    let dir = copy("qat", "hash");
    let mut rows = samples(&dir);
    rows[7]["doc_hash"] = Value::String("0".repeat(64));
    write_samples(&dir, &rows);
    let e = compare(
        &[open(&fixture("base")), open(&dir)],
        &CompareOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("hif8lab_general_knowledge#7"), "{e}");
    assert!(e.to_string().contains("different documents"), "{e}");
    // Another document under another id (as many documents as the base).
    rows[7]["doc_hash"] = samples(&fixture("qat"))[7]["doc_hash"].clone();
    rows[3]["doc_id"] = Value::from(9999);
    write_samples(&dir, &rows);
    let e = compare(
        &[open(&fixture("base")), open(&dir)],
        &CompareOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("#3, "), "{e}");
    assert!(e.to_string().contains("#9999 in one run only"), "{e}");
    // A missing document: the log no longer holds what `n-samples` says was scored.
    rows.remove(3);
    write_samples(&dir, &rows);
    let e = compare(
        &[open(&fixture("base")), open(&dir)],
        &CompareOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("609 documents scored, but") && e.to_string().contains("logs 608"),
        "{e}"
    );
    // Another few-shot count.
    let dir = copy("qat", "shots");
    let results = file_in(&dir, "results_");
    let text = std::fs::read_to_string(&results).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    doc["n-shot"]["hif8lab_general_knowledge"] = Value::from(5);
    std::fs::write(&results, doc.to_string()).unwrap();
    let e = compare(
        &[open(&fixture("base")), open(&dir)],
        &CompareOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("n-shot.hif8lab_general_knowledge"),
        "{e}"
    );
    assert!(e.to_string().contains("0 vs 5"), "{e}");
    // Another task version.
    doc["n-shot"]["hif8lab_general_knowledge"] = Value::from(0);
    doc["versions"]["hif8lab_general_knowledge"] = Value::from(2.0);
    std::fs::write(&results, doc.to_string()).unwrap();
    let e = compare(
        &[open(&fixture("base")), open(&dir)],
        &CompareOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("versions.hif8lab_general_knowledge"),
        "{e}"
    );
}

#[test]
fn without_logs_the_comparison_is_unpaired_and_says_how_much_pairing_could_help() {
    let (b, q) = (copy("base", "unpaired-b"), copy("qat", "unpaired-q"));
    std::fs::remove_file(file_in(&b, "samples_")).unwrap();
    std::fs::remove_file(file_in(&q, "samples_")).unwrap();
    let report = compare(&[open(&b), open(&q)], &CompareOptions::default()).unwrap();
    let t = &report.comparisons[0].tasks[0];
    assert!(t.paired.is_none());
    let u = t.unpaired.as_ref().unwrap();
    assert_eq!((u.n_base, u.n_other), (609, 609));
    assert_eq!(u.k_base, (t.base * 609.0).round() as usize);
    // The narrowest paired interval is narrower than the unpaired one, and the real paired
    // interval (with the logs) lies between the two widths.
    let w = |i: [f64; 2]| i[1] - i[0];
    let paired = compare(
        &[open(&fixture("base")), open(&fixture("qat"))],
        &CompareOptions::default(),
    )
    .unwrap();
    let exact = paired.comparisons[0].tasks[0]
        .paired
        .as_ref()
        .unwrap()
        .exact_interval;
    assert!(
        w(u.best_paired_interval) < w(exact) && w(exact) < w(u.interval),
        "{u:?} {exact:?}"
    );
    assert!(report.markdown().contains("a paired test would be tighter"));
}

/// A results file with several tasks (no logs), as lm-eval writes one per run.
pub(crate) fn many_tasks(dir: &Path, scores: &[(&str, f64)]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut results = serde_json::Map::new();
    let mut n = serde_json::Map::new();
    for (task, s) in scores {
        results.insert(
            task.to_string(),
            serde_json::json!({ "acc,none": s, "acc_stderr,none": 0.01 }),
        );
        n.insert(
            task.to_string(),
            serde_json::json!({ "original": 2000, "effective": 2000 }),
        );
    }
    let doc = serde_json::json!({ "results": results, "n-samples": n, "model_name": dir.display().to_string() });
    std::fs::write(
        dir.join("results_2026-01-01T00-00-00.json"),
        doc.to_string(),
    )
    .unwrap();
}

#[test]
fn several_tasks_are_one_family_with_an_average() {
    let root = std::env::temp_dir().join(format!("hif8lab-evals-many-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    many_tasks(&root.join("base"), &[("a", 0.60), ("b", 0.50), ("c", 0.40)]);
    many_tasks(&root.join("same"), &[("a", 0.60), ("b", 0.50), ("c", 0.40)]);
    many_tasks(
        &root.join("worse"),
        &[("a", 0.40), ("b", 0.30), ("c", 0.20)],
    );
    let runs = [
        open(&root.join("base")),
        open(&root.join("same")),
        open(&root.join("worse")),
    ];
    let report = compare(&runs, &CompareOptions::default()).unwrap();
    assert_eq!(report.comparisons.len(), 2);
    let worse = &report.comparisons[1];
    assert_eq!(worse.tasks.len(), 3);
    // A third or more lost on every task: the average fails the 1 % claim, every task fails.
    assert!((worse.average_drop - (100.0 / 3.0 + 40.0 + 50.0) / 3.0).abs() < 1e-9);
    assert_eq!(worse.average.verdict.as_str(), "fails");
    assert!(
        worse
            .tasks
            .iter()
            .all(|t| t.claim.verdict.as_str() == "fails")
    );
    // 2,000 items per task cannot show equivalence within 1 %: identical scores are
    // inconclusive, never "holds".
    let same = &report.comparisons[0];
    assert!(
        same.tasks
            .iter()
            .all(|t| t.claim.verdict.as_str() == "inconclusive")
    );
    // Holm: every adjusted p-value is at least its claim's own.
    for t in &worse.tasks {
        assert!(t.claim.p_value.is_some());
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn damaged_folders_never_panic_and_name_the_file() {
    let mut rng = hif8lab_train::rng::Rng::new(17);
    let results = std::fs::read(file_in(&fixture("qat"), "results_")).unwrap();
    let mut sample_lines = Vec::new();
    for r in samples(&fixture("qat")).iter().take(20) {
        sample_lines.extend_from_slice(r.to_string().as_bytes());
        sample_lines.push(b'\n');
    }
    let dir = std::env::temp_dir().join(format!("hif8lab-evals-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let stamp = "2026-12-04T06-24-40.206381";
    for round in 0..400 {
        let mut r = results.clone();
        let mut s = sample_lines.clone();
        let target = if round % 2 == 0 { &mut r } else { &mut s };
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(target.len());
            match rng.below(3) {
                0 => target[i] = b"{}[]\",:0-e9nul"[rng.below(14)],
                1 => {
                    target.remove(i);
                }
                _ => target.insert(i, rng.below(256) as u8),
            }
        }
        std::fs::write(dir.join(format!("results_{stamp}.json")), &r).unwrap();
        std::fs::write(
            dir.join(format!("samples_hif8lab_general_knowledge_{stamp}.jsonl")),
            &s,
        )
        .unwrap();
        match EvalRun::open(&dir) {
            Ok(run) => {
                // Whatever was read compares without panicking.
                let _ = compare(&[open(&fixture("base")), run], &CompareOptions::default());
            }
            Err(e) => assert!(e.to_string().contains(&dir.display().to_string()), "{e}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A folder with a group of two subtasks (MMLU's layout) and a task logged under two filters
/// (GSM8K's), per-document logs included.
pub(crate) fn grouped(dir: &Path, right: &[bool]) {
    std::fs::create_dir_all(dir).unwrap();
    let stamp = "2026-01-01T00-00-00";
    let mut results = serde_json::Map::new();
    let mut n = serde_json::Map::new();
    for (task, lo) in [("mmlu_a", 0usize), ("mmlu_b", 40)] {
        let k = right[lo..lo + 40].iter().filter(|r| **r).count();
        results.insert(
            task.into(),
            serde_json::json!({ "acc,none": k as f64 / 40.0 }),
        );
        n.insert(
            task.into(),
            serde_json::json!({ "original": 40, "effective": 40 }),
        );
        let mut lines = String::new();
        for i in 0..40 {
            let v = f64::from(u8::from(right[lo + i]));
            lines.push_str(&format!(
                "{}\n",
                serde_json::json!({ "doc_id": i, "doc_hash": format!("{task}{i}"), "filter": "none", "metrics": ["acc"], "acc": v })
            ));
        }
        std::fs::write(dir.join(format!("samples_{task}_{stamp}.jsonl")), lines).unwrap();
    }
    let k = right.iter().filter(|r| **r).count() as f64 / 80.0;
    results.insert("mmlu".into(), serde_json::json!({ "acc,none": k }));
    // GSM8K-like: two filters, each document once per filter.
    let mut lines = String::new();
    for (i, r) in right.iter().enumerate().take(30) {
        for (filter, v) in [
            ("strict-match", 0.0),
            ("flexible-extract", f64::from(u8::from(*r))),
        ] {
            lines.push_str(&format!(
                "{}\n",
                serde_json::json!({ "doc_id": i, "filter": filter, "metrics": ["exact_match"], "exact_match": v })
            ));
        }
    }
    std::fs::write(dir.join(format!("samples_gsm_{stamp}.jsonl")), lines).unwrap();
    let flexible = right.iter().take(30).filter(|r| **r).count() as f64 / 30.0;
    results.insert(
        "gsm".into(),
        serde_json::json!({ "exact_match,strict-match": 0.0, "exact_match,flexible-extract": flexible }),
    );
    n.insert(
        "gsm".into(),
        serde_json::json!({ "original": 30, "effective": 30 }),
    );
    let doc = serde_json::json!({
        "results": results,
        "n-samples": n,
        "group_subtasks": { "mmlu": ["mmlu_a", "mmlu_b"] },
        "n-shot": { "mmlu_a": 5, "mmlu_b": 5, "gsm": 5 },
    });
    std::fs::write(dir.join(format!("results_{stamp}.json")), doc.to_string()).unwrap();
}

#[test]
fn groups_pool_their_subtasks_and_filters_are_kept_apart() {
    let root = std::env::temp_dir().join(format!("hif8lab-evals-group-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let base: Vec<bool> = (0..80).map(|i| i % 2 == 0).collect();
    let mut other = base.clone();
    for i in [0, 2, 4, 42] {
        other[i] = false; // four right answers lost, three in mmlu_a
    }
    other[1] = true; // one gained
    grouped(&root.join("b"), &base);
    grouped(&root.join("o"), &other);
    let options = CompareOptions {
        metrics: [(
            "gsm".to_string(),
            "exact_match,flexible-extract".to_string(),
        )]
        .into(),
        ..Default::default()
    };
    let report = compare(&[open(&root.join("b")), open(&root.join("o"))], &options).unwrap();
    let c = &report.comparisons[0];
    let names: Vec<&str> = c.tasks.iter().map(|t| t.task.as_str()).collect();
    assert_eq!(names, ["gsm", "mmlu"], "subtasks are not compared apart");
    let mmlu = &c.tasks[1];
    let p = mmlu.paired.as_ref().unwrap();
    assert_eq!((p.n, p.only_base, p.only_other), (80, 4, 1));
    assert_eq!(p.clusters, Some(2), "the subtasks are the clusters");
    assert_eq!(p.clusters_by.as_deref(), Some("subtask"));
    assert_eq!(mmlu.n_shot, Some(5));
    let gsm = &c.tasks[0];
    let p = gsm.paired.as_ref().unwrap();
    // flexible-extract's values, not strict-match's zeros.
    assert_eq!(p.n, 30);
    assert_eq!((p.only_base, p.only_other), (3, 1));
    assert_eq!(gsm.metric, "exact_match");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_folder_of_several_models_is_refused() {
    let root = std::env::temp_dir().join(format!("hif8lab-evals-two-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    many_tasks(&root.join("model-a"), &[("a", 0.5)]);
    many_tasks(&root.join("model-b"), &[("a", 0.4)]);
    let e = EvalRun::open(&root).unwrap_err();
    assert!(e.to_string().contains("more than one folder"), "{e}");
    // Naming one of them works.
    assert!(EvalRun::open(&root.join("model-a")).is_ok());
    let _ = std::fs::remove_dir_all(&root);
}
