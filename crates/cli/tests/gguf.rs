//! GGUF files end to end (fixtures written by tests/fixtures/gen_gguf_fixtures.py): `import
//! gguf`, `eval`/`sample` of the file itself with the tokenizer's special tokens, `train
//! --init-from` a .gguf and `export hf` keeping the tokenizer and generation settings, and
//! output that cannot be written (a closed pipe, a full disk).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::{Path, PathBuf};

use crate::common::{hif8lab, json_file, ok};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/gguf")
        .join(name)
}

fn tmp(name: &str) -> PathBuf {
    crate::common::tmp("cli-gguf", name)
}

fn s(p: &Path) -> &str {
    crate::common::arg(p)
}

fn text_file() -> PathBuf {
    let t = tmp("text").with_extension("txt");
    std::fs::write(
        &t,
        "The capital of France is Paris, the capital of France. ".repeat(6),
    )
    .unwrap();
    t
}

#[test]
fn import_writes_a_folder_that_evaluates_as_the_file() {
    let gguf = fixture("tiny-llama-bos.gguf");
    let out = tmp("import");
    let o = hif8lab(&["import", "gguf", s(&gguf), "--out", s(&out)]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("Q4_K") && err.contains("tied"), "{err}");
    for f in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let tc = json_file(&out.join("tokenizer_config.json"));
    assert_eq!(tc["add_bos_token"], true);
    assert!(
        tc["chat_template"]
            .as_str()
            .unwrap()
            .contains("<|im_start|>")
    );
    assert_eq!(
        json_file(&out.join("generation_config.json"))["eos_token_id"],
        2
    );
    assert_eq!(
        json_file(&out.join("config.json"))["tie_word_embeddings"],
        true
    );

    let text = text_file();
    let eval = |model: &Path, extra: &[&str]| -> Value {
        let mut args = vec![
            "eval",
            s(model),
            "--text",
            s(&text),
            "--backend",
            "cpu",
            "--json",
        ];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(&hif8lab(&args))).unwrap()
    };
    let a = eval(&gguf, &[]);
    let b = eval(&out, &[]);
    assert_eq!(
        a["loss"], b["loss"],
        "the file and its import score the same"
    );
    assert_eq!(a["add_special_tokens"], true);
    let plain = eval(&gguf, &["--no-special-tokens"]);
    assert_eq!(plain["add_special_tokens"], false);
    assert_eq!(
        plain["tokens"].as_u64().unwrap() + 1,
        a["tokens"].as_u64().unwrap(),
        "BOS added by the tokenizer's post-processor, and only then"
    );
    // The window is never longer than the text, and one window is one pass.
    let (context, tokens) = (
        a["context"].as_u64().unwrap(),
        a["tokens"].as_u64().unwrap(),
    );
    assert!(context <= tokens);
    assert_eq!(
        a["batch"].as_u64().unwrap(),
        tokens.div_ceil(context).min(4)
    );
    // A second import over the written folder is refused; so is a file that is not GGUF.
    let o = hif8lab(&["import", "gguf", s(&gguf), "--out", s(&out)]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not an empty folder"));
    let o = hif8lab(&["import", "gguf", s(&text), "--out", s(&tmp("notgguf"))]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains(s(&text)) && e.contains("not a GGUF file"), "{e}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn init_from_a_gguf_file_and_export_keep_its_tokenizer_settings() {
    let gguf = fixture("tiny-llama-bos.gguf");
    let run = tmp("run");
    ok(&hif8lab(&[
        "train",
        "--init-from",
        s(&gguf),
        "--preset",
        "smoke",
        "--steps",
        "2",
        "--out",
        s(&run),
        "--backend",
        "cpu",
        "--quiet",
        "--set",
        "model.context=16",
        "--set",
        "train.batch=2",
        "--set",
        "train.eval_every=0",
    ]));
    let out = tmp("export");
    ok(&hif8lab(&["export", "hf", s(&run), "--out", s(&out)]));
    let tc = json_file(&out.join("tokenizer_config.json"));
    assert!(
        tc["chat_template"]
            .as_str()
            .unwrap()
            .contains("<|im_start|>"),
        "{tc}"
    );
    assert_eq!(tc["add_bos_token"], true);
    assert_eq!(
        json_file(&out.join("generation_config.json"))["eos_token_id"],
        2
    );
    assert_eq!(json_file(&out.join("config.json"))["dtype"], "float32");
    // Greedy text of the exported folder (the run's weights).
    let o = hif8lab(&[
        "sample",
        s(&out),
        "--prompt",
        "The",
        "--tokens",
        "4",
        "--temperature",
        "0",
        "--backend",
        "cpu",
    ]);
    assert!(ok(&o).starts_with("The"));
    std::fs::remove_dir_all(&run).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn output_that_cannot_be_written_is_an_error_and_a_closed_pipe_ends_quietly() {
    let gguf = fixture("tiny-llama.gguf");
    let text = text_file();
    let bin = env!("CARGO_BIN_EXE_hif8lab");
    // A full disk: the result is lost, so the exit is a failure naming standard output.
    for args in [
        format!(
            "'{bin}' eval '{}' --text '{}' --backend cpu --json",
            s(&gguf),
            s(&text)
        ),
        format!(
            "'{bin}' sample '{}' --prompt The --tokens 5 --backend cpu",
            s(&gguf)
        ),
    ] {
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{args} > /dev/full"))
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && e.contains("standard output"),
            "{args}: {e}"
        );
    }
    // A closed pipe: generation stops at once, quietly, with 128 + SIGPIPE.
    let start = std::time::Instant::now();
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "'{bin}' sample '{}' --prompt The --tokens 18446744073709551615 --backend cpu | head -c 2 >/dev/null; echo \"status ${{PIPESTATUS[0]}}\"",
            s(&gguf)
        ))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("status 141"),
        "{out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).trim().is_empty(),
        "quiet: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(start.elapsed().as_secs() < 60);
    // A batch beyond the windows there are is capped at them; a context beyond the model's
    // positions is refused by name.
    let o = hif8lab(&[
        "eval",
        s(&gguf),
        "--text",
        s(&text),
        "--backend",
        "cpu",
        "--json",
        "--batch",
        "1000000000000",
    ]);
    let doc: Value = serde_json::from_str(&ok(&o)).unwrap();
    let windows = doc["tokens"]
        .as_u64()
        .unwrap()
        .div_ceil(doc["context"].as_u64().unwrap());
    assert_eq!(doc["batch"].as_u64().unwrap(), windows);
    let o = hif8lab(&[
        "eval",
        s(&gguf),
        "--text",
        s(&text),
        "--backend",
        "cpu",
        "--context",
        "18446744073709551615",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("max_position_embeddings"));
}
