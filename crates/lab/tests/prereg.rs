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

const STUDIES: [Study; 5] = [
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
    // Registered before its code and runs: until its data exist only the file is checked.
    Study {
        prereg: "docs/results/prereg/real-smollm2-perturb.md",
        commit: "d493d4b70e776798ab8b18e4018161889b44ca3a",
        data: "docs/results/real-smollm2-perturb/runs.jsonl.gz",
        names_it: "docs/results/real-smollm2-perturb/results.md",
    },
    Study {
        prereg: "docs/results/prereg/real-smollm2-claim5-fresh.md",
        commit: "b59a5397060fa0e1fbc5fd42a333b83eef15add8",
        data: "docs/results/real-smollm2-claim5-fresh/runs.jsonl.gz",
        names_it: "docs/results/real-smollm2-claim5-fresh/README.md",
    },
    // The overhead bench of `hif8lab.torch` (python/hif8lab/torch/bench.py): one decisive run.
    Study {
        prereg: "docs/results/prereg/torch-bench-overhead.md",
        commit: "9b9a084664c41e974a6fb2cbb94a9da2e4ae4f0c",
        data: "docs/results/torch-bench-overhead/result.json",
        names_it: "docs/results/torch-bench-overhead/README.md",
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

/// What each pre-registration registers (endpoints, thresholds, units, tests and levels), as
/// (the words of the pre-registration that register it, the words the study's report must
/// say it with). The first must be in the pre-registration — the list follows the file — and
/// the second in the report's files (its generated text, its errata, its README): an element
/// the report drops, or a deviation it does not list, fails here.
/// (the pre-registration, the report's files, its registered elements).
type Registered = (
    &'static str,
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
);

const REGISTERED: [Registered; 4] = [
    (
        PREREG,
        &[
            "docs/results/real-smollm2-dose/results.md",
            "docs/results/real-smollm2-dose/errata.md",
        ],
        &[
            ("`knowledge_margin`", "mean knowledge margin"),
            ("**δ₂ = 0.0183** nats per byte", "δ₂ = 0.0183 nats/byte"),
            ("**δ₀.₄ = 0.0025**", "TOST at ±δ₀.₄ = 0.0025"),
            ("paired t over the 4 orders", "paired t over data orders"),
            ("two-sided 95 % interval of mean d", "95 % t interval"),
            ("TOST against ±δ₂", "two one-sided tests"),
            (
                "**holds** when the 90 % t interval",
                "TOST on the **90 %** interval",
            ),
            (
                "the held-out loss (most_recent − max_window) per order",
                "Held-out loss at the last dose, most_recent − max_window",
            ),
            ("the slope of d over the three doses", "slope of d"),
            (
                "the completion margin's contrast",
                "completion-margin contrast",
            ),
            ("descriptive only", "descriptive"),
            (
                "c_o = mean margin(max_window-low at 160 steps)",
                "Positive control (c = max_window − control",
            ),
            (
                "\"unanswerable by this probe\"",
                "unanswerable by this probe",
            ),
            (
                "max_window-low in orders {0, 1} against orders {2, 3}",
                "Placebo (max_window in orders 0, 1 minus 2, 3)",
            ),
            ("Holm at α = 0.05", "Holm over the three"),
            ("orders 4–7 are added", "Rule for adding orders"),
            (
                "`grid --plan` prints, for each claim, the best-case",
                "Reachability",
            ),
            (
                "Deviations, if any, are listed in the report",
                "Deviations from the pre-registration",
            ),
        ],
    ),
    (
        "docs/results/prereg/real-smollm2-claim5.md",
        &[
            "docs/results/real-smollm2-claim5/results.md",
            "docs/results/real-smollm2-claim5/README.md",
        ],
        &[
            (
                "knowledge acc_norm and completion acc_norm",
                "completion acc_norm drop",
            ),
            ("each within ±2 %", "±2 %"),
            ("the 90 % interval", "90 % interval (TOST)"),
            ("fewer than 25 items differ", "exact paired interval"),
            ("APE of its loss", "APE of the loss"),
            ("below 1 % (t across the 2 orders)", "t over 2 orders"),
            ("tested alone at α = 0.05", "judged alone at α = 0.05"),
            ("best case ±0.88 %", "±0.88 %"),
            ("**Determinism check**", "**Determinism check**"),
            ("on the first 108 items alone", "on the first 108 items"),
            ("and on the 189 new ones", "on the 189 new items"),
        ],
    ),
    (
        "docs/results/prereg/real-smollm2-claim5-fresh.md",
        &[
            "docs/results/real-smollm2-claim5-fresh/results.md",
            "docs/results/real-smollm2-claim5-fresh/README.md",
        ],
        &[
            ("**6 fresh data orders, 2–7**", "Data orders 2–7"),
            (
                "within ±2 % (two one-sided tests: the 90 % interval)",
                "90 % interval (TOST)",
            ),
            (
                "the 95 % t interval over the 6 orders, df 5",
                "t over 6 orders, df 5",
            ),
            (
                "tested alone at α = 0.05",
                "judged on orders 2–7 alone at α = 0.05",
            ),
            ("the first look is not pooled in", "Data orders 2–7"),
            ("divided by the design effect", "design effect 1.40"),
            ("**Power**, computed before the runs", "registered power"),
            (
                "the completion part on the first 108 items (the old set)",
                "first 108 items:",
            ),
            ("and on the 189 new ones", "189 new items:"),
            (
                "the knowledge and completion margins' contrasts with their intervals over orders",
                "Margin contrasts over orders",
            ),
            ("the design effect of each accuracy part", "knowledge 1.67"),
            (
                "the number of items discordant in more than one order",
                "in more than one",
            ),
            (
                "Deviations, if any, are listed in that README",
                "Deviations from the pre-registration",
            ),
        ],
    ),
    (
        "docs/results/prereg/real-smollm2-perturb.md",
        &[
            "docs/results/real-smollm2-perturb/results.md",
            "docs/results/real-smollm2-perturb/README.md",
        ],
        &[
            ("`hif8:1024`", "damaged before any run by hif8:1024"),
            ("**δ₂′ = 0.0091** nats per byte", "δ₂′ = 0.0091"),
            (
                "c_o = margin(U, order o) − margin(P, order o) at 480 steps",
                "undamaged − damaged base, at 480 steps",
            ),
            (
                "s_o = margin(U, o) − margin(S, o) at 480 steps",
                "mean knowledge margin, U − S, at 480 steps",
            ),
            (
                "two-sided 95 % t interval of mean c_o over the 4 orders (df 3)",
                "(df 3)",
            ),
            (
                "it must not be significant at α = 0.05 (the interval covers 0)",
                "Sham placebo",
            ),
            ("the same contrasts at 160 and 320 steps", "At 160 steps"),
            ("knowledge acc_norm", "Mean knowledge acc_norm over orders"),
            (
                "the completion margin; the held-out loss per arm",
                "Mean held-out loss over orders",
            ),
            (
                "the control contrast at matched held-out loss",
                "Control at matched held-out loss",
            ),
            (
                "judged only if claim 1 holds and the manipulation check finds the arms differ",
                "aturation costs knowledge at 480 steps",
            ),
            (
                "Equivalence (TOST on the 90 % interval against ±δ₂′) reported beside it under the same condition",
                "TOST on the 90 % interval against ±δ₂′",
            ),
            (
                "claims 1 and 3 are one family, Holm at α = 0.05",
                "p (Holm)",
            ),
            (
                "the report states whether a rerun of order 0 by the build that runs `P` reproduces its losses",
                "Reproducibility",
            ),
            (
                "Deviations, if any, are listed in the report",
                "Deviations from the pre-registration",
            ),
        ],
    ),
];

#[test]
fn each_report_says_what_its_preregistration_registered() {
    let flat = |t: String| t.split_whitespace().collect::<Vec<_>>().join(" ");
    for (prereg, report, elements) in REGISTERED {
        let registered = flat(std::fs::read_to_string(root().join(prereg)).unwrap());
        let said = flat(
            report
                .iter()
                .map(|f| std::fs::read_to_string(root().join(f)).unwrap())
                .collect::<Vec<_>>()
                .join("\n"),
        );
        let missing: Vec<String> = elements
            .iter()
            .filter_map(|(reg, says)| {
                assert!(
                    registered.contains(&flat((*reg).to_owned())),
                    "{prereg} does not say `{reg}`: the list of its registered elements is out of date"
                );
                (!said.contains(&flat((*says).to_owned())))
                    .then(|| format!("`{reg}` (the report should say `{says}`)"))
            })
            .collect();
        assert!(
            missing.is_empty(),
            "{} do not report what {prereg} registered, nor list it as a deviation: {}",
            report.join(" and "),
            missing.join("; ")
        );
    }
}
