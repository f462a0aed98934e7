"""python -m hif8lab.torch.bench: arms in processes of their own, the interval its verdicts
rest on, and a failing arm named."""

import argparse
import statistics

import pytest

from hif8lab.torch import bench


def args(**kw):
    base = dict(shape="tiny", batch=2, context=16, steps=1, rounds=3, compile=False, device="cpu", dtype="f32",
                one_process=False)
    base.update(kw)
    return argparse.Namespace(**base)


def test_the_median_interval_brackets_the_median_and_is_reproducible():
    ratios = [1.02, 1.10, 0.97, 1.05, 1.31, 1.04, 1.08, 0.99, 1.06, 1.03]
    lo, hi = bench.median_ci(ratios)
    assert lo <= statistics.median(ratios) <= hi
    assert min(ratios) <= lo < hi <= max(ratios)
    assert bench.median_ci(ratios) == [lo, hi]
    # tighter rounds, tighter interval; one round, a point
    tight = bench.median_ci([1.05 + 0.001 * (i % 3) for i in range(10)])
    assert tight[1] - tight[0] < hi - lo
    assert bench.median_ci([1.2]) == [1.2, 1.2]


def test_each_arm_runs_in_its_own_process_and_reports_every_figure():
    r = bench.run(args(), "system")
    assert r["processes"] == "one per arm" and r["quantizers"] == 9
    assert set(r["arms"]) == {"eager", "qat", "qat-amax"}
    assert r["arms"]["eager"]["cpu_ratio_to_eager"] == 1.0
    for name, a in r["arms"].items():
        lo, hi = a["cpu_ratio_ci95"]
        assert lo <= a["cpu_ratio_to_eager"] <= hi, name
        assert a["cpu_s"] > 0 and a["step_s"] > 0 and a["page_faults"] >= 0
        # the goals are the 135 M shape's: no verdict on another
        assert "verdict" not in a
    for name in ("qat", "qat-amax"):
        assert 0 < r["arms"][name]["quantizer_cpu_share"] < 1
    c = r["collectives_per_micro_batch"]
    assert c["fused"] == 1 and c["per_call"] == 6


def test_an_arm_that_fails_is_named():
    with pytest.raises(RuntimeError, match=r"bench arm eager: .*nowhere"):
        bench.run(args(device="nowhere", rounds=1), "system")


def test_only_the_goals_setting_is_judged():
    """The goals were fixed for one setting (the 135 M shape, batch 2 × context 128, f32,
    CPU): a bench of any other batch, context, dtype, device or shape prints no verdict."""
    base = dict(shape="smollm2-135m", batch=2, context=128, dtype="f32", device="cpu")
    assert bench.goal_setting(argparse.Namespace(**base))
    for k, v in (("batch", 8), ("context", 512), ("dtype", "bf16"), ("device", "cuda"), ("shape", "tiny")):
        assert not bench.goal_setting(argparse.Namespace(**{**base, k: v})), k
