"""The per-call statistics of hif8lab.torch equal the Rust reference (hif8lab_scaling::stats)."""

import json

import numpy as np
import pytest
import torch

from hif8lab import _core
from hif8lab.torch.nn import QatSession, QuantizerId, Recipe


def tensors(rng):
    yield rng.standard_normal(4096).astype(np.float32)
    x = rng.standard_normal(3000).astype(np.float32)
    x[17] = 900.0  # an outlier: above the estimate, overflowing at a small estimate's scale
    x[18] = -4000.0
    x[100:140] = 1e-9  # underflow
    x[200] = 0.0
    yield x
    x = (rng.standard_normal(2048) * 50).astype(np.float32)
    x[5] = np.nan
    x[6] = np.inf
    yield x
    yield np.zeros(64, np.float32)


@pytest.mark.parametrize("fmt,saturate", [("hif8", False), ("hif8", True), ("e4m3", False), ("e5m2", True)])
def test_call_statistics_equal_the_rust_reference(fmt, saturate):
    rng = np.random.default_rng(5)
    recipe = Recipe(estimator="most_recent", window=4, format=fmt, saturate=saturate,
                    target=15.0 if fmt == "hif8" else 448.0)
    session = QatSession(recipe, [QuantizerId(0, "up", "A")], "cpu")
    session.start_step(0)
    compared = 0
    for i, x in enumerate(list(tensors(rng)) * 2):
        session.begin_micro()
        xq = session.call(0, torch.from_numpy(x.copy()))
        scales = session.bank.scales[0].numpy().copy()
        [rec] = session.drain()
        ests = [rec["shadow"][n]["est"] for n in session.estimators]
        ref = json.loads(_core.tensor_stats(x.tobytes(), ests, [float(s) for s in scales],
                                            rec["scale"], fmt, saturate))
        assert rec["numel"] == ref["numel"]
        if ref["amax"] is not None:
            assert np.float32(rec["amax"]) == np.float32(ref["amax"]), i
        assert rec["nonfinite"] == ref["nonfinite"], i
        assert [rec["shadow"][n]["above_est"] for n in session.estimators] == ref["above_est"], i
        assert [rec["shadow"][n]["overflow"] for n in session.estimators] == ref["overflow"], i
        assert rec["underflow"] == ref["underflow"], i
        if ref["sqnr_db"] is None:
            assert rec["sqnr_db"] is None
        else:
            assert abs(rec["sqnr_db"] - ref["sqnr_db"]) < 1e-3, (rec["sqnr_db"], ref["sqnr_db"])
        # the quantized tensor is the Rust codec's at the active scale
        want = np.frombuffer(_core.qdq(x.tobytes(), fmt, rec["scale"], saturate), np.float32)
        got = xq.numpy()
        assert np.array_equal(np.isnan(want), np.isnan(got))
        assert np.array_equal(want[~np.isnan(want)].view(np.uint32), got[~np.isnan(got)].view(np.uint32))
        compared += 1
    assert compared == 8


def operands(rng):
    """The statistics' operands and the sizes where the fused pass changes path (a 16-lane
    tail, one lane, nothing; split over torch's OpenMP team from 2¹⁶ on, the largest value
    and the non-finite ones in the last part)."""
    yield from tensors(rng)
    for n in (0, 1, 15, 16, 17, 33, 1001, 2**16 + 5, 2**20 + 37):
        x = (rng.standard_normal(n) * 3).astype(np.float32)
        if n > 3:
            x[n // 2] = -np.inf
            x[n // 3] = np.nan
        if n > 2**16:
            x[-3] = 1e4
            x[-2] = np.nan
        yield x


@pytest.mark.parametrize("fmt,saturate", [("hif8", False), ("hif8", True), ("e4m3", False), ("e5m2", True)])
def test_the_cpu_pass_is_the_torch_ops_bit_for_bit(fmt, saturate):
    """``amax_qdq_cpu`` (the Rust core on the tensor's memory, what a CPU session runs) and
    ``_call_stats_cpu`` give what the torch ops a GPU session runs give: amax, non-finite
    count and quantized bits equal, the counts equal, the energies to f64 summation order."""
    from hif8lab.torch.fakequant import amax_qdq_cpu, overflow_threshold, qdq
    from hif8lab.torch.session import _amax_nonfinite, _call_stats, _call_stats_cpu

    rng = np.random.default_rng(11)
    threshold = overflow_threshold(fmt)
    overflowed = 0
    for i, x in enumerate(operands(rng)):
        t = torch.from_numpy(x.copy())
        for s in (1.0, 0.004, 37.5):
            amax, nonfinite, xq = amax_qdq_cpu(t, s, fmt, saturate)
            want_amax, want_nonfinite = _amax_nonfinite(t)
            want = qdq(t, torch.tensor(s, dtype=torch.float32), fmt, saturate)
            assert amax.dtype == torch.float32 and nonfinite.dtype == torch.float64
            assert amax.view(torch.int32).item() == want_amax.view(torch.int32).item(), (i, s)
            assert nonfinite.item() == want_nonfinite.item(), (i, s)
            assert torch.equal(torch.isnan(xq), torch.isnan(want)), (i, s)
            ok = ~torch.isnan(want)
            assert torch.equal(xq[ok].view(torch.int32), want[ok].view(torch.int32)), (i, s)
            if x.size == 0:
                continue
            est = torch.tensor([float(amax), 2.5, 1e-3], dtype=torch.float32)
            scale = torch.tensor([s, s * 8, s / 16], dtype=torch.float32)
            row = _call_stats_cpu(t, xq, amax, nonfinite, est, scale, s, fmt, saturate)
            ref = _call_stats(t, xq, est, scale, threshold)
            E = 3
            # [amax, signal, noise, est…, scale…, above…, over…, underflow, nonfinite]
            assert row[0].item() == float(amax)
            assert torch.equal(row[3:3 + 2 * E], ref[2:2 + 2 * E])
            assert torch.equal(row[3 + 2 * E:4 + 4 * E], ref[2 + 2 * E:]), (i, s, row, ref)
            overflowed += int(row[3 + 3 * E:3 + 4 * E].sum().item() > 0)
            assert row[-1].item() == nonfinite.item()
            for k in (1, 2):  # signal, noise: summed in another order
                assert row[k].item() == pytest.approx(ref[k - 1].item(), rel=1e-9, abs=1e-30), (i, s, k)
    assert overflowed > 0  # the overflow counts were exercised, not only zeros compared


def test_long_operands_run_on_torchs_openmp_team():
    """The Rust core finds torch's OpenMP runtime (its team is what a long operand is split
    over), follows torch.set_num_threads, and gives the same bits on 1 and 3 threads."""
    from hif8lab.torch.fakequant import amax_qdq_cpu

    before = torch.get_num_threads()
    x = torch.from_numpy((np.random.default_rng(4).standard_normal(3 * 2**16 + 11) * 5).astype(np.float32))
    x[-1] = float("inf")
    x[7] = float("nan")
    try:
        out = {}
        for n in (1, 3):
            torch.set_num_threads(n)
            assert _core.omp_threads() == n
            amax, nonfinite, xq = amax_qdq_cpu(x, 3.25, "hif8", False)
            out[n] = (np.float32(amax.item()).view(np.uint32), int(nonfinite.item()), xq.clone())
    finally:
        torch.set_num_threads(before)
    assert out[1][:2] == out[3][:2] and out[1][1] == 2
    assert torch.equal(out[1][2].view(torch.int32), out[3][2].view(torch.int32))


def test_the_cpu_pass_refuses_what_it_cannot_read():
    """The raw-address entry points check what they are given: a non-f32 or non-CPU tensor
    by the wrapper, a null, misaligned or overlapping range by the core (by name)."""
    from hif8lab.torch.fakequant import amax_qdq_cpu

    with pytest.raises(ValueError, match="float32 CPU tensor"):
        amax_qdq_cpu(torch.zeros(4, dtype=torch.float64), 1.0)
    x = torch.arange(64, dtype=torch.float32)
    p = x.data_ptr()
    with pytest.raises(ValueError, match="overlap"):
        _core.amax_qdq_at(p, p + 16, 16, 1.0, "hif8", False)
    with pytest.raises(ValueError, match="null"):
        _core.amax_qdq_at(0, p, 4, 1.0, "hif8", False)
    with pytest.raises(ValueError, match="aligned"):
        _core.amax_qdq_at(p + 1, p + 128, 4, 1.0, "hif8", False)
    with pytest.raises(ValueError, match="overflow the address space"):
        _core.amax_qdq_at(p, p + 128, 2**62, 1.0, "hif8", False)
    with pytest.raises(ValueError, match="differ in length"):
        _core.call_stats_at(p, p, 4, [1.0], [1.0, 2.0], 1.0, 1.0, "hif8", False)
    with pytest.raises(ValueError, match="unknown|format"):
        _core.amax_qdq_at(p, p + 128, 4, 1.0, "fp7", False)
    # an empty range reads nothing, wherever it points
    assert _core.amax_qdq_at(p, p, 0, 1.0, "hif8", False) == (0.0, 0)
