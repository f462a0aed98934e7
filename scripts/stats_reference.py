#!/usr/bin/env python3
"""Reference values of the verdicts' test statistics from scipy and statsmodels, written to
tests/fixtures/stats/reference.json (read by crates/lab/tests/stats_reference.rs).

    python3 -m pip install scipy statsmodels && python3 scripts/stats_reference.py
"""
import json
import os

import scipy
import statsmodels
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

out = {"scipy": scipy.__version__, "statsmodels": statsmodels.__version__}

cp = []
for k, n in [(0, 108), (3, 108), (108, 108), (5, 20), (0, 5), (17, 960), (500, 960), (1, 1), (0, 4800)]:
    for alpha in (0.05, 0.10, 0.01):
        lo, hi = proportion_confint(k, n, alpha=alpha, method="beta")
        cp.append({"k": k, "n": n, "alpha": alpha, "lo": float(lo), "hi": float(hi)})
out["clopper_pearson"] = cp

out["binomial_cdf"] = [
    {"k": k, "n": n, "p": p, "cdf": float(stats.binom.cdf(k, n, p))}
    for k, n, p in [(4, 4, 0.5), (0, 4, 0.5), (2, 10, 0.3), (40, 100, 0.5), (3, 108, 0.01), (0, 960, 0.002)]
]

out["mcnemar_exact"] = [
    {"b": b, "c": c, "p": float(mcnemar([[10, b], [c, 10]], exact=True).pvalue)}
    for b, c in [(0, 4), (0, 5), (1, 9), (10, 20), (3, 3), (0, 1), (37, 61)]
]

out["student_t"] = [
    {"p": p, "df": df, "quantile": float(stats.t.ppf(p, df)), "cdf_at_1_5": float(stats.t.cdf(1.5, df))}
    for p, df in [(0.975, 1), (0.975, 2), (0.975, 4), (0.95, 4), (0.995, 9), (0.975, 29), (0.9875, 4)]
]

out["normal_quantile"] = [
    {"p": p, "quantile": float(stats.norm.ppf(p))} for p in [0.975, 0.8, 0.5, 1e-6, 0.999, 0.0125]
]

samples = [[3.84, 3.79, 3.91, 3.88, 3.80], [0.2, -0.1, 0.05], [1.0, 2.0]]
out["t_interval"] = []
for s in samples:
    for alpha in (0.05, 0.10):
        m = sum(s) / len(s)
        lo, hi = stats.t.interval(1 - alpha, len(s) - 1, loc=m, scale=stats.sem(s))
        out["t_interval"].append({"values": s, "alpha": alpha, "lo": float(lo), "hi": float(hi)})

pvals = [0.01, 0.04, 0.03, 0.005, 0.2]
out["holm"] = {"p": pvals, "adjusted": [float(x) for x in multipletests(pvals, method="holm")[1]]}

# The exact paired interval composes two Clopper-Pearson intervals (see paired_exact).
paired = []
for b, c, n in [(0, 0, 108), (0, 4, 108), (2, 7, 960), (30, 12, 960)]:
    alpha = 0.05
    dl, dh = proportion_confint(b + c, n, alpha=alpha / 2, method="beta")
    if b + c == 0:
        pl, ph = 0.0, 1.0
    else:
        pl, ph = proportion_confint(c, b + c, alpha=alpha / 2, method="beta")
    s_lo, s_hi = 2 * pl - 1, 2 * ph - 1
    lo = dl * s_lo if s_lo >= 0 else dh * s_lo
    hi = dh * s_hi if s_hi >= 0 else dl * s_hi
    paired.append({"b": b, "c": c, "n": n, "alpha": alpha, "lo": float(lo), "hi": float(hi)})
out["paired_exact"] = paired

path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "stats", "reference.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print("wrote", os.path.normpath(path))
