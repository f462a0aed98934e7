//! Hostile GGUF files and commands given the wrong thing, end to end: metadata that would
//! size the model far beyond its tensors (refused at once, by every command that opens a
//! model), f16 imports that would write ±inf, a killed import's leftovers, QAT with nothing
//! to quantize, `--recompute` given what is not a grid folder, and the exit-code rule.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{arg, tmp};
use hif8lab_train::models::gguf::{self, GgufFile, file::MetaValue};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/gguf")
        .join(name)
}

/// The tiny fixture written to `path` with `edit` applied.
fn edited_gguf(
    path: &Path,
    edit: impl FnOnce(&mut Vec<(String, MetaValue)>, &mut Vec<gguf::write::RawTensor>),
) {
    let bytes = std::fs::read(fixture("tiny-llama-bos.gguf")).unwrap();
    let g = GgufFile::parse(&bytes).unwrap();
    std::fs::write(path, gguf::write::rewrite(&g, &bytes, edit)).unwrap();
}

/// `hif8lab ARGS…`, killed (and the test failed) if it runs past `limit`: a command that
/// sizes memory from metadata would otherwise run for minutes.
fn bounded(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn refused(o: &Output, code: i32, words: &[&str]) -> String {
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(code), "{e}");
    for w in words {
        assert!(e.contains(w), "says {w}: {e}");
    }
    e
}

#[test]
fn a_block_count_of_2_to_the_31_is_refused_by_every_command_at_once() {
    let dir = tmp("hostile-gguf", "bomb");
    std::fs::create_dir_all(&dir).unwrap();
    let bomb = dir.join("bomb.gguf");
    edited_gguf(&bomb, |m, _| {
        m.iter_mut()
            .find(|(k, _)| k == "llama.block_count")
            .unwrap()
            .1 = MetaValue::Uint(1 << 31);
    });
    let text = dir.join("text.txt");
    std::fs::write(&text, "The capital of France is Paris. ".repeat(8)).unwrap();
    let (b, t) = (arg(&bomb), arg(&text));
    let out = dir.join("out");
    let o = arg(&out);
    for args in [
        vec!["import", "gguf", b, "--out", o],
        vec!["eval", b, "--text", t, "--backend", "cpu"],
        vec![
            "sample",
            b,
            "--prompt",
            "The",
            "--tokens",
            "2",
            "--backend",
            "cpu",
        ],
        vec!["probe", b, "--backend", "cpu"],
        vec![
            "train",
            "--init-from",
            b,
            "--preset",
            "smoke",
            "--steps",
            "1",
            "--out",
            o,
            "--backend",
            "cpu",
            "--quiet",
        ],
    ] {
        let r = bounded(&args, Duration::from_secs(60));
        refused(&r, 2, &[b, "'llama.block_count' is 2147483648", "2 blocks"]);
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_f16_import_that_would_overflow_is_refused_and_a_killed_imports_leftovers_go() {
    let dir = tmp("hostile-gguf", "f16");
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.gguf");
    let mut which = String::new();
    edited_gguf(&big, |_, tensors| {
        let t = tensors
            .iter_mut()
            .find(|t| t.ggml_type == 0 && t.name.starts_with("blk."))
            .expect("an f32 tensor in the fixture");
        t.data[..4].copy_from_slice(&1.0e6f32.to_le_bytes());
        which = t.name.clone();
    });
    let out = dir.join("hf");
    // A folder a killed import left (its process gone) beside the target.
    let stale = dir.join(".hf.tmp-4194000");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("model.safetensors"), b"half").unwrap();
    let (b, o) = (arg(&big), arg(&out));
    let r = crate::common::hif8lab(&["import", "gguf", b, "--out", o, "--dtype", "f16"]);
    refused(&r, 2, &[b, "1 weights", "--allow-overflow"]);
    assert!(!out.exists(), "nothing written");
    let r = crate::common::hif8lab(&[
        "import",
        "gguf",
        b,
        "--out",
        o,
        "--dtype",
        "f16",
        "--allow-overflow",
    ]);
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{e}");
    assert!(e.contains("written as ±inf"), "{e}");
    assert!(!stale.exists(), "the killed import's folder was removed");
    assert!(out.join("model.safetensors").is_file());
    // The same file as f32 imports and loads back (the value is finite there).
    let out32 = dir.join("hf32");
    let r = crate::common::hif8lab(&["import", "gguf", b, "--out", arg(&out32)]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let _ = which;
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn qat_with_nothing_to_quantize_says_so_loudly() {
    // A 2-layer model: the default placement keeps both blocks in high precision.
    let out = tmp("hostile-gguf", "qat-nothing");
    let r = crate::common::hif8lab(&[
        "train",
        "--init-from",
        arg(&fixture("tiny-llama.gguf")),
        "--preset",
        "smoke",
        "--steps",
        "1",
        "--out",
        arg(&out),
        "--backend",
        "cpu",
        "--quiet",
        "--set",
        "model.context=16",
        "--set",
        "train.eval_every=0",
    ]);
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{e}");
    assert!(
        e.contains("warning: qat.enabled = true but no block is quantized")
            && e.contains("qat.blocks=[0]"),
        "{e}"
    );
    let summary = crate::common::json_file(&out.join("summary.json"));
    assert_eq!(summary["quantizers"], 0);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn recompute_is_refused_where_it_cannot_mean_anything_and_creates_nothing() {
    let dir = tmp("hostile-gguf", "recompute");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("results.md");
    std::fs::write(&file, b"x").unwrap();
    let typo = dir.join("typo/dir");
    for (args, says) in [
        (vec!["grid", "--recompute", arg(&typo)], "no such folder"),
        (vec!["grid", "--recompute", arg(&file)], "is a file"),
        (
            vec!["grid", "--recompute", arg(&dir)],
            "holds no runs.jsonl.gz",
        ),
    ] {
        let r = crate::common::hif8lab(&args);
        refused(&r, 2, &["--recompute", says]);
    }
    assert!(!dir.join("typo").exists(), "no folder made");
    // `pretrain --recompute` names the grid command instead of pretraining into ./runs.
    let r = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
        .args(["pretrain", "--recompute", arg(&dir)])
        .current_dir(&dir)
        .output()
        .unwrap();
    refused(&r, 2, &["--recompute", "hif8lab grid --recompute"]);
    assert!(!dir.join("runs").exists(), "nothing pretrained");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exit_codes_follow_one_rule_input_refused_is_2() {
    let dir = tmp("hostile-gguf", "codes");
    std::fs::create_dir_all(&dir).unwrap();
    let set = dir.join("probes.tsv");
    std::fs::write(&set, "a\tctx\tans\tx\ty\n").unwrap();
    let missing = dir.join("missing");
    // Each input that is wrong, whatever reads it: 2.
    for args in [
        vec![
            "probe",
            arg(&fixture("tiny-llama.gguf")),
            "--set",
            arg(&set),
        ],
        vec!["eval", arg(&missing), "--text", arg(&set)],
        vec!["import", "gguf", arg(&missing), "--out", arg(&dir)],
        vec!["train", "--resume", arg(&missing)],
    ] {
        let r = crate::common::hif8lab(&args);
        let e = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {e}");
    }
    // A .gguf whose magic is damaged is said to be no GGUF file (not "not a valid
    // safetensors file"); a folder named .gguf is said to be a folder (not "No such device").
    let damaged = dir.join("damaged.gguf");
    let mut bytes = std::fs::read(fixture("tiny-llama.gguf")).unwrap();
    bytes[0] = b'X';
    std::fs::write(&damaged, bytes).unwrap();
    let folder = dir.join("folder.gguf");
    std::fs::create_dir_all(&folder).unwrap();
    for (model, says) in [(&damaged, "not a GGUF file"), (&folder, "is a folder")] {
        for args in [
            vec!["eval", arg(model), "--text", arg(&set)],
            vec!["import", "gguf", arg(model), "--out", arg(&missing)],
        ] {
            let r = crate::common::hif8lab(&args);
            refused(&r, 2, &[arg(model), says]);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_gguf_tokenizer_cache_is_checked_not_trusted_and_never_required() {
    let dir = tmp("hostile-gguf", "cache");
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let text = dir.join("text.txt");
    std::fs::write(
        &text,
        "The capital of France is Paris, naïve café. ".repeat(3),
    )
    .unwrap();
    let gguf = fixture("tiny-llama-bos.gguf");
    let eval = |cache: &Path| -> serde_json::Value {
        let o = Command::new(env!("CARGO_BIN_EXE_hif8lab"))
            .args([
                "eval",
                arg(&gguf),
                "--text",
                arg(&text),
                "--backend",
                "cpu",
                "--json",
            ])
            .env("HIF8LAB_CACHE", cache)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let first = eval(&cache);
    let cached: Vec<PathBuf> = std::fs::read_dir(cache.join("gguf-tokenizers"))
        .unwrap()
        .map(|e| e.unwrap().path().join("tokenizer.json"))
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    let good = std::fs::read(&cached[0]).unwrap();
    // A stale copy (another valid tokenizer) and a damaged one: written again, same result.
    let stale = hif8lab_train::models::tokenizer::byte_tokenizer_json().to_string();
    for wrong in [stale.as_bytes(), b"{".as_slice()] {
        std::fs::write(&cached[0], wrong).unwrap();
        let again = eval(&cache);
        assert_eq!(again["tokens"], first["tokens"]);
        assert_eq!(again["loss"], first["loss"]);
        assert_eq!(std::fs::read(&cached[0]).unwrap(), good);
    }
    // A cache that cannot be written does not stop a read-only command.
    let unwritable = Path::new("/proc/hif8lab-cache-nope");
    let elsewhere = eval(unwritable);
    assert_eq!(elsewhere["loss"], first["loss"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hugging_face_config_with_2_to_the_31_layers_is_refused_at_once() {
    let d = tmp("hostile-gguf", "hf-layers");
    std::fs::create_dir_all(&d).unwrap();
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hf/tiny-mistral-f32");
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
    }
    let cfg = d.join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    v["num_hidden_layers"] = serde_json::json!(1u64 << 31);
    std::fs::write(&cfg, v.to_string()).unwrap();
    let text = d.join("eval.txt");
    let r = bounded(
        &["eval", arg(&d), "--text", arg(&text), "--backend", "cpu"],
        Duration::from_secs(60),
    );
    refused(
        &r,
        2,
        &[
            "config.json",
            "'num_hidden_layers' is 2147483648",
            "2 layers",
        ],
    );
    let _ = std::fs::remove_dir_all(&d);
}
