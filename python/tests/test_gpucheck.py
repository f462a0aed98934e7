"""The torch half of scripts/gpu-check.sh: what it does without a GPU, its comparisons run on
the CPU, and its JSON writer."""

import json

import numpy as np
import pytest
import torch

from hif8lab.torch import gpucheck


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_says_so_and_exits_3(tmp_path, capsys):
    out = tmp_path / "g.json"
    assert gpucheck.main(["--out", str(out)]) == gpucheck.NO_GPU == 3
    doc = json.loads(out.read_text())
    assert doc["gpu"] is False and "no CUDA device" in doc["reason"]
    assert "no GPU" in capsys.readouterr().err


def test_the_checks_run_on_the_cpu_and_agree_with_the_rust_core(tmp_path):
    out = tmp_path / "g.json"
    assert gpucheck.main(["--out", str(out), "--device", "cpu", "--steps", "2"]) == 0
    doc = json.loads(out.read_text())
    assert doc["gpu"] is False and doc["failed"] == []
    assert doc["codec"]["cases"] == 30 and doc["codec"]["differ"] == 0
    assert doc["codec"]["values_per_case"] > 600
    assert doc["estimators"]["compared"] > 1000 and doc["estimators"]["differ"] == 0
    arms = doc["train"]["arms"]
    assert set(arms) == {"eager", "qat", "qat-amax"} and doc["train"]["dtype"] == "bf16"
    assert all(a["step_s"] > 0 for a in arms.values())


def test_the_comparisons_can_fail():
    values = gpucheck.all_bf16()[::501]
    assert gpucheck.differing(values, values) == 0
    changed = values.copy()
    changed[3] = np.nextafter(changed[3], np.float32(np.inf))
    assert gpucheck.differing(values, changed) == 1
    # NaN payloads are not compared, NaN against a number is a difference
    assert gpucheck.differing(np.float32([np.nan]), np.float32([-np.nan])) == 0
    assert gpucheck.differing(np.float32([np.nan]), np.float32([1.0])) == 1
    doc = {"codec": {"differ": 2}, "estimators": {"differ": 1, "compared": 10},
           "train": {"arms": {"eager": {"step_s": 0.0}}}}
    failed = gpucheck.verdict(doc)
    assert len(failed) == 3 and "codec" in failed[0] and "estimators" in failed[1]
    assert gpucheck.verdict({"codec": {"differ": 0}, "estimators": {"differ": 0, "compared": 5},
                             "train": {"arms": {"eager": {"step_s": 0.1}}}}) == []


def test_the_document_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    out = tmp_path / "sub" / "g.json"
    gpucheck.write_atomic(out, {"a": 1})
    assert json.loads(out.read_text()) == {"a": 1}

    def broken(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(gpucheck.json, "dump", broken)
    with pytest.raises(OSError):
        gpucheck.write_atomic(out, {"a": 2})
    assert json.loads(out.read_text()) == {"a": 1}
    assert sorted(p.name for p in out.parent.iterdir()) == ["g.json"]


def test_bad_arguments_exit_2(tmp_path):
    assert gpucheck.main(["--out", str(tmp_path / "g.json"), "--steps", "many"]) == 2
