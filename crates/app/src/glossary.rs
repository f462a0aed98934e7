//! The terms the app uses, each with a short explanation: shown in the first-run panel and
//! behind every label, header and reading that uses one ([`explained`] adds them as the
//! hover text of the widget that shows the text).

use eframe::egui;

/// (term, explanation), in the order a newcomer meets them.
pub const TERMS: [(&str, &str); 20] = [
    (
        "HiF8",
        "An 8-bit floating-point format: values near 1 keep 3 mantissa bits, larger and smaller ones fewer (its \"tiers\"); anything at or above 2^15 × 1.25 (40960) overflows.",
    ),
    (
        "QAT",
        "Quantization-aware training: every matmul's inputs are rounded to 8 bits (and back) while training, so the model learns with the rounding it will run with.",
    ),
    (
        "amax",
        "The largest absolute value in a tensor at one call. Scaling maps it into the format's range.",
    ),
    (
        "delayed scaling",
        "The scale of a call is chosen before the tensor is seen, from the amax of earlier calls — so a sudden larger amax saturates.",
    ),
    (
        "estimator",
        "The rule that turns past amax values into the next call's expected amax: most_recent (the last one), max_window(N) (the largest of the last N), EMA and others.",
    ),
    (
        "most_recent",
        "Estimator: the next amax is expected to equal the last call's. Cheap and tight, but any rise above the last value saturates.",
    ),
    (
        "max_window",
        "Estimator max_window(N): the largest amax of the last N calls. One spike keeps the scale safe for N calls; the paper's choice (N = 64).",
    ),
    (
        "mean_window",
        "Estimator mean_window(N): the mean amax of the last N calls. Smoother than most_recent, but a tensor above its average still saturates.",
    ),
    (
        "ema",
        "Estimator ema(alpha): an exponential moving average of past amax values (alpha = weight of the newest). Smooth, and exceeded about as often as mean_window.",
    ),
    (
        "holt",
        "Estimator holt(alpha, beta, damping): a moving average with a damped trend, which follows a steady rise of amax.",
    ),
    (
        "current",
        "As an estimator: the tensor's own amax, measured before it is quantized (just-in-time scaling). Never exceeded, but it needs the tensor first: a reference, not delayed scaling.",
    ),
    (
        "window",
        "How many past calls max_window(N) looks back over (N, e.g. 64): one spike keeps the scale safe for N calls.",
    ),
    (
        "target",
        "Where the estimate lands in the format: scale = target / estimate. 15 for HiF8 keeps 3-bit precision at the estimate with room above it.",
    ),
    (
        "saturation",
        "A call whose amax exceeds its estimate: the largest values land in HiF8's coarser tiers (or overflow), losing precision.",
    ),
    (
        "overflow",
        "Values whose scaled magnitude reaches the format's overflow threshold: they become the largest value or infinity.",
    ),
    (
        "headroom",
        "estimate / amax of a call: above 1 the call fitted under its estimate; below 1 it saturated.",
    ),
    (
        "SQNR",
        "Signal-to-quantization-noise ratio, 10·log10(Σx² / Σ(x − q(x))²) in dB: how much of the tensor survived the rounding (higher is better).",
    ),
    (
        "matched baseline",
        "The same run — same data order, same steps — without quantization, trained alongside: what QAT is compared with.",
    ),
    (
        "APE",
        "Average percentage error of the QAT run's loss against the matched baseline's, over the steps both reached. Small APE does not mean nothing broke.",
    ),
    (
        "knowledge probes",
        "Questions whose answers the pretraining text states (an entity's colour, kind, neighbour), scored by which answer the model finds likeliest: they show forgetting that the loss hides.",
    ),
];

/// The explanations of the glossary terms that `text` uses (empty when none), one per line.
pub fn explanations(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    TERMS
        .iter()
        .filter(|(t, _)| {
            let t = t.to_ascii_lowercase();
            // Whole words only: "target" in "targets", not "amax" in "amaxes" … close enough.
            lower.match_indices(&t).any(|(i, _)| {
                let before = lower[..i].chars().next_back();
                let after = lower[i + t.len()..].chars().next();
                !before.is_some_and(|c| c.is_ascii_alphanumeric())
                    && !after.is_some_and(|c| c.is_ascii_alphabetic() && c != 's')
            })
        })
        .map(|(t, e)| format!("{t}: {e}"))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Adds the explanations of the terms in `text` to `response` as its hover text.
pub fn explained(response: egui::Response, text: &str) -> egui::Response {
    let e = explanations(text);
    if e.is_empty() {
        response
    } else {
        response.on_hover_text(e)
    }
}

/// A wrapping label whose hover explains the terms it uses (a dotted underline marks it).
pub fn label(ui: &mut egui::Ui, text: impl Into<String>) -> egui::Response {
    let text = text.into();
    let e = explanations(&text);
    if e.is_empty() {
        return ui.add(egui::Label::new(text).wrap());
    }
    let r = ui.add(
        egui::Label::new(text.clone())
            .wrap()
            .sense(egui::Sense::hover()),
    );
    r.on_hover_text(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_whole_terms_only() {
        let e = explanations("APE vs the matched baseline; amax above its estimate");
        assert!(e.starts_with("amax:"), "{e}");
        assert!(e.contains("APE:") && e.contains("matched baseline:"));
        assert!(!e.contains("estimator:"), "'estimate' is not 'estimator'");
        assert!(explanations("a grape").is_empty(), "'ape' inside a word");
        assert!(explanations("the targets").contains("target:"));
        // Every estimator the panels name is explained, by the name they use.
        for name in [
            "most_recent",
            "max_window(64)",
            "mean_window(64)",
            "ema(0.1)",
            "current",
        ] {
            let e = explanations(name);
            assert!(
                e.contains("Estimator") || e.contains("estimator"),
                "{name}: {e}"
            );
        }
    }
}
