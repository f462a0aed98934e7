//! `hif8lab probe`: a model scored on a multiple-choice probe set, with the JSON contract
//! (`items`, `clusters`, `chance`, `acc`, `acc_interval`, `acc_norm`, `acc_norm_interval`,
//! `marks`), and bad sets refused by name.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::process::Command;

fn probe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .arg("probe")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_model_is_scored_on_a_probe_set_with_intervals() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/hf/tiny-gqa-tied-bf16"
    );
    let set = std::env::temp_dir().join(format!("hif8lab-probe-{}.tsv", std::process::id()));
    std::fs::write(
        &set,
        "a\tThe cat sat on the\tmat\tsky\tsea\tcar\n\
         a\tThe cat likes\tfish\trocks\tsand\tglue\n\
         b\tOne, two,\tthree\tseven\tnine\tzero\n\
         c\tRed, green and\tblue\tloud\tslow\tfar\n\
         c\tMonday, Tuesday,\tWednesday\tApril\tsummer\tnoon\n",
    )
    .unwrap();
    let args = [
        model,
        "--set",
        set.to_str().unwrap(),
        "--backend",
        "cpu",
        "--json",
    ];
    let o = probe(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["items"], 5);
    assert_eq!(v["clusters"], 3);
    assert_eq!(v["chance"], 0.25);
    for score in ["acc", "acc_norm"] {
        let s = v[score].as_f64().unwrap();
        // Five items: a multiple of 1/5.
        assert!((s * 5.0 - (s * 5.0).round()).abs() < 1e-9, "{v}");
        let iv: Vec<f64> = v[format!("{score}_interval")]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert!(iv[0] <= s && s <= iv[1], "{v}");
        let marks = v["marks"][score].as_str().unwrap();
        assert_eq!(marks.len(), 2, "five items pack into two hex digits: {v}");
    }
    // Deterministic: the same scores again.
    let again = probe(&args);
    let w: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(v["marks"], w["marks"]);
    // A bad line is refused naming the file, line and field.
    std::fs::write(&set, "a\tctx\tans\tx\ty\n").unwrap();
    let o = probe(&[model, "--set", set.to_str().unwrap(), "--backend", "cpu"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "input refused: {err}");
    assert!(
        err.contains(&format!("{}:1:", set.display())) && err.contains("5 tab-separated fields"),
        "{err}"
    );
    let _ = std::fs::remove_file(&set);
}
