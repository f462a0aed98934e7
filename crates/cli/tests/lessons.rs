//! Every lesson's claims hold when its scenario runs (`hif8lab lesson run NAME --json`), each
//! in its own fresh folder (pretraining included) and within the 2-minute budget; an unknown
//! lesson is bad input.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::process::Command;

fn lesson(name: &str) -> serde_json::Value {
    let out = std::env::temp_dir().join(format!("hif8lab-lesson-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args([
            "lesson",
            "run",
            name,
            "--json",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(v["lesson"], name);
    let claims = v["claims"].as_array().unwrap();
    assert!(!claims.is_empty());
    for c in claims {
        assert!(c["claim"].as_str().is_some_and(|s| !s.is_empty()));
        assert_eq!(c["holds"], true, "claim failed: {c}");
        assert!(!c["evidence"].is_null());
    }
    assert!(
        o.status.success(),
        "exit {:?} though every claim holds",
        o.status
    );
    assert!(v["summary"].as_str().is_some_and(|s| s.len() > 20));
    let seconds = v["seconds"].as_f64().unwrap();
    assert!(seconds > 0.0, "{seconds}");
    v
}

#[test]
fn saturation_lesson_claims_hold() {
    let v = lesson("saturation");
    let e = &v["claims"][0]["evidence"];
    // The numbers the summary quotes are the evidence's.
    let mr = e["most_recent_calls_above_est"].as_u64().unwrap();
    assert!(v["summary"].as_str().unwrap().contains(&mr.to_string()));
}

#[test]
fn forgetting_lesson_claims_hold() {
    lesson("forgetting");
}

#[test]
fn fixes_lesson_claims_hold() {
    let v = lesson("fixes");
    assert_eq!(v["claims"].as_array().unwrap().len(), 4);
}

#[test]
fn sandbox_lesson_claims_hold() {
    lesson("sandbox");
}

#[test]
fn unknown_lesson_is_bad_input() {
    let o = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args(["lesson", "run", "nope"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no lesson 'nope'") && err.contains("saturation"),
        "{err}"
    );
}
