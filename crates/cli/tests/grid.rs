//! The micro grid end to end: every run folder, results.csv and results.md exist, parse and
//! hold sane numbers; a re-run skips what is finished.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::process::Command;

#[test]
fn micro_grid_end_to_end_and_resumable() {
    let out = std::env::temp_dir().join(format!("hif8lab-grid-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_hif8lab"))
            .args([
                "grid",
                "--preset",
                "grid-micro",
                "--backend",
                "cpu",
                "--out",
                out.to_str().unwrap(),
            ])
            .output()
            .unwrap()
    };
    let first = run();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 12, "header + 12 runs");
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("column {name}"))
    };
    for line in &lines[1..] {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), header.len());
        let loss: f64 = f[col("final_loss")].parse().unwrap();
        assert!(loss.is_finite() && loss > 0.5 && loss < 6.0, "{line}");
        let acc: f64 = f[col("knowledge_acc_norm")].parse().unwrap();
        assert!((0.0..=1.0).contains(&acc));
        if f[col("estimator")] != "none" {
            let ape: f64 = f[col("ape_all_pct")].parse().unwrap();
            assert!((0.0..50.0).contains(&ape), "{line}");
            let cts: u64 = f[col("calls_above_current")].parse().unwrap();
            assert_eq!(cts, 0, "current scaling is never exceeded: {line}");
        }
    }
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert_eq!(md.matches("reproduced").count(), 4, "{md}");
    assert!(md.contains("max_window-low-warmup"));
    for name in ["base", "runs/baseline-low", "runs/max_window-low-warmup"] {
        let s: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join(name).join("summary.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(s["status"], "finished", "{name}");
    }
    assert!(out.join("runs/most_recent-high/trace.jsonl").exists());
    assert!(out.join("runs/most_recent-high/probes.jsonl").exists());
    // Re-running skips everything and reproduces the same table.
    let second = run();
    assert!(second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(err.matches("skipped").count(), 13, "{err}");
    assert_eq!(
        std::fs::read_to_string(out.join("results.csv")).unwrap(),
        csv
    );
}

#[test]
fn grid_plots_are_drawn() {
    let out = std::env::temp_dir().join(format!("hif8lab-grid-plots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let r = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args([
            "grid",
            "--preset",
            "grid-micro",
            "--backend",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    for name in ["loss.png", "probes.png", "amax.png"] {
        let p = out.join("plots").join(name);
        let bytes = std::fs::read(&p)
            .unwrap_or_else(|_| panic!("{} missing; results.md: {md}", p.display()));
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert!(
            bytes.len() > 10_000,
            "{name} is not a blank image: {} bytes",
            bytes.len()
        );
        assert!(md.contains(&format!("plots/{name}")));
    }
}
