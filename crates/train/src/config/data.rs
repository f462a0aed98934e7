//! The `[data]` table: which text a run trains on (a generated corpus or the user's files),
//! its size and seeds, and the tokenizer.

use serde::{Deserialize, Serialize};

use super::one_u64;

/// The text a run trains on: one of the generated corpora, or a file (or folder) of the
/// user's. Written in configs as its name (`synthetic`, `kb`, `web`) or the path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Corpus {
    /// A small generated text.
    #[default]
    Synthetic,
    /// The knowledge base's pretraining corpus.
    Kb,
    /// The bursty continued-training corpus.
    Web,
    /// A UTF-8 text file, or a folder of them.
    File(std::path::PathBuf),
}

impl Corpus {
    /// The corpus a config value names.
    pub fn named(text: &str) -> Corpus {
        match text {
            "synthetic" => Corpus::Synthetic,
            "kb" => Corpus::Kb,
            "web" => Corpus::Web,
            path => Corpus::File(path.into()),
        }
    }

    /// Whether the text is generated (its size is `data.bytes`), not read.
    pub fn is_generated(&self) -> bool {
        !matches!(self, Corpus::File(_))
    }
}

impl std::fmt::Display for Corpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Corpus::Synthetic => f.write_str("synthetic"),
            Corpus::Kb => f.write_str("kb"),
            Corpus::Web => f.write_str("web"),
            Corpus::File(path) => write!(f, "{}", path.display()),
        }
    }
}

impl Serialize for Corpus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Corpus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() {
            return Err(serde::de::Error::custom(
                "data.corpus is empty (synthetic, kb, web or a path)",
            ));
        }
        Ok(Corpus::named(&text))
    }
}

/// Training data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// `synthetic` (a small generated text), `kb` (the knowledge-base pretraining corpus),
    /// `web` (the bursty continued-training corpus), or a path to a UTF-8 text file or folder.
    #[serde(default)]
    pub corpus: Corpus,
    /// Entities of the knowledge base (`kb` corpus and the probes).
    #[serde(default = "default_entities")]
    pub entities: usize,
    /// Seed of the knowledge base (fixed across a grid so probes match the pretraining).
    #[serde(default = "one_u64")]
    pub kb_seed: u64,
    /// Bytes of generated text.
    #[serde(default = "default_corpus_bytes")]
    pub bytes: usize,
    /// Seed of a generated corpus (`synthetic`, `kb`, `web`); unset: `train.seed`, so that
    /// the seed changes the text too. The grid fixes it, so that its seeds vary the data
    /// order alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus_seed: Option<u64>,
    /// `bytes` (UTF-8 bytes, vocabulary 256) or the path of a Hugging Face `tokenizer.json`.
    #[serde(
        default = "default_tokenizer",
        skip_serializing_if = "is_byte_tokenizer"
    )]
    pub tokenizer: String,
}

/// The `data.tokenizer` value of the byte tokenizer (UTF-8 bytes, vocabulary 256).
pub const BYTE_TOKENIZER: &str = "bytes";

fn default_tokenizer() -> String {
    BYTE_TOKENIZER.into()
}

fn is_byte_tokenizer(s: &str) -> bool {
    s == BYTE_TOKENIZER
}

fn default_entities() -> usize {
    48
}
fn default_corpus_bytes() -> usize {
    400_000
}

impl Default for DataConfig {
    fn default() -> Self {
        DataConfig {
            corpus: Corpus::Synthetic,
            entities: default_entities(),
            kb_seed: 1,
            bytes: default_corpus_bytes(),
            corpus_seed: None,
            tokenizer: default_tokenizer(),
        }
    }
}
