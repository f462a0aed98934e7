//! Pre-registration is checked, not claimed: the dose study's pre-registration is unchanged
//! since the commit the analysis names, and, once the study's data are committed, that commit
//! is an ancestor of the data's and the report names it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::{Path, PathBuf};
use std::process::Command;

use hif8lab_lab::grid::dose::{PREREG, PREREG_COMMIT};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn git(args: &[&str]) -> Option<std::process::Output> {
    Command::new("git")
        .arg("-C")
        .arg(root())
        .args(args)
        .output()
        .ok()
}

fn in_git() -> bool {
    git(&["rev-parse", "--git-dir"]).is_some_and(|o| o.status.success())
}

#[test]
fn the_preregistration_is_unchanged_since_its_commit() {
    if !in_git() {
        eprintln!("not a git checkout: the pre-registration's history cannot be checked here");
        return;
    }
    let then = git(&["show", &format!("{PREREG_COMMIT}:{PREREG}")]).unwrap();
    let shallow = git(&["rev-parse", "--is-shallow-repository"])
        .is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "true");
    if !then.status.success() && shallow {
        eprintln!(
            "a shallow clone lacks {PREREG_COMMIT}: the pre-registration's history is checked in full clones"
        );
        return;
    }
    assert!(
        then.status.success(),
        "{PREREG} is not in commit {PREREG_COMMIT} (a shallow clone? fetch the history): {}",
        String::from_utf8_lossy(&then.stderr)
    );
    let now = std::fs::read(root().join(PREREG)).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&then.stdout),
        String::from_utf8_lossy(&now),
        "{PREREG} was edited after {PREREG_COMMIT}: a deviation goes into the study's report, never into its pre-registration"
    );
}

#[test]
fn the_study_data_come_after_the_preregistration() {
    let data = Path::new("docs/results/real-smollm2-dose/runs.jsonl.gz");
    if !root().join(data).exists() {
        // The study has not run yet: nothing to check beyond the file above.
        return;
    }
    assert!(in_git(), "committed study data need the history to check");
    let log = git(&["log", "--format=%H", "-1", "--", data.to_str().unwrap()]).unwrap();
    let data_commit = String::from_utf8_lossy(&log.stdout).trim().to_string();
    assert!(
        !data_commit.is_empty(),
        "{} is not committed",
        data.display()
    );
    let known = git(&["cat-file", "-e", &format!("{PREREG_COMMIT}^{{commit}}")])
        .is_some_and(|o| o.status.success());
    let shallow = git(&["rev-parse", "--is-shallow-repository"])
        .is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "true");
    if !known && shallow {
        eprintln!(
            "a shallow clone lacks {PREREG_COMMIT}: the data's descent is checked in full clones"
        );
        return;
    }
    let ancestor = git(&["merge-base", "--is-ancestor", PREREG_COMMIT, &data_commit]).unwrap();
    assert!(
        ancestor.status.success(),
        "the pre-registration {PREREG_COMMIT} is not an ancestor of the data's commit {data_commit}"
    );
    let report =
        std::fs::read_to_string(root().join("docs/results/real-smollm2-dose/results.md")).unwrap();
    assert!(report.contains(PREREG_COMMIT) && report.contains(PREREG));
}
