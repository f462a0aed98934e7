//! Pre-registration is checked, not claimed: each study's pre-registration is unchanged since
//! the commit its report names, and, once the study's data are committed, that commit is an
//! ancestor of the data's and the report names it.

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

/// A pre-registered study: its pre-registration file, the commit that added it, its data and
/// the file of its folder that names both.
struct Study {
    prereg: &'static str,
    commit: &'static str,
    data: &'static str,
    names_it: &'static str,
}

const STUDIES: [Study; 2] = [
    Study {
        prereg: PREREG,
        commit: PREREG_COMMIT,
        data: "docs/results/real-smollm2-dose/runs.jsonl.gz",
        names_it: "docs/results/real-smollm2-dose/results.md",
    },
    Study {
        prereg: "docs/results/prereg/real-smollm2-claim5.md",
        commit: "aeab23dcd8a001892fb790212deec085853f2999",
        data: "docs/results/real-smollm2-claim5/runs.jsonl.gz",
        names_it: "docs/results/real-smollm2-claim5/README.md",
    },
];

fn shallow() -> bool {
    git(&["rev-parse", "--is-shallow-repository"])
        .is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "true")
}

#[test]
fn each_preregistration_is_unchanged_since_its_commit() {
    if !in_git() {
        eprintln!("not a git checkout: the pre-registrations' history cannot be checked here");
        return;
    }
    for s in &STUDIES {
        let then = git(&["show", &format!("{}:{}", s.commit, s.prereg)]).unwrap();
        if !then.status.success() && shallow() {
            eprintln!(
                "a shallow clone lacks {}: the pre-registration's history is checked in full clones",
                s.commit
            );
            continue;
        }
        assert!(
            then.status.success(),
            "{} is not in commit {} (a shallow clone? fetch the history): {}",
            s.prereg,
            s.commit,
            String::from_utf8_lossy(&then.stderr)
        );
        let now = std::fs::read(root().join(s.prereg)).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&then.stdout),
            String::from_utf8_lossy(&now),
            "{} was edited after {}: a deviation goes into the study's report, never into its pre-registration",
            s.prereg,
            s.commit
        );
        // The commit added the file: it was not there before.
        let before = git(&["cat-file", "-e", &format!("{}^:{}", s.commit, s.prereg)]).unwrap();
        assert!(
            !before.status.success(),
            "{} existed before {}: the commit named is not the one that added it",
            s.prereg,
            s.commit
        );
    }
}

#[test]
fn each_study_s_data_come_after_its_preregistration() {
    for s in &STUDIES {
        let data = Path::new(s.data);
        if !root().join(data).exists() {
            // The study has not run yet: nothing to check beyond its file.
            continue;
        }
        assert!(in_git(), "committed study data need the history to check");
        let log = git(&["log", "--format=%H", "-1", "--", s.data]).unwrap();
        let data_commit = String::from_utf8_lossy(&log.stdout).trim().to_string();
        assert!(
            !data_commit.is_empty(),
            "{} is not committed",
            data.display()
        );
        let known = git(&["cat-file", "-e", &format!("{}^{{commit}}", s.commit)])
            .is_some_and(|o| o.status.success());
        if !known && shallow() {
            eprintln!(
                "a shallow clone lacks {}: the data's descent is checked in full clones",
                s.commit
            );
            continue;
        }
        let ancestor = git(&["merge-base", "--is-ancestor", s.commit, &data_commit]).unwrap();
        assert!(
            ancestor.status.success(),
            "the pre-registration {} is not an ancestor of the data's commit {data_commit}",
            s.commit
        );
        assert_ne!(
            s.commit, data_commit,
            "{}: the data were committed with their pre-registration",
            s.data
        );
        let names = std::fs::read_to_string(root().join(s.names_it)).unwrap();
        assert!(
            names.contains(s.commit) && names.contains(s.prereg),
            "{} does not name {} and {}",
            s.names_it,
            s.prereg,
            s.commit
        );
    }
}
