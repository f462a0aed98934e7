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
