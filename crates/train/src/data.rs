//! Training data: a byte-level tokenizer, a generated corpus (no downloads) or a user's text
//! file/folder, and a seeded sampler whose position is part of the run state (so a baseline
//! and its QAT twin, or a resumed run, see identical batches).

use std::path::Path;

use crate::rng::Rng;

/// Tokens of a text: its UTF-8 bytes (vocabulary 256).
pub fn tokenize(text: &str) -> Vec<u32> {
    text.bytes().map(u32::from).collect()
}

const NAMES: [&str; 24] = [
    "Zorbia", "Quelt", "Amarin", "Tovek", "Lumen", "Brask", "Ostrel", "Vyn", "Celd", "Marrow",
    "Ithen", "Pelagos", "Rusk", "Sorrel", "Tamsin", "Ulder", "Wenrick", "Yarrow", "Ebon", "Fennic",
    "Galt", "Hesper", "Jory", "Kestrel",
];
const KINDS: [&str; 6] = ["city", "river", "guild", "mountain", "festival", "library"];
const COLORS: [&str; 8] = [
    "red", "blue", "green", "amber", "silver", "black", "white", "violet",
];

/// A generated corpus of simple facts stated in several templates (a small stand-in until
/// the grid's knowledge-base generator): deterministic for a seed.
pub fn synthetic_corpus(seed: u64, bytes: usize) -> String {
    let mut rng = Rng::new(seed ^ 0x00C0_FFEE);
    // A fixed little world: each entity has a kind, a colour and a neighbour.
    let facts: Vec<(usize, usize, usize, usize)> = (0..NAMES.len())
        .map(|i| {
            (
                i,
                rng.below(KINDS.len()),
                rng.below(COLORS.len()),
                rng.below(NAMES.len()),
            )
        })
        .collect();
    let mut text = String::with_capacity(bytes + 128);
    while text.len() < bytes {
        let (e, kind, color, next) = facts[rng.below(facts.len())];
        let sentence = match rng.below(4) {
            0 => format!(
                "{} is a {} whose colour is {}. ",
                NAMES[e], KINDS[kind], COLORS[color]
            ),
            1 => format!("The {} of {} is {}. ", "colour", NAMES[e], COLORS[color]),
            2 => format!("Next to {} lies {}. ", NAMES[e], NAMES[next]),
            _ => format!(
                "Every {} like {} is {}. ",
                KINDS[kind], NAMES[e], COLORS[color]
            ),
        };
        text.push_str(&sentence);
    }
    text
}

/// Why a run's training data cannot be prepared: the file, the setting or the sizes that
/// refuse it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DataError {
    /// A corpus file or folder cannot be read, or is not UTF-8 text.
    #[error("{path}: {message}")]
    Corpus {
        /// The file or folder.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The tokenizer cannot be read or cannot encode the text.
    #[error(transparent)]
    Tokenizer(#[from] crate::models::tokenizer::TokenizerError),
    /// The tokenizer gives an id outside the model's vocabulary.
    #[error(
        "data.tokenizer '{tokenizer}' gives token id {token}, outside model.vocab {vocab} (a \
         tokenizer of another model?)"
    )]
    OutsideVocab {
        /// The `data.tokenizer` setting.
        tokenizer: String,
        /// The largest id given.
        token: u32,
        /// `model.vocab`.
        vocab: usize,
    },
    /// The text is shorter than one training window.
    #[error(
        "{source_name} gives {tokens} tokens; a run needs at least model.context + 2 = {needed} \
         (a longer text, a larger data.bytes, or a smaller model.context)"
    )]
    TooShort {
        /// The setting that gives the text (`data.corpus '…'` and its size).
        source_name: String,
        /// Its tokens.
        tokens: usize,
        /// `model.context + 2`.
        needed: usize,
    },
    /// A sampler's stream is shorter than a window of the asked context.
    #[error("corpus has {tokens} tokens, needs at least context + 2 = {needed}")]
    FewTokens {
        /// The stream's tokens.
        tokens: usize,
        /// `context + 2`.
        needed: usize,
    },
}

fn corpus_error(path: &Path, message: impl std::fmt::Display) -> DataError {
    DataError::Corpus {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// The text of a corpus file's bytes (UTF-8; the error names the file and the first bad
/// byte's offset).
pub fn corpus_text(path: &Path, bytes: Vec<u8>) -> Result<String, DataError> {
    String::from_utf8(bytes).map_err(|e| {
        corpus_error(
            path,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// Reads a UTF-8 text file, or every `.txt`/`.md` file of a folder (sorted by name).
pub fn read_corpus(path: &Path) -> Result<String, DataError> {
    let read = |p: &Path| {
        std::fs::read(p)
            .map_err(|e| corpus_error(p, e))
            .and_then(|b| corpus_text(p, b))
    };
    if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| corpus_error(path, e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("txt" | "md")))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(corpus_error(path, "no .txt or .md files"));
        }
        let mut text = String::new();
        for f in files {
            text.push_str(&read(&f)?);
            text.push('\n');
        }
        Ok(text)
    } else {
        read(path)
    }
}

/// The training text a run's `data` section names: `synthetic`, `kb` (the knowledge base's
/// pretraining corpus), `web` (the bursty continued-training corpus) or a file path.
pub fn training_text(d: &crate::config::DataConfig, seed: u64) -> Result<String, DataError> {
    use crate::config::Corpus;
    Ok(match &d.corpus {
        Corpus::Synthetic => synthetic_corpus(seed, d.bytes),
        Corpus::Kb => crate::corpus::pretrain_corpus(
            &crate::corpus::KnowledgeBase::generate(d.entities, d.kb_seed),
            seed,
            d.bytes,
        ),
        Corpus::Web => crate::corpus::web_corpus(seed, d.bytes),
        Corpus::File(path) => read_corpus(path)?,
    })
}

/// A run's training text: [`training_text`] at its corpus seed (`data.corpus_seed`, else
/// `train.seed`). The lab's trainer and the torch engine's text file are this one text.
pub fn run_text(config: &crate::RunConfig) -> Result<String, DataError> {
    training_text(
        &config.data,
        config.data.corpus_seed.unwrap_or(config.train.seed),
    )
}

/// Sequences of `context + 1` tokens drawn from a token stream at seeded offsets.
#[derive(Clone, Debug)]
pub struct Sampler {
    tokens: Vec<u32>,
    seed: u64,
    /// Sequences drawn so far (saved in checkpoints).
    pub position: u64,
}

impl Sampler {
    /// A sampler over `tokens`.
    pub fn new(tokens: Vec<u32>, seed: u64) -> Self {
        Sampler {
            tokens,
            seed,
            position: 0,
        }
    }

    /// The next `batch` sequences: (inputs, targets), each `batch·context` tokens as f32.
    pub fn next_batch(
        &mut self,
        batch: usize,
        context: usize,
    ) -> Result<(Vec<f32>, Vec<f32>), DataError> {
        if self.tokens.len() < context + 2 {
            return Err(DataError::FewTokens {
                tokens: self.tokens.len(),
                needed: context + 2,
            });
        }
        let span = self.tokens.len() - context - 1;
        let mut inputs = Vec::with_capacity(batch * context);
        let mut targets = Vec::with_capacity(batch * context);
        for _ in 0..batch {
            let start = (hif8lab_format::hash_u32(
                self.seed as u32 ^ (self.seed >> 32) as u32,
                self.position as u32,
            ) as usize)
                % span;
            self.position += 1;
            let seq = &self.tokens[start..start + context + 1];
            inputs.extend(seq[..context].iter().map(|t| *t as f32));
            targets.extend(seq[1..].iter().map(|t| *t as f32));
        }
        Ok((inputs, targets))
    }
}

/// A run's training data: its tokenizer and the seeded sampler over the tokenized text.
pub struct RunData {
    /// The tokenizer of `data.tokenizer`.
    pub tokenizer: crate::models::tokenizer::Tokenizer,
    /// Windows of the tokenized training text, in the run's seeded order.
    pub sampler: Sampler,
}

impl RunData {
    /// The data `config` names: its corpus (generated, or a file) in its tokenizer, checked
    /// against the model's vocabulary and context.
    pub fn for_config(config: &crate::RunConfig) -> Result<Self, DataError> {
        let text = run_text(config)?;
        let tokenizer = crate::models::tokenizer::Tokenizer::for_setting(&config.data.tokenizer)?;
        let ids = tokenizer.encode(&text)?;
        if let Some(max) = ids
            .iter()
            .max()
            .filter(|t| **t as usize >= config.model.vocab)
        {
            return Err(DataError::OutsideVocab {
                tokenizer: config.data.tokenizer.clone(),
                token: *max,
                vocab: config.model.vocab,
            });
        }
        if ids.len() < config.model.context + 2 {
            let corpus = &config.data.corpus;
            let source = if matches!(corpus, crate::config::Corpus::File(p) if p.is_file()) {
                format!("data.corpus '{corpus}' (the file)")
            } else {
                format!(
                    "data.corpus '{corpus}' with data.bytes = {}",
                    config.data.bytes
                )
            };
            return Err(DataError::TooShort {
                source_name: source,
                tokens: ids.len(),
                needed: config.model.context + 2,
            });
        }
        let sampler = Sampler::new(ids, config.train.seed);
        Ok(RunData { tokenizer, sampler })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_and_sampler_are_deterministic() {
        let a = synthetic_corpus(3, 5000);
        assert_eq!(a, synthetic_corpus(3, 5000));
        assert_ne!(a, synthetic_corpus(4, 5000));
        let mut s1 = Sampler::new(tokenize(&a), 9);
        let mut s2 = Sampler::new(tokenize(&a), 9);
        let (x1, y1) = s1.next_batch(2, 16).unwrap();
        assert_eq!((x1.clone(), y1.clone()), s2.next_batch(2, 16).unwrap());
        assert_eq!(&x1[1..16], &y1[..15], "targets are inputs shifted by one");
        assert_eq!(s1.position, 2);
        assert!(Sampler::new(vec![1, 2], 0).next_batch(1, 16).is_err());
    }
}
