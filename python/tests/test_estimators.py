"""The on-device estimators (hif8lab.torch.bank) equal the Rust QuantizerState call by call."""

import numpy as np
import pytest
import torch

from hif8lab import scaling as rs
from hif8lab.torch.bank import QuantBank
from hif8lab.torch.gpucheck import amax_sequences

ALL = ("most_recent", "max_window", "mean_window", "ema(0.1)", "ema(0.37)", "holt(0.5,0.1,0.9)",
       "holt(0.3,0.2,1)", "mean_window(5)", "max_window(3)", "current")


def sequences(rng, q, calls):
    """amax sequences with drifts, spikes, zeros, one Inf and tiny values (the GPU check's)."""
    return amax_sequences(rng, q, calls)


def bits(v):
    return np.float32(v).view(np.uint32)


@pytest.mark.parametrize("window,cold,margin,active", [
    (64, "jit", 0, "max_window"), (8, "jit", 0, "most_recent"), (16, "te", 2, "holt"),
    (5, "jit", -3, "mean_window"), (1, "jit", 0, "ema(0.1)"),
])
@pytest.mark.parametrize("rows_by", ["rust", "torch"])
def test_bank_equals_rust_call_by_call(window, cold, margin, active, rows_by):
    rng = np.random.default_rng(window * 7 + margin)
    config = rs.ScalingConfig(estimator=active, window=window, cold_start=cold, margin=margin,
                              target=15.0, shadow=ALL)
    Q, calls = 6, 150
    amax = sequences(rng, Q, calls)
    bank = QuantBank(config, Q, rows_by=rows_by)
    refs = [rs.Quantizer(config) for _ in range(Q)]
    assert bank.names == refs[0].estimators
    checked = 0
    for t in range(calls):
        if t == 90:  # QAT switching on again: every history forgotten
            bank.reset()
            for r in refs:
                r.reset()
        bank.begin_micro()
        order = rng.permutation(Q)
        for q in order:
            # some quantizers called twice in a micro-batch: their row is recomputed
            for _ in range(2 if (q == 3 and t % 10 == 0) else 1):
                a = torch.tensor(amax[q, t])
                est, scale = bank.decide(int(q), a)
                bank.observe(int(q), a, scale)
                want = refs[q].call(float(amax[q, t]))
                for k, d in enumerate(want):
                    assert bits(est[k].item()) == bits(d.est) or (np.isnan(d.est) and np.isnan(est[k].item())), \
                        f"call {t} quantizer {q} {bank.names[k]}: est {est[k].item()!r} vs rust {d.est!r}"
                    assert bits(scale[k].item()) == bits(d.scale), \
                        f"call {t} quantizer {q} {bank.names[k]}: scale {scale[k].item()!r} vs rust {d.scale!r}"
                    checked += 1
        assert np.array_equal(np.asarray(bank.ordered([0])[0][0, -bank.n[0]:]),
                              np.asarray(refs[0].history(), dtype=np.float32))
    assert checked > Q * calls * len(bank.names)


@pytest.mark.parametrize("window,cold,margin,active", [
    (64, "jit", 0, "max_window"), (16, "te", 2, "holt"), (5, "jit", -3, "mean_window"), (1, "te", 0, "ema(0.1)"),
])
@pytest.mark.parametrize("rows_by", ["rust", "torch"])
def test_deferred_decisions_equal_rust_call_by_call(window, cold, margin, active, rows_by):
    """The path a CPU session runs under delayed scaling: each call reads its active scale
    (``active_scale_host``) and queues its amax (``defer``); the decisions are taken for the
    whole micro-batch at once (``commit``); a traced call's every decision comes from the
    host lists (``decision_host``). Every call's scale and decisions, and after each commit
    every estimator's scale and every history, equal the Rust quantizer's, call by call, with
    quantizers called twice in a micro-batch (the second call sees the first's amax), cold
    starts (a jit cold call decides at once, as the session does) and a reset."""
    rng = np.random.default_rng(window * 3 + margin + 1)
    config = rs.ScalingConfig(estimator=active, window=window, cold_start=cold, margin=margin,
                              target=15.0, shadow=ALL)
    Q, calls = 5, 120
    amax = sequences(rng, Q, calls)
    bank = QuantBank(config, Q, rows_by=rows_by)
    refs = [rs.Quantizer(config) for _ in range(Q)]
    checked = deferred = hosted = 0
    last = [None] * Q
    for t in range(calls):
        if t == 70:
            bank.reset()
            for r in refs:
                r.reset()
            last = [None] * Q
        bank.begin_micro()  # commits the previous micro-batch
        for q in range(Q):
            if last[q] is not None:
                for k, d in enumerate(last[q]):
                    assert bits(bank.scales[q, k].item()) == bits(d.scale), (t, q, bank.names[k])
        for q in rng.permutation(Q):
            q = int(q)
            for _ in range(2 if (q == 1 and t % 7 == 0) else 1):
                a = torch.tensor(amax[q, t])
                if bank.count(q) == 0 and bank.cold_start == "jit":
                    _, scale = bank.decide(q, a)
                    bank.observe(q, a, scale)
                    s = scale[bank.active].item()
                    host = None
                else:
                    s = bank.active_scale_host(q)
                    # a traced CPU call's every decision: host lists (a current column from a)
                    host = bank.decision_host(q, float(amax[q, t]))
                    bank.defer(q, a)
                    deferred += 1
                want = refs[q].call(float(amax[q, t]))
                assert bits(s) == bits(want[bank.active].scale), f"call {t} quantizer {q}: {s!r} vs {want[bank.active].scale!r}"
                if host is not None:
                    hosted += 1
                    for k, d in enumerate(want):
                        e, c = host[0][k], host[1][k]
                        assert bits(e) == bits(d.est) or (np.isnan(d.est) and np.isnan(e)), (t, q, bank.names[k], e, d.est)
                        assert bits(c) == bits(d.scale), (t, q, bank.names[k], c, d.scale)
                last[q] = want
                checked += 1
        bank.commit()
        for q in range(Q):
            assert np.array_equal(np.asarray(bank.ordered([q])[0][0, -bank.n[q]:]),
                                  np.asarray(refs[q].history(), dtype=np.float32)), (t, q)
    assert deferred > Q * calls * 0.9 and checked >= Q * calls
    # every first call of a micro-batch is served from the host lists; a second call is not
    assert deferred > hosted > Q * calls * 0.85


def test_a_wrong_estimator_would_be_caught():
    """The comparison can fail: a bank whose ema weight differs in the last bit disagrees."""
    config = rs.ScalingConfig(estimator="ema(0.1)", window=16, shadow=("ema(0.1)",))
    bank = QuantBank(config, 1, rows_by="torch")  # the twin's spec is what is planted here
    bank.specs[0] = bank.specs[0].__class__("ema(0.1)", "ema", alpha=float(np.nextafter(np.float32(0.1), np.float32(1))))
    ref = rs.Quantizer(config)
    rng = np.random.default_rng(1)
    differs = False
    for t in range(40):
        a = np.float32(rng.uniform(1, 100))
        bank.begin_micro()
        est, scale = bank.decide(0, torch.tensor(a))
        bank.observe(0, torch.tensor(a), scale)
        differs |= bits(est[0].item()) != bits(ref.call(float(a))[0].est)
    assert differs


@pytest.mark.parametrize("kind", rs.ESTIMATOR_KINDS)
def test_every_rust_kind_has_a_torch_twin(kind):
    """Walks the Rust core's kind table (``EstimatorKind::ALL``): a kind added there fails
    here until the bank implements it, bit for bit, call by call."""
    config = rs.ScalingConfig(estimator=kind, window=7, shadow=(kind,))
    plan = config.plan()
    assert [e["kind_name"] for e in plan["estimators"]] == [kind]
    bank = QuantBank(config, 2, rows_by="torch")
    ref = rs.Quantizer(config)
    rng = np.random.default_rng(len(kind))
    amax = sequences(rng, 2, 60)
    for t in range(60):
        bank.begin_micro()
        a = torch.tensor(amax[0, t])
        est, scale = bank.decide(0, a)
        bank.observe(0, a, scale)
        want = ref.call(float(amax[0, t]))[0]
        assert bits(scale[0].item()) == bits(want.scale), f"{kind} call {t}"


def test_the_bank_parses_no_names_and_keeps_no_defaults():
    """The bank's estimators are the plan's descriptors; the defaults come from Rust."""
    plan = rs.ScalingConfig().plan()
    assert plan["estimators"][plan["active"]]["name"] == rs.estimator_name(rs.DEFAULTS["estimator"])
    assert (plan["window"], plan["target"]) == (rs.DEFAULTS["window"], rs.DEFAULTS["target"])
    with pytest.raises(ValueError, match="window"):
        rs.ScalingConfig(window=0).plan()
    with pytest.raises(ValueError, match="window"):
        rs.ScalingConfig(estimator="max_window(1099511627776)").plan()


def test_rust_rows_equal_the_torch_twin_on_ring_buffers():
    """``_core.RowEstimates.ring`` (the CPU bank's rows) and ``estimate_rows`` (the twin other
    devices run) give the same bits on ring buffers at every position and fill, with NaN,
    ±Inf, zeros and denormals in the histories; the ring's wrap is where a slip would show."""
    from hif8lab import _core
    from hif8lab.torch.bank import estimate_rows

    config = rs.ScalingConfig(estimator="max_window", window=9, shadow=ALL)
    bank = QuantBank(config, 1, rows_by="torch")
    H, R = bank.H, 300
    rng = np.random.default_rng(5)
    hist = rng.lognormal(0, 3, (R, H)).astype(np.float32)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, 1e-42, 3.4e38], dtype=np.float32)
    mask = rng.random((R, H)) < 0.03
    hist[mask] = rng.choice(special, mask.sum())
    pos = rng.integers(0, H, R)
    n = rng.integers(0, H + 1, R)
    n[:H + 1] = np.arange(H + 1)  # every fill
    raw = _core.RowEstimates(config.to_json()).ring(hist.tobytes(), H, pos.tolist(), n.tolist())
    rust = np.frombuffer(raw, dtype=np.float32).reshape(R, -1)
    idx = (pos[:, None] + np.arange(H)[None, :]) % H
    ordered = torch.from_numpy(np.take_along_axis(hist, idx, 1))
    twin = estimate_rows(ordered, torch.from_numpy(n), bank.specs).numpy()
    has = n > 0
    same = (rust.view(np.uint32) == twin.view(np.uint32)) | (np.isnan(rust) & np.isnan(twin))
    assert same[has].all(), np.argwhere(~same & has[:, None])[:5]
    assert np.isnan(rust[~has]).all()
    # the comparison can fail: one entry of one ring changed changes that row's estimates
    hist2 = hist.copy()
    r = int(np.argmax(n == H))
    hist2[r, (pos[r] + H - 1) % H] = 1e30  # its newest entry
    moved = np.frombuffer(_core.RowEstimates(config.to_json()).ring(hist2.tobytes(), H, pos.tolist(), n.tolist()),
                          dtype=np.float32).reshape(R, -1)
    assert (moved[r] != rust[r]).any() and np.array_equal(np.delete(moved, r, 0), np.delete(rust, r, 0), equal_nan=True)


@pytest.mark.parametrize("hist_len,pos,n,match", [
    (4 * 8 - 1, [0], [1], "bytes of history"), (4 * 8, [8], [1], "position"), (4 * 8, [0], [9], "count"),
    (4 * 8, [0, 1], [1], "positions"), (0, [0], [0], "bytes of history"),
])
def test_rust_rows_refuse_a_malformed_ring(hist_len, pos, n, match):
    from hif8lab import _core

    est = _core.RowEstimates(rs.ScalingConfig(window=8).to_json())
    with pytest.raises(ValueError, match=match):
        est.ring(b"\0" * hist_len, 8, pos, n)
