"""The scale sequence of every quantizer of a torch run equals a replay of its trace by the
Rust estimators (every estimator, cold start, the warmup hand-over), and `hif8lab replay`
of the trace counts what the trace recorded."""

import json
import os
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from conftest import train
from hif8lab import scaling as rs

ESTIMATORS = "most_recent,ema(0.1),mean_window,max_window,current"


def bits(v):
    return np.float32(v).view(np.uint32)


@pytest.fixture(scope="module")
def run(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("replay") / "run"
    train(out, corpus, "--steps", "14", "--context", "32", "--micro-batch", "2", "--global-batch", "4",
          "--skip-first", "1", "--skip-last", "1", "--window", "6", "--warmup-steps", "3",
          "--estimator", "ema(0.1)", "--lr", "3e-3", "--flush-every", "4")
    return out


def test_every_scale_equals_the_rust_replay(run):
    trace = rs.read_trace(run / "trace.jsonl")
    h = trace.header
    assert h["estimator"] == "ema(0.1)" and h["window"] == 6
    series = defaultdict(list)
    for r in trace.records:
        series[(r["block"], r["module"], r["role"])].append(r)
    assert len(series) == 4 * 3 * 3
    config = rs.ScalingConfig(estimator=h["estimator"], window=h["window"], target=h["target"])
    checked = 0
    for key, records in series.items():
        # QAT switched on at step 3 (after warmup) with empty histories: the first traced
        # call is a cold start; two micro-batches a step
        assert records[0]["step"] == 3 and len(records) == 11 * 2
        ref = rs.Quantizer(config)
        for r in records:
            want = ref.call(r["amax"])
            a = ref.active_index
            assert bits(r["scale"]) == bits(want[a].scale), (key, r["step"], r["micro"])
            assert bits(r["est"]) == bits(want[a].est), (key, r["step"], r["micro"])
            for k, name in enumerate(ref.estimators):
                assert bits(r["shadow"][name]["est"]) == bits(want[k].est), (key, name, r["step"])
                checked += 1
    assert checked == 36 * 22 * 5
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["qat_enabled"] for m in metrics] == [False] * 3 + [True] * 11


def test_hif8lab_replay_counts_what_the_trace_recorded(run):
    exe = os.environ.get("HIF8LAB_BIN")
    if not exe:
        pytest.skip("HIF8LAB_BIN not set (scripts/test.sh sets it)")
    r = subprocess.run([exe, "replay", str(run / "trace.jsonl"), "--window", "6", "--estimators", ESTIMATORS,
                        "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    trace = rs.read_trace(run / "trace.jsonl")
    above = defaultdict(lambda: defaultdict(int))
    for rec in trace.records:
        name = f"block{rec['block']}.{rec['module']}.{rec['role']}"
        for est_name, s in rec["shadow"].items():
            above[name][est_name] += rec["amax"] > s["est"]
    quantizers = report["quantizers"]
    assert len(quantizers) == 36
    for q in quantizers:
        assert set(q["estimators"]) == set(above[q["name"]])
        for name, e in q["estimators"].items():
            assert e["calls"] == 22
            assert e["calls_above_est"] == above[q["name"]][name], (q["name"], name)


def test_unbounded_windows_are_refused_before_anything_is_allocated():
    """A window of 2**40 is refused by the Rust plan (ValueError naming the window), in the
    replay, the reference quantizer and a torch recipe alike."""
    import pytest
    from hif8lab import scaling as rs
    from hif8lab.torch import Recipe

    with pytest.raises(ValueError, match="window"):
        rs.replay({"q": [1.0, 2.0]}, window=2**40)
    with pytest.raises(ValueError, match="window"):
        rs.Quantizer(rs.ScalingConfig(estimator="max_window(1099511627776)"))
    with pytest.raises(ValueError, match="window"):
        Recipe(window=2**40)
    with pytest.raises(ValueError, match="window"):
        Recipe(estimator="max_window(18446744073709551615)")
