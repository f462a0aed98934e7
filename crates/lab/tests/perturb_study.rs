//! The committed perturb-then-train study's report follows from its data: rebuilt from
//! `docs/results/real-smollm2-perturb/runs.jsonl.gz` and the dose study's data, byte for byte.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::PathBuf;

use hif8lab_lab::grid::{DATA_FILE, GridData};
use hif8lab_lab::perturb_study::{self, StudyData};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_committed_study_s_report_follows_from_its_data() {
    let dir = root().join("docs/results/real-smollm2-perturb");
    let dose = GridData::read(
        &root()
            .join("docs/results/real-smollm2-dose")
            .join(DATA_FILE),
    )
    .expect("the dose study's data are committed");
    let data = StudyData::read(&dir.join(perturb_study::DATA_FILE))
        .expect("the perturb study's data are committed");
    let study = perturb_study::analyse(&dose, &data).unwrap();
    let committed = std::fs::read_to_string(dir.join("results.md")).unwrap();
    assert_eq!(study.markdown(), committed);
    // As registered: orders 0-3, probes at 160, 320 and 480 steps, the damage hif8:1024.
    assert_eq!(study.orders, vec![0, 1, 2, 3]);
    assert_eq!(study.doses, vec![160, 320, 480]);
    assert!(study.damage.contains("hif8:1024"), "{}", study.damage);
}
