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
    assert_eq!(lines.len(), 1 + 8, "header + the 8 runs");
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
        assert_eq!(f[col("seeds")], "1");
        // Every probe score carries its 95 % interval, around the score.
        for score in [
            "knowledge_acc",
            "knowledge_acc_norm",
            "completion_acc",
            "completion_acc_norm",
            "heldout_loss",
        ] {
            let v: f64 = f[col(score)].parse().unwrap();
            let lo: f64 = f[col(&format!("{score}_lo"))].parse().unwrap();
            let hi: f64 = f[col(&format!("{score}_hi"))].parse().unwrap();
            assert!(
                lo <= v + 1e-3 && v <= hi + 1e-3 && lo < hi,
                "{score}: {line}"
            );
        }
        let p: f64 = f[col("knowledge_drop_p")].parse().unwrap();
        assert!((0.0..=1.0).contains(&p), "{line}");
        if f[col("estimator")] != "none" {
            let ape: f64 = f[col("ape_all_pct")].parse().unwrap();
            assert!((0.0..50.0).contains(&ape), "{line}");
            let cts: u64 = f[col("calls_above_current")].parse().unwrap();
            assert_eq!(cts, 0, "current scaling is never exceeded: {line}");
        }
    }
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    // The verdict table: five claims, each reproduced / not reproduced / inconclusive, with
    // its statistic, interval and test.
    let verdicts = md.split("## Verdicts").nth(1).unwrap();
    let rows: Vec<&str> = verdicts
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| claim"))
        .collect();
    assert_eq!(rows.len(), 5, "{verdicts}");
    for r in &rows {
        let cells: Vec<&str> = r.split(" | ").collect();
        assert!(
            [
                "**reproduced**",
                "**not reproduced**",
                "**inconclusive**",
                "**not judged**",
                "**not tested at this scale**"
            ]
            .contains(&cells[1]),
            "{r}"
        );
        // An interval, or (one run per setting) the exact value of that run, said so.
        assert!(
            cells[3].starts_with('[')
                || [
                    "– (one run: no interval)",
                    "– (not judged)",
                    "– (not tested)"
                ]
                .contains(&cells[3]),
            "interval: {r}"
        );
        if let Some(iv) = cells[3].strip_prefix('[') {
            let (lo, hi) = iv.split_once(", ").unwrap();
            assert_ne!(
                lo,
                hi.split(']').next().unwrap(),
                "zero-width interval: {r}"
            );
        }
    }
    assert!(md.contains("paired cluster bootstrap"), "{md}");
    assert!(md.contains("## Quantization error (SQNR, dB)"), "{md}");
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
    assert_eq!(err.matches("skipped").count(), 9, "{err}");
    assert_eq!(
        std::fs::read_to_string(out.join("results.csv")).unwrap(),
        csv
    );
}

/// Two data orders from each of two pretrainings: every run four times (`<run>-seed1`,
/// `<run>-base1`, `<run>-seed1-base1`), means and intervals over all four, the plots drawn, and
/// `--recompute` rebuilding the report byte for byte from `runs.jsonl.gz` alone.
#[test]
fn grid_seeds_and_plots() {
    let out = std::env::temp_dir().join(format!("hif8lab-grid-plots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let r = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args([
            "grid",
            "--preset",
            "grid-micro",
            "--backend",
            "cpu",
            "--seeds",
            "2",
            "--base-seeds",
            "2",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(
        md.contains("2 data order(s) × 2 pretraining(s) of the base = 4 replicate(s) per run"),
        "{md}"
    );
    assert!(out.join("base-seed1/summary.json").is_file());
    assert!(
        out.join("runs/max_window-low-seed1-base1/summary.json")
            .is_file()
    );
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        1 + 8,
        "one line per run, replicates pooled"
    );
    let seeds_col = csv
        .lines()
        .next()
        .unwrap()
        .split(',')
        .position(|h| h == "seeds")
        .unwrap();
    for line in csv.lines().skip(1) {
        assert_eq!(line.split(',').nth(seeds_col), Some("4"), "{line}");
    }
    // A data order varies the order, not the text: one corpus seed for every replicate.
    let config = |dir: &str| {
        std::fs::read_to_string(out.join("runs").join(dir).join("config.toml")).unwrap()
    };
    for dir in [
        "baseline-low",
        "baseline-low-seed1",
        "baseline-low-seed1-base1",
    ] {
        assert!(
            config(dir).contains("corpus_seed = 7"),
            "{dir}: {}",
            config(dir)
        );
    }
    // Seed 1 trained on another data order: its losses differ from seed 0's.
    let losses = |dir: &str| {
        let s: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("runs").join(dir).join("summary.json")).unwrap(),
        )
        .unwrap();
        s["losses"].clone()
    };
    assert_ne!(losses("baseline-low"), losses("baseline-low-seed1"));
    // A QAT run's summary holds its SQNR per role.
    let s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("runs/most_recent-low-seed1/summary.json")).unwrap(),
    )
    .unwrap();
    let a = &s["sqnr"]["A"];
    assert!(a["calls"].as_u64().unwrap() > 0, "{s}");
    let (median, worst) = (
        a["median_db"].as_f64().unwrap(),
        a["worst_db"].as_f64().unwrap(),
    );
    assert!(worst <= median && median > 10.0 && median < 60.0, "{a}");
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
    // The report again from runs.jsonl.gz alone, byte for byte (run folders gone).
    let csv_before = csv.clone();
    std::fs::remove_dir_all(out.join("runs")).unwrap();
    std::fs::remove_file(out.join("results.md")).unwrap();
    let recompute = |dir: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_hif8lab"))
            .args(["grid", "--recompute", dir.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let r = recompute(&out);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(std::fs::read_to_string(out.join("results.md")).unwrap(), md);
    assert_eq!(
        std::fs::read_to_string(out.join("results.csv")).unwrap(),
        csv_before
    );
    // A damaged data file is refused by name; the report stays as it was.
    let data = out.join("runs.jsonl.gz");
    let bytes = std::fs::read(&data).unwrap();
    // A second gzip member or junk after the stream was never read (the report came out
    // byte-identical over a damaged file): refused too.
    let appended = [bytes.as_slice(), bytes.as_slice()].concat();
    let junk = [bytes.as_slice(), b"junk".as_slice()].concat();
    for damaged in [
        &bytes[..bytes.len() / 2],
        b"not gzip at all".as_slice(),
        &appended,
        &junk,
    ] {
        std::fs::write(&data, damaged).unwrap();
        let r = recompute(&out);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "input refused: {err}");
        assert!(err.contains("runs.jsonl.gz"), "{err}");
        assert_eq!(std::fs::read_to_string(out.join("results.md")).unwrap(), md);
    }
    std::fs::write(&data, &bytes).unwrap();
}

#[test]
fn unknown_grid_run_is_bad_input() {
    let o = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args([
            "grid",
            "--preset",
            "grid-micro",
            "--runs",
            "baseline-low,nope",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--runs") && err.contains("'nope'") && err.contains("most_recent-low"),
        "{err}"
    );
}

/// The committed grid-small report is what its committed data give: `--recompute` on a copy of
/// docs/results/grid-small rebuilds results.md and results.csv byte for byte.
#[test]
fn the_committed_report_follows_from_its_committed_data() {
    // Each committed report (the small grid and the real model's), rebuilt from its data.
    for (name, says) in [
        ("grid-small", "5 data order(s) × 3 pretraining(s)"),
        ("real-smollm2", "a real pretrained model"),
        ("real-smollm2-quick", "a real pretrained model"),
        ("real-smollm2-dose", "The dose study (pre-registered)"),
        ("real-smollm2-claim5", "on 297 regularity items"),
        (
            "real-smollm2-claim5-fresh",
            "Data orders 2–7 (fresh: orders 0–1 were not run here)",
        ),
    ] {
        let committed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/results")
            .join(name);
        let out =
            std::env::temp_dir().join(format!("hif8lab-recompute-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(out.join("plots")).unwrap();
        std::fs::copy(committed.join("runs.jsonl.gz"), out.join("runs.jsonl.gz")).unwrap();
        if committed.join("errata.md").is_file() {
            std::fs::copy(committed.join("errata.md"), out.join("errata.md")).unwrap();
        }
        for f in ["loss", "probes", "amax", "outlier"] {
            let f = format!("plots/{f}.png");
            if committed.join(&f).is_file() {
                std::fs::copy(committed.join(&f), out.join(&f)).unwrap();
            }
        }
        // A flag of a run beside --recompute is refused (the data say what ran).
        if name == "grid-small" {
            for extra in [
                ["--seeds", "3"],
                ["--first-order", "2"],
                ["--preset", "grid-micro"],
            ] {
                let o = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
                    .args(["grid", "--recompute", out.to_str().unwrap()])
                    .args(extra)
                    .output()
                    .unwrap();
                assert_eq!(o.status.code(), Some(2), "{extra:?}");
                assert!(
                    String::from_utf8_lossy(&o.stderr).contains("cannot be used with"),
                    "{}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
        let o = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
            .args(["grid", "--recompute", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        for f in ["results.md", "results.csv"] {
            assert!(
                std::fs::read(out.join(f)).unwrap() == std::fs::read(committed.join(f)).unwrap(),
                "{f} differs from what docs/results/{name}/runs.jsonl.gz gives"
            );
        }
        let md = std::fs::read_to_string(out.join("results.md")).unwrap();
        assert!(md.contains(says), "{name}: {md}");
        // Errata go under the title, above the text the data give.
        if committed.join("errata.md").is_file() {
            assert!(
                md.starts_with("# hif8lab grid results\n\n## Errata ("),
                "{name}"
            );
        }
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// The committed probe calibration's report follows from its data, byte for byte; a data file
/// without the base's record, or with a line that is not a record, is refused by name.
#[test]
fn the_committed_calibration_follows_from_its_data() {
    let committed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/results/probe-calibration");
    let out = std::env::temp_dir().join(format!("hif8lab-calibration-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let data = std::fs::read_to_string(committed.join("calibration.jsonl")).unwrap();
    std::fs::write(out.join("calibration.jsonl"), &data).unwrap();
    let recompute = |dir: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_hif8lab"))
            .args(["calibrate-probe", "--recompute", dir.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let o = recompute(&out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        std::fs::read(out.join("results.md")).unwrap()
            == std::fs::read(committed.join("results.md")).unwrap(),
        "results.md differs from what docs/results/probe-calibration/calibration.jsonl gives"
    );
    let without_base: String = data
        .lines()
        .filter(|l| !l.contains("\"perturbation\":\"none\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(out.join("calibration.jsonl"), without_base).unwrap();
    let o = recompute(&out);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("undamaged base"));
    std::fs::write(
        out.join("calibration.jsonl"),
        format!("{data}{{\"perturbation\":1}}\n"),
    )
    .unwrap();
    let o = recompute(&out);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("calibration.jsonl:{}", data.lines().count() + 1)),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
