//! What a probe evaluation measured: the scores, their intervals and the per-item marks a
//! paired test needs, as runs record them (`summary.json`, a grid's data file). Plain data:
//! scoring lives in [`crate::eval::probes`], the probes' running in [`crate::trainer`] (and
//! `crate::infer` for a model without optimizer state).

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
    /// 95 % intervals of the scores above (cluster bootstrap, [`crate::eval::resample`]).
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
/// ([`crate::eval::resample::pack_marks`]) and each held-out window's mean loss.
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
    /// Cluster of each knowledge item ([`crate::eval::McItem::group`]; empty in records
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

/// A probe score: what a probe evaluation measures, by its field name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeScore {
    /// Knowledge items answered right (argmax of summed log-probability).
    KnowledgeAcc,
    /// Knowledge items answered right, length-normalised.
    KnowledgeAccNorm,
    /// Completion items answered right.
    CompletionAcc,
    /// Completion items answered right, length-normalised.
    CompletionAccNorm,
    /// Loss on the held-out text (per window).
    HeldoutLoss,
    /// Log-likelihood margin of the right knowledge answer over the best wrong one.
    KnowledgeMargin,
    /// The same margin on completion items.
    CompletionMargin,
}

impl ProbeScore {
    /// Every score, in report order.
    pub const ALL: [ProbeScore; 7] = [
        ProbeScore::KnowledgeAcc,
        ProbeScore::KnowledgeAccNorm,
        ProbeScore::CompletionAcc,
        ProbeScore::CompletionAccNorm,
        ProbeScore::HeldoutLoss,
        ProbeScore::KnowledgeMargin,
        ProbeScore::CompletionMargin,
    ];

    /// Its field name (`knowledge_acc_norm`, …), as records and reports write it.
    pub fn name(self) -> &'static str {
        match self {
            ProbeScore::KnowledgeAcc => "knowledge_acc",
            ProbeScore::KnowledgeAccNorm => "knowledge_acc_norm",
            ProbeScore::CompletionAcc => "completion_acc",
            ProbeScore::CompletionAccNorm => "completion_acc_norm",
            ProbeScore::HeldoutLoss => "heldout_loss",
            ProbeScore::KnowledgeMargin => "knowledge_margin",
            ProbeScore::CompletionMargin => "completion_margin",
        }
    }

    /// The score of a field name, if it names one.
    pub fn of(name: &str) -> Option<ProbeScore> {
        ProbeScore::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl std::fmt::Display for ProbeScore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The probe scores that carry an interval (recorded with every probe evaluation).
pub const PROBE_SCORES: [ProbeScore; 5] = [
    ProbeScore::KnowledgeAcc,
    ProbeScore::KnowledgeAccNorm,
    ProbeScore::CompletionAcc,
    ProbeScore::CompletionAccNorm,
    ProbeScore::HeldoutLoss,
];

impl ProbeScores {
    /// A score: the recorded value of the five of [`PROBE_SCORES`]; for the margins, the
    /// mean of the per-item margins (NaN where the record predates them; never another
    /// score's value).
    pub fn score(&self, score: ProbeScore) -> f64 {
        match score {
            ProbeScore::KnowledgeAcc => self.knowledge_acc,
            ProbeScore::KnowledgeAccNorm => self.knowledge_acc_norm,
            ProbeScore::CompletionAcc => self.completion_acc,
            ProbeScore::CompletionAccNorm => self.completion_acc_norm,
            ProbeScore::HeldoutLoss => self.heldout_loss,
            ProbeScore::KnowledgeMargin | ProbeScore::CompletionMargin => self
                .item_values(score)
                .filter(|v| !v.is_empty())
                .map_or(f64::NAN, |v| v.iter().sum::<f64>() / v.len() as f64),
        }
    }

    /// The 95 % interval of a score (NaNs where the record predates intervals, and for the
    /// margins, which are not recorded with one).
    pub fn interval(&self, score: ProbeScore) -> [f64; 2] {
        let Some(i) = &self.intervals else {
            return [f64::NAN; 2];
        };
        match score {
            ProbeScore::KnowledgeAcc => i.knowledge_acc,
            ProbeScore::KnowledgeAccNorm => i.knowledge_acc_norm,
            ProbeScore::CompletionAcc => i.completion_acc,
            ProbeScore::CompletionAccNorm => i.completion_acc_norm,
            ProbeScore::HeldoutLoss => i.heldout_loss,
            ProbeScore::KnowledgeMargin | ProbeScore::CompletionMargin => [f64::NAN; 2],
        }
    }

    /// Per-item values of a score (1/0 per item; per-window loss for `heldout_loss`; the
    /// log-likelihood margin for `knowledge_margin` and `completion_margin`), or `None` where
    /// the record predates them.
    pub fn item_values(&self, score: ProbeScore) -> Option<Vec<f64>> {
        let m = self.marks.as_ref()?;
        let bits = |text: &str, n: usize| {
            crate::eval::resample::unpack_marks(text, n)
                .map(|v| v.into_iter().map(|b| f64::from(u8::from(b))).collect())
        };
        let margins =
            |v: &[f32]| (!v.is_empty()).then(|| v.iter().map(|x| f64::from(*x)).collect());
        match score {
            ProbeScore::KnowledgeAcc => bits(&m.knowledge_acc, self.knowledge_items),
            ProbeScore::KnowledgeAccNorm => bits(&m.knowledge_acc_norm, self.knowledge_items),
            ProbeScore::CompletionAcc => bits(&m.completion_acc, self.completion_items),
            ProbeScore::CompletionAccNorm => bits(&m.completion_acc_norm, self.completion_items),
            ProbeScore::KnowledgeMargin => margins(&m.knowledge_margin),
            ProbeScore::CompletionMargin => margins(&m.completion_margin),
            ProbeScore::HeldoutLoss => Some(m.heldout.clone()),
        }
    }

    /// The resampling clusters of a score's items (as many as [`Self::item_values`] gives):
    /// knowledge items by entity, completion items by family, held-out windows in blocks of
    /// [`crate::eval::resample::HELDOUT_BLOCK`] consecutive windows (pieces of one text).
    pub fn groups(&self, score: ProbeScore) -> crate::eval::resample::Groups {
        use crate::eval::resample::Groups;
        let n = self.item_values(score).map_or(0, |v| v.len());
        let stored = |ids: Option<&Vec<u32>>| {
            ids.filter(|g| g.len() == n && n > 0)
                .map(|g| Groups::from_ids(g))
        };
        let marks = self.marks.as_ref();
        match score {
            ProbeScore::KnowledgeAcc
            | ProbeScore::KnowledgeAccNorm
            | ProbeScore::KnowledgeMargin => stored(marks.map(|m| &m.knowledge_group))
                .unwrap_or_else(|| Groups::consecutive(n, crate::kb::KNOWLEDGE_PER_ENTITY)),
            ProbeScore::CompletionAcc
            | ProbeScore::CompletionAccNorm
            | ProbeScore::CompletionMargin => {
                stored(marks.map(|m| &m.completion_group)).unwrap_or_else(|| Groups::singletons(n))
            }
            ProbeScore::HeldoutLoss => Groups::consecutive(n, crate::eval::resample::HELDOUT_BLOCK),
        }
    }
}
