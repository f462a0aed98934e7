"""`hif8lab grid --engine torch`: the grid's cells trained by hif8lab.torch.train under
torchrun (2 gloo processes) from a tiny Hugging Face model, read back, scored by the lab's
probes and reported with verdicts; the same cell on the lab's engine draws the same first
batch through the same weights (the same first loss); a second invocation reuses every run,
and a run whose summary is missing resumes from its checkpoint."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from conftest import env

RUNS = "baseline-low,most_recent-low,max_window-low"
STEPS = 6


def lab(*args, check=True):
    exe = os.environ.get("HIF8LAB_BIN")
    if not exe:
        pytest.skip("HIF8LAB_BIN not set (scripts/test.sh sets it)")
    e = env()
    e["HIF8LAB_PYTHON"] = sys.executable
    r = subprocess.run([exe, *args], capture_output=True, text=True, env=e)
    if check:
        assert r.returncode == 0, f"hif8lab {' '.join(args)}:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return r


def grid_config(tmp_path, hf):
    c = json.loads((hf / "config.json").read_text())
    text = f"""
[base]
model = "{hf}"

[model]
vocab = {c["vocab_size"]}
d_model = {c["hidden_size"]}
layers = {c["num_hidden_layers"]}
heads = {c["num_attention_heads"]}
kv_heads = {c["num_key_value_heads"]}
d_ff = {c["intermediate_size"]}
context = 32
norm_eps = {c["rms_norm_eps"]}
rope_theta = {float(c["rope_theta"])}
tie_embeddings = {str(c.get("tie_word_embeddings", False)).lower()}
max_positions = {c["max_position_embeddings"]}

[continue]
steps = {STEPS}
batch = 2
lr_high = 1e-3
lr_low = 1e-4
qat_warmup_steps = 2
eval_every = {STEPS}
e4m3 = false

[data]
bytes = 20000

[scaling]
window = 64
target = 15.0
"""
    p = tmp_path / "grid.toml"
    p.write_text(text)
    return p


def records(folder):
    with gzip.open(folder / "runs.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_the_grid_on_torchrun_is_reported_by_the_lab(tmp_path):
    lab("train", "--preset", "smoke", "--set", "qat.enabled=false", "--steps", "1", "--backend", "cpu",
        "--quiet", "--out", str(tmp_path / "init"))
    hf = tmp_path / "hf"
    lab("export", "hf", str(tmp_path / "init"), "--out", str(hf))
    config = grid_config(tmp_path, hf)
    out = tmp_path / "torch-grid"
    lab("grid", "--config", str(config), "--engine", "torch", "--nproc", "2", "--runs", RUNS,
        "--out", str(out))
    md = (out / "results.md").read_text()
    assert "Engine (`grid --engine torch`): the continued runs were trained by hif8lab.torch, torchrun, 2 processes (DDP)" in md, md
    assert "## Verdicts: " in md and "## Manipulation check" in md, md
    rows = [r for r in records(out) if r["kind"] == "run"]
    assert sorted(r["run"] for r in rows) == sorted(RUNS.split(","))
    for r in rows:
        s = r["summary"]
        assert s["backend"] == "torch" and s["status"] == "finished", s["name"]
        assert len(s["losses"]) == STEPS and all(x > 0 for x in s["losses"]), s["losses"]
        assert s["probes"]["knowledge_items"] > 0 and s["probes"]["step"] == STEPS, s["probes"]
        if r["run"] == "baseline-low":
            assert s["estimator"] == "none" and s["counts"]["calls"] == 0
            continue
        # Every call of the first process counted for every estimator, and the quantizer table.
        assert s["counts"]["calls"] > 0 and len(s["counts"]["estimators"]) == len(s["estimators"]) >= 2
        assert s["per_quantizer"] and sum(q["calls"] for q in s["per_quantizer"]) == s["counts"]["calls"]
        assert s["sqnr"], "SQNR per role from the trace"
        run_dir = out / "runs" / r["run"]
        assert (run_dir / "trace.jsonl").is_file() and (run_dir / "trace.rank1.jsonl").is_file()
        assert all((run_dir / f).is_file() for f in ("config.toml", "summary.json", "probes.jsonl"))
    assert not any((out / "torch").glob("hf-*")), "the exports are removed once scored"

    # The same cell on the lab's engine: the same text, order and weights give the same first loss.
    ref = tmp_path / "lab-grid"
    lab("grid", "--config", str(config), "--runs", "max_window-low", "--out", str(ref))
    a = next(r for r in records(ref) if r["kind"] == "run")["summary"]["losses"]
    b = next(r for r in rows if r["run"] == "max_window-low")["summary"]["losses"]
    assert abs(a[0] - b[0]) / a[0] < 1e-5, (a[0], b[0])

    # Again: every run is finished and reused, the report the same byte for byte.
    before = (out / "runs" / "max_window-low" / "trace.jsonl").stat().st_mtime_ns
    lab("grid", "--config", str(config), "--engine", "torch", "--nproc", "2", "--runs", RUNS,
        "--out", str(out))
    assert (out / "results.md").read_text() == md
    assert (out / "runs" / "max_window-low" / "trace.jsonl").stat().st_mtime_ns == before
    # A run the trainer began and the lab did not finish resumes from its newest checkpoint
    # (here the last): the same summary, the same report.
    (out / "runs" / "max_window-low" / "summary.json").unlink()
    lab("grid", "--config", str(config), "--engine", "torch", "--nproc", "2", "--runs", RUNS,
        "--out", str(out))
    assert (out / "results.md").read_text() == md


def test_what_the_torch_engine_cannot_run_is_refused_by_name(tmp_path):
    r = lab("grid", "--preset", "grid-micro", "--engine", "torch", "--out", str(tmp_path / "g"), check=False)
    assert r.returncode != 0 and "--engine torch" in r.stderr and "real base" in r.stderr, r.stderr
    r = lab("grid", "--preset", "grid-micro", "--nproc", "2", "--out", str(tmp_path / "g"), check=False)
    assert r.returncode != 0 and "are options of --engine torch" in r.stderr, r.stderr
