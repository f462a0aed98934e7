//! The manipulation check: do the two arms of "saturation costs knowledge" (most_recent and
//! max_window(64) at the low rate) differ in saturation at all? A claim about what saturation
//! costs is judged only when they do, by the rule below, fixed in docs/results/claims.md
//! before any data it was applied to; otherwise its verdict is "not tested at this scale".
//!
//! The rule: the arms differ in saturation when the saturating arm (most_recent) overflows —
//! HiF8: reaches its overflow threshold; E4M3: clips — at least [`OVERFLOW_ELEMENTS`] elements
//! over its replicates and at least [`OVERFLOW_RATIO`] × the other arm's, **or** its median
//! SQNR of activations (A) or of gradients (G) is at least [`SQNR_DB`] below the other arm's.
//! (Weights do not saturate: their amax barely moves.) HiF8 rounds values above the estimate
//! into coarser tiers rather than clipping them, so an estimate exceeded often but by small
//! factors can leave both tests unmet: then the arms test nothing about saturation.

#[cfg(not(target_arch = "wasm32"))]
use std::fmt::Write as _;

use hif8lab_scaling::Role;
use hif8lab_train::run::RunSummary;

use super::CellKey;
use super::results::ResultRow;

/// Overflowed elements the saturating arm needs (summed over its replicates).
pub const OVERFLOW_ELEMENTS: u64 = 1000;
/// …and how many times the other arm's.
pub const OVERFLOW_RATIO: f64 = 10.0;
/// Or how far (dB) below the other arm's its median A or G SQNR must lie.
pub const SQNR_DB: f32 = 1.0;

/// One arm's saturation, over its replicates.
#[derive(Clone, Debug, PartialEq)]
pub struct ArmSaturation {
    /// The run's name.
    pub name: String,
    /// Replicates.
    pub replicates: usize,
    /// Calls above its own (active) estimate, summed.
    pub calls_above: u64,
    /// Elements above its own estimate, summed (NaN-free: 0 where not recorded).
    pub elements_above: u64,
    /// Elements overflowed at its own scale, summed.
    pub overflow: u64,
    /// Per role A, W, G: the median of the replicates' median SQNR (dB) and the worst call.
    pub sqnr: [Option<(f32, f32)>; 3],
}

/// The check's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// most_recent-low, then max_window-low.
    pub arms: [ArmSaturation; 2],
    /// Whether the arms differ in saturation by the rule.
    pub differs: bool,
    /// Why, in words (the rule's two tests with their numbers).
    pub why: String,
}

const ROLES: [Role; 3] = [Role::A, Role::W, Role::G];

fn arm(row: &ResultRow) -> ArmSaturation {
    let own = |s: &RunSummary| {
        let kind = &s.estimator;
        let i = s.estimators.iter().position(|e| e == kind);
        i.and_then(|i| s.counts.estimators.get(i))
            .map_or(0, |c| c.elements_above_est)
    };
    ArmSaturation {
        name: row.name.clone(),
        replicates: row.seeds.len(),
        calls_above: row.seeds.iter().map(|s| s.calls_above_est).sum(),
        elements_above: row.seeds.iter().map(own).sum(),
        overflow: row.seeds.iter().map(|s| s.overflow).sum(),
        sqnr: ROLES.map(|r| super::results::sqnr_of(row, r)),
    }
}

/// The check on a grid's rows: `None` without both arms, or without their SQNR (runs that
/// predate it), when the rule cannot be applied.
pub fn check(rows: &[ResultRow]) -> Option<Check> {
    let find = |k: CellKey| rows.iter().find(|r| r.key == k);
    let (mr, mw) = (
        find(CellKey::MOST_RECENT_LOW)?,
        find(CellKey::MAX_WINDOW_LOW)?,
    );
    let (a, b) = (arm(mr), arm(mw));
    if a.sqnr.iter().chain(&b.sqnr).any(Option::is_none) {
        return None;
    }
    let overflow =
        a.overflow >= OVERFLOW_ELEMENTS && a.overflow as f64 >= OVERFLOW_RATIO * b.overflow as f64;
    let gap = |i: usize| b.sqnr[i].map_or(0.0, |x| x.0) - a.sqnr[i].map_or(0.0, |x| x.0);
    let (gap_a, gap_g) = (gap(0), gap(2));
    let sqnr = gap_a >= SQNR_DB || gap_g >= SQNR_DB;
    let why = format!(
        "overflow: {} elements in {} against {} in {} ({}: at least {OVERFLOW_ELEMENTS} and {OVERFLOW_RATIO}× the other arm's); median SQNR, {} below {}: A {:+.2} dB, G {:+.2} dB ({}: at least {SQNR_DB:.1} dB in A or G)",
        a.overflow,
        a.name,
        b.overflow,
        b.name,
        if overflow { "met" } else { "not met" },
        a.name,
        b.name,
        gap_a,
        gap_g,
        if sqnr { "met" } else { "not met" },
    );
    Some(Check {
        arms: [a, b],
        differs: overflow || sqnr,
        why,
    })
}

/// The report's section: the two arms side by side, the rule and its outcome, then how far
/// above the estimate every QAT arm's exceeded calls went. (Native only.)
#[cfg(not(target_arch = "wasm32"))]
pub fn markdown(check: Option<&Check>, rows: &[ResultRow]) -> String {
    let mut md = String::from("\n## Manipulation check: do the arms differ in saturation?\n\n");
    let excess = excess_markdown(rows);
    let Some(c) = check else {
        md.push_str("Not made: the grid lacks most_recent-low or max_window-low, or their runs predate the SQNR record it needs. A claim about what saturation costs is then judged on its interval alone.\n");
        md.push_str(&excess);
        return md;
    };
    let _ = writeln!(
        md,
        "\"Saturation costs knowledge\" compares most_recent (which saturates) with max_window(64) at the low rate. It is judged only when the two arms differ in saturation (the rule of docs/results/claims.md, which says when and why it was fixed): the saturating arm overflows at least {OVERFLOW_ELEMENTS} elements and {OVERFLOW_RATIO}× the other's, or its median activation or gradient SQNR lies at least {SQNR_DB:.1} dB below the other's. Otherwise its verdict is **not tested at this scale**. Summed over each arm's replicates, at its own estimate:\n"
    );
    let _ = writeln!(
        md,
        "| run | replicates | calls above its estimate | elements above it | elements overflowed | A median / worst SQNR | W median / worst | G median / worst |\n|---|---|---|---|---|---|---|---|"
    );
    for a in &c.arms {
        let s = |i: usize| a.sqnr[i].map_or("–".into(), |(m, w)| format!("{m:.2} / {w:.2}"));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            a.name,
            a.replicates,
            a.calls_above,
            a.elements_above,
            a.overflow,
            s(0),
            s(1),
            s(2)
        );
    }
    let _ = writeln!(
        md,
        "\nThe rule: {}. **The arms {}.** {}",
        c.why,
        if c.differs {
            "differ in saturation: what saturation costs is judged"
        } else {
            "do not differ in saturation: what saturation costs is not tested at this scale"
        },
        if excess.is_empty() {
            "How far above the estimate the exceeded calls went (amax ÷ estimate) and which HiF8 tier their largest values reached are not in these data (the runs predate that record); the quantizer table above gives the outliers' calls above the estimate, overflow and worst SQNR."
        } else {
            "How far above the estimate the exceeded calls went, and where their largest values landed, follows."
        }
    );
    md.push_str(&excess);
    md
}

/// One arm's exceeded calls of one group of quantizers, over its replicates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Excess {
    /// amax ÷ estimate in eighth-octave bins ([`hif8lab_train::run::excess_bin`]).
    pub hist: Vec<u64>,
    /// The largest amax ÷ estimate.
    pub max: f32,
    /// By tier of the largest value ([`hif8lab_train::run::EXCESS_TIERS`]).
    pub tiers: [u64; 4],
}

impl Excess {
    fn add(&mut self, q: &hif8lab_train::run::QuantizerSummary) {
        if self.hist.len() < q.excess_hist.len() {
            self.hist.resize(q.excess_hist.len(), 0);
        }
        for (h, c) in self.hist.iter_mut().zip(&q.excess_hist) {
            *h += u64::from(*c);
        }
        self.max = self.max.max(q.excess_max);
        for (t, c) in self.tiers.iter_mut().zip(q.excess_tiers) {
            *t += c;
        }
    }

    /// Calls recorded.
    pub fn calls(&self) -> u64 {
        self.hist.iter().sum()
    }

    /// The ratio at quantile `p` (0–1): the geometric middle of its eighth-octave bin (within
    /// ±4.4 % of the exact value), capped at the largest ratio.
    pub fn quantile(&self, p: f64) -> Option<f64> {
        let n = self.calls();
        if n == 0 {
            return None;
        }
        let rank = ((p * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        let per = f64::from(hif8lab_train::run::EXCESS_BINS_PER_OCTAVE);
        for (k, c) in self.hist.iter().enumerate() {
            seen += c;
            if seen >= rank {
                // Never beyond the largest ratio recorded, nor below 1.
                let mid = ((k as f64 + 0.5) / per).exp2();
                return Some(mid.min(f64::from(self.max)).max(1.0));
            }
        }
        None
    }
}

/// Per role A, W, G, then over the `outliers` named quantizers: the arm's exceeded calls.
pub fn excess_of(row: &ResultRow, outliers: &[String]) -> ([Excess; 3], Excess) {
    let mut roles: [Excess; 3] = Default::default();
    let mut out = Excess::default();
    for q in row.seeds.iter().flat_map(|s| &s.per_quantizer) {
        let role = ROLES
            .iter()
            .position(|r| q.quantizer.ends_with(&format!(".{}", r.name())));
        if let Some(i) = role {
            roles[i].add(q);
        }
        if outliers.contains(&q.quantizer) {
            out.add(q);
        }
    }
    (roles, out)
}

/// The exceeded calls of every QAT arm that recorded them: empty where none did.
#[cfg(not(target_arch = "wasm32"))]
pub fn excess_markdown(rows: &[ResultRow]) -> String {
    let recorded = |r: &&ResultRow| {
        r.seeds
            .iter()
            .flat_map(|s| &s.per_quantizer)
            .any(|q| !q.excess_hist.is_empty())
    };
    let arms: Vec<&ResultRow> = rows.iter().filter(recorded).collect();
    if arms.is_empty() {
        return String::new();
    }
    let outliers = super::quantizers::outlier_names(rows, super::quantizers::OUTLIERS_FOLLOWED);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\nHow far above its own estimate each QAT arm's exceeded calls went (amax ÷ estimate; median and 99th percentile to within ±4.4 %, from eighth-octave bins; the largest exact), and where each such call's largest value landed at the scale it used (HiF8: the 3-bit tier holds magnitudes below 16, the 2-bit 16–256, the 1-bit 256–40,960, then overflow; a saturating format: in range or clipped), summed over replicates, per role and over the outlier quantizers ({}):\n",
        if outliers.is_empty() {
            "none".to_owned()
        } else {
            outliers.join(", ")
        }
    );
    let _ = writeln!(
        md,
        "| run | quantizers | calls above its estimate | amax ÷ estimate: median | 99th pct | max | largest value in 3-bit / 2-bit / 1-bit / overflow |\n|---|---|---|---|---|---|---|"
    );
    for row in arms {
        let (roles, out) = excess_of(row, &outliers);
        let groups = ROLES
            .iter()
            .map(|r| r.name().to_owned())
            .zip(roles.iter())
            .chain(std::iter::once(("outliers".to_owned(), &out)));
        for (label, e) in groups {
            let x = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.2}×"));
            let _ = writeln!(
                md,
                "| {} | {label} | {} | {} | {} | {} | {} |",
                row.name,
                e.calls(),
                x(e.quantile(0.5)),
                x(e.quantile(0.99)),
                if e.calls() == 0 {
                    "–".to_owned()
                } else {
                    format!("{:.2}×", e.max)
                },
                e.tiers
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" / ")
            );
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use hif8lab_train::run::SqnrSummary;

    fn row(key: CellKey, overflow: u64, a_db: f32, g_db: f32) -> ResultRow {
        let mut s = RunSummary {
            name: key.name(),
            overflow,
            calls_above_est: 10,
            ..RunSummary::default()
        };
        for (role, db) in [(Role::A, a_db), (Role::W, 31.5), (Role::G, g_db)] {
            s.sqnr.insert(
                role,
                SqnrSummary {
                    calls: 1,
                    median_db: db,
                    worst_db: db - 5.0,
                },
            );
        }
        let e = crate::stats::Estimate {
            value: 0.0,
            interval: [0.0, 0.0],
            p_value: 1.0,
        };
        ResultRow {
            name: key.name(),
            key,
            paper: String::new(),
            summary: s.clone(),
            seeds: vec![s.clone(), s],
            ape_all: f64::NAN,
            ape_all_sd: 0.0,
            ape_last: f64::NAN,
            ape_last_sd: 0.0,
            knowledge: e,
            completion: e,
            scores: Vec::new(),
        }
    }

    #[test]
    fn the_arms_differ_by_overflow_or_sqnr_and_otherwise_not() {
        let mw = row(CellKey::MAX_WINDOW_LOW, 0, 31.4, 30.1);
        // The committed real-model runs: no overflow, most_recent's SQNR no worse.
        let same = check(&[row(CellKey::MOST_RECENT_LOW, 0, 31.6, 31.2), mw.clone()]).unwrap();
        assert!(!same.differs, "{}", same.why);
        assert!(markdown(Some(&same), &[]).contains("not tested at this scale"));
        // Overflow: 2 × 600 elements against none.
        let clips = check(&[row(CellKey::MOST_RECENT_LOW, 600, 31.6, 31.2), mw.clone()]).unwrap();
        assert!(clips.differs, "{}", clips.why);
        // Too little overflow, or not 10× the other arm's.
        let few = check(&[row(CellKey::MOST_RECENT_LOW, 400, 31.6, 31.2), mw.clone()]).unwrap();
        assert!(!few.differs);
        let mw_clips = row(CellKey::MAX_WINDOW_LOW, 200, 31.4, 30.1);
        let both = check(&[row(CellKey::MOST_RECENT_LOW, 600, 31.6, 31.2), mw_clips]).unwrap();
        assert!(!both.differs, "{}", both.why);
        // SQNR: gradients 1 dB worse.
        let g = check(&[row(CellKey::MOST_RECENT_LOW, 0, 31.6, 29.0), mw.clone()]).unwrap();
        assert!(g.differs && g.why.contains("G +1.10 dB"), "{}", g.why);
        // Without an arm, no check.
        assert!(check(&[mw]).is_none());
        assert!(markdown(None, &[]).contains("Not made"));
    }

    #[test]
    fn the_exceeded_calls_are_summarized_per_role_and_for_the_outliers() {
        use hif8lab_train::run::{QuantizerSummary, excess_bin};
        let quantizer = |name: &str, amax: f32, ratios: &[f32], tiers: [u64; 4]| {
            let mut q = QuantizerSummary {
                quantizer: name.into(),
                amax_max: amax,
                excess_tiers: tiers,
                ..QuantizerSummary::default()
            };
            for r in ratios {
                let b = excess_bin(*r);
                if q.excess_hist.len() <= b {
                    q.excess_hist.resize(b + 1, 0);
                }
                q.excess_hist[b] += 1;
                q.excess_max = q.excess_max.max(*r);
            }
            q
        };
        let mut mr = row(CellKey::MOST_RECENT_LOW, 0, 31.6, 31.2);
        for s in &mut mr.seeds {
            s.per_quantizer = vec![
                // The outlier: 99 calls just above (1.05×), one 40× above (1-bit tier).
                quantizer(
                    "block11.down.A",
                    3000.0,
                    &[[1.05; 99].as_slice(), &[40.0]].concat(),
                    [99, 0, 1, 0],
                ),
                quantizer("block4.gate.A", 2.0, &[1.5], [0, 1, 0, 0]),
                quantizer("block4.gate.W", 0.1, &[], [0; 4]),
                quantizer("block4.gate.G", 0.01, &[2.0, 2.0], [0, 2, 0, 0]),
            ];
        }
        let mw = row(CellKey::MAX_WINDOW_LOW, 0, 31.4, 30.1);
        let rows = [mr.clone(), mw.clone()];
        let (roles, out) = excess_of(&mr, &["block11.down.A".to_owned()]);
        // Two replicates, each 101 A calls above: median 1.05× (its bin), 99th pct 1.05×, max 40×.
        assert_eq!(roles[0].calls(), 202);
        let q50 = roles[0].quantile(0.5).unwrap();
        assert!((q50 / 1.05 - 1.0).abs() < 0.045, "{q50}");
        assert!((roles[0].quantile(0.999).unwrap() / 40.0 - 1.0).abs() < 0.045);
        assert_eq!(roles[0].max, 40.0);
        assert_eq!(roles[0].tiers, [198, 2, 2, 0]);
        assert_eq!(roles[1].calls(), 0);
        assert!(roles[1].quantile(0.5).is_none());
        assert_eq!(out.calls(), 200);
        assert_eq!(out.tiers, [198, 0, 2, 0]);
        let md = markdown(check(&rows).as_ref(), &rows);
        assert!(
            md.contains("| most_recent-low | A | 202 |")
                && md.contains("| 40.00× | 198 / 2 / 2 / 0 |")
                && md.contains("| most_recent-low | W | 0 | – | – | – | 0 / 0 / 0 / 0 |")
                && md.contains(
                    "| most_recent-low | G | 4 | 2.00× | 2.00× | 2.00× | 0 / 4 / 0 / 0 |"
                )
                && md.contains("| most_recent-low | outliers | 202 |")
                && md.contains("(block11.down.A, block4.gate.A, block4.gate.W)")
                && !md.contains("predate that record"),
            "{md}"
        );
        // The arm without the record has no line; without any record, the old sentence.
        assert!(!md.contains("| max_window-low | A |"), "{md}");
        let old = [row(CellKey::MOST_RECENT_LOW, 0, 31.6, 31.2), mw];
        assert!(markdown(check(&old).as_ref(), &old).contains("predate that record"));
    }
}
