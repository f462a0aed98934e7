"""For the same amax sequences, scales equal those of the authors' HiF8GlobalStateManager logic
(tests/authors_reference.py), with each difference named (docs/python.md, "The authors' code")."""

import numpy as np

from authors_reference import AuthorsQuantizer
from hif8lab import scaling as rs

PAIRS = [("most_recent", "most_recent"), ("max", "max_window"), ("mean", "mean_window")]


def ulps(a, b):
    return abs(int(np.float32(a).view(np.int32)) - int(np.float32(b).view(np.int32)))


def sequences(seed, count=120, calls=200):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        level = np.exp(rng.normal(0, 3))
        a = level * np.exp(np.cumsum(rng.normal(0, 0.1, calls)))
        spikes = rng.random(calls) < 0.02
        yield np.where(spikes, a * 300, a).astype(np.float32)


def ours(estimator, window=64):
    return rs.Quantizer(rs.ScalingConfig(estimator=estimator, window=window, shadow=(estimator,)))


def test_same_history_order_cold_start_and_window():
    """Cold start (the first call's own amax), delay (earlier calls only) and the window's
    length agree exactly on values where the epsilon cannot matter (powers of two)."""
    a = np.float32(2.0) ** np.random.default_rng(3).integers(-4, 12, 300).astype(np.float32)
    for algo, est in PAIRS[:2]:
        theirs, mine = AuthorsQuantizer(algo, 16), ours(est, 16)
        for x in a:
            assert theirs.call(x) == mine.call(float(x))[mine.active_index].scale


def test_scales_agree_up_to_the_named_rounding_differences():
    for algo, est in PAIRS:
        total = same = 0
        worst = 0
        for seq in sequences(7):
            theirs, mine = AuthorsQuantizer(algo, 64), ours(est)
            for x in seq:
                s1, s2 = theirs.call(x), mine.call(float(x))[mine.active_index].scale
                total += 1
                same += s1 == s2
                worst = max(worst, ulps(s1, s2))
        if algo == "mean":
            # theirs sums in f64, ours in f32 oldest first (the GPU kernel's order): a few ulps
            assert worst <= 16, worst
            assert same / total > 0.2
        else:
            # theirs adds the 1e-12 in f64, ours in f32 (where it vanishes unless amax is tiny):
            # at most one ulp, rarely
            assert worst <= 1, (algo, worst)
            assert same / total > 0.995, (algo, same, total)


def test_unusable_estimate_theirs_resets_to_amax_one_ours_keeps_the_previous_scale():
    seq = [4.0, 0.0, 0.0, 2.0]
    theirs, mine = AuthorsQuantizer("most_recent", 4), ours("most_recent", 4)
    s_theirs = [theirs.call(x) for x in seq]
    s_mine = [mine.call(x)[mine.active_index].scale for x in seq]
    assert s_theirs[:2] == s_mine[:2] == [3.75, 3.75]
    # call 3 estimates from amax 0: theirs uses 1.0 (scale 15), ours keeps 3.75
    assert s_theirs[2] == 15.0 and s_mine[2] == 3.75
