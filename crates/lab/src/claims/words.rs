//! Claims in words: numbers in their units, p-values, thresholds, a part's sentence.

use super::{Part, Side, Spread};
use crate::stats::Verdict3;

/// A number with its unit.
pub fn number(v: f64, unit: &str) -> String {
    if v.is_nan() {
        return "–".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "∞".into()
        } else {
            "−∞".into()
        };
    }
    // Counts are whole numbers: "78 calls", never "78.0 calls".
    let count = matches!(unit.trim(), "calls" | "elements" | "items" | "steps");
    let digits = if (count && v.fract() == 0.0) || v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else if v.abs() >= 0.1 || v == 0.0 {
        2
    } else {
        4
    };
    format!("{v:.digits$}{unit}")
}

pub(super) fn percent(confidence: f64) -> String {
    let p = confidence * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0} %")
    } else {
        format!("{p:.2} %")
    }
}

/// A p-value in words (`p < 1/B` at the resolution of the draws).
pub fn p_words(p: f64) -> String {
    if p.is_nan() {
        "p –".into()
    } else if p < 1e-4 {
        "p < 0.0001".into()
    } else if p < 0.001 {
        format!("p = {p:.4}")
    } else {
        format!("p = {p:.3}")
    }
}

pub(super) fn threshold_words(p: &Part) -> String {
    let t = number(p.threshold, &p.unit);
    if matches!(p.spread, Spread::None) {
        let side = match p.side {
            Side::AtLeast => "≥",
            Side::Above => ">",
            Side::Below => "<",
            Side::Within => "within ±",
        };
        return format!("{side} {t} (the value of this run)").replace("± ", "±");
    }
    match p.side {
        Side::AtLeast => {
            format!("≥ {t} (two-sided interval; the same threshold decides both outcomes)")
        }
        Side::Below => {
            format!("< {t} (two-sided interval; the same threshold decides both outcomes)")
        }
        Side::Above => {
            format!("> {t} (two-sided interval; strictly: an interval at {t} is no effect)")
        }
        Side::Within => format!(
            "within ±{t} (equivalence, two one-sided tests: holds when the interval lies inside, fails when it lies outside)"
        ),
    }
}

pub(super) fn part_sentence(p: &Part, alpha: f64, v: Verdict3) -> String {
    let mut s = format!("{} {}", p.measured, number(p.value, &p.unit));
    if matches!(p.spread, Spread::None) {
        s.push_str(" (one run, exact)");
    } else {
        let ([lo, hi], conf) = p.judged_interval(alpha);
        s.push_str(&format!(
            ", {} interval {} to {}",
            percent(conf),
            number(lo, &p.unit),
            number(hi, &p.unit)
        ));
        if let Spread::PairedExact { deff, .. } = p.spread
            && deff > 1.0
        {
            s.push_str(&format!(
                " (exact paired, the counts divided by the design effect {deff:.2})"
            ));
        }
    }
    s.push_str(&format!(" vs {}: {}", threshold_words(p), v.as_str()));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact_part(deff: f64) -> Part {
        Part {
            measured: "relative knowledge drop".into(),
            unit: "%".into(),
            value: -0.04,
            spread: Spread::PairedExact {
                b: 4,
                c: 5,
                n: 3654,
                scale: 100.0,
                deff,
            },
            side: Side::Within,
            threshold: 2.0,
            test: String::new(),
            variation: String::new(),
        }
    }

    #[test]
    fn a_part_s_sentence_names_its_design_effect_when_it_widened_the_interval() {
        let clustered = part_sentence(&exact_part(5.0 / 3.0), 0.05, Verdict3::Holds);
        assert!(
            clustered.contains("(exact paired, the counts divided by the design effect 1.67)"),
            "{clustered}"
        );
        let independent = part_sentence(&exact_part(1.0), 0.05, Verdict3::Holds);
        assert!(!independent.contains("design effect"), "{independent}");
        // The wider interval is the one printed.
        let width = |s: &str| s.split(" interval ").nth(1).unwrap_or("").to_owned();
        assert_ne!(width(&clustered), width(&independent));
    }
}
