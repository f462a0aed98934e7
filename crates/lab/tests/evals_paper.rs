//! The report on the paper's own numbers is rebuilt from its committed extract byte for byte,
//! and its verdicts follow from the extract (not from text written by hand).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::PathBuf;

use hif8lab_lab::evals::paper::paper_report;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/paper")
}

#[test]
fn the_paper_report_rebuilds_byte_for_byte() {
    let built = paper_report(&dir().join("extract")).expect("the extract reads");
    let committed = std::fs::read_to_string(dir().join("results.md")).expect("results.md");
    if built != committed {
        let line = built
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(built.lines().count().min(committed.lines().count()));
        panic!(
            "docs/results/paper/results.md differs from its rebuild at line {}:\n  built:     {:?}\n  committed: {:?}\n(rebuild: hif8lab judge-paper docs/results/paper/extract --out docs/results/paper/results.md)",
            line + 1,
            built.lines().nth(line),
            committed.lines().nth(line)
        );
    }
}

#[test]
fn the_extract_holds_every_step_and_summary() {
    let built = paper_report(&dir().join("extract")).unwrap();
    // 10,000 steps of each log, 500 of warmup (quant=OFF in both), 12 summary tables.
    assert!(
        built.contains("10000 steps in common, 0 in one log only"),
        "steps"
    );
    assert!(built.contains("Warmup: steps 1–500"), "warmup");
    assert_eq!(built.matches("\n### summary_").count(), 12);
    // The recomputed averages equal the printed ones (counts of n reproduce every drop).
    assert!(built.contains("Average relative drop 4.8916 % (the summary prints 4.8916 %)"));
    assert!(built.contains("there is none: every cell is a whole count"));
}

#[test]
fn a_damaged_extract_is_refused_naming_the_file() {
    let tmp = std::env::temp_dir().join(format!("hif8lab-paper-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(tmp.join("summaries")).unwrap();
    let src = dir().join("extract");
    for sub in ["", "summaries"] {
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::copy(&p, tmp.join(sub).join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    paper_report(&tmp).expect("the whole extract reads");
    std::fs::write(tmp.join("train_max_quant_lr1e5.csv.gz"), b"not gzip").unwrap();
    let e = paper_report(&tmp).unwrap_err();
    assert!(
        e.to_string().contains("train_max_quant_lr1e5.csv.gz") && e.to_string().contains("SHA-256"),
        "{e}"
    );
    // A summary missing: named.
    let first = std::fs::read_dir(tmp.join("summaries"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .min()
        .unwrap();
    std::fs::copy(
        src.join("train_max_quant_lr1e5.csv.gz"),
        tmp.join("train_max_quant_lr1e5.csv.gz"),
    )
    .unwrap();
    std::fs::remove_file(&first).unwrap();
    let e = paper_report(&tmp).unwrap_err();
    let name = first.file_name().unwrap().to_string_lossy().into_owned();
    assert!(e.to_string().contains(&name), "{e}");
    let _ = std::fs::remove_dir_all(&tmp);
}
