"""Same weights, same data, same recipe: a tiny Llama trained by hif8lab.torch and by
hif8lab's own trainer (the Rust CPU backend) draws the same sequences, makes the same
quantizer decisions and reaches losses within a stated tolerance."""

import json
import os
import subprocess
from collections import Counter

import pytest

from conftest import train
from hif8lab.scaling import read_trace

#: Losses may drift apart by float reassociation (torch's GEMMs vs the lab's): relative.
LOSS_TOLERANCE = 1e-3
#: The loss of the step where saturated gradients first make a spike (target 30000): relative.
SPIKE_TOLERANCE = 1e-2


def lab(*args):
    exe = os.environ.get("HIF8LAB_BIN")
    if not exe:
        pytest.skip("HIF8LAB_BIN not set (scripts/test.sh sets it)")
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    assert r.returncode == 0, f"hif8lab {' '.join(args)}: {r.stderr}"
    return r


def counts(trace_path):
    """Per (block, module, role, estimator): calls above the estimate, elements overflowed."""
    above, over = Counter(), Counter()
    for r in read_trace(trace_path).records:
        for name, s in r["shadow"].items():
            key = (r["block"], r["module"], r["role"], name)
            above[key] += s["above_est"] > 0
            over[key] += s["overflow"]
    return above, over


@pytest.mark.parametrize("target", ["15", "30000"])
def test_torch_and_the_lab_make_the_same_decisions(tmp_path, corpus, target):
    """Target 15 (the paper's); 30000 puts the estimate so close to HiF8's overflow threshold
    that calls above it overflow, so the overflow counts are compared too (saturating, so that
    training goes on)."""
    lab("train", "--preset", "smoke", "--set", "qat.enabled=false", "--steps", "1", "--backend", "cpu",
        "--quiet", "--out", str(tmp_path / "init"))
    lab("export", "hf", str(tmp_path / "init"), "--out", str(tmp_path / "hf"))
    lab("train", "--preset", "smoke", "--init-from", str(tmp_path / "hf"), "--set", f"data.corpus={corpus}",
        "--set", "qat.warmup_steps=0", "--set", "train.trace_every=1", "--set", f"qat.scaling.target={target}",
        "--set", "qat.scaling.overflow=saturate", "--steps", "20", "--backend", "cpu",
        "--quiet", "--out", str(tmp_path / "lab"))
    # the smoke preset: batch 4, lr 3e-3, AdamW (0.9, 0.95) wd 0.1, clip 1, seed 1; 4 blocks
    # of which the lab keeps the first and the last in high precision
    train(tmp_path / "torch", corpus, "--model", str(tmp_path / "hf"), "--tokenizer", "bytes", "--seed", "1",
          "--lr", "3e-3", "--steps", "20", "--micro-batch", "4", "--context", "32", "--skip-first", "1",
          "--skip-last", "1", "--weight-decay", "0.1", "--grad-clip", "1.0", "--target", target, "--saturate")
    a = [json.loads(x) for x in (tmp_path / "lab" / "metrics.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (tmp_path / "torch" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in a] == [m["step"] for m in b] == list(range(20))
    # the same sequences through the same weights: the first loss agrees to f32 rounding
    assert abs(a[0]["loss"] - b[0]["loss"]) / a[0]["loss"] < 1e-6
    if target == "30000":
        # Until the first heavy clipping (thousands of gradient elements saturated in one
        # step) both make the same decisions, overflow counts included; that step clips
        # within 2 % of the same count, and after it the two are different trajectories
        # (a clipped gradient amplifies float rounding), so only that far is compared.
        heavy = next(i for i, m in enumerate(a) if m["overflow"] > 1000)
        assert all(a[i]["overflow"] == b[i]["overflow"] for i in range(heavy)), (a[:heavy], b[:heavy])
        assert sum(a[i]["overflow"] for i in range(heavy)) > 10
        assert abs(a[heavy]["overflow"] - b[heavy]["overflow"]) <= a[heavy]["overflow"] // 50
        assert [m["calls_above_est"] for m in a[:heavy + 1]] == [m["calls_above_est"] for m in b[:heavy + 1]]
        assert max(abs(x["loss"] - y["loss"]) / x["loss"] for x, y in zip(a[:heavy], b)) < LOSS_TOLERANCE
        # The heavy step's own loss comes after updates made from saturated gradients (the
        # preceding steps clip tens of elements): a loss spike (about +18 % here) that carries
        # the two GEMM orders' rounding further. Measured: 4e-6 before it, 1.01e-3 at it on an
        # AVX2 CPU (below 1e-3 on AVX-512 ones), so it gets its own, wider bound.
        assert abs(a[heavy]["loss"] - b[heavy]["loss"]) / a[heavy]["loss"] < SPIKE_TOLERANCE
        return
    worst = max(abs(x["loss"] - y["loss"]) / x["loss"] for x, y in zip(a, b))
    assert worst < LOSS_TOLERANCE, worst
    assert [m["calls_above_est"] for m in a] == [m["calls_above_est"] for m in b]
    lab_above, lab_over = counts(tmp_path / "lab" / "trace.jsonl")
    torch_above, torch_over = counts(tmp_path / "torch" / "trace.jsonl")
    assert len(lab_above) == 2 * 3 * 3 * 5  # blocks 1-2, gate/up/down, A/W/G, five estimators
    # the active estimator's decisions agree step by step (above); a shadow whose estimate
    # lies within float rounding of the amax may count one call more or fewer
    assert lab_above.keys() == torch_above.keys()
    assert all(abs(lab_above[k] - torch_above[k]) <= 1 for k in lab_above), \
        {k: (lab_above[k], torch_above[k]) for k in lab_above if lab_above[k] != torch_above[k]}
    differ = sum(lab_above[k] != torch_above[k] for k in lab_above)
    assert differ <= len(lab_above) // 10, differ
    total = sum(lab_above.values())
    assert total > 50  # there were decisions to agree on
    assert abs(total - sum(torch_above.values())) <= total // 100
    assert lab_over == torch_over


def test_bf16_precision_matches_torch_autocast(tmp_path, corpus):
    """`train.precision = "bf16"` (linear layers' operands that are not fake-quantized rounded
    to bf16, f32 accumulation, f32 master weights) against hif8lab.torch under
    `torch.autocast("cpu", torch.bfloat16)` from the same weights, 20 QAT steps. The first
    step's loss agrees to 1e-4 relative (measured 6e-6): the same forward numerics where it
    matters. Later steps drift much further than in f32 (worst measured 2.1e-2 over 20 steps,
    against 2e-5 in f32; the bound is 5e-2): autocast also stores every GEMM's output in bf16 and runs the
    elementwise ops between them (SwiGLU, RoPE, attention) in bf16, which the lab's bf16
    precision does not emulate, and QAT's scales amplify the gradients' differences. The lab
    runs its bf16-exact products on whatever kernel this CPU has (`train.gemm = "auto"`; the
    run records which)."""
    lab("train", "--preset", "smoke", "--set", "qat.enabled=false", "--steps", "1", "--backend", "cpu",
        "--quiet", "--out", str(tmp_path / "init"))
    lab("export", "hf", str(tmp_path / "init"), "--out", str(tmp_path / "hf"))
    lab("train", "--preset", "smoke", "--init-from", str(tmp_path / "hf"), "--set", f"data.corpus={corpus}",
        "--set", "qat.warmup_steps=0", "--set", "train.precision=bf16", "--steps", "20", "--backend", "cpu",
        "--quiet", "--out", str(tmp_path / "lab"))
    train(tmp_path / "torch", corpus, "--model", str(tmp_path / "hf"), "--tokenizer", "bytes", "--seed", "1",
          "--lr", "3e-3", "--steps", "20", "--micro-batch", "4", "--context", "32", "--skip-first", "1",
          "--skip-last", "1", "--weight-decay", "0.1", "--grad-clip", "1.0", "--dtype", "bf16")
    a = [json.loads(x) for x in (tmp_path / "lab" / "metrics.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (tmp_path / "torch" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in a] == [m["step"] for m in b] == list(range(20))
    assert abs(a[0]["loss"] - b[0]["loss"]) / a[0]["loss"] < 1e-4
    worst = max(abs(x["loss"] - y["loss"]) / x["loss"] for x, y in zip(a, b))
    assert worst < 5e-2, worst
    summary = json.loads((tmp_path / "lab" / "summary.json").read_text())
    assert summary["precision"] == "bf16"
    segments = json.loads((tmp_path / "lab" / "segments.json").read_text())
    assert segments[0]["gemm"] in ("f32", "avx512-bf16", "amx-bf16")
