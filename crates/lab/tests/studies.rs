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
    hif8lab_tests::assert_every_test_file_runs(env!("CARGO_MANIFEST_DIR"), &MODULES, "studies");
}
