//! What a probe evaluation measured: the scores, their intervals and the per-item marks a
//! paired test needs, as runs record them (`summary.json`, a grid's data file). Plain data:
//! scoring lives in [`crate::corpus`], the probes' running in [`crate::trainer`].

/// Probe results of one evaluation.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProbeScores {
    /// Step after which the probes ran.
    pub step: u64,
    /// Knowledge recall accuracy (summed log-likelihood).
    pub knowledge_acc: f64,
    /// Knowledge recall accuracy (per-byte log-likelihood).
    pub knowledge_acc_norm: f64,
    /// Completion accuracy (summed log-likelihood).
    pub completion_acc: f64,
    /// Completion accuracy (per-byte log-likelihood).
    pub completion_acc_norm: f64,
    /// Mean loss on held-out pretraining text.
    pub heldout_loss: f64,
    /// Knowledge items scored (absent in records written before items were kept).
    #[serde(default)]
    pub knowledge_items: usize,
    /// Completion items scored.
    #[serde(default)]
    pub completion_items: usize,
    /// 95 % intervals of the scores above (cluster bootstrap, [`crate::resample`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<ProbeIntervals>,
    /// Per-item outcomes, for paired tests between runs scored on the same items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marks: Option<ProbeMarks>,
}

/// 95 % intervals of each probe score (`[lo, hi]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProbeIntervals {
    /// Of `knowledge_acc`.
    pub knowledge_acc: [f64; 2],
    /// Of `knowledge_acc_norm`.
    pub knowledge_acc_norm: [f64; 2],
    /// Of `completion_acc`.
    pub completion_acc: [f64; 2],
    /// Of `completion_acc_norm`.
    pub completion_acc_norm: [f64; 2],
    /// Of `heldout_loss` (bootstrap over held-out windows).
    pub heldout_loss: [f64; 2],
}

/// Per-item outcomes of one evaluation: correctness packed as hexadecimal
/// ([`crate::resample::pack_marks`]) and each held-out window's mean loss.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProbeMarks {
    /// Knowledge items right by summed log-likelihood.
    pub knowledge_acc: String,
    /// Knowledge items right by per-byte log-likelihood.
    pub knowledge_acc_norm: String,
    /// Completion items right by summed log-likelihood.
    pub completion_acc: String,
    /// Completion items right by per-byte log-likelihood.
    pub completion_acc_norm: String,
    /// Mean loss of each held-out window.
    pub heldout: Vec<f64>,
    /// Cluster of each knowledge item ([`crate::corpus::McItem::group`]; empty in records
    /// written before clusters were kept: then consecutive entities).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knowledge_group: Vec<u32>,
    /// Cluster of each completion item (its family; empty in older records: each alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completion_group: Vec<u32>,
    /// Per knowledge item, the per-byte log-likelihood margin of the right choice over the
    /// best other (acc_norm's measure; a paired continuous score beside the 0/1 marks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knowledge_margin: Vec<f32>,
    /// The same per completion item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completion_margin: Vec<f32>,
}

/// The probe scores that carry an interval, by their field name.
pub const PROBE_SCORES: [&str; 5] = [
    "knowledge_acc",
    "knowledge_acc_norm",
    "completion_acc",
    "completion_acc_norm",
    "heldout_loss",
];

impl ProbeScores {
    /// A score by field name ([`PROBE_SCORES`]).
    pub fn score(&self, name: &str) -> f64 {
        match name {
            "knowledge_acc" => self.knowledge_acc,
            "knowledge_acc_norm" => self.knowledge_acc_norm,
            "completion_acc" => self.completion_acc,
            "completion_acc_norm" => self.completion_acc_norm,
            _ => self.heldout_loss,
        }
    }

    /// The 95 % interval of a score (NaNs where the record predates intervals).
    pub fn interval(&self, name: &str) -> [f64; 2] {
        let Some(i) = &self.intervals else {
            return [f64::NAN; 2];
        };
        match name {
            "knowledge_acc" => i.knowledge_acc,
            "knowledge_acc_norm" => i.knowledge_acc_norm,
            "completion_acc" => i.completion_acc,
            "completion_acc_norm" => i.completion_acc_norm,
            _ => i.heldout_loss,
        }
    }

    /// Per-item values of a score (1/0 per item; per-window loss for `heldout_loss`; the
    /// log-likelihood margin for `knowledge_margin` and `completion_margin`), or `None` where
    /// the record predates them.
    pub fn item_values(&self, name: &str) -> Option<Vec<f64>> {
        let m = self.marks.as_ref()?;
        let bits = |text: &str, n: usize| {
            crate::resample::unpack_marks(text, n)
                .map(|v| v.into_iter().map(|b| f64::from(u8::from(b))).collect())
        };
        let margins =
            |v: &[f32]| (!v.is_empty()).then(|| v.iter().map(|x| f64::from(*x)).collect());
        match name {
            "knowledge_acc" => bits(&m.knowledge_acc, self.knowledge_items),
            "knowledge_acc_norm" => bits(&m.knowledge_acc_norm, self.knowledge_items),
            "completion_acc" => bits(&m.completion_acc, self.completion_items),
            "completion_acc_norm" => bits(&m.completion_acc_norm, self.completion_items),
            "knowledge_margin" => margins(&m.knowledge_margin),
            "completion_margin" => margins(&m.completion_margin),
            _ => Some(m.heldout.clone()),
        }
    }

    /// The resampling clusters of a score's items (as many as [`Self::item_values`] gives):
    /// knowledge items by entity, completion items by family, held-out windows in blocks of
    /// [`crate::resample::HELDOUT_BLOCK`] consecutive windows (pieces of one text).
    pub fn groups(&self, name: &str) -> crate::resample::Groups {
        use crate::resample::Groups;
        let n = self.item_values(name).map_or(0, |v| v.len());
        let stored = |ids: Option<&Vec<u32>>| {
            ids.filter(|g| g.len() == n && n > 0)
                .map(|g| Groups::from_ids(g))
        };
        let marks = self.marks.as_ref();
        match name {
            "knowledge_acc" | "knowledge_acc_norm" | "knowledge_margin" => {
                stored(marks.map(|m| &m.knowledge_group))
                    .unwrap_or_else(|| Groups::consecutive(n, crate::kb::KNOWLEDGE_PER_ENTITY))
            }
            "completion_acc" | "completion_acc_norm" | "completion_margin" => {
                stored(marks.map(|m| &m.completion_group)).unwrap_or_else(|| Groups::singletons(n))
            }
            _ => Groups::consecutive(n, crate::resample::HELDOUT_BLOCK),
        }
    }
}
