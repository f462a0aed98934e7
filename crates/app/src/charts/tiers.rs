//! A format's tiers and landmarks in the scaled domain (log2 |x·scale|), as the Histogram and
//! Amax panels draw them: each tier has one colour, used for its bars and for the lines where
//! it begins, and is one legend entry (so no colour means two things in one plot).

use eframe::egui::Color32;
use hif8lab_format::{Format, hif8};

/// One legend entry of the Histogram: a tier (its bars) with the lines where it begins, all
/// in one colour.
#[derive(Clone, Debug, PartialEq)]
pub struct TierGroup {
    /// The tier's name (what [`tier_of`] calls its bars).
    pub name: &'static str,
    /// Its colour.
    pub colour: Color32,
    /// The lines that belong to it: label and log2 |x·scale|.
    pub lines: Vec<(&'static str, f64)>,
}

// Every two of these and the amax line ≥ 20 apart (CIEDE2000), each ≥ 3:1 on both themes'
// plot backgrounds (tested).
pub(crate) const GREEN: Color32 = Color32::from_rgb(44, 137, 97);
const BLUE: Color32 = Color32::from_rgb(72, 118, 188);
const OCHRE: Color32 = Color32::from_rgb(150, 141, 37);
const PURPLE: Color32 = Color32::from_rgb(160, 92, 199);
const RED: Color32 = Color32::from_rgb(239, 70, 102);
const GREY: Color32 = Color32::from_rgb(106, 106, 106);

/// The colour of a HiF8 tier in every chart.
fn tier_colour(t: hif8::Tier) -> Color32 {
    match t {
        hif8::Tier::Mantissa(3) => GREEN,
        hif8::Tier::Mantissa(2) => BLUE,
        hif8::Tier::Mantissa(_) => OCHRE,
        hif8::Tier::Denormal => PURPLE,
        hif8::Tier::Overflow => RED,
        _ => GREY,
    }
}

/// The name of a HiF8 tier's bars and legend entry.
fn tier_name(t: hif8::Tier) -> &'static str {
    match t {
        hif8::Tier::Mantissa(_) | hif8::Tier::Denormal | hif8::Tier::Overflow => t.label(),
        _ => "underflow (to 0)",
    }
}

/// The label of the line where HiF8 tier `t` begins at 2^e.
fn tier_line_label(t: hif8::Tier, e: i32) -> &'static str {
    match (t, e.is_negative()) {
        (hif8::Tier::Denormal, _) => "denormals from (underflow below)",
        (hif8::Tier::Mantissa(1), true) => "1-bit tier from",
        (hif8::Tier::Mantissa(2), true) => "2-bit tier from",
        (hif8::Tier::Mantissa(3), _) => "3-bit tier from",
        (hif8::Tier::Mantissa(2), false) => "3-bit tier top (2-bit above)",
        (hif8::Tier::Mantissa(_), false) => "2-bit tier top (1-bit above)",
        _ => "tier edge",
    }
}

/// A format's tiers, each with its colour and the lines where it begins: HiF8's 3-, 2- and
/// 1-bit tiers, denormals, underflow and overflow (edges from the format crate; the overflow
/// line at the exact threshold), or the OCP formats' normal and subnormal ranges, values that
/// round to the largest finite one, underflow and overflow.
pub fn tier_groups(format: Format) -> Vec<TierGroup> {
    let facts = format.facts();
    let overflow = TierGroup {
        name: "overflow",
        colour: RED,
        lines: vec![("overflow", f64::from(facts.overflow_threshold).log2())],
    };
    let group = |name, colour, lines| TierGroup {
        name,
        colour,
        lines,
    };
    match format {
        Format::HiF8 => {
            let mut groups: Vec<TierGroup> = [
                hif8::Tier::Mantissa(3),
                hif8::Tier::Mantissa(2),
                hif8::Tier::Mantissa(1),
                hif8::Tier::Denormal,
                hif8::Tier::Underflow,
            ]
            .into_iter()
            .map(|t| {
                let lines = hif8::tier_boundaries()
                    .into_iter()
                    .filter(|(_, b)| *b == t)
                    .map(|(e, b)| (tier_line_label(b, e), f64::from(e)))
                    .collect();
                group(tier_name(t), tier_colour(t), lines)
            })
            .collect();
            groups.push(overflow);
            groups
        }
        _ => vec![
            group(
                "normal",
                GREEN,
                vec![("normal range from", f64::from(facts.min_normal).log2())],
            ),
            group("subnormal", PURPLE, Vec::new()),
            group(
                "underflow (to 0)",
                GREY,
                vec![(
                    "underflow below",
                    f64::from(facts.min_subnormal).log2() - 1.0,
                )],
            ),
            group(
                "rounds to max",
                OCHRE,
                vec![("max finite", f64::from(facts.max_finite).log2())],
            ),
            overflow,
        ],
    }
}

/// Every line of a format's tiers (label, log2 |x·scale|): what the Amax panel draws near
/// its data (in one colour of its own, named on the plot).
pub fn landmarks(format: Format) -> Vec<(&'static str, f64)> {
    tier_groups(format)
        .into_iter()
        .flat_map(|g| g.lines)
        .collect()
}

/// The tier a scaled magnitude `v` falls in, as its name and colour (those of
/// [`tier_groups`]).
pub fn tier_of(format: Format, v: f32) -> (&'static str, Color32) {
    let facts = format.facts();
    if v >= facts.overflow_threshold {
        return ("overflow", RED);
    }
    if v <= facts.underflow_max {
        return ("underflow (to 0)", GREY);
    }
    match format {
        Format::HiF8 => {
            let t = hif8::tier(v);
            (tier_name(t), tier_colour(t))
        }
        _ if v < facts.min_normal => ("subnormal", PURPLE),
        _ if v > facts.max_finite => ("rounds to max", OCHRE),
        _ => ("normal", GREEN),
    }
}
