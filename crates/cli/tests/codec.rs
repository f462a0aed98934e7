//! End-to-end tests of `hif8lab codec` through the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::io::Write;
use std::process::{Command, Output, Stdio};

use hif8lab_format::{Format, Overflow};

fn hif8lab(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hif8lab");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn stdout_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn table_lists_every_code_with_an_exact_value() {
    for format in Format::ALL {
        let out = hif8lab(&["codec", "table", "--format", format.name()], "");
        assert!(out.status.success());
        let lines = stdout_lines(&out);
        assert_eq!(lines.len(), 256);
        for (code, line) in lines.iter().enumerate() {
            let (hex, value) = line.split_once('\t').expect("tab");
            assert_eq!(hex, format!("0x{code:02X}"));
            let parsed: f32 = value.parse().expect("value parses back");
            let want = format.decode(code as u8);
            if want.is_nan() {
                assert_eq!(value, "nan");
            } else {
                assert_eq!(parsed.to_bits(), want.to_bits(), "{format} {line}");
            }
        }
    }
    let hif8 = stdout_lines(&hif8lab(&["codec", "table"], ""));
    assert_eq!(hif8[0x6F], "0x6F\tinf");
    assert_eq!(hif8[0xEF], "0xEF\t-inf");
    assert_eq!(hif8[0x80], "0x80\tnan");
    assert_eq!(hif8[0x6E], "0x6E\t32768");
}

#[test]
fn encode_reads_stdin_and_arguments_in_order() {
    let out = hif8lab(&["codec", "encode"], "1\n40960\n-2.5e-7\n15\nnan\n");
    assert!(out.status.success());
    assert_eq!(stdout_lines(&out), ["0x08", "0x6F", "0x81", "0x2F", "0x80"]);
    let sat = hif8lab(
        &[
            "codec",
            "encode",
            "--overflow",
            "saturate",
            "--",
            "-1e9",
            "224",
        ],
        "",
    );
    assert_eq!(stdout_lines(&sat), ["0xEE", "0x4F"]);
    let e4m3 = hif8lab(&["codec", "encode", "--format", "e4m3", "464", "465"], "");
    assert_eq!(stdout_lines(&e4m3), ["0x7E", "0x7F"]);
}

#[test]
fn qdq_prints_exact_values_with_scale() {
    let out = hif8lab(&["codec", "qdq", "--scale", "16"], "0.53\n-0.53\n3000\n");
    assert!(out.status.success());
    assert_eq!(stdout_lines(&out), ["0.5", "-0.5", "inf"]);
    let x = 0.123_456_79f32;
    let want = hif8lab_format::FakeQuant::new(Format::HiF8)
        .with_overflow(Overflow::Saturate)
        .qdq(x, 100.0);
    let out = hif8lab(
        &[
            "codec",
            "qdq",
            "--scale",
            "100",
            "--overflow",
            "saturate",
            &x.to_string(),
        ],
        "",
    );
    let got: f32 = stdout_lines(&out)[0].parse().expect("number");
    assert_eq!(got.to_bits(), want.to_bits());
}

#[test]
fn bad_lines_are_named_and_exit_2() {
    let out = hif8lab(&["codec", "encode"], "1\nabc\n2\n\n");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout_lines(&out), ["0x08", "0x10"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2: 'abc' is not a number"), "{err}");
    assert!(err.contains("line 4: '' is not a number"), "{err}");
    let bad_format = hif8lab(&["codec", "table", "--format", "fp4"], "");
    assert_eq!(bad_format.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_format.stderr).contains("unknown format 'fp4'"));
    let bad_scale = hif8lab(&["codec", "qdq", "--scale", "0", "1"], "");
    assert!(!bad_scale.status.success());
}

#[test]
fn bench_codec_reports_ratio_to_copy() {
    let out = hif8lab(
        &[
            "bench",
            "codec",
            "--elements",
            "4096",
            "--reps",
            "2",
            "--json",
        ],
        "",
    );
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for field in [
        "\"cpu\"",
        "\"copy_elements_per_s\"",
        "\"ratio_to_copy\"",
        "\"hif8\"",
    ] {
        assert!(text.contains(field), "{field} missing in {text}");
    }
}

#[test]
fn qdq_on_the_gpu_prints_what_the_cpu_prints() {
    let input = "0.53\n-0.53\n3000\n1e-9\nnan\n-inf\n1.0625\n17.5\n40959\n";
    let cpu = hif8lab(&["codec", "qdq", "--scale", "16"], input);
    let gpu = hif8lab(
        &["codec", "qdq", "--scale", "16", "--backend", "gpu"],
        input,
    );
    if !gpu.status.success() {
        let err = String::from_utf8_lossy(&gpu.stderr);
        assert!(
            std::env::var("HIF8LAB_REQUIRE_GPU").as_deref() != Ok("1"),
            "GPU required but `codec qdq --backend gpu` failed: {err}"
        );
        eprintln!("!!!!!!!! SKIPPING: no GPU adapter ({err}) !!!!!!!!");
        return;
    }
    assert_eq!(stdout_lines(&gpu), stdout_lines(&cpu));
    for format in ["e4m3", "e5m2"] {
        let args = ["codec", "qdq", "--format", format, "--scale", "0.37"];
        let cpu = hif8lab(&args, input);
        let gpu = hif8lab(&[&args[..], &["--backend", "gpu"]].concat(), input);
        assert_eq!(stdout_lines(&gpu), stdout_lines(&cpu), "{format}");
    }
}
