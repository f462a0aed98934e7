//! Traces, importers, replay and synthetic patterns.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::{Path, PathBuf};

use hif8lab_format::{FakeQuant, Format};
use hif8lab_scaling::import::{AmaxSeries, import_bytes, import_file, parse_csv, split_csv_line};
use hif8lab_scaling::replay::{beyond_3bit_tier, replay};
use hif8lab_scaling::stats::{Threshold, tensor_stats};
use hif8lab_scaling::synth::{Pattern, synth, to_csv};
use hif8lab_scaling::trace::{
    InputError, ShadowRecord, TRACE_VERSION, TraceHeader, TraceRecord, TraceWriter, parse_trace,
};
use hif8lab_scaling::{Module, QuantizerState, Role, ScalingConfig};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/scaling")
        .join(name)
}

fn header() -> TraceHeader {
    TraceHeader {
        hif8lab_trace: TRACE_VERSION,
        format: "hif8".into(),
        target: 15.0,
        margin: 0,
        window: 64,
        estimator: "max_window(64)".into(),
        estimators: vec!["most_recent".into(), "max_window(64)".into()],
        config: serde_json::json!({"lr": 1e-5}),
    }
}

/// Builds the records of a small real run: two quantizers, tensors with a spike.
fn records() -> Vec<TraceRecord> {
    let config = ScalingConfig {
        shadow: vec![
            "most_recent".parse().unwrap(),
            "max_window(64)".parse().unwrap(),
        ],
        ..ScalingConfig::default()
    };
    let quant = FakeQuant::new(Format::HiF8);
    let mut out = Vec::new();
    for (block, role) in [(1u32, Role::A), (2, Role::G)] {
        let mut state = QuantizerState::new(&config.plan().unwrap());
        for step in 0..6u64 {
            let peak = if step == 3 {
                40.0
            } else {
                1.0 + step as f32 * 0.1
            };
            let x: Vec<f32> = (0..33)
                .map(|i| peak * ((i as f32 * 0.37).sin()))
                .chain([peak, f32::NAN])
                .collect();
            let (amax, _) = hif8lab_scaling::stats::amax_and_nonfinite(&x);
            let d = state.call(amax);
            let thresholds: Vec<Threshold> = d
                .iter()
                .map(|d| Threshold {
                    est: d.est,
                    scale: d.scale,
                })
                .collect();
            let a = state.active_index();
            let s = tensor_stats(&x, &thresholds, d[a].scale, &quant);
            out.push(TraceRecord {
                step,
                micro: 0,
                block,
                module: Module::Gate,
                role,
                numel: s.numel,
                amax: s.amax,
                estimator: "max_window(64)".into(),
                est: d[a].est,
                scale: d[a].scale,
                above_est: s.above_est[a],
                overflow: s.overflow[a],
                underflow: s.underflow,
                nonfinite: s.nonfinite,
                sqnr_db: hif8lab_scaling::stats::sqnr_db(s.signal, s.noise),
                shadow: state
                    .estimators()
                    .iter()
                    .enumerate()
                    .map(|(k, e)| {
                        (
                            e.to_string(),
                            ShadowRecord {
                                est: d[k].est,
                                above_est: s.above_est[k],
                                overflow: s.overflow[k],
                            },
                        )
                    })
                    .collect(),
            });
        }
    }
    out
}

fn write_trace(records: &[TraceRecord]) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), &header()).expect("header");
    for r in records {
        w.record(r).expect("record");
    }
    w.into_inner()
}

#[test]
fn trace_round_trips_exactly_including_non_finite_values() {
    let mut recs = records();
    recs[0].amax = f32::INFINITY;
    recs[1].est = f32::NAN;
    let bytes = write_trace(&recs);
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.lines().next().unwrap().contains("\"hif8lab_trace\":1"));
    assert!(text.contains("\"amax\":\"inf\""));
    let trace = parse_trace(Path::new("t.jsonl"), &bytes).expect("parse");
    assert_eq!(trace.header, header());
    assert_eq!(trace.records.len(), recs.len());
    assert!(trace.records[1].est.is_nan());
    for (a, b) in trace.records.iter().zip(&recs).skip(2) {
        assert_eq!(a, b);
    }
    assert!(trace.warnings.is_empty());
    // The spike at step 3 is above most_recent's estimate but the record says so exactly.
    let spike = &trace.records[3];
    assert!(spike.shadow["most_recent"].above_est > 0);
    assert_eq!(spike.shadow["max_window(64)"].above_est, spike.above_est);
}

#[test]
fn torn_last_line_is_skipped_with_a_warning() {
    let mut bytes = write_trace(&records());
    let full = parse_trace(Path::new("t.jsonl"), &bytes)
        .unwrap()
        .records
        .len();
    bytes.truncate(bytes.len() - 20); // cut into the last record, no trailing newline
    let trace = parse_trace(Path::new("run/trace.jsonl"), &bytes).expect("tolerated");
    assert_eq!(trace.records.len(), full - 1);
    assert_eq!(trace.warnings.len(), 1);
    assert!(
        trace.warnings[0].contains("run/trace.jsonl:"),
        "{:?}",
        trace.warnings
    );
}

#[test]
fn malformed_middle_line_names_file_line_and_field() {
    let bytes = write_trace(&records());
    let text = String::from_utf8(bytes).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[3] = lines[3].replacen("\"numel\":35", "\"numel\":\"many\"", 1);
    let bad = lines.join("\n") + "\n";
    let err = parse_trace(Path::new("runs/a/trace.jsonl"), bad.as_bytes()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("runs/a/trace.jsonl:4: field 'numel'"),
        "{msg}"
    );
    lines[3] = lines[3].replacen("\"role\":\"A\"", "\"role\":\"Q\"", 1);
    let missing = lines[2].replacen("\"amax\":", "\"amux\":", 1);
    lines[2] = missing;
    let bad = lines.join("\n") + "\n";
    let msg = parse_trace(Path::new("x.jsonl"), bad.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("x.jsonl:3") && msg.contains("amax"), "{msg}");
}

#[test]
fn csv_import_groups_by_layer_and_role() {
    let imported = import_file(&fixture("sample.csv")).expect("csv");
    assert_eq!(imported.kind, "csv");
    let names: Vec<&str> = imported.series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "model.layers.3.mlp.up_proj.A",
            "model.layers.3.mlp.up_proj.W",
            "model.layers.3.mlp,odd \"name\".A"
        ]
    );
    assert_eq!(imported.series[0].amax, [1.5, 1.75, 6.0, 2.0]);
    assert_eq!(imported.series[0].steps, [0, 1, 2, 3]);
}

#[test]
fn csv_errors_name_file_line_and_column() {
    let err = import_file(&fixture("bad_amax.csv"))
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("bad_amax.csv:3: field 'amax': 'abc' is not a number"),
        "{err}"
    );
    let err = import_file(&fixture("bad_header.csv"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("bad_header.csv:1: field 'role': header lacks column 'role'"),
        "{err}"
    );
    let torn = b"step,layer,role,amax\n0,l,A,1\n1,l,A,2\n2,l,A,";
    let ok = parse_csv(Path::new("t.csv"), torn).expect("torn tail tolerated");
    assert_eq!(ok.series[0].amax, [1.0, 2.0]);
    assert_eq!(ok.warnings.len(), 1);
    assert_eq!(
        split_csv_line(r#"a,"b,""c""",d"#).unwrap(),
        ["a", "b,\"c\"", "d"]
    );
    assert!(split_csv_line(r#"a,"b"#).is_err());
}

#[test]
fn transformer_engine_log_import() {
    let imported = import_file(&fixture("sample_te.log")).expect("te log");
    assert_eq!(imported.kind, "te-log");
    assert_eq!(imported.series.len(), 2);
    let act = &imported.series[0];
    assert_eq!(act.name, "decoder.layers.1.mlp.linear_fc1.activation");
    assert_eq!(act.amax, [4.34375, 5.5, 30.25]);
    assert_eq!(act.steps, [1, 2, 3]);
    assert_eq!(
        imported.series[1].name,
        "decoder.layers.1.mlp.linear_fc1.weight"
    );
    assert!(
        imported.warnings.iter().any(|w| w.contains("2 line(s)")),
        "{:?}",
        imported.warnings
    );
    let err = import_file(&fixture("bad_te.log")).unwrap_err().to_string();
    assert!(
        err.contains("bad_te.log:2: field 'value': 'four' is not a number"),
        "{err}"
    );
    let err = import_file(Path::new("/nonexistent/x.csv")).unwrap_err();
    assert!(matches!(err, InputError::Io { .. }));
}

#[test]
fn replay_totals_match_a_direct_count() {
    let series = synth(Pattern::Spike, 600, 7);
    let report = replay(&series, &ScalingConfig::default().plan().unwrap());
    assert_eq!(
        report.order,
        [
            "most_recent",
            "ema(0.1)",
            "mean_window(64)",
            "max_window(64)",
            "current"
        ]
    );
    // Direct count for most_recent: a call is above when its amax exceeds the previous one.
    let mut direct_above = 0;
    let mut direct_beyond = 0;
    for s in &series {
        for t in 1..s.amax.len() {
            direct_above += usize::from(s.amax[t] > s.amax[t - 1]);
            let scale = 15.0 / (s.amax[t - 1] + 1e-12);
            direct_beyond += usize::from(beyond_3bit_tier(s.amax[t] * scale));
        }
    }
    let mr = &report.total["most_recent"];
    assert_eq!(mr.calls, 1800);
    assert_eq!(mr.calls_above_est as usize, direct_above);
    assert_eq!(mr.beyond_3bit_tier, Some(direct_beyond as u64));
    let per_q: u64 = report
        .quantizers
        .iter()
        .map(|q| q.estimators["most_recent"].calls_above_est)
        .sum();
    assert_eq!(per_q, mr.calls_above_est);
    // max_window(64) is exceeded only by a spike larger than everything in its window.
    let mw = &report.total["max_window(64)"];
    assert!(
        mw.calls_above_est < mr.calls_above_est / 10,
        "{} vs {}",
        mw.calls_above_est,
        mr.calls_above_est
    );
    assert!(mr.worst_ratio > 2.5, "spikes are ×3–8: {}", mr.worst_ratio);
    assert_eq!(report.total["current"].calls_above_est, 0);
    assert!((report.total["current"].median_headroom - 1.0).abs() < 1e-6);
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["total"]["max_window(64)"]["median_headroom"].is_number());
    assert!(json["quantizers"][0]["name"].is_string());
}

#[test]
fn synthetic_patterns_are_deterministic_and_round_trip_through_csv() {
    for pattern in Pattern::ALL {
        let a = synth(pattern, 300, 42);
        assert_eq!(a, synth(pattern, 300, 42));
        assert_ne!(a, synth(pattern, 300, 43));
        assert!(
            a.iter()
                .all(|s| s.amax.iter().all(|v| v.is_finite() && *v > 0.0))
        );
        let csv = to_csv(&a);
        let back = parse_csv(Path::new("synth.csv"), csv.as_bytes()).expect("parses");
        let round: Vec<AmaxSeries> = back.series;
        assert_eq!(round, a, "{pattern}");
    }
    // The ramp grows, the step jumps ×4.
    let ramp = &synth(Pattern::Ramp, 100, 1)[0].amax;
    assert!(ramp[99] > 5.0 * ramp[0]);
    let step = &synth(Pattern::Step, 100, 1)[0].amax;
    assert!(step[60] > 3.0 * step[40]);
}

/// A log written by the real nvdlfw-inspect 0.2.2 (`LogTensorStats`, `stats: [max, min]`,
/// generated by tests/fixtures/gen_te_fixtures.py): amax = max(|max|, |min|) per tensor and
/// iteration, to the log's 4 decimals; values printed as 0.0000 are counted as lost.
#[test]
fn real_nvdlfw_inspect_max_min_log() {
    let dir = fixture("nvdlfw");
    let imported = import_file(&dir.join("max_min.log")).expect("max/min log");
    assert_eq!(imported.kind, "te-log");
    let expected = std::fs::read_to_string(dir.join("expected.tsv")).unwrap();
    let mut want: std::collections::BTreeMap<String, (Vec<(u64, f32)>, u64)> = Default::default();
    for line in expected.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let entry = want.entry(f[0].to_owned()).or_default();
        match f[2] {
            "lost" => entry.1 += 1,
            v => entry.0.push((f[1].parse().unwrap(), v.parse().unwrap())),
        }
    }
    assert_eq!(imported.series.len(), want.len(), "{:?}", imported.warnings);
    let mut lost_total = 0;
    for s in &imported.series {
        let (calls, lost) = &want[&s.name];
        assert_eq!(s.rounded_to_zero, *lost, "{}", s.name);
        lost_total += lost;
        assert_eq!(
            s.steps,
            calls.iter().map(|c| c.0).collect::<Vec<_>>(),
            "{}",
            s.name
        );
        for (got, (_, want)) in s.amax.iter().zip(calls) {
            assert!(
                (got - want).abs() <= 0.5e-4 + 1e-6,
                "{}: {got} vs {want}",
                s.name
            );
        }
    }
    assert!(
        lost_total > 0,
        "the fixture has gradients printed as 0.0000"
    );
    assert!(
        imported
            .warnings
            .iter()
            .any(|w| w.contains("gradient") && w.contains("printed as 0")),
        "{:?}",
        imported.warnings
    );
    // The activation spike at iteration 7 is exceeded by most_recent, not missed silently.
    let report = replay(&imported.series, &ScalingConfig::default().plan().unwrap());
    let q = report
        .quantizers
        .iter()
        .find(|q| q.name == "decoder.1.mlp.fc1.gradient")
        .unwrap();
    assert_eq!(q.rounded_to_zero, want["decoder.1.mlp.fc1.gradient"].1);
    // A lone max without its min is not an amax.
    let lone = b"t - INFO - l.fc1_activation_max \t iteration=000001 \t value=2.0000\n";
    let err = import_bytes(Path::new("lone.log"), lone)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no amax lines"), "{err}");
}

/// NaN, Inf, values beyond f32 and negative amax are counted per quantizer and kept out of
/// the replay in every input form, so the figures stay consistent with each other.
#[test]
fn impossible_amax_values_are_counted_not_replayed() {
    // One quantizer's records of a real trace, with its amax values replaced by text.
    let one: Vec<TraceRecord> = records().into_iter().filter(|r| r.block == 1).collect();
    let mut w = TraceWriter::new(Vec::new(), &header()).unwrap();
    for r in &one {
        w.record(r).unwrap();
    }
    w.flush().unwrap();
    let text = String::from_utf8(w.into_inner()).unwrap();
    let mut jsonl = String::new();
    let amaxes = ["1.0", "\"nan\"", "-1", "1e39", "\"inf\"", "2.0", "1.0"];
    let mut record = 0;
    for line in text.lines() {
        if line.contains("\"hif8lab_trace\"") {
            jsonl.push_str(line);
            jsonl.push('\n');
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let old = format!("\"amax\":{}", v["amax"]);
        assert!(line.contains(&old), "{line}");
        for amax in &amaxes[record..record + if record == 5 { 2 } else { 1 }] {
            jsonl.push_str(&line.replacen(&old, &format!("\"amax\":{amax}"), 1));
            jsonl.push('\n');
        }
        record += if record == 5 { 2 } else { 1 };
        if record >= amaxes.len() {
            break;
        }
    }
    let csv = "step,layer,role,amax\n0,l,A,1.0\n1,l,A,nan\n2,l,A,-1\n3,l,A,1e39\n4,l,A,inf\n5,l,A,2.0\n6,l,A,1.0\n";
    let te: String = ["1.0", "nan", "-1", "1e39", "inf", "2.0", "1.0"]
        .iter()
        .enumerate()
        .map(|(i, v)| format!("x - INFO - l_activation_amax iteration={i:06} value={v}\n"))
        .collect();
    for (name, bytes) in [
        ("t.jsonl", jsonl.as_bytes()),
        ("t.csv", csv.as_bytes()),
        ("t.log", te.as_bytes()),
    ] {
        let imported =
            import_bytes(Path::new(name), bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let s = &imported.series[0];
        assert_eq!(s.amax, [1.0, 2.0, 1.0], "{name}");
        assert_eq!((s.nonfinite, s.negative), (3, 1), "{name}");
        assert!(
            imported
                .warnings
                .iter()
                .any(|w| w.contains("4 amax value(s) left out")),
            "{name}: {:?}",
            imported.warnings
        );
        let report = replay(&imported.series, &ScalingConfig::default().plan().unwrap());
        let q = &report.quantizers[0];
        assert_eq!((q.calls, q.nonfinite_amax, q.negative_amax), (3, 3, 1));
        for (est, r) in &q.estimators {
            assert_eq!(
                r.calls_above_est > 0,
                r.worst_ratio > 1.0,
                "{name} {est}: above {} worst {}",
                r.calls_above_est,
                r.worst_ratio
            );
            assert!(
                r.worst_ratio.is_finite() && r.median_headroom.is_finite(),
                "{name} {est}"
            );
        }
        assert_eq!(q.estimators["most_recent"].calls_above_est, 1, "{name}");
    }
}

/// A trace with SQNR per call: the importer keeps it per quantizer and `replay` reports the
/// recorded median and worst (it cannot recompute SQNR for other estimators).
#[test]
fn recorded_sqnr_reaches_the_replay() {
    let recs = records();
    assert!(
        recs.iter().all(|r| r.sqnr_db.is_some()),
        "the fixture measures SQNR"
    );
    let bytes = write_trace(&recs);
    assert!(String::from_utf8_lossy(&bytes).contains("\"sqnr_db\":"));
    let imported = hif8lab_scaling::import::import_bytes(Path::new("t.jsonl"), &bytes).unwrap();
    let report = replay(&imported.series, &ScalingConfig::default().plan().unwrap());
    for (s, q) in imported.series.iter().zip(&report.quantizers) {
        let mine: Vec<f32> = recs
            .iter()
            .filter(|r| r.quantizer().to_string() == s.name)
            .filter_map(|r| r.sqnr_db)
            .collect();
        let r = q.recorded_sqnr.expect("recorded");
        assert_eq!(r.calls as usize, mine.len());
        let worst = mine.iter().copied().fold(f32::INFINITY, f32::min);
        assert_eq!(r.worst_db, worst);
        assert!(r.worst_db <= r.median_db && r.median_db > 0.0, "{r:?}");
    }
    // A trace without SQNR (older traces, other tools): none reported.
    let mut old = recs.clone();
    for r in &mut old {
        r.sqnr_db = None;
    }
    let imported =
        hif8lab_scaling::import::import_bytes(Path::new("t.jsonl"), &write_trace(&old)).unwrap();
    let report = replay(&imported.series, &ScalingConfig::default().plan().unwrap());
    assert!(report.quantizers.iter().all(|q| q.recorded_sqnr.is_none()));
    assert!(
        !serde_json::to_string(&report)
            .unwrap()
            .contains("recorded_sqnr")
    );
}

/// Each (tensor, iteration) counts once: a log with both `_amax` and `_cur_amax` lines per
/// iteration uses `_cur_amax`, a repeated iteration is ignored, iterations that go backwards
/// are warned about; every choice is said in a warning.
#[test]
fn transformer_engine_logs_count_each_tensor_and_iteration_once() {
    let mut log = String::new();
    for it in 1..=50u64 {
        log.push_str(&format!(
            "t - INFO - l0_activation_amax \t\t iteration={it:06} \t\t value={}.0\n",
            it + 100
        ));
        log.push_str(&format!(
            "t - INFO - l0_activation_cur_amax \t\t iteration={it:06} \t\t value={}.0\n",
            it
        ));
    }
    let imported = import_bytes(Path::new("both.log"), log.as_bytes()).unwrap();
    let s = &imported.series[0];
    assert_eq!(s.amax.len(), 50, "one call per iteration");
    assert_eq!(s.amax[0], 1.0, "from _cur_amax");
    assert!(
        imported.warnings.iter().any(|w| w.contains("_cur_amax")),
        "{:?}",
        imported.warnings
    );
    let repeated = "t - INFO - l0_weight_amax iteration=000001 value=2.0\n\
                    t - INFO - l0_weight_amax iteration=000001 value=2.0\n\
                    t - INFO - l0_weight_amax iteration=000002 value=3.0\n\
                    t - INFO - l0_weight_amax iteration=000001 value=4.0\n";
    let imported = import_bytes(Path::new("rep.log"), repeated.as_bytes()).unwrap();
    assert_eq!(imported.series[0].amax, [2.0, 3.0]);
    let w = imported.warnings.join(" | ");
    assert!(w.contains("2 line(s) repeat an iteration"), "{w}");
    let backwards =
        "x l0_weight_amax iteration=5 value=2.0\nx l0_weight_amax iteration=3 value=3.0\n";
    let imported = import_bytes(Path::new("back.log"), backwards.as_bytes()).unwrap();
    assert!(
        imported.warnings.iter().any(|w| w.contains("backwards")),
        "{:?}",
        imported.warnings
    );
}

/// A trace of another schema version, and text in UTF-16, are refused by name.
#[test]
fn unknown_trace_versions_and_utf16_are_refused_by_name() {
    let good = String::from_utf8(write_trace(&records())).unwrap();
    let bad = good.replacen("\"hif8lab_trace\":1", "\"hif8lab_trace\":99", 1);
    assert_ne!(good, bad, "the header spells its version so");
    let e = import_bytes(Path::new("v99.jsonl"), bad.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("hif8lab_trace") && e.contains("99") && e.contains("version 1"),
        "{e}"
    );
    let csv = "step,layer,role,amax\n0,l0,A,1.5\n";
    let mut utf16: Vec<u8> = vec![0xFF, 0xFE];
    for u in csv.encode_utf16() {
        utf16.extend(u.to_le_bytes());
    }
    let e = import_bytes(Path::new("u16.csv"), &utf16)
        .unwrap_err()
        .to_string();
    assert!(e.contains("u16.csv") && e.contains("UTF-16"), "{e}");
    let no_bom: Vec<u8> = utf16[2..].to_vec();
    let e = import_bytes(Path::new("u16.csv"), &no_bom)
        .unwrap_err()
        .to_string();
    assert!(e.contains("UTF-16"), "{e}");
}
