//! `compare-evals` judges only data that tells one story: the results file and the logged
//! documents agree (score, count, a finite mark per document), both runs prompted alike and
//! scored the same part of each task, and groups are read as lm-eval writes them (nested,
//! or a group against its subtasks run ungrouped) — never cyclic, never pooled over part of
//! themselves. Each case fails without its check.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::{Path, PathBuf};

use hif8lab_lab::evals::compare::{CompareOptions, compare};
use hif8lab_lab::evals::lm_eval::EvalRun;
use serde_json::Value;

use super::evals_compare::{copy, file_in, fixture, grouped, open, samples, write_samples};

fn refused(base: &Path, other: &Path) -> String {
    compare(&[open(base), open(other)], &CompareOptions::default())
        .unwrap_err()
        .to_string()
}

fn edit_results(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let results = file_in(dir, "results_");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    edit(&mut doc);
    std::fs::write(&results, doc.to_string()).unwrap();
}

const TASK: &str = "hif8lab_general_knowledge";

#[test]
fn results_and_logs_that_disagree_are_refused() {
    // The results file reports another score than its logged documents give.
    let dir = copy("qat", "disagree");
    edit_results(&dir, |d| {
        d["results"][TASK]["acc_norm,none"] = Value::from(0.75)
    });
    let e = refused(&fixture("base"), &dir);
    assert!(e.contains(&format!("results.{TASK}.acc_norm,none")), "{e}");
    assert!(e.contains("the results and the log disagree"), "{e}");
    // More documents scored than the task holds (a log one short of its count is refused
    // in evals_compare).
    let dir = copy("qat", "count");
    edit_results(&dir, |d| {
        d["n-samples"][TASK]["effective"] = Value::from(700)
    });
    let e = EvalRun::open(&dir).unwrap_err().to_string();
    assert!(e.contains(&format!("n-samples.{TASK}.effective")), "{e}");
    assert!(e.contains("700 documents scored of a task of 609"), "{e}");
    // One document's mark is "nan": refused by its id, not turned into an unpaired test.
    let dir = copy("qat", "nan");
    let mut rows = samples(&dir);
    rows[5]["acc_norm"] = Value::from("nan");
    write_samples(&dir, &rows);
    let e = refused(&fixture("base"), &dir);
    let id = rows[5]["doc_id"].as_u64().unwrap();
    assert!(e.contains(&format!("doc_id {id}: acc_norm")), "{e}");
    assert!(e.contains("no finite acc_norm"), "{e}");
    // An empty log.
    write_samples(&dir, &[]);
    let e = refused(&fixture("base"), &dir);
    assert!(e.contains("holds no document for the filter none"), "{e}");
}

#[test]
fn other_prompts_are_not_a_pair() {
    let dir = copy("qat", "prompts");
    let mut rows = samples(&dir);
    // The fixture's runs prompted every document alike.
    let base = samples(&fixture("base"));
    assert!(
        rows.iter()
            .zip(&base)
            .all(|(a, b)| a["prompt_hash"] == b["prompt_hash"])
    );
    for (i, r) in rows.iter_mut().enumerate() {
        r["prompt_hash"] = Value::from(format!("{i:064x}"));
    }
    write_samples(&dir, &rows);
    let e = refused(&fixture("base"), &dir);
    assert!(e.contains("prompt_hash"), "{e}");
    assert!(e.contains("609 of 609 documents differently"), "{e}");
}

/// A copy of `arm` that scored the first `n` documents only (`lm_eval --limit n`).
fn limited(arm: &str, n: usize) -> PathBuf {
    let dir = copy(arm, &format!("limit-{n}"));
    let rows: Vec<Value> = samples(&dir).into_iter().take(n).collect();
    let mean = |m: &str| rows.iter().map(|r| r[m].as_f64().unwrap()).sum::<f64>() / n as f64;
    let (acc, norm) = (mean("acc"), mean("acc_norm"));
    write_samples(&dir, &rows);
    edit_results(&dir, |d| {
        d["n-samples"][TASK]["effective"] = Value::from(n);
        d["results"][TASK]["acc,none"] = Value::from(acc);
        d["results"][TASK]["acc_norm,none"] = Value::from(norm);
    });
    dir
}

#[test]
fn a_limited_run_is_compared_only_with_the_same_limit() {
    let part = limited("qat", 100);
    let e = refused(&fixture("base"), &part);
    assert!(e.contains(&format!("n-samples.{TASK}.effective")), "{e}");
    assert!(
        e.contains("609 documents") && e.contains("100 of 609 (lm_eval --limit)"),
        "{e}"
    );
    // Unpaired too (no logs to show the documents differ).
    let (b, q) = (copy("base", "limit-unpaired-b"), part.clone());
    std::fs::remove_file(file_in(&b, "samples_")).unwrap();
    std::fs::remove_file(file_in(&q, "samples_")).unwrap();
    let e = refused(&b, &q);
    assert!(e.contains("lm_eval --limit"), "{e}");
    // The same limit in both runs: the same documents, compared and said.
    let base = limited("base", 100);
    let report = compare(&[open(&base), open(&part)], &CompareOptions::default()).unwrap();
    let t = &report.comparisons[0].tasks[0];
    assert_eq!((t.n, t.n_original), (100, Some(609)));
    assert_eq!(t.paired.as_ref().unwrap().n, 100);
    assert!(report.markdown().contains("100 of 609 (--limit)"));
}

/// `grouped`'s folder rewritten: its `group_subtasks` replaced (`None`: removed, with the
/// group's own results line).
fn regroup(dir: &Path, groups: Option<Value>, extra_results: &[&str]) {
    edit_results(dir, |d| {
        let obj = d.as_object_mut().unwrap();
        match groups {
            Some(g) => {
                obj.insert("group_subtasks".into(), g);
            }
            None => {
                obj.remove("group_subtasks");
                d["results"].as_object_mut().unwrap().remove("mmlu");
            }
        }
        for r in extra_results {
            d["results"][*r] = serde_json::json!({ "acc,none": 0.5 });
        }
    });
}

fn scratch(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("hif8lab-evals-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    root
}

#[test]
fn a_group_meets_its_subtasks_run_ungrouped_and_nested_groups_pool_their_leaves() {
    let root = scratch("ungrouped");
    let base: Vec<bool> = (0..80).map(|i| i % 2 == 0).collect();
    let mut other = base.clone();
    for i in [0, 2, 4, 42] {
        other[i] = false;
    }
    grouped(&root.join("b"), &base);
    grouped(&root.join("u"), &other);
    regroup(&root.join("u"), None, &[]);
    let options = CompareOptions::default();
    for (first, second) in [("b", "u"), ("u", "b")] {
        let report = compare(
            &[open(&root.join(first)), open(&root.join(second))],
            &options,
        )
        .unwrap();
        let c = &report.comparisons[0];
        let mmlu = c.tasks.iter().find(|t| t.task == "mmlu").unwrap();
        let p = mmlu.paired.as_ref().unwrap();
        assert_eq!(p.n, 80, "{first} vs {second}: the group's leaves pooled");
        assert_eq!(p.only_base + p.only_other, 4);
        assert_eq!(p.clusters_by.as_deref(), Some("subtask"));
        assert!(
            !c.tasks.iter().any(|t| t.task.starts_with("mmlu_")),
            "subtasks are not compared apart"
        );
        assert!(c.missing.is_empty(), "{:?}", c.missing);
    }
    // Without logs, the group's score is its leaves' pooled proportion in both runs.
    for d in ["b", "u"] {
        for f in std::fs::read_dir(root.join(d)).unwrap().flatten() {
            if f.file_name().to_string_lossy().starts_with("samples_") {
                std::fs::remove_file(f.path()).unwrap();
            }
        }
    }
    let report = compare(&[open(&root.join("b")), open(&root.join("u"))], &options).unwrap();
    let mmlu = report.comparisons[0]
        .tasks
        .iter()
        .find(|t| t.task == "mmlu")
        .unwrap();
    let u = mmlu.unpaired.as_ref().unwrap();
    assert_eq!((u.n_base, u.k_base, u.n_other, u.k_other), (80, 40, 80, 36));
    // Nested groups (lm-eval's MMLU: mmlu → mmlu_stem → subjects): the leaves, paired.
    let root = scratch("nested");
    grouped(&root.join("b"), &base);
    grouped(&root.join("o"), &other);
    for d in ["b", "o"] {
        regroup(
            &root.join(d),
            Some(serde_json::json!({ "mmlu": ["mmlu_s"], "mmlu_s": ["mmlu_a", "mmlu_b"] })),
            &["mmlu_s"],
        );
    }
    let report = compare(&[open(&root.join("b")), open(&root.join("o"))], &options).unwrap();
    let c = &report.comparisons[0];
    let names: Vec<&str> = c.tasks.iter().map(|t| t.task.as_str()).collect();
    assert_eq!(names, ["gsm", "mmlu"]);
    assert_eq!(c.tasks[1].paired.as_ref().unwrap().n, 80);
    assert_eq!(c.tasks[1].paired.as_ref().unwrap().clusters, Some(2));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn cyclic_groups_partial_groups_and_runs_with_nothing_in_common_are_refused() {
    let root = scratch("cycles");
    let right: Vec<bool> = (0..80).map(|i| i % 3 == 0).collect();
    for (tag, groups, says) in [
        (
            "self",
            serde_json::json!({ "mmlu": ["mmlu_a", "mmlu"] }),
            "mmlu → mmlu",
        ),
        (
            "two",
            serde_json::json!({ "mmlu": ["mmlu_a", "mmlu_x"], "mmlu_x": ["mmlu_b", "mmlu"] }),
            "mmlu → mmlu_x → mmlu",
        ),
    ] {
        let dir = root.join(tag);
        grouped(&dir, &right);
        regroup(&dir, Some(groups), &["mmlu_x"]);
        let e = EvalRun::open(&dir).unwrap_err().to_string();
        assert!(
            e.contains("group_subtasks") && e.contains("cycle"),
            "{tag}: {e}"
        );
        assert!(e.contains(says), "{tag}: {e}");
    }
    // A group that is no list of names.
    let dir = root.join("text");
    grouped(&dir, &right);
    regroup(&dir, Some(serde_json::json!({ "mmlu": "mmlu_a" })), &[]);
    let e = EvalRun::open(&dir).unwrap_err().to_string();
    assert!(
        e.contains("group_subtasks.mmlu: not a list of task names"),
        "{e}"
    );
    // A group listing a subtask the results do not report.
    let dir = root.join("absent");
    grouped(&dir, &right);
    regroup(
        &dir,
        Some(serde_json::json!({ "mmlu": ["mmlu_a", "mmlu_zz"] })),
        &[],
    );
    let e = EvalRun::open(&dir).unwrap_err().to_string();
    assert!(
        e.contains("group_subtasks.mmlu") && e.contains("mmlu_zz"),
        "{e}"
    );
    // The same group over other subtasks.
    let (b, o) = (root.join("b"), root.join("o"));
    grouped(&b, &right);
    grouped(&o, &right);
    regroup(&o, Some(serde_json::json!({ "mmlu": ["mmlu_a"] })), &[]);
    let e = refused(&b, &o);
    assert!(
        e.contains("group_subtasks.mmlu") && e.contains("mmlu_b in one run only"),
        "{e}"
    );
    // No task in common.
    let x = root.join("x");
    super::evals_compare::many_tasks(&x, &[("arc", 0.5)]);
    let e = refused(&b, &x);
    assert!(e.contains("no task in common"), "{e}");
    // A run that scored no document (counts only).
    let z = root.join("z");
    super::evals_compare::many_tasks(&z, &[("arc", 0.5)]);
    edit_results(&x, |d| d["n-samples"]["arc"]["effective"] = Value::from(0));
    edit_results(&x, |d| d["n-samples"]["arc"]["original"] = Value::from(0));
    edit_results(&z, |d| d["n-samples"]["arc"]["original"] = Value::from(0));
    edit_results(&z, |d| d["n-samples"]["arc"]["effective"] = Value::from(0));
    let e = refused(&z, &x);
    assert!(e.contains("scored 0 documents"), "{e}");
    let _ = std::fs::remove_dir_all(&root);
}
