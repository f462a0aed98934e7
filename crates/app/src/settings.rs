//! The side panel's run settings: every knob of a run as text (what the user types), turned
//! into a [`RunConfig`] through the same `key=value` overrides as `hif8lab train --set`, so the
//! app and the CLI validate identically. Each field is checked on its own (its message shows
//! under it), then all together (messages about combinations show below the form).

use std::collections::BTreeMap;

use hif8lab_train::RunConfig;

/// How a field is edited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Free text (numbers, estimator specs).
    Text,
    /// One of these values.
    Choice(&'static [&'static str]),
    /// Any subset of these values (a TOML list of strings).
    Set(&'static [&'static str]),
    /// `auto` or a comma-separated list of integers (a TOML list, or the key left out).
    Blocks,
}

/// One editable setting: a dotted config key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The config key (`train.lr`).
    pub key: &'static str,
    /// Label in the form.
    pub label: &'static str,
    /// Group heading it is shown under.
    pub group: &'static str,
    /// How it is edited.
    pub kind: Kind,
    /// Hover text.
    pub help: &'static str,
}

const fn f(
    group: &'static str,
    key: &'static str,
    label: &'static str,
    kind: Kind,
    help: &'static str,
) -> Field {
    Field {
        key,
        label,
        group,
        kind,
        help,
    }
}

/// Every field of the form, in order.
pub const FIELDS: [Field; 20] = [
    f(
        "Model",
        "model.d_model",
        "d_model",
        Kind::Text,
        "hidden size",
    ),
    f(
        "Model",
        "model.layers",
        "layers",
        Kind::Text,
        "transformer blocks",
    ),
    f(
        "Model",
        "model.heads",
        "heads",
        Kind::Text,
        "attention heads (divide d_model)",
    ),
    f(
        "Model",
        "model.kv_heads",
        "kv heads",
        Kind::Text,
        "key/value heads (divide heads)",
    ),
    f(
        "Model",
        "model.d_ff",
        "d_ff",
        Kind::Text,
        "SwiGLU hidden size",
    ),
    f(
        "Model",
        "model.context",
        "context",
        Kind::Text,
        "tokens per sequence",
    ),
    f(
        "Training",
        "train.steps",
        "steps",
        Kind::Text,
        "optimizer steps",
    ),
    f(
        "Training",
        "train.batch",
        "batch",
        Kind::Text,
        "sequences per micro-batch",
    ),
    f(
        "Training",
        "train.lr",
        "lr",
        Kind::Text,
        "peak learning rate",
    ),
    f(
        "Training",
        "train.warmup_frac",
        "LR warmup",
        Kind::Text,
        "fraction of the steps with linear LR warmup, then cosine decay to 0",
    ),
    f(
        "Training",
        "train.seed",
        "seed",
        Kind::Text,
        "initialisation and data order",
    ),
    f(
        "Quantization",
        "qat.scaling.format",
        "format",
        Kind::Choice(&["hif8", "e4m3", "e5m2"]),
        "8-bit format of the fake quantization",
    ),
    f(
        "Quantization",
        "qat.scaling.target",
        "target",
        Kind::Text,
        "the scale maps the estimate to this (15: top of HiF8's 3-bit tier; 448 for E4M3)",
    ),
    f(
        "Quantization",
        "qat.scaling.overflow",
        "overflow",
        Kind::Choice(&["inf", "saturate"]),
        "what values beyond the format's range become",
    ),
    f(
        "Quantization",
        "qat.scaling.estimator",
        "estimator",
        Kind::Text,
        "most_recent, max_window, mean_window, ema(0.1), holt(0.5,0.1,0.9), current; the others run as shadows",
    ),
    f(
        "Quantization",
        "qat.scaling.window",
        "window",
        Kind::Text,
        "amax history length",
    ),
    f(
        "Quantization",
        "qat.warmup_steps",
        "QAT warmup",
        Kind::Text,
        "steps in high precision before quantization switches on",
    ),
    f(
        "Quantization",
        "qat.roles",
        "roles",
        Kind::Set(&["W", "A", "G"]),
        "weights, activations, gradients",
    ),
    f(
        "Quantization",
        "qat.modules",
        "modules",
        Kind::Set(&["q", "k", "v", "o", "gate", "up", "down"]),
        "linear layers quantized",
    ),
    f(
        "Quantization",
        "qat.blocks",
        "blocks",
        Kind::Blocks,
        "auto (skip the first ceil(3L/26) and last ceil(2L/26) blocks) or a list like 1,2",
    ),
];

/// The editable settings of the side panel.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Preset the form started from (its other keys are kept as they are).
    pub preset: String,
    /// Text of each field, by key.
    pub values: BTreeMap<&'static str, String>,
    /// Train on the GPU (eframe's device) instead of the CPU.
    pub gpu: bool,
    /// Also train the matched high-precision baseline (same data order, quantizers off).
    pub baseline: bool,
}

pub use hif8lab_train::config::{
    diff_flat as diff, flatten_json as flatten, value_text as text_of,
};

/// The value at a dotted key of a JSON object.
pub fn lookup<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    key.split('.').try_fold(v, |v, k| v.get(k))
}

impl Settings {
    /// The form filled from a preset (an unknown preset leaves the fields empty; the
    /// preset's error then shows below the form).
    pub fn from_preset(preset: &str) -> Self {
        let config = RunConfig::preset_text(preset)
            .ok()
            .and_then(|t| RunConfig::parse(preset, t, &[]).ok())
            .and_then(|c| serde_json::to_value(c).ok())
            .unwrap_or_default();
        let values = FIELDS
            .iter()
            .map(|f| {
                (
                    f.key,
                    lookup(&config, f.key).map(text_of).unwrap_or_default(),
                )
            })
            .collect();
        Settings {
            preset: preset.to_owned(),
            values,
            gpu: false,
            baseline: true,
        }
    }

    /// The form of another preset, keeping this one's device and baseline choices.
    pub fn switched_to(&self, preset: &str) -> Self {
        Settings {
            gpu: self.gpu,
            baseline: self.baseline,
            ..Settings::from_preset(preset)
        }
    }

    /// A field's text.
    pub fn get(&self, key: &str) -> &str {
        self.values.get(key).map(String::as_str).unwrap_or("")
    }

    /// Sets a field's text; a key not in [`FIELDS`] is refused (naming the fields), never
    /// ignored.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), hif8lab_format::UnknownName> {
        match self.values.iter_mut().find(|(k, _)| **k == key) {
            Some(v) => {
                *v.1 = value.to_owned();
                Ok(())
            }
            None => Err(hif8lab_format::UnknownName {
                kind: "setting",
                given: key.to_owned(),
                expected: FIELDS.iter().map(|f| f.key).collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// The override of one field, or `None` when it leaves the preset's value (blocks `auto`).
    fn override_of(field: &Field, text: &str) -> Option<String> {
        let t = text.trim();
        let quoted = |s: &str| format!("\"{}\"", s.trim().replace(['"', '\\'], ""));
        let value = match field.kind {
            Kind::Text if field.key == "qat.scaling.estimator" => quoted(t),
            Kind::Text => t.to_owned(),
            Kind::Choice(_) => quoted(t),
            Kind::Set(_) => format!(
                "[{}]",
                t.split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(quoted)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Kind::Blocks if t.eq_ignore_ascii_case("auto") || t.is_empty() => return None,
            Kind::Blocks => format!("[{t}]"),
        };
        Some(format!("{}={value}", field.key))
    }

    fn overrides(&self) -> Vec<String> {
        FIELDS
            .iter()
            .filter_map(|f| Self::override_of(f, self.get(f.key)))
            .collect()
    }

    /// The problem with one field on its own (the preset plus that field), if any.
    pub fn field_error(&self, key: &str) -> Option<String> {
        let field = FIELDS.iter().find(|f| f.key == key)?;
        let text = RunConfig::preset_text(&self.preset).ok()?;
        if let Kind::Set(_) = field.kind
            && self.get(key).trim().is_empty()
        {
            return Some(format!("{}: choose at least one", field.label));
        }
        let o = Self::override_of(field, self.get(key))?;
        RunConfig::parse(&self.preset, text, &[o])
            .err()
            .map(|e| plain_words(field, &e.message))
    }

    /// A setting that is valid but defeats itself (every value overflowing), in the user's
    /// words; shown under the field as a warning.
    pub fn field_warning(&self, key: &str) -> Option<String> {
        if key != "qat.scaling.target" {
            return None;
        }
        let target: f32 = self.get(key).trim().parse().ok()?;
        let format: hif8lab_format::Format = self.get("qat.scaling.format").trim().parse().ok()?;
        let limit = format.facts().overflow_threshold;
        (target >= limit).then(|| {
            format!(
                "A target of {target} puts every tensor's amax at or above {format}'s overflow ({limit}): the largest values of every call will overflow. Targets below {limit} keep them finite (15 is HiF8's usual one)."
            )
        })
    }

    /// The run config these settings describe, or the first problem (naming the field).
    pub fn config(&self) -> Result<RunConfig, String> {
        let text = RunConfig::preset_text(&self.preset).map_err(|e| e.to_string())?;
        if let Some(key) = FIELDS
            .iter()
            .find(|f| matches!(f.kind, Kind::Set(_)) && self.get(f.key).trim().is_empty())
            .map(|f| f.key)
        {
            return Err(format!("{key}: choose at least one"));
        }
        RunConfig::parse(&self.preset, text, &self.overrides()).map_err(|e| e.message)
    }

    /// Toggles `item` in a set field.
    pub fn toggle(&mut self, key: &str, item: &str, on: bool) {
        let mut items: Vec<String> = self
            .get(key)
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty() && s != item)
            .collect();
        if on {
            items.push(item.to_owned());
        }
        // Keep the field's own order.
        if let Some(Kind::Set(all)) = FIELDS.iter().find(|f| f.key == key).map(|f| f.kind) {
            items.sort_by_key(|s| all.iter().position(|a| a == s).unwrap_or(usize::MAX));
        }
        // The toggles are drawn from FIELDS' set fields: an unknown key sets nothing.
        let _ = self.set(key, &items.join(","));
    }
}

/// A config error in the user's words: what kind of value the field takes, not the parser's
/// type names (`expected u64`).
pub fn plain_words(field: &Field, message: &str) -> String {
    let label = field.label;
    let msg = message
        .strip_prefix(&format!("key '{}': ", field.key))
        .unwrap_or(message);
    let quoted = |m: &str| m.split('"').nth(1).map(str::to_owned);
    let backticked = |m: &str| m.split('`').nth(1).map(str::to_owned);
    let whole = ["expected u64", "expected usize", "expected u32"]
        .iter()
        .any(|t| msg.ends_with(t));
    if whole {
        let got = quoted(msg).or_else(|| backticked(msg)).unwrap_or_default();
        return if msg.contains("invalid value: integer") {
            format!("{label}: a whole number of 0 or more, not {got}")
        } else {
            format!("{label}: a whole number (0, 1, 2, …), not \"{got}\"")
        };
    }
    if msg.ends_with("expected f32") || msg.ends_with("expected f64") {
        let got = quoted(msg).or_else(|| backticked(msg)).unwrap_or_default();
        return format!("{label}: a number (like 0.003 or 3e-3), not \"{got}\"");
    }
    if let Some(rest) = msg.strip_prefix("bad estimator '") {
        let got = rest.split('\'').next().unwrap_or_default();
        return format!(
            "{label}: \"{got}\" is not an estimator. Write one of: most_recent, max_window(64), mean_window(64), ema(0.1), holt(0.5,0.1,0.9), current (numbers in brackets: window length or smoothing factors)."
        );
    }
    // The validator names fields by config key (`train.lr must be in [0, 1]`): in the form,
    // by their labels.
    let mut text = msg.to_owned();
    let mut fields: Vec<&Field> = FIELDS.iter().collect();
    fields.sort_by_key(|f| std::cmp::Reverse(f.key.len()));
    for f in fields {
        text = text.replace(f.key, f.label);
    }
    match text.strip_prefix(label) {
        Some(rest) => format!("{label}{rest}"),
        None => format!("{label}: {text}"),
    }
}

/// The side panel's form: what a run will be, checked; on a narrow window its own page.
pub struct SettingsPanel {
    /// The settings.
    pub settings: Settings,
    /// The form's last check: the settings checked, each field's message, the whole one.
    pub check: Option<crate::FormCheck>,
    /// On a narrow window: the settings page is shown instead of a tab.
    pub page: bool,
    /// The Hugging Face model that Start continues training, when one is open.
    pub hf_model: Option<crate::hf_model::HfStart>,
    /// Run folder path typed in the Runs box.
    pub open_path: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn preset_round_trips_and_fields_validate_alone() {
        let mut s = Settings::from_preset("smoke");
        let c = s.config().unwrap();
        let preset =
            RunConfig::parse("smoke", RunConfig::preset_text("smoke").unwrap(), &[]).unwrap();
        assert_eq!(c, preset, "the form reproduces its preset");
        assert_eq!(s.get("qat.roles"), "A,W,G");
        assert_eq!(s.get("qat.blocks"), "auto");
        // A key the form does not have is refused, naming the ones it has.
        let e = s.set("qat.scaling.windw", "8").unwrap_err().to_string();
        assert!(
            e.contains("unknown setting 'qat.scaling.windw'") && e.contains("qat.scaling.window"),
            "{e}"
        );
        s.set("model.heads", "5").unwrap();
        let e = s.config().unwrap_err();
        assert!(e.contains("heads"), "{e}");
        assert!(s.field_error("model.heads").is_some());
        assert!(s.field_error("train.lr").is_none());
        s.set("model.heads", "4").unwrap();
        s.toggle("qat.roles", "W", false);
        s.toggle("qat.modules", "q", true);
        s.set("qat.blocks", "1,2").unwrap();
        s.set("qat.scaling.format", "e4m3").unwrap();
        let c = s.config().unwrap();
        assert_eq!(c.qat.roles.len(), 2);
        assert_eq!(c.qat.modules.len(), 4);
        assert_eq!(c.qat.blocks, Some(vec![1, 2]));
        assert_eq!(c.qat.scaling.format, hif8lab_format::Format::E4M3);
        s.set("qat.roles", "").unwrap();
        assert_eq!(s.config().unwrap_err(), "qat.roles: choose at least one");
        s.set("qat.roles", "A").unwrap();
        s.set("qat.blocks", "one").unwrap();
        assert!(s.field_error("qat.blocks").is_some());
    }

    #[test]
    fn errors_in_the_users_words() {
        let err = |k: &str, v: &str| {
            let mut s = Settings::from_preset("smoke");
            s.set(k, v).unwrap();
            s.field_error(k).unwrap()
        };
        assert_eq!(
            err("train.steps", "40abc"),
            "steps: a whole number (0, 1, 2, …), not \"40abc\""
        );
        assert_eq!(
            err("train.batch", "-3"),
            "batch: a whole number of 0 or more, not -3"
        );
        assert_eq!(
            err("qat.scaling.window", "1.5"),
            "window: a whole number (0, 1, 2, …), not \"1.5\""
        );
        assert_eq!(
            err("train.lr", "fast"),
            "lr: a number (like 0.003 or 3e-3), not \"fast\""
        );
        // Range errors name the field by its label, never by its config key.
        let e = err("train.lr", "2");
        assert!(e.starts_with("lr must be in [0, 1]"), "{e}");
        let e = err("train.batch", "0");
        assert!(e.starts_with("batch must be at least 1"), "{e}");
        let e = err("qat.scaling.estimator", "maxwindow");
        assert!(e.starts_with("estimator: \"maxwindow\" is not an estimator. Write one of: most_recent, max_window(64)"), "{e}");
        for e in [err("train.steps", "40abc"), err("train.lr", "fast"), e] {
            assert!(
                !e.contains("expected u") && !e.contains("expected f") && !e.contains("key '"),
                "{e}"
            );
        }
        // A target at or above the format's overflow is valid but warned about.
        let mut s = Settings::from_preset("smoke");
        assert!(s.field_warning("qat.scaling.target").is_none());
        s.set("qat.scaling.target", "100000").unwrap();
        assert!(s.field_error("qat.scaling.target").is_none());
        let w = s.field_warning("qat.scaling.target").unwrap();
        assert!(w.contains("40960") && w.contains("overflow"), "{w}");
        s.set("qat.scaling.format", "e4m3").unwrap();
        s.set("qat.scaling.target", "448").unwrap();
        assert!(
            s.field_warning("qat.scaling.target").is_none(),
            "448 is E4M3's max, below 464"
        );
    }

    #[test]
    fn diff_lists_only_changed_keys() {
        let a = flatten(&serde_json::json!({"train": {"lr": 0.003, "steps": 40}, "x": [1, 2]}));
        let b = flatten(&serde_json::json!({"train": {"lr": 0.0001, "steps": 40}}));
        assert_eq!(
            diff(&a, &b),
            vec![
                ("train.lr".into(), "0.003".into(), "0.0001".into()),
                ("x".into(), "1,2".into(), "(none)".into())
            ]
        );
    }
}
