//! `scripts/check-module-cycles.py` can fail: planted circles between sibling modules, by
//! `crate::` paths, by `super::` paths inside a folder and by a `super::{…}` group, each
//! refused with the folder named; an acyclic tree of the same files passes. (The script's run
//! on the real crates is a step of `scripts/check-deps.sh`.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/check-module-cycles.py")
}

/// A crates folder holding one crate `demo` with `files` (path under src, code).
fn crates_with(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("hif8lab-cycles-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (path, code) in files {
        let path = root.join("demo/src").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, code).unwrap();
    }
    root
}

fn check(root: &Path) -> (bool, String) {
    let o = Command::new("python3")
        .arg(script())
        .arg(root)
        .output()
        .expect("python3 runs the script");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(root);
    (o.status.success(), text)
}

const LIB: &str = "mod grid;\nmod io;\n";
const GRID: &str = "mod report;\nmod results;\nmod verdicts;\n";

#[test]
fn a_super_circle_inside_a_folder_is_refused() {
    let root = crates_with(
        "super",
        &[
            ("lib.rs", LIB),
            ("io.rs", "pub fn write() {}\n"),
            ("grid.rs", GRID),
            ("grid/report.rs", "use super::results::Row;\n"),
            (
                "grid/results.rs",
                "pub struct Row;\nuse super::verdicts::judge;\n",
            ),
            // A comment naming a module is no import; the group is.
            (
                "grid/verdicts.rs",
                "// super::io is not read\nuse super::{report, results::Row};\npub fn judge() {}\n",
            ),
        ],
    );
    let (ok, text) = check(&root);
    assert!(!ok, "{text}");
    assert!(text.contains("grid: report ↔ results ↔ verdicts"), "{text}");
}

#[test]
fn a_crate_circle_and_a_nested_super_super_path_are_refused() {
    let root = crates_with(
        "crate",
        &[
            ("lib.rs", LIB),
            ("io.rs", "use crate::grid::results::Row;\n"),
            ("grid.rs", GRID),
            ("grid/report.rs", "\n"),
            ("grid/results.rs", "pub struct Row;\n"),
            (
                "grid/verdicts/deep.rs",
                "use super::super::super::io::write;\n",
            ),
            ("grid/verdicts.rs", "mod deep;\n"),
        ],
    );
    let (ok, text) = check(&root);
    assert!(!ok, "{text}");
    assert!(text.contains("crate: grid ↔ io"), "{text}");
}

#[test]
fn the_same_files_without_a_circle_pass() {
    let root = crates_with(
        "none",
        &[
            ("lib.rs", LIB),
            ("io.rs", "pub fn write() {}\n"),
            ("grid.rs", GRID),
            (
                "grid/report.rs",
                "use super::results::Row;\nuse crate::io::write;\n",
            ),
            (
                "grid/results.rs",
                "pub struct Row;\nuse super::verdicts::judge;\n",
            ),
            ("grid/verdicts.rs", "pub fn judge() {}\nuse super::*;\n"),
        ],
    );
    let (ok, text) = check(&root);
    assert!(ok, "{text}");
    assert!(
        text.contains("demo:") && text.contains("0 import cycles"),
        "{text}"
    );
}
