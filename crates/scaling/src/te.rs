//! `hif8lab export te-recipe`: the Transformer Engine `DelayedScaling` recipe and the
//! Megatron-LM flags closest to a scaling config, with what has no equivalent spelled out.

use hif8lab_format::Format;

use crate::config::ColdStart;
use crate::plan::{ResolvedEstimator, ScalingPlan};

/// Renders the recipe as text (Python for TE, a flag line for Megatron, then notes).
pub fn te_recipe(plan: &ScalingPlan) -> String {
    let mut notes: Vec<String> = Vec::new();
    let (algo, history_len) = match plan.active() {
        ResolvedEstimator::MostRecent => ("most_recent", plan.window()),
        ResolvedEstimator::MaxWindow(n) => ("max", n),
        other => {
            notes.push(format!(
                "estimator {other} has no built-in TE equivalent: TE accepts a callable \
                 amax_compute_algo(amax_history) -> amax; 'max' is written here as the closest"
            ));
            ("max", plan.window())
        }
    };
    let rule = plan.rule();
    let (te_format, fp8_max) = match plan.format() {
        Format::E4M3 => ("Format.E4M3", 448.0f32),
        Format::E5M2 => ("Format.HYBRID", 57344.0),
        Format::HiF8 => {
            notes.push("HiF8 has no TE format: E4M3 is written as the nearest 8-bit format".into());
            ("Format.E4M3", 448.0)
        }
    };
    // TE scales amax onto the format's max: scale = fp8_max / amax / 2^margin. Our target
    // below the max corresponds to an extra margin of log2(fp8_max / target).
    let extra = (fp8_max / rule.target).log2();
    let margin = rule.margin + extra.round() as i32;
    if (extra - extra.round()).abs() > 1e-3 {
        notes.push(format!(
            "target {} is not a power-of-two fraction of the FP8 max {fp8_max}: TE's integer \
             margin can only approximate it (exact extra margin {extra:.3}, written {})",
            rule.target,
            extra.round() as i32
        ));
    } else if extra.abs() > 1e-3 {
        notes.push(format!(
            "target {} is expressed as margin +{} on top of {}",
            rule.target,
            extra.round() as i32,
            rule.margin
        ));
    }
    if plan.cold_start() == ColdStart::Jit {
        notes.push(
            "cold start 'jit' (first call scaled by its own amax) has no TE switch: TE starts \
             every scale at 1.0 (our cold_start = \"te\")"
                .into(),
        );
    }
    if plan.format() == Format::HiF8 {
        notes.push(
            "HiF8's tapered precision (3/2/1 mantissa bits by exponent) and its target 15 \
             (top of the 3-bit tier) have no FP8 counterpart"
                .into(),
        );
    }
    let mut out = String::new();
    out.push_str("# Transformer Engine (PyTorch)\n");
    out.push_str("from transformer_engine.common.recipe import DelayedScaling, Format\n");
    out.push_str(&format!(
        "recipe = DelayedScaling(fp8_format={te_format}, margin={margin}, \
         amax_history_len={history_len}, amax_compute_algo=\"{algo}\")\n\n"
    ));
    out.push_str("# Megatron-LM\n");
    let mformat = if te_format == "Format.HYBRID" {
        "hybrid"
    } else {
        "e4m3"
    };
    out.push_str(&format!(
        "--fp8-format {mformat} --fp8-margin {margin} --fp8-amax-history-len {history_len} \
         --fp8-amax-compute-algo {algo}\n"
    ));
    out.push_str(
        "# note: Megatron's CLI default is --fp8-amax-history-len 1 with most_recent; pass both.\n",
    );
    if !notes.is_empty() {
        out.push_str("\n# No exact equivalent:\n");
        for n in notes {
            out.push_str(&format!("#  - {n}\n"));
        }
    }
    out
}
