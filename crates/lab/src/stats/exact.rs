//! Exact and small-sample distributions behind the verdicts: the regularized incomplete beta
//! function (binomial tails, Clopper–Pearson bounds, Student's t), exact paired intervals for
//! 0/1 marks, the cluster sign-flip permutation test and Holm's step-down adjustment. Values
//! are checked against scipy/statsmodels in `tests/stats_reference.rs` (the reference values
//! come from `scripts/stats_reference.py`).

use hif8lab_train::rng::Rng;

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: ~15 significant digits).
pub fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1 − x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).abs().ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Continued fraction of the incomplete beta function (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    // One Lentz step with the partial numerator `aa`: the factor it multiplies h by.
    let mut step = |aa: f64| {
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        d * c
    };
    for m in 1..=10_000 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        h *= step(m * (b - m) * x / ((qam + m2) * (a + m2)));
        let del = step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)));
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b) (a, b > 0, 0 ≤ x ≤ 1).
pub fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// The p-quantile of Beta(a, b) (bisection on [`inc_beta`] to 1e-14).
pub fn beta_quantile(p: f64, a: f64, b: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if inc_beta(a, b, mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-15 {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// P(X ≤ k) for X ~ Binomial(n, p).
pub fn binomial_cdf(k: usize, n: usize, p: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    inc_beta((n - k) as f64, k as f64 + 1.0, 1.0 - p)
}

/// Clopper–Pearson (exact) interval of a binomial proportion, `k` of `n`, two-sided at
/// confidence 1 − `alpha`: never of zero width (0 of 108 still allows 3.4 % at 95 %).
pub fn clopper_pearson(k: usize, n: usize, alpha: f64) -> [f64; 2] {
    clopper_pearson_real(k as f64, n as f64, alpha)
}

/// [`clopper_pearson`] for counts that need not be whole (effective counts: counts divided
/// by a design effect); `k` in [0, `n`].
pub fn clopper_pearson_real(k: f64, n: f64, alpha: f64) -> [f64; 2] {
    if n <= 0.0 {
        return [0.0, 1.0];
    }
    let k = k.clamp(0.0, n);
    let lo = if k <= 0.0 {
        0.0
    } else {
        beta_quantile(alpha / 2.0, k, n - k + 1.0)
    };
    let hi = if k >= n {
        1.0
    } else {
        beta_quantile(1.0 - alpha / 2.0, k + 1.0, n - k)
    };
    [lo, hi]
}

/// Student's t distribution function with `df` degrees of freedom.
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * inc_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 { 1.0 - tail } else { tail }
}

/// The p-quantile of Student's t with `df` degrees of freedom.
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (-1e6f64, 1e6f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if student_t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 * mid.abs().max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// The p-quantile of the standard normal distribution (Acklam's rational approximation,
/// refined by one Halley step: ~1e-15).
pub fn normal_quantile(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < 0.024_25 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.024_25 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    // One Halley step on Φ(x) − p, Φ from the complementary error function.
    let e = 0.5 * erfc(-x / std::f64::consts::SQRT_2) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

/// The complementary error function (through the regularized incomplete gamma function's
/// continued fraction and series; ~1e-15).
pub fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    // erfc(x) = Q(1/2, x²).
    let (a, z) = (0.5f64, x * x);
    if z == 0.0 {
        return 1.0;
    }
    let ln_front = a * z.ln() - z - ln_gamma(a);
    if z < a + 1.0 {
        let (mut sum, mut term, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..1000 {
            ap += 1.0;
            term *= z / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-16 {
                break;
            }
        }
        1.0 - sum * ln_front.exp()
    } else {
        const TINY: f64 = 1e-300;
        let mut b = z + 1.0 - a;
        let mut c = 1.0 / TINY;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..1000 {
            let an = -f64::from(i) * (f64::from(i) - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < TINY {
                d = TINY;
            }
            c = b + an / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            let del = d * c;
            h *= del;
            if (del - 1.0).abs() < 1e-16 {
                break;
            }
        }
        ln_front.exp() * h
    }
}

/// Two-sided interval at confidence 1 − `alpha` of a mean from independent replicates
/// (seeds): mean ± t(1 − α/2, n − 1) · sd / √n. One value: unbounded.
pub fn t_interval(values: &[f64], alpha: f64) -> [f64; 2] {
    let n = values.len();
    if n < 2 {
        return [f64::NEG_INFINITY, f64::INFINITY];
    }
    let (m, sd) = super::mean_sd(values);
    let half = student_t_quantile(1.0 - alpha / 2.0, (n - 1) as f64) * sd / (n as f64).sqrt();
    [m - half, m + half]
}

/// A one-sample t test of the mean of independent replicates against 0: the mean, its
/// two-sided interval at confidence 1 − `alpha` ([`t_interval`]) and the two-sided p-value;
/// `None` with fewer than two values.
pub fn t_test(values: &[f64], alpha: f64) -> Option<(f64, [f64; 2], f64)> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let (m, sd) = super::mean_sd(values);
    let t = m / (sd / (n as f64).sqrt()).max(1e-300);
    let p = 2.0 * (1.0 - student_t_cdf(t.abs(), (n - 1) as f64));
    Some((m, t_interval(values, alpha), p))
}

/// Exact (conservative) two-sided interval at confidence 1 − `alpha` of the paired difference
/// of two proportions on the same `n` items, (c − b) / n, where `b` items are right only in
/// the first arm and `c` only in the second: the discordant fraction d and the share π = c /
/// (b + c) each get a Clopper–Pearson interval at 1 − α/2, and the difference d(2π − 1) is
/// bounded over both (items independent). With no discordant item the interval is ±(the
/// discordance the data still allow), never of zero width.
pub fn paired_exact(b: usize, c: usize, n: usize, alpha: f64) -> [f64; 2] {
    paired_exact_clustered(b, c, n, 1.0, alpha)
}

/// The design effect of paired 0/1 comparisons grouped in clusters (an item's pairs across
/// seeds, the items of one probe cluster): Σₖ (bₖ − cₖ)² / Σₖ (bₖ + cₖ), where `net` holds
/// each cluster's cₖ − bₖ and `discordant` = Σₖ (bₖ + cₖ). It is the ratio of the clustered
/// variance of the net count to the variance McNemar assumes (Durkalski et al. 2003, "Analysis
/// of clustered matched-pair data": their statistic is McNemar's with the counts divided by
/// it). Floored at 1: clusters whose pairs disagree in direction never narrow the interval.
pub fn design_effect(net: &[f64], discordant: usize) -> f64 {
    if discordant == 0 {
        return 1.0;
    }
    let squares: f64 = net.iter().map(|t| t * t).sum();
    (squares / discordant as f64).max(1.0)
}

/// [`paired_exact`] for pairs grouped in clusters: `b`, `c` and `n` divided by the design
/// effect `deff` ([`design_effect`]) before the same Clopper–Pearson bounds (a Rao–Scott
/// correction); `deff` = 1 gives [`paired_exact`] exactly.
pub fn paired_exact_clustered(b: usize, c: usize, n: usize, deff: f64, alpha: f64) -> [f64; 2] {
    if n == 0 {
        return [-1.0, 1.0];
    }
    let deff = if deff.is_finite() { deff.max(1.0) } else { 1.0 };
    let (b, c, n) = (b as f64 / deff, c as f64 / deff, n as f64 / deff);
    let [dl, dh] = clopper_pearson_real(b + c, n, alpha / 2.0);
    let [pl, ph] = clopper_pearson_real(c, b + c, alpha / 2.0);
    let bound = |s: f64, low: bool| {
        // d·s over d ∈ [dl, dh]: the extreme in the asked direction.
        if (s >= 0.0) == low { dl * s } else { dh * s }
    };
    [bound(2.0 * pl - 1.0, true), bound(2.0 * ph - 1.0, false)]
}

/// Resamples of the sign-flip permutation test where its patterns are too many to enumerate.
pub const SIGN_FLIPS: usize = 20_000;

/// Clusters up to which the sign-flip test enumerates every pattern (2^16 = 65,536).
pub const SIGN_FLIP_EXACT_MAX: usize = 16;

/// How [`sign_flip`] computes its p-value for `clusters` totals, in words.
pub fn sign_flip_method(clusters: usize) -> String {
    if clusters <= SIGN_FLIP_EXACT_MAX {
        format!("exact: all {} sign patterns", 1u64 << clusters)
    } else {
        format!("{SIGN_FLIPS} random sign patterns")
    }
}

/// Cluster sign-flip permutation test of paired differences: `totals` holds, per cluster,
/// the sum of (second − first − `shift`) over its items and seeds. Under the null (mean
/// difference = `shift`, clusters exchangeable in sign) each total's sign is a fair coin.
/// Returns the one-sided p-values (P(S* ≥ S), P(S* ≤ S)). With at most
/// [`SIGN_FLIP_EXACT_MAX`] clusters every pattern is enumerated (the p-values are exact: with
/// k clusters the smallest is 2^−k); beyond, [`SIGN_FLIPS`] random patterns drawn from `seed`
/// (each at least 1 / (B + 1)). Callers give each test its own seed.
pub fn sign_flip(totals: &[f64], seed: u64) -> (f64, f64) {
    let s: f64 = totals.iter().sum();
    let eps = 1e-12 * totals.iter().map(|t| t.abs()).sum::<f64>().max(1e-300);
    let (mut ge, mut le) = (0usize, 0usize);
    if totals.len() <= SIGN_FLIP_EXACT_MAX {
        let patterns = 1usize << totals.len();
        for mask in 0..patterns {
            let v: f64 = totals
                .iter()
                .enumerate()
                .map(|(i, t)| if mask >> i & 1 == 0 { *t } else { -t })
                .sum();
            ge += usize::from(v >= s - eps);
            le += usize::from(v <= s + eps);
        }
        let all = patterns as f64;
        return (ge as f64 / all, le as f64 / all);
    }
    let mut rng = Rng::new(seed);
    for _ in 0..SIGN_FLIPS {
        let mut v = 0.0;
        for t in totals {
            if rng.below(2) == 0 {
                v += t;
            } else {
                v -= t;
            }
        }
        ge += usize::from(v >= s - eps);
        le += usize::from(v <= s + eps);
    }
    let b = (SIGN_FLIPS + 1) as f64;
    ((ge + 1) as f64 / b, (le + 1) as f64 / b)
}

/// A seed for one test, derived from a base seed and the test's name: every test of a report
/// draws its own resamples (FNV-1a of the name).
pub fn seed_for(base: u64, name: &str) -> u64 {
    name.bytes().fold(base ^ 0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Holm's step-down adjustment of p-values (family-wise error over the family), in the
/// input's order.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|a, b| p[*a].total_cmp(&p[*b]));
    let mut out = vec![1.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        let adj = ((m - rank) as f64 * p[i]).min(1.0);
        running = running.max(adj);
        out[i] = running;
    }
    out
}
