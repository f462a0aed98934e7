//! The studies and reports checked against their committed data, in one test binary: each
//! module is one of the files beside this one (whose paths the pre-registrations and reports
//! cite, so they stay where they are). One binary links once instead of ten times
//! (docs/benchmarks.md, "Test binaries"). The crate's other test binaries, which train, are
//! listed in its Cargo.toml; [`every_test_file_runs`] fails when a file in `tests/` is in
//! neither place (it would never run: the crate sets `autotests = false`).

mod claim5_fresh;
mod claim5_power;
mod errata;
mod evals_compare;
mod evals_consistency;
mod evals_paper;
mod perturb_study;
mod placebo;
mod prereg;
mod stats_reference;

/// The modules above.
const MODULES: [&str; 10] = [
    "claim5_fresh",
    "claim5_power",
    "errata",
    "evals_compare",
    "evals_consistency",
    "evals_paper",
    "perturb_study",
    "placebo",
    "prereg",
    "stats_reference",
];

#[test]
fn every_test_file_runs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let files = std::fs::read_dir(root.join("tests")).expect("tests/");
    for entry in files.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        let own_binary = manifest.contains(&format!("path = \"tests/{name}\""));
        assert!(
            MODULES.contains(&stem) || own_binary,
            "tests/{name} is neither a module of tests/studies.rs nor a [[test]] of Cargo.toml: it would never run"
        );
    }
}
